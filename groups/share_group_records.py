"""``__consumer_offsets`` records of share groups (KIP-932), in Apache Kafka's layout.

Kafka's group-coordinator module defines them as ``ShareGroup*Key``/``Value`` data specs;
kwire's copies are in ``codecs/specs``, encoded and decoded through
``consumer_records.RecordKinds`` like the consumer-group records.  The key's int16 version
is the record type; values are version 0 and flexible.  Types 9, 11, 12 and 13 have the
value layouts of the consumer-group types 4, 3, 6 and 7:

 type  record                               value
  9    ShareGroupPartitionMetadata          the subscribed topics: id, name, partition count
 10    ShareGroupMemberMetadata             rack, client id and host, subscribed topic names
 11    ShareGroupMetadata                   the group epoch
 12    ShareGroupTargetAssignmentMetadata   the assignment epoch
 13    ShareGroupTargetAssignmentMember     a member's target partitions
 14    ShareGroupCurrentMemberAssignment    a member's epochs, state and assigned partitions
 15    ShareGroupStatePartitionMetadata     (read as a type, never written: skipped)

A null value is a tombstone.  Decoding raises ``GroupRecordError`` for truncated or trailing
bytes; ``decode_share_key`` returns None for another type.
"""
from __future__ import annotations

from dataclasses import dataclass

from .consumer_records import (
    Assignment, RecordKinds, assignment_of, partition_metadata_fields, partition_metadata_of, topic_partitions,
)
from .records import INT16

SHARE_PARTITION_METADATA, SHARE_MEMBER_METADATA, SHARE_GROUP_METADATA = 9, 10, 11
SHARE_TARGET_METADATA, SHARE_TARGET_MEMBER, SHARE_CURRENT_ASSIGNMENT = 12, 13, 14
SHARE_STATE_PARTITION_METADATA = 15
SHARE_KEY_TYPES = (9, 10, 11, 12, 13, 14, 15)
_MEMBER_KEYED = (SHARE_MEMBER_METADATA, SHARE_TARGET_MEMBER, SHARE_CURRENT_ASSIGNMENT)
STABLE = 0           # Kafka's MemberState.STABLE: a share member is always reconciled at once
SHARE = RecordKinds({
    SHARE_PARTITION_METADATA: "ShareGroupPartitionMetadata", SHARE_MEMBER_METADATA: "ShareGroupMemberMetadata",
    SHARE_GROUP_METADATA: "ShareGroupMetadata", SHARE_TARGET_METADATA: "ShareGroupTargetAssignmentMetadata",
    SHARE_TARGET_MEMBER: "ShareGroupTargetAssignmentMember",
    SHARE_CURRENT_ASSIGNMENT: "ShareGroupCurrentMemberAssignment",
    SHARE_STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadata"}, _MEMBER_KEYED)


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
    return SHARE.key(record_type, group_id, member_id)


def is_share_key(key: bytes | None) -> bool:
    """Whether ``key`` (any ``__consumer_offsets`` key) is of a share-group record type."""
    return key is not None and len(key) >= 2 and INT16.unpack_from(key)[0] in SHARE_KEY_TYPES


def decode_share_key(key: bytes) -> ShareKey | None:
    """A share-group key, or None for a key of another type; raises GroupRecordError."""
    decoded = SHARE.decode_key(key)
    return None if decoded is None else ShareKey(*decoded)


# -- values --------------------------------------------------------------------
def encode_share_group_epoch(epoch: int) -> bytes:
    return SHARE.value(SHARE_GROUP_METADATA, {"epoch": epoch})


def decode_share_group_epoch(value: bytes) -> int:
    return SHARE.decode_value(SHARE_GROUP_METADATA, value)["epoch"]


def encode_share_assignment_epoch(epoch: int) -> bytes:
    return SHARE.value(SHARE_TARGET_METADATA, {"assignment_epoch": epoch})


def encode_share_partition_metadata(topics: dict) -> bytes:
    return SHARE.value(SHARE_PARTITION_METADATA, partition_metadata_fields(topics))


def decode_share_partition_metadata(value: bytes) -> dict:
    return partition_metadata_of(SHARE.decode_value(SHARE_PARTITION_METADATA, value))


def encode_share_target_member(a: Assignment) -> bytes:
    return SHARE.value(SHARE_TARGET_MEMBER, {"topic_partitions": topic_partitions(a)})


def decode_share_target_member(value: bytes) -> Assignment:
    return assignment_of(SHARE.decode_value(SHARE_TARGET_MEMBER, value)["topic_partitions"])


def encode_share_member_metadata(m: ShareMemberMetadata) -> bytes:
    return SHARE.value(SHARE_MEMBER_METADATA, {
        "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names)})


def decode_share_member_metadata(value: bytes) -> ShareMemberMetadata:
    f = SHARE.decode_value(SHARE_MEMBER_METADATA, value)
    return ShareMemberMetadata(f["rack_id"], f["client_id"], f["client_host"], tuple(f["subscribed_topic_names"]))


def encode_share_current_assignment(c: ShareCurrentAssignment) -> bytes:
    return SHARE.value(SHARE_CURRENT_ASSIGNMENT, {
        "member_epoch": c.member_epoch, "previous_member_epoch": c.previous_member_epoch, "state": c.state,
        "assigned_partitions": topic_partitions(c.assigned)})


def decode_share_current_assignment(value: bytes) -> ShareCurrentAssignment:
    f = SHARE.decode_value(SHARE_CURRENT_ASSIGNMENT, value)
    return ShareCurrentAssignment(f["member_epoch"], f["previous_member_epoch"], f["state"],
                                  assignment_of(f["assigned_partitions"]))
