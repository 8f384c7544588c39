"""Topic administration: create, delete, grow and configure topics.

CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and Metadata's auto-creation do
their checks and answers in their handlers and the change itself through a ``TopicAdmin``
chosen when the broker is built (``Broker.topic_admin``): ``LocalTopicAdmin`` (here) writes
this node's logs; ``kwire.cluster.topic_admin.ZkTopicAdmin`` writes ZooKeeper, where the
controller and every broker pick the change up, and waits until this broker has applied it.

Every method raises KafkaApiError with the code the client gets; a refused change changes
nothing.
"""
from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from kwire.admin.topics import INTERNAL_TOPICS
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.runtime import blocking

logger = logging.getLogger("kwire.topics")


@runtime_checkable
class TopicAdmin(Protocol):
    def check_replication(self, replication_factor: int, assignments) -> None:
        """A requested replication factor (-1: the default) and manual assignment (a list of
        objects with ``broker_ids``) this broker can honour.  Raises KafkaApiError
        (INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT)."""

    def replication_factor(self, t) -> int:
        """The replication factor a created CreatableTopic ``t`` is answered with."""

    async def create(self, t, partitions: int, configs: dict[str, str], validate_only: bool,
                     timeout_ms: int):
        """Create the (validated) CreatableTopic ``t``; its topic id (None when only validating)."""

    async def auto_create(self, name: str):
        """Metadata's auto-creation with the broker's defaults: the topic, or None while it
        has no leader yet."""

    async def delete(self, wanted: list[tuple], refusals: dict[int, dict], timeout_ms: int) -> list[dict]:
        """DeleteTopics' responses, in order, for ``wanted`` (name, topic id) pairs; the
        entries of ``refusals`` (by position) are answered as they are."""

    async def add_partitions(self, name: str, total: int, assignments) -> None:
        """CreatePartitions: grow ``name`` to ``total`` partitions."""

    async def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """AlterConfigs: replace the topic's overrides with ``configs`` (validated)."""

    async def internal_topic(self, spec):
        """An internal topic (kwire.groups.internal_topics) created on first use, compacted;
        the topic.  Raises KafkaApiError(COORDINATOR_NOT_AVAILABLE) while a cluster's is not
        here yet."""


def requested_replication_factor(config, t) -> int:
    """The replication factor a CreatableTopic asks for (its assignment's, or the default for -1)."""
    if t.assignments:
        return len(t.assignments[0].broker_ids)
    return config.default_replication_factor if t.replication_factor == -1 else t.replication_factor


def delete_answer(name, topic_id, exc: KafkaApiError | None = None) -> dict:
    if exc is None:
        return {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
    return {"name": name, "topic_id": topic_id, "error_code": int(exc.code), "error_message": exc.message}


def check_deletable(config, name: str) -> None:
    """Raises KafkaApiError(TOPIC_DELETION_DISABLED, TOPIC_AUTHORIZATION_FAILED for an internal topic)."""
    if not config.delete_topic_enable:
        raise KafkaApiError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
    if name in INTERNAL_TOPICS:
        raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"{name} is an internal topic")


class LocalTopicAdmin:
    """One node: topics are this node's logs, with replication factor 1."""

    def __init__(self, broker):
        self.config = broker.config
        self.logs = broker.logs
        self.clock = broker.clock
        self.node_id = broker.node_id

    def check_replication(self, replication_factor: int, assignments) -> None:
        """Replication factor 1 (or -1 = default), replicas only on this node."""
        if replication_factor not in (-1, 1):
            raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                f"Unable to replicate the partition {replication_factor} time(s): "
                                "The target replication factor of "
                                f"{replication_factor} cannot be reached because only 1 broker(s) are registered.")
        for a in assignments or ():
            if list(a.broker_ids) != [self.node_id]:
                raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    f"replica assignment {list(a.broker_ids)} names brokers other than "
                                    f"node {self.node_id}")

    def replication_factor(self, t) -> int:
        return 1

    async def create(self, t, partitions: int, configs: dict[str, str], validate_only: bool,
                     timeout_ms: int):
        if validate_only:
            return None
        topic = await blocking.create_topic(self.logs, t.name, partitions, configs, now_ms=self.clock.now_ms())
        logger.info("created topic %s (%d partitions, configs %s)", t.name, partitions, configs)
        return topic.topic_id

    async def auto_create(self, name: str):
        return await blocking.create_topic(self.logs, name, self.config.num_partitions, {},
                                           now_ms=self.clock.now_ms(), exist_ok=True)

    async def delete(self, wanted: list[tuple], refusals: dict[int, dict], timeout_ms: int) -> list[dict]:
        async with blocking.admin_lock(self.logs):  # not while a topic's files are being written
            return [refusals[i] if i in refusals else self._delete_one(n, t) for i, (n, t) in enumerate(wanted)]

    def _delete_one(self, name, topic_id) -> dict:
        logs = self.logs
        if name is None and topic_id is not None:
            topic = logs.topics_by_id.get(topic_id)
            if topic is None:
                return {"name": None, "topic_id": topic_id, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
                        "error_message": None}
            name = topic.name
        try:
            check_deletable(self.config, name)
            topic = logs.delete_topic(name)
            logger.info("deleted topic %s", name)
            return delete_answer(name, topic.topic_id)
        except KafkaApiError as exc:
            return delete_answer(name, topic_id, exc)

    async def add_partitions(self, name: str, total: int, assignments) -> None:
        await blocking.add_partitions(self.logs, name, total, now_ms=self.clock.now_ms())

    async def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.logs.set_topic_configs(name, configs)

    async def internal_topic(self, spec):
        v = self.config.value_of
        return await blocking.create_topic(self.logs, spec.name, spec.partitions(v), spec.configs(v),
                                           now_ms=self.clock.now_ms(), internal=spec.name in INTERNAL_TOPICS,
                                           exist_ok=True)
