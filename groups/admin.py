"""DescribeGroups, ListGroups, DeleteGroups and OffsetDelete (part of ``GroupCoordinator``)."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from .effects import Effects
from .group import CONSUMER_PROTOCOL_TYPE, GroupState
from .results import GroupDescription, Outcome

E = ErrorCode


class AdminMixin:
    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is "Dead" with NONE, as Kafka answers.

        Member metadata, assignments and the protocol name are given only while
        Stable (Kafka's summary); in other states they are empty.
        """
        if group_id is None:
            return GroupDescription(E.INVALID_GROUP_ID, group_id, GroupState.DEAD.value, "", "", [])
        group = self._groups.get(group_id)
        if group is None or group_id in self._consumer_groups:
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
        return [(g.group_id, g.protocol_type or "", g.state.value) for _, g in sorted(self._groups.items())
                if (wanted is None or g.state.value.lower() in wanted) and g.group_id not in self._consumer_groups]

    def list_consumer_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str]]:
        """(group_id, state) of every KIP-848 consumer group, sorted (states as Kafka's: Empty,
        Assigning, Reconciling, Stable); the filter ignores case."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        rows = [(g.group_id, g.update_state().value) for g in self._consumer_groups.values()]
        return sorted(row for row in rows if wanted is None or row[1].lower() in wanted)

    def delete_groups(self, group_ids: list[str], now_ms: int) -> Outcome:
        """DeleteGroups; ``result`` is one ErrorCode per group id, in order. Only Empty groups go."""
        fx = self._begin(now_ms)
        errors = [self._delete_group(fx, group_id) for group_id in group_ids]
        return self._finish(fx, errors)

    def _delete_group(self, fx: Effects, group_id: str | None) -> ErrorCode:
        group = self._groups.get(group_id) if group_id is not None else None
        if group_id is None:
            return E.INVALID_GROUP_ID
        if group_id in self._consumer_groups:
            return self._delete_consumer_group(fx, self._consumer_groups[group_id])
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return E.NON_EMPTY_GROUP
        self._drop_group(fx, group)
        return E.NONE

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]], now_ms: int) -> Outcome:
        """OffsetDelete; ``result`` is (group error, one ErrorCode per partition in order).

        A group-level error is repeated for every partition (Kafka sends none) so
        callers can zip without checking.  A consumer group with members keeps the
        offsets of topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
        """
        fx = self._begin(now_ms)
        partitions = [(t, p) for t, p in partitions]
        group = self._groups.get(group_id) if group_id else None
        if not group_id:
            group_error = E.INVALID_GROUP_ID
        elif group is None:
            group_error = E.GROUP_ID_NOT_FOUND
        elif not group.is_(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            group_error = E.NON_EMPTY_GROUP
        else:
            group_error = E.NONE
        if group_error is not E.NONE:
            errors = [group_error] * len(partitions)
        else:
            consumer = self._consumer_groups.get(group_id)
            empty = group.is_(GroupState.EMPTY) and consumer is None
            subscribed = group.is_subscribed_to if consumer is None else consumer.subscription_metadata.__contains__
            errors = [E.NONE if empty or not subscribed(t) else E.GROUP_SUBSCRIBED_TO_TOPIC
                      for t, _ in partitions]
            self._remove_offsets(fx, group, [tp for tp, e in zip(partitions, errors) if e is E.NONE])
            if self._droppable(group):
                self._drop_group(fx, group)
            fx.touch(group_id)
        return self._finish(fx, (group_error, errors))
