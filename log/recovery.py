"""Opening a partition's segments: trusted after a clean shutdown, checked after a crash.

Clean start (a clean-shutdown marker): closed segments are trusted through
their indexes; the active segment's tail is found by walking the batch
headers after its last index entry.  A segment whose headers cannot be walked
is repaired by recovery (cut at the first bad batch, cut bytes kept aside),
and the number of bytes cut is logged.

Unclean start: the recovery point (see kwire.log.checkpoints) says up to
which offset, segment and file position the log was validated and flushed.
Segments before its segment are opened as after a clean start; its segment is
checked batch by batch from the recovery point's file position, and every
later segment from its start.  The first bad batch after the recovery point
is cut (and every later segment set aside), exactly as a torn tail is.  Damage
*below* the recovery point is never a reason to cut: it was validated when
written, so it is at-rest corruption for the scrub (``find_damage``)
to report, while the data after it was acknowledged and must stay.

Without a recovery-point checkpoint (a log never flushed, or written by an
older kwire) the older rule applies: closed segments are trusted back to the
last one whose indexes look sane, and checking starts there.

Every segment checked here is flagged (``rebuild_txn_index``): its
aborted-transaction index may name markers that were cut, or miss some that
survived, and only a replay of producer state from before the segment can
say which (the partition's rebuild does it, kwire.log.partition).  Segments set
aside take their ``.txnindex`` and ``.txnsnapshot`` with them.
"""
from __future__ import annotations

import logging
import os
from typing import Callable

from kwire.codecs import records
from kwire.codecs.errors import KafkaApiError

from .config import LogConfig
from .segment import RECOVERY_CHUNK, LogSegment

logger = logging.getLogger(__name__)


def segment_bases(path: str) -> list[int]:
    """Base offsets of the ``.log`` files in a partition directory, ascending."""
    bases = []
    for name in os.listdir(path):
        stem, _dot, ext = name.partition(".")
        if ext == "log" and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def open_segment(path: str, config: LogConfig, base: int, next_offset: int | None,
                 now_ms: int) -> LogSegment:
    """Open trusting the indexes; if the headers it must read are damaged, repair it by
    recovery (logged with the bytes cut).  Raises OSError."""
    interval = config.index_interval_bytes
    try:
        return LogSegment.open_existing(path, base, next_offset=next_offset,
                                        now_ms=now_ms, index_interval=interval)
    except KafkaApiError as exc:
        logger.warning("%s: clean open failed (%s); recovering that segment", path, exc.message)
        segment = LogSegment(path, base, created_ms=now_ms, index_interval=interval)
        cut = recover_segment(segment, now_ms=now_ms)
        logger.warning("%s: repair cut %d bytes at file position %d (kept in %s.corrupt-%d)",
                       segment.log_path, cut, segment.size, segment.log_path, now_ms)
        return segment


def open_clean(path: str, config: LogConfig, bases: list[int], now_ms: int) -> list[LogSegment]:
    closed = [open_segment(path, config, base, nxt, now_ms) for base, nxt in zip(bases, bases[1:])]
    return closed + [open_segment(path, config, bases[-1], None, now_ms)]


def open_recovering(path: str, config: LogConfig, bases: list[int], now_ms: int,
                    point: tuple[int, int, int] | None) -> list[LogSegment]:
    """Open after a crash, checking every batch after the recovery point ``point``
    ((offset, segment base, file position) or None).  Raises OSError."""
    interval = config.index_interval_bytes
    probe = [LogSegment(path, b, created_ms=now_ms, index_interval=interval) for b in bases]
    first, position, offset = _first_to_check(probe, point)
    segments = [open_segment(path, config, base, nxt, now_ms)
                for base, nxt in zip(bases[:first], bases[1:first + 1])]
    for i in range(first, len(probe)):
        segment = probe[i]
        if i == first and position:
            cut = recover_segment(segment, now_ms=now_ms, position=position, offset=offset)
        else:
            cut = recover_segment(segment, now_ms=now_ms)
        segments.append(segment)
        if cut:
            logger.warning("%s: cut %d bytes at file position %d (kept in %s.corrupt-%d)",
                           segment.log_path, cut, segment.size, segment.log_path, now_ms)
        # a cut (or an overlap) makes the later segments unreachable; a gap does not: the log
        # cleaner leaves gaps where it dropped a segment's last batches
        if i + 1 < len(probe) and (cut or segment.next_offset > probe[i + 1].base_offset):
            for later in probe[i + 1:]:       # unreachable past the cut: keep as evidence
                os.replace(later.log_path, f"{later.log_path}.corrupt-{now_ms}")
                later.delete()
            break
    return segments


def _first_to_check(probe: list[LogSegment],
                    point: tuple[int, int, int] | None) -> tuple[int, int, int | None]:
    """(index of the first segment to check, file position in it, offset there)."""
    if point is not None:
        offset, base, position = point
        later = [i for i, s in enumerate(probe) if s.base_offset >= base]
        if later:
            first = later[0]
            if probe[first].base_offset == base:
                return first, position, offset
            return first, 0, None     # its segment was deleted: all that is left came later
        logger.warning("%s: recovery point segment %d is past the last segment; checking "
                       "as without a recovery point", os.path.dirname(probe[-1].log_path), base)
    first = len(probe) - 1
    while first > 0 and not probe[first - 1].indexes_look_sane():
        first -= 1
    return first, 0, None


def recover_segment(segment: LogSegment, *, now_ms: int, position: int = 0,
                    offset: int | None = None) -> int:
    """Check every batch from ``position`` (CRC included), cut the file at the first bad
    byte, rebuild indexes.

    ``position``/``offset`` are a recovery point: the file position of the
    batch at ``offset``, everything before which was validated and flushed
    earlier and is not checked again (so damage there is never a reason to
    cut what follows).  A recovery point that does not match the file is
    ignored (WARNING) and the whole segment checked.  The cut bytes are
    kept in ``<name>.log.corrupt-<now_ms>``.  Returns the number of bytes
    cut.  Raises OSError for I/O failures (nothing is cut if the evidence
    cannot be written), CorruptSegment if the index rebuild finds a bad
    header before ``position``.  Flags the segment's transaction index for the
    partition's rebuild.
    """
    segment.size = os.fstat(segment.fileno()).st_size
    if position and not _is_batch_start(segment, position, offset):
        logger.warning("%s: recovery point (offset %s at file position %d) does not match "
                       "the file (%d bytes): checking the whole segment",
                       segment.log_path, offset, position, segment.size)
        position, offset = 0, None
    valid = _valid_length(position, segment.base_offset if offset is None else offset,
                          segment.read, segment.size)
    cut = segment.size - valid
    if cut:
        evidence = f"{segment.log_path}.corrupt-{now_ms}"
        try:
            with open(evidence, "wb") as f:
                f.write(segment.read(valid, cut))
        except OSError:
            _unlink_quietly(evidence)
            raise
        os.ftruncate(segment.fileno(), valid)
        segment.size = valid
    segment.rebuild_indexes()
    segment.rebuild_txn_index = True
    return cut


def _is_batch_start(segment: LogSegment, position: int, offset: int | None) -> bool:
    if position == segment.size:
        return True
    if position > segment.size or offset is None:
        return False
    try:
        header = records.read_header(segment.read(position, records.HEADER_SIZE), 0, whole=False)
    except KafkaApiError:
        return False
    return header.base_offset == offset


def find_damage(segment: LogSegment) -> str | None:
    """Check every batch of a (closed) segment; a description of the first bad one
    (file and position) or None.  Blocking; uses its own descriptor, so it may run in
    a worker thread while the segment is read; a segment deleted meanwhile is fine."""
    size = segment.size
    try:
        fd = os.open(segment.log_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        def read(position: int, n: int) -> bytes:
            return os.pread(fd, n, position)
        valid = _valid_length(0, segment.base_offset, read, size)
        if valid >= size:
            return None
        why = describe_damage(read(valid, min(size - valid, RECOVERY_CHUNK)))
        return segment.corruption(valid, why).message
    finally:
        os.close(fd)


def _valid_length(position: int, expected: int,
                  read: Callable[[int, int], bytes], size: int) -> int:
    """File position of the end of whole, CRC-valid batches with ascending offsets
    from ``position`` (where offset ``expected`` starts)."""
    need = 0
    while position < size:
        chunk = read(position, min(max(RECOVERY_CHUNK, need), size - position))
        found, _ = records.scan_valid_prefix(chunk)
        advance = 0
        for header in found:
            if header.base_offset < expected:
                return position + advance
            expected = header.next_offset
            advance += header.size
        position += advance
        claimed = records.batch_size_at(chunk, advance)
        straddles = (claimed is None and position + len(chunk) - advance < size) or (
            claimed is not None and records.HEADER_SIZE <= claimed
            and claimed > len(chunk) - advance and position + claimed <= size)
        if advance < len(chunk) and not straddles:
            return position
        need = claimed or 0
    return position


def _unlink_quietly(path: str) -> None:
    """Remove a partial file we created (a failed evidence or temporary file)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def describe_damage(data) -> str:
    """Why the batch at the start of ``data`` fails validation (for error messages)."""
    try:
        header = records.read_header(data, 0, whole=False)
    except KafkaApiError as exc:
        return exc.message or "bad batch header"
    if header.size > len(data):
        return f"batch of {header.size} bytes runs past the end of the file"
    if not records.crc_ok(data, header):
        return f"CRC mismatch in batch at offset {header.base_offset} (stored {header.crc:#010x})"
    return (f"batch at offset {header.base_offset} is inconsistent (record count "
            f"{header.record_count}, last offset delta {header.last_offset_delta}, or offsets "
            f"going backwards)")
