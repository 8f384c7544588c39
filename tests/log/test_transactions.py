"""Transactions in the partition log (KIP-98): markers, last stable offset, aborted index,
restart, recovery, followers, truncation and retention."""
from __future__ import annotations

import os
import struct
import types

import pytest
from kafka.consumer.fetcher import Fetcher
from kafka.protocol.consumer import IsolationLevel
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch
from kafka.structs import TopicPartition
from logkit import build_batch

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.partition import PRODUCER_STATE_SEGMENTS, PartitionLog

LAST = 1 << 40
SMALL = {"segment_bytes": 400, "index_interval_bytes": 0}


def txn(log, pid, seq, n=2, *, epoch=0, value=b"v"):
    """A transactional batch of ``n`` records from producer ``pid``."""
    return log.append(build_batch([value] * n, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq, transactional=True), now_ms=0)


def end(log, pid, commit, *, epoch=0, coordinator_epoch=0, now_ms=5_000):
    return log.append_control(pid, epoch, commit, coordinator_epoch, now_ms=now_ms)


def code_of(fn, *args, **kwargs):
    with pytest.raises(KafkaApiError) as err:
        fn(*args, **kwargs)
    return err.value.code


def index_entries(log):
    """Every .txnindex file's entries, decoded from the bytes: {segment base: [entry...]}
    (an empty file, left by a failed first write or a truncation, counts as none)."""
    out = {}
    for name in sorted(os.listdir(log.path)):
        if name.endswith(".txnindex"):
            with open(os.path.join(log.path, name), "rb") as f:
                data = f.read()
            assert len(data) % 34 == 0
            if data:
                    out[int(name[:20])] = [struct.unpack_from(">hqqqq", data, i)
                                       for i in range(0, len(data), 34)]
    return out


def txn_state(log):
    """What a restart or a follower must reproduce."""
    return (log.log_end_offset, log.last_stable_offset, log.ongoing_transactions(),
            log.aborted_transactions(0, LAST), index_entries(log))


def consume(log, isolation, *, upper=None):
    """Values a kafka-python consumer returns from the whole log, given what Fetch would send."""
    upper = log.last_stable_offset if upper is None else upper
    data = log.read(log.log_start_offset, 1 << 30, max_offset=upper)
    aborted = [types.SimpleNamespace(producer_id=p, first_offset=f)
               for p, f in log.aborted_transactions(log.log_start_offset, upper)]
    partition = Fetcher.PartitionRecords(log.log_start_offset, TopicPartition("t", 0),
                                         MemoryRecords(data), isolation_level=isolation,
                                         aborted_transactions=aborted)
    return [r.value for r in partition.take()]


# -- the control batch codec ------------------------------------------------------------------

@pytest.mark.parametrize("commit", [False, True])
def test_control_batch_is_kafkas_end_transaction_marker(commit):
    data = records.build_control_batch(42, 3, commit, 17, 1_234)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, -1)
    assert (batch.base_offset, batch.last_offset_delta, batch.timestamp_type) == (0, 0, 0)
    [record] = list(batch)
    assert (record.version, record.type, record.commit, record.abort) == (0, int(commit),
                                                                          commit, not commit)
    assert record.key == struct.pack(">hh", 0, int(commit))
    assert record.value == struct.pack(">hi", 0, 17)
    assert record.timestamp == 1_234
    header = records.read_header(data)
    assert header.is_control and header.is_transactional and header.size == len(data)
    assert records.control_type(data, header) == int(commit)
    assert records.control_marker(data, header) == (int(commit), 17)
    assert records.scan_valid_prefix(data) == ([header], len(data))


def test_control_type_of_a_data_batch_is_none_and_clients_may_not_send_markers():
    data = build_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=0,
                       transactional=True)
    assert records.control_type(data, records.read_header(data)) is None
    marker = records.build_control_batch(1, 0, True, 0, 0)
    with pytest.raises(KafkaApiError) as err:
        records.validate_produce_records(marker, 1 << 20)
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_undecodable_control_record_is_corrupt_message():
    data = bytearray(records.build_control_batch(1, 0, True, 0, 0))
    data[records.HEADER_SIZE + 4] = 2          # key length 1 (zigzag): too short for a type
    header = records.read_header(bytes(data))
    with pytest.raises(KafkaApiError) as err:
        records.control_marker(bytes(data), header)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


# -- leader: open, commit, abort ---------------------------------------------------------------

def test_commit_moves_the_last_stable_offset_to_the_high_watermark(open_named):
    log = open_named()
    log.append(build_batch([b"plain"]), now_ms=0)
    assert txn(log, 7, 0).base_offset == 1
    assert log.ongoing_transactions() == {7: 1}
    assert (log.high_watermark, log.last_stable_offset) == (3, 1)
    assert txn(log, 7, 2).base_offset == 3                  # the transaction keeps its start
    assert log.ongoing_transactions() == {7: 1} and log.last_stable_offset == 1
    result = end(log, 7, commit=True)
    assert (result.base_offset, result.last_offset, result.record_count) == (5, 5, 1)
    assert not result.duplicate and result.log_start_offset == 0
    assert log.ongoing_transactions() == {}
    assert log.last_stable_offset == log.high_watermark == log.log_end_offset == 6
    assert log.aborted_transactions(0, LAST) == [] and index_entries(log) == {}
    marker = DefaultRecordBatch(log.read(5, 1 << 20))
    assert marker.is_control_batch and marker.base_offset == 5 and marker.validate_crc()


def test_abort_is_indexed_in_kafkas_txnindex_layout(open_named):
    log = open_named()
    txn(log, 7, 0, n=3)                                    # 0-2
    end(log, 7, commit=False)                              # 3
    assert log.ongoing_transactions() == {} and log.last_stable_offset == 4
    assert index_entries(log) == {0: [(0, 7, 0, 3, 4)]}
    assert os.path.exists(os.path.join(log.path, f"{0:020d}.txnindex"))
    assert log.aborted_transactions(0, 4) == [(7, 0)]
    assert log.aborted_transactions(3, 4) == [(7, 0)]      # the marker is at 3
    assert log.aborted_transactions(4, 10) == []           # after the marker
    assert log.aborted_transactions(0, 0) == []            # begins at the upper bound


def test_aborted_last_stable_offset_is_the_other_open_transaction(open_named):
    log = open_named()
    txn(log, 1, 0)                                         # 0-1  producer 1 opens
    txn(log, 2, 0)                                         # 2-3  producer 2 opens
    txn(log, 1, 2)                                         # 4-5
    assert log.last_stable_offset == 0
    end(log, 1, commit=False)                              # 6
    assert log.last_stable_offset == 2 and log.ongoing_transactions() == {2: 2}
    end(log, 2, commit=False)                              # 7
    assert log.last_stable_offset == 8
    assert index_entries(log) == {0: [(0, 1, 0, 6, 2), (0, 2, 2, 7, 8)]}
    assert log.aborted_transactions(0, 8) == [(1, 0), (2, 2)]
    assert log.aborted_transactions(7, 8) == [(2, 2)]
    assert log.aborted_transactions(0, 2) == [(1, 0)]


def test_kafka_python_read_committed_skips_aborted_records_and_markers(open_named):
    log = open_named()
    txn(log, 1, 0, value=b"aborted")
    txn(log, 2, 0, value=b"committed")
    log.append(build_batch([b"plain"]), now_ms=0)
    end(log, 1, commit=False)
    end(log, 2, commit=True)
    txn(log, 1, 2, value=b"open")                           # holds the LSO
    assert consume(log, IsolationLevel.READ_COMMITTED) == [b"committed"] * 2 + [b"plain"]
    assert consume(log, IsolationLevel.READ_UNCOMMITTED, upper=log.high_watermark) == (
        [b"aborted"] * 2 + [b"committed"] * 2 + [b"plain"] + [b"open"] * 2)


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state(open_named):
    log = open_named()
    txn(log, 7, 0)
    plain = build_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=2)
    assert code_of(log.append, plain, now_ms=0) == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 2 and log.ongoing_transactions() == {7: 0}
    end(log, 7, commit=True)
    assert log.append(plain, now_ms=0).base_offset == 3    # allowed once it is over


def test_marker_epochs(open_named):
    log = open_named()
    txn(log, 7, 0, epoch=2)
    assert code_of(end, log, 7, True, epoch=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2 and log.ongoing_transactions() == {7: 0}
    end(log, 7, commit=False, epoch=3)                      # KIP-360: aborted after a bump
    assert log.ongoing_transactions() == {} and log.aborted_transactions(0, LAST) == [(7, 0)]
    stale = build_batch([b"x"], producer_id=7, producer_epoch=2, base_sequence=2,
                        transactional=True)
    assert code_of(log.append, stale, now_ms=0) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert txn(log, 7, 0, epoch=3).base_offset == 3          # the new epoch starts at 0


def test_marker_from_an_older_coordinator_is_fenced(open_named):
    log = open_named()
    txn(log, 7, 0)
    end(log, 7, commit=True, coordinator_epoch=5)
    txn(log, 7, 2)
    assert (code_of(end, log, 7, False, coordinator_epoch=4)
            == ErrorCode.TRANSACTION_COORDINATOR_FENCED)
    assert log.ongoing_transactions() == {7: 3}
    end(log, 7, commit=False, coordinator_epoch=5)
    assert log.ongoing_transactions() == {}


def test_marker_without_an_open_transaction_is_appended_and_changes_nothing_else(open_named):
    log = open_named()
    txn(log, 7, 0)
    end(log, 7, commit=False)
    before = txn_state(log)
    result = end(log, 7, commit=False)                     # a retried marker
    assert result.base_offset == 3 and log.log_end_offset == 4
    assert txn_state(log)[1:] == (4,) + before[2:]
    end(log, 99, commit=True)                              # a producer never seen here
    assert log.ongoing_transactions() == {} and log.last_stable_offset == 5
    assert txn_state(log)[3:] == before[3:]


def test_failed_marker_write_changes_nothing(open_named, monkeypatch):
    log = open_named()
    txn(log, 7, 0)
    before = txn_state(log)
    real = os.writev

    def broken(fd, buffers):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "writev", broken)
    assert code_of(end, log, 7, False) == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.setattr(os, "writev", real)
    assert txn_state(log) == before
    end(log, 7, commit=False)
    assert log.aborted_transactions(0, LAST) == [(7, 0)]


def test_failed_txnindex_write_undoes_the_marker(open_named, monkeypatch):
    log = open_named()
    txn(log, 7, 0)
    before, size = txn_state(log), log.segments[-1].size
    real = os.write

    def broken(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".txnindex"):
            raise OSError(28, "No space left on device")
        return real(fd, data)
    monkeypatch.setattr(os, "write", broken)
    assert code_of(end, log, 7, False) == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.setattr(os, "write", real)
    assert txn_state(log) == before and log.segments[-1].size == size
    assert os.path.getsize(log.segments[-1].log_path) == size and not log.offline
    end(log, 7, commit=False)
    assert index_entries(log) == {0: [(0, 7, 0, 2, 3)]}


def test_log_append_time_topic_stamps_the_marker(open_named):
    log = open_named(message_timestamp_type="LogAppendTime")
    txn(log, 7, 0)
    result = end(log, 7, commit=True, now_ms=9_999)
    assert result.log_append_time_ms == 9_999
    marker = DefaultRecordBatch(log.read(2, 1 << 20))
    assert marker.validate_crc() and marker.timestamp_type == 1
    assert marker.max_timestamp == 9_999 and marker.is_control_batch


# -- segments, restart and recovery ------------------------------------------------------------

def spread(log):
    """Transactions across many small segments: producer 1 opens in the first and stays open;
    producer 2 aborts across a roll; producer 3 commits; plain batches in between."""
    txn(log, 1, 0, value=b"long")
    seq2 = seq3 = 0
    for i in range(12):
        log.append(build_batch([b"plain-%d" % i + b"x" * 30]), now_ms=0)
        if i % 4 == 0:
            txn(log, 2, seq2, value=b"two")
            seq2 += 2
        if i % 4 == 2:
            end(log, 2, commit=False)
        if i % 3 == 0:
            txn(log, 3, seq3, value=b"three")
            seq3 += 2
        if i % 3 == 1:
            end(log, 3, commit=True)
    assert len(log.segments) > PRODUCER_STATE_SEGMENTS + 2
    assert log.ongoing_transactions() == {1: 0}
    return log


def test_transactions_spanning_segments(open_named):
    log = spread(open_named(**SMALL))
    assert log.last_stable_offset == 0
    aborted = log.aborted_transactions(0, LAST)
    assert len(aborted) == 3 and all(pid == 2 for pid, _ in aborted)
    bases = [s.base_offset for s in log.segments]
    for base, entries in index_entries(log).items():      # each entry in its marker's segment
        nxt = next((b for b in bases if b > base), LAST)
        assert all(base <= last < nxt for _, _, _, last, _ in entries)
    first_marker = index_entries(log)[min(index_entries(log))][0]
    # a fetch from inside the first aborted transaction finds it in a later segment's index
    assert log.aborted_transactions(first_marker[2], LAST)[0] == (2, first_marker[2])


@pytest.mark.parametrize("recover", [False, True])
def test_restart_keeps_transactions(open_named, recover):
    log = spread(open_named(**SMALL))
    end(log, 1, commit=False)                              # the long one, opened in segment 0
    txn(log, 4, 0)
    expected = txn_state(log)
    assert expected[3][-1][0] == 1
    if not recover:
        assert log.close()
    else:
        for segment in log.segments:                       # a crash: no clean close
            segment.close()
    again = open_named(recover=recover, **SMALL)
    assert txn_state(again) == expected
    end(again, 4, commit=False)
    assert again.aborted_transactions(expected[0], LAST) == [(4, expected[0] - 2)]


@pytest.mark.parametrize("recover", [False, True])
def test_transaction_opened_before_the_replayed_segments_survives_restart(open_named, recover):
    log = spread(open_named(**SMALL))
    expected = txn_state(log)
    log.close()
    again = open_named(recover=recover, **SMALL)
    assert again.ongoing_transactions() == {1: 0} and again.last_stable_offset == 0
    assert txn_state(again) == expected
    assert code_of(end, again, 1, True, epoch=-1) == ErrorCode.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_missing_or_damaged_snapshots_fall_back_to_an_earlier_segment(open_named, damage):
    log = spread(open_named(**SMALL))
    expected = txn_state(log)
    log.close()
    for name in os.listdir(log.path):
        if name.endswith(".txnsnapshot"):
            path = os.path.join(log.path, name)
            if damage == "missing":
                os.unlink(path)
            else:
                os.truncate(path, os.path.getsize(path) - 1)
    again = open_named(**SMALL)
    assert txn_state(again) == expected
    # the rebuild wrote them again: the next open needs no fallback
    snapshots = [n for n in os.listdir(log.path) if n.endswith(".txnsnapshot")]
    assert len(snapshots) == len(again.segments) - 1
    again.close()
    assert txn_state(open_named(**SMALL)) == expected


def test_damaged_txnindex_is_rebuilt_on_open(open_named):
    log = spread(open_named(**SMALL))
    expected = txn_state(log)
    log.close()
    oldest = min(index_entries(log))
    with open(os.path.join(log.path, f"{oldest:020d}.txnindex"), "ab") as f:
        f.write(b"\x00" * 5)
    assert txn_state(open_named(**SMALL)) == expected


def reference(open_named, data, name, **config):
    """A log holding exactly ``data`` (whole batches), built as a follower."""
    ref = open_named(name, **config)
    if data:
        assert ref.append_as_follower(data, now_ms=0).valid_bytes == len(data)
    ref.update_high_watermark(ref.log_end_offset)
    return ref


def test_recovery_cut_at_every_batch_boundary_leaves_a_consistent_txnindex(open_named):
    log = open_named("leader")
    txn(log, 1, 0)                                         # 0-1
    txn(log, 2, 0)                                         # 2-3
    end(log, 1, commit=False)                              # 4
    txn(log, 3, 0)                                         # 5-6
    end(log, 2, commit=False)                              # 7
    end(log, 3, commit=True)                               # 8
    data = log.read(0, 1 << 20, max_offset=LAST)
    log.close()
    ends = [0]
    while ends[-1] < len(data):
        ends.append(ends[-1] + records.read_header(data, ends[-1]).size)
    for cut in sorted(set(ends) | {e + 7 for e in ends[:-1]} | {e - 3 for e in ends[1:]}):
        path = os.path.join(log.path, f"{0:020d}.log")
        with open(path, "wb") as f:                        # txnindex still names every abort
            f.write(data[:cut])
        crashed = PartitionLog.open(log.path, log.config, now_ms=0, recover=True)
        kept = max(e for e in ends if e <= cut)
        ref = reference(open_named, data[:kept], f"ref-{cut}")
        assert txn_state(crashed) == txn_state(ref), cut
        crashed.close()


def test_recovery_rebuilds_a_txnindex_lost_in_a_crash(open_named):
    log = spread(open_named(**SMALL))
    log.flush(now_ms=0)
    log.write_recovery_point(0)                            # the point: today's log end
    end(log, 1, commit=False)                              # after it, never flushed
    txn(log, 2, 6)
    end(log, 2, commit=False)
    expected = txn_state(log)
    for segment in log.segments:
        segment.close()
    assert log.segments[-1].base_offset in expected[4]
    os.unlink(log.segments[-1].txn_index.path)             # its page cache was lost
    again = open_named(recover=True, **SMALL)
    assert txn_state(again) == expected


# -- followers and replicated mode --------------------------------------------------------------

def flat(entries: dict) -> list:
    return [entry for base in sorted(entries) for entry in entries[base]]


@pytest.mark.parametrize("fetch_bytes", [1, 300])
def test_follower_tracks_transactions_as_the_leader(open_named, fetch_bytes):
    leader = spread(open_named("leader", **SMALL))
    txn(leader, 5, 0)
    end(leader, 5, commit=False)
    follower = open_named("follower", **SMALL)
    follower.enable_replication()
    while follower.log_end_offset < leader.log_end_offset:   # 1 byte: a batch per fetch
        data = leader.read(follower.log_end_offset, fetch_bytes, max_offset=LAST)
        follower.append_as_follower(data, now_ms=0)
    follower.update_high_watermark(leader.high_watermark)
    assert txn_state(follower)[:4] == txn_state(leader)[:4]
    assert flat(index_entries(follower)) == flat(index_entries(leader))
    if fetch_bytes == 1:       # the same segments: the same files
        assert index_entries(follower) == index_entries(leader)
    # a follower that becomes leader goes on with the same state
    end(follower, 1, commit=True)
    assert follower.ongoing_transactions() == {}


def test_replicated_lso_waits_for_the_marker_to_be_replicated(open_named):
    log = open_named()
    log.enable_replication()
    txn(log, 7, 0)                                          # 0-1
    end(log, 7, commit=True)                                # 2
    assert log.high_watermark == 0 and log.last_stable_offset == 0
    log.update_high_watermark(2)                            # data replicated, marker not
    assert log.last_stable_offset == 0
    log.update_high_watermark(3)
    assert log.last_stable_offset == 3
    txn(log, 8, 0)                                          # 3-4
    log.update_high_watermark(5)
    assert log.last_stable_offset == 3


def test_truncation_drops_index_entries_and_reopens_transactions(open_named):
    log = open_named(**SMALL)
    log.enable_replication()
    txn(log, 1, 0)                                         # 0-1
    log.append(build_batch([b"x" * 60] * 3), now_ms=0)    # 2-4
    end(log, 1, commit=False)                              # 5
    txn(log, 2, 0)                                         # 6-7
    log.update_high_watermark(log.log_end_offset)
    log.truncate_to(6)
    assert log.ongoing_transactions() == {} and log.aborted_transactions(0, LAST) == [(1, 0)]
    log.truncate_to(5)                                     # the abort marker goes
    assert log.ongoing_transactions() == {1: 0} and log.last_stable_offset == 0
    assert log.aborted_transactions(0, LAST) == [] and index_entries(log) == {}
    end(log, 1, commit=True)                               # the new leader's decision
    assert log.last_stable_offset == 0                     # until the marker is replicated
    log.update_high_watermark(6)
    expected = txn_state(log)
    log.close()
    assert txn_state(open_named(recover=True, **SMALL)) == expected


def test_truncate_fully_forgets_transactions(open_named):
    log = spread(open_named(**SMALL))
    log.truncate_fully_and_start_at(1_000)
    assert log.ongoing_transactions() == {} and log.aborted_transactions(1_000, LAST) == []
    assert index_entries(log) == {} and log.last_stable_offset == 1_000
    txn(log, 9, 0)
    log.close()
    assert open_named(**SMALL).ongoing_transactions() == {9: 1_000}


# -- retention ----------------------------------------------------------------------------------

def test_retention_deletes_txnindexes_and_keeps_transactions_open_below_the_log_start(open_named):
    log = spread(open_named(**SMALL))
    before = index_entries(log)
    marker_segments = sorted(before)
    cut = log.segments[-2].base_offset
    assert log.delete_records(cut) == cut
    assert log.ongoing_transactions() == {1: 0}            # Kafka keeps it
    assert log.last_stable_offset == log.log_start_offset  # clamped to the log start
    assert index_entries(log) == {b: e for b, e in before.items() if b >= cut}
    assert all(not os.path.exists(os.path.join(log.path, f"{b:020d}.txnindex"))
               for b in marker_segments if b < cut)
    expected = [a for a in log.aborted_transactions(0, LAST)]
    assert log.aborted_transactions(cut, LAST) == expected
    end(log, 1, commit=False)
    assert log.aborted_transactions(cut, LAST)[-1] == (1, 0)
    assert log.last_stable_offset == log.high_watermark
    state = txn_state(log)
    log.close()
    assert txn_state(open_named(**SMALL)) == state
