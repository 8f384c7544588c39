"""Storage failures: all-or-nothing appends, offline partitions, corruption at rest, checkpoints.

Faults are injected by wrapping ``os.write``/``os.ftruncate``/``os.fsync`` so
that calls on one kind of file fail as a full or broken disk would make them.
"""
from __future__ import annotations

import errno
import logging
import os

import pytest
from logkit import build_batch, decode

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log import health
from kwire.log.config import LogConfig
from kwire.log.partition import PartitionLog

STORAGE = ErrorCode.KAFKA_STORAGE_ERROR


def fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def fail_on(monkeypatch, name: str, suffix: str, *, short: bool = False):
    """Make ``os.<name>`` fail with ENOSPC on files ending in ``suffix``; a short write
    (half the bytes) first when ``short``.  "write" covers ``os.writev`` too (the log is
    appended with writev).  Returns a function that removes the fault."""
    names = ("write", "writev") if name == "write" else (name,)
    reals = {n: getattr(os, n) for n in names}

    def breaker(n):
        def broken(fd, *args):
            if fd_path(fd).endswith(suffix):
                data = b"".join(bytes(b) for b in args[0]) if n == "writev" else bytes(args[0])
                if short and n in ("write", "writev") and len(data) > 1:
                    return reals["write"](fd, data[:len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return reals[n](fd, *args)
        return broken
    for n in names:
        monkeypatch.setattr(os, n, breaker(n))

    def heal():
        for n, real in reals.items():
            monkeypatch.setattr(os, n, real)
    return heal


def sizes(log) -> list[tuple[int, int, int]]:
    return [(os.path.getsize(s.log_path), os.path.getsize(s.offset_index.path),
             os.path.getsize(s.time_index.path)) for s in log.segments]


def append(log, value: bytes, now_ms: int = 0, ts: int = 1_000):
    return log.append(build_batch([value], timestamp=ts), now_ms=now_ms)


@pytest.mark.parametrize("suffix,short", [(".index", False), (".timeindex", False),
                                          (".log", False), (".log", True)])
def test_failed_write_leaves_files_and_offsets_as_they_were(open_log, monkeypatch, suffix, short):
    log = open_log(index_interval_bytes=0)
    for i in range(5):
        append(log, b"ok-%d" % i, ts=1_000 + i)
    before, leo = sizes(log), log.log_end_offset
    heal = fail_on(monkeypatch, "write", suffix, short=short)
    for i in range(3):
        with pytest.raises(KafkaApiError) as err:
            append(log, b"lost-%d" % i, ts=2_000 + i)
        assert err.value.code == STORAGE and "at file position" in err.value.message
    assert sizes(log) == before and log.log_end_offset == leo and not log.offline
    heal()
    assert append(log, b"after", ts=3_000).base_offset == leo       # no offset reused or skipped
    values = [v for _, _, v in decode(log.read(0, 1 << 20))]
    assert values == [b"ok-%d" % i for i in range(5)] + [b"after"]
    assert log.offset_for_timestamp(2_000) == (leo, 3_000)      # time index kept consistent
    log.close()
    again = PartitionLog.open(log.path, log.config, now_ms=0, recover=True)
    assert [v for _, _, v in decode(again.read(0, 1 << 20))] == values


def test_failed_roll_changes_nothing(open_log, monkeypatch):
    log = open_log(segment_bytes=300, index_interval_bytes=0)
    while len(log.segments) == 1:
        append(log, b"x" * 40)
    append(log, b"y" * 40)
    segments, leo = [s.base_offset for s in log.segments], log.log_end_offset
    heal = fail_on(monkeypatch, "write", ".timeindex")     # sealing the old segment fails
    with pytest.raises(KafkaApiError):
        while True:
            append(log, b"z" * 40, ts=5_000)
            segments, leo = [s.base_offset for s in log.segments], log.log_end_offset
    assert [s.base_offset for s in log.segments] == segments and log.log_end_offset == leo
    heal()
    assert append(log, b"z" * 40, ts=5_000).base_offset == leo


def test_undo_that_fails_takes_only_that_partition_offline(open_log, tmp_path, monkeypatch, caplog):
    log = open_log()
    other = PartitionLog.open(str(tmp_path / "t-1"), LogConfig(), now_ms=0, recover=False)
    append(log, b"a")
    append(other, b"a")
    fail_on(monkeypatch, "write", ".log", short=True)
    fail_on(monkeypatch, "ftruncate", ".log")
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaApiError) as err:
        append(log, b"b" * 100)
    assert err.value.code == STORAGE and log.offline
    assert "could not be undone" in caplog.text and "offline" in caplog.text
    monkeypatch.undo()
    for call in (lambda: append(log, b"c"), lambda: log.read_slices(0, 100),
                 lambda: log.offset_for_timestamp(0), lambda: log.delete_records(1)):
        with pytest.raises(KafkaApiError) as err:
            call()
        assert err.value.code == STORAGE
    assert append(other, b"b").base_offset == 1 and other.read(0, 1 << 20)
    assert not log.close()               # its log dir must be recovered next time
    other.close()


def test_storage_errors_are_logged_at_error_but_rate_limited(open_log, monkeypatch, caplog):
    log = open_log()
    heal = fail_on(monkeypatch, "write", ".log")
    with caplog.at_level(logging.WARNING, logger="kwire.log.storage"):
        for i in range(2_700):
            with pytest.raises(KafkaApiError):
                append(log, b"x", now_ms=i * 10)        # 27 s of failures
        heal()
        append(log, b"x", now_ms=30_000)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert 1 < len(errors) <= 27_000 // health.REPORT_INTERVAL_MS + 1
    assert "storage error" in errors[0].getMessage()
    assert "storage errors in the last" in errors[1].getMessage()
    assert "succeed again after 2700" in caplog.records[-1].getMessage()


def test_failed_fsync_takes_partition_offline(open_log, monkeypatch):
    log = open_log()
    append(log, b"a")
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "EIO")))
    with pytest.raises(KafkaApiError) as err:
        log.flush()
    assert err.value.code == STORAGE and log.offline


# -- corruption at rest ------------------------------------------------------------------

def flip(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x10]))


def batch_positions(log) -> list[tuple[int, int]]:
    """(file position, base offset) of every batch of the active segment."""
    data = log.read(log.segments[-1].base_offset, 1 << 30)
    return [(h.position, h.base_offset) for h in records.iter_batches(data)]


def test_recovery_never_cuts_data_after_corruption_below_the_recovery_point(open_log):
    log = open_log(index_interval_bytes=64)
    for i in range(20):
        append(log, b"old-%02d" % i)
    positions = batch_positions(log)
    log.close()                                    # checkpoints the recovery point
    flip(log.segments[-1].log_path, positions[7][0] + records.HEADER_SIZE + 5)   # batch 7's data
    again = open_log(index_interval_bytes=64)      # clean start: nothing noticed yet
    for i in range(30):
        append(again, b"new-%02d" % i)
    # kill -9: reopen without closing
    crashed = open_log(recover=True, index_interval_bytes=64)
    assert crashed.log_end_offset == 50 and not crashed.offline
    after = decode_unchecked(crashed.read(8, 1 << 20))
    assert after == [b"old-%02d" % i for i in range(8, 20)] + [b"new-%02d" % i for i in range(30)]
    # reading the damaged batch reports it and takes the partition offline
    with pytest.raises(KafkaApiError) as err:
        crashed.read_slices(0, 1 << 20)
    assert err.value.code == STORAGE and "CRC mismatch" in err.value.message
    assert f"at file position {positions[7][0]}" in err.value.message and crashed.offline


def decode_unchecked(data: bytes) -> list[bytes]:
    return [v for _, _, v in decode(data)]


def test_unchecked_recovery_still_cuts_a_torn_tail_after_the_recovery_point(open_log):
    log = open_log()
    for i in range(5):
        append(log, b"a-%d" % i)
    log.close()
    again = open_log()
    for i in range(5):
        append(again, b"b-%d" % i)
    with open(again.segments[-1].log_path, "ab") as f:
        f.write(b"\x00\x01torn")
    crashed = open_log(recover=True, now_ms=7)
    assert crashed.log_end_offset == 10
    assert os.path.exists(crashed.segments[-1].log_path + ".corrupt-7")


def test_scrub_reports_corrupt_closed_segment_and_takes_partition_offline(open_log, caplog):
    log = open_log(segment_bytes=400)
    while len(log.segments) < 3:
        append(log, b"v" * 50)
    assert log.scrub() and not log.offline
    victim = log.segments[1]
    flip(victim.log_path, 70)                      # inside its first batch's records
    with caplog.at_level(logging.ERROR):
        assert not log.scrub()
    assert log.offline
    assert f"{victim.log_path} at file position 0: CRC mismatch" in caplog.text
    with pytest.raises(KafkaApiError) as err:
        append(log, b"more")
    assert err.value.code == STORAGE


def test_damaged_header_on_read_is_a_storage_error_with_file_position(open_log):
    log = open_log(index_interval_bytes=1 << 20)
    for i in range(10):
        append(log, b"x-%d" % i)
    positions = batch_positions(log)
    with open(log.segments[-1].log_path, "r+b") as f:
        f.seek(positions[4][0] + 16)
        f.write(b"\x07")                           # magic byte of batch 4
    with pytest.raises(KafkaApiError) as err:
        log.read_slices(6, 100)
    assert err.value.code == STORAGE
    assert f"at file position {positions[4][0]}: magic 7, expected 2" in err.value.message
    assert log.offline


# -- checkpoints and index rebuilds --------------------------------------------------------

@pytest.mark.parametrize("name,content", [
    ("log-start-offset-checkpoint", "0\nnot a number\n"),
    ("log-start-offset-checkpoint", ""),
    ("leader-epoch-checkpoint", "0\n2\n0 0\n"),
    ("recovery-point-checkpoint", "7\n1 2 3\n"),
])
def test_malformed_checkpoint_keeps_partition_offline(open_log, caplog, name, content):
    log = open_log()
    for i in range(5):
        append(log, b"x")
    log.delete_records(3)
    log.set_leader_epoch(1, 5)
    log.close()
    with open(os.path.join(log.path, name), "w") as f:
        f.write(content)
    with caplog.at_level(logging.ERROR):
        again = open_log(recover=True)
    assert again.offline and name in caplog.text
    with pytest.raises(KafkaApiError) as err:
        again.read_slices(0, 100)                 # deleted records never come back
    assert err.value.code == STORAGE


def test_corrupt_index_rebuild_is_logged(open_log, caplog):
    log = open_log(segment_bytes=300, index_interval_bytes=0)
    while len(log.segments) < 3:
        append(log, b"y" * 40)
    log.close()
    with open(log.segments[0].offset_index.path, "ab") as f:
        f.write(b"\x01")
    with caplog.at_level(logging.WARNING):
        open_log(segment_bytes=300, index_interval_bytes=0)
    assert f"{log.segments[0].log_path}: rebuilding the indexes" in caplog.text
    assert "not a whole number of entries" in caplog.text


def test_clean_start_repair_logs_bytes_cut(open_log, caplog):
    log = open_log(index_interval_bytes=1 << 20)
    for i in range(10):
        append(log, b"r-%d" % i)
    positions = batch_positions(log)
    size = log.segments[-1].size
    log.close()
    with open(log.segments[-1].log_path, "r+b") as f:
        f.seek(positions[6][0] + 16)
        f.write(b"\x09")
    with caplog.at_level(logging.WARNING):
        again = open_log()
    assert again.log_end_offset == 6
    assert (f"repair cut {size - positions[6][0]} bytes at file position {positions[6][0]}"
            in caplog.text)
