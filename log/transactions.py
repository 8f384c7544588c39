"""What a partition log answers about transactions and producers (KIP-98; the rules are
kwire.log.producer_state): where read_committed consumers stop, which transactions are open,
DescribeProducers, and Fetch's aborted-transaction list read from the segments' ``.txnindex``
files.  ``TransactionalLog`` is mixed into ``PartitionLog`` (kwire.log.partition) and reads its
producer state and segments directly; no method here writes anything.
"""
from __future__ import annotations

from typing import NamedTuple

from .segment import CorruptSegment, bisect_segments
from .txn_index import TxnIndexCorrupt


class ActiveProducer(NamedTuple):
    """One producer's state in a partition, as DescribeProducers reports it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int             # -1: no batch cached
    last_timestamp: int            # -1: unknown
    coordinator_epoch: int         # -1: no marker seen
    current_txn_start_offset: int  # -1: no transaction open here


class TransactionalLog:
    """Transaction and producer queries of ``PartitionLog`` (a mixin)."""

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the first offset of the earliest transaction
        still open, or completed by a marker not yet below the high watermark, clamped to
        [log_start_offset, high_watermark] (Kafka's UnifiedLog.lastStableOffset); the high
        watermark when there is none.  No I/O."""
        hw = self.high_watermark
        unstable = self._producers.first_unstable_offset(hw)
        if unstable is None:
            return hw
        return min(max(unstable, self.log_start_offset), hw)

    def has_open_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has a transaction open in this partition (no copy: Produce asks)."""
        return producer_id in self._producers.ongoing

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its transaction open in this partition (a copy)."""
        return dict(self._producers.ongoing)

    def active_producers(self) -> list[ActiveProducer]:
        """DescribeProducers: every producer this partition holds state for, by producer id
        (Kafka's UnifiedLog.activeProducers).  ``last_timestamp`` is the max timestamp of the
        producer's last cached data batch, read from its header (-1 when it has none cached,
        e.g. only markers, or the batch was deleted); Kafka also moves it to a marker's
        timestamp, which kwire does not track.  Raises KafkaApiError(KAFKA_STORAGE_ERROR)
        when the partition is offline."""
        self.health.check_online()
        out = []
        for pid, entry in self._producers.entries():
            last = entry.batches[-1] if entry.batches else None
            timestamp = -1
            if last is not None and last.first_offset >= self.log_start_offset:
                segments = self.segments
                try:
                    header = segments[max(0, bisect_segments(segments, last.first_offset))].find_batch(
                        last.first_offset)
                except (CorruptSegment, OSError) as exc:
                    raise self._damaged(exc) from None
                if header is not None:
                    timestamp = header.max_timestamp
            out.append(ActiveProducer(pid, entry.epoch, entry.last_seq, timestamp, entry.coordinator_epoch,
                                      -1 if entry.txn_first_offset is None else entry.txn_first_offset))
        return out

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of every aborted transaction with its ABORT marker at
        or after ``fetch_offset`` and first offset below ``upper_bound``, oldest marker first:
        Fetch's ``aborted_transactions`` for read_committed consumers (Kafka's
        collectAbortedTransactions).  Reads the transaction index of the segment holding
        ``fetch_offset`` and later ones, until an entry's last stable offset reaches
        ``upper_bound``.  Raises KafkaApiError(KAFKA_STORAGE_ERROR) if the partition is offline
        or an index is unreadable (which takes it offline)."""
        self.health.check_online()
        segments = self.segments
        found: list[tuple[int, int]] = []
        try:
            for segment in segments[max(0, bisect_segments(segments, fetch_offset)):]:
                txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
                found.extend((txn.producer_id, txn.first_offset) for txn in txns)
                if complete:
                    break
        except (TxnIndexCorrupt, OSError) as exc:
            raise self._damaged(exc) from None
        return found
