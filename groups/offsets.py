"""OffsetCommit and OffsetFetch (part of ``GroupCoordinator``)."""
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
                       offsets: list[OffsetCommit], now_ms: int) -> Outcome:
        """OffsetCommit; ``result`` is one ErrorCode per entry of ``offsets``, in order.

        A commit by a member counts as its heartbeat; a commit to an unknown group
        with generation -1 creates a "simple" group that holds offsets only.
        """
        fx = self._begin(now_ms)
        member_id = member_id or ""
        group = self._groups.get(group_id) if group_id is not None else None
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

    def _store_offset(self, fx: Effects, group: Group, commit: OffsetCommit) -> ErrorCode:
        metadata = commit.metadata or ""
        if len(metadata) > self.config.offset_metadata_max_bytes:
            return E.OFFSET_METADATA_TOO_LARGE
        epoch = -1 if commit.leader_epoch is None else commit.leader_epoch
        entry = OffsetEntry(commit.offset, epoch, metadata, fx.now_ms)
        group.offsets[(commit.topic, commit.partition)] = entry
        fx.append(Record(group.group_id, offset_key(group.group_id, commit.topic, commit.partition),
                         encode_offset_value(OffsetValue(entry.offset, entry.leader_epoch, entry.metadata,
                                                         fx.now_ms))))
        return E.NONE

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, int, int, str, ErrorCode]]:
        """OffsetFetch rows (topic, partition, offset, leader_epoch, metadata, error); reads only.

        ``partitions=None`` lists every committed offset (sorted); an unknown one is offset -1,
        leader epoch -1, metadata "" and NONE, as Kafka answers.
        """
        group = self._groups.get(group_id) if group_id is not None else None
        offsets = group.offsets if group is not None else {}
        wanted = sorted(offsets) if partitions is None else [(t, p) for t, p in partitions]
        rows = []
        for topic, partition in wanted:
            entry = offsets.get((topic, partition))
            if entry is None:
                rows.append((topic, partition, -1, -1, "", E.NONE))
            else:
                rows.append((topic, partition, entry.offset, entry.leader_epoch, entry.metadata, E.NONE))
        return rows
