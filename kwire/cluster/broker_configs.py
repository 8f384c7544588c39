"""The dynamic broker configs of a cluster (``kwire.services.broker_configs.BrokerConfigStore``):
Kafka's ``/config/brokers/<id>`` and ``/config/brokers/<default>`` znodes, written with a
``/config/changes`` notice by the broker that takes the alter.  Every broker applies what
ZooKeeper holds with each snapshot (``ClusterNode._apply``), so nothing is loaded at start-up."""
from __future__ import annotations

from kwire.runtime.blocking import run_detached


class ZkBrokerConfigStore:
    """The dynamic broker configs in ZooKeeper, through the node's ``ZooKeeperClient``."""

    def __init__(self, zk):
        self.zk = zk

    def load(self) -> dict[str, dict[str, str]]:
        return {}                         # they come with every ZooKeeper snapshot instead

    async def read(self, entity: str) -> dict[str, str]:
        return await run_detached(self.zk.get_broker_config, entity)

    async def save(self, entity: str, configs: dict[str, str]) -> None:
        await run_detached(self.zk.set_broker_config, entity, configs)
