"""The offsets manager: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and offset expiry
(Kafka's OffsetMetadataManager; ``GroupCoordinator`` routes those calls here).

Offsets committed inside a transaction (TxnOffsetCommit) are written to
``__consumer_offsets`` in a transactional batch of the producer and held
pending per producer id; the transaction's marker, once appended to the
group's offsets partition, either installs them (COMMIT) or drops them
(ABORT): ``complete_txn``.  Until then OffsetFetch with ``require_stable``
answers UNSTABLE_OFFSET_COMMIT for those partitions (KIP-447), and without it
the last committed offsets.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from .context import GroupContext
from .effects import Effects
from .group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, OffsetEntry
from .records import OffsetValue, encode_offset_value, group_key, offset_key
from .results import OffsetCommit, Record

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)



class OffsetManager:
    """Committed and pending offsets of every group, their expiry and the removal of groups left
    with nothing.  Each method that changes state takes the call's ``Effects``."""

    def __init__(self, ctx: GroupContext):
        self._ctx = ctx
        self._config = ctx.config

    # -- OffsetCommit, TxnOffsetCommit ---------------------------------------------------
    def commit(self, fx: Effects, group_id: str, generation_id: int, member_id: str,
               group_instance_id: str | None, offsets: list[OffsetCommit], api_version: int | None
               ) -> list[ErrorCode]:
        """OffsetCommit: one ErrorCode per entry of ``offsets``, in order (see
        ``GroupCoordinator.commit_offsets``)."""
        groups, consumer_groups = self._ctx.groups, self._ctx.consumer_groups
        member_id = member_id or ""
        group = groups.get(group_id) if group_id is not None else None
        if group_id in consumer_groups:
            error = validate_consumer_commit(consumer_groups[group_id], generation_id, member_id, api_version)
            if error is None and group is None:
                group = self._ctx.create_group(fx, group_id)      # the consumer group's offsets holder
            errors = [error] * len(offsets) if error is not None else [self._store(fx, group, o) for o in offsets]
            if error is None:      # unlike a classic member's, a commit is no heartbeat (as Kafka)
                fx.touch(group_id)
            return errors
        if group_id is None:
            error: ErrorCode | None = E.INVALID_GROUP_ID
        elif group is None and generation_id >= 0:
            error = E.ILLEGAL_GENERATION
        else:
            if group is None:
                group = self._ctx.create_group(fx, group_id)
            error = _validate_offset_commit(group, generation_id, member_id, group_instance_id)
            if error is None and group.is_(COMPLETING):
                error = E.REBALANCE_IN_PROGRESS
        if error is not None:
            return [error] * len(offsets)
        if group.is_(STABLE, PREPARING) and member_id in group.members:
            member = group.members[member_id]
            member.deadline_ms = fx.now_ms + member.session_timeout_ms
        fx.touch(group_id)
        return [self._store(fx, group, o) for o in offsets]

    def txn_commit(self, fx: Effects, group_id: str, producer: tuple[int, int], generation_id: int,
                   member_id: str, group_instance_id: str | None, offsets: list[OffsetCommit]) -> list[ErrorCode]:
        """TxnOffsetCommit of ``producer`` (producer id, epoch): one ErrorCode per entry of ``offsets``."""
        group = self._ctx.groups.get(group_id)
        if group is None:
            group = self._ctx.create_group(fx, group_id)
        error = None
        consumer = self._ctx.consumer_groups.get(group_id)
        if consumer is not None:
            if generation_id >= 0 or member_id:
                error = validate_consumer_commit(consumer, generation_id, member_id or "")
        elif generation_id >= 0 or member_id or group_instance_id is not None:
            error = group.member_error(member_id or "", group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
        if error is not None:
            return [error] * len(offsets)
        fx.touch(group_id)
        return [self._store(fx, group, o, producer) for o in offsets]

    def complete_txn(self, fx: Effects, producer_id: int, commit: bool, in_partition) -> None:
        """Install (COMMIT) or drop ``producer_id``'s pending offsets of the groups ``in_partition`` selects."""
        for group in list(self._ctx.groups.values()):
            if producer_id in group.pending_txn_offsets and in_partition(group.group_id):
                complete_group_txn(group, producer_id, commit)
                fx.touch(group.group_id)

    def discard_txn_offsets(self, group_id: str, producer_id: int) -> None:
        group = self._ctx.groups.get(group_id)
        if group is not None:
            group.pending_txn_offsets.pop(producer_id, None)

    def _store(self, fx: Effects, group: Group, commit: OffsetCommit,
               producer: tuple[int, int] | None = None) -> ErrorCode:
        metadata = commit.metadata or ""
        if len(metadata) > self._config.offset_metadata_max_bytes:
            return E.OFFSET_METADATA_TOO_LARGE
        epoch = -1 if commit.leader_epoch is None else commit.leader_epoch
        entry = OffsetEntry(commit.offset, epoch, metadata, fx.now_ms)
        if producer is None:
            group.offsets[(commit.topic, commit.partition)] = entry
        else:
            group.pending_txn_offsets.setdefault(producer[0], {})[(commit.topic, commit.partition)] = entry
        fx.append(Record(group.group_id, offset_key(group.group_id, commit.topic, commit.partition),
                         encode_offset_value(OffsetValue(entry.offset, entry.leader_epoch, entry.metadata,
                                                         fx.now_ms)), producer))
        return E.NONE

    # -- OffsetFetch ----------------------------------------------------------------------
    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9's member check of a consumer group (see ``GroupCoordinator.validate_offset_fetch``)."""
        group = self._ctx.consumer_groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        return validate_consumer_commit(group, member_epoch, member_id)

    def fetch(self, group_id: str, partitions: list[tuple[str, int]] | None,
              require_stable: bool = False) -> list[tuple[str, int, int, int, str, ErrorCode]]:
        """OffsetFetch rows (see ``GroupCoordinator.fetch_offsets``); reads only."""
        group = self._ctx.groups.get(group_id) if group_id is not None else None
        offsets = group.offsets if group is not None else {}
        unstable = set()
        if require_stable and group is not None:
            unstable = {tp for pending in group.pending_txn_offsets.values() for tp in pending}
        wanted = sorted(offsets) if partitions is None else [(t, p) for t, p in partitions]
        rows = []
        for topic, partition in wanted:
            entry = offsets.get((topic, partition))
            if (topic, partition) in unstable:
                rows.append((topic, partition, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT))
            elif entry is None:
                rows.append((topic, partition, -1, -1, "", E.NONE))
            else:
                rows.append((topic, partition, entry.offset, entry.leader_epoch, entry.metadata, E.NONE))
        return rows

    # -- OffsetDelete -----------------------------------------------------------------------
    def delete(self, fx: Effects, group_id: str, partitions: list[tuple[str, int]]
               ) -> tuple[ErrorCode, list[ErrorCode]]:
        """OffsetDelete: (group error, one ErrorCode per partition); see ``GroupCoordinator.delete_offsets``."""
        partitions = [(t, p) for t, p in partitions]
        group = self._ctx.groups.get(group_id) if group_id else None
        if not group_id:
            group_error = E.INVALID_GROUP_ID
        elif group is None:
            group_error = E.GROUP_ID_NOT_FOUND
        elif not group.is_(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            group_error = E.NON_EMPTY_GROUP
        else:
            group_error = E.NONE
        if group_error is not E.NONE:
            return group_error, [group_error] * len(partitions)
        consumer = self._ctx.consumer_groups.get(group_id)
        empty = group.is_(GroupState.EMPTY) and consumer is None
        subscribed = group.is_subscribed_to if consumer is None else consumer.subscription_metadata.__contains__
        errors = [E.NONE if empty or not subscribed(t) else E.GROUP_SUBSCRIBED_TO_TOPIC for t, _ in partitions]
        self.remove(fx, group, [tp for tp, e in zip(partitions, errors) if e is E.NONE])
        if droppable(group):
            self.drop_group(fx, group)
        fx.touch(group_id)
        return group_error, errors

    # -- expiry and group removal ---------------------------------------------------------
    def deadline(self, group: Group) -> int | None:
        """When the group's next offset expires, or when it is removed for holding nothing."""
        ats = [at for _, at in self._expiries(group)]
        if droppable(group):
            ats.append((group.state_timestamp or 0) + self._config.offsets_retention_check_interval_ms)
        return min(ats, default=None)

    def _expiries(self, group: Group) -> list[tuple[tuple[str, int], int]]:
        """(partition, expiry) of the group's offsets; a KIP-848 consumer group's (held by an
        offsets-only Group) as Kafka's OffsetMetadataManager: the offsets of topics its members
        subscribe to are kept, the others expire the retention after their commit."""
        retention_ms = self._config.offsets_retention_ms
        consumer = self._ctx.consumer_groups.get(group.group_id)
        if consumer is None:
            return group.offset_expiries(retention_ms)
        return [(tp, e.expire_timestamp if e.expire_timestamp >= 0 else e.commit_timestamp + retention_ms)
                for tp, e in group.offsets.items() if tp[0] not in consumer.subscription_metadata]

    def expire(self, fx: Effects, group: Group) -> None:
        """Remove the offsets due, and the group once it holds nothing (Kafka's cleanupGroupMetadata)."""
        now_ms = fx.now_ms
        expired = [tp for tp, at in self._expiries(group) if at <= now_ms]
        self.remove(fx, group, expired)
        if droppable(group) and (
                expired or (group.state_timestamp or 0) + self._config.offsets_retention_check_interval_ms <= now_ms):
            self.drop_group(fx, group)

    @staticmethod
    def remove(fx: Effects, group: Group, partitions) -> None:
        """Forget the offsets of ``partitions``, a tombstone for each that was committed."""
        for topic, partition in partitions:
            if group.offsets.pop((topic, partition), None) is not None:
                fx.append(Record(group.group_id, offset_key(group.group_id, topic, partition), None))

    def drop_group(self, fx: Effects, group: Group) -> None:
        """The group is Dead: forget it; its metadata record is tombstoned if it ever wrote one."""
        self.remove(fx, group, list(group.offsets))
        if group.generation_id > 0:
            fx.append(Record(group.group_id, group_key(group.group_id), None))
        group.transition(GroupState.DEAD, fx.now_ms)
        del self._ctx.groups[group.group_id]
        fx.touch(group.group_id)


def droppable(group: Group) -> bool:
    """An Empty group with neither members, pending members nor offsets (committed or pending)."""
    return (group.is_(EMPTY) and not group.offsets and not group.pending_members and not group.members
            and not group.pending_txn_offsets)


def complete_group_txn(group: Group, producer_id: int, commit: bool) -> None:
    """The marker of ``producer_id``'s transaction: install (COMMIT) or drop its pending offsets."""
    pending = group.pending_txn_offsets.pop(producer_id, {})
    if commit:
        group.offsets.update(pending)


def validate_consumer_commit(group, member_epoch: int, member_id: str,
                             api_version: int | None = None) -> ErrorCode | None:
    """Kafka's ConsumerGroup.validateOffsetCommit: the generation is the member epoch; an
    epoch ahead is FENCED_MEMBER_EPOCH, behind STALE_MEMBER_EPOCH; a consumer-protocol
    member committing with OffsetCommit below v9 (``api_version``; None for OffsetFetch) is
    UNSUPPORTED_VERSION, a classic member of a mixed group may use any version."""
    if member_epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if api_version is not None and api_version < 9 and member.classic is None:
        return E.UNSUPPORTED_VERSION
    if member_epoch != member.member_epoch and member.classic is not None:
        return E.ILLEGAL_GENERATION     # a classic member of a mixed group
    if member_epoch > member.member_epoch:
        return E.FENCED_MEMBER_EPOCH
    if member_epoch < member.member_epoch:
        return E.STALE_MEMBER_EPOCH
    return None


def _validate_offset_commit(group: Group, generation_id: int, member_id: str,
                            group_instance_id: str | None) -> ErrorCode | None:
    if generation_id < 0 and group.is_(EMPTY):
        return None   # admin client or a consumer in assign mode
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = group.member_error(member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        return error
    return None if group.is_(EMPTY) else E.UNKNOWN_MEMBER_ID
