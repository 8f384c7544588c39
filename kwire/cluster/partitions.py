"""The partition service of a cluster broker (``kwire.services.partitions``): leadership, the
ISR and acks=all, as Kafka's ``ReplicaManager.appendRecords`` and ``fetchMessages`` do them.

* Only the leader appends; acks=all first checks ``min.insync.replicas``
  (NOT_ENOUGH_REPLICAS) and then waits until the high watermark passes the append
  (``kwire.cluster.replication.ReplicaManager.wait_replicated``).
* A replicated append is not committed yet: it wakes the followers' fetches, and the
  consumers' once the high watermark moves.
* Consumers read from the leader up to the high watermark; an assigned follower reads to
  the log end and its fetch offset then counts for the ISR and the high watermark.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.cluster import reassignment
from kwire.services.partitions import TopicPartition


class ReplicatedPartitions:
    """The partitions of a ClusterNode (``kwire.cluster.node``), led or followed."""

    serves_every_partition = False

    def __init__(self, broker, cluster):
        self.cluster = cluster
        self.replicas = cluster.replicas
        self.appended = broker.notify_log_end    # followers copy it now; consumers wait for the HW

    def append(self, topic: str, partition: int, plog, records, now_ms: int, produce_version: int,
               acks: int, waits: list):
        tp = (topic, partition)
        replicas = self.replicas
        leader = replicas.check_leader(tp, plog, None)
        if acks == -1:
            replicas.check_min_isr(tp, leader)
        result = plog.append(records, now_ms=now_ms, produce_version=produce_version)
        replicas.after_append(tp)
        if acks == -1:
            waits.append((tp, leader, result.last_offset + 1))
        return result

    async def wait_acks(self, wait, deadline: float) -> ErrorCode:
        tp, leader, required = wait
        return await self.replicas.wait_replicated(tp, leader, required, deadline)

    def check_serving(self, topic: str, partition: int, plog, current_leader_epoch: int | None,
                      replica_id: int = -1) -> tuple[int | None, object]:
        leader = self.replicas.check_leader((topic, partition), plog, current_leader_epoch)
        if replica_id < 0:
            return None, None
        self.replicas.check_follower(leader, replica_id)
        return plog.log_end_offset, leader

    def follower_fetched(self, topic: str, partition: int, leader, replica_id: int, fetch_offset: int,
                         log_start_offset: int, sent_bytes: int = 0) -> None:
        self.replicas.on_follower_fetch((topic, partition), leader, replica_id, fetch_offset, log_start_offset)
        quota = self.cluster.throttles.leader
        if sent_bytes and replica_id not in leader.isr and quota.throttled((topic, partition)):
            quota.record(sent_bytes, self.cluster.broker.clock.now_ms())

    def follower_throttled(self, topic: str, partition: int, leader, replica_id: int) -> bool:
        quota = self.cluster.throttles.leader
        return (replica_id not in leader.isr and quota.throttled((topic, partition))
                and quota.exceeded(self.cluster.broker.clock.now_ms()))

    def check_caught_up(self, topic: str, partition: int, plog) -> None:
        """Kafka's rule for a new leader (Partition.fetchOffsetForTimestamp): until its high
        watermark reaches the log end it had when its epoch began, the followers have not told
        it what is committed, and its high watermark (a follower's, one fetch behind) is too
        low to answer with; OFFSET_NOT_AVAILABLE makes clients ask again."""
        leader = self.replicas.leader((topic, partition))
        if leader is not None and leader.epoch_start_offset > plog.high_watermark:
            raise KafkaApiError(ErrorCode.OFFSET_NOT_AVAILABLE,
                                f"the high watermark {plog.high_watermark} is behind the start offset "
                                f"{leader.epoch_start_offset} of leader epoch {leader.leader_epoch}")

    def check_writer(self, topic: str, partition: int, plog):
        return self.replicas.check_leader((topic, partition), plog, None)

    def still_leads(self, topic: str, partition: int, leader) -> bool:
        return self.replicas.leader((topic, partition)) is leader

    async def wait_deleted(self, tp: TopicPartition, leader, required: int,
                           deadline: float) -> tuple[int, ErrorCode]:
        code = await self.replicas.wait_low_watermark(tp, leader, required, deadline)
        return self.replicas.low_watermark(leader), code

    async def elect_preferred(self, partitions: list[TopicPartition], timeout_s: float) -> dict:
        """Computed from the current state; the controller runs the election itself."""
        return await self.cluster.request_preferred_election(partitions, timeout_s)

    async def confirm_leadership(self, tp: TopicPartition) -> None:
        await self.cluster.confirm_leadership(tp)

    async def alter_reassignments(self, requested: dict, allow_replication_factor_change: bool) -> dict:
        return await reassignment.alter(self.cluster, requested,
                                        allow_replication_factor_change=allow_replication_factor_change)

    async def list_reassignments(self, partitions: list[TopicPartition] | None) -> dict:
        return await reassignment.in_progress(self.cluster, partitions)

    def coordinator_appended(self, tp: TopicPartition, result) -> int | None:
        self.replicas.after_append(tp)
        self.replicas.notify_appended([tp])      # wake the followers' parked fetches
        return result.last_offset + 1

    async def wait_committed(self, tp: TopicPartition, required: int, deadline: float,
                             leader=None) -> ErrorCode:
        if leader is None:
            leader = self.replicas.leader(tp)
            if leader is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return await self.replicas.wait_replicated(tp, leader, required, deadline)

    def hosts(self, topic: str, partition: int) -> bool:
        """By the assignment of ZooKeeper's snapshot, as last applied."""
        snapshot = self.cluster.snapshot
        meta = snapshot.topics.get(topic) if snapshot is not None else None
        return meta is not None and self.cluster.node_id in meta.assignment.get(partition, ())

    def leadership(self, topic: str, partition: int) -> tuple[bool, bool]:
        state = self.replicas.leaders.get((topic, partition))
        if state is None:
            return False, False
        return True, len(state.isr) < len(state.replicas)
