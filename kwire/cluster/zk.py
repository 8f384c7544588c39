"""A broker's ZooKeeper session (kazoo) and the cluster's own znodes.

``ZooKeeperClient`` owns the broker's one ``KazooClient``, so one session: it connects,
registers the broker, elects the controller and reads and writes brokers, topics, partition
states, configs and the admin requests (controlled shutdown, preferred election, producer
id blocks), in Kafka's layout (``kwire.admin.zk_layout``), so ``zkCli.sh`` shows what an
operator of a ZooKeeper-era Kafka cluster expects.  ``kwire.cluster.node`` drives it.

Two other modules call kazoo themselves, on this session's client (``ZooKeeperClient.client``):
``kwire.cluster.acl_store`` (``/kafka-acl*``) and ``kwire.cluster.scram_store``
(``/config/users``, ``/config/changes``).  Each keeps Kafka's rules for its znodes next to
the service that uses them: conditional read-modify-write transactions with their change
notices, retries, notice listeners and purging, and its own session listener.  Nothing else
in kwire imports kazoo (outside ``kwire.testing``).

Every method here blocks (kazoo's synchronous API) and is called from a worker thread;
nothing here touches broker state.  Watches and session changes come back on kazoo's own
thread through two callbacks given at construction: ``on_change()`` (something we read
changed: read again) and ``on_session(state)`` ("connected", "suspended", "lost").  They,
and the two stores' callbacks, reach Trio only through ``post_to_trio``, the one door from
kazoo's threads into broker state.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError

from kwire.admin import zk_layout as layout
from kwire.admin.controller import PartitionState, StateWrite
from kwire.admin.features import FEATURE_ZNODE
from kwire.admin.reassignment import ReplicaAssignment

logger = logging.getLogger("kwire.cluster.zk")
# kwire: a broker asks for a controlled shutdown by creating /admin/controlled_shutdown/<id>
# (Kafka's brokers send the ControlledShutdown RPC to the controller instead).
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"


def post_to_trio(token, fn: Callable[[], None]) -> None:
    """From kazoo's thread: run ``fn()`` soon on the Trio thread of ``token`` (a
    ``trio.lowlevel.TrioToken``), the one way ZooKeeper events reach broker state.  Nothing
    happens when ``token`` is None (not started yet) or its Trio run has finished."""
    try:
        if token is not None:
            token.run_sync_soon(fn)
    except trio.RunFinishedError:
        pass


class ZooKeeperUnavailable(Exception):
    """ZooKeeper could not be reached within zookeeper.connection.timeout.ms."""


class BrokerIdInUse(Exception):
    """Another live broker registered this broker.id; ``endpoint`` is its (host, port)."""

    def __init__(self, message: str, endpoint: tuple[str, int]):
        super().__init__(message)
        self.endpoint = endpoint


@dataclasses.dataclass
class TopicMeta:
    assignment: dict[int, tuple[int, ...]]
    topic_id: object            # uuid.UUID or None (a topic created by an old tool)
    version: int                # znode version, for CreatePartitions
    # a reassignment in progress (KIP-455): replicas being added and removed, by partition
    adding: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def replica_assignment(self, partition: int) -> ReplicaAssignment:
        return ReplicaAssignment(tuple(self.assignment.get(partition, ())), self.adding.get(partition, ()),
                                 self.removing.get(partition, ()))


@dataclasses.dataclass
class Snapshot:
    """Everything a broker reads from ZooKeeper, with watches set on all of it."""
    brokers: dict[int, layout.BrokerInfo]
    controller_id: int
    topics: dict[str, TopicMeta]
    configs: dict[str, dict[str, str]]
    states: dict[tuple[str, int], PartitionState]
    deleting: set[str]
    shutting_down: set[int]             # brokers in controlled shutdown
    preferred: list[tuple[str, int]] | None = None   # a pending /admin/preferred_replica_election
    group_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)   # /config/groups
    # /config/brokers: dynamic broker configs by entity ("" = the cluster default, "<id>")
    broker_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # a pending /admin/reassign_partitions (ZooKeeper-era tools): target replicas by partition
    legacy_reassignments: dict[tuple[str, int], tuple[int, ...]] | None = None
    # /config/client-metrics: client telemetry subscriptions (KIP-714) by name
    client_metrics: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    features: tuple[bytes, int] | None = None   # /feature's (data, version): finalized feature levels


class ZooKeeperClient:
    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int,
                 on_change: Callable[[], None], on_session: Callable[[str], None]):
        self.connect = connect
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                  connection_retry={"max_tries": -1, "max_delay": 1.0},
                                  command_retry={"max_tries": 3, "max_delay": 1.0})
        self._on_change = on_change
        self._on_session = on_session
        self.client.add_listener(self._listener)

    # -- session ---------------------------------------------------------------------------
    def start(self) -> None:
        """Connect, retrying until zookeeper.connection.timeout.ms; raises ZooKeeperUnavailable."""
        deadline = time.monotonic() + self.connection_timeout_s
        attempt = 0
        while True:
            attempt += 1
            try:
                self.client.start(timeout=min(2.0, max(deadline - time.monotonic(), 0.1)))
                return
            except KazooTimeoutError:
                if time.monotonic() >= deadline:
                    self.client.stop()
                    raise ZooKeeperUnavailable(
                        f"ZooKeeper at {self.connect} did not answer within "
                        f"{self.connection_timeout_s:.0f} s (zookeeper.connection.timeout.ms)") from None
                logger.warning("ZooKeeper at %s not reachable yet (attempt %d); retrying",
                               self.connect, attempt)

    def stop(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:           # best effort at shutdown
            logger.debug("closing the ZooKeeper client", exc_info=True)

    def _listener(self, state) -> None:
        name = {KazooState.CONNECTED: "connected", KazooState.SUSPENDED: "suspended",
                KazooState.LOST: "lost"}[state]
        self._on_session(name)

    def _watch(self, _event=None) -> None:
        self._on_change()

    # -- bootstrap ------------------------------------------------------------------------
    def ensure_paths(self) -> None:
        for path in layout.PERSISTENT_PATHS:
            self.client.ensure_path(path)

    def cluster_id(self, proposed: str) -> str:
        """The cluster's id, created from ``proposed`` by the first broker."""
        try:
            self.client.create(layout.CLUSTER_ID, layout.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self.client.get(layout.CLUSTER_ID)
            return layout.decode_cluster_id(data)

    def register_broker(self, info) -> None:
        """Create the ephemeral /brokers/ids/<id>.  Raises BrokerIdInUse naming the other
        broker's endpoint.  A node of this broker's own session is kept; one whose session
        expires between our create and our read (an earlier run, killed) is created again."""
        path = layout.broker_path(info.broker_id)
        while True:
            try:
                self.client.create(path, layout.encode_broker(info), ephemeral=True, makepath=True)
                # A registration is a broker that is up: no request of an earlier run to shut
                # down holds (a persistent marker left by an older kwire, killed mid-shutdown).
                self.clear_controlled_shutdown(info.broker_id)
                return
            except NodeExistsError:
                try:
                    data, stat = self.client.get(path)
                except NoNodeError:
                    continue             # the other session's node expired just now: try again
            if stat.ephemeralOwner == self.client.client_id[0]:
                return
            other = layout.decode_broker(data)
            raise BrokerIdInUse(f"broker.id {info.broker_id} is already registered in ZooKeeper by "
                                f"the broker at {other.host}:{other.port}", (other.host, other.port))

    # -- controller -----------------------------------------------------------------------
    def try_become_controller(self, broker_id: int, now_ms: int) -> tuple[int, int] | None:
        """Create /controller and bump /controller_epoch in ONE multi-op (Kafka's
        registerControllerAndIncrementControllerEpoch): a broker that lost the race, or whose
        session ended meanwhile, can never bump the epoch after the real controller did.
        Returns (epoch, the epoch znode's version), or None when another broker is controller."""
        while True:
            if self.client.exists(layout.CONTROLLER) is not None:
                return None
            try:
                data, stat = self.client.get(layout.CONTROLLER_EPOCH)
                epoch, expected = layout.decode_controller_epoch(data) + 1, stat.version
            except NoNodeError:
                epoch, expected = 1, None
            tx = self.client.transaction()
            tx.create(layout.CONTROLLER, layout.encode_controller(broker_id, now_ms), ephemeral=True)
            if expected is None:
                tx.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch))
            else:
                tx.set_data(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch), version=expected)
            results = tx.commit()
            failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if not failures:
                return epoch, 0 if expected is None else expected + 1
            if isinstance(results[0], NodeExistsError):
                return None              # another broker became controller first
            # the epoch moved or appeared meanwhile (a controller came and went): read again

    # -- reading the cluster --------------------------------------------------------------
    def read_snapshot(self) -> Snapshot:
        """Read brokers, controller, topics, configs, partition states and deletion markers,
        setting a watch on each.  Pipelined with kazoo's async calls."""
        c = self.client
        ids = c.get_children(layout.BROKER_IDS, watch=self._watch)
        names = c.get_children(layout.TOPICS, watch=self._watch)
        deleting = set(c.get_children(layout.DELETE_TOPICS, watch=self._watch))
        c.ensure_path(CONTROLLED_SHUTDOWN)
        shutting_down = {int(i) for i in c.get_children(CONTROLLED_SHUTDOWN, watch=self._watch)}
        brokers = {}
        for i, res in [(i, c.get_async(layout.broker_path(int(i)), watch=self._watch)) for i in ids]:
            data = _result(res)
            if data is not None:
                brokers[int(i)] = layout.decode_broker(data[0])
        controller = _result(c.get_async(layout.CONTROLLER, watch=self._watch)) \
            if c.exists(layout.CONTROLLER, watch=self._watch) else None
        topics, configs = {}, {}
        pending = [(n, c.get_async(layout.topic_path(n), watch=self._watch),
                    c.get_async(layout.config_topic_path(n), watch=self._watch)) for n in names]
        for name, tres, cres in pending:
            tdata, cdata = _result(tres), _result(cres)
            if tdata is None:
                continue
            topic = layout.decode_topic(tdata[0])
            topics[name] = TopicMeta(topic.partitions, topic.topic_id, tdata[1].version,
                                     topic.adding_replicas, topic.removing_replicas)
            configs[name] = layout.decode_topic_config(cdata[0]) if cdata else {}
        reads = [((n, p), c.get_async(layout.partition_state_path(n, p), watch=self._watch))
                 for n, meta in topics.items() for p in meta.assignment]
        states = {}
        missing = []
        for tp, res in reads:
            data = _result(res)
            if data is not None:
                states[tp] = layout.decode_partition_state(data[0], data[1].version)
            else:
                missing.append(tp)
        # A get on a missing znode sets no watch: watch its creation with exists().
        for res in [c.exists_async(layout.partition_state_path(*tp), watch=self._watch) for tp in missing]:
            if res.get() is not None:
                self._on_change()
        controller_id = layout.decode_controller(controller[0]) if controller else -1
        preferred = None
        if c.exists(layout.PREFERRED_ELECTION, watch=self._watch):
            found = _result(c.get_async(layout.PREFERRED_ELECTION, watch=self._watch))
            preferred = layout.decode_preferred_election(found[0]) if found else None
        legacy = None
        if c.exists(layout.REASSIGN_PARTITIONS, watch=self._watch):
            found = _result(c.get_async(layout.REASSIGN_PARTITIONS, watch=self._watch))
            if found is not None:
                try:
                    legacy = layout.decode_reassign_partitions(found[0])
                except layout.ZnodeFormatError as exc:
                    logger.warning("ignoring %s: %s", layout.REASSIGN_PARTITIONS, exc)
        return Snapshot(brokers, controller_id, topics, configs, states, deleting, shutting_down, preferred,
                        self._read_configs(layout.CONFIG_GROUPS, str),
                        self._read_configs(layout.CONFIG_BROKERS, layout.broker_entity), legacy,
                        self._read_configs(layout.CONFIG_CLIENT_METRICS, str), features=self.read_features(watch=True))

    def _read_configs(self, parent: str, entity: Callable[[str], str]) -> dict[str, dict[str, str]]:
        """Every child of ``parent`` as config overrides by ``entity(child)``, watched."""
        c, found = self.client, {}
        if c.exists(parent, watch=self._watch):
            children = c.get_children(parent, watch=self._watch)
            for child, res in [(n, c.get_async(f"{parent}/{n}", watch=self._watch)) for n in children]:
                data = _result(res)
                if data is not None:
                    found[entity(child)] = layout.decode_topic_config(data[0])
        return found

    def request_preferred_election(self, partitions: list[tuple[str, int]]) -> bool:
        """Kafka's ZooKeeper-era request to the controller; False if one is already pending."""
        try:
            self.client.create(layout.PREFERRED_ELECTION, layout.encode_preferred_election(partitions),
                               makepath=True)
            return True
        except NodeExistsError:
            return False

    def finish_preferred_election(self) -> None:
        try:
            self.client.delete(layout.PREFERRED_ELECTION)
        except NoNodeError:
            pass

    # -- writing --------------------------------------------------------------------------
    def write_states(self, writes: list[StateWrite], epoch_version: int) -> int:
        """Apply the controller's writes, each in a transaction that checks /controller_epoch's
        version (a deposed controller cannot write).  Returns how many succeeded."""
        done = 0
        for w in writes:
            path = layout.partition_state_path(w.topic, w.partition)
            tx = self.client.transaction()
            tx.check(layout.CONTROLLER_EPOCH, epoch_version)
            data = layout.encode_partition_state(w.state)
            if w.expected_version < 0:
                self.client.ensure_path(path.rsplit("/", 1)[0])
                tx.create(path, data)
            else:
                tx.set_data(path, data, version=w.expected_version)
            results = tx.commit()
            if any(isinstance(r, Exception) and not isinstance(r, RolledBackError) for r in results):
                logger.info("state write for %s-%d failed: %s", w.topic, w.partition, results)
            else:
                done += 1
        return done

    def write_isr(self, topic: str, partition: int, state: PartitionState, expected_version: int) -> int | None:
        """The leader's conditional ISR update; the new znode version, or None on a lost race.

        A BadVersion can also be this very write, applied before the connection dropped and
        retried by kazoo: the znode is read back and, when it holds exactly ``state``, the
        write counts as done (Kafka's checkLeaderAndIsrZkData).  Raises KazooException or
        KazooTimeoutError when the outcome cannot be known."""
        path = layout.partition_state_path(topic, partition)
        try:
            return self.client.set(path, layout.encode_partition_state(state), version=expected_version).version
        except NoNodeError:
            return None
        except BadVersionError:
            pass
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return None
        found = layout.decode_partition_state(data, stat.version)
        if (found.leader, found.leader_epoch, tuple(found.isr), found.controller_epoch) == \
                (state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch) \
                and stat.version == expected_version + 1:
            logger.info("%s-%d: ISR write found applied on read-back (version %d)", topic, partition,
                        stat.version)
            return stat.version
        return None

    def read_partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """A partition's state as ZooKeeper's leader holds it now (``sync`` first, so this
        server is not behind); None when the znode is gone.  Raises KazooException or
        KazooTimeoutError when ZooKeeper cannot be asked (a session that expired while this
        process was paused included)."""
        path = layout.partition_state_path(topic, partition)
        self.client.sync(path)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return None
        return layout.decode_partition_state(data, stat.version)

    def request_controlled_shutdown(self, broker_id: int) -> None:
        """Ask the controller to move leadership off ``broker_id``: an EPHEMERAL
        /admin/controlled_shutdown/<id>, so a broker killed before it finished (SIGTERM then
        SIGKILL) does not stay "shutting down" after its session ends; Kafka keeps this in
        the controller's memory and forgets it when the registration goes."""
        self.client.ensure_path(CONTROLLED_SHUTDOWN)
        try:
            self.client.create(f"{CONTROLLED_SHUTDOWN}/{broker_id}", ephemeral=True)
        except NodeExistsError:
            pass

    def clear_controlled_shutdown(self, broker_id: int) -> None:
        """Remove /admin/controlled_shutdown/<id> (done, or left by an earlier run of this broker)."""
        try:
            self.client.delete(f"{CONTROLLED_SHUTDOWN}/{broker_id}")
        except NoNodeError:
            pass

    def create_topic(self, name: str, assignment, configs: dict[str, str], topic_id) -> bool:
        """Write /config/topics/<t> then /brokers/topics/<t> (Kafka's order); False if it exists.
        Raises ZooKeeperUnavailable when the session is lost or reconnecting (nothing or only
        the config znode written: a retry finishes the job)."""
        try:
            return self._create_topic(name, assignment, configs, topic_id)
        except (KazooException, KazooTimeoutError) as exc:
            raise ZooKeeperUnavailable(f"creating topic {name}: {type(exc).__name__} {exc}") from None

    def _create_topic(self, name: str, assignment, configs: dict[str, str], topic_id) -> bool:
        if self.client.exists(layout.topic_path(name)):
            return False
        self.client.ensure_path(layout.CONFIG_TOPICS)
        try:
            self.client.create(layout.config_topic_path(name), layout.encode_topic_config(configs))
        except NodeExistsError:
            self.client.set(layout.config_topic_path(name), layout.encode_topic_config(configs))
        try:
            self.client.create(layout.topic_path(name), layout.encode_assignment(assignment, topic_id))
        except NodeExistsError:
            return False
        return True

    def set_assignment(self, name: str, assignment, topic_id, expected_version: int) -> bool:
        try:
            self.client.set(layout.topic_path(name), layout.encode_assignment(assignment, topic_id),
                            version=expected_version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    # -- partition reassignment (KIP-455) -------------------------------------------------
    def write_topic_assignment(self, name: str, meta: TopicMeta, changes: dict[int, ReplicaAssignment]) -> bool:
        """The topic znode with ``changes`` applied to ``meta`` (as read, at its version),
        conditionally; False when the znode changed meanwhile or is gone."""
        try:
            self.client.set(layout.topic_path(name), _topic_data(meta, changes), version=meta.version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    def complete_reassignment(self, name: str, meta: TopicMeta, changes: dict[int, ReplicaAssignment],
                              writes: list[StateWrite], epoch_version: int) -> bool:
        """The controller's completion of reassignments of topic ``name``: the partition states
        (new leader, ISR without the removed replicas) and the topic znode without them, in one
        transaction fenced by /controller_epoch.  False when anything moved meanwhile."""
        tx = self.client.transaction()
        tx.check(layout.CONTROLLER_EPOCH, epoch_version)
        for w in writes:
            tx.set_data(layout.partition_state_path(w.topic, w.partition), layout.encode_partition_state(w.state),
                        version=w.expected_version)
        tx.set_data(layout.topic_path(name), _topic_data(meta, changes), version=meta.version)
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if failed:
            logger.info("completing the reassignment of %s failed: %s", name, failed)
        return not failed

    def set_legacy_reassignments(self, remaining: dict[tuple[str, int], tuple[int, ...]]) -> None:
        """Rewrite ``/admin/reassign_partitions`` with the entries not completed yet, or delete
        it when none is left (Kafka's controller does both as partitions complete)."""
        try:
            if remaining:
                self.client.set(layout.REASSIGN_PARTITIONS, layout.encode_reassign_partitions(remaining))
            else:
                self.client.delete(layout.REASSIGN_PARTITIONS)
        except NoNodeError:
            pass

    def set_topic_config(self, name: str, configs: dict[str, str]) -> None:
        """Write ``/config/topics/<t>`` with a ``/config/changes`` notification naming it, in one
        transaction, as Kafka's AdminZkClient.changeTopicConfig does (kwire's brokers watch the
        config znode itself; the notice is for Kafka's tools and brokers that read the changes)."""
        self._set_config(layout.CONFIG_TOPICS, layout.config_topic_path(name), f"topics/{name}", configs)

    def set_broker_config(self, entity: str, configs: dict[str, str]) -> None:
        """``/config/brokers/<id>`` or ``/config/brokers/<default>`` (entity ``""``), with its
        notice, as AdminZkClient.changeBrokerConfig."""
        path = layout.config_broker_path(entity)
        self._set_config(layout.CONFIG_BROKERS, path, f"brokers/{path.rsplit('/', 1)[1]}", configs)

    def get_broker_config(self, entity: str) -> dict[str, str]:
        """An entity's dynamic broker configs as ZooKeeper holds them now (after a sync)."""
        path = layout.config_broker_path(entity)
        self.client.sync(path)
        try:
            return layout.decode_topic_config(self.client.get(path)[0])
        except NoNodeError:
            return {}

    def _set_config(self, parent: str, path: str, entity_path: str, configs: dict[str, str]) -> None:
        data, notice = layout.encode_topic_config(configs), layout.encode_config_change(entity_path)
        for znode in (parent, layout.CONFIG_CHANGES):
            self.client.ensure_path(znode)
        for attempt in range(3):      # the znode created or deleted meanwhile: look again
            tx = self.client.transaction()
            if self.client.exists(path) is None:
                tx.create(path, data)
            else:
                tx.set_data(path, data)
            tx.create(layout.CONFIG_CHANGE_PREFIX, notice, sequence=True)
            failures = [r for r in tx.commit() if isinstance(r, Exception)]
            if not failures:
                return
            if attempt == 2 or not any(isinstance(r, (NodeExistsError, NoNodeError)) for r in failures):
                raise failures[0]

    def set_group_config(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's configs (none: its znode goes)."""
        self.set_entity_config("groups", group_id, configs)

    def set_entity_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Replace ``/config/<entity_type>/<name>`` (none: the znode goes), as set_group_config."""
        parent = f"{layout.CONFIG}/{entity_type}"
        path = f"{parent}/{name}"
        self.client.ensure_path(parent)
        if not configs:
            try:
                self.client.delete(path)
            except NoNodeError:
                pass
            return
        try:
            self.client.set(path, layout.encode_topic_config(configs))
        except NoNodeError:
            self.client.create(path, layout.encode_topic_config(configs))

    def get_group_config(self, group_id: str) -> dict[str, str]:
        """A group's configs as ZooKeeper holds them now (after a sync, so a change another
        broker wrote and acknowledged is seen even before this broker's watch fires)."""
        path = layout.config_group_path(group_id)
        self.client.sync(path)
        try:
            return layout.decode_topic_config(self.client.get(path)[0])
        except NoNodeError:
            return {}

    def read_features(self, watch: bool = False) -> tuple[bytes, int] | None:
        """/feature's (data, version), watched or else after a sync; None if absent."""
        if not watch:
            self.client.sync(FEATURE_ZNODE)
        found = _result(self.client.get_async(FEATURE_ZNODE, watch=self._watch if watch else None))
        return (found[0], found[1].version) if found else None

    def write_features(self, data: bytes, expected_version: int) -> int | None:
        """Replace /feature if its version is still ``expected_version`` (-1: create it if
        absent); its new version, or None when another write came first."""
        try:
            if expected_version < 0:
                self.client.create(FEATURE_ZNODE, data)
                return 0
            return self.client.set(FEATURE_ZNODE, data, version=expected_version).version
        except (NodeExistsError, BadVersionError, NoNodeError):
            return None

    def mark_for_deletion(self, name: str) -> None:
        try:
            self.client.create(layout.delete_topic_path(name), makepath=True)
        except NodeExistsError:
            pass

    def delete_topic_znodes(self, name: str) -> None:
        """The controller's last step of a deletion: the topic, its config, then the marker."""
        for path in (layout.topic_path(name), layout.config_topic_path(name), layout.delete_topic_path(name)):
            try:
                self.client.delete(path, recursive=True)
            except NoNodeError:
                pass

    def next_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids cluster-wide (Kafka's /latest_producer_id_block)."""
        path = layout.PRODUCER_ID_BLOCK
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                try:
                    self.client.create(path, layout.encode_producer_id_block(0, size), makepath=True)
                    return 0
                except NodeExistsError:
                    continue
            start = layout.decode_producer_id_block_end(data) + 1 if data else 0
            try:
                self.client.set(path, layout.encode_producer_id_block(start, size), version=stat.version)
                return start
            except BadVersionError:
                continue


def _result(res):
    """(data, stat) of an async get, or None when the node is gone."""
    try:
        return res.get()
    except NoNodeError:
        return None


def _topic_data(meta: TopicMeta, changes: dict[int, ReplicaAssignment]) -> bytes:
    """The topic znode's bytes for ``meta`` with ``changes`` applied."""
    assignment, adding, removing = dict(meta.assignment), dict(meta.adding), dict(meta.removing)
    for p, a in changes.items():
        assignment[p] = a.replicas
        adding.pop(p, None)
        removing.pop(p, None)
        if a.adding:
            adding[p] = a.adding
        if a.removing:
            removing[p] = a.removing
    return layout.encode_assignment(assignment, meta.topic_id, adding_replicas=adding, removing_replicas=removing)
