"""tests/faults/history.py and replicas.py: hand-made histories the checks must catch (fast lane)."""
from __future__ import annotations

import os
import struct

from . import history as h
from .replicas import batches, compare_replicas, describe_divergence, log_prefix

I, P, T = h.IDEMPOTENT, h.PLAIN, h.TRANSACTIONAL
WRITERS = {1: I, 2: P, 3: T}


def v(writer: int, seq: int) -> int:
    return int(h.encode(writer, seq))


def acks_and_log(writer: int, kind: str, n: int, partition: int = 0, first_offset: int = 0):
    acks = [h.Ack(writer, kind, s, partition, first_offset + s) for s in range(n)]
    return acks, [(first_offset + s, v(writer, s)) for s in range(n)]


def records(acks, log, writers=WRITERS) -> h.Findings:
    f = h.Findings()
    h.check_records(acks, log, writers, f)
    h.check_order(acks, log, writers, f)
    return f


def test_values_name_their_writer_and_sequence():
    assert h.decode(int(h.encode(3, 17))) == (3, 17)
    assert h.Ack(3, T, 17, 0, 5).value == v(3, 17)


def test_a_clean_history_has_no_violation():
    acks, log = acks_and_log(1, I, 5)
    f = records(acks, {0: log})
    assert f.violations == [] and f.counts["acknowledged"] == 5


def test_an_acknowledged_record_missing_from_the_log_is_lost():
    acks, log = acks_and_log(1, I, 5)
    del log[2]
    f = records(acks, {0: log})
    assert f.counts["lost"] == 1 and "seq 2" in f.violations[0]


def test_a_record_found_away_from_its_acknowledged_offset_is_misplaced():
    acks, log = acks_and_log(1, I, 3)
    log[2] = (7, log[2][1])
    f = records(acks, {0: log})
    assert f.counts["misplaced"] == 1 and f.counts["lost"] == 0


def test_an_idempotent_duplicate_fails_and_a_plain_one_is_only_counted():
    acks, log = acks_and_log(1, I, 3)
    f = records(acks, {0: log + [(3, v(1, 2))]})
    assert f.counts["duplicated"] == 1 and "appears 2 times" in f.violations[0]
    acks, log = acks_and_log(2, P, 3)
    f = records(acks, {0: log + [(3, v(2, 2))]})
    assert f.violations == [] and f.counts["duplicated-plain"] == 1


def test_reordering_is_caught_in_acknowledgements_and_in_the_log():
    acks = [h.Ack(1, I, 0, 0, 1), h.Ack(1, I, 1, 0, 0)]            # seq 1 acknowledged before seq 0
    f = records(acks, {0: [(0, v(1, 1)), (1, v(1, 0))]})
    assert f.counts["reordered"] == 1 and f.counts["reordered-log"] == 1
    # other writers interleaved, a plain writer's retry of seq 0 later in the log: still in order
    f = records([], {0: [(0, v(2, 0)), (1, v(1, 0)), (2, v(2, 1)), (3, v(2, 0)), (4, v(1, 1))]})
    assert f.counts["reordered-log"] == 0


def test_transactions_committed_visible_aborted_invisible_unknown_all_or_nothing():
    members = {1: [v(3, 0), v(3, 1)], 2: [v(3, 2)], 3: [v(3, 3), v(3, 4)], 4: [v(3, 5), v(3, 6)]}
    outcomes = {1: h.COMMITTED, 2: h.ABORTED, 3: h.UNKNOWN, 4: h.UNKNOWN}
    good = {0: [(0, v(3, 0)), (1, v(3, 1)), (4, v(3, 3)), (5, v(3, 4))]}
    f = h.Findings()
    h.check_transactions(members, outcomes, good, f)
    assert f.violations == [] and f.counts["txn-unknown"] == 2
    bad = {0: [(0, v(3, 0)), (2, v(3, 2)), (4, v(3, 3))]}
    f = h.Findings()
    h.check_transactions(members, outcomes, bad, f)
    assert (f.counts["lost-committed"], f.counts["aborted-visible"], f.counts["partial-transaction"]) == (1, 1, 1)


def test_committed_acks_leave_out_aborted_and_unknown_transactions():
    hist = h.History(t0=0.0, acks=[h.Ack(1, I, 0, 0, 0), h.Ack(3, T, 0, 0, 0, txn=1), h.Ack(3, T, 1, 0, 2, txn=2)],
                     txn_outcomes={1: h.COMMITTED, 2: h.ABORTED})
    assert [a.txn for a in hist.committed_acks()] == [None, 1]


def test_group_offsets_going_backwards_are_caught_three_ways():
    commits = [h.Commit(1.0, 0, 10), h.Commit(2.0, 0, 20), h.Commit(3.0, 0, 15)]
    observed = [h.Observed(2.5, 0, 20), h.Observed(3.5, 0, 12)]
    f = h.Findings()
    h.check_group_offsets(commits, observed, f)
    assert f.counts["commit-regression"] == 1        # 15 after 20
    assert f.counts["offset-regression"] == 1        # described 12 after 20
    assert f.counts["stale-offset"] == 1             # described 12 after a commit of 20 returned
    f = h.Findings()
    h.check_group_offsets([h.Commit(2.0, 0, 20)], [h.Observed(1.9, 0, 10), h.Observed(2.1, 0, 20)], f)
    assert f.violations == []                        # a describe sent before the commit returned


def test_an_isr_shrink_counts_only_inside_a_fault_free_window():
    full, shrunk = {"t-0": (1, (1, 2, 3))}, {"t-0": (1, (1, 3))}
    samples = [h.IsrSample(1.0, full), h.IsrSample(2.0, shrunk), h.IsrSample(3.0, shrunk), h.IsrSample(5.0, shrunk)]
    f = h.Findings()
    h.check_isr(samples, [(0.5, 2.5), (4.0, 6.0)], {"t-0": 3}, f)
    assert f.counts["isr-shrink"] == 2               # once per window, not once per sample
    f = h.Findings()
    h.check_isr(samples, [(0.5, 1.5), (3.5, 4.5)], {"t-0": 3}, f)
    assert f.violations == []


def test_recoveries_need_a_leader_in_time_and_full_isrs():
    recoveries = [h.Recovery("kill", 10.0, 10.5, 12.0), h.Recovery("pause-long", 20.0, 30.0, 31.0),
                  h.Recovery("partition-drop", 40.0, None, None)]
    f = h.Findings()
    h.check_recoveries(recoveries, 9.0, f)
    assert f.counts["leaderless"] == 2 and f.counts["isr-not-restored"] == 1
    assert f.counts["max_recovery_ms"] == 11000


def test_only_the_first_violations_of_a_kind_are_quoted():
    f = h.Findings()
    for n in range(h.EXAMPLES + 3):
        f.violation("lost", str(n))
    assert f.counts["lost"] == h.EXAMPLES + 3 and len(f.violations) == h.EXAMPLES + 1


def batch(base_offset: int, count: int, payload: bytes = b"x") -> bytes:
    """A v2 batch header (only the fields replicas.py reads are meaningful) and a payload."""
    body = struct.pack(">ibIhi", 0, 2, 0, 0, count - 1) + bytes(61 - 27) + payload
    return struct.pack(">qi", base_offset, len(body)) + body


def test_log_prefix_keeps_the_batches_below_the_high_watermark():
    data = batch(0, 3) + batch(3, 2) + batch(5, 4)
    assert [(b[0], b[1]) for b in batches(data)] == [(0, 2), (3, 4), (5, 8)]
    assert log_prefix(data, 5) == (data[:len(batch(0, 3)) * 2], 5)
    assert log_prefix(data, 4) == (batch(0, 3), 3)
    assert log_prefix(data + b"\0\0torn", 100)[1] == 9


def test_diverging_replicas_are_described_by_their_first_different_batch():
    a, b = batch(0, 3) + batch(3, 2, b"y"), batch(0, 3) + batch(3, 2, b"z")
    assert "batch #1 differs" in describe_divergence({1: a, 2: b})


def test_compare_replicas_reads_segments_and_reports_divergence_and_shortfall(tmp_path):
    def write(broker: int, data: bytes) -> str:
        d = tmp_path / f"b{broker}" / "t-0"
        d.mkdir(parents=True)
        half = len(batch(0, 3))
        (d / f"{0:020d}.log").write_bytes(data[:half])
        (d / f"{3:020d}.log").write_bytes(data[half:])
        return os.fspath(tmp_path / f"b{broker}")
    same = batch(0, 3) + batch(3, 2)
    dirs = {1: write(1, same), 2: write(2, same), 3: write(3, batch(0, 3) + batch(3, 2, b"q"))}
    problems = compare_replicas(dirs, "t", {0: 5}, timeout=0)
    assert len(problems) == 1 and "t-0 below high watermark 5: batch #1 differs" in problems[0]
    assert compare_replicas({1: dirs[1], 2: dirs[2]}, "t", {0: 5}, timeout=0) == []
    assert "hold only up to {2: 3}" in compare_replicas({1: dirs[1], 2: write(4, batch(0, 3))}, "t", {0: 5}, 0)[0]
