"""Records of the ``__consumer_offsets`` topic: the coordinator's durable state.

The layout is Apache Kafka's own (``OffsetCommitKey``/``Value``,
``GroupMetadataKey``/``Value`` of the ``group-coordinator`` module), so the
topic stays readable by Kafka's tooling; keys and values are encoded and decoded
from those specs (``codecs/specs/*.json`` through ``kwire.codecs.record_specs``),
the layouts below are documentation, not hand-written encoders.  Every key and value starts with an
int16 version; the latest record for a key wins and a record with a null
value (tombstone) deletes it.  Non-flexible encoding, big-endian:

    string           int16 length N, then N bytes of UTF-8
    nullable string  int16 length, -1 for null
    bytes            int32 length N, then N bytes
    array            int32 count, then the elements

Keys
    offset key   int16 version (0 or 1; we write 1) | string group | string topic | int32 partition
    group key    int16 version 2 | string group

Offset value (we write v3; v0-v2 are read)
    v0  int16 0 | int64 offset | string metadata | int64 commit_timestamp
    v1  int16 1 | int64 offset | string metadata | int64 commit_timestamp | int64 expire_timestamp
    v2  int16 2 | int64 offset | string metadata | int64 commit_timestamp
    v3  int16 3 | int64 offset | int32 leader_epoch | string metadata | int64 commit_timestamp

Group value (we write v3; v0-v2 are read)
    int16 version | string protocol_type | int32 generation | nullable string protocol
    | nullable string leader | [v2+] int64 current_state_timestamp (-1 = none)
    | array of member:
        string member_id | [v3+] nullable string group_instance_id | string client_id
        | string client_host | [v1+] int32 rebalance_timeout | int32 session_timeout
        | bytes subscription | bytes assignment

Decoding raises ``GroupRecordError`` (a ``ValueError``) for truncated or
trailing bytes; a key of an unknown version decodes to ``None`` so newer
record kinds (e.g. KIP-848 groups) are skipped rather than misread.
"""
from __future__ import annotations

from dataclasses import dataclass

from kwire.codecs.primitives import INT16, INT32, Reader
from kwire.codecs.record_specs import RecordSpec

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
_READ_VERSIONS = (0, 1, 2, 3)      # of both values; Kafka's flexible v4 is not read yet

OFFSET_KEY = RecordSpec("OffsetCommitKey")
GROUP_KEY = RecordSpec("GroupMetadataKey")
OFFSET_VALUE = RecordSpec("OffsetCommitValue")
GROUP_VALUE = RecordSpec("GroupMetadataValue")
# a commit writes one key and one value per partition: these two take positional fields
_PACK_OFFSET_KEY = OFFSET_KEY.positional(OFFSET_KEY_VERSION)
_PACK_OFFSET_VALUE = OFFSET_VALUE.positional(OFFSET_VALUE_VERSION)
assert _PACK_OFFSET_KEY.fields == ("group", "topic", "partition")
assert _PACK_OFFSET_VALUE.fields == ("offset", "leader_epoch", "metadata", "commit_timestamp")


class GroupRecordError(ValueError):
    """A ``__consumer_offsets`` key or value that cannot be decoded."""


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int          # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only v1 records carry one


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str        # "" = none
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp: int  # -1 = none
    members: tuple[MemberValue, ...]


# -- writing -------------------------------------------------------------------
def _string(s: str) -> bytes:
    b = s.encode()
    return INT16.pack(len(b)) + b


def _bytes(b: bytes) -> bytes:
    return INT32.pack(len(b)) + b


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _PACK_OFFSET_KEY(group_id, topic, partition)


def group_key(group_id: str) -> bytes:
    return GROUP_KEY.encode(GROUP_KEY_VERSION, {"group": group_id})


def encode_offset_value(v: OffsetValue) -> bytes:
    return _PACK_OFFSET_VALUE(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)


def encode_group_value(v: GroupValue) -> bytes:
    return GROUP_VALUE.encode(GROUP_VALUE_VERSION, {
        "protocol_type": v.protocol_type, "generation": v.generation_id, "protocol": v.protocol_name,
        "leader": v.leader_id, "current_state_timestamp": v.current_state_timestamp,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                     "subscription": m.subscription, "assignment": m.assignment} for m in v.members]})


# -- reading -------------------------------------------------------------------
class _Reader(Reader):
    """The codecs reader, raising ``GroupRecordError``."""

    error = GroupRecordError
    __slots__ = ()


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    """Decode a key; ``None`` for a key version this coordinator does not own."""
    r = _Reader(key)
    version = r.int16()
    if version in (0, 1):
        f = OFFSET_KEY.decode(r, version)
        k: OffsetKey | GroupKey = OffsetKey(f["group"], f["topic"], f["partition"])
    elif version == 2:
        k = GroupKey(GROUP_KEY.decode(r, version)["group"])
    else:
        return None
    r.end()
    return k


def _value_reader(value: bytes, what: str) -> tuple[_Reader, int]:
    r = _Reader(value)
    version = r.int16()
    if version not in _READ_VERSIONS:
        raise GroupRecordError(f"unknown {what} value version {version}")
    return r, version


def decode_offset_value(value: bytes) -> OffsetValue:
    r, version = _value_reader(value, "offset")
    f = OFFSET_VALUE.decode(r, version)
    r.end()
    return OffsetValue(f["offset"], f["leader_epoch"], f["metadata"], f["commit_timestamp"],
                       f["expire_timestamp"])


def decode_group_value(value: bytes) -> GroupValue:
    r, version = _value_reader(value, "group")
    f = GROUP_VALUE.decode(r, version)
    r.end()
    members = tuple(
        MemberValue(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                    m["session_timeout"] if m["rebalance_timeout"] == -1 else m["rebalance_timeout"],
                    m["session_timeout"], m["subscription"], m["assignment"])
        for m in f["members"])
    return GroupValue(f["protocol_type"], f["generation"], f["protocol"], f["leader"],
                      f["current_state_timestamp"], members)


def parse_subscription(metadata: bytes) -> list[str]:
    """Topics of a consumer-protocol subscription (ConsumerProtocolSubscription, any version).

    Only the leading ``int16 version | array of string topics`` is read; the
    fields after it (user data, owned partitions, ...) are ignored.  Raises
    ``GroupRecordError`` (a ``ValueError``) when the bytes are not one.
    """
    r = _Reader(metadata)
    if r.int16() < 0:
        raise GroupRecordError("negative subscription version")
    return [r.string() for _ in range(r.array_len())]
