"""Records of the ``__share_group_state`` topic: the durable state of share-partitions (KIP-932).

The layout is Apache Kafka's share coordinator's (``ShareSnapshotKey``/``Value``,
``ShareUpdateKey``/``Value``), so the topic reads the same.  A key starts with an int16
record type, a value with an int16 value version.  Keys are non-flexible; values are
flexible (compact arrays, varint lengths + 1, an empty tagged-field section after every
struct).  Big-endian:

Keys (non-flexible)
    snapshot key  int16 0 | string group_id | uuid topic_id (16 bytes) | int32 partition
    update key    int16 1 | string group_id | uuid topic_id (16 bytes) | int32 partition
    string        int16 length N, then N bytes of UTF-8

Values (int16 version 0, then flexible)
    snapshot  uint16 snapshot_epoch | int32 state_epoch | int32 leader_epoch | int64 start_offset
              | compact array of state batch | tags
    update    uint16 snapshot_epoch | int32 leader_epoch | int64 start_offset (-1: unchanged)
              | compact array of state batch | tags
    state batch  int64 first_offset | int64 last_offset | int8 delivery_state (0 available,
                 2 acknowledged, 4 archived) | int16 delivery_count | tags

The latest snapshot of a key is the partition's state; an update applies its batches on
top of the snapshot before it (kwire writes snapshots only, and reads both).  A null
value (tombstone) deletes the share-partition's state (DeleteGroups).

Decoding raises ``ShareRecordError`` (a ``ValueError``) for truncated or trailing bytes,
and an unknown key type decodes to ``None`` (skipped, not misread).
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kwire.codecs.messages import uvarint

SNAPSHOT_KEY = 0
UPDATE_KEY = 1
VALUE_VERSION = 0

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4       # persisted delivery states

INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
BATCH = struct.Struct(">qqbh")
assert (INT16.size, INT32.size, INT64.size, BATCH.size) == (2, 4, 8, 19)


class ShareRecordError(ValueError):
    """A ``__share_group_state`` key or value that cannot be decoded."""


@dataclass(frozen=True)
class ShareKey:
    kind: int                  # SNAPSHOT_KEY or UPDATE_KEY
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareState:
    snapshot_epoch: int
    state_epoch: int           # -1 in an update
    leader_epoch: int
    start_offset: int          # -1 in an update that leaves it unchanged
    batches: tuple[StateBatch, ...]


# -- encoding ---------------------------------------------------------------------------
def _string(s: str) -> bytes:
    data = s.encode()
    return INT16.pack(len(data)) + data


def encode_key(kind: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return INT16.pack(kind) + _string(group_id) + topic_id.bytes + INT32.pack(partition)


def encode_snapshot(state: ShareState) -> bytes:
    head = (INT16.pack(VALUE_VERSION) + UINT16.pack(state.snapshot_epoch & 0xFFFF)
            + INT32.pack(state.state_epoch) + INT32.pack(state.leader_epoch) + INT64.pack(state.start_offset))
    return head + _batches(state.batches) + b"\x00"


def encode_update(state: ShareState) -> bytes:
    head = (INT16.pack(VALUE_VERSION) + UINT16.pack(state.snapshot_epoch & 0xFFFF)
            + INT32.pack(state.leader_epoch) + INT64.pack(state.start_offset))
    return head + _batches(state.batches) + b"\x00"


def _batches(batches) -> bytes:
    return uvarint(len(batches) + 1) + b"".join(
        BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) + b"\x00" for b in batches)


# -- decoding ---------------------------------------------------------------------------
class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ShareRecordError(f"truncated at byte {self.pos} (wanted {n})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: struct.Struct):
        return fmt.unpack(self.take(fmt.size))

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ShareRecordError("varint too long")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ShareRecordError(f"{len(self.data) - self.pos} trailing byte(s)")


def decode_key(data: bytes) -> ShareKey | None:
    r = _Reader(data)
    (kind,) = r.unpack(INT16)
    if kind not in (SNAPSHOT_KEY, UPDATE_KEY):
        return None
    (n,) = r.unpack(INT16)
    group_id = bytes(r.take(n)).decode()
    topic_id = uuid.UUID(bytes=bytes(r.take(16)))
    (partition,) = r.unpack(INT32)
    r.end()
    return ShareKey(kind, group_id, topic_id, partition)


def decode_value(kind: int, data: bytes) -> ShareState:
    r = _Reader(data)
    (version,) = r.unpack(INT16)
    if version != VALUE_VERSION:
        raise ShareRecordError(f"unknown value version {version}")
    (snapshot_epoch,) = r.unpack(UINT16)
    state_epoch = r.unpack(INT32)[0] if kind == SNAPSHOT_KEY else -1
    (leader_epoch,) = r.unpack(INT32)
    (start_offset,) = r.unpack(INT64)
    count = r.uvarint() - 1
    if count < 0 or count * BATCH.size > len(data):
        raise ShareRecordError(f"bad state batch count {count}")
    batches = []
    for _ in range(count):
        batches.append(StateBatch(*r.unpack(BATCH)))
        r.skip_tags()
    r.skip_tags()
    r.end()
    return ShareState(snapshot_epoch, state_epoch, leader_epoch, start_offset, tuple(batches))
