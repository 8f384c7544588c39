"""Cluster mode: this broker as a member of a ZooKeeper-coordinated cluster.

Level-triggered, as Kafka's controller and brokers reconcile: every change a
watch reports makes the node read the whole cluster state again
(``ZooKeeperClient.read_snapshot``) and reconcile with it:

* every broker materializes the topics of the snapshot locally (with the
  cluster's topic ids), leads the partitions whose state names it leader and
  follows the others it replicates (``kwire.cluster.fetcher``);
* the broker holding ``/controller`` also runs the controller
  (``kwire.admin.controller``): it elects leaders when brokers come and go,
  initialises new partitions, finishes deletions, moves leadership off
  brokers in controlled shutdown and, with ``auto.leader.rebalance.enable``,
  back to preferred replicas.  Its writes are fenced by /controller_epoch.

ZooKeeper calls run in worker threads; ZooKeeper's callbacks reach Trio
through ``trio_token.run_sync_soon`` and set one event (``_dirty``).

The broker registers every advertised listener in ``/brokers/ids/<id>``; brokers
reach each other through the endpoint of the inter-broker listener
(``inter.broker.listener.name``) that the other registered, with that
listener's TLS and SASL (kwire.security.peer): ``open_peer`` is the one way the
fetchers and the transaction coordinator connect to another broker.
"""
from __future__ import annotations

import dataclasses
import logging
import os

import trio

from kwire.admin import zk_layout as layout
from kwire.admin.assignment import assign_replicas
from kwire.admin.controller import ClusterView, Controller
from kwire.groups.internal_topics import INTERNAL_TOPICS, InternalTopic
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.runtime import blocking
from kwire.cluster import features, reassignment
from kwire.cluster.fetcher import ReplicaFetcher, fetcher_id
from kwire.transport.peer import PeerConnection, PeerError
from kwire.security.peer import PeerConnector
from kwire.cluster.replication import IsrWriteUnknown, ReplicaManager
from kwire.cluster.throttles import ReplicationThrottles
from kwire.cluster.zk import (BrokerIdInUse, ZooKeeperClient, ZooKeeperUnavailable,  # noqa: F401
                 post_to_trio)

logger = logging.getLogger("kwire.cluster")
PRODUCER_ID_BLOCK_SIZE = 1000      # Kafka's ProducerIdsBlock size


class ClusterIdMismatch(Exception):
    """meta.properties names another cluster than ZooKeeper's /cluster/id."""


class ClusterNode:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.node_id = broker.node_id
        session_ms = config.value_of("zookeeper.session.timeout.ms")
        self.zk = ZooKeeperClient(config.value_of("zookeeper.connect"), session_ms,
                                  config.value_of("zookeeper.connection.timeout.ms") or session_ms,
                                  self._changed_threadsafe, self._session_threadsafe)
        self.replicas = ReplicaManager(self.node_id, config, broker.clock, broker.notify_appended,
                                       broker.notify_committed, self._write_isr)
        self.peers = PeerConnector.from_config(config)     # ConfigError: a bad store or login
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}   # by (leader, fetcher id)
        self.throttles = ReplicationThrottles(self.node_id, config)
        self.snapshot = None
        self.controller: Controller | None = None
        self.controller_epoch_version = -1
        self._token = None
        self._dirty = trio.Event()
        self._reregister = False
        self.changed = trio.Event()          # set after every reconciliation
        self._nursery = None
        self._producer_ids = iter(())
        self._producer_id_lock = trio.Lock()

    # -- callbacks from kazoo's thread ----------------------------------------------------
    def _changed_threadsafe(self) -> None:
        self._post(self._dirty.set)

    def _session_threadsafe(self, state: str) -> None:
        self._post(lambda: self._on_session(state))

    def _post(self, fn) -> None:
        post_to_trio(self._token, fn)

    def _on_session(self, state: str) -> None:
        logger.info("ZooKeeper session %s", state)
        if state == "lost":
            self._reregister = True
            self.controller = None
        elif state == "connected":
            self._dirty.set()

    # -- start ------------------------------------------------------------------------------
    async def connect(self) -> None:
        """Before the logs open: reach ZooKeeper and settle the cluster id.  Raises
        ZooKeeperUnavailable or ClusterIdMismatch (the broker then refuses to start)."""
        self._token = trio.lowlevel.current_trio_token()
        logger.info("connecting to ZooKeeper at %s", self.zk.connect)
        await blocking.run_detached(self.zk.start)
        await blocking.run_detached(self.zk.ensure_paths)
        await features.create_default(self.zk)        # /feature, by the first broker to connect
        local = _local_cluster_ids(self.broker.logs.log_dirs)
        proposed = self.broker.config.cluster_id or next(iter(local), None) or _new_cluster_id()
        cluster_id = await blocking.run_detached(self.zk.cluster_id, proposed)
        other = [c for c in local if c != cluster_id]
        if other:
            raise ClusterIdMismatch(f"the cluster id {other[0]} in meta.properties does not match the "
                                    f"cluster id {cluster_id} stored in ZooKeeper")
        self.broker.logs.cluster_id = cluster_id

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Register, reconcile once, then keep reconciling; ``started`` once this broker is
        registered and has applied the cluster's state.  Raises BrokerIdInUse."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.broker.acls.run)      # every ACL loaded before this broker serves
            await nursery.start(self.broker.scram.run)     # SCRAM users, before any login
            await nursery.start(self.broker.quotas.run)    # client quotas, before serving
            await self._register()
            await self.reconcile()
            nursery.start_soon(self.replicas.run_isr_maintenance)
            nursery.start_soon(self._rebalance_loop)
            task_status.started()
            while True:
                await self._dirty.wait()
                self._dirty = trio.Event()
                try:
                    if self._reregister:
                        await self._register()
                    await self.reconcile()
                except Exception as exc:     # ZooKeeper unreachable for now: read again later
                    logger.warning("cluster state not refreshed: %r; retrying", exc)
                    await trio.sleep(0.5)
                    self._dirty.set()

    def registration(self) -> layout.BrokerInfo:
        """This broker's /brokers/ids entry: every advertised listener, at its bound address
        (``broker.endpoints``, filled when the listeners were bound)."""
        endpoints = [dataclasses.replace(listener, host=ep.host, port=ep.port)
                     for listener in self.broker.config.advertised_listeners
                     if (ep := self.broker.endpoints.get(listener.name)) is not None]
        registry = self.broker.schema_registry
        return layout.BrokerInfo.of(self.node_id, endpoints, self.broker.config.value_of("broker.rack"),
                                    self.broker.clock.now_ms(), registry.url if registry is not None else None)

    async def _register(self) -> None:
        info = self.registration()
        session_s = self.broker.config.value_of("zookeeper.session.timeout.ms") / 1000
        deadline = trio.current_time() + session_s + 2
        while True:
            try:
                await blocking.run_detached(self.zk.register_broker, info)
                break
            except BrokerIdInUse as exc:
                # Our own endpoint: this broker's previous process (killed) whose session has
                # not expired yet; wait for ZooKeeper to remove it.  Anything else: refuse.
                if exc.endpoint != (info.host, info.port) or trio.current_time() > deadline:
                    raise
                logger.warning("%s (an earlier run of this broker?); waiting up to %.0f s for its "
                               "ZooKeeper session to expire", exc, session_s)
                await trio.sleep(0.5)
        self._reregister = False
        logger.info("registered broker %d in ZooKeeper at %s", self.node_id,
                    ", ".join(str(ep) for ep in info.endpoints))

    def close(self) -> None:
        self.zk.stop()

    # -- reconciliation ----------------------------------------------------------------------
    async def reconcile(self) -> None:
        snap = await blocking.run_detached(self.zk.read_snapshot)
        if snap.controller_id == -1:
            won = await blocking.run_detached(self.zk.try_become_controller, self.node_id,
                                              self.broker.clock.now_ms())
            if won is not None:
                epoch, self.controller_epoch_version = won
                self.controller = Controller(epoch, unclean_leader_election=self.broker.config.value_of(
                    "unclean.leader.election.enable"))
                logger.info("broker %d is the controller (epoch %d)", self.node_id, epoch)
            snap = await blocking.run_detached(self.zk.read_snapshot)
        if snap.controller_id != self.node_id:
            self.controller = None
        elif self.controller is not None:
            if await self._control(snap):
                snap = await blocking.run_detached(self.zk.read_snapshot)
        self.snapshot = snap
        await self._apply(snap)
        event, self.changed = self.changed, trio.Event()
        event.set()

    def view(self, snap) -> ClusterView:
        return ClusterView(brokers={i: b.rack for i, b in snap.brokers.items()},
                           assignments={t: dict(m.assignment) for t, m in snap.topics.items()
                                        if t not in snap.deleting},
                           states=dict(snap.states), shutting_down=set(snap.shutting_down),
                           reassigning=reassignment.reassigning(snap))

    async def _control(self, snap) -> bool:
        """The controller's work for this snapshot; True when it wrote something."""
        wrote = False
        for name in snap.deleting:
            await blocking.run_detached(self.zk.delete_topic_znodes, name)
            logger.info("controller: deleted topic %s", name)
            wrote = True
        view = self.view(snap)
        writes = self.controller.on_brokers_changed(view) + self.controller.on_topics_changed(view)
        if snap.preferred is not None:
            writes += self.controller.elect_preferred(view, snap.preferred)[0]
        for broker_id in snap.shutting_down:
            writes += self.controller.controlled_shutdown(view, broker_id)
        unique = {}
        for w in writes:
            unique.setdefault((w.topic, w.partition), w)
        if unique:
            await blocking.run_detached(self.zk.write_states, list(unique.values()),
                                        self.controller_epoch_version)
            wrote = True
        if await reassignment.control(self, snap, view, set(unique)):
            wrote = True
        if snap.preferred is not None:     # only once its leaders are written: a failed write retries it
            await blocking.run_detached(self.zk.finish_preferred_election)
            wrote = True
        return wrote

    async def _apply(self, snap) -> None:
        self.broker.broker_configs.apply(snap.broker_configs)     # first: new topics take its defaults
        if (finalized := features.finalized_of(snap.features)) is not None:
            self.broker.features.apply(finalized)                  # /feature: the finalized levels
        self.broker.client_metrics.apply_all(snap.client_metrics)     # KIP-714 subscriptions
        self.throttles.refresh(self.broker.config, snap)
        logs = self.broker.logs
        self.replicas.shutting_down = set(snap.shutting_down)
        self.replicas.live = set(snap.brokers)
        for name in list(logs.topics):
            meta = snap.topics.get(name)
            if meta is None or (meta.topic_id is not None and meta.topic_id != logs.topics[name].topic_id):
                await self._drop_topic(name)
        for name, meta in snap.topics.items():
            await self._materialize(name, meta, snap.configs.get(name, {}))
        wanted_fetch: dict[tuple[int, int], set] = {}
        for (name, p), state in snap.states.items():
            topic = logs.get(name)
            if topic is None or p >= len(topic.partitions):
                continue
            await self._apply_partition((name, p), topic.partitions[p], state,
                                        snap.topics[name].assignment.get(p, ()), wanted_fetch)
        for tp in list(self.replicas.leaders):
            state = snap.states.get(tp)
            if state is None or state.leader != self.node_id:
                self.replicas.stop_leading(tp)
        for source, fetcher in list(self.fetchers.items()):
            for tp in list(fetcher.partitions):
                if tp not in wanted_fetch.get(source, ()):
                    fetcher.forget(tp)
            if not fetcher.partitions:
                fetcher.cancel_scope.cancel()
                del self.fetchers[source]
        # the coordinators first let go of what this broker no longer leads, then its logs go
        self.broker.groups_follow_leadership(self)
        await reassignment.drop_unreplicated(self, snap)

    async def _apply_partition(self, tp, plog, state, replicas, wanted_fetch) -> None:
        # Under the partition's lock: a follower's truncation in a worker thread finishes first,
        # and once this broker leads, no fetcher of the partition may truncate or append.
        async with self.replicas.lock(tp):
            if plog.absent:          # not a replica, or its log could not be created (_materialize)
                self.replicas.stop_leading(tp)
                return
            if state.leader == self.node_id:
                for fetcher in self.fetchers.values():
                    fetcher.forget(tp)
                self.replicas.become_leader(tp, plog, state.leader_epoch, replicas, state.isr,
                                            state.version)
                return
            self.replicas.stop_leading(tp)
        if self.node_id not in replicas:
            return
        plog.enable_replication()
        plog.leader_epoch = state.leader_epoch
        if state.leader < 0:
            return
        # num.replica.fetchers fetchers per leader; a partition moved to another one (the leader
        # or the number changed) is forgotten by the one it leaves first: its in-flight answer
        # is then dropped, and the new fetcher starts by truncating, as a new follower does.
        key = (state.leader, fetcher_id(tp, self.broker.config.value_of("num.replica.fetchers")))
        for other, fetcher in self.fetchers.items():
            if other != key:
                fetcher.forget(tp)
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(
                self.node_id, state.leader, self.open_peer, self.broker.config, self.broker.clock,
                self.replicas.lock, fetcher=key[1], throttle=self.throttles.follower)
            self._nursery.start_soon(fetcher.run)
        fetcher.follow(tp, plog, state.leader_epoch)
        wanted_fetch.setdefault(key, set()).add(tp)

    async def _materialize(self, name: str, meta, configs: dict[str, str]) -> None:
        """The topic known locally, with a log for each partition this broker replicates (the
        others absent, as Kafka's brokers hold only their replicas; ``reassignment.
        drop_unreplicated`` deletes the logs of those it stops replicating)."""
        logs = self.broker.logs
        topic = logs.get(name)
        now = self.broker.clock.now_ms()
        held = {p for p, replicas in meta.assignment.items() if self.node_id in replicas}
        if topic is None:
            await blocking.create_topic(logs, name, len(meta.assignment), configs, now_ms=now,
                                        internal=name in INTERNAL_TOPICS, exist_ok=True,
                                        topic_id=meta.topic_id, held=held)
            return
        if len(meta.assignment) > len(topic.partitions):
            await blocking.add_partitions(logs, name, len(meta.assignment), now_ms=now, held=held)
        if configs != topic.configs:
            await blocking.run_blocking(logs.set_topic_configs, name, configs)
        for p in sorted(held):
            if p < len(topic.partitions) and topic.partitions[p].absent:
                await self._open_replica(topic, p)

    async def _open_replica(self, topic, p: int) -> None:
        """A new, empty log for a partition this broker has just become a replica of (a
        reassignment added it, or its folder was lost): it then copies from the leader.  A
        log that cannot be created (a full disk) is left absent, tried again at the next
        reconciliation."""
        logs = self.broker.logs
        async with self.replicas.lock((topic.name, p)):
            plog = await blocking.run_blocking(logs.open_replica, topic, p, self.broker.clock.now_ms())
            if plog.offline:
                logger.error("%s-%d: cannot create the local replica: %s", topic.name, p,
                             plog.health.offline_reason)
            elif logs.install_replica(topic, p, plog):
                logger.info("%s-%d: created the local replica", topic.name, p)
                return
        await blocking.run_blocking(plog.delete)

    async def _drop_topic(self, name: str) -> None:
        topic = self.broker.logs.get(name)
        for p in range(len(topic.partitions)):
            self.replicas.stop_leading((name, p))
            for fetcher in self.fetchers.values():
                fetcher.forget((name, p))
        await blocking.delete_topic(self.broker.logs, name)
        logger.info("deleted local logs of topic %s", name)

    # -- what other parts of the broker ask ----------------------------------------------------
    async def next_producer_id(self) -> int:
        """A producer id unique in the cluster: blocks of 1000 reserved in ZooKeeper
        (/latest_producer_id_block, as Kafka's brokers do)."""
        async with self._producer_id_lock:
            pid = next(self._producer_ids, None)
            if pid is None:
                start = await blocking.run_detached(self.zk.next_producer_id_block, PRODUCER_ID_BLOCK_SIZE)
                self._producer_ids = iter(range(start, start + PRODUCER_ID_BLOCK_SIZE))
                pid = next(self._producer_ids)
            return pid

    async def open_peer(self, broker_id: int, client_id: str, timeout_s: float) -> PeerConnection:
        """A connection to another broker's inter-broker listener, secured and logged in as that
        listener asks.  Raises PeerError (DEBUG level when the broker is not live)."""
        info = self.snapshot.brokers.get(broker_id) if self.snapshot else None
        if info is None:
            raise PeerError(f"broker {broker_id} is not registered", logging.DEBUG)
        ep = info.endpoint(self.peers.listener)
        if ep is None:
            raise PeerError(f"broker {broker_id} registered no endpoint for the inter-broker listener "
                            f"{self.peers.listener} (it has {', '.join(e.name for e in info.endpoints)})",
                            logging.WARNING)
        return await self.peers.open(ep.host, ep.port, client_id, timeout_s)

    async def _write_isr(self, tp, isr, leader_epoch: int, expected_version: int) -> int | None:
        state = self.snapshot.states.get(tp) if self.snapshot else None
        controller_epoch = state.controller_epoch if state else 0
        new = layout.PartitionState(self.node_id, leader_epoch, tuple(isr), controller_epoch)
        try:
            version = await blocking.run_detached(self.zk.write_isr, tp[0], tp[1], new, expected_version)
        except Exception as exc:
            # Maybe applied, maybe not: the state is read again, which settles it.
            logger.warning("%s-%d: ISR write failed: %r", tp[0], tp[1], exc)
            self._dirty.set()
            raise IsrWriteUnknown(repr(exc)) from None
        if version is None:
            self._dirty.set()
        return version

    async def confirm_leadership(self, tp) -> None:
        """That this broker still leads ``tp`` in the epoch it leads it in, as ZooKeeper says
        now (a read fence: one round trip).  Raises KafkaApiError(NOT_COORDINATOR) otherwise or
        when ZooKeeper cannot be asked; the state is then read again."""
        led = self.replicas.leader(tp)
        try:
            state = await blocking.run_detached(self.zk.read_partition_state, tp[0], tp[1])
        except Exception as exc:
            self._dirty.set()
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR,
                                f"cannot confirm the leadership of {tp[0]}-{tp[1]}: {exc!r}") from None
        if led is None or state is None or (state.leader, state.leader_epoch) != (self.node_id, led.leader_epoch):
            self._dirty.set()
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR,
                                f"this broker no longer leads {tp[0]}-{tp[1]}")

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, str], assignment=None, *, wait_s: float = 10.0) -> None:
        """Write a new topic to ZooKeeper and wait (up to ``wait_s``) until every partition has
        a leader here.  Raises KafkaApiError(TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR,
        REQUEST_TIMED_OUT when ZooKeeper cannot be written now)."""
        import uuid
        brokers = {i: b.rack for i, b in self.snapshot.brokers.items()}
        if assignment is None:
            assignment = assign_replicas(brokers, partitions, replication_factor)
        topic_id = uuid.uuid4()
        try:
            created = await blocking.run_detached(self.zk.create_topic, name, assignment, configs, topic_id)
        except ZooKeeperUnavailable as exc:     # e.g. reconnecting after a partition: retriable
            raise KafkaApiError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from None
        if not created:
            raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        await self.wait_for(lambda s: all(s.states.get((name, p)) is not None and
                                          s.states[(name, p)].leader >= 0 for p in assignment)
                            and self.broker.logs.get(name) is not None, wait_s)

    def schema_registry_url(self, topic: str, partition: int) -> str | None:
        """The Schema Registry URL of the broker leading ``topic``-``partition`` (kwire.schemas:
        the registry's primary), None when it has no leader or serves no registry."""
        state = self.snapshot.states.get((topic, partition)) if self.snapshot else None
        info = self.snapshot.brokers.get(state.leader) if state is not None else None
        return info.schema_registry if info is not None else None

    async def ensure_internal_topic(self, spec: InternalTopic) -> None:
        """Create an internal topic (kwire.groups.internal_topics) on first use, with its
        replication key's replicas (as many as there are live brokers when fewer), compacted."""
        if spec.name in self.snapshot.topics:
            return
        v = self.broker.config.value_of
        try:
            await self.create_topic(spec.name, spec.partitions(v), spec.replication_factor(v, len(self.snapshot.brokers)),
                                    spec.configs(v), wait_s=5.0)
        except KafkaApiError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    async def delete_topic(self, name: str, timeout_s: float) -> None:
        """Mark ``name`` for deletion (/admin/delete_topics) and wait until its local logs are gone."""
        await blocking.run_detached(self.zk.mark_for_deletion, name)
        await self.wait_for(lambda s: name not in s.topics and self.broker.logs.get(name) is None, timeout_s)

    async def add_partitions(self, name: str, total: int, assignments=None, timeout_s: float = 10.0) -> None:
        """CreatePartitions: extend the topic's assignment in ZooKeeper (conditional on its znode
        version) and wait for the new partitions' leaders.  Raises KafkaApiError."""
        meta = self.snapshot.topics.get(name)
        if meta is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        if meta.adding or meta.removing:
            raise KafkaApiError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                f"topic '{name}' has partitions being reassigned")
        current = len(meta.assignment)
        if assignments:
            new = {current + i: tuple(a.broker_ids) for i, a in enumerate(assignments)}
        else:
            rf = len(meta.assignment[0])
            brokers = {i: b.rack for i, b in self.snapshot.brokers.items()}
            new = assign_replicas(brokers, total - current, rf, start_partition=current)
        full = {**meta.assignment, **new}
        if not await blocking.run_detached(self.zk.set_assignment, name, full, meta.topic_id, meta.version):
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS,
                                f"topic '{name}' changed meanwhile; retry")
        await self.wait_for(lambda s: all((name, p) in s.states for p in full)
                            and len(self.broker.logs.get(name).partitions) >= total, timeout_s)

    async def set_topic_configs(self, name: str, configs: dict[str, str], timeout_s: float = 10.0) -> None:
        """AlterConfigs in a cluster: write /config/topics/<t> (every broker watches it) and wait
        until this broker has applied it.  Raises KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION)."""
        if name not in self.snapshot.topics:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        await blocking.run_detached(self.zk.set_topic_config, name, configs)
        await self.wait_for(lambda s: s.configs.get(name) == configs
                            and getattr(self.broker.logs.get(name), "configs", None) == configs, timeout_s)

    async def wait_for(self, predicate, timeout_s: float) -> bool:
        """Wait until ``predicate(snapshot)`` holds after a reconciliation, or ``timeout_s``."""
        with trio.move_on_after(timeout_s):
            while not (self.snapshot is not None and predicate(self.snapshot)):
                self._dirty.set()
                await self.changed.wait()
            return True
        return False

    # -- controlled shutdown and preferred leaders ------------------------------------------
    async def controlled_shutdown(self, timeout_s: float = 10.0) -> None:
        """Ask the controller to move leadership off this broker and wait until it leads
        nothing another in-sync replica could lead (or ``timeout_s``)."""
        await blocking.run_detached(self.zk.request_controlled_shutdown, self.node_id)
        self._dirty.set()

        def done(snap) -> bool:
            return not any(s.leader == self.node_id and len(s.isr) > 1 for s in snap.states.values())
        ok = await self.wait_for(done, timeout_s)
        logger.info("controlled shutdown: %s", "leadership moved away" if ok else "timed out")
        await blocking.run_detached(self.zk.clear_controlled_shutdown, self.node_id)

    async def _rebalance_loop(self) -> None:
        config = self.broker.config
        if not config.value_of("auto.leader.rebalance.enable"):
            return
        while True:
            await trio.sleep(config.value_of("leader.imbalance.check.interval.seconds"))
            if self.controller is not None and self.snapshot is not None:
                await self.elect_preferred(self.controller.imbalanced_partitions(
                    self.view(self.snapshot), config.value_of("leader.imbalance.per.broker.percentage")))

    async def elect_preferred(self, partitions):
        """Controller only: preferred-leader election; {tp: ErrorCode}."""
        writes, results = self.controller.elect_preferred(self.view(self.snapshot), partitions)
        if writes:
            await blocking.run_detached(self.zk.write_states, writes, self.controller_epoch_version)
            self._dirty.set()
        return results

    async def request_preferred_election(self, partitions, timeout_s: float) -> dict:
        """ElectLeaders on any broker: the expected result per partition (computed from the
        current state), the election itself run by the controller through
        /admin/preferred_replica_election; waits until the elected leaders are visible."""
        for _ in range(2):       # a state read after this call began: the ISRs a client just saw
            changed = self.changed
            self._dirty.set()
            with trio.move_on_after(min(timeout_s, 5.0)):
                await changed.wait()
        view = self.view(self.snapshot)
        writes, results = Controller(0).elect_preferred(view, partitions)
        if writes:
            while not await blocking.run_detached(self.zk.request_preferred_election,
                                                  [(w.topic, w.partition) for w in writes]):
                await trio.sleep(0.1)          # another election is pending
            self._dirty.set()
            elected = {(w.topic, w.partition): w.state.leader for w in writes}
            await self.wait_for(lambda s: all(s.states.get(tp) is not None and s.states[tp].leader == leader
                                              for tp, leader in elected.items()), timeout_s)
        return results


def _local_cluster_ids(log_dirs) -> list[str]:
    ids = []
    for d in log_dirs:
        path = os.path.join(d, "meta.properties")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("cluster.id="):
                        ids.append(line.strip().split("=", 1)[1])
    return ids


def _new_cluster_id() -> str:
    import base64
    import uuid
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
