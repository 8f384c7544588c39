"""A Jepsen-style run: a seeded nemesis against three brokers and ZooKeeper under acks=all load.

One test per schedule (tests/faults/conftest.py picks the seeds: the CI set,
``--long`` or ``--fault-seed S``).  Each runs on a fresh cluster, heals
everything, and fails with every invariant violation, its seed and the
command that replays it.  About 30-40 s per schedule on two cores.
"""
from __future__ import annotations

import pytest

from kwire.testing.zookeeper import zookeeper_available

from .nemesis import generate
from .runner import run_schedule


@pytest.mark.timeout(420)
def test_a_seeded_schedule_of_faults_breaks_no_invariant(fault_seed, fault_reports):
    available, why = zookeeper_available()
    if not available:
        pytest.skip(f"ZooKeeper cannot run here: {why}")
    schedule = generate(fault_seed)
    print(schedule.describe())
    report = run_schedule(schedule)
    fault_reports.append(report)
    print("\n".join(report.targets))
    print(dict(report.counts))
    if report.explained:                # an idempotent duplicate the client re-sent: allowed, kept
        print("\n".join(report.explained), f"\nartifacts: {report.artifacts}")
    assert not report.violations, report.failure_message()
