"""Kafka's transaction coordinator (KIP-98, with KIP-360 and KIP-588 epoch rules), sans-I/O.

One ``TransactionCoordinator`` holds the transactional ids of the
``__transaction_state`` partitions this broker leads.  It reads no clock and
does no I/O: every call takes ``now_ms`` and returns a ``TxnResult`` that tells
the caller what to do next.  The rules are those of Apache Kafka
(``TransactionCoordinator``/``TransactionMetadata``/``TransactionStateManager``);
a transactions v2 one (KIP-890 part 2: begun by an implicit add, decided by
EndTxn v5) bumps the epoch at its decision, its markers carry the bumped epoch,
and an exhausted epoch moves the id to a new producer id when it completes.

States (``TxnState``, with the id the record stores) and what moves them:

    Empty (0), CompleteCommit (4), CompleteAbort (5)
        InitProducerId              -> Empty, epoch + 1 (a new producer id at epoch 0 once exhausted)
        AddPartitions/AddOffsets    -> Ongoing: the transaction starts
        idle for transactional.id.expiration.ms -> Dead (6): a tombstone, the id is forgotten
    Ongoing (1)
        AddPartitions/AddOffsets    -> Ongoing with more partitions
        EndTxn(commit) / EndTxn(abort)  -> PrepareCommit (2) / PrepareAbort (3)
        InitProducerId, or open longer than its timeout
                                    -> PrepareAbort with epoch + 1, fencing the producer
                                       (Kafka's PrepareEpochFence (7), never written itself)
    PrepareCommit (2), PrepareAbort (3)
        markers_written             -> CompleteCommit / CompleteAbort

``VALID_PREVIOUS_STATES`` is Kafka's table of which state may follow which;
every change is checked against it (a violation is a coordinator bug:
``InvalidTxnTransition``).

Write, then answer.  A change is *prepared* (the transactional id gets a
pending state: other requests for it get CONCURRENT_TRANSACTIONS), returned as
``TxnResult.write`` (a ``TxnWrite``: key/value for ``__transaction_state``),
and applied only when the caller reports the append with
``write_done(write, error, now_ms)``; a failed append leaves the state as it
was (but a failed fence keeps its bumped epoch in memory, as Kafka).
``write_done`` returns the final answer for the client, and for a Prepare*
record the ``TxnMarkers`` to write; after writing them everywhere the caller
calls ``markers_written(markers, now_ms)``, whose result carries the
Complete* record.  Driving loop for any result ``r``::

    while r.write is not None:
        sleep(r.backoff_ms)                     # only after a failed completion record
        r = c.write_done(r.write, append(r.write), now)   # append: acks=all, returns ErrorCode
    answer(r)                                   # when a client is waiting
    if r.markers: write_markers(r.markers); r = c.markers_written(r.markers, now); loop again

Timers: ``expired(now_ms)`` returns the timed-out aborts and idle-id tombstones
due, as results to drive the same way; ``next_deadline_ms()`` says when to call
it.  Loading: ``begin_load(partition, coordinator_epoch)``, ``replay`` each
record, ``finish_load`` returns the markers of transactions the previous
coordinator decided but did not complete; ``unload_partition`` drops them.

Errors are Kafka's ``ErrorCode`` values, never exceptions.  PRODUCER_FENCED is
returned for every request version; ``error_for_version`` gives the code an
older client understands (INVALID_PRODUCER_EPOCH), as Kafka's KafkaApis does.

The values (the transition table, settings, metadata of one id, results) live in
``txn_state`` and are re-exported here; the timer queue is a ``Deadlines``.
"""
from __future__ import annotations

import itertools
import logging
from typing import Callable

from kwire.codecs.errors import ErrorCode, KafkaApiError

from .coordinator import partition_for
from .deadlines import Deadlines
from .txn_records import (
    TxnLogValue, TxnRecordError, TxnState, decode_key, decode_value, encode_key, encode_value, partitions_of,
)
from .txn_state import (
    APPEND_ERRORS, COMPLETE_OF, EXPIRABLE, MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, OFFSETS_TOPIC, PREPARED,
    PRODUCER_FENCED_MIN_VERSION, TRANSACTION_STATE_TOPIC, VALID_PREVIOUS_STATES, InvalidTxnTransition, TxnConfig,
    TxnDescription, TxnListing, TxnMarkers, TxnMetadata, TxnPartition, TxnResult, TxnTransit, TxnWrite, WriteKind,
    error_for_version, is_epoch_exhausted, is_v2_retry,
)

__all__ = ["InvalidTxnTransition", "TransactionCoordinator", "TxnConfig", "TxnDescription", "TxnListing",
           "TxnMarkers", "TxnMetadata", "TxnResult", "TxnState", "TxnTransit", "TxnWrite", "VALID_PREVIOUS_STATES",
           "WriteKind", "PRODUCER_FENCED_MIN_VERSION", "error_for_version", "OFFSETS_TOPIC",
           "TRANSACTION_STATE_TOPIC"]

logger = logging.getLogger("kwire.groups.txn")

E = ErrorCode
S = TxnState
_TxnPartition = TxnPartition       # the name tests and older callers use

class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads.
    Driven by one task; not thread-safe.

    ``allocate_producer_id()`` returns a new producer id, or raises ``KafkaApiError`` whose code
    is then answered (e.g. COORDINATOR_LOAD_IN_PROGRESS while a block of ids is being reserved).
    It is called at most once per call, only when a new id is needed (a new transactional id, or
    an exhausted epoch); an async service can reserve one before the call and hand it over.
    """

    def __init__(self, allocate_producer_id: Callable[[], int], config: TxnConfig | None = None):
        self.config = config or TxnConfig()
        self._allocate = allocate_producer_id
        self._partitions: dict[int, TxnPartition] = {}
        self._write_ids = itertools.count(1)
        self._deadlines = Deadlines()       # transactional id -> its timeout or expiry

    # ------------------------------------------------------------------ ownership and loading
    def partition_for(self, transactional_id: str) -> int:
        """Kafka's ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
        return partition_for(transactional_id, self.config.num_partitions)

    def coordinator_epoch(self, partition: int) -> int | None:
        part = self._partitions.get(partition)
        return None if part is None else part.coordinator_epoch

    def owned_partitions(self) -> dict[int, int]:
        """partition -> coordinator epoch of every partition loaded or being loaded."""
        return {p: part.coordinator_epoch for p, part in self._partitions.items()}

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``partition`` at leader epoch ``coordinator_epoch``: forget what it
        held of it (a write of an older load is answered NOT_COORDINATOR), then ``replay`` its
        records; its ids answer COORDINATOR_LOAD_IN_PROGRESS until ``finish_load``."""
        self.unload_partition(partition)
        self._partitions[partition] = TxnPartition(coordinator_epoch)

    def replay(self, key: bytes | None, value: bytes | None) -> bool:
        """Apply one ``__transaction_state`` record of a partition being loaded (value None:
        tombstone).  False for a record skipped: an unknown key version, an id of a partition
        not being loaded, or bytes that do not decode (logged: one damaged record must not stop
        the broker from starting)."""
        try:
            transactional_id = decode_key(bytes(key)) if key is not None else None
            if transactional_id is None:
                return False
            part = self._partitions.get(self.partition_for(transactional_id))
            if part is None or not part.loading:
                logger.warning("skipping a record of transactional id %r: its partition is not being loaded",
                               transactional_id)
                return False
            v = decode_value(bytes(value)) if value is not None else None
        except TxnRecordError as e:
            logger.warning("skipping undecodable transaction record (key %r): %s", key, e)
            return False
        if v is None or v.state is S.DEAD:
            part.txns.pop(transactional_id, None)
            return True
        # Kafka never writes PrepareEpochFence (it is a pending state only); were one found,
        # the fence never completed: the transaction is still open and will time out.
        state = S.ONGOING if v.state is S.PREPARE_EPOCH_FENCE else v.state
        part.txns[transactional_id] = TxnMetadata(
            transactional_id, v.producer_id, v.previous_producer_id, v.producer_epoch, NO_PRODUCER_EPOCH,
            v.transaction_timeout_ms, state, v.topic_partitions(), v.start_timestamp_ms,
            v.last_update_timestamp_ms, next_producer_id=v.next_producer_id,
            client_tv=v.client_transaction_version)
        return True

    def finish_load(self, partition: int) -> list[TxnMarkers]:
        """The partition's records are replayed: its ids are served from now on.  Returns the
        markers of the transactions found in PrepareCommit/PrepareAbort (the coordinator died
        after deciding): write them, then ``markers_written`` each.  Ongoing transactions are
        left to time out, as Kafka does."""
        part = self._partitions.get(partition)
        if part is None or not part.loading:
            return []
        part.loading = False
        jobs = []
        for meta in sorted(part.txns.values(), key=lambda m: m.transactional_id):
            if meta.state in PREPARED:
                meta.pending = COMPLETE_OF[meta.state]
                jobs.append(self._markers(partition, part, meta))
            self._reschedule(meta)
        return jobs

    def unload_partition(self, partition: int) -> int:
        """This broker no longer leads ``partition``: drop its ids (outstanding writes and
        markers of them are answered NOT_COORDINATOR).  Returns how many were dropped."""
        part = self._partitions.pop(partition, None)
        if part is None:
            return 0
        for transactional_id in part.txns:
            self._deadlines.discard(transactional_id)
        return len(part.txns)

    def pending_completions(self) -> list[TxnMarkers]:
        """The transactions in PrepareCommit/PrepareAbort whose markers are outstanding, of every
        loaded partition (``finish_load`` returned them, or ``write_done`` of their Prepare*)."""
        return [self._markers(p, part, meta)
                for p, part in sorted(self._partitions.items()) if not part.loading
                for meta in sorted(part.txns.values(), key=lambda m: m.transactional_id)
                if meta.state in PREPARED and meta.pending is COMPLETE_OF[meta.state]
                and meta.pending_write is None]

    def _lookup(self, transactional_id: str) -> tuple[int, TxnPartition | None, ErrorCode]:
        p = self.partition_for(transactional_id)
        part = self._partitions.get(p)
        if part is None:
            return p, None, E.NOT_COORDINATOR
        if part.loading:
            return p, None, E.COORDINATOR_LOAD_IN_PROGRESS
        return p, part, E.NONE

    def _new_producer_id(self) -> tuple[int, ErrorCode]:
        try:
            return self._allocate(), E.NONE
        except KafkaApiError as e:
            return NO_PRODUCER_ID, e.code

    # ------------------------------------------------------------------ InitProducerId
    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH, *,
                         now_ms: int) -> TxnResult:
        """InitProducerId with a transactional id (without one the caller hands out a plain id).

        A new id gets a producer id from the allocator and epoch 0; a known one its epoch bumped
        (fencing the previous producer), or a new producer id with epoch 0 when the epoch is
        exhausted.  An open transaction is first aborted with a bumped epoch: the answer is then
        CONCURRENT_TRANSACTIONS and the client retries.  KIP-360 (``producer_id``/
        ``producer_epoch`` given): they must be the current ones (or a retry of the last bump),
        else PRODUCER_FENCED.
        """
        if not transactional_id or (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return TxnResult(E.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return TxnResult(E.INVALID_TRANSACTION_TIMEOUT)
        p, part, error = self._lookup(transactional_id)
        if part is None:
            return TxnResult(error)
        meta = part.txns.get(transactional_id)
        if meta is None:
            new_id, error = self._new_producer_id()
            if error != E.NONE:
                return TxnResult(error)
            # As Kafka, the new id is cached before its first record is written.
            meta = part.txns[transactional_id] = TxnMetadata(
                transactional_id, new_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                transaction_timeout_ms, S.EMPTY, last_update_timestamp_ms=now_ms)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if meta.pending is not None:
            return TxnResult(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                meta.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == meta.producer_id
                or (expected[0] == meta.last_producer_id and is_epoch_exhausted(expected[1]))):
            return TxnResult(E.PRODUCER_FENCED)
        if meta.state in PREPARED:
            return TxnResult(E.CONCURRENT_TRANSACTIONS)
        if meta.state is S.ONGOING:
            # The bumped epoch is never returned: the client retries and gets a second bump
            # (or a new producer id, if this one exhausted the epochs).
            return TxnResult(write=self._fence_and_abort(p, part, meta, WriteKind.FENCE, now_ms))
        transit = self._next_producer(meta, transaction_timeout_ms, expected, now_ms)
        if isinstance(transit, ErrorCode):
            return TxnResult(transit)
        return TxnResult(write=self._prepare(p, part, meta, transit, WriteKind.INIT_PRODUCER_ID))

    def _next_producer(self, meta: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                       now_ms: int) -> TxnTransit | ErrorCode:
        """Empty with the next (producer id, epoch): Kafka's prepareProducerIdRotation and
        prepareIncrementProducerEpoch."""
        empty = dict(state=S.EMPTY, timeout_ms=timeout_ms, partitions=frozenset(), start_timestamp_ms=-1,
                     last_update_timestamp_ms=now_ms)
        if is_epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
            new_id, error = self._new_producer_id()
            if error != E.NONE:
                return error
            return meta.transit(producer_id=new_id, producer_epoch=0, **empty,
                                last_producer_epoch=meta.producer_epoch if expected else NO_PRODUCER_EPOCH)
        if expected is None:
            epoch, last_epoch = meta.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
            # The producer resumes after an error and nobody else has initialised since.
            epoch, last_epoch = meta.producer_epoch + 1, meta.producer_epoch
        elif expected[1] == meta.last_producer_epoch:
            # A retry of a bump whose answer was lost: answer it again, without bumping.
            # (Kafka throws here when the current epoch is exhausted; the retry answer is right.)
            epoch, last_epoch = meta.producer_epoch, meta.last_producer_epoch
        else:
            return E.PRODUCER_FENCED
        return meta.transit(producer_epoch=epoch, last_producer_epoch=last_epoch, **empty)

    # ------------------------------------------------------------------ AddPartitionsToTxn, AddOffsetsToTxn
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions, now_ms: int, *, tv2: bool = False) -> TxnResult:
        """AddPartitionsToTxn of (topic, partition) pairs: Empty/Complete* become Ongoing (the
        transaction starts now), Ongoing gains the partitions.  ``tv2``: the add is transactions
        v2's implicit one (a partition leader's, for a Produce v12 or TxnOffsetCommit v5): the
        transaction is then a v2 one, whose EndTxn bumps the epoch.  The result's
        ``partition_errors`` gives every requested partition the same code, as Kafka; the
        caller answers unknown or unauthorised partitions itself, without calling this."""
        requested = tuple(dict.fromkeys((str(t), int(p)) for t, p in partitions))
        if not transactional_id:
            return TxnResult(E.INVALID_REQUEST, partitions=requested)
        p, part, error = self._lookup(transactional_id)
        meta = part.txns.get(transactional_id) if part is not None else None
        if part is not None:
            error = self._check_producer(meta, producer_id, producer_epoch)
        if error == E.NONE and (meta.pending is not None or meta.state in PREPARED):
            error = E.CONCURRENT_TRANSACTIONS
        if error != E.NONE:
            return TxnResult(error, partitions=requested)
        if meta.state is S.ONGOING and meta.partitions.issuperset(requested):
            return TxnResult(E.NONE, partitions=requested)
        start = now_ms if meta.state in EXPIRABLE else meta.start_timestamp_ms
        version = 2 if tv2 else meta.client_tv if meta.state is S.ONGOING else 0
        transit = meta.transit(state=S.ONGOING, partitions=frozenset(meta.partitions).union(requested),
                               start_timestamp_ms=start, last_update_timestamp_ms=now_ms, client_tv=version)
        write = self._prepare(p, part, meta, transit, WriteKind.ADD_PARTITIONS, requested)
        return TxnResult(write=write, partitions=requested)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    offsets_partition: int, now_ms: int) -> TxnResult:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition (the caller computes it:
        ``partition_for(group_id, <its partition count>)``) joins the transaction, so the
        markers reach the group coordinator's pending transactional offsets."""
        del group_id   # as Kafka: the transaction records the partition, not the group
        return self.add_partitions(transactional_id, producer_id, producer_epoch,
                                   [(OFFSETS_TOPIC, offsets_partition)], now_ms)

    @staticmethod
    def _check_producer(meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    # ------------------------------------------------------------------ EndTxn
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int, *, tv2: bool = False) -> TxnResult:
        """EndTxn: Ongoing becomes PrepareCommit/PrepareAbort.  A retry after the decision:
        CONCURRENT_TRANSACTIONS while its markers are being written, NONE once complete; the
        opposite decision then gets INVALID_TXN_STATE, and so does EndTxn with no transaction
        (Empty), as Kafka.

        ``tv2`` (EndTxn v5, KIP-890 part 2): the decision bumps the producer epoch, the markers
        carry the bumped epoch (a late write of the old one is fenced at every partition) and
        the answer gives the producer id and epoch of the next transaction; once the epoch is
        exhausted, a new producer id at epoch 0, taken when the markers are written.  A v2
        transaction's retry carries the epoch before the bump (Kafka's endTxnEpochBumped), or
        the exhausted one of the previous producer id; the current epoch of a decided v2
        transaction begins the next one, which has nothing to end (INVALID_TXN_STATE)."""
        if not transactional_id:
            return TxnResult(E.INVALID_REQUEST)
        p, part, error = self._lookup(transactional_id)
        if part is None:
            return TxnResult(error)
        meta = part.txns.get(transactional_id)
        if meta is None:
            return TxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        retry = is_v2_retry(meta, producer_id, producer_epoch)
        if meta.producer_id != producer_id and not retry:
            return TxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        if not (retry or meta.producer_epoch == producer_epoch) or (
                retry and meta.state not in PREPARED and meta.state not in COMPLETE_OF.values()):
            return TxnResult(E.PRODUCER_FENCED)
        if meta.pending is not None:
            return TxnResult(E.CONCURRENT_TRANSACTIONS)
        if meta.state is S.ONGOING and not retry:
            return self._decide(p, part, meta, commit, tv2, now_ms)
        decided = {S.PREPARE_COMMIT: True, S.COMPLETE_COMMIT: True, S.PREPARE_ABORT: False, S.COMPLETE_ABORT: False}
        if meta.state in decided and decided[meta.state] == commit and (retry or meta.client_tv < 2):
            if meta.state in PREPARED:
                return TxnResult(E.CONCURRENT_TRANSACTIONS)
            return TxnResult(E.NONE, meta.producer_id, meta.producer_epoch)
        return TxnResult(E.INVALID_TXN_STATE)

    def _decide(self, p: int, part: TxnPartition, meta: TxnMetadata, commit: bool, tv2: bool,
                now_ms: int) -> TxnResult:
        """PrepareCommit/PrepareAbort of the open transaction (with ``tv2``, the epoch bumped)."""
        changes: dict = {}
        if tv2:
            next_id = NO_PRODUCER_ID
            if is_epoch_exhausted(meta.producer_epoch):
                next_id, error = self._new_producer_id()
                if error != E.NONE:
                    return TxnResult(error)
            changes = dict(producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch,
                           next_producer_id=next_id, client_tv=2)
        transit = meta.transit(state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                               last_update_timestamp_ms=now_ms, **changes)
        return TxnResult(write=self._prepare(p, part, meta, transit, WriteKind.END_TXN))

    def _fence_and_abort(self, p: int, part: TxnPartition, meta: TxnMetadata, kind: WriteKind,
                         now_ms: int) -> TxnWrite:
        """Kafka's prepareFenceProducerEpoch + endTransaction(ABORT): one PrepareAbort record with
        the epoch bumped, so the open transaction's producer is fenced."""
        epoch = meta.producer_epoch
        if not meta.has_failed_epoch_fence and epoch < MAX_EPOCH:
            epoch += 1    # (at Short.MaxValue Kafka throws; here the abort goes ahead unfenced)
        transit = meta.transit(state=S.PREPARE_ABORT, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                               last_update_timestamp_ms=now_ms)
        return self._prepare(p, part, meta, transit, kind)

    # ------------------------------------------------------------------ writes and markers
    def _prepare(self, p: int, part: TxnPartition, meta: TxnMetadata, transit: TxnTransit | None,
                 kind: WriteKind, requested: tuple = ()) -> TxnWrite:
        """Make the record of a change and mark the id pending until ``write_done``."""
        target = S.DEAD if transit is None else transit.state
        pending_ok = meta.pending is None or (kind is WriteKind.COMPLETE and meta.pending is target)
        if not pending_ok or meta.state not in VALID_PREVIOUS_STATES[target]:
            raise InvalidTxnTransition(f"transactional id {meta.transactional_id!r}: {meta.state.kafka_name} "
                                       f"-> {target.kafka_name} (pending {meta.pending})")
        value = None
        if transit is not None:
            v2 = transit.client_tv >= 2 or transit.next_producer_id != NO_PRODUCER_ID
            previous = transit.last_producer_id if transit.last_producer_id != transit.producer_id else NO_PRODUCER_ID
            value = encode_value(TxnLogValue(
                transit.producer_id, transit.producer_epoch, transit.timeout_ms, transit.state,
                () if transit.state is S.EMPTY else partitions_of(transit.partitions),
                transit.last_update_timestamp_ms, transit.start_timestamp_ms, previous,
                transit.next_producer_id, transit.client_tv), 1 if v2 else 0)
        write = TxnWrite(meta.transactional_id, p, part.coordinator_epoch, encode_key(meta.transactional_id),
                         value, kind, transit, next(self._write_ids), requested)
        meta.pending = target
        meta.pending_write = write.write_id
        self._reschedule(meta)
        return write

    def write_done(self, write: TxnWrite, error: ErrorCode, now_ms: int) -> TxnResult:
        """The append of ``write`` finished with ``error`` (NONE: written and replicated).

        Success applies the record's state and answers the request: InitProducerId gets its
        producer id and epoch; a Prepare* record gives the ``markers`` (and the answer NONE, or
        CONCURRENT_TRANSACTIONS for an InitProducerId that fenced an open transaction).  A
        failure leaves the state as it was and answers the append's error as Kafka maps it
        (e.g. NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, REQUEST_TIMED_OUT ->
        COORDINATOR_NOT_AVAILABLE) — except a completion record, which comes back as ``write``
        to append again after ``backoff_ms``.  A write of a partition unloaded or reloaded
        since is answered NOT_COORDINATOR and changes nothing.
        """
        error = APPEND_ERRORS.get(E(error), E(error))
        part = self._partitions.get(write.partition)
        meta = part.txns.get(write.transactional_id) if part is not None else None
        if (meta is None or part.loading or part.coordinator_epoch != write.coordinator_epoch
                or meta.pending_write != write.write_id):
            return TxnResult(E.NOT_COORDINATOR if error == E.NONE else error, partitions=write.requested)
        if error != E.NONE:
            return self._write_failed(meta, write, error, now_ms)
        if write.kind is WriteKind.EXPIRE:
            del part.txns[write.transactional_id]
            self._deadlines.discard(write.transactional_id)
            return TxnResult(E.NONE)
        self._apply(meta, write.target)
        kind = write.kind
        if kind in (WriteKind.END_TXN, WriteKind.FENCE, WriteKind.TIMEOUT_ABORT):
            meta.pending = COMPLETE_OF[meta.state]      # the markers are outstanding: no timer
            answer = E.CONCURRENT_TRANSACTIONS if kind is WriteKind.FENCE else E.NONE
            ids = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)      # EndTxn v5: the next transaction's
            if kind is WriteKind.END_TXN:
                ids = ((meta.next_producer_id, 0) if meta.next_producer_id != NO_PRODUCER_ID
                       else (meta.producer_id, meta.producer_epoch))
            return TxnResult(answer, *ids, markers=self._markers(write.partition, part, meta))
        self._reschedule(meta)
        if kind is WriteKind.INIT_PRODUCER_ID:
            return TxnResult(E.NONE, meta.producer_id, meta.producer_epoch)
        if kind is WriteKind.COMPLETE:
            meta.has_failed_epoch_fence = False
        return TxnResult(E.NONE, partitions=write.requested)

    def _write_failed(self, meta: TxnMetadata, write: TxnWrite, error: ErrorCode, now_ms: int) -> TxnResult:
        backoff = self.config.retry_backoff_ms
        if write.kind is WriteKind.COMPLETE:
            # The decision is durable and the markers are written: only this record is missing.
            # Kafka retries it too (its other errors are fatal there; retrying is the safe reading).
            return TxnResult(error, write=write, backoff_ms=backoff)
        meta.pending = None
        meta.pending_write = None
        if write.kind in (WriteKind.FENCE, WriteKind.TIMEOUT_ABORT):
            meta.producer_epoch = write.target.producer_epoch
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
            meta.has_failed_epoch_fence = True
        if write.kind in (WriteKind.TIMEOUT_ABORT, WriteKind.EXPIRE):
            meta.retry_at_ms = now_ms + backoff
        self._reschedule(meta)
        logger.info("transactional id %r: %s not written (%s)", meta.transactional_id, write.kind.value, error.name)
        return TxnResult(error, partitions=write.requested)

    @staticmethod
    def _apply(meta: TxnMetadata, t: TxnTransit) -> None:
        meta.producer_id, meta.last_producer_id = t.producer_id, t.last_producer_id
        meta.producer_epoch, meta.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        meta.timeout_ms, meta.state = t.timeout_ms, t.state
        meta.partitions = set(t.partitions)
        meta.start_timestamp_ms, meta.last_update_timestamp_ms = t.start_timestamp_ms, t.last_update_timestamp_ms
        meta.next_producer_id, meta.client_tv = t.next_producer_id, t.client_tv
        meta.pending = None
        meta.pending_write = None

    @staticmethod
    def _markers(p: int, part: TxnPartition, meta: TxnMetadata) -> TxnMarkers:
        return TxnMarkers(meta.transactional_id, meta.producer_id, meta.producer_epoch, part.coordinator_epoch,
                          meta.state is S.PREPARE_COMMIT, tuple(sorted(meta.partitions)), p,
                          2 if meta.client_tv >= 2 else 0)

    def markers_written(self, markers: TxnMarkers, now_ms: int) -> TxnResult:
        """Every marker of ``markers`` is written (a partition whose topic was deleted counts
        as written, as Kafka skips it): the result's ``write`` is the CompleteCommit/
        CompleteAbort record.  NOT_COORDINATOR (nothing to write) when the partition was
        unloaded or reloaded since, INVALID_TXN_STATE when the transaction is not the one
        the markers were for."""
        part = self._partitions.get(markers.txn_partition)
        if part is None or part.loading or part.coordinator_epoch != markers.coordinator_epoch:
            return TxnResult(E.NOT_COORDINATOR)
        meta = part.txns.get(markers.transactional_id)
        if (meta is None or meta.state not in PREPARED or meta.pending is not COMPLETE_OF[meta.state]
                or meta.pending_write is not None or markers.commit != (meta.state is S.PREPARE_COMMIT)
                or (meta.producer_id, meta.producer_epoch) != (markers.producer_id, markers.producer_epoch)):
            return TxnResult(E.INVALID_TXN_STATE)
        moved = {}
        if meta.client_tv >= 2:     # as Kafka's prepareComplete: the epoch before the bump is no retry
            moved = dict(last_producer_epoch=meta.producer_epoch)     # of an InitProducerId any more
        if meta.next_producer_id != NO_PRODUCER_ID:     # v2, epoch exhausted: the next id, at epoch 0
            moved = dict(producer_id=meta.next_producer_id, last_producer_id=meta.producer_id, producer_epoch=0,
                         last_producer_epoch=meta.producer_epoch, next_producer_id=NO_PRODUCER_ID)
        transit = meta.transit(state=COMPLETE_OF[meta.state], partitions=frozenset(),
                               last_update_timestamp_ms=now_ms, **moved)
        return TxnResult(write=self._prepare(markers.txn_partition, part, meta, transit, WriteKind.COMPLETE))

    # ------------------------------------------------------------------ timers
    def _deadline(self, meta: TxnMetadata) -> int | None:
        if meta.pending is not None:
            return None
        if meta.state is S.ONGOING:
            at = meta.start_timestamp_ms + meta.timeout_ms + 1    # Kafka: start + timeout < now
        elif meta.state in EXPIRABLE:
            at = meta.last_update_timestamp_ms + self.config.transactional_id_expiration_ms
        else:
            return None
        return max(at, meta.retry_at_ms)

    def _reschedule(self, meta: TxnMetadata) -> None:
        self._deadlines.set(meta.transactional_id, self._deadline(meta))
        self._deadlines.compact()

    def next_deadline_ms(self) -> int | None:
        """When ``expired`` next has work, or None."""
        return self._deadlines.earliest()

    def expired(self, now_ms: int) -> list[TxnResult]:
        """The timer work due at ``now_ms``, each a result with a ``write`` to drive:
        transactions Ongoing longer than their timeout are aborted with an epoch bump (their
        producer is fenced, as Kafka's timed-out abort; the result brings markers once written),
        and ids idle in Empty/Complete* for ``transactional_id_expiration_ms`` are tombstoned
        (forgotten once the tombstone is written)."""
        results = []
        for transactional_id in self._deadlines.pop_due(now_ms):
            p, part, _ = self._lookup(transactional_id)
            meta = part.txns.get(transactional_id) if part is not None else None
            if meta is None or self._deadline(meta) is None:
                continue
            if self._deadline(meta) > now_ms:
                self._reschedule(meta)
            elif meta.state is S.ONGOING:
                logger.info("aborting transaction of %r: open longer than its timeout %d ms",
                            transactional_id, meta.timeout_ms)
                results.append(TxnResult(write=self._fence_and_abort(p, part, meta, WriteKind.TIMEOUT_ABORT, now_ms)))
            else:
                results.append(TxnResult(write=self._prepare(p, part, meta, None, WriteKind.EXPIRE)))
        return results

    # ------------------------------------------------------------------ DescribeTransactions, ListTransactions
    def describe_transactions(self, transactional_ids) -> list[TxnDescription]:
        """DescribeTransactions entries, in request order; reads only."""
        out = []
        for transactional_id in transactional_ids:
            _, part, error = self._lookup(transactional_id) if transactional_id else (0, None, E.INVALID_REQUEST)
            meta = part.txns.get(transactional_id) if part is not None else None
            if part is not None and meta is None:
                error = E.TRANSACTIONAL_ID_NOT_FOUND
            if meta is None:
                out.append(TxnDescription(transactional_id, error))
                continue
            out.append(TxnDescription(transactional_id, E.NONE, meta.state.kafka_name, meta.producer_id,
                                      meta.producer_epoch, meta.timeout_ms, meta.start_timestamp_ms,
                                      partitions_of(meta.partitions)))
        return out

    def list_transactions(self, state_filters=(), producer_id_filters=(), duration_filter_ms: int = -1,
                          now_ms: int = 0) -> TxnListing:
        """ListTransactions over every loaded partition: COORDINATOR_LOAD_IN_PROGRESS while any is
        loading; unknown state names are echoed back; ``duration_filter_ms`` >= 0 (v1) keeps only
        transactions started more than that long before ``now_ms``."""
        if any(part.loading for part in self._partitions.values()):
            return TxnListing(E.COORDINATOR_LOAD_IN_PROGRESS)
        states = {TxnState.from_kafka_name(name) for name in state_filters} - {None}
        unknown = tuple(name for name in state_filters if TxnState.from_kafka_name(name) is None)
        pids = set(producer_id_filters)
        rows = []
        for part in self._partitions.values():
            for meta in part.txns.values():
                if ((pids and meta.producer_id not in pids) or (state_filters and meta.state not in states)
                        or (duration_filter_ms >= 0 and now_ms - meta.start_timestamp_ms <= duration_filter_ms)):
                    continue
                rows.append((meta.transactional_id, meta.producer_id, meta.state.kafka_name))
        return TxnListing(E.NONE, unknown, tuple(sorted(rows)))
