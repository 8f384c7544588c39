"""Topic administration in a ZooKeeper cluster (``kwire.services.topic_admin.TopicAdmin``).

A change is written to ZooKeeper (``kwire.cluster.node.ClusterNode``): the controller elects
the new partitions' leaders or finishes a deletion, every broker materializes what the
snapshot says, and the request waits until this broker has applied it (or its timeout).
"""
from __future__ import annotations

from kwire.admin.assignment import assign_replicas
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.services.topic_admin import check_deletable, delete_answer, requested_replication_factor


class ZkTopicAdmin:
    def __init__(self, broker, cluster):
        self.config = broker.config
        self.logs = broker.logs
        self.cluster = cluster

    def check_replication(self, replication_factor: int, assignments) -> None:
        """A manual assignment names live brokers, each at most once per partition (the
        replication factor is checked by ``assign_replicas``)."""
        live = self.cluster.snapshot.brokers
        for a in assignments or ():
            ids = list(a.broker_ids)
            if not ids or len(set(ids)) != len(ids) or any(i not in live for i in ids):
                raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"replica assignment {ids} must name distinct live brokers "
                                    f"(live: {sorted(live)})")

    def replication_factor(self, t) -> int:
        return requested_replication_factor(self.config, t)

    async def create(self, t, partitions: int, configs: dict[str, str], validate_only: bool,
                     timeout_ms: int):
        """Assign replicas over the live brokers and write the topic to ZooKeeper; the controller
        elects its leaders."""
        brokers = {i: b.rack for i, b in self.cluster.snapshot.brokers.items()}
        if t.assignments:
            assignment = {i: tuple(a.broker_ids) for i, a in enumerate(t.assignments)}
        else:
            assignment = assign_replicas(brokers, partitions, requested_replication_factor(self.config, t))
        if validate_only:
            return None
        await self.cluster.create_topic(t.name, partitions, 0, configs, assignment,
                                        wait_s=max(timeout_ms, 0) / 1000 or 10.0)
        topic = self.logs.get(t.name)
        return topic.topic_id if topic else None

    async def auto_create(self, name: str):
        await self.cluster.create_topic(name, self.config.num_partitions, self.config.default_replication_factor,
                                        {}, wait_s=2.0)
        return self.logs.get(name)

    async def delete(self, wanted: list[tuple], refusals: dict[int, dict], timeout_ms: int) -> list[dict]:
        return [refusals[i] if i in refusals else await self._delete_one(n, t, timeout_ms)
                for i, (n, t) in enumerate(wanted)]

    async def _delete_one(self, name, topic_id, timeout_ms: int) -> dict:
        """Mark the topic for deletion in ZooKeeper; the controller removes it and every broker
        deletes its logs.  Waits until this broker's copy is gone (or the request's timeout)."""
        logs = self.logs
        topic = logs.topics_by_id.get(topic_id) if name is None else logs.get(name)
        try:
            if topic is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_ID if name is None else
                                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
            name = topic.name
            check_deletable(self.config, name)
            await self.cluster.delete_topic(name, max(timeout_ms, 0) / 1000 or 30.0)
            return delete_answer(name, topic.topic_id)
        except KafkaApiError as exc:
            return delete_answer(name, topic_id, exc)

    async def add_partitions(self, name: str, total: int, assignments) -> None:
        await self.cluster.add_partitions(name, total, assignments)

    async def set_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.cluster.set_topic_configs(name, configs)

    async def internal_topic(self, spec):
        """Created through ZooKeeper with its replication key's replicas; its partitions load as
        this broker leads them."""
        await self.cluster.ensure_internal_topic(spec)
        topic = self.logs.get(spec.name)
        if topic is None:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{spec.name} is being created")
        return topic
