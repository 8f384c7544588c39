"""Page-cache hints on appends (kwire.log.pagecache): early write-back, drop-behind.

They may change what stays cached, never what is stored: every test reads the
whole log back.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest
from logkit import build_batch, decode

from kwire.log import pagecache

pytestmark = pytest.mark.skipif(not pagecache.AVAILABLE, reason="no sync_file_range on this platform")

RECORD = b"v" * 1000
WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, WAIT_AFTER = 1, 2, 4      # <fcntl.h> sync_file_range flags
PER_BATCH = 64                      # about 64 KiB per batch


def append_batches(log, count: int, first: int = 0) -> None:
    for i in range(first, first + count):
        log.append(build_batch([b"%06d" % i + RECORD] * PER_BATCH), now_ms=0)


def resident_bytes(path: str) -> int:
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", path],
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def batch_numbers(log) -> list[int]:
    return [int(value[:6]) for _offset, _ts, value in decode(log.read(0, 1 << 30))][::PER_BATCH]


@pytest.mark.skipif(shutil.which("fincore") is None, reason="util-linux's fincore is not installed")
@pytest.mark.parametrize("interval, keep, mostly_cached", [
    (256 * 1024, 1 << 20, False),
    (0, 1 << 20, True),                 # write-back left to the kernel: nothing is dropped
    (256 * 1024, -1, True),             # -1 keeps every page, as Kafka does
])
def test_pages_far_behind_the_end_leave_the_cache_only_when_configured(open_log, monkeypatch, interval, keep,
                                                                       mostly_cached):
    # DONTNEED leaves pages still dirty or under write-back: on a busy machine the write-back
    # started one interval before a drop may not have finished, and the result would depend on
    # the disk's speed.  Waiting for each write-back to end makes it what it is on an idle disk.
    start = pagecache.start_writeback

    def start_and_wait(fd: int, offset: int, length: int) -> bool:
        started = start(fd, offset, length)
        if started:
            pagecache._sync_file_range(fd, offset, length, WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | WAIT_AFTER)
        return started
    monkeypatch.setattr(pagecache, "start_writeback", start_and_wait)
    log = open_log(writeback_interval_bytes=interval, page_cache_keep_bytes=keep)
    append_batches(log, 300)                       # about 19 MiB
    segment = log.segments[-1]
    resident = resident_bytes(segment.log_path)
    print(f"interval {interval}, keep {keep}: {resident} of {segment.size} bytes cached")
    if mostly_cached:
        assert resident > segment.size * 0.9
    else:
        assert resident < segment.size / 2
    assert batch_numbers(log) == list(range(300))


def test_a_truncated_and_regrown_log_reads_back_whole(open_log):
    log = open_log(writeback_interval_bytes=64 * 1024, page_cache_keep_bytes=128 * 1024)
    append_batches(log, 100)
    log.truncate_to(40 * PER_BATCH)                # below both marks
    append_batches(log, 100, first=40)
    assert batch_numbers(log) == list(range(140))
    log.segments[-1].close()
    reopened = open_log(recover=True, writeback_interval_bytes=64 * 1024, page_cache_keep_bytes=128 * 1024)
    append_batches(reopened, 10, first=140)
    assert batch_numbers(reopened) == list(range(150))


def test_marks_follow_appends_and_cuts(monkeypatch):
    hints = []
    monkeypatch.setattr(pagecache, "start_writeback",
                        lambda fd, offset, length: hints.append(("write", offset, length)) or True)
    monkeypatch.setattr(pagecache, "drop", lambda fd, offset, length: hints.append(("drop", offset, length)))
    marks = pagecache.WriteBehind()
    for size in (100, 250, 400, 1000, 1100):
        marks.after_append(-1, size, interval=200, keep=300)
    marks.truncated(500)
    marks.after_append(-1, 800, interval=200, keep=300)
    assert hints == [("write", 0, 250), ("write", 250, 750), ("drop", 0, 700),
                     ("write", 500, 300)]       # after the cut to 500: from there, nothing to drop

