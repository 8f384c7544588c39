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
* a producer with no state here (new, or its batches were deleted by
  retention) is accepted at any sequence, as Kafka has done since KIP-360;
  UNKNOWN_PRODUCER_ID is therefore never returned.

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

Persistence.  Idempotent state is not persisted: the partition replays the
batch headers of its newest segments on open (headers only, so it is
cheap); a producer whose batches lie only in older segments is unknown,
hence the KIP-360 leniency above.  A transaction, however, may have started
in any older segment, so every segment but a log's first starts with a
snapshot of the transactions open at its base offset, ``<base>.txnsnapshot``
(written when the segment is rolled, fsynced with the segment).  The rebuild
(kwire.log.partition) loads the snapshot of the first segment it replays and
replays from there, reading the one control record of each control batch.  A
missing or damaged snapshot (a crash before its fsync, a log written by an
older kwire) makes it start one segment earlier, down to the first segment,
whose missing snapshot means nothing was open; snapshots it passed are
written again.  Snapshot byte layout (big-endian)::

    offset  size  field
         0     2  version            int16   0
         2     4  crc                uint32  CRC-32C of every byte after this field
         6     4  count              int32
        10    22  count entries:     producer_id int64, producer_epoch int16,
                                     coordinator_epoch int32, first_offset int64
"""
from __future__ import annotations

import collections
import dataclasses
import struct

import crc32c

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import CONTROL_ABORT, CONTROL_COMMIT, INT32_MAX, BatchHeader

from .txn_index import AbortedTxn

MAX_CACHED_BATCHES = 5
NO_COORDINATOR_EPOCH = -1

SNAPSHOT_VERSION = 0
_SNAPSHOT_HEAD = struct.Struct(">hIi")     # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiq")   # producer_id, epoch, coordinator_epoch, first_offset
assert (_SNAPSHOT_HEAD.size, _SNAPSHOT_ENTRY.size) == (10, 22)
_CRC_START = 6


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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             collections.deque(self.batches, maxlen=MAX_CACHED_BATCHES),
                             self.coordinator_epoch, self.txn_first_offset)

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

    def record(self, header: BatchHeader) -> None:
        """Remember a batch that is now in the log (``header.base_offset`` is final)."""
        self.set_epoch(header.producer_epoch)
        self.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                          header.base_offset, header.last_offset))


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
              coordinator: bool = False) -> tuple[BatchMetadata | None, PendingAppend]:
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
                    self._check_order(entry, header, where)
                    entry = entry.copy()
                else:
                    entry = ProducerEntry(pid, header.producer_epoch)
                if entry.txn_first_offset is not None and not header.is_transactional:
                    raise KafkaApiError(ErrorCode.INVALID_TXN_STATE,
                                        f"{where}producer {pid} sent a non-transactional batch "
                                        f"while its transaction from offset "
                                        f"{entry.txn_first_offset} is open")
                if not coordinator:
                    entry.record(dataclasses.replace(header, base_offset=offset))
                else:
                    entry.set_epoch(header.producer_epoch)
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
                     coordinator_epoch: int, offset: int, where: str = "") -> PendingAppend:
        """Validate an end-transaction marker the leader would append at ``offset``; the result
        goes to ``commit`` once it is written.  Raises KafkaApiError with
        INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED."""
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
                continue
            if header.producer_epoch >= entry.epoch:   # an older epoch's batches are not cached
                entry.record(header)
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

    # -- snapshots of the open transactions ------------------------------------

    def snapshot(self) -> bytes:
        """The open transactions, in the ``.txnsnapshot`` layout (module docstring)."""
        body = bytearray(_SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, 0, len(self.ongoing)))
        for pid, first in sorted(self.ongoing.items()):
            entry = self._producers[pid]
            body += _SNAPSHOT_ENTRY.pack(pid, entry.epoch, entry.coordinator_epoch, first)
        struct.pack_into(">I", body, 2, crc32c.crc32c(memoryview(body)[_CRC_START:]))
        return bytes(body)

    def load_snapshot(self, data: bytes) -> None:
        """Start over from a snapshot: only its open transactions are known.  Raises
        SnapshotCorrupt (the state is then empty)."""
        self.clear()
        if len(data) < _SNAPSHOT_HEAD.size:
            raise SnapshotCorrupt(f"{len(data)} bytes, shorter than the header")
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise SnapshotCorrupt(f"unknown version {version}")
        if crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
            raise SnapshotCorrupt("CRC mismatch")
        if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
            raise SnapshotCorrupt(f"{len(data)} bytes for {count} entries")
        for i in range(count):
            pid, epoch, coordinator_epoch, first = _SNAPSHOT_ENTRY.unpack_from(
                data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size)
            self._producers[pid] = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                                                 txn_first_offset=first)
            self.ongoing[pid] = first
            self.max_producer_id = max(self.max_producer_id, pid)
