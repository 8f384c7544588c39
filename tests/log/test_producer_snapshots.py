"""Full producer-state snapshots (issue 28, item 3): idempotent producers are recognised after
a reopen, a truncation or a failover however old their batches, until they expire."""
from __future__ import annotations

import collections
import os
import struct

import crc32c
import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from logkit import build_batch

from kwire.admin.broker_config import broker_config_from_text
from kwire.admin.topic_config import effective_log_config
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log import cleaner
from kwire.log.cleaner import CleanerLimits, Throttler
from kwire.log.config import LogConfig
from kwire.log.partition import PRODUCER_STATE_SEGMENTS
from kwire.log.producer_state import (
    MAX_CACHED_BATCHES, BatchMetadata, PendingAppend, ProducerEntry, ProducerStateManager,
    SnapshotCorrupt,
)

T0 = 1_700_000_000_000
DAY = 86_400_000
NOW = T0 + 1_000
LAST = 1 << 40
SMALL = {"segment_bytes": 1024, "index_interval_bytes": 0}
OLD = (1001, 1002, 1003)        # the idle producers of the issue
FILLER = 2000


def batch(pid, seq, n=3, *, epoch=0, ts=T0, pad=b"", key=None, transactional=False):
    values = [b"%d-%d" % (pid, seq + i) + pad for i in range(n)]
    if key is None:
        return build_batch(values, timestamp=ts, producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=transactional)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                        batch_size=1 << 30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=ts + i, key=key + b"%d" % i, value=value, headers=[])
    return bytes(builder.build())


def issue_log(log, *, filler=24, filler_ts=T0, now_ms=NOW, key=None):
    """The issue's scenario: three producers write two 3-record batches each, then stay idle
    while producer FILLER rolls many segments.  Returns {(pid, seq): (base, last offset)}."""
    offsets = {}
    for seq in (0, 3):
        for pid in OLD:
            r = log.append(batch(pid, seq, key=key), now_ms=now_ms)
            offsets[pid, seq] = (r.base_offset, r.last_offset)
    for i in range(filler):
        log.append(batch(FILLER, 3 * i, ts=filler_ts, pad=b"x" * 120,
                         key=None if key is None else b"f"), now_ms=now_ms)
    old_end = max(last for _, last in offsets.values())
    # their batches lie before the newest PRODUCER_STATE_SEGMENTS segments
    assert log.segments[-PRODUCER_STATE_SEGMENTS - 1].base_offset > old_end
    return offsets


def code_of(fn, *args, **kwargs):
    with pytest.raises(KafkaApiError) as err:
        fn(*args, **kwargs)
    return err.value.code


def assert_recognised(log, offsets, *, now_ms=NOW, key=None):
    """Exact resends answer the original offsets and append nothing; a skipped sequence is
    OUT_OF_ORDER_SEQUENCE_NUMBER; the next sequence is appended."""
    end = log.log_end_offset
    for (pid, seq), (base, last) in offsets.items():
        r = log.append(batch(pid, seq, key=key), now_ms=now_ms)
        assert (r.duplicate, r.base_offset, r.last_offset) == (True, base, last), (pid, seq)
    assert log.log_end_offset == end
    assert code_of(log.append, batch(1002, 9, key=key), now_ms=now_ms) == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(batch(1003, 6, key=key), now_ms=now_ms).base_offset == end


def assert_forgotten(log, *, now_ms=NOW):
    """Unknown producers (KIP-360): a resend is appended again, any sequence accepted."""
    end = log.log_end_offset
    r = log.append(batch(1001, 3), now_ms=now_ms)
    assert (r.duplicate, r.base_offset) == (False, end)
    assert not log.append(batch(1002, 9), now_ms=now_ms).duplicate


def snapshot_files(log):
    return sorted(n for n in os.listdir(log.path) if n.endswith(".txnsnapshot"))


def read_file(log, name):
    with open(os.path.join(log.path, name), "rb") as f:
        return f.read()


def v0_snapshot(open_txns) -> bytes:
    """A version-0 ``.txnsnapshot`` as an older kwire wrote it: (pid, epoch, coordinator epoch,
    first offset) of each open transaction, nothing else."""
    body = bytearray(struct.pack(">hIi", 0, 0, len(open_txns)))
    for entry in sorted(open_txns):
        body += struct.pack(">qhiq", *entry)
    struct.pack_into(">I", body, 2, crc32c.crc32c(bytes(body[6:])))
    return bytes(body)


def entries_of(log):
    return {pid: (e.epoch, e.coordinator_epoch, e.txn_first_offset, e.last_timestamp,
                  list(e.batches)) for pid, e in log.producer_entries()}


# -- the format -------------------------------------------------------------------------------

batches_st = st.lists(st.builds(BatchMetadata, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                                st.integers(0, 2**62), st.integers(0, 2**62)),
                      max_size=MAX_CACHED_BATCHES)
entry_st = st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(-1, 2**31 - 1),
                     st.one_of(st.none(), st.integers(0, 2**62)), st.integers(-1, 2**62), batches_st)


@settings(max_examples=200, deadline=None)
@given(st.lists(entry_st, max_size=20, unique_by=lambda e: e[0]))
def test_snapshot_round_trip(raw):
    state = ProducerStateManager()
    pending = PendingAppend()
    for pid, epoch, coordinator_epoch, first, ts, cached in raw:
        pending.entries[pid] = ProducerEntry(
            pid, epoch, collections.deque(cached, maxlen=MAX_CACHED_BATCHES),
            coordinator_epoch=coordinator_epoch, txn_first_offset=first, last_timestamp=ts)
    state.commit(pending)
    data = state.snapshot()
    again = ProducerStateManager()
    assert again.load_snapshot(data) is True
    assert again.entries() == state.entries()
    assert again.ongoing == state.ongoing
    assert again.max_producer_id == state.max_producer_id
    assert again.snapshot() == data
    for cut in {0, 5, len(data) // 2, len(data) - 1}:       # torn anywhere: refused
        with pytest.raises(SnapshotCorrupt):
            ProducerStateManager().load_snapshot(data[:cut])
    if len(data) > 6:
        flipped = bytearray(data)
        flipped[-1] ^= 0x40
        with pytest.raises(SnapshotCorrupt):
            ProducerStateManager().load_snapshot(bytes(flipped))


def test_version_0_snapshot_loads_its_open_transactions_only():
    state = ProducerStateManager()
    assert state.load_snapshot(v0_snapshot([(7, 2, 4, 100), (9, 0, -1, 50)])) is False
    assert state.ongoing == {7: 100, 9: 50}
    entry = state.get(7)
    assert (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset, list(entry.batches)) == (
        2, 4, 100, [])
    with pytest.raises(SnapshotCorrupt):
        state.load_snapshot(struct.pack(">hIi", 9, 0, 0))      # an unknown version


def test_expiry_spares_open_transactions():
    state = ProducerStateManager()
    state.commit(PendingAppend(entries={
        1: ProducerEntry(1, 0, last_timestamp=T0),
        2: ProducerEntry(2, 0, last_timestamp=T0 + DAY),
        3: ProducerEntry(3, 0, last_timestamp=T0, txn_first_offset=5)}))
    assert state.remove_expired(T0 + DAY, DAY) == [1]
    assert [pid for pid, _ in state.entries()] == [2, 3]
    assert state.remove_expired(T0 + 2 * DAY, DAY) == [2]
    assert [pid for pid, _ in state.entries()] == [3] and state.ongoing == {3: 5}


# -- the issue's scenario on a PartitionLog ---------------------------------------------------

@pytest.mark.parametrize("recover", [False, True])
def test_idle_producers_are_recognised_after_reopen(open_named, recover):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    if recover:
        for segment in log.segments:        # a crash: no clean close
            segment.close()
    else:
        assert log.close()
    again = open_named(recover=recover, now_ms=NOW, **SMALL)
    assert_recognised(again, offsets)


def test_idle_producers_are_recognised_after_truncation_into_an_older_segment(open_named):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    middle = log.segments[len(log.segments) // 2]
    log.truncate_to(middle.base_offset + 1)
    assert log.segments[-1] is middle and len(log.segments) > PRODUCER_STATE_SEGMENTS
    assert_recognised(log, offsets)
    log.truncate_to(log.segments[-1].base_offset)          # to a segment's very start
    assert_recognised(log, offsets)


def test_truncation_forgets_the_batches_it_removes(open_named):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    base = offsets[1001, 3][0]                 # the three producers' second batches go
    log.truncate_to(base)
    assert log.log_end_offset == base
    r = log.append(batch(1003, 3), now_ms=NOW)               # its retry is new again
    assert (r.duplicate, r.base_offset) == (False, base)
    r = log.append(batch(1002, 0), now_ms=NOW)               # kept: still a duplicate
    assert (r.duplicate, r.base_offset) == (True, offsets[1002, 0][0])
    assert code_of(log.append, batch(1001, 6), now_ms=NOW) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_snapshots_hold_every_producer(open_named):
    log = open_named(**SMALL)
    issue_log(log)
    state = ProducerStateManager()
    assert state.load_snapshot(read_file(log, snapshot_files(log)[-1])) is True
    assert {pid for pid, _ in state.entries()} == {*OLD, FILLER}


@pytest.mark.parametrize("damage", ["missing", "torn", "flipped", "unknown-version"])
def test_damaged_newest_snapshot_falls_back_to_an_earlier_one(open_named, damage):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    log.close()
    newest = os.path.join(log.path, snapshot_files(log)[-1])
    data = bytearray(read_file(log, snapshot_files(log)[-1]))
    if damage == "missing":
        os.unlink(newest)
    else:
        if damage == "torn":
            data = data[:-3]
        elif damage == "flipped":
            data[20] ^= 1
        else:
            data[1] = 77
        with open(newest, "wb") as f:
            f.write(data)
    again = open_named(now_ms=NOW, **SMALL)
    assert ProducerStateManager().load_snapshot(read_file(again, os.path.basename(newest))) is True
    assert_recognised(again, offsets)


def test_every_snapshot_damaged_replays_the_whole_log(open_named):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    log.close()
    for name in snapshot_files(log):
        os.truncate(os.path.join(log.path, name), 4)
    again = open_named(now_ms=NOW, **SMALL)
    assert_recognised(again, offsets)
    assert len(snapshot_files(again)) == len(again.segments) - 1


def test_a_log_with_version_0_snapshots_still_opens(open_named):
    """An older kwire's log: its snapshots hold open transactions only; the rebuild replays
    the newest segments from there, as that kwire did, and writes full snapshots."""
    log = open_named(**SMALL)
    log.append(batch(500, 0, transactional=True), now_ms=NOW)          # open from offset 0
    issue_log(log)                # idle producers that kwire did not recognise after a reopen
    recent = log.append(batch(600, 0), now_ms=NOW)
    log.close()
    for name in snapshot_files(log):
        state = ProducerStateManager()
        state.load_snapshot(read_file(log, name))
        with open(os.path.join(log.path, name), "wb") as f:
            f.write(v0_snapshot([(pid, state.get(pid).epoch, state.get(pid).coordinator_epoch, first)
                                 for pid, first in state.ongoing.items()]))
    again = open_named(now_ms=NOW, **SMALL)
    assert again.ongoing_transactions() == {500: 0} and again.last_stable_offset == 0
    r = again.append(batch(600, 0), now_ms=NOW)
    assert (r.duplicate, r.base_offset) == (True, recent.base_offset)
    # the active segment's snapshot is full now: the next open starts from it
    assert ProducerStateManager().load_snapshot(read_file(again, snapshot_files(again)[-1])) is True
    assert 1001 not in dict(again.producer_entries())      # nor does this first open


# -- expiry (producer.id.expiration.ms) -----------------------------------------------------

def test_producers_idle_past_expiry_are_dropped_when_a_segment_rolls(open_named):
    log = open_named(**SMALL)
    log.append(batch(500, 0, transactional=True), now_ms=NOW)      # open: never expires
    later = T0 + DAY + 10_000
    issue_log(log, filler_ts=later, now_ms=later)
    assert set(dict(log.producer_entries())) == {500, FILLER}
    state = ProducerStateManager()
    state.load_snapshot(read_file(log, snapshot_files(log)[-1]))
    assert {pid for pid, _ in state.entries()} == {500, FILLER}
    log.close()
    again = open_named(now_ms=later, **SMALL)
    assert again.ongoing_transactions() == {500: 0}
    assert_forgotten(again, now_ms=later)


@pytest.mark.parametrize("expiration_ms, forgotten", [(DAY, True), (3 * DAY, False)])
def test_producers_idle_past_expiry_are_dropped_by_the_rebuild(open_named, expiration_ms, forgotten):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    log.close()
    now = T0 + 2 * DAY
    again = open_named(now_ms=now, producer_id_expiration_ms=expiration_ms, **SMALL)
    assert (1001 not in dict(again.producer_entries())) is forgotten
    if forgotten:
        assert_forgotten(again, now_ms=now)
    else:
        assert_recognised(again, offsets, now_ms=now)


def test_producer_id_expiration_ms_reaches_the_log_config():
    assert LogConfig().producer_id_expiration_ms == DAY
    assert effective_log_config(broker_config_from_text(""), {}).producer_id_expiration_ms == DAY
    config = broker_config_from_text("producer.id.expiration.ms=60000")
    assert effective_log_config(config, {}).producer_id_expiration_ms == 60_000


# -- followers, retention, the cleaner --------------------------------------------------------

def test_a_follower_writes_the_same_full_snapshots(open_named):
    leader = open_named("leader", **SMALL)
    offsets = issue_log(leader)
    follower = open_named("follower", **SMALL)
    follower.enable_replication()
    while follower.log_end_offset < leader.log_end_offset:     # one batch per fetch
        data = leader.read(follower.log_end_offset, 1, max_offset=LAST)
        follower.append_as_follower(data, now_ms=NOW)
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert snapshot_files(follower) == snapshot_files(leader)
    for name in snapshot_files(leader):
        assert read_file(follower, name) == read_file(leader, name)
    assert entries_of(follower) == entries_of(leader)
    # failover: the follower restarts and leads; a retry reaches it
    follower.close()
    new_leader = open_named("follower", now_ms=NOW, **SMALL)
    assert_recognised(new_leader, offsets)
    # and a follower truncated into an older segment keeps them too
    other = open_named("other", **SMALL)
    while other.log_end_offset < leader.log_end_offset:
        other.append_as_follower(leader.read(other.log_end_offset, 600, max_offset=LAST), now_ms=NOW)
    other.truncate_to(other.segments[3].base_offset + 1)
    assert_recognised(other, offsets)


def test_retention_keeps_producers_whose_batches_it_deleted(open_named):
    log = open_named(**SMALL)
    offsets = issue_log(log)
    before = snapshot_files(log)
    target = log.segments[3].base_offset
    assert log.delete_records(target) == target == log.segments[0].base_offset
    assert log.segments[0].base_offset > max(last for _, last in offsets.values())
    # a deleted segment's snapshot went with it
    assert snapshot_files(log) == [n for n in before if int(n[:20]) >= log.segments[0].base_offset]
    log.close()
    again = open_named(now_ms=NOW, **SMALL)
    assert again.log_start_offset == again.segments[0].base_offset
    assert code_of(again.append, batch(1002, 9), now_ms=NOW) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    r = again.append(batch(1001, 3), now_ms=NOW)
    assert (r.duplicate, r.base_offset) == (True, offsets[1001, 3][0])


def test_compaction_leaves_the_newest_snapshot_usable(open_named):
    config = dict(SMALL, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
    log = open_named(**config)
    offsets = issue_log(log, key=b"k")
    for _ in range(3):
        plan = cleaner.plan(log, None, NOW)
        if plan is None:
            break
        result = cleaner.clean(plan, CleanerLimits(max_entries=10_000,
                                                   throttle=Throttler(float("inf")), pause_at=None))
        assert log.replace_segments(result.groups, plan.truncations)
        cleaner.finish(result)
    assert len(log.segments) > 1
    log.close()
    again = open_named(now_ms=NOW, **config)
    assert_recognised(again, offsets, key=b"k")
