"""The finalized feature levels of a cluster (``kwire.services.features.FeatureStore``):
Kafka's ZooKeeper-era ``/feature`` znode (JSON in ``kwire.admin.features``), its version the
epoch.  Each broker creates it with the default levels when it connects (the first one wins),
reads it with every ZooKeeper snapshot (``ClusterNode._apply`` calls ``finalized_of``) and so
advertises the same levels and epoch as the others.  Any broker takes an UpdateFeatures: a
write conditional on the version it read, so concurrent updates on two brokers cannot both
apply to the same levels; the loser reads again.
"""
from __future__ import annotations

import logging

from kwire.admin import features as rules
from kwire.admin.features import FinalizedFeatures
from kwire.runtime.blocking import run_detached
from kwire.services.features import FeatureConflict

logger = logging.getLogger("kwire.features")


def finalized_of(found: tuple[bytes, int] | None) -> FinalizedFeatures | None:
    """The levels and epoch of /feature's (data, version); None when it is absent or is not
    Kafka's format (logged)."""
    if found is None:
        return None
    try:
        levels, _ = rules.decode(found[0])
    except rules.FeatureFormatError as exc:
        logger.error("ignoring %s: %s", rules.FEATURE_ZNODE, exc)
        return None
    return FinalizedFeatures(levels, found[1])


async def create_default(zk) -> None:
    """Create /feature with the default levels unless it exists.  Raises what kazoo raises."""
    await run_detached(zk.write_features, rules.encode(rules.default_levels()), -1)


class ZkFeatureStore:
    """/feature, through the node's ``ZooKeeperClient``."""

    def __init__(self, node):
        self.node = node

    def load(self) -> None:
        return None                     # it comes with every ZooKeeper snapshot instead

    async def read(self) -> FinalizedFeatures:
        found = finalized_of(await run_detached(self.node.zk.read_features))
        return found if found is not None else FinalizedFeatures(rules.default_levels(), -1)

    async def save(self, levels: dict[str, int], expected_epoch: int) -> int:
        """Raises FeatureConflict when /feature changed since ``expected_epoch``; waits (a few
        seconds at most) until this broker's snapshot has the new version."""
        version = await run_detached(self.node.zk.write_features, rules.encode(levels), expected_epoch)
        if version is None:
            raise FeatureConflict(f"{rules.FEATURE_ZNODE} is no longer at version {expected_epoch}")
        await self.node.wait_for(lambda s: s.features is not None and s.features[1] >= version, 5.0)
        return version
