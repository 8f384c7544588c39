"""Records of the ``__share_group_state`` topic: the durable state of share-partitions (KIP-932).

The layout is Apache Kafka's share coordinator's (``ShareSnapshotKey``/``Value``,
``ShareUpdateKey``/``Value``), so the topic reads the same; they are encoded and decoded
from those specs (``codecs/specs``, through ``kwire.codecs.record_specs``).  A key starts with an int16
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

import uuid
from dataclasses import dataclass

from kwire.codecs.primitives import Reader
from kwire.codecs.record_specs import RecordSpec

SNAPSHOT_KEY = 0
UPDATE_KEY = 1
VALUE_VERSION = 0

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4       # persisted delivery states

KEYS = {SNAPSHOT_KEY: RecordSpec("ShareSnapshotKey"), UPDATE_KEY: RecordSpec("ShareUpdateKey")}
VALUES = {SNAPSHOT_KEY: RecordSpec("ShareSnapshotValue"), UPDATE_KEY: RecordSpec("ShareUpdateValue")}


class ShareRecordError(ValueError):
    """A ``__share_group_state`` key or value that cannot be decoded."""


@dataclass(frozen=True)
class ShareStateKey:
    """The key of a ``__share_group_state`` record: one share-partition's snapshot or update."""
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
def encode_key(kind: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return KEYS[kind].encode(kind, {"group_id": group_id, "topic_id": topic_id, "partition": partition})


def encode_snapshot(state: ShareState) -> bytes:
    return VALUES[SNAPSHOT_KEY].encode(VALUE_VERSION, {"state_epoch": state.state_epoch, **_value_fields(state)})


def encode_update(state: ShareState) -> bytes:
    return VALUES[UPDATE_KEY].encode(VALUE_VERSION, _value_fields(state))


def _value_fields(state: ShareState) -> dict:
    """The fields a snapshot and an update share (a snapshot adds state_epoch)."""
    return {"snapshot_epoch": state.snapshot_epoch & 0xFFFF,
            "leader_epoch": state.leader_epoch, "start_offset": state.start_offset,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                              for b in state.batches]}


# -- decoding ---------------------------------------------------------------------------
class _Reader(Reader):
    """The codecs reader, raising ``ShareRecordError``."""

    error = ShareRecordError
    __slots__ = ()


def decode_key(data: bytes) -> ShareStateKey | None:
    r = _Reader(data)
    kind = r.int16()
    if kind not in KEYS:
        return None
    f = KEYS[kind].decode(r, kind)
    r.end()
    return ShareStateKey(kind, f["group_id"], f["topic_id"], f["partition"])


def decode_value(kind: int, data: bytes) -> ShareState:
    r = _Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise ShareRecordError(f"unknown value version {version}")
    snapshot = kind == SNAPSHOT_KEY
    f = VALUES[SNAPSHOT_KEY if snapshot else UPDATE_KEY].decode(r, version)
    r.end()
    batches = tuple(StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                    for b in f["state_batches"])
    return ShareState(f["snapshot_epoch"], f["state_epoch"] if snapshot else -1, f["leader_epoch"],
                      f["start_offset"], batches)
