"""Idempotent producer state of one partition, rebuilt from batch headers.

For each producer id the broker remembers the latest epoch and the sequence
and offset ranges of the last five batches (a client has at most five in
flight per partition).  The rules follow Kafka's ProducerAppendInfo:

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

Nothing is persisted: the partition replays the headers of its newest
segments on open (headers only, so it is cheap).
"""
from __future__ import annotations

import collections
import dataclasses

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import INT32_MAX, BatchHeader

MAX_CACHED_BATCHES = 5


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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch,
                             collections.deque(self.batches, maxlen=MAX_CACHED_BATCHES))

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def record(self, header: BatchHeader) -> None:
        """Remember a batch that is now in the log (``header.base_offset`` is final)."""
        if header.producer_epoch != self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        self.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                          header.base_offset, header.last_offset))


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer id -> ProducerEntry, with a check/commit split so a failed append changes nothing."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self.max_producer_id = -1

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(self, headers: list[BatchHeader], first_offset: int,
              where: str = "") -> tuple[BatchMetadata | None, dict[int, ProducerEntry]]:
        """Validate the idempotent batches of one append that would start at ``first_offset``.

        Returns ``(duplicate, pending)``: ``duplicate`` is the metadata of the
        original batch if any batch is a retry of a cached one (then nothing
        must be appended); ``pending`` holds the updated entries to pass to
        ``commit`` once the bytes are written.  Raises KafkaApiError with
        INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER.
        """
        pending: dict[int, ProducerEntry] = {}
        offset = first_offset
        for header in headers:
            pid = header.producer_id
            if pid >= 0:
                entry = pending.get(pid) or self._producers.get(pid)
                if entry is not None:
                    duplicate = entry.find_duplicate(header)
                    if duplicate is not None:
                        return duplicate, {}
                    self._check_order(entry, header, where)
                    entry = entry.copy()
                else:
                    entry = ProducerEntry(pid, header.producer_epoch)
                entry.record(dataclasses.replace(header, base_offset=offset))
                pending[pid] = entry
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

    def commit(self, pending: dict[int, ProducerEntry]) -> None:
        """Install the entries returned by ``check`` after the append succeeded."""
        self._producers.update(pending)
        if pending:
            self.max_producer_id = max(self.max_producer_id, max(pending))

    def replay(self, header: BatchHeader) -> None:
        """Rebuild from a batch already in the log (no checks, as when Kafka loads a log)."""
        pid = header.producer_id
        if pid < 0:
            return
        self.max_producer_id = max(self.max_producer_id, pid)
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerEntry(pid, header.producer_epoch)
        elif header.producer_epoch < entry.epoch:
            return
        entry.record(header)

    def clear(self) -> None:
        self._producers.clear()
