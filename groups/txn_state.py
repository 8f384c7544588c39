"""The values of the transaction coordinator: Kafka's table of valid state transitions, its
settings, the state of one transactional id and what a call returns (``TxnResult`` with the
``TxnWrite`` to append and the ``TxnMarkers`` to write).  ``txn_coordinator`` applies them
and re-exports every public name here.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kwire.codecs.errors import ErrorCode

from .internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from .txn_records import TxnState

__all__ = ["APPEND_ERRORS", "COMPLETE_OF", "EXPIRABLE", "MAX_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
           "OFFSETS_TOPIC", "PREPARED", "PRODUCER_FENCED_MIN_VERSION", "TRANSACTION_STATE_TOPIC",
           "VALID_PREVIOUS_STATES", "InvalidTxnTransition", "TxnConfig", "TxnDescription", "TxnListing",
           "TxnMarkers", "TxnMetadata", "TxnPartition", "TxnResult", "TxnTransit", "TxnWrite", "WriteKind",
           "error_for_version", "is_epoch_exhausted", "is_v2_retry"]

E = ErrorCode
S = TxnState
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1                   # Short.MaxValue

# Kafka's TransactionState.validPreviousStates: a state may be entered only from these.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETE_OF = {S.PREPARE_COMMIT: S.COMPLETE_COMMIT, S.PREPARE_ABORT: S.COMPLETE_ABORT}
PREPARED = frozenset(COMPLETE_OF)       # decided; the markers are being written
EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})   # Kafka's isExpirationAllowed

# KIP-588: the first version of each API that understands PRODUCER_FENCED (api_key -> version).
PRODUCER_FENCED_MIN_VERSION = {22: 4, 24: 2, 25: 2, 26: 2}   # InitProducerId, AddPartitions/AddOffsetsToTxn, EndTxn

# Kafka's TransactionStateManager.appendTransactionToLog: append error -> coordinator error.
APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def error_for_version(error: ErrorCode, api_key: int, api_version: int) -> ErrorCode:
    """The code to send: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for a request version
    older than KIP-588's (InitProducerId < 4, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn < 2)."""
    if error == E.PRODUCER_FENCED and api_version < PRODUCER_FENCED_MIN_VERSION.get(api_key, 0):
        return E.INVALID_PRODUCER_EPOCH
    return error


def is_v2_retry(meta: "TxnMetadata", producer_id: int, producer_epoch: int) -> bool:
    """Whether an EndTxn with ``producer_id``/``producer_epoch`` retries the transactions v2
    decision ``meta`` holds: the epoch before its bump, or the exhausted epoch of the producer
    id it replaced (Kafka's retryOnEpochBump and retryOnOverflow)."""
    if meta.client_tv < 2:
        return False
    if producer_id == meta.producer_id and meta.producer_epoch == producer_epoch + 1:
        return True
    return (meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and producer_id == meta.last_producer_id
            and producer_id != meta.producer_id and producer_epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0)


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out Short.MaxValue, so the coordinator can always fence once more."""
    return epoch >= MAX_EPOCH - 1


class InvalidTxnTransition(RuntimeError):
    """A coordinator bug: a state change ``VALID_PREVIOUS_STATES`` does not allow."""


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's broker settings for transactions."""
    transaction_max_timeout_ms: int = 900_000                 # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000         # transactional.id.expiration.ms
    num_partitions: int = 50                                  # transaction.state.log.num.partitions
    # How long a timer-driven write (timeout abort, tombstone, completion record) waits after
    # its append failed before it is tried again.  Kafka retries aborts on its 10 s cleanup
    # interval and completion records at once from its marker thread.
    retry_backoff_ms: int = 1000


class WriteKind(enum.Enum):
    """Why a ``TxnWrite`` was made: decides what ``write_done`` answers."""
    INIT_PRODUCER_ID = "InitProducerId"
    FENCE = "InitProducerId fencing an ongoing transaction"
    ADD_PARTITIONS = "AddPartitionsToTxn"
    END_TXN = "EndTxn"
    TIMEOUT_ABORT = "abort of a timed-out transaction"
    COMPLETE = "completion after the markers"
    EXPIRE = "expiry of an idle transactional id"


@dataclass(frozen=True)
class TxnTransit:
    """The state a record writes (Kafka's TxnTransitMetadata); applied once the append succeeded."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_timestamp_ms: int
    last_update_timestamp_ms: int
    next_producer_id: int = NO_PRODUCER_ID      # TV2: the id a completion moves to (epoch exhausted)
    client_tv: int = 0                          # the transaction's version (2: epoch bump per EndTxn)


@dataclass(frozen=True)
class TxnWrite:
    """A record to append to ``__transaction_state``-``partition`` (acks=all, uncompressed,
    as Kafka), then to report with ``write_done``.  ``value`` None is a tombstone."""
    transactional_id: str
    partition: int
    coordinator_epoch: int
    key: bytes
    value: bytes | None
    kind: WriteKind
    target: TxnTransit | None
    write_id: int
    requested: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class TxnMarkers:
    """WriteTxnMarkers work: a COMMIT (``commit``) or ABORT marker for ``producer_id``/
    ``producer_epoch`` with ``coordinator_epoch`` on each of ``partitions`` (data partitions and
    the ``__consumer_offsets`` partitions of AddOffsetsToTxn groups).  ``txn_partition`` is the
    ``__transaction_state`` partition of the transactional id."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]
    txn_partition: int
    transaction_version: int = 0        # WriteTxnMarkers v2's TransactionVersion (2: TV2's bumped epoch)


@dataclass(frozen=True)
class TxnResult:
    """What one call decided.

    ``write`` None: the answer is final — ``error`` (with ``producer_id``/``producer_epoch`` for
    InitProducerId; ``partition_errors`` for AddPartitionsToTxn).  ``write`` set: append it
    (after ``backoff_ms``) and pass the append's outcome to ``write_done``, whose result is the
    answer.  ``markers``: write them, then call ``markers_written``.
    """
    error: ErrorCode = E.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    write: TxnWrite | None = None
    markers: TxnMarkers | None = None
    backoff_ms: int = 0
    partitions: tuple[tuple[str, int], ...] = ()

    @property
    def partition_errors(self) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn: Kafka's coordinator gives every requested partition the same code."""
        return {tp: self.error for tp in self.partitions}


@dataclass(frozen=True)
class TxnDescription:
    """One DescribeTransactions entry; on an error only ``error`` and the id are meaningful."""
    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = 0
    producer_epoch: int = 0
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = 0
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class TxnListing:
    """ListTransactions: (transactional_id, producer_id, state name) rows, sorted by id."""
    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    states: tuple[tuple[str, int, str], ...] = ()


@dataclass
class TxnMetadata:
    """One transactional id (Kafka's TransactionMetadata); changed only by ``_apply``."""
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    pending: TxnState | None = None      # Kafka's pendingState: a write or the markers are outstanding
    pending_write: int | None = None     # the write_id ``write_done`` waits for
    # A fence whose PrepareAbort append failed keeps its bumped epoch in memory (the old producer
    # stays fenced) and the next fence does not bump again, as Kafka.
    has_failed_epoch_fence: bool = False
    retry_at_ms: int = 0                 # timers wait until then after a failed timer-driven write
    next_producer_id: int = NO_PRODUCER_ID   # TV2, epoch exhausted: the id the completion moves to
    client_tv: int = 0                   # 2: the transaction was begun or decided with transactions v2

    def transit(self, **changes) -> TxnTransit:
        base = TxnTransit(self.producer_id, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                          self.timeout_ms, self.state, frozenset(self.partitions), self.start_timestamp_ms,
                          self.last_update_timestamp_ms, self.next_producer_id, self.client_tv)
        return replace(base, **changes)


@dataclass
class TxnPartition:
    coordinator_epoch: int
    loading: bool = True
    txns: dict[str, TxnMetadata] = field(default_factory=dict)
