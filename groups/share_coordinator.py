"""Share groups (KIP-932), sans-I/O: membership by ShareGroupHeartbeat and the share-partitions.

``ShareCoordinator`` takes each request as plain values with ``now_ms`` and returns a
``ShareOutcome``: the ``__share_group_state`` records to append (key, value) before the
caller answers, the ``__consumer_offsets`` records of the group (``group_records``, Kafka's
share-group record types of ``share_group_records``) and the call's own result.  ``replay``
rebuilds the share-partitions from the first at start-up, ``replay_group_record`` the group,
its epoch, members and assignments from the second (at start-up, or when this broker becomes
the group's coordinator); a replayed member's session timer starts at load time, as in
Kafka, so a member that keeps heartbeating carries on with its member id and epoch and one
that does not expires.

Group states follow ``GROUP_TRANSITIONS``: EMPTY -> STABLE when a member joins, STABLE ->
EMPTY when the last one leaves or expires, EMPTY -> DEAD when deleted.  The assignor is
Kafka's ``simple`` one reduced to its simplest form: every member gets every partition of
every topic it subscribes to (share groups let members share partitions).  A member's epoch
moves when its assignment changes; the group epoch when membership or a subscription does.

``ShareCoordinator`` keeps the membership itself and composes the rest: the share-partitions
and their group configs are a ``SharePartitions`` (``share_partitions``), the group records
are written by the functions of ``share_persistence`` and replayed by its ``ShareGroupLoader``.
"""
from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass, field

from kwire.codecs.errors import ErrorCode

from .share_partition import PartitionLimits, SharePartition
from .share_partitions import SharePartitions
from .share_persistence import (
    ShareGroupLoader, deletion_records, member_records, member_state, removal_records,
)


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


E, S, D = ShareGroupState.EMPTY, ShareGroupState.STABLE, ShareGroupState.DEAD
GROUP_TRANSITIONS = {E: {S, D}, S: {E}, D: set()}


@dataclass(frozen=True)
class ShareConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    max_groups: int = 10
    limits: PartitionLimits = PartitionLimits(30000, 5, 2000)


@dataclass
class ShareMember:
    member_id: str
    epoch: int
    subscribed: tuple[str, ...]
    client_id: str
    client_host: str
    rack_id: str | None
    deadline_ms: int
    assignment: tuple = ()        # ((topic_id, topic, (partitions...)), ...)
    previous_epoch: int = 0


@dataclass
class ShareGroup:
    group_id: str
    state: ShareGroupState = E
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # every (topic_id, partition) assigned since this coordinator loaded the group: in a cluster
    # the share-partitions whose state DeleteGroups deletes (their leaders may be other brokers)
    assigned: set = field(default_factory=set)
    # topic name -> (topic id, partitions) of the topics assigned (Kafka's subscription metadata)
    subscription_metadata: dict = field(default_factory=dict)

    def move(self, target: ShareGroupState) -> None:
        if target is not self.state and target not in GROUP_TRANSITIONS[self.state]:
            raise ValueError(f"share group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target


@dataclass
class HeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple | None = None       # sent only when it changed (else None)
    message: str | None = None


@dataclass
class ShareOutcome:
    records: list = field(default_factory=list)   # (key, value) for __share_group_state
    result: object = None
    group_records: list = field(default_factory=list)   # Record for __consumer_offsets


@dataclass(frozen=True)
class Topic:
    """What the coordinator needs to know of a topic (the caller reads its metadata)."""
    name: str
    topic_id: uuid.UUID
    partitions: int


def new_member_id() -> str:
    """A member id as Kafka's coordinator makes one (``Uuid.randomUuid().toString()``): 16 random
    bytes in URL-safe base64 without padding, never starting with '-'.  The Java client's v0
    (which lets the coordinator choose) parses it back with ``Uuid.fromString`` for its share
    sessions: any other form throws inside its heartbeat handling, and it never leaves JOINING."""
    while True:
        member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not member_id.startswith("-"):
            return member_id


class ShareCoordinator:
    def __init__(self, config: ShareConfig):
        self.config = config
        self.groups: dict[str, ShareGroup] = {}
        self._shares = SharePartitions(lambda: self.config.limits)
        # (group, topic_id, partition) -> SharePartition, and the group configs: the manager's tables
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = self._shares.partitions
        self.offset_resets: dict[str, str] = self._shares.offset_resets
        self.lock_durations: dict[str, int] = self._shares.lock_durations
        self._loader = ShareGroupLoader(self.groups, config, self._new_group, self._new_member)

    # -- membership -------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed: list[str] | None, topics: dict[str, Topic], client_id: str, client_host: str,
                  now_ms: int, release: bool = True) -> ShareOutcome:
        group = self.groups.get(group_id)
        if member_epoch == -1:
            return self.leave(group_id, member_id, release)
        if group is None:
            if member_epoch != 0:
                # Kafka answers GROUP_ID_NOT_FOUND, fatal to librdkafka; a group unknown here
                # (deleted, or its records lost) has a member to re-admit: it rejoins on this
                return ShareOutcome(result=HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                                           message=f"Group {group_id} has no member {member_id}."))
            if len([g for g in self.groups.values() if g.state is not D]) >= self.config.max_groups:
                return ShareOutcome(result=HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                                           message="The share group limit is reached."))
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        old_epoch, old_state = group.epoch, member_state(member)     # what the records compare
        if member_epoch == 0:
            if member is None:
                if len(group.members) >= self.config.max_size:
                    return ShareOutcome(result=HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                                               message=f"Share group {group_id} is full."))
                member_id = member_id or new_member_id()
                member = group.members[member_id] = ShareMember(member_id, 0, (), client_id, client_host,
                                                                rack_id, 0)
                group.epoch += 1
                group.move(S)
        elif member is None:
            return ShareOutcome(result=HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                                       message=f"Member {member_id} is not in group {group_id}."))
        elif member_epoch not in (member.epoch, member.epoch - 1):
            return ShareOutcome(result=HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH))
        member.deadline_ms = now_ms + self.config.session_timeout_ms
        if subscribed is not None and tuple(sorted(subscribed)) != member.subscribed:
            member.subscribed = tuple(sorted(subscribed))
            group.epoch += 1
        assignment = tuple((topics[t].topic_id, t, tuple(range(topics[t].partitions)))
                           for t in member.subscribed if t in topics)
        changed = assignment != member.assignment or member_epoch == 0
        if changed:
            member.assignment = assignment
            member.previous_epoch = member.epoch
            member.epoch = max(member.epoch + 1, group.epoch)
            group.assigned.update((topic_id, p) for topic_id, _, parts in assignment for p in parts)
        return ShareOutcome(result=HeartbeatResult(
            ErrorCode.NONE, member.member_id, member.epoch, self.config.heartbeat_interval_ms,
            assignment if changed else None), group_records=member_records(group, member, old_epoch, old_state))

    def leave(self, group_id: str, member_id: str, release: bool = True) -> ShareOutcome:
        """The member leaves (heartbeat epoch -1).  ``release`` False keeps its acquired records
        held: its share session is still open, and the acknowledgements its close sends
        (librdkafka leaves the group first) settle them; the session's close releases the rest."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return ShareOutcome(result=HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id, -1))
        removed = self._remove_member(group, member_id, release)
        return ShareOutcome(removed.records, HeartbeatResult(ErrorCode.NONE, member_id, -1), removed.group_records)

    def _remove_member(self, group: ShareGroup, member_id: str, release: bool = True) -> ShareOutcome:
        del group.members[member_id]
        group.epoch += 1
        if not group.members:
            group.move(E)
        group_records = removal_records(group, member_id, group.epoch - 1)
        if not release:
            return ShareOutcome(group_records=group_records)
        return ShareOutcome(self.release_member(group.group_id, member_id).records, group_records=group_records)

    def release_member(self, group_id: str, member_id: str) -> ShareOutcome:
        """The member's acquired records become available again (its share session closed,
        or it left or expired); records: the snapshots of the share-partitions it held."""
        return ShareOutcome(self._shares.release_member(group_id, member_id))

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def tick(self, now_ms: int) -> ShareOutcome:
        """Expire members past their session timeout and acquisition locks past their deadline.
        Result: the (group_id, member_id) of the members expired."""
        records, expired, group_records = [], [], []
        for group in list(self.groups.values()):
            for member in [m for m in group.members.values() if m.deadline_ms <= now_ms]:
                removed = self._remove_member(group, member.member_id)
                records += removed.records
                group_records += removed.group_records
                expired.append((group.group_id, member.member_id))
        records += self._shares.expire_locks(now_ms)
        return ShareOutcome(_last_per_key(records), expired, group_records)

    # -- share-partitions: the SharePartitions manager's ------------------------------
    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int, log_start_offset: int,
                        high_watermark: int) -> ShareOutcome:
        """The share-partition (result), initialized on first use from the group's
        share.auto.offset.reset; its initial state is a record to persist."""
        records, sp = self._shares.share_partition(group_id, topic_id, partition, log_start_offset, high_watermark)
        return ShareOutcome(records, sp)

    def acquire(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                batches: list[tuple[int, int]], max_records: int, now_ms: int,
                record_limit: bool = False) -> list[tuple[int, int, int]]:
        """Acquisition is not persisted (as in Kafka): a crash makes the records available again."""
        return self._shares.acquire(group_id, member_id, topic_id, partition, batches, max_records, now_ms,
                                    record_limit)

    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                    batches: list[tuple[int, int, list[int]]], now_ms: int = 0) -> ShareOutcome:
        """Apply the acknowledgement batches of one partition; result: an ErrorCode.  Each
        batch is all or nothing; the first failing one is the partition's error.  A renew
        (type 4) restarts the records' locks at ``now_ms``."""
        records, error = self._shares.acknowledge(group_id, member_id, topic_id, partition, batches, now_ms)
        return ShareOutcome(records, error)

    # -- cluster mode: what follows leadership ------------------------------------------
    def load_partition(self, key: tuple[str, uuid.UUID, int], state) -> None:
        """Install a share-partition's persisted state (its share coordinator's), read by a
        new leader of the partition: records acquired before are available again."""
        self._shares.load_partition(key, state)

    def unload_partition(self, key: tuple[str, uuid.UUID, int]) -> None:
        """Forget a share-partition whose partition another broker leads now."""
        self._shares.unload_partition(key)

    def unload_group(self, group_id: str) -> None:
        """Forget a group (its members) another broker coordinates now; it replays the group's records."""
        self.groups.pop(group_id, None)

    # -- admin --------------------------------------------------------------------------
    def limits(self, group_id: str) -> PartitionLimits:
        return self._shares.limits(group_id)

    def set_lock_duration(self, group_id: str, duration_ms: int | None) -> None:
        """Set (None: back to the broker's) the group's record lock duration; it applies to the
        acquisitions from now on."""
        self._shares.set_lock_duration(group_id, duration_ms)

    def set_offset_reset(self, group_id: str, value: str | None) -> None:
        """Set (None: back to the default, latest) the group's share.auto.offset.reset; it
        applies to the share-partitions initialized from now on."""
        self._shares.set_offset_reset(group_id, value)

    def start_offsets(self, group_id: str) -> dict:
        """{(topic id, partition): SharePartition} of the group's initialized share-partitions."""
        return self._shares.start_offsets(group_id)

    def describe(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.state is D else group

    def list_groups(self) -> list[ShareGroup]:
        return [g for g in self.groups.values() if g.state is not D]

    def check_empty(self, group_id: str) -> ErrorCode:
        """Whether a group's share-partitions may be altered or deleted (Alter/DeleteShareGroupOffsets):
        GROUP_ID_NOT_FOUND for no share group, NON_EMPTY_GROUP while it has members."""
        group = self.describe(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def reset_partition(self, key: tuple[str, uuid.UUID, int], start_offset: int | None) -> ShareOutcome:
        """A share-partition afresh at ``start_offset`` (None: forgotten); records: its snapshot
        or tombstone.  The caller checked ``check_empty``."""
        return ShareOutcome(self._shares.reset(key, start_offset))

    def delete_group(self, group_id: str, assigned: bool = False) -> ShareOutcome:
        """Result: an ErrorCode.  Only an empty group is deleted, with its share-partitions'
        state (tombstones): those here, and with ``assigned`` (a cluster, where other brokers
        lead some) those of every partition its members were assigned; ``group_records``: the
        tombstones of the group's own records."""
        group = self.groups.get(group_id)
        if group is None or group.state is D:
            return ShareOutcome(result=ErrorCode.GROUP_ID_NOT_FOUND)
        if group.members:
            return ShareOutcome(result=ErrorCode.NON_EMPTY_GROUP)
        group.move(D)
        del self.groups[group_id]
        records = self._shares.delete_group(group_id, group.assigned if assigned else ())
        return ShareOutcome(records, ErrorCode.NONE, deletion_records(group))

    # -- start-up ------------------------------------------------------------------------
    @staticmethod
    def _new_group(group_id: str) -> ShareGroup:
        return ShareGroup(group_id)

    @staticmethod
    def _new_member(member_id: str) -> ShareMember:
        return ShareMember(member_id, 0, (), "", "", None, 0)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one ``__share_group_state`` record (value None: tombstone) at start-up."""
        self._shares.replay(key, value)

    def replay_group_record(self, key: bytes, value: bytes | None, now_ms: int) -> bool:
        """Apply one share-group record of ``__consumer_offsets`` (value None: tombstone), read
        at ``now_ms`` when a member's session starts again.  Returns False for a record
        skipped: of another type, or whose bytes do not decode (logged)."""
        return self._loader.replay_group_record(key, value, now_ms)


def _last_per_key(records: list) -> list:
    """Several snapshots of one key in one outcome: only the last matters."""
    last = {}
    for key, value in records:
        last.pop(key, None)
        last[key] = value
    return list(last.items())
