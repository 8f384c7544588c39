"""PartitionLog: append, read, timestamps, config, reopen."""
from __future__ import annotations

import os
import time

import pytest
from logkit import build_batch, decode
from kafka.record.default_records import DefaultRecordBatch

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.config import LogConfig


def fill(log, n, *, per_batch=3, size=20, ts0=1_000, now_ms=0):
    results = []
    for i in range(n):
        values = [b"%d-%d-" % (i, j) + b"x" * size for j in range(per_batch)]
        results.append(log.append(build_batch(values, timestamp=ts0 + 10 * i), now_ms=now_ms))
    return results


def test_append_assigns_contiguous_offsets_and_stamps_epoch(open_log):
    log = open_log()
    log.set_leader_epoch(3, 0)
    results = fill(log, 5)
    assert [(r.base_offset, r.last_offset) for r in results] == [(3 * i, 3 * i + 2) for i in range(5)]
    assert log.log_end_offset == log.high_watermark == 15
    assert all(r.log_append_time_ms == -1 and not r.duplicate and r.record_count == 3
               for r in results)
    data = log.read(0, 1 << 20)
    assert [o for o, _, _ in decode(data)] == list(range(15))
    assert {h.partition_leader_epoch for h in records.iter_batches(data)} == {3}


def test_read_mid_batch_offset_returns_containing_batch(open_log):
    log = open_log(index_interval_bytes=100)
    fill(log, 20)
    for offset in range(60):
        first = next(records.iter_batches(log.read(offset, 1)))
        assert first.base_offset <= offset <= first.last_offset


def test_read_limits_whole_batches_and_min_one_batch(open_log):
    log = open_log()
    fill(log, 10)
    one = len(log.read(0, 1))
    assert decode(log.read(0, 1))[-1][0] == 2
    assert len(log.read(0, 2 * one + 5)) == 2 * one
    assert log.read(0, one - 1, min_one_batch=False) == b""
    assert log.read(30, 100) == b""
    assert log.read(4, 1 << 20, max_offset=9) == log.read(3, 2 * one)


def test_read_out_of_range(open_log):
    log = open_log()
    fill(log, 2)
    for bad in (-1, 7, 100):
        with pytest.raises(KafkaApiError) as err:
            log.read(bad, 100)
        assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_reads_cross_segment_boundaries(open_log):
    log = open_log(segment_bytes=300, index_interval_bytes=64)
    fill(log, 30)
    assert len(log.segments) > 5
    for start in (0, 5, 31, 88):
        got = [o for o, _, _ in decode(log.read(start, 1 << 20))]
        assert got[0] <= start and got == list(range(got[0], 90))
    # segment bases line up with batch boundaries and offsets stay contiguous
    assert [s.base_offset for s in log.segments] == sorted({s.base_offset for s in log.segments})
    assert all(a.next_offset == b.base_offset for a, b in zip(log.segments, log.segments[1:]))


def test_roll_on_segment_ms_uses_record_timestamps(open_log):
    log = open_log(segment_ms=1_000)
    log.append(build_batch([b"a"], timestamp=10_000), now_ms=0)
    log.append(build_batch([b"b"], timestamp=10_500), now_ms=0)
    assert len(log.segments) == 1
    log.append(build_batch([b"c"], timestamp=11_001), now_ms=0)
    assert len(log.segments) == 2 and log.segments[1].base_offset == 2


def test_offset_for_timestamp_and_max_timestamp(open_log):
    log = open_log(segment_bytes=400, index_interval_bytes=50)
    # timestamps out of order inside and across batches
    stamps = [[5_000, 4_000, 6_000], [1_000, 9_000, 2_000], [7_000, 7_000, 3_000],
              [9_000, 8_000, 100]]
    for _ in range(3):
        for ts in stamps:
            log.append(build_batch([b"v"] * 3, timestamps=ts), now_ms=0)
    flat = [t for _ in range(3) for ts in stamps for t in ts]

    def expected(target):
        hits = [(o, t) for o, t in enumerate(flat) if t >= target]
        return hits[0] if hits else None
    for target in (0, 100, 4_500, 6_000, 6_001, 8_500, 9_000, 9_001):
        assert log.offset_for_timestamp(target) == expected(target), target
    assert log.max_timestamp() == (4, 9_000)
    log.close()


def test_timestamps_in_compressed_batches(open_log):
    log = open_log()
    log.append(build_batch([b"a" * 50] * 4, timestamps=[10, 40, 20, 30], compression=1), now_ms=0)
    assert log.offset_for_timestamp(25) == (1, 40)
    assert log.max_timestamp() == (1, 40)
    assert log.offset_for_timestamp(41) is None


def test_log_append_time_rewrites_with_valid_crc(open_log):
    log = open_log(message_timestamp_type="LogAppendTime")
    result = log.append(build_batch([b"a", b"b"], timestamp=5, compression=1), now_ms=777)
    assert result.log_append_time_ms == 777
    data = log.read(0, 1 << 20)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [777, 777]
    assert log.offset_for_timestamp(700) == (0, 777)
    assert records.scan_valid_prefix(data)[1] == len(data)   # producers may not send LogAppendTime


def test_message_larger_than_max_message_bytes_rejected(open_log):
    log = open_log(max_message_bytes=200)
    with pytest.raises(KafkaApiError) as err:
        log.append(build_batch([b"x" * 300]), now_ms=0)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0 and log.size_bytes() == 0
    log.update_config(LogConfig(max_message_bytes=1000))
    assert log.append(build_batch([b"x" * 300]), now_ms=0).base_offset == 0


def test_corrupt_produce_data_changes_nothing(open_log):
    log = open_log()
    bad = bytearray(build_batch([b"a"]))
    bad[-1] ^= 1
    with pytest.raises(KafkaApiError) as err:
        log.append(bytes(bad), now_ms=0)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.size_bytes() == 0


def test_needs_flush_and_flush_due(open_log):
    log = open_log(flush_interval_messages=5, flush_interval_ms=1_000)
    assert not log.append(build_batch([b"a"] * 3), now_ms=0).needs_flush
    assert log.append(build_batch([b"a"] * 3), now_ms=0).needs_flush
    log.flush()
    assert not log.append(build_batch([b"a"]), now_ms=10).needs_flush
    assert not log.flush_due(500)
    assert log.flush_due(1_000)
    log.flush(1_000)
    assert not log.flush_due(2_500)      # nothing unflushed


def test_clean_reopen_keeps_everything(open_log):
    log = open_log(segment_bytes=500, index_interval_bytes=64)
    fill(log, 40)
    before = log.read(0, 1 << 20)
    state = (log.log_end_offset, [s.base_offset for s in log.segments], log.max_timestamp())
    log.close()
    again = open_log(segment_bytes=500, index_interval_bytes=64)
    assert (again.log_end_offset, [s.base_offset for s in again.segments],
            again.max_timestamp()) == state
    assert again.read(0, 1 << 20) == before
    assert again.offset_for_timestamp(1_205) == (63, 1_210)
    assert again.append(build_batch([b"z"]), now_ms=0).base_offset == 120


def test_clean_open_does_not_read_old_segment_data(open_log, tmp_path):
    log = open_log(segment_bytes=2_000, index_interval_bytes=64)
    fill(log, 60)
    assert len(log.segments) > 4
    old = log.segments[0]
    log.close()
    with open(old.log_path, "r+b") as f:          # wreck the middle of an old segment
        f.seek(old.size // 2)
        f.write(b"\xff" * 200)
    again = open_log(segment_bytes=2_000, index_interval_bytes=64)
    assert again.log_end_offset == 180            # not detected: nothing was read there
    again.close()
    recovered = open_log(recover=True, segment_bytes=2_000, index_interval_bytes=64)
    assert recovered.log_end_offset == 180        # old segment indexes sane: still trusted


def test_clean_open_is_fast_for_a_large_log(open_log):
    log = open_log(segment_bytes=1 << 20)
    batch = build_batch([b"y" * 1_000] * 50)
    for _ in range(200):                          # ~10 MB in 10 segments
        log.append(batch, now_ms=0)
    log.close()
    t0 = time.perf_counter()
    again = open_log(segment_bytes=1 << 20)
    assert time.perf_counter() - t0 < 0.25
    assert again.log_end_offset == 200 * 50


def test_torn_index_is_rebuilt_on_clean_open(open_log):
    log = open_log(segment_bytes=800, index_interval_bytes=64)
    fill(log, 20)
    log.close()
    index = log.segments[0].offset_index.path
    entries = os.path.getsize(index)
    with open(index, "ab") as f:
        f.write(b"\x01\x02\x03")
    again = open_log(segment_bytes=800, index_interval_bytes=64)
    assert os.path.getsize(index) == entries
    assert [o for o, _, _ in decode(again.read(0, 1 << 20))] == list(range(60))


def test_leader_epoch_checkpoint(open_log):
    log = open_log()
    assert log.leader_epoch == 0
    fill(log, 2)
    log.set_leader_epoch(1, 6)
    fill(log, 2)
    log.set_leader_epoch(4, 12)
    log.set_leader_epoch(2, 12)                   # stale: ignored
    assert log.leader_epoch == 4
    assert log.epoch_end_offset(1) == (1, 12)
    assert log.epoch_end_offset(3) == (1, 12)
    assert log.epoch_end_offset(4) == (4, 12)
    assert log.epoch_end_offset(5) == (-1, -1)
    log.close()
    assert open_log().leader_epoch == 4


def test_delete_removes_directory(open_log, tmp_path):
    log = open_log()
    fill(log, 2)
    log.delete()
    assert not os.path.exists(tmp_path / "t-0")


def test_flush_in_a_worker_thread_while_appending_and_rolling(open_log):
    import threading
    log = open_log(segment_bytes=2_000, flush_interval_messages=10)
    errors, stop = [], threading.Event()

    def flusher():
        while not stop.is_set():
            try:
                log.flush()
            except Exception as exc:             # pragma: no cover - the assertion reports it
                errors.append(exc)
    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        fill(log, 300)
        log.update_config(LogConfig(segment_bytes=2_000, retention_bytes=0))
        log.apply_retention(0)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert log.log_end_offset == 900 and len(log.segments) == 1


def test_flush_due_then_flush_restarts_the_clock(open_log):
    log = open_log(flush_interval_ms=100)
    log.append(build_batch([b"a"]), now_ms=0)
    assert log.flush_due(100)
    log.flush(now_ms=100)
    log.append(build_batch([b"a"]), now_ms=150)
    assert not log.flush_due(150) and log.flush_due(200)


def test_many_batches_in_one_append_are_written_whole(open_log):
    """One produce of 700 batches: 1,400 buffers to writev, more than one call takes (IOV_MAX)."""
    log = open_log()
    blob = b"".join(build_batch([b"v%d" % i], timestamp=1_000 + i) for i in range(700))
    result = log.append(blob, now_ms=0)
    assert (result.base_offset, result.last_offset) == (0, 699)
    assert [(o, v) for o, _, v in decode(log.read(0, 1 << 30))] == [(i, b"v%d" % i) for i in range(700)]


def test_short_writes_resume_where_they_stopped(open_log, monkeypatch):
    """The kernel may write fewer bytes than asked (a signal, a nearly full disk): the rest follows."""
    log = open_log()
    real = os.writev

    def dribble(fd, buffers):
        first = bytes(next(b for b in buffers if len(b)))
        return real(fd, [first[:7]])
    monkeypatch.setattr(os, "writev", dribble)
    blob = b"".join(build_batch([b"a" * 50, b"b"], timestamp=2_000 + i) for i in range(5))
    assert log.append(blob, now_ms=0).last_offset == 9
    monkeypatch.undo()
    assert [v for _, _, v in decode(log.read(0, 1 << 20))] == [b"a" * 50, b"b"] * 5
