"""The cluster's view (``kwire.services.topology.Topology``) of a ZooKeeper cluster broker:
brokers, controller, leaders and coordinators as the last snapshot reconciled by its
``ClusterNode`` (``kwire.cluster.node``) says.

Brokers are answered with their endpoint of the listener the request came through, as
Kafka's metadata cache does: a live broker that registered no such listener is left out of
the broker list, and a partition it leads answers LISTENER_NOT_FOUND (Metadata v6+;
LEADER_NOT_AVAILABLE before) with no leader.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode
from kwire.groups.coordinator import partition_for
from kwire.groups.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from kwire.groups.txn_coordinator import TxnDescription

from kwire.services.topology import LocalTopology, this_broker_entries
from kwire.transport.peer import PeerError

GROUP_KEY = 0
VERIFY_TIMEOUT_S = 5.0        # asking another broker's transaction coordinator (Kafka: request.timeout.ms)


def broker_entries(ctx) -> tuple[list[dict], int]:
    """(live brokers, controller id): the cluster's live brokers with an endpoint for the
    listener of the request (those without one are left out, as in Kafka); this node alone
    before the first snapshot."""
    snap = ctx.broker.cluster.snapshot
    if snap is None:
        return this_broker_entries(ctx)
    return [{"node_id": i, "host": ep.host, "port": ep.port, "rack": b.rack}
            for i, b in sorted(snap.brokers.items()) if (ep := b.endpoint(ctx.listener)) is not None], \
        snap.controller_id


def partition_entries(ctx, topic) -> list[dict]:
    return cluster_partition_entries(ctx.broker.cluster.snapshot, topic, ctx.listener,
                                     listener_not_found=ctx.api_key == 3 and ctx.api_version >= 6)


def cluster_partition_entries(snap, topic, listener: str = "PLAINTEXT", *,
                              listener_not_found: bool = True) -> list[dict]:
    """Leader, epoch, replicas, ISR and offline replicas as ZooKeeper says.

    A leader that is not among the live brokers (its session expired and the controller has
    not elected another yet) is answered as Kafka's metadata cache does: LEADER_NOT_AVAILABLE
    with no leader id, never an id missing from the response's broker list (kafka-python's
    producer thread fails on every send to such a node until its next metadata).  A live
    leader without an endpoint for ``listener`` is left out of the broker list too: its
    partitions answer LISTENER_NOT_FOUND (``listener_not_found``, Metadata v6+) or
    LEADER_NOT_AVAILABLE."""
    meta = snap.topics.get(topic.name) if snap else None
    entries = []
    for i in range(len(topic.partitions)):
        replicas = list(meta.assignment.get(i, ())) if meta else []
        state = snap.states.get((topic.name, i)) if snap else None
        offline = [r for r in replicas if r not in snap.brokers] if snap else []
        leader = snap.brokers.get(state.leader) if state is not None and snap else None
        if leader is None or leader.endpoint(listener) is None:
            missing = leader is not None and listener_not_found
            entries.append({"error_code": int(ErrorCode.LISTENER_NOT_FOUND if missing
                                              else ErrorCode.LEADER_NOT_AVAILABLE), "partition_index": i,
                            "leader_id": -1, "leader_epoch": state.leader_epoch if state else -1,
                            "replica_nodes": replicas, "isr_nodes": list(state.isr) if state else [],
                            "offline_replicas": offline})
            continue
        entries.append({"error_code": 0, "partition_index": i, "leader_id": state.leader,
                        "leader_epoch": state.leader_epoch, "replica_nodes": replicas,
                        "isr_nodes": list(state.isr), "offline_replicas": offline})
    return entries


def cluster_coordinator_entry(ctx, key: str, key_type: int = GROUP_KEY) -> dict:
    """The leader of the group's __consumer_offsets partition coordinates it, the leader of
    the transactional id's __transaction_state partition the id (Kafka's rule)."""
    topic = OFFSETS_TOPIC if key_type == GROUP_KEY else TRANSACTION_STATE_TOPIC
    snap = ctx.broker.cluster.snapshot
    meta = snap.topics.get(topic)
    state = None
    if meta is not None:
        state = snap.states.get((topic, ctx.broker.groups.coordinator.partition_for(key, len(meta.assignment))))
    broker = snap.brokers.get(state.leader) if state is not None else None
    ep = broker.endpoint(ctx.listener) if broker is not None else None
    if ep is None:      # no leader, or (Kafka's getAliveBrokerNode) none reachable through this listener
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "error_message": None}
    return {"key": key, "node_id": state.leader, "host": ep.host, "port": ep.port,
            "error_code": 0, "error_message": None}


class ClusterTopology:
    """The view of a ClusterNode; every answer from its current snapshot."""

    def __init__(self, broker, cluster):
        self.broker = broker
        self.cluster = cluster
        self._local = LocalTopology(broker)      # what this node's own logs say

    def broker_entries(self, ctx) -> tuple[list[dict], int]:
        return broker_entries(ctx)

    def partition_entries(self, ctx, topic) -> list[dict]:
        return partition_entries(ctx, topic)

    def coordinator_entry(self, ctx, key: str, key_type: int) -> dict:
        return cluster_coordinator_entry(ctx, key, key_type)

    def leader_of(self, topic, partition: int) -> tuple[int, int]:
        """The partition's leader now, as the cluster's metadata says."""
        snap = self.cluster.snapshot
        state = snap.states.get((topic.name, partition)) if topic and snap else None
        if state is None:
            return -1, -1
        return state.leader, state.leader_epoch

    def leader_id(self, topic: str, partition: int) -> int | None:
        snap = self.cluster.snapshot
        if snap is None or topic not in snap.topics:
            return None
        state = snap.states.get((topic, partition))
        return -1 if state is None or state.leader < 0 else state.leader

    def topic_exists(self, name: str) -> bool:
        snap = self.cluster.snapshot
        return snap is not None and name in snap.topics

    def replica_error(self, topic: str, partition: int, plog) -> ErrorCode | None:
        # only a replica's log holds producer state
        replicas = self.cluster.snapshot.topics[topic].assignment.get(partition)
        if replicas is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if plog is None or plog.absent or self.cluster.node_id not in replicas:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def topic_configs(self, name: str) -> dict:
        snap = self.cluster.snapshot
        if snap is not None and name in snap.topics:
            return dict(snap.configs.get(name, {}))
        return self._local.topic_configs(name)

    async def next_producer_id(self) -> int:
        return await self.cluster.next_producer_id()

    def _coordinator_of(self, transactional_id: str) -> tuple[int | None, ErrorCode]:
        """(the broker leading the id's ``__transaction_state`` partition, NONE), or (None, why
        not: COORDINATOR_NOT_AVAILABLE, or COORDINATOR_LOAD_IN_PROGRESS when it is this one)."""
        snap = self.cluster.snapshot
        meta = snap.topics.get(TRANSACTION_STATE_TOPIC) if snap is not None else None
        state = None
        if meta is not None:
            state = snap.states.get((TRANSACTION_STATE_TOPIC, partition_for(transactional_id, len(meta.assignment))))
        if state is None or state.leader not in snap.brokers:
            return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if state.leader == self.cluster.node_id:     # this broker's coordinator answered already (loading)
            return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return state.leader, ErrorCode.NONE

    async def add_partitions_elsewhere(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                       partitions) -> ErrorCode:
        """AddPartitionsToTxn v5 (not verify-only) of one transaction at its coordinator."""
        leader, error = self._coordinator_of(transactional_id)
        if leader is None:
            return error
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        cluster = self.cluster
        try:
            conn = await cluster.open_peer(leader, f"kwire-txn-add-{cluster.node_id}", VERIFY_TIMEOUT_S)
            try:
                response = await conn.request(24, 5, transactions=[{
                    "transactional_id": transactional_id, "producer_id": producer_id,
                    "producer_epoch": producer_epoch, "verify_only": False,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}])
            finally:
                await conn.aclose()
        except PeerError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if response.error_code:
            return ErrorCode(response.error_code)
        codes = [p.partition_error_code for t in response.results_by_transaction for r in t.topic_results
                 for p in r.results_by_partition]
        return ErrorCode(next((c for c in codes if c), 0))

    async def describe_elsewhere(self, transactional_id: str, description) -> TxnDescription:
        """DescribeTransactions of one id at the broker leading its ``__transaction_state``
        partition."""
        cluster = self.cluster
        leader, error = self._coordinator_of(transactional_id)
        if leader is None:
            return TxnDescription(transactional_id, error)
        try:
            conn = await cluster.open_peer(leader, f"kwire-txn-verify-{cluster.node_id}", VERIFY_TIMEOUT_S)
            try:
                response = await conn.request(65, 0, transactional_ids=[transactional_id])
            finally:
                await conn.aclose()
        except PeerError:
            return TxnDescription(transactional_id, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        s = response.transaction_states[0]
        return TxnDescription(transactional_id, ErrorCode(s.error_code), s.transaction_state, s.producer_id,
                              s.producer_epoch, s.transaction_timeout_ms, s.transaction_start_time_ms,
                              tuple((t.topic, tuple(t.partitions)) for t in s.topics))
