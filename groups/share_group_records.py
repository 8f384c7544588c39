"""``__consumer_offsets`` records of share groups (KIP-932), in Apache Kafka's layout.

Kafka's group-coordinator module defines them (``ShareGroup*Key``/``Value`` message
specs); the key's int16 version is the record type.  Keys are non-flexible (``string`` =
int16 length + UTF-8); values are version 0 and flexible, written as in
``consumer_records`` (compact strings and arrays, a tagged-field section after every
struct).  Types 9, 11, 12 and 13 share their value layout with the consumer-group types
4, 3, 6 and 7:

Keys                                               Values (int16 version 0, then)
 9 ShareGroupPartitionMetadata      group           [topic_id uuid, topic_name, int32 num_partitions,
                                                     [int32 partition, [rack string]]]
10 ShareGroupMemberMetadata         group, member   rack_id?, client_id, client_host, [subscribed topic name]
11 ShareGroupMetadata               group           int32 epoch (the group epoch)
12 ShareGroupTargetAssignmentMetadata group         int32 assignment_epoch
13 ShareGroupTargetAssignmentMember group, member   [topic_id uuid, [int32 partition]]
14 ShareGroupCurrentMemberAssignment group, member  int32 member_epoch, int32 previous_member_epoch,
                                                     int8 state, assigned [topic_id uuid, [int32 partition]]
15 ShareGroupStatePartitionMetadata group           (read as a type, never written: skipped)

(``?`` = nullable.)  A null value is a tombstone.  Decoding raises ``GroupRecordError``
for truncated or trailing bytes; ``decode_share_key`` returns None for another type.
"""
from __future__ import annotations

from dataclasses import dataclass

from .consumer_records import (
    INT8, Assignment, _carray, _cstring, _open, _close, _topic_partitions, _value,
    decode_epoch, decode_partition_metadata, decode_target_member, encode_group_epoch,
    encode_partition_metadata, encode_target_member,
)
from .records import INT16, INT32, GroupRecordError, _Reader, _string

SHARE_PARTITION_METADATA, SHARE_MEMBER_METADATA, SHARE_GROUP_METADATA = 9, 10, 11
SHARE_TARGET_METADATA, SHARE_TARGET_MEMBER, SHARE_CURRENT_ASSIGNMENT = 12, 13, 14
SHARE_STATE_PARTITION_METADATA = 15
SHARE_KEY_TYPES = (9, 10, 11, 12, 13, 14, 15)
_MEMBER_KEYED = (SHARE_MEMBER_METADATA, SHARE_TARGET_MEMBER, SHARE_CURRENT_ASSIGNMENT)
STABLE = 0           # Kafka's MemberState.STABLE: a share member is always reconciled at once

# same layouts as the consumer-group values
encode_share_group_epoch, decode_share_group_epoch = encode_group_epoch, decode_epoch
encode_share_partition_metadata, decode_share_partition_metadata = encode_partition_metadata, \
    decode_partition_metadata
encode_share_target_member, decode_share_target_member = encode_target_member, decode_target_member


@dataclass(frozen=True)
class ShareKey:
    """The key of a share-group record in ``__consumer_offsets`` (``decode_share_key``)."""
    record_type: int
    group_id: str
    member_id: str | None = None     # types 10, 13, 14


@dataclass(frozen=True)
class ShareMemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareCurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment


# -- keys ----------------------------------------------------------------------
def share_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    key = INT16.pack(record_type) + _string(group_id)
    return key + _string(member_id) if record_type in _MEMBER_KEYED else key


def is_share_key(key: bytes | None) -> bool:
    """Whether ``key`` (any ``__consumer_offsets`` key) is of a share-group record type."""
    return key is not None and len(key) >= 2 and INT16.unpack_from(key)[0] in SHARE_KEY_TYPES


def decode_share_key(key: bytes) -> ShareKey | None:
    """A share-group key, or None for a key of another type; raises GroupRecordError."""
    r = _Reader(key)
    version = r.int16()
    if version not in SHARE_KEY_TYPES:
        return None
    group_id = r.string()
    member_id = r.string() if version in _MEMBER_KEYED else None
    r.end()
    return ShareKey(version, group_id, member_id)


# -- values --------------------------------------------------------------------
def encode_share_member_metadata(m: ShareMemberMetadata) -> bytes:
    return _value(b"".join((_cstring(m.rack_id), _cstring(m.client_id), _cstring(m.client_host),
                            _carray([_cstring(t) for t in sorted(m.subscribed_topic_names)]))))


def decode_share_member_metadata(value: bytes) -> ShareMemberMetadata:
    r = _open(value)
    rack_id, client_id, client_host = r.cstring(), r.cstring(), r.cstring()
    names = tuple(r.cstring() for _ in range(r.carray()))
    if None in names:
        raise GroupRecordError("null subscribed topic name")
    return _close(r, ShareMemberMetadata(rack_id, client_id or "", client_host or "", names))


def encode_share_current_assignment(c: ShareCurrentAssignment) -> bytes:
    return _value(INT32.pack(c.member_epoch) + INT32.pack(c.previous_member_epoch) + INT8.pack(c.state)
                  + _topic_partitions(c.assigned))


def decode_share_current_assignment(value: bytes) -> ShareCurrentAssignment:
    r = _open(value)
    c = ShareCurrentAssignment(r.int32(), r.int32(), r.int8(), r.topic_partitions())
    return _close(r, c)

