"""Records of the ``__transaction_state`` topic: the transaction coordinator's durable state.

The layout is Apache Kafka's own (``TransactionLogKey``/``TransactionLogValue``
of the ``transaction-coordinator`` module), so the topic stays readable by
Kafka's tooling and a Kafka broker could take it over; both are encoded and
decoded from those specs (``codecs/specs``, through ``kwire.codecs.record_specs``).  The latest record for
a key wins; a record with a null value (tombstone) deletes the transactional
id.  Big-endian throughout.

Key (only version 0 exists)
    int16 version 0 | string transactional_id            (string: int16 length N, N bytes UTF-8)

Value v0 (non-flexible; what Kafka 0.11-3.x writes, and what we write)
    int16 version 0
    int64 producer_id
    int16 producer_epoch
    int32 transaction_timeout_ms
    int8  transaction_status                    (``TxnState`` below: Empty 0 .. PrepareEpochFence 7)
    nullable array transaction_partitions       (int32 count, -1 = null; Kafka writes null for Empty)
        string topic | array partition_ids      (int32 count, then int32 each)
    int64 transaction_last_update_timestamp_ms
    int64 transaction_start_timestamp_ms        (-1 = no transaction yet)

Value v1 (flexible, KIP-915; read by Kafka 3.5+, written by Kafka 4.x once
``transaction.version`` >= 1): the same fields in the same order, then
    compact forms: uvarint N+1 before a string / array (0 = null), and each
    struct (every partitions entry, and the value itself) ends with tagged fields:
    uvarint count, then per field uvarint tag | uvarint size | data.
    Tags of the value: 0 int64 previous_producer_id (default -1),
    1 int64 next_producer_id (default -1), 2 int16 client_transaction_version (default 0).
    A tagged field equal to its default is not written; unknown tags are skipped.

We write v0: Kafka 3.x writes v0 whatever it runs (transactions "v1", KIP-98
plus KIP-360/588), and a 3.0-3.4 broker cannot read v1.  Both are read.

Decoding raises ``TxnRecordError`` (a ``ValueError``) for truncated, trailing
or malformed bytes (a length beyond the bytes left, an unknown status, bad
UTF-8); ``decode_key`` returns ``None`` for a key version it does not know, so
a record of a newer kind is skipped rather than misread.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from kwire.codecs.primitives import Reader
from kwire.codecs.record_specs import RecordSpec

KEY_VERSION = 0
VALUE_VERSION = 0          # what ``encode_value`` writes unless told otherwise
VALUE_VERSIONS = (0, 1)    # what ``decode_value`` reads

KEY = RecordSpec("TransactionLogKey")
VALUE = RecordSpec("TransactionLogValue")

# Tags of the v1 value's tagged fields.
TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2


class TxnRecordError(ValueError):
    """A ``__transaction_state`` key or value that cannot be decoded."""


class TxnState(enum.IntEnum):
    """Kafka's TransactionState; the value is the ``transaction_status`` id in the record."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions/ListTransactions use ("PrepareCommit", ...)."""
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_KAFKA_NAME.get(name)


_KAFKA_NAMES = {s: "".join(w.capitalize() for w in s.name.split("_")) for s in TxnState}
_BY_KAFKA_NAME = {n: s for s, n in _KAFKA_NAMES.items()}


@dataclass(frozen=True)
class TxnLogValue:
    """One ``TransactionLogValue``.  ``partitions`` keeps the record's grouping:
    ((topic, (partition id, ...)), ...); ``partitions_of`` builds it from a set."""
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    # v1 tagged fields (KIP-890); v0 records read as the defaults.
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0

    def topic_partitions(self) -> set[tuple[str, int]]:
        return {(topic, p) for topic, ids in self.partitions for p in ids}


def partitions_of(topic_partitions) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(topic, partition) pairs grouped by topic, sorted: the ``partitions`` of a ``TxnLogValue``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in topic_partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(sorted(set(ids)))) for topic, ids in sorted(by_topic.items()))


# -- writing -------------------------------------------------------------------
def encode_key(transactional_id: str) -> bytes:
    """Raises TxnRecordError for an id too long for an int16 length."""
    try:
        return KEY.encode(KEY_VERSION, {"transactional_id": transactional_id})
    except ValueError as exc:
        raise TxnRecordError(str(exc)) from None


def encode_value(v: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    """The value bytes, v0 (default) or v1.  Raises TxnRecordError for an Empty value with
    partitions (Kafka refuses it too), an unknown version or a topic name too long for its
    length prefix; v0 drops the v1-only fields."""
    if version not in VALUE_VERSIONS:
        raise TxnRecordError(f"unknown transaction log value version {version}")
    if v.state is TxnState.EMPTY and v.partitions:
        raise TxnRecordError("an Empty transaction has no partitions")
    null = v.state is TxnState.EMPTY      # Kafka writes a null partition array for Empty
    fields = {
        "producer_id": v.producer_id, "producer_epoch": v.producer_epoch,
        "transaction_timeout_ms": v.transaction_timeout_ms, "transaction_status": int(v.state),
        "transaction_partitions": None if null else [
            {"topic": topic, "partition_ids": list(ids)} for topic, ids in v.partitions],
        "transaction_last_update_timestamp_ms": v.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": v.start_timestamp_ms,
        "previous_producer_id": v.previous_producer_id, "next_producer_id": v.next_producer_id,
        "client_transaction_version": v.client_transaction_version}
    try:
        return VALUE.encode(version, fields)
    except ValueError as exc:
        raise TxnRecordError(str(exc)) from None


# -- reading -------------------------------------------------------------------
class _Reader(Reader):
    """The codecs reader, raising ``TxnRecordError``."""

    error = TxnRecordError
    __slots__ = ()


def decode_key(key: bytes) -> str | None:
    """The transactional id of a key; ``None`` for a key version this coordinator does not know."""
    r = _Reader(key)
    if r.int16() != KEY_VERSION:
        return None
    transactional_id = KEY.decode(r, KEY_VERSION)["transactional_id"]
    r.end()
    return transactional_id


def decode_value(value: bytes) -> TxnLogValue:
    """A v0 or v1 value (a tombstone is the caller's ``None``); raises TxnRecordError."""
    r = _Reader(value)
    version = r.int16()
    if version not in VALUE_VERSIONS:
        raise TxnRecordError(f"unknown transaction log value version {version}")
    f = VALUE.decode(r, version)
    r.end()
    status = f["transaction_status"]
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnRecordError(f"unknown transaction status {status}") from None
    partitions = () if state is TxnState.EMPTY else tuple(
        (p["topic"], tuple(p["partition_ids"])) for p in f["transaction_partitions"] or ())
    return TxnLogValue(f["producer_id"], f["producer_epoch"], f["transaction_timeout_ms"], state,
                       partitions, f["transaction_last_update_timestamp_ms"],
                       f["transaction_start_timestamp_ms"], f["previous_producer_id"],
                       f["next_producer_id"], f["client_transaction_version"])
