"""Kafka's group coordinator, sans-I/O: a façade over composed managers.

Every call takes the time (``now_ms``) and returns its own ``Outcome``: the
records to append to ``__consumer_offsets``, the responses of parked
requests it completed (by the caller's ticket), its own answer and when
``tick`` next has work.  Each call collects these in a local ``Effects`` and
returns them at its one exit (``_finish``).  Start-up state is rebuilt by
``replay`` of those records.

As Kafka's GroupCoordinatorShard holds a GroupMetadataManager and an
OffsetMetadataManager, ``GroupCoordinator`` owns the shared state (a
``GroupContext``: settings, the classic and the consumer group tables) and
routes each API call to one manager:

    ClassicGroupManager  (classic_groups)        JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalance
    ClassicMembers       (mixed_groups)          the same APIs on a KIP-848 consumer group with members
    ConsumerGroupManager (consumer_coordinator)  ConsumerGroupHeartbeat, ConsumerGroupDescribe
    GroupConversions     (conversions)           online upgrade and downgrade, held by the above
    OffsetManager        (offsets)               OffsetCommit/Fetch/Delete, TxnOffsetCommit, expiry
    GroupAdmin           (admin)                 DescribeGroups, ListGroups, DeleteGroups
    GroupTimers          (timers)                deadlines of every group; ``tick``
    GroupLoader          (persistence)           ``replay`` of records, unloading

A manager gets what it needs of another as a constructor argument and calls its
public methods only.  No method raises for bad client input; errors are
``ErrorCode`` values in the results.
"""
from __future__ import annotations

import functools
import uuid

from kwire.codecs.errors import ErrorCode

from .admin import GroupAdmin
from .classic_groups import ClassicGroupManager
from .consumer_coordinator import ConsumerGroupManager
from .context import GroupContext
from .conversions import GroupConversions
from .effects import Effects
from .mixed_groups import ClassicMembers
from .offsets import OffsetManager
from .persistence import GroupLoader
from .records import parse_subscription
from .results import (
    ConsumerGroupDescription, ConsumerHeartbeat, GroupConfig, GroupDescription, JoinRequest, JoinResult,
    LeaveResult, OffsetCommit, Outcome, Record, SyncRequest, SyncResult,
)
from .timers import GroupTimers

__all__ = ["GroupConfig", "GroupCoordinator", "GroupDescription", "JoinRequest", "JoinResult", "LeaveResult",
           "OffsetCommit", "Outcome", "Record", "SyncRequest", "SyncResult", "parse_subscription",
           "partition_for"]


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % num_partitions`` (Java's String.hashCode over UTF-16)."""
    if len(group_id) <= _CACHED_ID_CHARS:
        return _cached_hash(group_id) % num_partitions
    return java_string_hash(group_id) % num_partitions


def java_string_hash(text: str) -> int:
    """``text.hashCode()`` with its sign bit cleared.  (Kafka's ``Utils.abs`` is ``Math.abs``,
    which differs for a negative hash: kwire's groups and transactional ids have always been
    placed by this one, and moving them needs a migration of the partitions they are in.)"""
    return java_hash_code(text) & 0x7FFFFFFF


def java_hash_code(text: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# The same group and transactional ids come back on every request, and the loop above costs
# microseconds per id; the cache holds at most 4096 ids of at most 255 characters (a few MB at most).
_CACHED_ID_CHARS = 255
_cached_hash = functools.lru_cache(maxsize=4096)(java_string_hash)



class GroupCoordinator:
    """All classic and KIP-848 consumer groups of this broker; one instance, driven by one task (not thread-safe)."""

    def __init__(self, config: GroupConfig | None = None, unique_id=None):
        """``unique_id()`` makes the suffix of new member ids (a UUID4; tests pass a counter)."""
        self.config = config or GroupConfig()
        ctx = GroupContext(self.config, unique_id or (lambda: str(uuid.uuid4())))
        self._groups = ctx.groups                    # the shared tables, for reading (tests do)
        self._consumer_groups = ctx.consumer_groups
        self._offsets = OffsetManager(ctx)
        self._classic = ClassicGroupManager(ctx)
        self._consumer = ConsumerGroupManager(ctx, self._offsets, GroupConversions(ctx, self._classic))
        self._mixed = ClassicMembers(ctx, self._consumer)
        self._admin = GroupAdmin(ctx, self._offsets, self._consumer)
        self._timers = GroupTimers(ctx, self._classic, self._offsets, self._consumer)
        self._loader = GroupLoader(ctx, self._timers)

    # ------------------------------------------------------------------ one call: begin, finish
    def _begin(self, now_ms: int) -> Effects:
        fx = Effects(now_ms)
        self._timers.begin(fx)
        return fx

    def _finish(self, fx: Effects, result=None) -> Outcome:
        """The one exit of every public call: run the due timers of the groups it touched, reschedule."""
        self._timers.finish(fx)
        return Outcome(fx.records, fx.completed, result, self.next_deadline_ms())

    def _mixed_group(self, group_id: str):
        """The consumer group of ``group_id`` when it has members (the classic APIs then go to it)."""
        consumer = self._consumer_groups.get(group_id)
        return consumer if consumer is not None and consumer.members else None

    # ------------------------------------------------------------------ classic group APIs
    def join_group(self, ticket: int, req: JoinRequest, now_ms: int, topics: dict | None = None) -> Outcome:
        """JoinGroup; the ticket is completed now or when the join phase of the group ends.
        ``topics`` (name -> (topic id, partitions)) serves a classic member of a consumer group."""
        fx = self._begin(now_ms)
        consumer = self._consumer_groups.get(req.group_id) if req.group_id else None
        if consumer is None or self._classic.join_error(req) is not None:
            self._classic.join(fx, ticket, req)
        elif consumer.members:
            # A mixed group: the caller becomes a classic member of the consumer group.
            self._mixed.join(fx, ticket, req, consumer, topics)
        else:
            if req.group_id in self._groups or not req.member_id:
                self._consumer.delete(fx, consumer, keep_offsets=True)     # empty: it becomes a classic group
            self._classic.join(fx, ticket, req)
        return self._finish(fx)

    def sync_group(self, ticket: int, req: SyncRequest, now_ms: int) -> Outcome:
        """SyncGroup; a follower's ticket waits for the leader's SyncGroup of the generation."""
        fx = self._begin(now_ms)
        consumer = self._mixed_group(req.group_id)
        if consumer is not None:
            self._mixed.sync(fx, ticket, req, consumer)
        else:
            self._classic.sync(fx, ticket, req)
        return self._finish(fx)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                  now_ms: int) -> Outcome:
        """Heartbeat; ``result`` is its ErrorCode.  A valid one pushes the member's session deadline back."""
        fx = self._begin(now_ms)
        consumer = self._mixed_group(group_id)
        if consumer is not None:
            error = self._mixed.heartbeat(fx, consumer, generation_id, member_id, group_instance_id)
        else:
            error = self._classic.heartbeat(fx, group_id, generation_id, member_id, group_instance_id)
        return self._finish(fx, error)

    def leave_group(self, group_id: str, members: list[tuple[str | None, str | None, str | None]],
                    now_ms: int) -> Outcome:
        """LeaveGroup (a batch from v3) of (member_id, group_instance_id, reason);
        ``result`` is a LeaveResult with one error per member."""
        fx = self._begin(now_ms)
        consumer = self._consumer_groups.get(group_id) if group_id else None
        if consumer is not None:
            result = self._mixed.leave(fx, consumer, members)
        else:
            result = self._classic.leave(fx, group_id, members)
        return self._finish(fx, result)

    # ------------------------------------------------------------------ offsets
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: list[OffsetCommit], now_ms: int, *, api_version: int | None = None) -> Outcome:
        """OffsetCommit; ``result`` is one ErrorCode per entry of ``offsets``, in order.

        A commit by a member counts as its heartbeat; a commit to an unknown group
        with generation -1 creates a "simple" group that holds offsets only.  ``api_version``
        (OffsetCommit's; None: not checked) below 9 is UNSUPPORTED_VERSION for a member of
        the consumer protocol (KIP-848), as in Kafka.
        """
        fx = self._begin(now_ms)
        errors = self._offsets.commit(fx, group_id, generation_id, member_id, group_instance_id, offsets,
                                      api_version)
        return self._finish(fx, errors)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                           member_id: str, group_instance_id: str | None, offsets: list[OffsetCommit],
                           now_ms: int) -> Outcome:
        """TxnOffsetCommit; ``result`` is one ErrorCode per entry of ``offsets``.

        The records carry (producer_id, producer_epoch): the caller appends them in a
        transactional batch.  As Kafka: an unknown group is created (offsets only);
        group membership is checked only when the request names a generation or member
        (v3+, KIP-447)."""
        fx = self._begin(now_ms)
        errors = self._offsets.txn_commit(fx, group_id, (producer_id, producer_epoch), generation_id, member_id,
                                          group_instance_id, offsets)
        return self._finish(fx, errors)

    def complete_txn(self, producer_id: int, commit: bool, in_partition, now_ms: int) -> Outcome:
        """A COMMIT/ABORT marker of ``producer_id`` was appended to an offsets partition:
        install or drop that producer's pending offsets of the groups ``in_partition(group_id)``
        selects.  Writes nothing (the marker is the record)."""
        fx = self._begin(now_ms)
        self._offsets.complete_txn(fx, producer_id, commit, in_partition)
        return self._finish(fx)

    def discard_txn_offsets(self, group_id: str, producer_id: int) -> None:
        """Forget ``producer_id``'s pending offsets of ``group_id`` (their records were not written)."""
        self._offsets.discard_txn_offsets(group_id, producer_id)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9's member check for a consumer group (Kafka's ConsumerGroup.validateOffsetFetch):
        none without a member id and epoch; an unknown member is UNKNOWN_MEMBER_ID, another epoch
        STALE_MEMBER_EPOCH (behind) or FENCED_MEMBER_EPOCH (ahead).  Classic groups: not checked."""
        return self._offsets.validate_fetch(group_id, member_id, member_epoch)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      require_stable: bool = False) -> list[tuple[str, int, int, int, str, ErrorCode]]:
        """OffsetFetch rows (topic, partition, offset, leader_epoch, metadata, error); reads only.

        ``partitions=None`` lists every committed offset (sorted); an unknown one is offset -1,
        leader epoch -1, metadata "" and NONE, as Kafka answers.  With ``require_stable`` a
        partition with an offset pending in an open transaction is UNSTABLE_OFFSET_COMMIT.
        """
        return self._offsets.fetch(group_id, partitions, require_stable)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]], now_ms: int) -> Outcome:
        """OffsetDelete; ``result`` is (group error, one ErrorCode per partition in order).

        A group-level error is repeated for every partition (Kafka sends none) so
        callers can zip without checking.  A consumer group with members keeps the
        offsets of topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
        """
        fx = self._begin(now_ms)
        return self._finish(fx, self._offsets.delete(fx, group_id, partitions))

    # ------------------------------------------------------------------ describe, list, delete
    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group; an unknown group is "Dead" with NONE, as Kafka answers.

        Member metadata, assignments and the protocol name are given only while
        Stable (Kafka's summary); in other states they are empty.
        """
        return self._admin.describe_group(group_id)

    def list_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) of every classic group, sorted; the filter ignores case.
        KIP-848 consumer groups are in ``list_consumer_groups``."""
        return self._admin.list_groups(states_filter)

    def list_consumer_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str]]:
        """(group_id, state) of every KIP-848 consumer group, sorted (states as Kafka's: Empty,
        Assigning, Reconciling, Stable); the filter ignores case."""
        return self._admin.list_consumer_groups(states_filter)

    def delete_groups(self, group_ids: list[str], now_ms: int) -> Outcome:
        """DeleteGroups; ``result`` is one ErrorCode per group id, in order. Only Empty groups go."""
        fx = self._begin(now_ms)
        return self._finish(fx, self._admin.delete_groups(fx, group_ids))

    # ------------------------------------------------------------------ KIP-848 consumer groups
    def consumer_group_heartbeat(self, req: ConsumerHeartbeat, topics: dict, now_ms: int) -> Outcome:
        """ConsumerGroupHeartbeat; ``topics`` is the cluster's topics, name -> (topic id, partitions).
        ``result`` is a ConsumerHeartbeatResult."""
        fx = self._begin(now_ms)
        return self._finish(fx, self._consumer.heartbeat(fx, req, topics))

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe of one group; reads only."""
        return self._consumer.describe(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a KIP-848 consumer group (not a classic one)."""
        return self._consumer.is_consumer_group(group_id)

    # ------------------------------------------------------------------ timers
    def tick(self, now_ms: int) -> Outcome:
        """Run every timer due at ``now_ms``: expire sessions and pending member ids, end join
        phases (initial delay, rebalance timeout) and pending syncs, expire offsets, drop dead
        groups, fence consumer group members whose session or revocation time is up."""
        fx = self._begin(now_ms)
        self._timers.tick(fx)
        return self._finish(fx)

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` next has work (0 right after a replay: sessions need a clock), or None."""
        return self._timers.next_deadline_ms()

    # ------------------------------------------------------------------ loading
    def replay(self, key: bytes, value: bytes | None, producer_id: int | None = None) -> bool:
        """Apply one ``__consumer_offsets`` record at start-up (value None = tombstone).

        A record of a transactional batch (``producer_id``) is an offset commit held
        pending until ``replay_marker`` sees its transaction's marker.

        Returns False for a record that was skipped: a key of a kind this
        coordinator does not own, or bytes that do not decode (logged, so one
        damaged record cannot stop the broker from starting).  Members get
        their session deadline from the first call that carries a clock.
        """
        return self._loader.replay(key, value, producer_id)

    def replay_marker(self, producer_id: int, commit: bool, in_partition) -> None:
        """A COMMIT/ABORT marker met while replaying the offsets partition ``in_partition`` selects."""
        self._loader.replay_marker(producer_id, commit, in_partition)

    def unload_groups(self, predicate) -> int:
        """Forget the groups whose id satisfies ``predicate`` (their offsets partition is led by
        another broker now, which replays them); returns how many."""
        return self._loader.unload_groups(predicate)

    @staticmethod
    def partition_for(group_id: str, num_partitions: int) -> int:
        return partition_for(group_id, num_partitions)
