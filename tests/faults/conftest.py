"""Which schedules run, and the session's summary of what the nemesis did and found.

Modes (options registered in tests/conftest.py):

* CI, the default: the fixed seeds ``nemesis.CI_SEEDS``;
* ``--long``, ``--fault-schedules N`` or ``KWIRE_FAULTS_LONG=N``: that many
  (``--fault-schedules``, else N, else 200) schedules of random seeds, printed
  when collected;
* ``--fault-seed S`` (repeatable): exactly those schedules, to replay a failure.

Every schedule's ``Report`` is kept in ``config.stash``; ``pytest_terminal_summary``
prints schedules, faults by kind, records acknowledged/lost/duplicated (an idempotent
duplicate explained by its batches, across producer epochs or producer ids, apart), the
slowest recovery, each failing seed with the command that replays it and each seed with an
explained duplicate with its artifacts.
"""
from __future__ import annotations

import os
from collections import Counter

import pytest

from .nemesis import CI_SEEDS, random_seeds

DEFAULT_LONG_SCHEDULES = 200
_PLAN = pytest.StashKey[tuple]()
_REPORTS = pytest.StashKey[list]()


def fault_plan(config) -> tuple[str, list[int]]:
    """``(mode, seeds)``, drawn once per session."""
    if _PLAN not in config.stash:
        replay = config.getoption("--fault-seed")
        env = os.environ.get("KWIRE_FAULTS_LONG", "").strip()
        if replay:
            config.stash[_PLAN] = ("replay", list(replay))
        elif config.getoption("--long") or env or config.getoption("--fault-schedules"):
            count = config.getoption("--fault-schedules") or (int(env) if env.isdigit() and int(env) > 0
                                                               else DEFAULT_LONG_SCHEDULES)
            config.stash[_PLAN] = ("long", random_seeds(count))
        else:
            config.stash[_PLAN] = ("ci", list(CI_SEEDS))
    return config.stash[_PLAN]


def pytest_generate_tests(metafunc):
    if "fault_seed" in metafunc.fixturenames:
        _, seeds = fault_plan(metafunc.config)
        metafunc.parametrize("fault_seed", seeds, ids=[f"seed{s}" for s in seeds])


def pytest_collection_finish(session):
    if not any("fault_seed" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    mode, seeds = fault_plan(session.config)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"kwire nemesis: {mode} mode, {len(seeds)} schedule(s), seeds {' '.join(map(str, seeds))}")


@pytest.fixture
def fault_reports(request) -> list:
    """The session's list of ``runner.Report``s, for the summary."""
    return request.config.stash.setdefault(_REPORTS, [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    reports = config.stash.get(_REPORTS, [])
    if not reports:
        return
    write = terminalreporter.write_line
    terminalreporter.section("kwire nemesis summary")
    for line in summary_lines(fault_plan(config)[0], reports):
        write(line)


def summary_lines(mode: str, reports: list) -> list[str]:
    """The summary as text lines (pure, over ``runner.Report``-shaped objects)."""
    counts: Counter = Counter()
    kinds: Counter = Counter()
    for r in reports:
        counts.update({k: v for k, v in r.counts.items() if k != "max_recovery_ms"})
        kinds.update(r.injected)
    worst = max((r.counts.get("max_recovery_ms", 0) for r in reports), default=0)
    failed = [r for r in reports if r.violations]
    lines = [f"mode {mode}: {len(reports)} schedule(s), {sum(r.wall_s for r in reports):.0f} s in all, "
             f"seeds {' '.join(str(r.seed) for r in reports)}",
             "faults injected: " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"),
             f"records: acknowledged {counts['acknowledged']}, read back {counts['read']}, lost {counts['lost']}, "
             f"misplaced {counts['misplaced']}, duplicated {counts['duplicated']} (idempotent/transactional), "
             f"{counts['duplicated-plain']} (plain producer, at-least-once: allowed)",
             f"idempotent duplicates the client re-sent (allowed, see batch-headers.txt): "
             f"{counts['duplicated_across_epochs']} across producer epochs, "
             f"{counts['duplicated_new_producer']} under a new producer id",
             f"transactions: committed {counts['txn-committed']}, aborted {counts['txn-aborted']}, "
             f"outcome unknown {counts['txn-unknown']}",
             f"max time to recover (heal to every ISR full): {worst / 1000:.1f} s"]
    skipped = [s for r in reports for s in r.skipped]
    if skipped:
        lines.append(f"skipped faults: {len(skipped)} ({skipped[0]})")
    lines.append(f"schedules with violations: {len(failed)}")
    for r in failed:
        kinds_seen = Counter(v.split(":", 1)[0] for v in r.violations if "further" not in v)
        lines.append(f"  seed {r.seed}: {dict(kinds_seen)} after {r.injected}; replay with --fault-seed {r.seed}")
    explained = [r for r in reports if getattr(r, "explained", None)]
    for r in explained:
        kinds_seen = Counter(e.split(":", 1)[0] for e in r.explained)
        lines.append(f"  seed {r.seed}: explained {dict(kinds_seen)}, not violations; "
                     f"artifacts {getattr(r, 'artifacts', None)}")
    return lines
