"""Records of the ``__consumer_offsets`` topic: the coordinator's durable state.

The layout is Apache Kafka's own (``OffsetCommitKey``/``Value``,
``GroupMetadataKey``/``Value`` of the ``group-coordinator`` module), so the
topic stays readable by Kafka's tooling.  Every key and value starts with an
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

import struct
from dataclasses import dataclass

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
assert (INT16.size, INT32.size, INT64.size) == (2, 4, 8)


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


def _nullable_string(s: str | None) -> bytes:
    return INT16.pack(-1) if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return INT32.pack(len(b)) + b


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return INT16.pack(OFFSET_KEY_VERSION) + _string(group_id) + _string(topic) + INT32.pack(partition)


def group_key(group_id: str) -> bytes:
    return INT16.pack(GROUP_KEY_VERSION) + _string(group_id)


def encode_offset_value(v: OffsetValue) -> bytes:
    return b"".join((INT16.pack(OFFSET_VALUE_VERSION), INT64.pack(v.offset), INT32.pack(v.leader_epoch),
                     _string(v.metadata), INT64.pack(v.commit_timestamp)))


def encode_group_value(v: GroupValue) -> bytes:
    parts = [INT16.pack(GROUP_VALUE_VERSION), _string(v.protocol_type), INT32.pack(v.generation_id),
             _nullable_string(v.protocol_name), _nullable_string(v.leader_id),
             INT64.pack(v.current_state_timestamp), INT32.pack(len(v.members))]
    for m in v.members:
        parts += [_string(m.member_id), _nullable_string(m.group_instance_id), _string(m.client_id),
                  _string(m.client_host), INT32.pack(m.rebalance_timeout_ms), INT32.pack(m.session_timeout_ms),
                  _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(parts)


# -- reading -------------------------------------------------------------------
class _Reader:
    """Bounds-checked cursor: every length is checked against the bytes left."""

    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise GroupRecordError(f"record truncated at byte {self.pos} (wanted {n})")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return INT64.unpack(self._take(8))[0]

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as e:
            raise GroupRecordError(f"bad UTF-8 at byte {self.pos}") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise GroupRecordError(f"null string at byte {self.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n == -1 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.data) - self.pos:
            raise GroupRecordError(f"bad array length {n} at byte {self.pos}")
        return n

    def end(self) -> None:
        if self.pos != len(self.data):
            raise GroupRecordError(f"{len(self.data) - self.pos} trailing byte(s)")


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    """Decode a key; ``None`` for a key version this coordinator does not own."""
    r = _Reader(key)
    version = r.int16()
    if version in (0, 1):
        k: OffsetKey | GroupKey = OffsetKey(r.string(), r.string(), r.int32())
    elif version == 2:
        k = GroupKey(r.string())
    else:
        return None
    r.end()
    return k


def decode_offset_value(value: bytes) -> OffsetValue:
    r = _Reader(value)
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"unknown offset value version {version}")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.end()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(value: bytes) -> GroupValue:
    r = _Reader(value)
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"unknown group value version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout == -1:
            rebalance_timeout = session_timeout
        members.append(MemberValue(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                   session_timeout, r.bytes_(), r.bytes_()))
    r.end()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


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
