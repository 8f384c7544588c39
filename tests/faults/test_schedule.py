"""tests/faults/nemesis.py: schedules are a pure function of the seed (fast lane, no process)."""
from __future__ import annotations

import random
import types
from collections import Counter

import pytest

from .conftest import summary_lines
from .nemesis import (BUDGET_S, CI_SEEDS, KILL_DELAY_S, KINDS, LINKS, MODES, Timeouts, coverage, generate,
                      pause_range, random_seeds, required_coverage)

SEEDS = range(1, 301)


def test_a_seed_always_gives_the_same_schedule_and_seeds_differ():
    assert generate(42) == generate(42)
    assert len({generate(s).steps for s in range(1, 40)}) == 39


@pytest.mark.parametrize("seed", SEEDS[:50])
def test_a_schedule_fits_its_budget_and_every_fault_is_well_formed(seed):
    schedule = generate(seed)
    assert schedule.steps
    assert schedule.planned_s <= BUDGET_S or len(schedule.steps) == 1
    for step in schedule.steps:
        f = step.fault
        assert 1.0 <= step.quiet_s <= 3.0
        assert f.kind in KINDS and f.duration_s > 0
        assert (f.role == "zookeeper") == (f.kind == "zookeeper")
        if f.kind == "partition":
            assert f.variant in MODES and f.links and set(f.links) <= set(LINKS)
            assert list(f.links) == sorted(f.links, key=LINKS.index)
        else:
            assert not f.links
        if f.kind == "term-kill":
            assert KILL_DELAY_S[0] <= f.kill_delay_s <= KILL_DELAY_S[1]


def test_pauses_fall_on_the_promised_side_of_the_lag_and_session_timeouts():
    t = Timeouts(session_ms=4000, lag_ms=3000)
    by_band: dict[str, list[float]] = {"short": [], "mid": [], "long": []}
    for seed in SEEDS:
        for step in generate(seed, timeouts=t).steps:
            if step.fault.kind == "pause":
                by_band[step.fault.variant].append(step.fault.duration_s)
    assert all(by_band.values()), by_band
    assert max(by_band["short"]) < 3.0 <= min(by_band["mid"])
    assert max(by_band["mid"]) < 4.0 < min(by_band["long"])
    assert pause_range("long", Timeouts(session_ms=10000, lag_ms=2000))[0] > 10


def test_the_ci_seeds_cover_every_fault_kind_variant_link_and_role():
    covered = coverage(generate(s) for s in CI_SEEDS)
    assert required_coverage() <= covered, sorted(required_coverage() - covered)


def test_every_kind_and_role_is_drawn_over_many_seeds():
    kinds = Counter(step.fault.kind for s in SEEDS for step in generate(s).steps)
    assert set(kinds) == set(KINDS)
    assert min(kinds.values()) > 0.5 * max(kinds.values()), kinds


def test_random_seeds_are_distinct_and_reproducible_from_an_rng():
    seeds = random_seeds(200, random.Random(1))
    assert len(set(seeds)) == 200 and all(s > 0 for s in seeds)
    assert seeds == random_seeds(200, random.Random(1))


def test_describe_names_each_fault_and_its_target_role():
    text = generate(CI_SEEDS[0]).describe()
    assert text.startswith(f"seed {CI_SEEDS[0]}:")
    for step in generate(CI_SEEDS[0]).steps:
        assert step.fault.label in text and step.fault.role in text


def test_the_session_summary_counts_faults_records_and_failing_seeds():
    ok = types.SimpleNamespace(seed=1, injected=["kill", "pause-long"], skipped=[], violations=[], wall_s=30.0,
                               counts=Counter(acknowledged=100, read=101, max_recovery_ms=2500, **{"duplicated-plain": 1}))
    bad = types.SimpleNamespace(seed=2, injected=["kill"], skipped=["disk-full: mount failed"], wall_s=31.0,
                                violations=["lost: a", "lost: b", "isr-shrink: c"],
                                counts=Counter(acknowledged=50, read=48, lost=2, max_recovery_ms=900))
    text = "\n".join(summary_lines("ci", [ok, bad]))
    assert "2 schedule(s), 61 s" in text and "kill 2, pause-long 1" in text
    assert "acknowledged 150, read back 149, lost 2" in text and "1 (plain producer" in text
    assert "max time to recover (heal to every ISR full): 2.5 s" in text
    assert "skipped faults: 1 (disk-full: mount failed)" in text
    assert "seed 2: {'lost': 2, 'isr-shrink': 1}" in text and "--fault-seed 2" in text
