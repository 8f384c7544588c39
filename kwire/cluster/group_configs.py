"""The groups' configs of a cluster broker (``kwire.services.group_configs.GroupConfigStore``):
each group's znode ``/config/groups/<group>`` in ZooKeeper (``kwire.cluster.zk``), written by
the broker that takes the IncrementalAlterConfigs.  Every broker applies what ZooKeeper holds
with each snapshot (``ShareService.follow_leadership``), so nothing is loaded at start-up."""
from __future__ import annotations

from kwire.runtime.blocking import run_detached


class ZkGroupConfigStore:
    """The groups' configs in ZooKeeper, through the node's ``ZooKeeperClient``."""

    def __init__(self, zk):
        self.zk = zk

    def load(self) -> dict[str, dict[str, str]]:
        return {}                         # they come with every ZooKeeper snapshot instead

    async def save(self, group_id: str, group: dict[str, str], every: dict[str, dict[str, str]]) -> None:
        await run_detached(self.zk.set_group_config, group_id, group)

    async def read_group(self, group_id: str) -> dict[str, str]:
        """After a sync, so a change another broker wrote and acknowledged is seen even
        before this broker's watch fires."""
        return await run_detached(self.zk.get_group_config, group_id)
