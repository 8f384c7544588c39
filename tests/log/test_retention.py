"""Retention by time and size, DeleteRecords, and the log start offset."""
from __future__ import annotations

import os

import pytest
from logkit import build_batch, decode

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.config import LogConfig


def fill(log, n, *, ts0=10_000):
    for i in range(n):
        log.append(build_batch([b"r" * 40] * 2, timestamp=ts0 + 100 * i), now_ms=0)


def test_retention_by_time_deletes_only_closed_expired_segments(open_log):
    log = open_log(segment_bytes=400, retention_ms=1_000)
    fill(log, 30)
    segments = list(log.segments)
    assert len(segments) > 4
    # now = largest timestamp of segment 1 + retention + 1: segments 0 and 1 expire
    now = segments[1].max_timestamp + 1_001
    assert log.apply_retention(now) == 2
    assert log.segments == segments[2:]
    assert log.log_start_offset == segments[2].base_offset
    assert not os.path.exists(segments[0].log_path)
    with pytest.raises(KafkaApiError) as err:
        log.read(0, 100)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    # far future: everything but the active segment goes
    assert log.apply_retention(10**12) == len(segments) - 3
    assert log.segments == segments[-1:]
    assert log.log_start_offset == segments[-1].base_offset


def test_retention_forever(open_log):
    log = open_log(segment_bytes=400, retention_ms=-1)
    fill(log, 30)
    assert log.apply_retention(10**15) == 0


def test_retention_by_size(open_log):
    log = open_log(segment_bytes=400, retention_ms=-1, retention_bytes=1_000)
    fill(log, 30)
    segments = list(log.segments)
    total = log.size_bytes()
    deleted = log.apply_retention(0)
    assert deleted > 0
    remaining = log.size_bytes()
    assert remaining < total
    # Kafka's rule: delete while (size - retention_bytes) >= segment size
    assert remaining - 1_000 < log.segments[0].size or len(log.segments) == 1
    assert log.segments == segments[deleted:]
    assert log.log_start_offset == log.segments[0].base_offset
    assert decode(log.read(log.log_start_offset, 1 << 20))[0][0] == log.log_start_offset


def test_retention_config_changes_live(open_log):
    log = open_log(segment_bytes=400)
    fill(log, 20)
    assert log.apply_retention(0) == 0
    closed = len(log.segments) - 1
    log.update_config(LogConfig(segment_bytes=400, retention_bytes=0))
    assert log.apply_retention(0) == closed
    assert len(log.segments) == 1


def test_delete_records_moves_log_start_offset_and_persists(open_log):
    log = open_log(segment_bytes=400)
    fill(log, 30)
    segments = list(log.segments)
    target = segments[2].base_offset + 1
    assert log.delete_records(target) == target
    assert log.log_start_offset == target
    assert log.segments == segments[2:]
    first = decode(log.read(target, 1 << 20))[0][0]
    assert first <= target
    with pytest.raises(KafkaApiError) as err:
        log.read(target - 1, 100)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.delete_records(0) == target          # never moves backwards
    log.close()
    again = open_log(segment_bytes=400)
    assert again.log_start_offset == target
    assert again.offset_for_timestamp(0)[0] == target


def test_delete_records_to_high_watermark_and_beyond(open_log):
    log = open_log(segment_bytes=400)
    fill(log, 10)
    with pytest.raises(KafkaApiError) as err:
        log.delete_records(log.high_watermark + 1)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.delete_records(-1) == log.high_watermark == 20
    assert len(log.segments) == 1
    assert log.read(20, 100) == b""
    assert log.append(build_batch([b"x"]), now_ms=0).log_start_offset == 20
