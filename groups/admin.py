"""DescribeGroups, ListGroups and DeleteGroups over both kinds of group (``GroupAdmin``).

A group's deletion is composed as Kafka's GroupCoordinatorShard.deleteGroups composes it: the
group manager says whether the group may go, the offsets manager removes its offsets and
tombstones it.  OffsetDelete is the offsets manager's.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from .consumer_coordinator import ConsumerGroupManager
from .context import GroupContext
from .effects import Effects
from .group import GroupState
from .offsets import OffsetManager
from .results import GroupDescription

E = ErrorCode


class GroupAdmin:
    def __init__(self, ctx: GroupContext, offsets: OffsetManager, consumer: ConsumerGroupManager):
        """``offsets``: the offsets manager; ``consumer``: the consumer-group manager."""
        self._ctx = ctx
        self._offsets = offsets
        self._consumer = consumer

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is "Dead" with NONE, as Kafka answers.

        Member metadata, assignments and the protocol name are given only while
        Stable (Kafka's summary); in other states they are empty.
        """
        if group_id is None:
            return GroupDescription(E.INVALID_GROUP_ID, group_id, GroupState.DEAD.value, "", "", [])
        group = self._ctx.groups.get(group_id)
        if group is None or group_id in self._ctx.consumer_groups:
            # Kafka (late 2024) answers a consumer group as Dead here; v6+ callers say it is not classic.
            return GroupDescription(E.NONE, group_id, GroupState.DEAD.value, "", "", [])
        stable = group.is_(GroupState.STABLE)
        members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.metadata(group.protocol_name) if stable else b"", m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupDescription(E.NONE, group_id, group.state.value, group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def list_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) of every classic group, sorted; the filter ignores case.
        KIP-848 consumer groups are in ``list_consumer_groups``."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [(g.group_id, g.protocol_type or "", g.state.value) for _, g in sorted(self._ctx.groups.items())
                if (wanted is None or g.state.value.lower() in wanted) and g.group_id not in self._ctx.consumer_groups]

    def list_consumer_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str]]:
        """(group_id, state) of every KIP-848 consumer group, sorted (states as Kafka's: Empty,
        Assigning, Reconciling, Stable); the filter ignores case."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        rows = [(g.group_id, g.update_state().value) for g in self._ctx.consumer_groups.values()]
        return sorted(row for row in rows if wanted is None or row[1].lower() in wanted)

    def delete_groups(self, fx: Effects, group_ids: list[str]) -> list[ErrorCode]:
        """DeleteGroups: one ErrorCode per group id, in order. Only Empty groups go."""
        return [self._delete_group(fx, group_id) for group_id in group_ids]

    def _delete_group(self, fx: Effects, group_id: str | None) -> ErrorCode:
        if group_id is None:
            return E.INVALID_GROUP_ID
        consumer = self._ctx.consumer_groups.get(group_id)
        if consumer is not None:
            return self._consumer.delete(fx, consumer)
        group = self._ctx.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return E.NON_EMPTY_GROUP
        self._offsets.drop_group(fx, group)
        return E.NONE
