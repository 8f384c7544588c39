"""Records of the ``__transaction_state`` topic: the transaction coordinator's durable state.

The layout is Apache Kafka's own (``TransactionLogKey``/``TransactionLogValue``
of the ``transaction-coordinator`` module), so the topic stays readable by
Kafka's tooling and a Kafka broker could take it over.  The latest record for
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
import struct
from dataclasses import dataclass

from kwire.codecs.errors import CorruptFrame
from kwire.codecs.framing import read_uvarint
from kwire.codecs.messages import uvarint

KEY_VERSION = 0
VALUE_VERSION = 0          # what ``encode_value`` writes unless told otherwise
VALUE_VERSIONS = (0, 1)    # what ``decode_value`` reads

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
assert (INT8.size, INT16.size, INT32.size, INT64.size) == (1, 2, 4, 8)

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
def _string(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise TxnRecordError(f"string of {len(b)} bytes is too long for an int16 length")
    return INT16.pack(len(b)) + b


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def encode_key(transactional_id: str) -> bytes:
    return INT16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(v: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    """The value bytes, v0 (default) or v1.  Raises TxnRecordError for an Empty value with
    partitions (Kafka refuses it too) or an unknown version; v0 drops the v1-only fields."""
    if version not in VALUE_VERSIONS:
        raise TxnRecordError(f"unknown transaction log value version {version}")
    if v.state is TxnState.EMPTY and v.partitions:
        raise TxnRecordError("an Empty transaction has no partitions")
    head = [INT16.pack(version), INT64.pack(v.producer_id), INT16.pack(v.producer_epoch),
            INT32.pack(v.transaction_timeout_ms), INT8.pack(int(v.state))]
    tail = [INT64.pack(v.last_update_timestamp_ms), INT64.pack(v.start_timestamp_ms)]
    null = v.state is TxnState.EMPTY      # Kafka writes a null partition array for Empty
    if version == 0:
        parts = [INT32.pack(-1)] if null else [INT32.pack(len(v.partitions))]
        for topic, ids in [] if null else v.partitions:
            parts += [_string(topic), INT32.pack(len(ids)), *(INT32.pack(p) for p in ids)]
        return b"".join(head + parts + tail)
    parts = [uvarint(0)] if null else [uvarint(len(v.partitions) + 1)]
    for topic, ids in [] if null else v.partitions:
        parts += [_compact_string(topic), uvarint(len(ids) + 1), *(INT32.pack(p) for p in ids), uvarint(0)]
    tagged = []
    if v.previous_producer_id != -1:
        tagged.append((TAG_PREVIOUS_PRODUCER_ID, INT64.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tagged.append((TAG_NEXT_PRODUCER_ID, INT64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tagged.append((TAG_CLIENT_TRANSACTION_VERSION, INT16.pack(v.client_transaction_version)))
    tail.append(uvarint(len(tagged)))
    for tag, data in tagged:
        tail += [uvarint(tag), uvarint(len(data)), data]
    return b"".join(head + parts + tail)


# -- reading -------------------------------------------------------------------
class _Reader:
    """Bounds-checked cursor: every length is checked against the bytes left before use."""

    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordError(f"record truncated at byte {self.pos} (wanted {n})")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return INT8.unpack(self.take(1))[0]

    def int16(self) -> int:
        return INT16.unpack(self.take(2))[0]

    def int32(self) -> int:
        return INT32.unpack(self.take(4))[0]

    def int64(self) -> int:
        return INT64.unpack(self.take(8))[0]

    def uvarint(self) -> int:
        try:
            n, self.pos = read_uvarint(self.data, self.pos)
        except CorruptFrame as exc:       # past the end, or longer than Kafka's 32-bit varints
            raise TxnRecordError(f"{exc} at byte {self.pos}") from None
        return n

    def _text(self, n: int) -> str:
        try:
            return bytes(self.take(n)).decode()
        except UnicodeDecodeError as e:
            raise TxnRecordError(f"bad UTF-8 before byte {self.pos}") from e

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise TxnRecordError(f"null string at byte {self.pos}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise TxnRecordError(f"null string at byte {self.pos}")
        return self._text(n)

    def count(self, n: int, min_size: int, nullable: bool = False) -> int | None:
        """An array length: -1 is null where allowed; each element needs ``min_size`` bytes,
        so a length can never promise more elements than the bytes left can hold."""
        if n == -1 and nullable:
            return None
        if n < 0 or n * min_size > len(self.data) - self.pos:
            raise TxnRecordError(f"bad array length {n} at byte {self.pos}")
        return n

    def skip_tagged_fields(self) -> dict[int, memoryview]:
        fields = {}
        for _ in range(self.count(self.uvarint(), 2)):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def end(self) -> None:
        if self.pos != len(self.data):
            raise TxnRecordError(f"{len(self.data) - self.pos} trailing byte(s)")


def decode_key(key: bytes) -> str | None:
    """The transactional id of a key; ``None`` for a key version this coordinator does not know."""
    r = _Reader(key)
    if r.int16() != KEY_VERSION:
        return None
    transactional_id = r.string()
    r.end()
    return transactional_id


def decode_value(value: bytes) -> TxnLogValue:
    """A v0 or v1 value (a tombstone is the caller's ``None``); raises TxnRecordError."""
    r = _Reader(value)
    version = r.int16()
    if version not in VALUE_VERSIONS:
        raise TxnRecordError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id, producer_epoch, timeout_ms = r.int64(), r.int16(), r.int32()
    status = r.int8()
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnRecordError(f"unknown transaction status {status}") from None
    # Smallest entry: a topic ("" and an empty id array) = 6 bytes in v0, 3 in v1.
    n = r.count(r.uvarint() - 1, 3, nullable=True) if flexible else r.count(r.int32(), 6, nullable=True)
    partitions = []
    for _ in range(n or 0):
        topic = r.compact_string() if flexible else r.string()
        m = r.count(r.uvarint() - 1, 4) if flexible else r.count(r.int32(), 4)
        ids = tuple(r.int32() for _ in range(m))
        if flexible:
            r.skip_tagged_fields()
        partitions.append((topic, ids))
    last_update, start = r.int64(), r.int64()
    tagged = r.skip_tagged_fields() if flexible else {}
    r.end()
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, state,
                       () if state is TxnState.EMPTY else tuple(partitions), last_update, start,
                       _tagged(tagged, TAG_PREVIOUS_PRODUCER_ID, INT64, -1),
                       _tagged(tagged, TAG_NEXT_PRODUCER_ID, INT64, -1),
                       _tagged(tagged, TAG_CLIENT_TRANSACTION_VERSION, INT16, 0))


def _tagged(fields: dict[int, memoryview], tag: int, fmt: struct.Struct, default: int) -> int:
    data = fields.get(tag)
    if data is None:
        return default
    if len(data) != fmt.size:
        raise TxnRecordError(f"tagged field {tag} has {len(data)} bytes, not {fmt.size}")
    return fmt.unpack(data)[0]
