"""``__consumer_offsets`` records of KIP-848 consumer groups, in Apache Kafka's layout.

Kafka's group-coordinator module defines them as ``ConsumerGroup*Key``/``Value`` data
specs; kwire's copies are in ``codecs/specs`` and ``kwire.codecs.record_specs`` encodes
and decodes them, so no layout is written here.  The key's int16 version is the record
type; keys are classic (group id, and member id for the member-keyed types), values are
version 0 and flexible (compact strings and arrays, tagged fields):

 type  record                       value
  3    ConsumerGroupMetadata        the group epoch
  4    PartitionMetadata            the subscribed topics: id, name, partition count
  5    MemberMetadata               instance, rack, client, subscription, timeouts, assignor;
                                    tag 0: the classic protocols of a JoinGroup member
  6    TargetAssignmentMetadata     the assignment epoch
  7    TargetAssignmentMember       a member's target partitions
  8    CurrentMemberAssignment      a member's epochs, state, assigned and pending partitions

A null value is a tombstone.  Decoding raises ``GroupRecordError`` for truncated or
trailing bytes.

Records written by kwire before its classic member metadata followed Kafka's nullable-struct
rule lack the presence byte at the start of tag 0; they are still read (``_legacy_classic``).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from kwire.codecs.record_specs import RecordSpec

from .records import GroupRecordError, _Reader

VALUE_VERSION = 0
GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
CONSUMER_KEY_TYPES = (3, 4, 5, 6, 7, 8)
_MEMBER_KEYED = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
_NAMES = {GROUP_METADATA: "ConsumerGroupMetadata", PARTITION_METADATA: "ConsumerGroupPartitionMetadata",
          MEMBER_METADATA: "ConsumerGroupMemberMetadata", TARGET_METADATA: "ConsumerGroupTargetAssignmentMetadata",
          TARGET_MEMBER: "ConsumerGroupTargetAssignmentMember",
          CURRENT_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignment"}

Assignment = dict  # topic_id (uuid.UUID) -> frozenset of partitions


class RecordKinds:
    """The key and value specs of a family of ``__consumer_offsets`` record types."""

    def __init__(self, names: dict[int, str], member_keyed: tuple[int, ...]):
        self.keys = {t: RecordSpec(name + "Key") for t, name in names.items()}
        self.values = {t: RecordSpec(name + "Value") for t, name in names.items()}
        self.member_keyed = member_keyed

    def key(self, record_type: int, group_id: str, member_id: str | None = None) -> bytes:
        fields = {"group_id": group_id}
        if record_type in self.member_keyed:
            fields["member_id"] = member_id
        return self.keys[record_type].encode(record_type, fields)

    def decode_key(self, key: bytes) -> tuple[int, str, str | None] | None:
        """(type, group, member or None), or None for a type of another family."""
        r = _Reader(key)
        record_type = r.int16()
        spec = self.keys.get(record_type)
        if spec is None:
            return None
        fields = spec.decode(r, record_type)
        r.end()
        return record_type, fields["group_id"], fields.get("member_id")

    def value(self, record_type: int, fields: dict) -> bytes:
        return self.values[record_type].encode(VALUE_VERSION, fields)

    def decode_value(self, record_type: int, value: bytes) -> dict:
        r = _Reader(value)
        version = r.int16()
        if version != VALUE_VERSION:
            raise GroupRecordError(f"unknown {self.values[record_type].name} version {version}")
        fields = self.values[record_type].decode(r, version)
        r.end()
        return fields


CONSUMER = RecordKinds(_NAMES, _MEMBER_KEYED)


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
    return CONSUMER.key(record_type, group_id, member_id)


def decode_consumer_key(key: bytes) -> ConsumerKey | None:
    """A consumer-group key, or None for a key of another type."""
    decoded = CONSUMER.decode_key(key)
    return None if decoded is None else ConsumerKey(*decoded)


# -- values: shared shapes -----------------------------------------------------
def topic_partitions(a: Assignment) -> list[dict]:
    """An assignment as the specs' [TopicId, [Partitions]] (topics in id order, empty ones left out)."""
    return [{"topic_id": tid, "partitions": sorted(parts)}
            for tid, parts in sorted(a.items(), key=lambda kv: str(kv[0])) if parts]


def assignment_of(entries: list[dict]) -> Assignment:
    return {e["topic_id"]: frozenset(e["partitions"]) for e in entries}


def partition_metadata_fields(topics: dict[str, tuple[uuid.UUID, int]]) -> dict:
    return {"topics": [{"topic_id": tid, "topic_name": name, "num_partitions": n, "partition_metadata": []}
                       for name, (tid, n) in sorted(topics.items())]}


def partition_metadata_of(fields: dict) -> dict[str, tuple[uuid.UUID, int]]:
    # per-partition racks are not used (deprecated in Kafka 4.0)
    return {t["topic_name"]: (t["topic_id"], t["num_partitions"]) for t in fields["topics"]}


# -- values --------------------------------------------------------------------
def encode_group_epoch(epoch: int) -> bytes:
    return CONSUMER.value(GROUP_METADATA, {"epoch": epoch})


def encode_assignment_epoch(epoch: int) -> bytes:
    return CONSUMER.value(TARGET_METADATA, {"assignment_epoch": epoch})


def decode_epoch(value: bytes) -> int:
    return CONSUMER.decode_value(GROUP_METADATA, value)["epoch"]


def decode_assignment_epoch(value: bytes) -> int:
    return CONSUMER.decode_value(TARGET_METADATA, value)["assignment_epoch"]


def encode_partition_metadata(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    return CONSUMER.value(PARTITION_METADATA, partition_metadata_fields(topics))


def decode_partition_metadata(value: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    return partition_metadata_of(CONSUMER.decode_value(PARTITION_METADATA, value))


def encode_member_metadata(m: MemberMetadata) -> bytes:
    fields = {"instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
              "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
              "subscribed_topic_regex": m.subscribed_topic_regex, "rebalance_timeout_ms": m.rebalance_timeout_ms,
              "server_assignor": m.server_assignor}
    if m.classic is not None:
        fields["classic_member_metadata"] = {
            "session_timeout_ms": m.classic.session_timeout_ms,
            "supported_protocols": [{"name": n, "metadata": md} for n, md in m.classic.protocols]}
    return CONSUMER.value(MEMBER_METADATA, fields)


def decode_member_metadata(value: bytes) -> MemberMetadata:
    try:
        f = CONSUMER.decode_value(MEMBER_METADATA, value)
    except GroupRecordError:
        f = _legacy_classic(value)
    c = f["classic_member_metadata"]
    classic = None if c is None else ClassicMetadata(
        c["session_timeout_ms"], tuple((p["name"], p["metadata"]) for p in c["supported_protocols"]))
    return MemberMetadata(f["instance_id"], f["rack_id"], f["client_id"], f["client_host"],
                          tuple(f["subscribed_topic_names"]), f["subscribed_topic_regex"],
                          f["rebalance_timeout_ms"], f["server_assignor"], classic)


def _legacy_classic(value: bytes) -> dict:
    """A member metadata value as kwire wrote it before this layout came from the spec: tag 0
    held the classic struct without Kafka's presence byte.  Raises GroupRecordError."""
    r = _Reader(value)
    if r.int16() != VALUE_VERSION:
        raise GroupRecordError("unknown ConsumerGroupMemberMetadataValue version")
    fields = CONSUMER.values[MEMBER_METADATA].decode(r, VALUE_VERSION, presence_free_tags=(0,))
    r.end()
    return fields


def encode_target_member(a: Assignment) -> bytes:
    return CONSUMER.value(TARGET_MEMBER, {"topic_partitions": topic_partitions(a)})


def decode_target_member(value: bytes) -> Assignment:
    return assignment_of(CONSUMER.decode_value(TARGET_MEMBER, value)["topic_partitions"])


def encode_current_assignment(c: CurrentAssignment) -> bytes:
    return CONSUMER.value(CURRENT_ASSIGNMENT, {
        "member_epoch": c.member_epoch, "previous_member_epoch": c.previous_member_epoch, "state": c.state,
        "assigned_partitions": topic_partitions(c.assigned),
        "partitions_pending_revocation": topic_partitions(c.pending_revocation)})


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    f = CONSUMER.decode_value(CURRENT_ASSIGNMENT, value)
    return CurrentAssignment(f["member_epoch"], f["previous_member_epoch"], f["state"],
                             assignment_of(f["assigned_partitions"]),
                             assignment_of(f["partitions_pending_revocation"]))

