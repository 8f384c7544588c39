"""The client-metrics subscriptions of a cluster broker
(``kwire.services.client_metrics.ClientMetricsConfigStore``): each subscription's znode
``/config/client-metrics/<name>`` in ZooKeeper, as ZooKeeper-era Kafka kept them, written by the
broker that takes the alter.  Every broker applies what ZooKeeper holds with each snapshot
(``ClusterNode``), so nothing is loaded at start-up."""
from __future__ import annotations

from kwire.runtime.blocking import run_detached


class ZkClientMetricsConfigStore:
    """The subscriptions in ZooKeeper, through the node's ``ZooKeeperClient``."""

    def __init__(self, zk):
        self.zk = zk

    def load(self) -> dict[str, dict[str, str]]:
        return {}                         # they come with every ZooKeeper snapshot instead

    async def save(self, name: str, configs: dict[str, str], every: dict[str, dict[str, str]]) -> None:
        await run_detached(self.zk.set_entity_config, "client-metrics", name, configs)
