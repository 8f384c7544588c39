"""The partition service: where a produce, a fetch and a ListOffsets meet leadership.

Kafka's ``KafkaApis`` never asks whether partitions are replicated: it hands appends and
reads to its ``ReplicaManager``, which checks leadership and the ISR and holds acks=all
responses until the high watermark passes them.  kwire does the same through
``PartitionService``, with two implementations chosen once when the broker is built:

* ``LocalPartitions`` (here): a single node leads every partition it holds; an append is
  committed at once (the high watermark is the log end), only the client's leader epoch is
  checked;
* ``ReplicatedPartitions`` (``kwire.cluster.partitions``): only the leader appends and
  serves consumers, acks=all waits for the ISR, followers read to the log end.

Every method that can refuse raises ``KafkaApiError`` with the code a client gets; none of
the synchronous ones awaits, so an append stays atomic under Trio.  The hot path pays one
method call per partition, no allocation beyond what the log's append makes.
"""
from __future__ import annotations

from typing import Callable, Iterable, Protocol, runtime_checkable

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.admin.reassignment import ReassignmentError, ReplicaAssignment, validate_target

TopicPartition = tuple[str, int]


@runtime_checkable
class PartitionService(Protocol):
    """What the produce, fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and
    ElectLeaders handlers ask about partitions."""

    # True when this broker serves reads of every partition it holds (no leadership to
    # check), so an incremental fetch may skip an idle session partition without reading it
    serves_every_partition: bool
    # appended(partitions): records were appended to these (topic, partition) pairs; wakes
    # the fetches that can now read them
    appended: Callable[[Iterable[TopicPartition]], None]

    def append(self, topic: str, partition: int, plog, records, now_ms: int, produce_version: int,
               acks: int, waits: list):
        """Append a produce's ``records`` to ``plog``; returns the log's AppendResult.  For
        acks=all a replicated append adds an entry to ``waits`` for ``wait_acks``.  Raises
        KafkaApiError (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, the log's validation
        errors); a refused append changes nothing.  No await."""

    async def wait_acks(self, wait, deadline: float) -> ErrorCode:
        """Wait until one entry of ``waits`` is replicated (trio clock ``deadline``): NONE,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT.
        Cancel-safe."""

    def check_serving(self, topic: str, partition: int, plog, current_leader_epoch: int | None,
                      replica_id: int = -1) -> tuple[int | None, object]:
        """Whether this broker serves reads of the partition: (the offset a read may go up
        to, None for the high watermark; a follower fetch's leader state, else None).
        Raises KafkaApiError(FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
        NOT_LEADER_OR_FOLLOWER)."""

    def follower_fetched(self, topic: str, partition: int, leader, replica_id: int, fetch_offset: int,
                         log_start_offset: int, sent_bytes: int = 0) -> None:
        """A follower's fetch (``leader`` from ``check_serving``) was read without error;
        ``sent_bytes`` of records go back (they count for the replication throttle)."""

    def follower_throttled(self, topic: str, partition: int, leader, replica_id: int) -> bool:
        """Whether a follower's fetch of the partition gets no records now: the leader
        replication throttle is exceeded and the follower is not in the ISR
        (kwire.cluster.throttles)."""

    def check_caught_up(self, topic: str, partition: int, plog) -> None:
        """Before ListOffsets answers from the high watermark; raises
        KafkaApiError(OFFSET_NOT_AVAILABLE) while a new leader's is not yet known."""

    def check_writer(self, topic: str, partition: int, plog):
        """Before DeleteRecords, or a share-partition leader's first use of the partition: the
        leader state to wait on (or compare with ``still_leads``), or None when nothing is to
        be waited for.  Raises KafkaApiError(NOT_LEADER_OR_FOLLOWER)."""

    def still_leads(self, topic: str, partition: int, leader) -> bool:
        """Whether this broker still leads the partition with ``leader`` (from ``check_writer``):
        False once leadership moved (to another broker or a newer epoch) in between."""

    async def wait_deleted(self, tp: TopicPartition, leader, required: int,
                           deadline: float) -> tuple[int, ErrorCode]:
        """DeleteRecords: (low watermark, NONE / NOT_LEADER_OR_FOLLOWER / REQUEST_TIMED_OUT)
        once every live replica's log start reaches ``required``.  Cancel-safe."""

    async def elect_preferred(self, partitions: list[TopicPartition], timeout_s: float) -> dict:
        """ElectLeaders (preferred): {(topic, partition): ErrorCode}."""

    async def alter_reassignments(self, requested: dict, allow_replication_factor_change: bool) -> dict:
        """AlterPartitionReassignments: {(topic, partition): target replicas or None (cancel)}
        -> {(topic, partition): (ErrorCode, message or None)}."""

    async def list_reassignments(self, partitions: list[TopicPartition] | None) -> dict:
        """ListPartitionReassignments: {(topic, partition): ReplicaAssignment} of those (all
        when None) being reassigned."""

    async def confirm_leadership(self, tp: TopicPartition) -> None:
        """A read fence before a coordinator serves committed state: that this broker still
        leads ``tp`` as the cluster says now.  Raises KafkaApiError(NOT_COORDINATOR)."""

    def coordinator_appended(self, tp: TopicPartition, result) -> int | None:
        """A coordinator (groups, transactions) appended ``result`` to ``tp`` as its leader: the
        offset the high watermark must reach before the records count (they are written with
        acks=all), or None when they are committed at once.  Wakes the fetches that can read
        them.  No await."""

    async def wait_committed(self, tp: TopicPartition, required: int, deadline: float,
                             leader=None) -> ErrorCode:
        """Wait until the high watermark of ``tp`` reaches ``required`` while this broker leads it
        (``leader``, from ``check_writer``; None: whichever leadership it has now): NONE,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT.
        Cancel-safe."""

    def hosts(self, topic: str, partition: int) -> bool:
        """Whether this broker is a replica of the partition by its assignment (a cluster
        node's log of it exists once the assignment is applied; kwire.log.manager)."""

    def leadership(self, topic: str, partition: int) -> tuple[bool, bool]:
        """(this broker leads the partition, its ISR is smaller than its replicas)."""


def check_leader_epoch(plog, current_leader_epoch: int | None) -> None:
    """Raises KafkaApiError(FENCED_LEADER_EPOCH | UNKNOWN_LEADER_EPOCH) on a mismatch."""
    if current_leader_epoch is None or current_leader_epoch < 0:
        return
    if current_leader_epoch < plog.leader_epoch:
        raise KafkaApiError(ErrorCode.FENCED_LEADER_EPOCH)
    if current_leader_epoch > plog.leader_epoch:
        raise KafkaApiError(ErrorCode.UNKNOWN_LEADER_EPOCH)


class LocalPartitions:
    """One node: it leads every partition it holds, with an ISR of itself."""

    serves_every_partition = True

    def __init__(self, broker):
        self.logs = broker.logs
        self.appended = broker.notify_appended      # committed at once: consumers may read it

    def append(self, topic: str, partition: int, plog, records, now_ms: int, produce_version: int,
               acks: int, waits: list):
        return plog.append(records, now_ms=now_ms, produce_version=produce_version)

    async def wait_acks(self, wait, deadline: float) -> ErrorCode:
        return ErrorCode.NONE               # never asked: a local append adds no wait

    def check_serving(self, topic: str, partition: int, plog, current_leader_epoch: int | None,
                      replica_id: int = -1) -> tuple[int | None, object]:
        check_leader_epoch(plog, current_leader_epoch)
        return None, None

    def follower_fetched(self, topic: str, partition: int, leader, replica_id: int, fetch_offset: int,
                         log_start_offset: int, sent_bytes: int = 0) -> None:
        return None                         # never asked: no follower has a leader state here

    def follower_throttled(self, topic: str, partition: int, leader, replica_id: int) -> bool:
        return False                        # never asked, as above

    def check_caught_up(self, topic: str, partition: int, plog) -> None:
        return None

    def check_writer(self, topic: str, partition: int, plog):
        return None

    def still_leads(self, topic: str, partition: int, leader) -> bool:
        return True                         # leadership never moves from a single node

    async def wait_deleted(self, tp: TopicPartition, leader, required: int,
                           deadline: float) -> tuple[int, ErrorCode]:
        plog = self.logs.partition(*tp)
        return (plog.log_start_offset if plog is not None else -1), ErrorCode.NONE

    async def elect_preferred(self, partitions: list[TopicPartition], timeout_s: float) -> dict:
        """A single node is always its partitions' preferred leader: ELECTION_NOT_NEEDED."""
        return {tp: ErrorCode.ELECTION_NOT_NEEDED if self.logs.partition(*tp) is not None
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions}

    async def alter_reassignments(self, requested: dict, allow_replication_factor_change: bool) -> dict:
        """A single node's partitions can only be "moved" to itself: a no-op."""
        out = {}
        for tp, target in requested.items():
            current = ReplicaAssignment((self.logs.node_id,))
            if self.logs.partition(*tp) is None:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown topic or partition {tp[0]}-{tp[1]}.")
                continue
            try:
                validate_target(target, current, (self.logs.node_id,),
                                allow_replication_factor_change=allow_replication_factor_change)
                out[tp] = (ErrorCode.NONE, None)
            except ReassignmentError as exc:
                out[tp] = (exc.code, exc.message)
        return out

    async def list_reassignments(self, partitions: list[TopicPartition] | None) -> dict:
        return {}

    async def confirm_leadership(self, tp: TopicPartition) -> None:
        return None

    def coordinator_appended(self, tp: TopicPartition, result) -> int | None:
        return None                         # committed at once (the coordinator wakes its readers)

    async def wait_committed(self, tp: TopicPartition, required: int, deadline: float,
                             leader=None) -> ErrorCode:
        return ErrorCode.NONE

    def hosts(self, topic: str, partition: int) -> bool:
        return True

    def leadership(self, topic: str, partition: int) -> tuple[bool, bool]:
        return True, False                 # a single node leads every partition it has
