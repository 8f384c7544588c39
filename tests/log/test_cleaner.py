"""The log cleaner on a PartitionLog: what survives a clean, the swap, and a crash at each step."""
from __future__ import annotations

import os
import threading

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kwire.codecs import records
from kwire.log import cleaner
from kwire.log.cleaner import CleanerLimits, Throttler

NOW = 10_000_000


def keyed_batch(pairs, *, timestamp=NOW - 1000, compression=0, producer_id=-1, producer_epoch=-1,
                base_sequence=-1, transactional=False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 30)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def read_all(log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start to the log end."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, max_offset=log.log_end_offset)
        if not data:
            break
        position = 0
        while position < len(data):
            header = records.read_header(data, position)
            batch = DefaultRecordBatch(data[position:position + header.size])
            assert batch.validate_crc()
            out.extend((r.offset, r.key, r.value) for r in batch)
            offset = header.next_offset
            position += header.size
    return out


def latest(entries):
    seen = {}
    for offset, key, value in entries:
        seen[key] = (offset, key, value)
    return sorted(seen.values())


def limits(entries=10_000):
    return CleanerLimits(max_entries=entries, throttle=Throttler(float("inf")), pause_at=None)


def clean_once(log, *, checkpoint=None, now=NOW, entries=10_000, pause=lambda: None):
    plan = cleaner.plan(log, checkpoint, now)
    assert plan is not None
    result = cleaner.clean(plan, limits(entries))
    assert log.replace_segments(result.groups, plan.truncations, pause)
    cleaner.finish(result)
    return result


def fill(log, rounds=5, keys=4, *, compression=0, now=NOW):
    """``rounds`` batches each writing every key once; then one more to close the last segment."""
    for r in range(rounds):
        log.append(keyed_batch([(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)],
                               compression=compression), now_ms=now)
    log.append(keyed_batch([(b"tail", b"x")]), now_ms=now)


COMPACT = dict(cleanup_policy="compact", segment_bytes=200, min_cleanable_dirty_ratio=0.01)


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_the_latest_value_of_each_key_survives_at_its_offset(open_log, compression):
    log = open_log(**COMPACT)
    fill(log, compression=compression)
    before = read_all(log)
    assert len(log.segments) > 3
    result = clean_once(log)
    after = read_all(log)
    closed = [e for e in before if e[0] < log.segments[-1].base_offset]
    assert [e for e in after if e[0] < log.segments[-1].base_offset] == latest(closed)
    assert [e for e in after if e[0] >= log.segments[-1].base_offset] == \
        [e for e in before if e[0] >= log.segments[-1].base_offset]
    assert result.written_bytes < result.read_bytes
    assert log.log_end_offset == before[-1][0] + 1
    assert os.path.exists(os.path.join(log.path, "cleaner-offset-checkpoint"))
    assert not [n for n in os.listdir(log.path) if n.endswith((".swap", ".cleaned", ".swapend"))]


def test_a_cleaned_log_reopens_with_the_same_records(open_log):
    log = open_log(**COMPACT)
    fill(log)
    clean_once(log)
    after = read_all(log)
    assert log.close()
    for recover in (False, True):
        again = open_log(recover=recover, **COMPACT)
        assert not again.offline, again.health.offline_reason
        assert read_all(again) == after
        again.append(keyed_batch([(b"k0", b"new")]), now_ms=NOW)
        after = read_all(again)
        assert after[-1][2] == b"new"
        assert again.close()


def test_a_second_clean_only_reads_the_new_dirty_part_and_groups_small_segments(open_log):
    log = open_log(**COMPACT)
    fill(log)
    first = clean_once(log)
    segments_after_first = len(log.segments)
    fill(log, rounds=3)
    plan = cleaner.plan(log, first.end_offset, NOW)
    assert plan.first_dirty == first.end_offset
    assert 0 < plan.dirty_bytes < plan.total_bytes
    clean_once(log, checkpoint=first.end_offset)
    entries = read_all(log)
    closed = [e for e in entries if e[0] < log.segments[-1].base_offset]
    assert len({e[1] for e in closed}) == len(closed)        # one record per key
    assert len(log.segments) <= segments_after_first + 2


def test_tombstones_remove_a_key_and_go_after_delete_retention(open_log):
    log = open_log(**COMPACT, delete_retention_ms=1000)
    fill(log, rounds=2)
    log.append(keyed_batch([(b"k1", None)]), now_ms=NOW)
    log.append(keyed_batch([(b"tail", b"y")]), now_ms=NOW)
    log.append(keyed_batch([(b"tail", b"z")]), now_ms=NOW)
    clean_once(log, now=NOW)                                   # within delete.retention.ms
    kept = read_all(log)
    assert [v for _o, k, v in kept if k == b"k1"] == [None]     # only the tombstone is left
    clean_once(log, now=NOW + 5000)                            # past it
    assert not [e for e in read_all(log) if e[1] == b"k1"]


def test_nothing_at_or_above_the_high_watermark_is_cleaned(open_log):
    """A follower's uncommitted tail may still be truncated: the cleaner leaves it as it is."""
    log = open_log(cleanup_policy="compact", segment_bytes=1000, min_cleanable_dirty_ratio=0.01,
                   delete_retention_ms=0)
    log.enable_replication()
    fill(log, rounds=3)
    log.update_high_watermark(log.log_end_offset)
    committed = log.log_end_offset
    log.append(keyed_batch([(b"k1", None)]), now_ms=NOW)             # above the high watermark
    assert log.segments[-1].base_offset < committed                  # ... in the segment holding it
    fill(log, rounds=8)
    before = read_all(log)
    clean_once(log, now=NOW + 10_000)
    after = read_all(log)
    assert [e for e in after if e[0] >= committed] == [e for e in before if e[0] >= committed]
    assert (committed, b"k1", None) in after
    assert [e for e in after if e[0] < committed] == latest([e for e in before if e[0] < committed])


def test_min_compaction_lag_keeps_recent_segments_dirty(open_log):
    log = open_log(**COMPACT, min_compaction_lag_ms=60_000)
    fill(log)
    assert cleaner.plan(log, None, NOW) is None                # every record is younger
    plan = cleaner.plan(log, None, NOW + 120_000)
    assert plan is not None and plan.due


def test_the_dirty_ratio_and_max_compaction_lag_decide_when_a_log_is_due(open_log):
    log = open_log(cleanup_policy="compact", segment_bytes=200, min_cleanable_dirty_ratio=0.99,
                   max_compaction_lag_ms=50_000)
    fill(log)
    first = clean_once(log)
    log.append(keyed_batch([(b"k0", b"again")], timestamp=NOW), now_ms=NOW)
    log.append(keyed_batch([(b"tail", b"again")], timestamp=NOW), now_ms=NOW)
    plan = cleaner.plan(log, first.end_offset, NOW)
    assert plan is not None and plan.ratio < 0.99 and not plan.due
    assert cleaner.plan(log, first.end_offset, NOW + 100_000).due


def test_a_small_offset_map_cleans_in_several_passes(open_log):
    log = open_log(**COMPACT)
    fill(log, rounds=6, keys=6)
    before = read_all(log)
    checkpoint, passes = None, 0
    while True:
        plan = cleaner.plan(log, checkpoint, NOW)
        if plan is None or not plan.dirty_bytes:
            break
        result = clean_once(log, checkpoint=checkpoint, entries=3)
        assert result.map_entries <= 3
        below = [k for o, k, _v in read_all(log) if o < result.end_offset]
        assert len(below) == len(set(below)), f"superseded records left below {result.end_offset}"
        checkpoint, passes = result.end_offset, passes + 1
        assert passes < 50
    assert passes > 1
    closed = [e for e in before if e[0] < log.segments[-1].base_offset]
    assert [e for e in read_all(log) if e[0] < log.segments[-1].base_offset] == latest(closed)


def test_a_full_map_in_the_middle_of_a_batch_still_cleans_what_lies_below_its_end(open_log):
    log = open_log(**COMPACT)
    log.append(keyed_batch([(b"a", b"0")]), now_ms=NOW)
    log.append(keyed_batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4"), (b"c", b"5")]), now_ms=NOW)
    fill(log, rounds=1)
    result = clean_once(log, entries=2)
    assert result.end_offset == 4                              # the map filled at c@4
    got = [(o, k) for o, k, _v in read_all(log) if o < 6]
    assert got == [(2, b"b"), (3, b"a"), (4, b"c"), (5, b"c")]  # a@0 and a@1 gone; c untouched


def test_aborted_transactions_are_removed_and_their_markers_later(open_log):
    log = open_log(**COMPACT, delete_retention_ms=1000)
    log.append(keyed_batch([(b"a", b"committed")], producer_id=7, producer_epoch=0, base_sequence=0,
                           transactional=True), now_ms=NOW)
    log.append_control(7, 0, True, 0, now_ms=NOW)
    log.append(keyed_batch([(b"a", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=1,
                           transactional=True), now_ms=NOW)
    log.append_control(7, 0, False, 0, now_ms=NOW)
    fill(log, rounds=2)
    clean_once(log, now=NOW + 5000)
    values = [(k, v) for _o, k, v in read_all(log) if k == b"a"]
    assert values == [(b"a", b"committed")]


def control_batches(log) -> list[tuple[int, int]]:
    """(offset, control type) of every marker in the log."""
    data = log.read(log.log_start_offset, 1 << 20, max_offset=log.log_end_offset)
    return [(h.base_offset, records.control_type(data, h)) for h in records.iter_batches(data) if h.is_control]


def test_abort_markers_go_a_pass_after_their_data_and_commit_markers_stay_with_theirs(open_log):
    log = open_log(**COMPACT, delete_retention_ms=1000)
    for i, commit in enumerate([True, False, True]):        # the producer goes on after the abort
        log.append(keyed_batch([(b"t%d" % i, b"txn")], producer_id=7, producer_epoch=0, base_sequence=i,
                               transactional=True), now_ms=NOW)
        log.append_control(7, 0, commit, 0, now_ms=NOW)
    fill(log, rounds=2)
    markers = control_batches(log)
    assert [kind for _o, kind in markers] == [records.CONTROL_COMMIT, records.CONTROL_ABORT,
                                              records.CONTROL_COMMIT]
    first = clean_once(log, now=NOW + 5000)
    assert control_batches(log) == markers                   # the abort's data went in this pass
    assert not [e for e in read_all(log) if e[1] == b"t1"]
    log.append(keyed_batch([(b"tail", b"more")]), now_ms=NOW)
    clean_once(log, checkpoint=first.end_offset, now=NOW + 5000)
    assert control_batches(log) == [markers[0], markers[2]]  # the commits' records are still there
    assert [v for _o, k, v in read_all(log) if k in (b"t0", b"t2")] == [b"txn", b"txn"]


def test_the_io_throttle_slows_a_clean_down(open_log):
    log = open_log(**COMPACT)
    fill(log, rounds=10)
    plan = cleaner.plan(log, None, NOW)
    lim = CleanerLimits(max_entries=1000, throttle=Throttler(20_000), pause_at=None)
    result = cleaner.clean(plan, lim)
    moved = result.read_bytes + result.written_bytes
    assert moved > 2_000
    assert result.seconds >= 0.8 * moved / 20_000
    cleaner.discard(result)


def test_a_producers_last_batch_is_kept_for_its_sequence(open_log):
    log = open_log(**COMPACT)
    log.append(keyed_batch([(b"p", b"1")], producer_id=9, producer_epoch=0, base_sequence=0), now_ms=NOW)
    fill(log, rounds=2)
    log.append(keyed_batch([(b"p", b"2")]), now_ms=NOW)          # supersedes the producer's record
    fill(log, rounds=1)
    clean_once(log)
    assert log.close()
    again = open_log(**COMPACT)
    entry = dict(again.producer_entries()).get(9)
    assert entry is not None and entry.last_seq == 0
    duplicate = again.append(keyed_batch([(b"p", b"1")], producer_id=9, producer_epoch=0,
                                         base_sequence=0), now_ms=NOW)
    assert duplicate.duplicate


def test_a_fetch_in_a_gap_moves_on_to_the_next_surviving_batch(open_log):
    log = open_log(**COMPACT)
    fill(log)
    clean_once(log)
    offsets = [o for o, _k, _v in read_all(log)]
    gaps = [o for o in range(log.log_start_offset, offsets[-1]) if o not in offsets]
    assert gaps
    data = log.read(gaps[0], 1 << 20)
    header = records.read_header(data)
    assert header.last_offset >= gaps[0]


def test_retention_deleting_a_segment_meanwhile_cancels_the_swap(open_log):
    log = open_log(cleanup_policy="compact,delete", segment_bytes=200, min_cleanable_dirty_ratio=0.01,
                   retention_ms=1000)
    fill(log)
    plan = cleaner.plan(log, None, NOW)
    result = cleaner.clean(plan, limits())
    assert log.apply_retention(NOW + 10_000) > 0
    assert not log.replace_segments(result.groups, plan.truncations)
    cleaner.discard(result)
    assert not [n for n in os.listdir(log.path) if n.endswith((".swap", ".swapend"))]


@pytest.mark.parametrize("phase", ["cleaned", "swap", "replaced"])
def test_a_crash_at_each_step_of_the_swap_loses_nothing(open_log, tmp_path, phase):
    """The files as a kill -9 leaves them at each pause point, then a reopen."""
    log = open_log(**COMPACT)
    fill(log)
    before = read_all(log)
    wanted = latest([e for e in before if e[0] < log.segments[-1].base_offset]) + \
        [e for e in before if e[0] >= log.segments[-1].base_offset]
    plan = cleaner.plan(log, None, NOW)
    lim = limits()
    crashed = threading.Event()

    class Crash(Exception):
        pass

    def pause_at(where):
        if where == phase:
            crashed.set()
            raise Crash(where)

    cleaner_pause = cleaner.pause_point
    try:
        cleaner.pause_point = lambda _l, _d, where: pause_at(where)
        try:
            result = cleaner.clean(plan, lim)
            log.replace_segments(result.groups, plan.truncations, lambda: pause_at("replaced"))
        except Crash:
            pass
    finally:
        cleaner.pause_point = cleaner_pause
    assert crashed.is_set()
    if phase == "cleaned":           # a kill -9 would leave the .cleaned files (an exception removes them)
        for name in ("00000000000000000000.log.cleaned", "00000000000000000000.index.cleaned"):
            with open(os.path.join(log.path, name), "wb") as f:
                f.write(b"half a clean")
    for segment in log.segments:
        segment.close()
    again = open_log(recover=True, **COMPACT)
    assert not again.offline, again.health.offline_reason
    got = read_all(again)
    assert latest([e for e in got]) == latest(before)
    if phase == "cleaned":
        assert got == before
    else:
        assert got == sorted(wanted)
    assert not [n for n in os.listdir(again.path) if n.endswith((".swap", ".cleaned", ".swapend"))]
