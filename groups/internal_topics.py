"""Kafka's internal topics, in one table: each coordinator's state topic and the broker keys
that shape it.

Every creator (single node and cluster) and every guard (DeleteTopics, CreateTopics,
Metadata's ``is_internal``, AddPartitionsToTxn) reads this table, so a new internal topic is
one row here.  Like Kafka, the broker creates them on first use: compacted, with as many
replicas as the replication key asks for or as there are live brokers, whichever is fewer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["InternalTopic", "OFFSETS", "TRANSACTIONS", "SHARE_STATE", "SCHEMAS", "BY_NAME", "INTERNAL_TOPICS",
           "OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC", "SHARE_STATE_TOPIC"]


@dataclass(frozen=True)
class InternalTopic:
    """One internal topic: its name and the broker keys that set its partition count,
    replication factor, segment size and (when Kafka has one) its own min.insync.replicas."""
    name: str
    partitions_key: str
    replication_key: str
    segment_bytes_key: str
    min_isr_key: str | None = None
    cleanup_policy: str = "compact"
    fixed_partitions: int | None = None       # a count no key changes (``partitions_key`` unused)

    def partitions(self, value_of: Callable[[str], Any]) -> int:
        if self.fixed_partitions is not None:
            return self.fixed_partitions
        return int(value_of(self.partitions_key))

    def replication_factor(self, value_of: Callable[[str], Any], live_brokers: int) -> int:
        """The configured replication factor, or the number of live brokers when fewer."""
        return min(int(value_of(self.replication_key)), live_brokers)

    def configs(self, value_of: Callable[[str], Any]) -> dict[str, str]:
        """The topic configs it is created with."""
        configs = {"cleanup.policy": self.cleanup_policy, "segment.bytes": str(value_of(self.segment_bytes_key))}
        if self.min_isr_key is not None:
            configs["min.insync.replicas"] = str(value_of(self.min_isr_key))
        return configs


OFFSETS = InternalTopic("__consumer_offsets", "offsets.topic.num.partitions",
                        "offsets.topic.replication.factor", "offsets.topic.segment.bytes")
TRANSACTIONS = InternalTopic("__transaction_state", "transaction.state.log.num.partitions",
                             "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes",
                             "transaction.state.log.min.isr")
SHARE_STATE = InternalTopic("__share_group_state", "share.coordinator.state.topic.num.partitions",
                            "share.coordinator.state.topic.replication.factor",
                            "share.coordinator.state.topic.segment.bytes", "share.coordinator.state.topic.min.isr")

# The Schema Registry's log (kwire.schemas): created like the others on first use, but not internal
# to Kafka (Confluent's registry is a client; its _schemas can be read, and written by a mirror).
SCHEMAS = InternalTopic("_schemas", "", "schema.registry.topic.replication.factor", "log.segment.bytes",
                        fixed_partitions=1)

BY_NAME = {t.name: t for t in (OFFSETS, TRANSACTIONS, SHARE_STATE)}
INTERNAL_TOPICS = frozenset(BY_NAME)
OFFSETS_TOPIC = OFFSETS.name
TRANSACTION_STATE_TOPIC = TRANSACTIONS.name
SHARE_STATE_TOPIC = SHARE_STATE.name
