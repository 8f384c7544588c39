"""Broker keys of Kafka 4.x's group protocols: KIP-848 consumer groups and KIP-932 share groups.

Names and defaults are Kafka's (GroupCoordinatorConfig, ShareGroupConfig,
ShareCoordinatorConfig), with two kwire choices, said in each key's doc:

* ``group.coordinator.rebalance.protocols`` lists ``share`` by default, and
  ``group.share.enable`` is true by default.  Kafka 4.2 turns share groups on in a
  new cluster through its ``share.version`` feature, which kwire does not have;
  either key set the other way turns them off.
* ``share.coordinator.state.topic.min.isr`` is 1 (Kafka: 2, which one node cannot meet),
  as ``transaction.state.log.min.isr`` already is.
"""
from __future__ import annotations

from .config_def import ConfigError, ConfigKey, ConfigType as T, at_least, between, one_of, subset_of

INT_MAX = 2147483647
REBALANCE_PROTOCOLS = ("classic", "consumer", "share")

GROUP_PROTOCOL_KEYS: list[ConfigKey] = [
    ConfigKey("group.coordinator.rebalance.protocols", T.LIST, ("classic", "consumer", "share"),
              "The group protocols the coordinator serves: classic (JoinGroup/SyncGroup), consumer "
              "(KIP-848 ConsumerGroupHeartbeat) and share (KIP-932 share groups). kwire lists share by "
              "default, as Kafka 4.2 enables it on new clusters through the share.version feature.",
              subset_of(*REBALANCE_PROTOCOLS)),
    ConfigKey("group.max.size", T.INT, INT_MAX, "The maximum number of members of a classic group.",
              at_least(1)),
    # KIP-848 consumer groups
    ConfigKey("group.consumer.session.timeout.ms", T.INT, 45000,
              "A consumer-protocol member that has not heartbeated for this long is removed.", at_least(1)),
    ConfigKey("group.consumer.min.session.timeout.ms", T.INT, 45000,
              "The smallest group.consumer.session.timeout.ms a group may use.", at_least(1)),
    ConfigKey("group.consumer.max.session.timeout.ms", T.INT, 60000,
              "The largest group.consumer.session.timeout.ms a group may use.", at_least(1)),
    ConfigKey("group.consumer.heartbeat.interval.ms", T.INT, 5000,
              "How often consumer-protocol members are told to heartbeat.", at_least(1)),
    ConfigKey("group.consumer.min.heartbeat.interval.ms", T.INT, 5000,
              "The smallest group.consumer.heartbeat.interval.ms a group may use.", at_least(1)),
    ConfigKey("group.consumer.max.heartbeat.interval.ms", T.INT, 15000,
              "The largest group.consumer.heartbeat.interval.ms a group may use.", at_least(1)),
    ConfigKey("group.consumer.max.size", T.INT, INT_MAX,
              "The maximum number of members of a consumer-protocol group.", at_least(1)),
    ConfigKey("group.consumer.assignors", T.LIST, ("uniform", "range"),
              "The server-side assignors, the first one the default; Kafka's class names "
              "(org.apache.kafka.coordinator.group.assignor.UniformAssignor, ...RangeAssignor) "
              "and the short names uniform and range are accepted."),
    ConfigKey("group.consumer.migration.policy", T.STRING, "bidirectional",
              "Whether a group may move between the classic and the consumer protocol: disabled, "
              "upgrade (classic to consumer), downgrade (consumer to classic) or bidirectional.",
              one_of("disabled", "upgrade", "downgrade", "bidirectional", ignore_case=True)),
    # KIP-932 share groups
    ConfigKey("group.share.enable", T.BOOLEAN, True,
              "Serve share groups (KIP-932). kwire's default is true; with false, or without share in "
              "group.coordinator.rebalance.protocols, the share-group APIs are not advertised."),
    ConfigKey("group.share.session.timeout.ms", T.INT, 45000,
              "A share-group member that has not heartbeated for this long is removed.", at_least(1)),
    ConfigKey("group.share.min.session.timeout.ms", T.INT, 45000,
              "The smallest group.share.session.timeout.ms a group may use.", at_least(1)),
    ConfigKey("group.share.max.session.timeout.ms", T.INT, 60000,
              "The largest group.share.session.timeout.ms a group may use.", at_least(1)),
    ConfigKey("group.share.heartbeat.interval.ms", T.INT, 5000,
              "How often share-group members are told to heartbeat.", at_least(1)),
    ConfigKey("group.share.min.heartbeat.interval.ms", T.INT, 5000,
              "The smallest group.share.heartbeat.interval.ms a group may use.", at_least(1)),
    ConfigKey("group.share.max.heartbeat.interval.ms", T.INT, 15000,
              "The largest group.share.heartbeat.interval.ms a group may use.", at_least(1)),
    ConfigKey("group.share.max.groups", T.INT, 10, "The maximum number of share groups.", at_least(1)),
    ConfigKey("group.share.max.size", T.INT, 200, "The maximum number of members of a share group.",
              between(1, 1000)),
    ConfigKey("group.share.record.lock.duration.ms", T.INT, 30000,
              "How long a share consumer holds the records it acquired before they are released for "
              "redelivery.", at_least(1000)),
    ConfigKey("group.share.min.record.lock.duration.ms", T.INT, 15000,
              "The smallest record lock duration a group may use.", at_least(1000)),
    ConfigKey("group.share.max.record.lock.duration.ms", T.INT, 60000,
              "The largest record lock duration a group may use.", at_least(1000)),
    ConfigKey("group.share.delivery.count.limit", T.INT, 5,
              "Deliveries of a record after which it is archived instead of delivered again.",
              between(2, 10)),
    ConfigKey("group.share.partition.max.record.locks", T.INT, 2000,
              "The most records of one share-partition that may be in flight (acquired) at once.",
              at_least(100)),
    ConfigKey("share.coordinator.state.topic.num.partitions", T.INT, 50,
              "Partitions of the share-group state topic __share_group_state.", at_least(1)),
    ConfigKey("share.coordinator.state.topic.replication.factor", T.SHORT, 3,
              "Replication factor of __share_group_state (a single node uses 1; a cluster with fewer "
              "live brokers uses as many as there are).", at_least(1)),
    # kwire: Kafka's default is 2, unsatisfiable on one node.
    ConfigKey("share.coordinator.state.topic.min.isr", T.SHORT, 1,
              "min.insync.replicas of __share_group_state.", at_least(1)),
    ConfigKey("share.coordinator.state.topic.segment.bytes", T.INT, 104857600,
              "Segment size of __share_group_state.", at_least(1)),
]


def check_consumer_group_ranges(values) -> None:
    """Kafka's GroupCoordinatorConfig requirements between the group.consumer.* keys (the broker
    does not start otherwise).  Raises ConfigError."""
    p = "group.consumer."
    v = {k[len(p):]: values[k] for k in values if k.startswith(p)}
    checks = [("max.heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
              ("heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
              ("heartbeat.interval.ms", "<=", "max.heartbeat.interval.ms"),
              ("max.session.timeout.ms", ">=", "min.session.timeout.ms"),
              ("session.timeout.ms", ">=", "min.session.timeout.ms"),
              ("session.timeout.ms", "<=", "max.session.timeout.ms"),
              ("heartbeat.interval.ms", "<", "session.timeout.ms")]
    words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
    ok = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}
    for left, op, right in checks:
        if not ok[op](v[left], v[right]):
            raise ConfigError(f"{p}{left} must be {words[op]} {p}{right}")
