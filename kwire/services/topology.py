"""The broker's view of the cluster it is part of: brokers, controller, partition leaders,
coordinators, producer ids.

Handlers never ask whether there is a cluster: they ask a ``Topology`` chosen when the broker
is built (``Broker.topology``).  ``LocalTopology`` (here) describes this broker alone: it is
the controller, every partition's only replica and leader, every group's coordinator.  The
ZooKeeper cluster's view is ``kwire.cluster.topology.ClusterTopology``, read from the last
snapshot its ``ClusterNode`` reconciled.

Methods that take ``ctx`` read only ``ctx.listener`` (brokers are answered with their
endpoint of the listener the request came through), ``ctx.api_key``/``ctx.api_version`` and
``ctx.broker``; they return response entries as the Metadata and FindCoordinator handlers
send them.  None of them raises unless it says so.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from kwire.codecs.errors import ErrorCode

from kwire.runtime.blocking import next_producer_id


@runtime_checkable
class Topology(Protocol):
    def broker_entries(self, ctx) -> tuple[list[dict], int]:
        """(the live brokers with an endpoint for ``ctx.listener``, the controller id)."""

    def partition_entries(self, ctx, topic) -> list[dict]:
        """Metadata's partition entries of ``topic`` (a kwire.log.manager topic)."""

    def coordinator_entry(self, ctx, key: str, key_type: int) -> dict:
        """FindCoordinator's entry for a group (key_type 0) or transactional id (1)."""

    def leader_of(self, topic, partition: int) -> tuple[int, int]:
        """(leader id, leader epoch) of a partition of ``topic`` (None: unknown), -1s when none."""

    def leader_id(self, topic: str, partition: int) -> int | None:
        """The partition's leader id (-1 when it has none now), None when the partition does
        not exist (a deleted topic)."""

    def topic_exists(self, name: str) -> bool:
        """Whether the topic exists (in the cluster's metadata, not only on this node)."""

    def replica_error(self, topic: str, partition: int, plog) -> ErrorCode | None:
        """Why this broker holds no replica of a partition that exists (DescribeProducers):
        UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER; None when it holds one."""

    def topic_configs(self, name: str) -> dict:
        """The topic's configuration overrides as the cluster knows them ({} when none)."""

    async def next_producer_id(self) -> int:
        """A producer id unique wherever it may be used."""

    async def describe_elsewhere(self, transactional_id: str, description):
        """A TxnDescription of ``transactional_id`` from the broker coordinating it, when this
        broker's coordinator answered NOT_COORDINATOR (``description``); errors come back as
        the description's ``error``."""

    async def add_partitions_elsewhere(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                       partitions) -> ErrorCode:
        """Transactions v2's implicit add of ``partitions`` at the broker coordinating
        ``transactional_id`` (AddPartitionsToTxn v5), when this broker's coordinator answered
        NOT_COORDINATOR; the coordinator's code, or a retriable one when it cannot be asked."""


def offline_entry(index: int, plog, node: int) -> dict:
    """A partition whose storage failed (kwire.log.health): KAFKA_STORAGE_ERROR, its replica
    listed offline.  The leader stays named so that produce and fetch reach this broker and
    get KAFKA_STORAGE_ERROR instead of clients waiting silently for a leader."""
    return {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "partition_index": index,
            "leader_id": node, "leader_epoch": plog.leader_epoch, "replica_nodes": [node],
            "isr_nodes": [node], "offline_replicas": [node]}


def this_broker_entries(ctx) -> tuple[list[dict], int]:
    """This node alone, the controller of itself."""
    ep = ctx.broker.endpoint_for(ctx.listener)
    return [{"node_id": ctx.broker.node_id, "host": ep.host, "port": ep.port, "rack": None}], \
        ctx.broker.node_id


class LocalTopology:
    """A single node: the only broker, controller, replica, leader and coordinator."""

    def __init__(self, broker):
        self.broker = broker
        self.logs = broker.logs
        self.node_id = broker.node_id

    def broker_entries(self, ctx) -> tuple[list[dict], int]:
        return this_broker_entries(ctx)

    def partition_entries(self, ctx, topic) -> list[dict]:
        node = self.node_id
        return [{"error_code": 0, "partition_index": i, "leader_id": node,
                 "leader_epoch": plog.leader_epoch, "replica_nodes": [node], "isr_nodes": [node],
                 "offline_replicas": []} if not plog.offline else offline_entry(i, plog, node)
                for i, plog in enumerate(topic.partitions)]

    def coordinator_entry(self, ctx, key: str, key_type: int) -> dict:
        ep = self.broker.endpoint_for(ctx.listener)
        return {"key": key, "node_id": self.node_id, "host": ep.host, "port": ep.port,
                "error_code": 0, "error_message": None}

    def leader_of(self, topic, partition: int) -> tuple[int, int]:
        epoch = topic.partitions[partition].leader_epoch if topic and 0 <= partition < len(topic.partitions) else -1
        return self.node_id, max(epoch, 0)

    def leader_id(self, topic: str, partition: int) -> int | None:
        return self.node_id if self.logs.partition(topic, partition) is not None else None

    def topic_exists(self, name: str) -> bool:
        return self.logs.get(name) is not None

    def replica_error(self, topic: str, partition: int, plog) -> ErrorCode | None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if plog is None else None

    def topic_configs(self, name: str) -> dict:
        topic = self.logs.get(name)
        return dict(topic.configs) if topic else {}

    async def next_producer_id(self) -> int:
        return await next_producer_id(self.logs)

    async def describe_elsewhere(self, transactional_id: str, description):
        return description              # no other broker coordinates anything

    async def add_partitions_elsewhere(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                       partitions) -> ErrorCode:
        return ErrorCode.NOT_COORDINATOR    # no other broker coordinates anything
