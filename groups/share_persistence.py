"""Writing share groups' ``__consumer_offsets`` records (functions the share coordinator
calls) and rebuilding groups from them (``ShareGroupLoader``, which ``ShareCoordinator`` holds).

The records are Kafka's share-group types (``share_group_records``), written when Kafka
writes them: a member's metadata (10) when it joins or its subscription changes; the
subscription metadata (9) when the assigned topics change; the group epoch (11) when it
moves; the member's target (13) and current (14) assignment when its assignment or epoch
changes, and the target assignment epoch (12) with them or with the group epoch (kwire
assigns at once, so its target assignment is the current one and its assignment epoch the
group epoch).  A member leaving or expiring: tombstones of its 14, 13 and 10, then the new
9 and 11.  DeleteGroups: tombstones of 12, 9 and 11 (only an empty group is deleted).

Replay rebuilds each group in its settled state (Stable with members, else Empty); a
member's session deadline is the load time plus the session timeout, as Kafka restarts
the session timers of the members it loads.  A record that does not decode is logged
and skipped, so one damaged record cannot stop a load.
"""
from __future__ import annotations

import logging

from .records import GroupRecordError
from .results import Record
from .share_group_records import (
    SHARE_CURRENT_ASSIGNMENT, SHARE_GROUP_METADATA, SHARE_MEMBER_METADATA, SHARE_PARTITION_METADATA,
    SHARE_TARGET_MEMBER, SHARE_TARGET_METADATA, STABLE, ShareCurrentAssignment, ShareKey, ShareMemberMetadata,
    decode_share_current_assignment, decode_share_group_epoch, decode_share_key, decode_share_member_metadata,
    decode_share_partition_metadata, encode_share_assignment_epoch, encode_share_current_assignment,
    encode_share_group_epoch, encode_share_member_metadata, encode_share_partition_metadata, encode_share_target_member, share_key,
)

logger = logging.getLogger("kwire.share")


def member_state(member) -> tuple | None:
    """What the records carry of a member (None: no member), compared before and after a call:
    its metadata (record 10) first, then its epochs and assignment (records 13 and 14)."""
    if member is None:
        return None
    return (member.rack_id, member.client_id, member.client_host, member.subscribed,
            member.epoch, member.previous_epoch, member.assignment)


def _assigned(assignment: tuple) -> dict:
    return {topic_id: frozenset(parts) for topic_id, _name, parts in assignment}


def subscription_metadata(group) -> dict:
    """topic name -> (topic id, partitions) of every topic assigned to a member of ``group``."""
    return {name: (topic_id, len(parts)) for m in group.members.values() for topic_id, name, parts in m.assignment}


def member_records(group, member, old_epoch: int, old_state: tuple | None) -> list[Record]:
    """The records of a heartbeat that changed ``member`` (``old_state``: its member_state
    before, None when it joined) and moved the group epoch from ``old_epoch``."""
    gid, mid = group.group_id, member.member_id
    new_state = member_state(member)
    records = []
    if old_state is None or old_state[:4] != new_state[:4]:
        records.append(Record(gid, share_key(SHARE_MEMBER_METADATA, gid, mid), encode_share_member_metadata(
            ShareMemberMetadata(member.rack_id, member.client_id, member.client_host, member.subscribed))))
    records += group_records(group, old_epoch)
    reassigned = old_state is None or old_state[4:] != new_state[4:]
    assigned = _assigned(member.assignment)
    if reassigned:
        records.append(Record(gid, share_key(SHARE_TARGET_MEMBER, gid, mid), encode_share_target_member(assigned)))
    if reassigned or group.epoch != old_epoch:
        records.append(Record(gid, share_key(SHARE_TARGET_METADATA, gid), encode_share_assignment_epoch(group.epoch)))
    if reassigned:
        records.append(Record(gid, share_key(SHARE_CURRENT_ASSIGNMENT, gid, mid), encode_share_current_assignment(
            ShareCurrentAssignment(member.epoch, member.previous_epoch, STABLE, assigned))))
    return records


def removal_records(group, member_id: str, old_epoch: int) -> list[Record]:
    """The records of ``member_id`` having left ``group`` (whose epoch was ``old_epoch``)."""
    gid = group.group_id
    records = [Record(gid, share_key(t, gid, member_id), None)
               for t in (SHARE_CURRENT_ASSIGNMENT, SHARE_TARGET_MEMBER, SHARE_MEMBER_METADATA)]
    records += group_records(group, old_epoch)
    records.append(Record(gid, share_key(SHARE_TARGET_METADATA, gid), encode_share_assignment_epoch(group.epoch)))
    return records


def group_records(group, old_epoch: int) -> list[Record]:
    """The subscription metadata if it changed (kept in the group) and the group epoch if it moved."""
    gid = group.group_id
    records = []
    metadata = subscription_metadata(group)
    if metadata != group.subscription_metadata:
        group.subscription_metadata = metadata
        records.append(Record(gid, share_key(SHARE_PARTITION_METADATA, gid),
                              encode_share_partition_metadata(metadata)))
    if group.epoch != old_epoch:
        records.append(Record(gid, share_key(SHARE_GROUP_METADATA, gid), encode_share_group_epoch(group.epoch)))
    return records


def deletion_records(group) -> list[Record]:
    """Tombstones of everything an empty ``group`` wrote, in Kafka's order."""
    gid = group.group_id
    return [Record(gid, share_key(t, gid), None)
            for t in (SHARE_TARGET_METADATA, SHARE_PARTITION_METADATA, SHARE_GROUP_METADATA)]


class ShareGroupLoader:
    """Replays share-group records into ``groups`` (group id -> ShareGroup); ``new_group(group_id)``
    and ``new_member(member_id)`` make the empty values a record fills in."""

    def __init__(self, groups: dict, config, new_group, new_member):
        self._groups = groups
        self._config = config
        self._new_group = new_group
        self._new_member = new_member

    def replay_group_record(self, key: bytes, value: bytes | None, now_ms: int) -> bool:
        """Apply one share-group record of ``__consumer_offsets`` (value None: tombstone), read
        at ``now_ms`` when a member's session starts again.  Returns False for a record
        skipped: of another type, or whose bytes do not decode (logged)."""
        try:
            k = decode_share_key(bytes(key))
            if k is None:
                return False
            self._replay_share_group(k, None if value is None else bytes(value), now_ms)
        except GroupRecordError as e:
            logger.warning("skipping undecodable share group record (key %r): %s", key, e)
            return False
        return True

    def _replay_share_group(self, k: ShareKey, value: bytes | None, now_ms: int) -> None:
        group = self._groups.get(k.group_id)
        if group is None:
            if value is None:
                return
            group = self._groups[k.group_id] = self._new_group(k.group_id)
        if k.record_type == SHARE_GROUP_METADATA:
            if value is None:                        # deleted (DeleteGroups)
                del self._groups[k.group_id]
                return
            group.epoch = decode_share_group_epoch(value)
        elif k.record_type == SHARE_PARTITION_METADATA:
            group.subscription_metadata = {} if value is None else decode_share_partition_metadata(value)
            for member in group.members.values():      # names of assignments replayed before it
                member.assignment = _named(group, _assigned(member.assignment), member.assignment)
        elif k.record_type == SHARE_MEMBER_METADATA:
            if value is None:
                group.members.pop(k.member_id, None)
            else:
                v = decode_share_member_metadata(value)
                member = group.members.get(k.member_id) or self._new_member(k.member_id)
                member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.client_host
                member.subscribed = tuple(sorted(v.subscribed_topic_names))
                member.deadline_ms = now_ms + self._config.session_timeout_ms
                group.members[k.member_id] = member
        elif k.record_type == SHARE_CURRENT_ASSIGNMENT and value is not None:
            c = decode_share_current_assignment(value)
            member = group.members.get(k.member_id)
            if member is None:          # its metadata is written first, but compaction may move it on
                member = group.members[k.member_id] = self._new_member(k.member_id)
                member.deadline_ms = now_ms + self._config.session_timeout_ms
            member.epoch, member.previous_epoch = c.member_epoch, c.previous_member_epoch
            member.assignment = _named(group, c.assigned)
            group.assigned.update((topic_id, p) for topic_id, parts in c.assigned.items() for p in parts)
        # 12, 13, 15 and a 14 tombstone (followed by its member's 10 tombstone): nothing kwire keeps
        group.state = type(group.state).STABLE if group.members else type(group.state).EMPTY


def _named(group, assigned: dict, known: tuple = ()) -> tuple:
    """An assignment as ShareMember keeps it, ((topic_id, name, (partitions...)), ...) by name;
    names from the group's subscription metadata, else ``known`` (an older one), else ""."""
    names = {topic_id: name for topic_id, name, _parts in known if name}
    names.update((topic_id, name) for name, (topic_id, _n) in group.subscription_metadata.items())
    return tuple(sorted(((topic_id, names.get(topic_id, ""), tuple(sorted(parts)))
                         for topic_id, parts in assigned.items()), key=lambda a: (a[1], str(a[0]))))
