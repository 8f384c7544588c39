"""``Broker``: one kwire node, the state every connection shares.

It owns the configuration, the clock and the partition logs (``kwire.log.manager``), and
builds the services the handlers use: group, transaction and share-group coordinators,
the log cleaner, fetch sessions, ACLs and SCRAM credentials (a file in the first log
directory on a single node; ZooKeeper through ``kwire.cluster`` when ``zookeeper.connect``
is set, with the ``ClusterNode`` in ``cluster``), metrics and the request log.  What differs
between one node and a cluster sits behind interfaces chosen here, once: ``partitions``
(kwire.services.partitions), ``topology`` (kwire.services.topology), ``topic_admin``
(kwire.services.topic_admin), ``acls`` and ``scram``, and for share groups where their state
and their groups' configs live (``shares.states``, ``shares.group_configs.store``).  It also
holds the wake-ups of parked fetches (``notify_*``, ``wait_appended``) and the
housekeeping task (retention, time-based flushes, one scrub of closed segments).
Everything runs on the Trio thread.
"""
from __future__ import annotations

import dataclasses
import logging

import trio

from kwire.admin.broker_config import BrokerConfig, ConfigError
from kwire.admin.topic_config import effective_log_config
from kwire.codecs.errors import KafkaApiError
from kwire.log.manager import LogManager

from kwire.security.acl_store import AclService
from kwire.security.listeners import ListenerContext, listener_context
from kwire.runtime.blocking import run_blocking
from kwire.services.broker_configs import BrokerConfigService, FileBrokerConfigStore
from kwire.services.features import FeatureService, FileFeatureStore
from kwire.services.client_metrics import ClientMetricsService, FileClientMetricsConfigStore
from kwire.services.cleaner import CleanerService
from kwire.services.log_dirs import LogDirMover
from kwire.runtime.clock import Clock, WallClock
from kwire.services.fetch_sessions import FetchSessionCache
from kwire.metrics.counters import BrokerMetrics
from kwire.server.request_log import RequestLog
from kwire.security.scram_store import ScramService
from kwire.services.group_configs import FileGroupConfigStore
from kwire.services.groups import GroupService
from kwire.services.partitions import LocalPartitions
from kwire.services.quotas import QuotaService
from kwire.services.topic_admin import LocalTopicAdmin
from kwire.services.topology import LocalTopology
from kwire.services.share_state import LocalShareStates
from kwire.services.shares import ShareService
from kwire.services.transactions import TransactionService

logger = logging.getLogger("kwire")


@dataclasses.dataclass
class Endpoint:
    host: str
    port: int


class Broker:
    """One kwire node.  All mutation happens on the Trio thread."""

    def __init__(self, config: BrokerConfig, clock: Clock | None = None):
        """``clock`` gives ``now_ms()`` (default the wall clock; tests pass ``kwire.runtime.clock.TrioClock``)."""
        self.config = config
        self.clock = clock or WallClock()
        self.node_id = config.node_id
        # a topic's LogConfig: its overrides over the broker's defaults in force (dynamic ones too)
        # a cluster broker holds files only for the partitions it replicates (kwire.log.manager)
        self.logs = LogManager(config.log_dirs, lambda overrides: effective_log_config(self.config, overrides),
                               node_id=config.node_id, cluster_id=config.cluster_id,
                               sparse=bool(config.value_of("zookeeper.connect")))
        self.advertised: Endpoint | None = None          # the first listener's
        self.listener_contexts: dict[str, ListenerContext] = {}   # by name: TLS, SASL (as bound)
        self.endpoints: dict[str, Endpoint] = {}          # advertised, by listener name
        # parked fetches: consumers' read up to the high watermark, followers' to the log end
        self._fetch_waiters: dict[tuple[str, int], set[trio.Event]] = {}
        self._replica_waiters: dict[tuple[str, int], set[trio.Event]] = {}
        self.connections = 0
        # prometheus.listener: the request path's counters (kwire.metrics.counters); None, they cost nothing
        self.metrics = BrokerMetrics() if config.value_of("prometheus.listener") else None
        self.metrics_endpoint: tuple[str, int] | None = None      # (host, port) serving /metrics
        # schema.registry.listeners: the Schema Registry (kwire.schemas.service); None serves none
        self.schema_registry = None
        if config.value_of("schema.registry.listeners"):
            from kwire.schemas.service import SchemaRegistryService     # its ASGI stack only when asked for
            self.schema_registry = SchemaRegistryService(self)
        self.request_log = RequestLog() if config.value_of("log.request.debug") else None
        self.fetch_sessions = FetchSessionCache(config.value_of("max.incremental.fetch.session.cache.slots"))
        self.groups = GroupService(config, self.logs, self.clock)
        self.transactions = TransactionService(config, self.logs, self.clock, self.groups, self.notify_appended)
        self.cleaner = CleanerService(config, self.logs, self.clock)
        self.log_dir_mover = LogDirMover(self)          # AlterReplicaLogDirs
        self.shares = ShareService(config, self.logs, self.clock)       # share groups (KIP-932)
        self.shares.attach_groups(self.groups)           # their records go to __consumer_offsets
        # Chosen once, here: every part that differs between one node and a cluster
        # (partitions, topology, topic administration, ACL and SCRAM stores, share-partition
        # state and group configs) is built for the mode this broker runs in; handlers and
        # coordinators only ever call them.
        if config.value_of("zookeeper.connect"):
            self._build_cluster(config)
        else:
            self._build_single_node(config)
        for service in (self.groups, self.transactions):
            service.partitions, service.topic_admin = self.partitions, self.topic_admin
        self.transactions.topology = self.topology

    def _build_single_node(self, config: BrokerConfig) -> None:
        self.cluster = None
        self.partitions = LocalPartitions(self)        # kwire.services.partitions
        self.topology = LocalTopology(self)            # kwire.services.topology: this node alone
        self.topic_admin = LocalTopicAdmin(self)        # kwire.services.topic_admin
        # share-partition state: the share coordinator's memory, appended to __share_group_state
        self.shares.attach_states(LocalShareStates(config, self.logs, self.clock, self.shares.coordinator),
                                  FileGroupConfigStore(config.log_dirs[0]))
        self.acls = AclService(config, config.log_dirs[0])
        self.scram = ScramService(config.log_dirs[0])      # SCRAM credentials (single node: a file)
        self.quotas = QuotaService(config, config.log_dirs[0])   # client quotas (single node: a file)
        self.broker_configs = BrokerConfigService(self, FileBrokerConfigStore(config.log_dirs[0]))
        # finalized feature levels (broker.features.level(name)): a file in the data dir
        self.features = FeatureService(config.node_id, FileFeatureStore(config.log_dirs[0]))
        # client telemetry subscriptions (KIP-714): a file, like the group configs
        self.client_metrics = ClientMetricsService(config, FileClientMetricsConfigStore(config.log_dirs[0]),
                                                   self.clock)

    def _build_cluster(self, config: BrokerConfig) -> None:
        from kwire.cluster.acl_store import ZkAclService
        from kwire.cluster.broker_configs import ZkBrokerConfigStore
        from kwire.cluster.group_configs import ZkGroupConfigStore
        from kwire.cluster.node import ClusterNode   # kazoo is imported only in cluster mode
        from kwire.cluster.partitions import ReplicatedPartitions
        from kwire.cluster.scram_store import ZkScramService
        from kwire.cluster.share_states import PersistedShareStates
        from kwire.cluster.topic_admin import ZkTopicAdmin
        from kwire.cluster.topology import ClusterTopology
        self.cluster = ClusterNode(self)
        self.partitions = ReplicatedPartitions(self, self.cluster)
        self.topology = ClusterTopology(self, self.cluster)
        self.topic_admin = ZkTopicAdmin(self, self.cluster)
        # share-partition state through the share coordinators; group configs in ZooKeeper
        states = PersistedShareStates(self, self.shares, self.partitions)
        self.shares.attach_states(states, ZkGroupConfigStore(self.cluster.zk))
        self.shares.store = states.store       # served to the other brokers' persisters
        self.acls = ZkAclService(config, self.cluster.zk)   # a cluster's ACLs are in ZooKeeper, no file
        self.broker_configs = BrokerConfigService(self, ZkBrokerConfigStore(self.cluster.zk))
        from kwire.cluster.features import ZkFeatureStore       # finalized feature levels: /feature
        self.features = FeatureService(config.node_id, ZkFeatureStore(self.cluster))
        from kwire.cluster.client_metrics import ZkClientMetricsConfigStore     # /config/client-metrics
        self.client_metrics = ClientMetricsService(config, ZkClientMetricsConfigStore(self.cluster.zk), self.clock)
        # a cluster's users are in ZooKeeper (/config/users), loaded by ClusterNode.run
        self.scram = ZkScramService(self.cluster.zk, config.value_of("zookeeper.session.timeout.ms") / 1000,
                                    log_dir=config.log_dirs[0])
        from kwire.cluster.quota_store import ZkQuotaService      # client quotas: ZooKeeper, like the users
        self.quotas = ZkQuotaService(config, self.cluster.zk, config.value_of("zookeeper.session.timeout.ms") / 1000)

    @property
    def cluster_id(self) -> str:
        return self.logs.cluster_id

    def open(self) -> None:
        self.broker_configs.load()          # before the logs: their topic defaults may be dynamic
        self.features.load()
        self.logs.open(self.clock.now_ms())
        self.acls.load()
        self.scram.load()
        self.quotas.load()
        self.client_metrics.load()
        if self.cluster is None:
            self.groups.replay()     # a cluster loads groups as it leads their offsets partitions
            self.transactions.load()
            self.shares.replay()

    def reconfigure(self, config: BrokerConfig) -> None:
        """Put ``config`` (new dynamic broker configs) in force: every partition re-reads the
        broker's defaults of its topic configs, the cleaner its limits, each TLS listener its
        stores (for the connections it accepts from now on); the rest reads ``self.config`` as
        it goes."""
        self.config = config
        self.logs.refresh_configs()
        self.cleaner.reconfigure(config)
        try:
            self.listener_contexts.update(self.tls_contexts(config))
        except ConfigError as exc:          # checked before an alter was kept: a file changed since
            logger.error("TLS listeners keep the key and trust stores they had: %s", exc)

    def tls_contexts(self, config: BrokerConfig) -> dict[str, ListenerContext]:
        """The contexts of the bound TLS listeners as ``config`` has them.  Reads the stores;
        raises ConfigError naming the key."""
        scram = getattr(self.scram, "store", None)
        return {listener.name: listener_context(config, listener, scram) for listener in config.listeners
                if listener.name in self.listener_contexts and self.listener_contexts[listener.name].tls}

    def check_listeners(self, config: BrokerConfig) -> None:
        """Raises ConfigError if a TLS listener cannot load its stores under ``config``."""
        self.tls_contexts(config)

    def endpoint_for(self, listener: str) -> Endpoint:
        """The advertised endpoint of ``listener`` (the first listener's if it has none)."""
        return self.endpoints.get(listener) or self.advertised

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        self.logs.close()

    def groups_follow_leadership(self, cluster) -> None:
        """Cluster mode: the group coordinator serves the groups whose __consumer_offsets
        partition this broker leads, the transaction coordinator the ids whose
        __transaction_state partition it leads."""
        from kwire.groups.internal_topics import OFFSETS_TOPIC
        from kwire.services.transactions import TRANSACTION_STATE_TOPIC
        self.groups.follow_leadership({p for (t, p) in cluster.replicas.leaders if t == OFFSETS_TOPIC})
        # the transaction coordinator likewise follows __transaction_state (after the groups:
        # markers it writes again may complete transactional offsets)
        self.transactions.cluster = cluster
        self.transactions.follow_leadership({p: state.leader_epoch for (t, p), state in cluster.replicas.leaders.items()
                                             if t == TRANSACTION_STATE_TOPIC})
        # share groups: after the groups (it drops the share groups of offsets partitions lost)
        snapshot = cluster.snapshot
        self.shares.follow_leadership(set(cluster.replicas.leaders),
                                      snapshot.group_configs if snapshot is not None else None)

    # -- wake-ups for long-polling fetches ------------------------------------
    def notify_appended(self, partitions) -> None:
        """Wake every fetch parked on any of ``partitions`` ((topic, partition) pairs)."""
        self.notify_committed(partitions)
        self.notify_log_end(partitions)

    def notify_committed(self, partitions) -> None:
        """The high watermark or last stable offset moved: wake the consumers' fetches.  A
        follower reads to the log end and learns the high watermark with its next fetch, as
        in Kafka, so waking it here would only build an empty response and park it again."""
        _wake(self._fetch_waiters, partitions)

    def notify_log_end(self, partitions) -> None:
        """The log end moved but not (yet) the high watermark (a replicated append): wake the
        followers' fetches."""
        _wake(self._replica_waiters, partitions)

    async def wait_appended(self, partitions, deadline: float, replica: bool = False) -> None:
        """Return when ``partitions`` move (their high watermark; their log end for a
        ``replica``) or at ``deadline`` (trio clock)."""
        registry = self._replica_waiters if replica else self._fetch_waiters
        event = trio.Event()
        for tp in partitions:
            registry.setdefault(tp, set()).add(event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            for tp in partitions:
                waiters = registry.get(tp)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del registry[tp]

    # -- background work --------------------------------------------------------
    async def run_housekeeping(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Retention every log.retention.check.interval.ms; time-based flushes every second;
        one scrub of every closed segment after start (kwire.log.health)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.scrub_closed_segments)
            task_status.started()
            await self._housekeeping_loop()

    async def scrub_closed_segments(self) -> None:
        """Check every stored batch of closed segments once; damage takes only its partition
        offline.  Abandoned at shutdown (the scrub reads with descriptors of its own)."""
        for _topic, plog in list(self.logs.all_partitions()):
            await run_blocking(plog.scrub, abandon_on_cancel=True)

    async def _housekeeping_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        next_retention = trio.current_time() + interval
        while True:
            await trio.sleep(min(1.0, interval))
            now = self.clock.now_ms()
            for _topic, plog in list(self.logs.all_partitions()):
                if plog.flush_due(now):
                    try:
                        await run_blocking(plog.flush, now)
                    except KafkaApiError:
                        pass   # logged, and the partition taken offline, by the log
            if trio.current_time() >= next_retention:
                next_retention = trio.current_time() + interval
                self.apply_retention()

    def apply_retention(self) -> int:
        deleted = 0
        now = self.clock.now_ms()
        for topic, plog in list(self.logs.all_partitions()):
            if "delete" in plog.config.cleanup_policy:
                deleted += plog.apply_retention(now)
        if deleted:
            logger.info("retention deleted %d segment(s)", deleted)
        return deleted


def _wake(registry: dict, partitions) -> None:
    for tp in partitions:
        for event in registry.pop(tp, ()):
            event.set()
