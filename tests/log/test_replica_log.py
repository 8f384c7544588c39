"""PartitionLog as a Kafka replica: replicated mode, follower append, truncation, epochs."""
from __future__ import annotations

import errno
import os

import pytest
from logkit import build_batch, decode

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log import checkpoints
from kwire.log.config import LogConfig
from kwire.log.partition import RECOVERY_POINT_INTERVAL_MS, PartitionLog

LAST = 1 << 40          # max_offset for reads past the high watermark


def fill(log, n, *, per_batch=3, first=0, ts0=1_000, **batch):
    for i in range(first, first + n):
        values = [b"%d-%d-" % (i, j) + b"x" * 20 for j in range(per_batch)]
        log.append(build_batch(values, timestamp=ts0 + 10 * i, **batch), now_ms=0)


def everything(log) -> bytes:
    return log.read(log.log_start_offset, 1 << 30, max_offset=LAST)


def replicate(leader, follower, *, max_bytes=1 << 30):
    """Copy ``leader`` into ``follower`` as a fetcher would, ``max_bytes`` per fetch."""
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, max_bytes, max_offset=LAST)
        result = follower.append_as_follower(data, now_ms=0)
        assert result.valid_bytes == len(data) and result.record_count > 0


def leader_with_epochs(open_named, name="leader", **config):
    """Epoch 1 at 0 (batches 0-2, 3-5, 6-8, then producer 7's 9-10), epoch 3 at 11 (11-13,
    14-16, 17-19 gzip, then producer 7's 20): log end offset 21."""
    leader = open_named(name, **config)
    leader.set_leader_epoch(1, 0)
    fill(leader, 3)
    leader.append(build_batch([b"p0", b"p1"], producer_id=7, producer_epoch=0, base_sequence=0),
                  now_ms=0)
    leader.set_leader_epoch(3, leader.log_end_offset)
    fill(leader, 3, first=3, compression=1)
    leader.append(build_batch([b"p2"], producer_id=7, producer_epoch=0, base_sequence=2),
                  now_ms=0)
    return leader


def check_segments(log):
    """Every segment's derived state matches its batches; index entries point at batch starts."""
    for segment in log.segments:
        headers = list(segment.iter_headers(0))
        assert segment.size == sum(h.size for h in headers) == os.path.getsize(segment.log_path)
        assert segment.next_offset == (headers[-1].next_offset if headers else segment.base_offset)
        if segment is log.segments[-1]:      # segment.ms: only the active segment needs it
            assert segment.first_batch_timestamp == (headers[0].max_timestamp if headers else None)
        if headers:
            top = max(headers, key=lambda h: (h.max_timestamp, -h.base_offset))
            assert (segment.max_timestamp, segment.max_timestamp_offset) == (top.max_timestamp,
                                                                               top.last_offset)
        starts = {h.position: h.base_offset - segment.base_offset for h in headers}
        assert all(starts.get(position) == key for key, position in segment.offset_index.entries())
        assert all(segment.base_offset + rel < segment.next_offset
                   for _, rel in segment.time_index.entries())


def state(log):
    """What a reopen must reproduce."""
    return (log.log_start_offset, log.log_end_offset, everything(log),
            [s.base_offset for s in log.segments], log._epochs.entries, log.latest_epoch(),
            {pid: (e.epoch, list(e.batches)) for pid, e in log._producers._producers.items()})


# -- follower append -------------------------------------------------------------------------

def test_follower_append_stores_the_leader_bytes_and_epochs(open_named):
    leader = leader_with_epochs(open_named)
    follower = open_named("follower")
    follower.enable_replication()
    replicate(leader, follower, max_bytes=200)       # several fetches, some of many batches
    assert everything(follower) == everything(leader)
    assert follower.log_end_offset == leader.log_end_offset == 21
    assert follower._epochs.entries == leader._epochs.entries == [(1, 0), (3, 11)]
    assert follower.latest_epoch() == 3 and follower.leader_epoch == 0   # set by the cluster
    assert follower.high_watermark == 0
    assert [o for o, _, _ in decode(everything(follower))] == list(range(21))


def test_follower_accepts_log_append_time_batches(open_named):
    leader = open_named("leader", message_timestamp_type="LogAppendTime")
    leader.set_leader_epoch(2, 0)
    fill(leader, 4)
    follower = open_named("follower")
    replicate(leader, follower)
    assert everything(follower) == everything(leader)
    assert all(h.timestamp_type == 1 for h in records.iter_batches(everything(follower)))
    assert follower.offset_for_timestamp(0) == leader.offset_for_timestamp(0)


def test_trailing_partial_batch_is_left_for_the_next_fetch(open_named):
    leader = leader_with_epochs(open_named)
    follower = open_named("follower")
    data = everything(leader)
    sizes = [h.size for h in records.iter_batches(data)]
    for cut in (5, 40, sizes[2] - 1):                # < 12 bytes, header cut, body cut
        chunk = data[:sizes[0] + sizes[1] + cut]
        result = follower.append_as_follower(chunk, now_ms=0)
        assert result.valid_bytes == sizes[0] + sizes[1]
        assert (result.base_offset, result.last_offset, result.record_count) == (0, 5, 6)
        assert follower.log_end_offset == 6
        follower.truncate_to(0)
    result = follower.append_as_follower(data[:sizes[0] // 2], now_ms=0)   # nothing whole
    assert (result.valid_bytes, result.record_count, follower.log_end_offset) == (0, 0, 0)
    replicate(leader, follower)
    assert everything(follower) == data


def test_empty_input_is_a_no_op(open_named):
    follower = open_named("follower")
    fill(follower, 1)
    for empty in (b"", memoryview(b"")):
        result = follower.append_as_follower(empty, now_ms=0)
        assert (result.record_count, result.valid_bytes, result.base_offset) == (0, 0, 3)
    assert follower.log_end_offset == 3


def test_offsets_must_not_go_back_but_may_skip_what_a_cleaner_dropped(open_named):
    leader = leader_with_epochs(open_named)
    data = everything(leader)
    headers = list(records.iter_batches(data))
    backwards = data[headers[0].size:headers[0].size + headers[1].size] + data[:headers[0].size]
    follower = open_named("follower")
    with pytest.raises(KafkaApiError) as err:        # batches going backwards
        follower.append_as_follower(backwards, now_ms=0)
    assert err.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    replicate(leader, follower)
    with pytest.raises(KafkaApiError) as err:        # already there: below the log end
        follower.append_as_follower(data[headers[0].size:], now_ms=0)
    assert err.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert everything(follower) == data and not follower.offline
    # a gap, as Kafka's followers take one (the leader's cleaner dropped the batches between)
    gapped = open_named("gapped")
    gap = data[:headers[0].size] + data[headers[0].size + headers[1].size:]
    gapped.append_as_follower(gap, now_ms=0)
    assert gapped.log_end_offset == leader.log_end_offset and everything(gapped) == gap


def test_corrupt_whole_batch_is_rejected(open_named):
    leader = leader_with_epochs(open_named)
    data = bytearray(everything(leader))
    second = next(records.iter_batches(data)).size
    data[second + 70] ^= 0xFF                        # in the second batch's records
    follower = open_named("follower")
    with pytest.raises(KafkaApiError) as err:
        follower.append_as_follower(bytes(data), now_ms=0)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE and "CRC" in err.value.message
    data = bytearray(everything(leader))
    data[second + records.MAGIC_OFFSET] = 1
    with pytest.raises(KafkaApiError) as err:        # magic 1, even cut short
        follower.append_as_follower(bytes(data[:second + 30]), now_ms=0)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    assert follower.log_end_offset == 0


def test_retried_batch_is_a_duplicate_once_the_follower_leads(open_named):
    leader = leader_with_epochs(open_named)
    follower = open_named("follower")
    replicate(leader, follower)
    follower.set_leader_epoch(5, follower.log_end_offset)        # becomes leader
    retry = build_batch([b"p2"], producer_id=7, producer_epoch=0, base_sequence=2)
    result = follower.append(retry, now_ms=0)
    assert result.duplicate and (result.base_offset, result.last_offset) == (20, 20)
    nxt = follower.append(build_batch([b"p3"], producer_id=7, producer_epoch=0,
                                      base_sequence=3), now_ms=0)
    assert not nxt.duplicate and nxt.base_offset == 21
    with pytest.raises(KafkaApiError) as err:
        follower.append(build_batch([b"p9"], producer_id=7, producer_epoch=0,
                                    base_sequence=9), now_ms=0)
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


# -- high watermark --------------------------------------------------------------------------

def test_high_watermark_in_single_node_and_replicated_mode(open_named):
    log = open_named("p")
    fill(log, 2)
    assert log.high_watermark == log.log_end_offset == 6 and not log.replicated
    log.enable_replication()
    assert log.replicated and log.high_watermark == 0           # no checkpoint yet
    fill(log, 2, first=2)
    assert log.high_watermark == 0 and log.log_end_offset == 12
    assert log.read(0, 1 << 20) == b""                           # consumers stop at the HW
    assert log.update_high_watermark(5) and log.high_watermark == 5
    assert not log.update_high_watermark(3) and log.high_watermark == 5
    assert not log.update_high_watermark(5)
    assert log.update_high_watermark(100) and log.high_watermark == 12
    log.enable_replication()                                     # idempotent
    assert log.high_watermark == 12


def test_high_watermark_checkpoint_survives_reopen(open_named, tmp_path):
    log = open_named("p")
    log.enable_replication()
    fill(log, 4)
    log.update_high_watermark(7)
    assert log.flush_due(RECOVERY_POINT_INTERVAL_MS)
    log.flush(RECOVERY_POINT_INTERVAL_MS)
    assert checkpoints.read_high_watermark(log.path) == 7
    log.update_high_watermark(9)                                 # not written per update
    assert checkpoints.read_high_watermark(log.path) == 7
    assert log.flush_due(2 * RECOVERY_POINT_INTERVAL_MS)        # only the HW is stale
    log.flush(2 * RECOVERY_POINT_INTERVAL_MS)
    assert checkpoints.read_high_watermark(log.path) == 9
    assert not log.flush_due(3 * RECOVERY_POINT_INTERVAL_MS)
    log.update_high_watermark(10)
    assert log.close()
    again = open_named("p")
    assert again.high_watermark == again.log_end_offset == 12   # single-node until enabled
    again.enable_replication()
    assert again.high_watermark == 10
    checkpoints.write_high_watermark(again.path, 500)            # above the log end: clamped
    third = open_named("p")
    third.enable_replication()
    assert third.high_watermark == 12


def test_single_node_mode_writes_no_high_watermark_checkpoint(open_named):
    log = open_named("p")
    fill(log, 2)
    assert log.close()
    assert checkpoints.read_high_watermark(log.path) is None


def test_malformed_high_watermark_checkpoint_takes_the_partition_offline(tmp_path):
    path = tmp_path / "p"
    path.mkdir()
    (path / checkpoints.HIGH_WATERMARK_FILE).write_text("0\nlots\n")
    log = PartitionLog.open(str(path), LogConfig(), now_ms=0, recover=False)
    assert log.offline and checkpoints.HIGH_WATERMARK_FILE in log.health.offline_reason


# -- truncation ------------------------------------------------------------------------------

SMALL = {"segment_bytes": 250, "index_interval_bytes": 100}


@pytest.mark.parametrize("target,end", [(11, 11), (12, 11), (13, 11), (2, 0), (5, 3), (9, 9),
                                        (10, 9), (14, 14), (19, 17), (20, 20), (0, 0)])
def test_truncate_to_removes_the_batch_holding_the_offset(open_named, target, end):
    leader = leader_with_epochs(open_named, **SMALL)
    data = everything(leader)
    follower = open_named("follower", **SMALL)
    follower.enable_replication()
    replicate(leader, follower, max_bytes=1)        # one batch per fetch: segments as the leader's
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    assert len(follower.segments) > 3
    follower.update_high_watermark(15)
    follower.truncate_to(target)
    assert follower.log_end_offset == end and follower.high_watermark == min(15, end)
    kept = b"".join(data[h.position:h.position + h.size] for h in records.iter_batches(data)
                    if h.last_offset < end)
    assert everything(follower) == kept
    names = sorted(n for n in os.listdir(follower.path) if n.endswith(".log"))
    assert names == [f"{s.base_offset:020d}.log" for s in follower.segments]
    assert all(s.base_offset <= end for s in follower.segments)
    check_segments(follower)
    records_left = decode(kept)
    if records_left:
        top = max(records_left, key=lambda r: r[1])
        assert follower.max_timestamp() == (top[0], top[1])
    for offset in range(end):                        # the indexes still find every batch
        first = next(records.iter_batches(follower.read(offset, 1, max_offset=LAST)))
        assert first.base_offset <= offset <= first.last_offset
    assert follower._epochs.entries == [e for e in leader._epochs.entries if e[1] < end]
    replicate(leader, follower, max_bytes=1)         # fetching continues at the new end
    assert everything(follower) == data
    assert follower._epochs.entries == leader._epochs.entries
    check_segments(follower)


def test_truncate_to_at_or_past_the_end_does_nothing(open_named):
    log = leader_with_epochs(open_named)
    before = state(log)
    log.truncate_to(21)
    log.truncate_to(100)
    assert state(log) == before
    with pytest.raises(ValueError):
        log.truncate_to(-1)


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("target,end", [(16, 14), (11, 11)])   # mid segment, whole segment
def test_reopen_after_truncation_gives_the_same_state(open_named, clean, target, end):
    log = leader_with_epochs(open_named, **SMALL)
    log.flush(0)
    log.truncate_to(13)
    fill(log, 2, first=20)                           # appended after the truncation: 11..16
    log.truncate_to(target)
    expected = state(log)
    assert expected[1] == end
    check_segments(log)
    if clean:
        assert log.close()
    again = open_named("leader", recover=not clean, **SMALL)
    assert state(again) == expected
    check_segments(again)
    fill(again, 1, first=30)
    assert again.log_end_offset == end + 3


def test_truncation_keeps_the_producer_state_of_what_is_left(open_named):
    log = leader_with_epochs(open_named)
    log.truncate_to(20)                              # producer 7's second batch goes
    retry = build_batch([b"p2"], producer_id=7, producer_epoch=0, base_sequence=2)
    result = log.append(retry, now_ms=0)
    assert not result.duplicate and result.base_offset == 20
    assert log.append(retry, now_ms=0).duplicate


def test_truncate_fully_and_start_at(open_named):
    log = leader_with_epochs(open_named, **SMALL)
    log.enable_replication()
    log.update_high_watermark(10)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (50, 50, 50)
    assert [s.base_offset for s in log.segments] == [50]
    assert sorted(n for n in os.listdir(log.path) if n.endswith(".log")) == [f"{50:020d}.log"]
    assert log.latest_epoch() is None and log.leader_epoch == 3
    assert everything(log) == b""
    source = open_named("source")
    source.truncate_fully_and_start_at(50)
    source.set_leader_epoch(6, 50)
    fill(source, 2)
    replicate(source, log)
    assert everything(log) == everything(source) and log.latest_epoch() == 6
    expected = state(log)
    again = open_named("leader", recover=True, **SMALL)
    assert state(again) == expected


def test_truncate_below_the_first_segment_starts_over(open_named):
    log = leader_with_epochs(open_named, **SMALL)
    log.delete_records(9)
    log.apply_retention(0)
    first = log.segments[0].base_offset
    assert first > 0
    log.truncate_to(first - 1)
    assert (log.log_start_offset, log.log_end_offset) == (first - 1, first - 1)


def test_truncation_below_the_log_start_moves_it_back(open_named):
    log = leader_with_epochs(open_named)
    log.delete_records(7)
    log.truncate_to(4)                               # the batch 3..5 goes too
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)


def test_failed_truncation_takes_the_partition_offline(open_named, monkeypatch):
    log = leader_with_epochs(open_named)
    real = os.ftruncate

    def broken(fd, length):
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    monkeypatch.setattr(os, "ftruncate", broken)
    with pytest.raises(KafkaApiError) as err:
        log.truncate_to(5)
    monkeypatch.setattr(os, "ftruncate", real)
    assert err.value.code == ErrorCode.KAFKA_STORAGE_ERROR and log.offline
    with pytest.raises(KafkaApiError):
        log.truncate_to(2)
    with pytest.raises(KafkaApiError):
        log.append_as_follower(b"", now_ms=0)


# -- leader epochs ---------------------------------------------------------------------------

def test_epoch_end_offset_follows_kafka(open_named):
    log = open_named("p")
    log.set_leader_epoch(2, 0)
    fill(log, 2)
    log.set_leader_epoch(4, 6)
    fill(log, 2, first=2)
    log.set_leader_epoch(7, 12)
    fill(log, 1, first=4)
    assert log.epoch_end_offset(7) == (7, 15)        # latest: the log end
    assert log.epoch_end_offset(5) == (4, 12)        # unknown: largest below, next start
    assert log.epoch_end_offset(4) == (4, 12)
    assert log.epoch_end_offset(2) == (2, 6)
    assert log.epoch_end_offset(1) == (1, 0)         # below the first: start of the first
    assert log.epoch_end_offset(0) == (0, 0)
    assert log.epoch_end_offset(8) == (-1, -1)       # above the latest
    assert log.epoch_end_offset(-1) == (-1, -1)


def test_epoch_end_offset_without_epochs(open_named):
    log = open_named("p")
    fill(log, 2)
    assert log.epoch_end_offset(0) == (0, 6)         # single node: its current epoch
    assert log.latest_epoch() is None
    log.enable_replication()
    assert log.epoch_end_offset(0) == (-1, -1)       # replica: Kafka's empty cache


def test_leader_epoch_cache_truncates_from_end_like_kafka(tmp_path):
    cache = checkpoints.LeaderEpochCache(str(tmp_path))
    for epoch, start in ((1, 0), (3, 10), (4, 20)):
        cache.assign(epoch, start)
    cache.truncate_from_end(21)
    assert cache.entries == [(1, 0), (3, 10), (4, 20)]
    cache.truncate_from_end(20)                      # epoch 4 would hold nothing
    assert cache.entries == [(1, 0), (3, 10)]
    cache.load()
    assert cache.entries == [(1, 0), (3, 10)]
    cache.clear()
    cache.load()
    assert cache.entries == []


def test_flush_overlapping_a_truncation_keeps_the_truncated_recovery_point(open_named):
    log = leader_with_epochs(open_named)
    active, real, calls = log.segments[-1], log.segments[-1].flush, []

    def flush_then_truncate():      # a truncation lands while flush() is fsyncing
        real()
        if not calls:
            calls.append(1)
            log.truncate_to(5)
    active.flush = flush_then_truncate
    log.flush(RECOVERY_POINT_INTERVAL_MS)
    assert log.log_end_offset == 3
    assert log._flushed_point == log._end_point == (3, 0, log.segments[-1].size)
    assert checkpoints.read_recovery_point(log.path) == log._flushed_point


def test_clean_open_reads_the_first_batch_timestamp_of_the_active_segment(open_named):
    log = open_named("p", index_interval_bytes=0)      # every batch but the first is indexed
    fill(log, 3)
    assert log.close()
    again = open_named("p", index_interval_bytes=0)
    assert again.segments[-1].first_batch_timestamp == 1_002
    check_segments(again)
