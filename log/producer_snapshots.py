"""Rebuilding a partition's producer state from its snapshots and batch headers.

The snapshot of a segment (``<base>.txnsnapshot``, layout in
kwire.log.producer_state) is the whole producer state at its base offset,
written when the segment was rolled.  On open and after a truncation the
state is rebuilt from the newest usable snapshot: its segment's batch headers
(and the one record of each control batch) are replayed from there to the
log end, as Kafka loads its newest ``<offset>.snapshot``.  After a truncation
the newest is that of the segment that now holds the end (the later segments
went with their snapshots), which still describes the state at its base.

Where the replay starts, walking back from the newest segment:

* not after the first segment whose transaction index recovery flagged for a
  rebuild (kwire.log.recovery): that index is rewritten from the replay;
* a missing, damaged or unknown-version snapshot: one segment earlier, down to
  the log's first segment, whose missing snapshot means an empty state;
* a version 0 snapshot (an older kwire's: open transactions only): the
  replay starts PRODUCER_STATE_SEGMENTS segments from the end, or earlier if
  that segment's snapshot is unusable, as that kwire did; idempotent producers
  whose batches all lie before it are unknown (KIP-360 leniency).

Snapshots of the segments the replay passes are written again when missing,
damaged or different, so the next open starts from the newest.  A segment
rewritten by the log cleaner has no snapshot (kwire.log.cleaner says why);
the segments after the cleaned range, the active one included, keep theirs,
and a rebuild that reaches a cleaned segment replays from the log's start.

Expiry: with ``now_ms`` the rebuilt state drops producers idle past
``producer.id.expiration.ms`` (never one with an open transaction); a
truncation, which has no clock, leaves that to the next roll.

Everything here blocks on the disk (reads the headers, may rewrite snapshots
and transaction indexes): run it where the partition's open or truncation runs.
"""
from __future__ import annotations

import logging

from kwire.codecs import records
from kwire.codecs.errors import KafkaApiError

from .producer_state import ProducerStateManager, SnapshotCorrupt
from .segment import LogSegment
from .txn_index import TxnIndexCorrupt

logger = logging.getLogger(__name__)

PRODUCER_STATE_SEGMENTS = 2     # newest segments replayed from a version 0 snapshot


def rebuild(path: str, segments: list[LogSegment], producers: ProducerStateManager, *,
            now_ms: int | None, expiration_ms: int) -> None:
    """Rebuild ``producers`` for the log of ``segments`` in directory ``path`` (module
    docstring), rewriting the transaction indexes flagged for a rebuild.  Raises OSError
    (a transaction index could not be written)."""
    cap = min([len(segments) - 1] + [i for i, s in enumerate(segments) if s.rebuild_txn_index])
    first = _load_newest(path, segments, producers, cap)
    for i in range(first, len(segments)):
        segment = segments[i]
        if i > first:
            _repair_snapshot(path, segment, producers)
        _check_txn_index(path, segment)
        aborted = []
        try:
            for header in segment.iter_headers(0):
                marker = None
                if header.is_control:
                    data = segment.read(header.position, header.size)
                    marker = records.control_marker(data, records.read_header(data))
                aborted.extend(producers.replay(header, marker))
        except KafkaApiError as exc:
            logger.warning("%s: producer state rebuild stopped: %s", path, exc)
        if segment.rebuild_txn_index:
            segment.txn_index.reset(aborted)
            segment.txn_index.flush()
            segment.rebuild_txn_index = False
    if now_ms is not None:
        producers.remove_expired(now_ms, expiration_ms)


def _load_newest(path: str, segments: list[LogSegment], producers: ProducerStateManager,
                 cap: int) -> int:
    """Load the newest usable snapshot at or before segment ``cap``; returns the segment to
    replay from."""
    legacy_floor = None          # set by a version 0 snapshot: start no later than this
    i = cap
    while True:
        segment, why, damaged = segments[i], f"no {segments[i].snapshot_path}", False
        try:
            data = segment.read_snapshot()
            if data is not None:
                if producers.load_snapshot(data):
                    return i
                if legacy_floor is None:
                    legacy_floor = min(i, max(0, len(segments) - PRODUCER_STATE_SEGMENTS))
                if i <= legacy_floor:
                    return i
                why = f"{segment.snapshot_path} holds open transactions only (version 0)"
        except (OSError, SnapshotCorrupt) as exc:
            why, damaged = f"{segment.snapshot_path} is unreadable: {exc}", True
        producers.clear()
        if i == 0:     # a log's first segment has no snapshot: nothing came before it
            if damaged:
                logger.warning("%s: %s; producers before offset %d are not known",
                               path, why, segment.base_offset)
            return 0
        logger.log(logging.WARNING if damaged else logging.INFO,
                   "%s: %s; replaying from the previous segment", path, why)
        i -= 1


def _repair_snapshot(path: str, segment: LogSegment, producers: ProducerStateManager) -> None:
    """Write the snapshot of a segment the replay reached if it is missing, damaged or
    differs from the replayed state (best effort: a failure is logged)."""
    state = producers.snapshot()
    try:
        if segment.read_snapshot() != state:
            segment.write_snapshot(state, sync=True)
    except OSError as exc:
        logger.warning("%s: could not rewrite %s: %s", path, segment.snapshot_path, exc)


def _check_txn_index(path: str, segment: LogSegment) -> None:
    """Flag a transaction index that cannot be read for the rebuild."""
    if not segment.rebuild_txn_index:
        try:
            segment.txn_index.entries()
        except (OSError, TxnIndexCorrupt) as exc:
            logger.warning("%s: rebuilding %s: %s", path, segment.txn_index.path, exc)
            segment.rebuild_txn_index = True
