"""Broker configuration: Java ``server.properties`` in, a typed ``BrokerConfig`` out.

Keys, types, defaults and validation follow Kafka's ``KafkaConfig`` so an
existing ``server.properties`` works unchanged.  Where kwire deliberately
differs (so a single node runs with no setup) the key's table entry says so
with a ``# kwire:`` comment.  The key table (``BROKER_KEYS``) is data: the
topic-config and describe modules read it for types, defaults and docs.

Only ``load_broker_config`` touches the file system; everything else is pure.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any, Mapping

# ConfigError, ConfigType, format_value and the parsers are re-exported: callers configure a
# broker through this module alone.
from .config_def import (  # noqa: F401
    INT_MAX, LONG_MAX, ConfigError, ConfigKey, ConfigType, Validator, at_least, between, format_value,
    host_port, http_url, invalid, one_of, parse_value, split_host_port, split_http_url, split_list, subset_of,
)
from .properties import parse_overrides, parse_properties  # noqa: F401
from .group_protocol_config import GROUP_PROTOCOL_KEYS, check_consumer_group_ranges
from .listener_config import (  # noqa: F401  (Listener and the rest re-exported)
    INTER_BROKER_SASL_MECHANISMS, Listener, inter_broker_listener, parse_listeners, resolve_listeners,
)
from .security_config import SECURITY_KEYS, is_listener_override


T = ConfigType
_KRAFT = "kwire is a single combined node; there is no controller quorum"

BROKER_KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    ConfigKey("node.id", T.INT, None, "The node ID of this server (synonym of broker.id). kwire default 1."),
    ConfigKey("broker.id", T.INT, None, "The broker ID of this server (synonym of node.id). kwire default 1."),
    ConfigKey("cluster.id", T.STRING, None,
              "kwire-specific: the cluster ID to use; by default it is generated once and kept in meta.properties."),
    # kwire: Kafka's default is PLAINTEXT://:9092 (all interfaces); kwire listens on loopback by default.
    ConfigKey("listeners", T.STRING, "PLAINTEXT://127.0.0.1:9092",
              "Comma-separated URIs NAME://host:port to listen on; an empty host binds all interfaces."),
    ConfigKey("advertised.listeners", T.STRING, None,
              "Listeners to publish to clients if different from listeners. An empty host is advertised as "
              "127.0.0.1 (kwire; Kafka advertises the canonical host name)."),
    ConfigKey("listener.security.protocol.map", T.STRING,
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
              "Map between listener names and security protocols (kwire serves all four)."),
    ConfigKey("inter.broker.listener.name", T.STRING, None,
              "Listener brokers use to reach each other (cluster mode); set this or "
              "security.inter.broker.protocol, not both. By default the listener named after "
              "security.inter.broker.protocol."),
    ConfigKey("process.roles", T.LIST, (), "The roles this process plays: broker, controller.", ignored=_KRAFT),
    ConfigKey("controller.listener.names", T.LIST, (),
              "Listener names used by the controller; kwire does not bind these listeners.", ignored=_KRAFT),
    ConfigKey("controller.quorum.voters", T.LIST, (), "Controller quorum voters.", ignored=_KRAFT),
    ConfigKey("controller.quorum.bootstrap.servers", T.LIST, (), "Controller bootstrap servers.",
              ignored=_KRAFT),
    ConfigKey("zookeeper.connect", T.STRING, None,
              "ZooKeeper connection string host:port[,host:port...][/chroot]; when set the broker joins "
              "a replicated cluster, when unset it runs as a single node."),
    ConfigKey("zookeeper.session.timeout.ms", T.INT, 18000, "ZooKeeper session timeout.", at_least(1)),
    ConfigKey("zookeeper.connection.timeout.ms", T.INT, None, "The longest the broker waits to connect to "
              "ZooKeeper; if unset zookeeper.session.timeout.ms is used."),
    ConfigKey("broker.rack", T.STRING, None, "Rack of the broker, for rack-aware replica assignment."),
    ConfigKey("replica.lag.time.max.ms", T.LONG, 30000, "A follower that has not caught up with the "
              "leader's log end offset for this long is removed from the ISR.", at_least(1)),
    ConfigKey("replica.fetch.max.bytes", T.INT, 1048576, "Bytes fetched per partition by a follower.",
              at_least(0)),
    ConfigKey("replica.fetch.response.max.bytes", T.INT, 10485760, "Bytes per follower fetch response.",
              at_least(0)),
    ConfigKey("replica.fetch.wait.max.ms", T.INT, 500, "Longest wait of a follower's fetch.", at_least(0)),
    ConfigKey("replica.fetch.min.bytes", T.INT, 1, "Bytes a follower's fetch waits for.", at_least(1)),
    ConfigKey("replica.fetch.backoff.ms", T.INT, 1000, "Back-off after a follower's fetch fails.",
              at_least(0)),
    ConfigKey("replica.socket.timeout.ms", T.INT, 30000, "Socket timeout of follower fetches.",
              at_least(1)),
    ConfigKey("num.replica.fetchers", T.INT, 1, "Fetchers per source broker, each with its own "
              "connection; a partition goes to Utils.abs(31 * topic.hashCode() + partition) % n.",
              at_least(1)),
    ConfigKey("leader.replication.throttled.rate", T.LONG, LONG_MAX,
              "Bytes per second this broker sends to followers of the replicas a topic's "
              "leader.replication.throttled.replicas names (dynamic; set by a reassignment's --throttle).",
              at_least(0)),
    ConfigKey("follower.replication.throttled.rate", T.LONG, LONG_MAX,
              "Bytes per second this broker fetches for the replicas a topic's "
              "follower.replication.throttled.replicas names (dynamic).", at_least(0)),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, LONG_MAX,
              "Bytes per second a move between this broker's log dirs (AlterReplicaLogDirs) copies.",
              at_least(1)),
    ConfigKey("replication.quota.window.num", T.INT, 11, "Samples kept for the replication quotas.",
              at_least(1)),
    ConfigKey("replication.quota.window.size.seconds", T.INT, 1, "Time span of each replication quota sample.",
              at_least(1)),
    ConfigKey("auto.leader.rebalance.enable", T.BOOLEAN, True,
              "Move leadership back to the preferred replica when the imbalance is too high."),
    ConfigKey("leader.imbalance.check.interval.seconds", T.LONG, 300,
              "How often the controller checks leader imbalance.", at_least(1)),
    ConfigKey("leader.imbalance.per.broker.percentage", T.INT, 10,
              "Leader imbalance per broker (percent) that triggers a preferred-leader election.",
              at_least(0)),
    ConfigKey("controlled.shutdown.enable", T.BOOLEAN, True,
              "On shutdown, move this broker's leaderships away before the process exits."),
    ConfigKey("controlled.shutdown.max.retries", T.INT, 3, "Attempts of a controlled shutdown.", at_least(0)),
    ConfigKey("controlled.shutdown.retry.backoff.ms", T.LONG, 5000, "Back-off between those attempts.",
              at_least(0)),
    # kwire: Kafka's log.dir default is /tmp/kafka-logs; kwire keeps data next to where it runs.
    ConfigKey("log.dirs", T.LIST, None, "Directories where log data is kept; if unset log.dir is used."),
    ConfigKey("log.dir", T.STRING, "./kwire-data", "The directory where log data is kept (see log.dirs)."),
    ConfigKey("num.partitions", T.INT, 1, "Default number of partitions per topic.", at_least(1)),
    ConfigKey("default.replication.factor", T.INT, 1, "Default replication factor for new topics.",
              at_least(1)),
    ConfigKey("auto.create.topics.enable", T.BOOLEAN, True, "Create topics on first metadata request."),
    ConfigKey("delete.topic.enable", T.BOOLEAN, True, "Allow deleting topics."),
    ConfigKey("log.segment.bytes", T.INT, 1073741824, "The maximum size of a single log file.", at_least(14)),
    ConfigKey("log.roll.ms", T.LONG, None, "Maximum time before a new segment is rolled; if unset "
              "log.roll.hours is used."),
    ConfigKey("log.roll.hours", T.INT, 168, "Maximum time in hours before a new segment is rolled.",
              at_least(1)),
    ConfigKey("log.roll.jitter.ms", T.LONG, None, "Maximum jitter subtracted from the roll time."),
    ConfigKey("log.roll.jitter.hours", T.INT, 0, "Maximum jitter in hours subtracted from the roll time.",
              at_least(0)),
    ConfigKey("log.retention.ms", T.LONG, None, "Time to keep a log segment before deleting it; if unset "
              "log.retention.minutes is used. -1 means no limit."),
    ConfigKey("log.retention.minutes", T.INT, None, "Minutes to keep a log segment; if unset "
              "log.retention.hours is used."),
    ConfigKey("log.retention.hours", T.INT, 168, "Hours to keep a log segment before deleting it."),
    ConfigKey("log.retention.bytes", T.LONG, -1, "Maximum size of a partition's log before deleting old "
              "segments; -1 means no limit."),
    ConfigKey("log.retention.check.interval.ms", T.LONG, 300000,
              "How often to check whether segments are eligible for deletion.", at_least(1)),
    ConfigKey("log.flush.interval.messages", T.LONG, LONG_MAX,
              "Messages accumulated on a partition before they are flushed to disk.", at_least(1)),
    ConfigKey("log.flush.interval.ms", T.LONG, None, "Maximum time a message stays in memory before a "
              "flush; if unset log.flush.scheduler.interval.ms is used."),
    ConfigKey("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX,
              "How often the flusher checks whether any log needs flushing."),
    ConfigKey("log.index.interval.bytes", T.INT, 4096, "Bytes between entries of the offset index.",
              at_least(0)),
    ConfigKey("log.index.size.max.bytes", T.INT, 10485760, "Maximum size of an offset index in bytes.",
              at_least(4)),
    ConfigKey("log.segment.delete.delay.ms", T.LONG, 60000, "Time before a deleted segment file is removed.",
              at_least(0)),
    ConfigKey("log.preallocate", T.BOOLEAN, False, "Preallocate segment files."),
    ConfigKey("log.writeback.interval.bytes", T.LONG, 8388608,
              "kwire-specific: after this many bytes appended to a segment, ask the kernel to start "
              "writing them out (not a flush; nothing waits); 0 leaves write-back to the kernel.",
              at_least(0)),
    ConfigKey("log.page.cache.keep.bytes", T.LONG, 67108864,
              "kwire-specific: pages of a segment more than this many bytes behind its end, already "
              "handed to write-back, are dropped from the page cache; -1 keeps them all.", at_least(-1)),
    ConfigKey("log.message.timestamp.type", T.STRING, "CreateTime",
              "Whether message timestamps are the producer's (CreateTime) or the append time (LogAppendTime).",
              one_of("CreateTime", "LogAppendTime")),
    ConfigKey("log.message.timestamp.difference.max.ms", T.LONG, LONG_MAX,
              "Deprecated: maximum difference between a message timestamp and the broker's clock.",
              at_least(0)),
    ConfigKey("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX,
              "How far a message timestamp may lie in the past.", at_least(0)),
    ConfigKey("log.message.timestamp.after.max.ms", T.LONG, LONG_MAX,
              "How far a message timestamp may lie in the future.", at_least(0)),
    ConfigKey("log.message.downconversion.enable", T.BOOLEAN, True,
              "Whether fetches may down-convert messages to older formats."),
    ConfigKey("log.cleanup.policy", T.LIST, ("delete",), "Default cleanup policy: delete, compact or both.",
              subset_of("compact", "delete")),
    ConfigKey("log.cleaner.enable", T.BOOLEAN, True, "Enable the log cleaner (compaction)."),
    ConfigKey("log.cleaner.delete.retention.ms", T.LONG, 86400000,
              "How long delete tombstones are retained on compacted topics.", at_least(0)),
    ConfigKey("log.cleaner.min.compaction.lag.ms", T.LONG, 0,
              "Minimum time a message stays uncompacted.", at_least(0)),
    ConfigKey("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX,
              "Maximum time a message stays ineligible for compaction.", at_least(1)),
    ConfigKey("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5,
              "Minimum ratio of dirty log to total log for a log to be cleaned.", between(0, 1)),
    ConfigKey("log.cleaner.threads", T.INT, 1, "Threads that clean compacted logs.", at_least(0)),
    ConfigKey("log.cleaner.backoff.ms", T.LONG, 15000,
              "How long a cleaner thread sleeps when no log needs cleaning.", at_least(0)),
    ConfigKey("log.cleaner.dedupe.buffer.size", T.LONG, 134217728,
              "Memory for the cleaners' key maps, shared by all cleaner threads.", at_least(0)),
    ConfigKey("log.cleaner.io.buffer.size", T.INT, 524288,
              "I/O buffer memory for the cleaners, shared by all cleaner threads.", at_least(0)),
    ConfigKey("log.cleaner.io.buffer.load.factor", T.DOUBLE, 0.9,
              "How full a cleaner's key map may get.", between(0, 1)),
    ConfigKey("log.cleaner.io.max.bytes.per.second", T.DOUBLE, 1.7976931348623157e308,
              "Read plus write rate the cleaners are throttled to.", at_least(0)),
    ConfigKey("compression.type", T.STRING, "producer", "Final compression type for topics.",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigKey("message.max.bytes", T.INT, 1048588, "Largest record batch size allowed.", at_least(0)),
    ConfigKey("min.insync.replicas", T.INT, 1, "Minimum in-sync replicas for acks=all.", at_least(1)),
    ConfigKey("unclean.leader.election.enable", T.BOOLEAN, False,
              "Allow out-of-sync replicas to become leader."),
    ConfigKey("socket.request.max.bytes", T.INT, 104857600, "Maximum bytes in a request.", at_least(1)),
    ConfigKey("max.connections", T.INT, INT_MAX, "Maximum number of connections the broker accepts.",
              at_least(0)),
    ConfigKey("connections.max.idle.ms", T.LONG, 600000,
              "Close connections that have been idle (no request in progress) for longer than this; "
              "-1 never closes them."),
    # kwire: Kafka's default is -1 (unlimited); kwire bounds memory by default (2 x socket.request.max.bytes).
    ConfigKey("queued.max.request.bytes", T.LONG, 209715200,
              "Bytes of requests read but not yet handled, across all connections, before the broker stops "
              "reading from sockets; a single request up to socket.request.max.bytes always proceeds. "
              "-1 means unlimited."),
    ConfigKey("fetch.max.wait.ms", T.INT, 30000,
              "kwire-specific: the longest a Fetch is held waiting for fetch.min.bytes; a client's larger "
              "max_wait_ms (its fetch.max.wait.ms) is capped to this.", at_least(0)),
    ConfigKey("quota.window.num", T.INT, 11,
              "The number of samples to retain in memory for client quotas.", at_least(1)),
    ConfigKey("quota.window.size.seconds", T.INT, 1,
              "The time span of each sample for client quotas.", at_least(1)),
    ConfigKey("max.incremental.fetch.session.cache.slots", T.INT, 1000,
              "The maximum number of incremental fetch sessions (KIP-227) the broker keeps; 0 disables "
              "them (every fetch is then answered as a full fetch with session id 0).", at_least(0)),
    ConfigKey("max.request.partition.size.limit", T.INT, 2000,
              "The maximum number of partitions in one DescribeTopicPartitions response (the client's "
              "response_partition_limit is capped to this).", at_least(1)),
    ConfigKey("request.read.timeout.ms", T.LONG, 60000,
              "kwire-specific: close a connection whose request has started to arrive but is not complete "
              "after this long (slow or stalled senders); -1 waits for ever.", at_least(-1)),
    ConfigKey("group.initial.rebalance.delay.ms", T.INT, 3000,
              "Time the coordinator waits for more members before the first rebalance of a group."),
    ConfigKey("group.min.session.timeout.ms", T.INT, 6000, "Minimum allowed consumer session timeout."),
    ConfigKey("group.max.session.timeout.ms", T.INT, 1800000, "Maximum allowed consumer session timeout."),
    ConfigKey("offsets.retention.minutes", T.INT, 10080,
              "How long committed offsets of an empty group are kept.", at_least(1)),
    ConfigKey("offsets.topic.num.partitions", T.INT, 50, "Partitions of the offsets topic.", at_least(1)),
    ConfigKey("offsets.topic.segment.bytes", T.INT, 104857600,
              "Segment size of the offsets topic (small, so it rolls and is compacted).", at_least(1)),
    ConfigKey("offsets.topic.replication.factor", T.SHORT, 3, "Replication factor of the offsets topic "
              "(a single node uses 1; a cluster with fewer live brokers uses as many as there are).",
              at_least(1)),
    ConfigKey("transaction.state.log.replication.factor", T.SHORT, 3,
              "Replication factor of the transaction topic (a single node uses 1; a cluster with fewer "
              "live brokers uses as many as there are).", at_least(1)),
    # kwire: Kafka's default is 2, unsatisfiable on one node.
    ConfigKey("transaction.state.log.min.isr", T.INT, 1, "min.insync.replicas of the transaction topic.",
              at_least(1)),
    ConfigKey("transaction.state.log.num.partitions", T.INT, 50, "Partitions of the transaction topic.",
              at_least(1)),
    ConfigKey("transaction.state.log.segment.bytes", T.INT, 104857600,
              "Segment size of the transaction topic.", at_least(1)),
    ConfigKey("producer.id.expiration.ms", T.INT, 86400000,
              "How long a partition remembers an idempotent producer after its last write (its "
              "id, epoch and recent sequences, for duplicate and order checks); a producer with "
              "a transaction open there is kept.", at_least(1)),
    ConfigKey("transaction.max.timeout.ms", T.INT, 900000,
              "The longest transaction.timeout.ms a producer may ask for.", at_least(1)),
    ConfigKey("transactional.id.expiration.ms", T.INT, 604800000,
              "A transactional id with no transaction for this long is forgotten.", at_least(1)),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000,
              "How often transactions open past their timeout are aborted.", at_least(1),
              ignored="kwire aborts a transaction as soon as its timeout passes, with no periodic scan"),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000,
              "How often expired transactional ids are removed.", at_least(1),
              ignored="kwire forgets an idle transactional id as soon as it expires, with no periodic scan"),
    ConfigKey("share.coordinator.state.topic.replication.factor", T.SHORT, 1,
              "Replication factor of the share-group state topic.", at_least(1),
              ignored="kwire has no share groups"),
    ConfigKey("share.coordinator.state.topic.min.isr", T.SHORT, 1,
              "min.insync.replicas of the share-group state topic.", at_least(1),
              ignored="kwire has no share groups"),
    # Keys from Kafka's stock server.properties that only tune the JVM broker's thread pools.
    ConfigKey("num.network.threads", T.INT, 3, "Network threads.", at_least(1), ignored="kwire is one Trio thread"),
    ConfigKey("num.io.threads", T.INT, 8, "I/O threads.", at_least(1), ignored="kwire is one Trio thread"),
    ConfigKey("num.recovery.threads.per.data.dir", T.INT, 1, "Recovery threads per log dir.", at_least(1),
              ignored="kwire recovers logs sequentially"),
    ConfigKey("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF; -1 for the OS default.",
              ignored="kwire uses the OS default"),
    ConfigKey("socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF; -1 for the OS default.",
              ignored="kwire uses the OS default"),
    # kwire: Kafka has no such key (its metrics reach Prometheus through the JMX exporter agent).
    ConfigKey("prometheus.listener", T.STRING, None,
              "kwire-specific: HOST:PORT where the broker serves Prometheus metrics at /metrics, named "
              "as the Prometheus JMX exporter renders Kafka's; unset (the default) serves none.",
              host_port()),
    # Client telemetry (KIP-714): Kafka's limit on a push, and kwire's bounds on what /metrics keeps.
    ConfigKey("telemetry.max.bytes", T.INT, 1048576,
              "The largest (compressed) metrics payload a client may push (PushTelemetry).", at_least(1)),
    ConfigKey("kwire.client.telemetry.max.clients", T.INT, 1000,
              "kwire-specific: client instances whose pushed metrics (and telemetry state) the broker "
              "keeps; past it the longest idle goes.", at_least(1)),
    ConfigKey("kwire.client.telemetry.max.series", T.INT, 50000,
              "kwire-specific: pushed client metric series /metrics keeps in all; new series past it "
              "are dropped (kwire_client_telemetry_dropped_series_total).", at_least(1)),
    # kwire: Confluent's Schema Registry runs beside Kafka; kwire serves its REST API itself.
    ConfigKey("schema.registry.listeners", T.STRING, None,
              "kwire-specific: http://HOST:PORT (or https://, with the broker's ssl.* settings) where the "
              "broker serves a Schema Registry with Confluent's REST API over the _schemas topic; unset "
              "(the default) serves none.", http_url()),
    ConfigKey("schema.registry.authentication.method", T.STRING, "NONE",
              "kwire-specific (Confluent's authentication.method): BASIC checks HTTP Basic credentials "
              "against the broker's SASL users (SCRAM credentials, PLAIN JAAS users); NONE checks none.",
              one_of("none", "basic", ignore_case=True)),
    ConfigKey("schema.registry.topic.replication.factor", T.SHORT, 3,
              "kwire-specific: replication factor of _schemas (Confluent's kafkastore.topic.replication."
              "factor), or the number of live brokers when fewer.", at_least(1)),
    # kwire: Kafka ships no web console; kwire serves one (kwire.console) when asked.
    ConfigKey("console.listener", T.STRING, None,
              "kwire-specific: http://HOST:PORT where the broker serves the web console (kwire console) "
              "in-process, connected to this broker as a Kafka client; unset (the default) serves none.",
              http_url()),
    ConfigKey("console.read.only", T.BOOLEAN, False,
              "kwire-specific: the in-process console hides and refuses every write."),
    ConfigKey("console.users.file", T.STRING, None,
              "kwire-specific: the in-process console's users file (name:scrypt hash lines, from "
              "kwire console hash-password); every page then needs a login.  Unset: no login."),
    ConfigKey("console.command.config", T.STRING, None,
              "kwire-specific: client properties (security.protocol, sasl.*, ssl.*) the in-process "
              "console connects with, as for kwire's tools' --command-config; unset: plaintext."),
    # kwire: Kafka logs requests through log4j's kafka.request.logger at DEBUG instead.
    ConfigKey("log.request.debug", T.BOOLEAN, False,
              "kwire-specific: log every request at DEBUG on logger kwire.request (API, version, "
              "correlation id, client id, peer, listener, principal, time), as Kafka's "
              "kafka.request.logger does at DEBUG."),
    # kwire: a topic's kwire.record.validator loads Python code in the broker, so the modules it
    # may name are the operator's choice, not a client's (kwire.schemas.validators).
    ConfigKey("kwire.record.validator.allowed.modules", T.LIST, ("kwire.schemas.validator_examples",),
              "kwire-specific: module prefixes whose functions a topic's kwire.record.validator may name "
              "(package.module:function); entry points of group kwire.record_validators are allowed too. "
              "A topic config naming anything else is refused with INVALID_CONFIG."),
]}
BROKER_KEYS.update({k.name: k for k in SECURITY_KEYS})
BROKER_KEYS.update({k.name: k for k in GROUP_PROTOCOL_KEYS})

# Keys that resolve to one value, highest precedence first (Kafka's broker synonyms).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.hours": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.roll.jitter.hours": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.hours": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}

_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


# -- the resolved configuration --------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """Typed broker settings.  Attribute names are Kafka's keys with ``_`` for ``.``.

    Multi-key settings are already resolved: ``log_retention_ms`` from
    ms > minutes > hours (negative → -1), ``log_roll_ms`` from ms > hours,
    ``log_flush_interval_ms`` from itself > ``log.flush.scheduler.interval.ms``,
    ``log_dirs`` from ``log.dirs`` > ``log.dir``, ``node_id`` from ``node.id`` /
    ``broker.id``.  ``values`` holds every known key's typed value (None when
    Kafka's default is null); ``originals`` the keys the user set, as text.
    """
    node_id: int = 1
    cluster_id: str | None = None
    listeners: tuple[Listener, ...] = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    advertised_listeners: tuple[Listener, ...] = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    inter_broker_listener_name: str = "PLAINTEXT"
    log_dirs: tuple[str, ...] = ("./kwire-data",)
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    log_segment_bytes: int = 1073741824
    log_roll_ms: int = 168 * _HOUR_MS
    log_retention_ms: int = 168 * _HOUR_MS
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    log_flush_interval_messages: int = LONG_MAX
    log_flush_interval_ms: int = LONG_MAX
    log_index_interval_bytes: int = 4096
    log_message_timestamp_type: str = "CreateTime"
    log_cleanup_policy: tuple[str, ...] = ("delete",)
    message_max_bytes: int = 1048588
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    socket_request_max_bytes: int = 104857600
    max_connections: int = INT_MAX
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    offsets_retention_minutes: int = 10080
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    originals: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    # where ``originals`` came from (kwire.admin.dynamic_config): server.properties with its
    # --override flags, and the dynamic configs of the cluster default and of this broker
    static: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    dynamic_default: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    dynamic_broker: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    warnings: tuple[str, ...] = ()   # unknown keys: log at WARNING
    notes: tuple[str, ...] = ()      # known keys kwire accepts but ignores: log at INFO

    # -- convenience for the server ------------------------------------------------------------
    @property
    def listen_host(self) -> str:
        """Host of the first listener; "" means all interfaces."""
        return self.listeners[0].host

    @property
    def listen_port(self) -> int:
        return self.listeners[0].port

    @property
    def advertised_host(self) -> str:
        return self._advertised().host

    @property
    def advertised_port(self) -> int:
        """Advertised port of the first listener; 0 when it listens on an ephemeral port."""
        return self._advertised().port

    def _advertised(self) -> Listener:
        name = self.listeners[0].name
        for listener in self.advertised_listeners:
            if listener.name == name:
                return listener
        return dataclasses.replace(self.listeners[0], host=self.listeners[0].host or "127.0.0.1")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * _MINUTE_MS

    def value_of(self, name: str) -> Any:
        """The typed value of a known broker key (None for a null default); KeyError if unknown."""
        if name not in BROKER_KEYS:
            raise KeyError(name)
        return self.values.get(name, BROKER_KEYS[name].default)

    def is_set(self, name: str) -> bool:
        """Whether the user set ``name`` (in the file or an override)."""
        return name in self.originals


def broker_config_from_properties(props: Mapping[str, str],
                                  overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """Validate and resolve raw properties (``overrides`` win) into a BrokerConfig.

    Raises ConfigError naming the key, the value and what is allowed.  Unknown
    keys do not fail: they are listed in ``warnings``.
    """
    originals = {k.strip(): v for k, v in {**props, **(overrides or {})}.items()}
    values: dict[str, Any] = {}
    warnings: list[str] = []
    notes: list[str] = []
    for name, key in BROKER_KEYS.items():
        values[name] = key.parse(originals[name]) if name in originals else key.default
        if name in originals and key.ignored:
            shown = "[hidden]" if key.sensitive else originals[name].strip()
            notes.append(f"{name}={shown} is accepted but ignored: {key.ignored}")
    for name in originals:
        if name not in BROKER_KEYS and not is_listener_override(name):
            warnings.append(f"unknown configuration {name!r} was supplied but is not a known config; ignored")
    check_consumer_group_ranges(values)
    listeners, advertised = resolve_listeners(values, notes)
    inter_broker = inter_broker_listener(values, originals, advertised, notes)
    return BrokerConfig(
        node_id=_node_id(values),
        cluster_id=values["cluster.id"] or None,
        listeners=listeners,
        advertised_listeners=advertised,
        inter_broker_listener_name=inter_broker,
        log_dirs=_log_dirs(values),
        log_roll_ms=_resolve_ms(values, ("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
        log_retention_ms=_retention_ms(values),
        log_flush_interval_ms=_resolve_ms(values, ("log.flush.interval.ms", 1),
                                          ("log.flush.scheduler.interval.ms", 1)),
        values=types.MappingProxyType(values),
        originals=types.MappingProxyType(originals),
        static=types.MappingProxyType(originals),
        warnings=tuple(warnings),
        notes=tuple(notes),
        **{field: values[name] for field, name in _SIMPLE_FIELDS.items()},
    )


_SIMPLE_FIELDS = {name.replace(".", "_"): name for name in [
    "num.partitions", "default.replication.factor", "auto.create.topics.enable", "delete.topic.enable",
    "log.segment.bytes", "log.retention.bytes", "log.retention.check.interval.ms",
    "log.flush.interval.messages", "log.index.interval.bytes", "log.message.timestamp.type",
    "log.cleanup.policy", "message.max.bytes", "compression.type", "min.insync.replicas",
    "socket.request.max.bytes", "max.connections", "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "offsets.retention.minutes",
    "offsets.topic.num.partitions", "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
]}


def _resolve_ms(values: Mapping[str, Any], *candidates: tuple[str, int]) -> int:
    for name, scale in candidates:
        if values[name] is not None:
            return values[name] * scale
    raise AssertionError(f"{candidates[-1][0]} has a default")


def _retention_ms(values: Mapping[str, Any]) -> int:
    millis = _resolve_ms(values, ("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
                         ("log.retention.hours", _HOUR_MS))
    return -1 if millis < 0 else millis      # Kafka: any negative setting means unlimited


def _node_id(values: Mapping[str, Any]) -> int:
    node_id, broker_id = values["node.id"], values["broker.id"]
    if node_id is not None and broker_id is not None and node_id != broker_id:
        raise invalid("broker.id", broker_id, f"must equal node.id ({node_id}) when both are set")
    chosen = node_id if node_id is not None else broker_id
    if chosen is None:
        return 1      # kwire: Kafka requires node.id; a single node can just be 1
    if chosen < 0:
        raise invalid("node.id" if node_id is not None else "broker.id", chosen, "Value must be at least 0")
    return chosen


def _log_dirs(values: Mapping[str, Any]) -> tuple[str, ...]:
    dirs = values["log.dirs"] if values["log.dirs"] is not None else (values["log.dir"],)
    dirs = tuple(d for d in dirs if d)
    if not dirs:
        raise invalid("log.dirs", "", "at least one log directory is required")
    return dirs


def broker_config_from_text(text: str, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """``parse_properties`` then ``broker_config_from_properties``; raises ConfigError."""
    return broker_config_from_properties(parse_properties(text), overrides)


def load_broker_config(path: str | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """Read ``path`` (None = no file, all defaults) and apply ``overrides``.

    The only function here that does I/O.  Raises OSError if the file cannot be
    read and ConfigError if a value is invalid.
    """
    text = ""
    if path is not None:
        with open(path, encoding="latin-1") as f:    # Properties.load(InputStream) reads ISO-8859-1
            text = f.read()
    return broker_config_from_text(text, overrides)
