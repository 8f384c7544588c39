"""``__consumer_offsets`` records of KIP-848 consumer groups, in Apache Kafka's layout.

Kafka's group-coordinator module defines them (``ConsumerGroup*Key``/``Value``
message specs); the key's int16 version is the record type.  Keys are
non-flexible (``string`` = int16 length + UTF-8); values are version 0 and
flexible (KIP-482):

    compact string      uvarint(N + 1), N bytes (nullable: uvarint 0 = null)
    compact array       uvarint(count + 1), the elements
    uuid                16 bytes
    tagged fields       uvarint count, then (uvarint tag, uvarint size, bytes) each;
                        every struct ends with one (we write none, we skip any)

Keys                                          Values (int16 version 0, then)
 3 ConsumerGroupMetadata     group              int32 epoch
 4 PartitionMetadata         group              [topic_id uuid, topic_name, int32 num_partitions,
                                                 [int32 partition, [rack string]]]
 5 MemberMetadata            group, member      instance_id?, rack_id?, client_id, client_host,
                                                 [subscribed topic name], regex?, int32 rebalance_timeout,
                                                 server_assignor?; tag 0: classic member metadata
                                                 {int32 session_timeout, [name, compact bytes metadata]}
 6 TargetAssignmentMetadata  group              int32 assignment_epoch
 7 TargetAssignmentMember    group, member      [topic_id uuid, [int32 partition]]
 8 CurrentMemberAssignment   group, member      int32 member_epoch, int32 previous_member_epoch,
                                                 int8 state, assigned [topic_id, [p]], pending revocation [..]

(``?`` = nullable.)  A null value is a tombstone.  Decoding raises
``GroupRecordError`` for truncated or trailing bytes.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from kwire.codecs.primitives import INT8, uvarint as _uvarint

from .records import INT16, INT32, GroupRecordError, _Reader, _string

VALUE_VERSION = 0
GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
CONSUMER_KEY_TYPES = (3, 4, 5, 6, 7, 8)

Assignment = dict  # topic_id (uuid.UUID) -> frozenset of partitions


@dataclass(frozen=True)
class ConsumerKey:
    record_type: int
    group_id: str
    member_id: str | None = None     # types 5, 7, 8


@dataclass(frozen=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # Kafka's ClassicMemberMetadata (tagged field 0): a member that speaks the classic protocol
    # (JoinGroup/SyncGroup) inside a consumer group; None for a consumer-protocol member.
    classic: "ClassicMetadata | None" = None


@dataclass(frozen=True)
class ClassicMetadata:
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]     # (name, metadata), the JoinGroup's order


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


# -- keys ----------------------------------------------------------------------
def consumer_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    key = INT16.pack(record_type) + _string(group_id)
    return key + _string(member_id) if record_type in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT) else key


def decode_consumer_key(key: bytes) -> ConsumerKey | None:
    """A consumer-group key, or None for a key of another type."""
    r = _Reader(key)
    version = r.int16()
    if version not in CONSUMER_KEY_TYPES:
        return None
    group_id = r.string()
    member_id = r.string() if version in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT) else None
    r.end()
    return ConsumerKey(version, group_id, member_id)


# -- flexible writing ----------------------------------------------------------
def _cstring(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _carray(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def _topic_partitions(a: Assignment) -> bytes:
    return _carray([tid.bytes + _carray([INT32.pack(p) for p in sorted(parts)]) + NO_TAGS
                    for tid, parts in sorted(a.items(), key=lambda kv: str(kv[0])) if parts])


def _value(body: bytes) -> bytes:
    return INT16.pack(VALUE_VERSION) + body + NO_TAGS


def encode_group_epoch(epoch: int) -> bytes:
    """Type 3 and type 6 values: one int32 epoch."""
    return _value(INT32.pack(epoch))


def encode_partition_metadata(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    return _value(_carray([tid.bytes + _cstring(name) + INT32.pack(n) + _carray([]) + NO_TAGS
                           for name, (tid, n) in sorted(topics.items())]))


def _cbytes(b: bytes) -> bytes:
    return _uvarint(len(b) + 1) + b


def _classic(c: ClassicMetadata) -> bytes:
    return INT32.pack(c.session_timeout_ms) + _carray(
        [_cstring(name) + _cbytes(metadata) + NO_TAGS for name, metadata in c.protocols]) + NO_TAGS


def encode_member_metadata(m: MemberMetadata) -> bytes:
    body = b"".join((_cstring(m.instance_id), _cstring(m.rack_id), _cstring(m.client_id),
                     _cstring(m.client_host), _carray([_cstring(t) for t in m.subscribed_topic_names]),
                     _cstring(m.subscribed_topic_regex), INT32.pack(m.rebalance_timeout_ms),
                     _cstring(m.server_assignor)))
    if m.classic is None:
        return _value(body)
    tagged = _classic(m.classic)
    return INT16.pack(VALUE_VERSION) + body + _uvarint(1) + _uvarint(0) + _uvarint(len(tagged)) + tagged


def encode_target_member(a: Assignment) -> bytes:
    return _value(_topic_partitions(a))


def encode_current_assignment(c: CurrentAssignment) -> bytes:
    return _value(INT32.pack(c.member_epoch) + INT32.pack(c.previous_member_epoch) + INT8.pack(c.state)
                  + _topic_partitions(c.assigned) + _topic_partitions(c.pending_revocation))


# -- flexible reading ----------------------------------------------------------
class _FlexReader(_Reader):
    """The flexible reads of these values (a null compact string reads as None whatever the
    field, a null compact array as empty, unknown tagged fields are skipped)."""

    __slots__ = ()
    cstring = _Reader.compact_nullable_string
    carray = _Reader.compact_array_len
    tags = _Reader.tagged_fields

    def topic_partitions(self) -> Assignment:
        out = {}
        for _ in range(self.carray()):
            tid = self.uuid()
            out[tid] = frozenset(self.int32() for _ in range(self.carray()))
            self.tags()
        return out


def _open(value: bytes) -> _FlexReader:
    r = _FlexReader(value)
    version = r.int16()
    if version != VALUE_VERSION:
        raise GroupRecordError(f"unknown consumer group value version {version}")
    return r


def _close(r: _FlexReader, result):
    r.tags()
    r.end()
    return result


def decode_epoch(value: bytes) -> int:
    r = _open(value)
    return _close(r, r.int32())


def decode_partition_metadata(value: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = _open(value)
    topics = {}
    for _ in range(r.carray()):
        tid, name, n = r.uuid(), r.cstring(), r.int32()
        for _ in range(r.carray()):         # per-partition racks: unused (deprecated in Kafka 4.0)
            r.int32()
            for _ in range(r.carray()):
                r.cstring()
            r.tags()
        r.tags()
        topics[name] = (tid, n)
    return _close(r, topics)


def decode_member_metadata(value: bytes) -> MemberMetadata:
    r = _open(value)
    instance_id, rack_id, client_id, client_host = r.cstring(), r.cstring(), r.cstring(), r.cstring()
    names = tuple(r.cstring() for _ in range(r.carray()))
    regex, rebalance_timeout_ms, server_assignor = r.cstring(), r.int32(), r.cstring()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        field = _FlexReader(bytes(r.take(size)))
        if tag == 0:
            session_timeout_ms = field.int32()
            protocols = []
            for _ in range(field.carray()):
                name = field.cstring() or ""
                protocols.append((name, bytes(field.take(field.uvarint() - 1))))
                field.tags()
            field.tags()
            field.end()
            classic = ClassicMetadata(session_timeout_ms, tuple(protocols))
    r.end()
    return MemberMetadata(instance_id, rack_id, client_id or "", client_host or "", names, regex,
                          rebalance_timeout_ms, server_assignor, classic)


def decode_target_member(value: bytes) -> Assignment:
    r = _open(value)
    return _close(r, r.topic_partitions())


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    r = _open(value)
    c = CurrentAssignment(r.int32(), r.int32(), r.int8(), r.topic_partitions(), r.topic_partitions())
    return _close(r, c)
