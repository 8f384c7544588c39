"""Producer state of one partition: idempotence and transactions, rebuilt from the log.

Idempotence.  For each producer id the broker remembers the latest epoch and
the sequence and offset ranges of the last five batches (a client has at
most five in flight per partition).  The rules follow Kafka's
ProducerAppendInfo:

* a batch matching one of the last five exactly (epoch, first and last
  sequence) is a duplicate: it is not appended and the original offsets are
  returned;
* an epoch lower than the current one -> INVALID_PRODUCER_EPOCH;
* a higher epoch must start at sequence 0 -> else OUT_OF_ORDER_SEQUENCE_NUMBER;
* the same epoch must continue at last sequence + 1 (INT32_MAX wraps to 0)
  -> else OUT_OF_ORDER_SEQUENCE_NUMBER;
* a producer with no state here (new, or expired: see Expiry) is accepted
  at any sequence, as Kafka has done since KIP-360; UNKNOWN_PRODUCER_ID is
  therefore never returned.  Retention deleting its batches forgets nothing.

Transactions (KIP-98).  A transactional batch (attribute bit 4) from a
producer with no transaction open in this partition starts one at its base
offset (``ongoing``: producer id -> first offset).  An end-transaction marker
(a control batch, written by the leader for the transaction coordinator)
ends it; an ABORT yields an ``AbortedTxn(producer_id, first_offset,
last_offset = the marker's offset, last_stable_offset)`` for the transaction
index of the marker's segment (kwire.log.txn_index), where
last_stable_offset is the LSO right after the marker: the first offset of
the earliest transaction of another producer still open, else marker + 1
(Kafka's ProducerStateManager.lastStableOffset).  Checked as Kafka checks them:

* a non-transactional batch from a producer with an open transaction
  -> INVALID_TXN_STATE;
* a marker whose producer epoch is lower than the producer's -> INVALID_PRODUCER_EPOCH;
  a higher one is accepted (KIP-360: the coordinator aborts after bumping the
  epoch) and becomes the producer's epoch, which forgets its cached batches;
* a marker whose coordinator epoch is lower than the last marker's for that
  producer -> TRANSACTION_COORDINATOR_FENCED (a zombie coordinator);
* a marker for a producer with no open transaction is appended and completes
  nothing (the coordinator retries markers, so they must be idempotent); its
  epochs are still recorded, as Kafka does.

A follower's fetched batches and the rebuild on open are replayed without
checks (the leader made them): the log is the truth.

First unstable offset: the first offset of the earliest open transaction,
or of a completed one whose marker is not yet below the high watermark (in
replicated mode a marker can still be lost with its leader: Kafka's
unreplicated transactions).  The partition's last stable offset is
min(that, high watermark).

Check/commit.  ``check`` (Produce), ``check_marker`` (the leader's markers)
and ``plan_replay`` (a follower's batches) compute a ``PendingAppend``
without changing anything; ``commit`` installs it once the bytes are
written, so a failed write changes nothing.

Expiry (Kafka's ``producer.id.expiration.ms``).  Every producer remembers the
timestamp of its last batch (the max timestamp of its last data batch, the
append time on LogAppendTime topics, or its last marker's timestamp);
``remove_expired(now_ms, expiration_ms)`` forgets those idle for at least
``expiration_ms``, never one with a transaction open here.  The partition
calls it when it writes a snapshot and after a rebuild; a forgotten producer
is unknown, hence the KIP-360 leniency above.

Persistence.  Every segment but a log's first starts with a snapshot of the
whole producer state at its base offset, ``<base>.txnsnapshot``: every
unexpired producer with its epochs, open transaction, last timestamp and
cached batches, so a retry is recognised after a restart, a truncation or a
failover however old its batches are (Kafka's ``<offset>.snapshot``).  It is
written when the segment is rolled (a follower rolls through the same code)
and fsynced with the segment.  The rebuild (kwire.log.producer_snapshots)
loads the newest usable snapshot and replays the batch headers after it.
Version 0, written by older kwire, holds only the open transactions; it is
still read (``load_snapshot`` then returns False and the rebuild replays the
newest segments from it, as that kwire did).  Byte layout (big-endian)::

    offset  size  field
         0     2  version            int16   1 (0: the older layout below)
         2     4  crc                uint32  CRC-32C of every byte after this field
         6     4  count              int32   producers, by ascending producer id
        10     .  count producers, each 31 bytes and its batches:
                    producer_id        int64
                    producer_epoch     int16
                    coordinator_epoch  int32   -1: no marker seen
                    txn_first_offset   int64   -1: no transaction open here
                    last_timestamp     int64   -1: unknown
                    batch_count        int8    0..5
                  then batch_count cached batches, oldest first, each 24 bytes:
                    first_sequence int32, last_sequence int32,
                    first_offset int64, last_offset int64

    version 0: offset 10, count entries of 22 bytes: producer_id int64,
    producer_epoch int16, coordinator_epoch int32, first_offset int64 (of the
    open transaction: only producers with one are listed)
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import struct
import time

import crc32c

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import CONTROL_ABORT, CONTROL_COMMIT, INT32_MAX, BatchHeader

from .txn_index import AbortedTxn

logger = logging.getLogger(__name__)

MAX_CACHED_BATCHES = 5
NOTES_PER_SECOND = 20     # INFO lines about producer sequence/epoch events, across all partitions
NO_COORDINATOR_EPOCH = -1

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")     # version, crc, count
# producer_id, epoch, coordinator_epoch, txn_first_offset, last_timestamp, batch_count
_SNAPSHOT_PRODUCER = struct.Struct(">qhiqqb")
_SNAPSHOT_BATCH = struct.Struct(">iiqq")   # first_seq, last_seq, first_offset, last_offset
_V0_ENTRY = struct.Struct(">qhiq")         # producer_id, epoch, coordinator_epoch, first_offset
assert (_SNAPSHOT_HEAD.size, _SNAPSHOT_PRODUCER.size, _SNAPSHOT_BATCH.size, _V0_ENTRY.size) == (
    10, 31, 24, 22)
_CRC_START = 6
NO_TXN = -1
NO_TIMESTAMP = -1


class _NoteBudget:
    """At most ``NOTES_PER_SECOND`` notes a second, so a misbehaving client cannot flood the log."""
    second, spent = 0, 0

    @classmethod
    def note(cls, message: str, *args) -> None:
        now = int(time.monotonic())
        if now != cls.second:
            cls.second, cls.spent = now, 0
        if cls.spent < NOTES_PER_SECOND:
            cls.spent += 1
            logger.info(message, *args)


class SnapshotCorrupt(ValueError):
    """A ``.txnsnapshot`` that is torn, of an unknown version or fails its CRC."""


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclasses.dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=MAX_CACHED_BATCHES))
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    txn_first_offset: int | None = None     # first offset of its open transaction here
    last_timestamp: int = NO_TIMESTAMP      # of its last batch or marker, for expiry

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             collections.deque(self.batches, maxlen=MAX_CACHED_BATCHES),
                             self.coordinator_epoch, self.txn_first_offset, self.last_timestamp)

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the cached batches (their sequences belong to the old one)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def record(self, header: BatchHeader, timestamp: int) -> None:
        """Remember a batch that is now in the log (``header.base_offset`` is final) and
        ``timestamp``, its max timestamp as stored."""
        self.set_epoch(header.producer_epoch)
        self.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                          header.base_offset, header.last_offset))
        self.last_timestamp = timestamp

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        """Kafka's isProducerExpired: idle for ``expiration_ms`` with no transaction open."""
        return self.txn_first_offset is None and now_ms - self.last_timestamp >= expiration_ms


@dataclasses.dataclass(slots=True)
class PendingAppend:
    """What one append does to the producer state, installed by ``commit`` after the write."""
    entries: dict[int, ProducerEntry] = dataclasses.field(default_factory=dict)
    completed: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """(marker offset, first offset) of every transaction the append completes."""
    aborted: list[AbortedTxn] = dataclasses.field(default_factory=list)
    """Entries for the transaction index of the segment the append goes to."""


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer id -> ProducerEntry, the open transactions, and a check/commit split so a
    failed append changes nothing."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}     # producer id -> first offset of its open transaction
        # (marker offset, first offset) of completed transactions, in log order, until the
        # high watermark passes their marker
        self._unreplicated: collections.deque[tuple[int, int]] = collections.deque()
        self.max_producer_id = -1

    def __len__(self) -> int:
        return len(self._producers)

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """(producer id, entry) of every producer held, by producer id (entries are live: read only)."""
        return sorted(self._producers.items())

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    # -- leader appends -----------------------------------------------------

    def check(self, headers: list[BatchHeader], first_offset: int, where: str = "", *,
              coordinator: bool = False, append_time: int = -1
              ) -> tuple[BatchMetadata | None, PendingAppend]:
        """Validate the idempotent and transactional batches of one Produce append that would
        start at ``first_offset``.

        Returns ``(duplicate, pending)``: ``duplicate`` is the metadata of the
        original batch if any batch is a retry of a cached one (then nothing
        must be appended); ``pending`` goes to ``commit`` once the bytes are
        written.  Raises KafkaApiError with INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_TXN_STATE.

        ``coordinator``: the batches were written by the group coordinator for a
        producer's transaction (TxnOffsetCommit, Kafka's AppendOrigin.Coordinator):
        only the epoch is checked, and their sequence numbers are not the producer's.
        ``append_time``: the timestamp the batches will carry on a LogAppendTime topic, else -1.
        """
        pending = PendingAppend()
        offset = first_offset
        for header in headers:
            pid = header.producer_id
            if pid >= 0:
                entry = pending.entries.get(pid) or self._producers.get(pid)
                if entry is not None and coordinator:
                    if header.producer_epoch < entry.epoch:
                        raise KafkaApiError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                            f"{where}producer {pid} epoch {header.producer_epoch} is older "
                                            f"than {entry.epoch}")
                    entry = entry.copy()
                elif entry is not None:
                    duplicate = entry.find_duplicate(header)
                    if duplicate is not None:
                        return duplicate, PendingAppend()
                    try:
                        self._check_order(entry, header, where)
                    except KafkaApiError as exc:
                        _NoteBudget.note("refused a produce: %s", exc)
                        raise
                    if header.producer_epoch != entry.epoch:
                        _NoteBudget.note("%sproducer %d: epoch %d -> %d at sequence %d (offset %d)",
                                         where, pid, entry.epoch, header.producer_epoch,
                                         header.base_sequence, offset)
                    entry = entry.copy()
                else:
                    if header.base_sequence > 0:
                        _NoteBudget.note("%sproducer %d epoch %d unknown here: accepted at sequence "
                                         "%d (offset %d)", where, pid, header.producer_epoch,
                                         header.base_sequence, offset)
                    entry = ProducerEntry(pid, header.producer_epoch)
                if entry.txn_first_offset is not None and not header.is_transactional:
                    raise KafkaApiError(ErrorCode.INVALID_TXN_STATE,
                                        f"{where}producer {pid} sent a non-transactional batch "
                                        f"while its transaction from offset "
                                        f"{entry.txn_first_offset} is open")
                timestamp = append_time if append_time >= 0 else header.max_timestamp
                if not coordinator:
                    entry.record(dataclasses.replace(header, base_offset=offset), timestamp)
                else:
                    entry.set_epoch(header.producer_epoch)
                    entry.last_timestamp = timestamp
                if header.is_transactional and entry.txn_first_offset is None:
                    entry.txn_first_offset = offset
                pending.entries[pid] = entry
            offset += header.last_offset_delta + 1
        return None, pending

    @staticmethod
    def _check_order(entry: ProducerEntry, header: BatchHeader, where: str) -> None:
        pid, epoch, seq = header.producer_id, header.producer_epoch, header.base_sequence
        if epoch < entry.epoch:
            raise KafkaApiError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                f"{where}producer {pid} epoch {epoch} is older than {entry.epoch}")
        if epoch > entry.epoch:
            if seq != 0:
                raise KafkaApiError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"{where}producer {pid} new epoch {epoch} starts at "
                                    f"sequence {seq}, expected 0")
        elif entry.batches and not in_sequence(entry.last_seq, seq):
            raise KafkaApiError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                f"{where}producer {pid} epoch {epoch} sent sequence {seq}, "
                                f"expected {(entry.last_seq + 1) % (INT32_MAX + 1)}")

    def check_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, offset: int, where: str = "", *,
                     timestamp: int = NO_TIMESTAMP) -> PendingAppend:
        """Validate an end-transaction marker the leader would append at ``offset`` with
        ``timestamp``; the result goes to ``commit`` once it is written.  Raises
        KafkaApiError with INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, producer_epoch)
        else:
            if producer_epoch < entry.epoch:
                raise KafkaApiError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                    f"{where}marker for producer {producer_id} has epoch "
                                    f"{producer_epoch}, older than {entry.epoch}")
            if coordinator_epoch < entry.coordinator_epoch:
                raise KafkaApiError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                    f"{where}marker for producer {producer_id} has coordinator "
                                    f"epoch {coordinator_epoch}, older than "
                                    f"{entry.coordinator_epoch}")
            entry = entry.copy()
        pending = PendingAppend()
        self._end_txn(pending, entry, commit, producer_epoch, coordinator_epoch, offset)
        entry.last_timestamp = timestamp
        return pending

    def _end_txn(self, pending: PendingAppend, entry: ProducerEntry, commit: bool,
                 producer_epoch: int, coordinator_epoch: int, offset: int) -> None:
        pid, first = entry.producer_id, entry.txn_first_offset
        if first is not None:
            pending.completed.append((offset, first))
            if not commit:
                pending.aborted.append(AbortedTxn(pid, first, offset,
                                                  self._stable_after(pending, pid, offset)))
            entry.txn_first_offset = None
        if producer_epoch > entry.epoch:
            entry.set_epoch(producer_epoch)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        pending.entries[pid] = entry

    def _stable_after(self, pending: PendingAppend, producer_id: int, offset: int) -> int:
        """The LSO right after the marker at ``offset`` ends ``producer_id``'s transaction."""
        stable = offset + 1
        for pid, entry in pending.entries.items():
            if pid != producer_id and entry.txn_first_offset is not None:
                stable = min(stable, entry.txn_first_offset)
        for pid, first in self.ongoing.items():
            if pid != producer_id and pid not in pending.entries:
                stable = min(stable, first)
        return stable

    # -- batches already decided: a follower's, and the rebuild -------------

    def plan_replay(self, batches: list[tuple[BatchHeader, tuple[int, int] | None]]
                    ) -> PendingAppend:
        """The effect of batches a leader appended (``header.base_offset`` final), each with
        its control marker ``(type, coordinator_epoch)`` or None (records.control_marker).
        No checks: the leader made them; nothing changes until ``commit``."""
        pending = PendingAppend()
        for header, marker in batches:
            pid = header.producer_id
            if pid < 0 or (marker is not None and marker[0] not in (CONTROL_ABORT,
                                                                    CONTROL_COMMIT)):
                continue
            entry = pending.entries.get(pid)
            if entry is None:
                entry = self._producers.get(pid)
                entry = (ProducerEntry(pid, header.producer_epoch) if entry is None
                         else entry.copy())
            if marker is not None:
                self._end_txn(pending, entry, marker[0] == CONTROL_COMMIT,
                              header.producer_epoch, marker[1], header.base_offset)
                entry.last_timestamp = header.max_timestamp
                continue
            if header.producer_epoch >= entry.epoch:   # an older epoch's batches are not cached
                entry.record(header, header.max_timestamp)
            if header.is_transactional and entry.txn_first_offset is None:
                entry.txn_first_offset = header.base_offset
            pending.entries[pid] = entry
        return pending

    def replay(self, header: BatchHeader,
               marker: tuple[int, int] | None = None) -> list[AbortedTxn]:
        """Rebuild from one batch already in the log (no checks, as when Kafka loads a log);
        returns the aborted transaction it completes, if any, for the transaction index."""
        pending = self.plan_replay([(header, marker)])
        self.commit(pending)
        return pending.aborted

    # -- installing ---------------------------------------------------------

    def commit(self, pending: PendingAppend) -> None:
        """Install what ``check``, ``check_marker`` or ``plan_replay`` returned, after the
        append succeeded."""
        for pid, entry in pending.entries.items():
            self._producers[pid] = entry
            if entry.txn_first_offset is None:
                self.ongoing.pop(pid, None)
            else:
                self.ongoing[pid] = entry.txn_first_offset
        self._unreplicated.extend(pending.completed)
        if pending.entries:
            self.max_producer_id = max(self.max_producer_id, max(pending.entries))

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now below ``high_watermark``."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0][0] < high_watermark:
            unreplicated.popleft()

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction that is open, or completed by a marker
        at or above ``high_watermark``; None if there is none."""
        firsts = list(self.ongoing.values())
        firsts.extend(first for marker, first in self._unreplicated if marker >= high_watermark)
        return min(firsts, default=None)

    def clear(self) -> None:
        self._producers.clear()
        self.ongoing.clear()
        self._unreplicated.clear()

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers idle for at least ``expiration_ms`` at ``now_ms`` (never one
        with an open transaction); returns their ids, ascending."""
        gone = sorted(pid for pid, entry in self._producers.items()
                      if entry.expired(now_ms, expiration_ms))
        for pid in gone:
            del self._producers[pid]
        return gone

    # -- snapshots (module docstring) ------------------------------------------

    def snapshot(self) -> bytes:
        """Every producer held, in the ``.txnsnapshot`` layout (version 1)."""
        body = bytearray(_SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, 0, len(self._producers)))
        for pid, entry in sorted(self._producers.items()):
            first = NO_TXN if entry.txn_first_offset is None else entry.txn_first_offset
            body += _SNAPSHOT_PRODUCER.pack(pid, entry.epoch, entry.coordinator_epoch, first,
                                            entry.last_timestamp, len(entry.batches))
            for b in entry.batches:
                body += _SNAPSHOT_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
        struct.pack_into(">I", body, 2, crc32c.crc32c(memoryview(body)[_CRC_START:]))
        return bytes(body)

    def load_snapshot(self, data: bytes) -> bool:
        """Start over from a snapshot.  Returns True for the whole state (version 1), False
        for a version 0 snapshot, which holds only the open transactions.  Raises
        SnapshotCorrupt (the state is then empty)."""
        self.clear()
        if len(data) < _SNAPSHOT_HEAD.size:
            raise SnapshotCorrupt(f"{len(data)} bytes, shorter than the header")
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
        if version not in (0, SNAPSHOT_VERSION):
            raise SnapshotCorrupt(f"unknown version {version}")
        if crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
            raise SnapshotCorrupt("CRC mismatch")
        if count < 0:
            raise SnapshotCorrupt(f"negative count {count}")
        entries = _decode_v0(data, count) if version == 0 else _decode(data, count)
        for entry in entries:
            self._producers[entry.producer_id] = entry
            if entry.txn_first_offset is not None:
                self.ongoing[entry.producer_id] = entry.txn_first_offset
        self.max_producer_id = max(self.max_producer_id, max(self._producers, default=-1))
        return version == SNAPSHOT_VERSION


def _decode(data: bytes, count: int) -> list[ProducerEntry]:
    """The producers of a version 1 snapshot.  Raises SnapshotCorrupt."""
    entries, position, previous = [], _SNAPSHOT_HEAD.size, -1
    for _ in range(count):
        if position + _SNAPSHOT_PRODUCER.size > len(data):
            raise SnapshotCorrupt(f"{len(data)} bytes, too short for {count} producers")
        pid, epoch, coordinator_epoch, first, timestamp, n = _SNAPSHOT_PRODUCER.unpack_from(
            data, position)
        position += _SNAPSHOT_PRODUCER.size
        if pid <= previous or not 0 <= n <= MAX_CACHED_BATCHES or first < NO_TXN:
            raise SnapshotCorrupt(f"producer {pid} at byte {position - _SNAPSHOT_PRODUCER.size} "
                                  f"is out of order or malformed")
        if position + n * _SNAPSHOT_BATCH.size > len(data):
            raise SnapshotCorrupt(f"{len(data)} bytes, too short for producer {pid}'s batches")
        batches = collections.deque(
            (BatchMetadata(*_SNAPSHOT_BATCH.unpack_from(data, position + i * _SNAPSHOT_BATCH.size))
             for i in range(n)), maxlen=MAX_CACHED_BATCHES)
        position += n * _SNAPSHOT_BATCH.size
        entries.append(ProducerEntry(pid, epoch, batches, coordinator_epoch,
                                     None if first == NO_TXN else first, timestamp))
        previous = pid
    if position != len(data):
        raise SnapshotCorrupt(f"{len(data) - position} bytes after {count} producers")
    return entries


def _decode_v0(data: bytes, count: int) -> list[ProducerEntry]:
    """The open transactions of a version 0 snapshot.  Raises SnapshotCorrupt."""
    if len(data) != _SNAPSHOT_HEAD.size + count * _V0_ENTRY.size:
        raise SnapshotCorrupt(f"{len(data)} bytes for {count} entries")
    return [ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch, txn_first_offset=first)
            for pid, epoch, coordinator_epoch, first in _V0_ENTRY.iter_unpack(
                memoryview(data)[_SNAPSHOT_HEAD.size:])]
