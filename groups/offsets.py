"""OffsetCommit, TxnOffsetCommit and OffsetFetch (part of ``GroupCoordinator``).

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

from .effects import Effects
from .group import Group, GroupState, OffsetEntry
from .records import OffsetValue, encode_offset_value, offset_key
from .results import OffsetCommit, Outcome, Record

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)


class OffsetsMixin:
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: list[OffsetCommit], now_ms: int, *, api_version: int | None = None) -> Outcome:
        """OffsetCommit; ``result`` is one ErrorCode per entry of ``offsets``, in order.

        A commit by a member counts as its heartbeat; a commit to an unknown group
        with generation -1 creates a "simple" group that holds offsets only.  ``api_version``
        (OffsetCommit's; None: not checked) below 9 is UNSUPPORTED_VERSION for a member of
        the consumer protocol (KIP-848), as in Kafka.
        """
        fx = self._begin(now_ms)
        member_id = member_id or ""
        group = self._groups.get(group_id) if group_id is not None else None
        if group_id in self._consumer_groups:
            error = self._validate_consumer_commit(self._consumer_groups[group_id], generation_id, member_id,
                                                   api_version)
            if error is None and group is None:
                group = self._create(fx, group_id)      # the consumer group's offsets holder
            errors = [error] * len(offsets) if error is not None else [self._store_offset(fx, group, o)
                                                                       for o in offsets]
            if error is None:      # unlike a classic member's, a commit is no heartbeat (as Kafka)
                fx.touch(group_id)
            return self._finish(fx, errors)
        if group_id is None:
            error: ErrorCode | None = E.INVALID_GROUP_ID
        elif group is None and generation_id >= 0:
            error = E.ILLEGAL_GENERATION
        else:
            if group is None:
                group = self._create(fx, group_id)
            error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
            if error is None and group.is_(COMPLETING):
                error = E.REBALANCE_IN_PROGRESS
        if error is not None:
            errors = [error] * len(offsets)
        else:
            if group.is_(STABLE, PREPARING) and member_id in group.members:
                member = group.members[member_id]
                member.deadline_ms = now_ms + member.session_timeout_ms
            fx.touch(group_id)
            errors = [self._store_offset(fx, group, o) for o in offsets]
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
        group = self._groups.get(group_id)
        if group is None:
            group = self._create(fx, group_id)
        error = None
        if group_id in self._consumer_groups:
            if generation_id >= 0 or member_id:
                error = self._validate_consumer_commit(self._consumer_groups[group_id], generation_id,
                                                       member_id or "")
        elif generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_member(group, member_id or "", group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
        if error is not None:
            return self._finish(fx, [error] * len(offsets))
        fx.touch(group_id)
        errors = [self._store_offset(fx, group, o, (producer_id, producer_epoch)) for o in offsets]
        return self._finish(fx, errors)

    def complete_txn(self, producer_id: int, commit: bool, in_partition, now_ms: int) -> Outcome:
        """A COMMIT/ABORT marker of ``producer_id`` was appended to an offsets partition:
        install or drop that producer's pending offsets of the groups ``in_partition(group_id)``
        selects.  Writes nothing (the marker is the record)."""
        fx = self._begin(now_ms)
        for group in list(self._groups.values()):
            if producer_id in group.pending_txn_offsets and in_partition(group.group_id):
                self._complete_group_txn(group, producer_id, commit)
                fx.touch(group.group_id)
        return self._finish(fx)

    def discard_txn_offsets(self, group_id: str, producer_id: int) -> None:
        """Forget ``producer_id``'s pending offsets of ``group_id`` (their records were not written)."""
        group = self._groups.get(group_id)
        if group is not None:
            group.pending_txn_offsets.pop(producer_id, None)

    @staticmethod
    def _complete_group_txn(group: Group, producer_id: int, commit: bool) -> None:
        pending = group.pending_txn_offsets.pop(producer_id, {})
        if commit:
            group.offsets.update(pending)

    @staticmethod
    def _validate_consumer_commit(group, member_epoch: int, member_id: str,
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

    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if generation_id < 0 and group.is_(EMPTY):
            return None   # admin client or a consumer in assign mode
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
            return error
        return None if group.is_(EMPTY) else E.UNKNOWN_MEMBER_ID

    def _store_offset(self, fx: Effects, group: Group, commit: OffsetCommit,
                      producer: tuple[int, int] | None = None) -> ErrorCode:
        metadata = commit.metadata or ""
        if len(metadata) > self.config.offset_metadata_max_bytes:
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

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9's member check for a consumer group (Kafka's ConsumerGroup.validateOffsetFetch):
        none without a member id and epoch; an unknown member is UNKNOWN_MEMBER_ID, another epoch
        STALE_MEMBER_EPOCH (behind) or FENCED_MEMBER_EPOCH (ahead).  Classic groups: not checked."""
        group = self._consumer_groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        return self._validate_consumer_commit(group, member_epoch, member_id)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      require_stable: bool = False) -> list[tuple[str, int, int, int, str, ErrorCode]]:
        """OffsetFetch rows (topic, partition, offset, leader_epoch, metadata, error); reads only.

        ``partitions=None`` lists every committed offset (sorted); an unknown one is offset -1,
        leader epoch -1, metadata "" and NONE, as Kafka answers.  With ``require_stable`` a
        partition with an offset pending in an open transaction is UNSTABLE_OFFSET_COMMIT.
        """
        group = self._groups.get(group_id) if group_id is not None else None
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
