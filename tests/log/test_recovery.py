"""Crash recovery: cut the log anywhere, reopen with recover=True, the valid prefix survives."""
from __future__ import annotations

import glob
import os
import random

from hypothesis import given, settings, strategies as st
from logkit import build_batch, decode

from kwire.codecs import records


def write_batches(log, n, seed=0):
    rng = random.Random(seed)
    sizes = []
    for i in range(n):
        values = [bytes([65 + i % 26]) * rng.randint(0, 60) for _ in range(rng.randint(1, 4))]
        log.append(build_batch(values, timestamp=1_000 + i, compression=i % 2), now_ms=0)
        sizes.append(len(values))
    return sizes


def forget_recovery_point(log) -> None:
    """Model data written after the last recovery-point checkpoint (a crash before any flush)."""
    os.unlink(os.path.join(log.path, "recovery-point-checkpoint"))


def boundaries(data: bytes) -> list[tuple[int, int]]:
    """(end position, next offset) after each batch of a segment file."""
    return [(h.position + h.size, h.next_offset) for h in records.iter_batches(data)]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**6))
def test_cut_at_random_byte_keeps_exact_valid_prefix(tmp_path_factory, cut_seed, now_ms):
    from kwire.log.config import LogConfig
    from kwire.log.partition import PartitionLog
    path = str(tmp_path_factory.mktemp("cut") / "t-0")
    config = LogConfig(index_interval_bytes=100)
    log = PartitionLog.open(path, config, now_ms=0, recover=False)
    write_batches(log, 30, seed=cut_seed)
    full = log.read(0, 1 << 30)
    log_path = log.segments[-1].log_path
    log.close()
    cut = cut_seed % (len(full) + 1)
    os.truncate(log_path, cut)
    kept = [(end, nxt) for end, nxt in boundaries(full) if end <= cut]
    valid, leo = kept[-1] if kept else (0, 0)

    again = PartitionLog.open(path, config, now_ms=now_ms, recover=True)
    assert again.log_end_offset == leo
    assert os.path.getsize(log_path) == valid
    assert again.read(0, 1 << 30) == full[:valid]
    evidence = glob.glob(log_path + ".corrupt-*")
    assert (evidence == [f"{log_path}.corrupt-{now_ms}"]) == (cut > valid)
    if cut > valid:
        with open(evidence[0], "rb") as f:
            assert f.read() == full[valid:cut]
    # the rebuilt index matches a fresh one and serves every offset
    segment = again.segments[-1]
    assert all(0 <= pos < valid for _, pos in segment.offset_index.entries())
    for offset in range(0, leo, 7):
        first = next(records.iter_batches(again.read(offset, 1)))
        assert first.base_offset <= offset <= first.last_offset
    # the log continues at the cut
    assert again.append(build_batch([b"next"]), now_ms=0).base_offset == leo
    again.close()


def test_random_garbage_appended_is_cut(open_log):
    log = open_log(index_interval_bytes=64)
    write_batches(log, 20)
    full = log.read(0, 1 << 30)
    leo = log.log_end_offset
    path = log.segments[-1].log_path
    log.close()
    rng = random.Random(7)
    for trial in range(20):
        garbage = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
        with open(path, "ab") as f:
            f.write(garbage)
        again = open_log(recover=True, now_ms=trial, index_interval_bytes=64)
        assert again.log_end_offset == leo
        assert again.read(0, 1 << 30) == full
        again.close()


def test_plausible_header_with_bad_crc_is_cut(open_log):
    log = open_log()
    write_batches(log, 5)
    leo, path = log.log_end_offset, log.segments[-1].log_path
    log.close()
    bad = bytearray(build_batch([b"tail"]))
    bad[-1] ^= 0x55                      # header fine, CRC wrong
    with open(path, "ab") as f:
        f.write(bad)
    again = open_log(recover=True)
    assert again.log_end_offset == leo


def test_corrupt_middle_of_active_segment_truncates_there(open_log):
    log = open_log()
    write_batches(log, 10)
    data = log.read(0, 1 << 30)
    ends = boundaries(data)
    path = log.segments[-1].log_path
    log.close()
    forget_recovery_point(log)
    with open(path, "r+b") as f:
        f.seek(ends[4][0] + 30)          # inside batch 5
        f.write(b"\x00\xff")
    again = open_log(recover=True)
    assert again.log_end_offset == ends[4][1]
    assert again.read(0, 1 << 30) == data[:ends[4][0]]


def test_torn_tail_across_segments_drops_later_segments(open_log, tmp_path):
    log = open_log(segment_bytes=600, index_interval_bytes=64)
    write_batches(log, 40)
    assert len(log.segments) >= 4
    segments = list(log.segments)
    full = log.read(0, 1 << 30)
    log.close()
    forget_recovery_point(log)
    victim = segments[-2]                        # the last closed segment
    os.unlink(victim.offset_index.path)          # untrusted: recovery starts here
    with open(victim.log_path, "r+b") as f:
        f.seek(victim.size - 5)
        f.write(b"\x00" * 5)                     # corrupt its last batch
    again = open_log(recover=True, segment_bytes=600, index_interval_bytes=64)
    assert [s.base_offset for s in again.segments] == [s.base_offset for s in segments[:-1]]
    valid = again.read(0, 1 << 30)
    assert full.startswith(valid) and len(valid) == sum(s.size for s in again.segments)
    assert again.log_end_offset == again.segments[-1].next_offset < victim.next_offset
    assert glob.glob(segments[-1].log_path + ".corrupt-*")
    assert glob.glob(victim.log_path + ".corrupt-*")
    assert not os.path.exists(segments[-1].log_path)
    assert again.append(build_batch([b"x"]), now_ms=0).base_offset == again.log_end_offset - 1


def test_missing_index_of_old_segment_is_rebuilt_without_recovery(open_log):
    log = open_log(segment_bytes=600, index_interval_bytes=64)
    write_batches(log, 40)
    segments = list(log.segments)
    full, max_ts = log.read(0, 1 << 30), log.max_timestamp()
    log.close()
    os.unlink(segments[1].offset_index.path)
    os.unlink(segments[1].time_index.path)
    again = open_log(recover=True, segment_bytes=600, index_interval_bytes=64)
    assert again.read(0, 1 << 30) == full
    assert os.path.exists(segments[1].offset_index.path)
    assert again.max_timestamp() == max_ts
    first_hit = next((o, t) for o, t, _ in decode(full) if t >= 1_015)
    assert again.offset_for_timestamp(1_015) == first_hit


def test_recover_leaves_a_clean_log_untouched(open_log):
    log = open_log(segment_bytes=700, index_interval_bytes=64)
    write_batches(log, 30)
    full, leo = log.read(0, 1 << 30), log.log_end_offset
    log.close()
    again = open_log(recover=True, segment_bytes=700, index_interval_bytes=64)
    assert (again.read(0, 1 << 30), again.log_end_offset) == (full, leo)
    assert not glob.glob(os.path.join(os.path.dirname(again.segments[0].log_path), "*.corrupt-*"))
    assert [o for o, _, _ in decode(full)] == list(range(leo))


def test_clean_open_with_torn_index_and_damaged_header_recovers_that_segment(open_log):
    log = open_log(segment_bytes=600, index_interval_bytes=64)
    write_batches(log, 30)
    segments = list(log.segments)
    log.close()
    victim = segments[0]
    with open(victim.offset_index.path, "ab") as f:
        f.write(b"\x00")                         # torn: forces a header walk
    data = open(victim.log_path, "rb").read()
    ends = boundaries(data)
    with open(victim.log_path, "r+b") as f:
        f.seek(ends[1][0] + 16)                  # magic byte of the third batch
        f.write(b"\x07")
    again = open_log(segment_bytes=600, index_interval_bytes=64)
    assert again.segments[0].size == ends[1][0]
    assert glob.glob(victim.log_path + ".corrupt-*")
    assert again.log_end_offset == segments[-1].next_offset     # later segments kept
    assert again.read(ends[1][1] + 1, 1 << 20)                  # read skips the gap
