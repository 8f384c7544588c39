"""The state the group coordinator's managers share, owned by the ``GroupCoordinator`` façade.

Kafka's ``GroupCoordinatorShard`` hands its ``GroupMetadataManager`` and
``OffsetMetadataManager`` the same snapshot registry; here the façade hands each
manager one ``GroupContext``: the settings, the member id maker and the two group
tables.  A manager reads and changes these tables; what it needs of another manager
it gets as a constructor argument and calls through that manager's public methods.
"""
from __future__ import annotations

from typing import Callable

from .consumer_group import ConsumerGroup
from .effects import Effects
from .group import Group
from .results import GroupConfig


class GroupContext:
    __slots__ = ("config", "unique_id", "groups", "consumer_groups")

    def __init__(self, config: GroupConfig, unique_id: Callable[[], str]):
        self.config = config
        self.unique_id = unique_id
        # Classic groups, and the offsets-only holders of simple and KIP-848 consumer groups.
        self.groups: dict[str, Group] = {}
        # KIP-848 consumer groups; a group id here is a consumer group, whatever ``groups`` holds.
        self.consumer_groups: dict[str, ConsumerGroup] = {}

    def create_group(self, fx: Effects, group_id: str) -> Group:
        """A new Empty classic group (or offsets holder) of ``group_id``."""
        group = Group(group_id, state_timestamp=fx.now_ms)
        self.groups[group_id] = group
        fx.touch(group_id)
        return group

    @staticmethod
    def offsets_only(group: Group) -> bool:
        """A classic Group that only holds offsets (never had a generation), as consumer groups use."""
        return group.generation_id == 0 and not group.members and not group.pending_members
