"""``kwire groups reset-offsets`` and ``delete-offsets`` on a share group (KIP-932), as Kafka 4.x's
kafka-share-groups.sh --reset-offsets / --delete-offsets.

* A share group's start offsets stand in for a classic group's committed offsets: the new
  ones are planned with the same scenarios and Kafka's clamping (``kwire.tools.groups.plan_reset``)
  and sent with AlterShareGroupOffsets (API 91, v0) to the group's coordinator.  The next record
  the group is given is the new start offset; what was in flight is forgotten.
* ``--all-topics`` means every share-partition with a start offset (DescribeShareGroupOffsets).
* DeleteShareGroupOffsets (API 92, v0) takes whole topics: their share-partitions forget their
  state and the group's next fetch starts them again from ``share.auto.offset.reset``.
* Kafka's rule and message: only an empty share group is changed ("Share group 'G' is not
  empty."); the broker enforces it too (NON_EMPTY_GROUP), which a member joining between the
  check and the request meets.

kafka-python 3.0 has no calls for these APIs: the requests go to the group's coordinator
(FindCoordinator, key type 0) through the admin client's connection manager
(``group_types.to_coordinator``), with the classes of kwire's specs.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterable

from kafka.structs import OffsetAndMetadata, TopicPartition

from kwire.codecs import messages

from kwire.tools.common import ToolError, emit
from kwire.tools.group_types import share_group_offsets, to_coordinator

ALTER_KEY, DELETE_KEY = 91, 92
NON_EMPTY_GROUP = 68
SHARE_INACTIVE = ("Empty", "Dead")


def not_empty(group_id: str) -> str:
    """kafka-share-groups.sh's refusal to change the offsets of a group with members."""
    return f"Share group '{group_id}' is not empty."


def share_reset_refusal(group_id: str, state: str) -> str | None:
    """Kafka's refusal to reset a share group in ``state``, or None when it may be reset."""
    return None if state in SHARE_INACTIVE else not_empty(group_id)


def share_start_offsets(admin, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
    """The group's share-partitions with a start offset, shaped as committed offsets so a
    classic group's reset planning reads them.  Raises ToolError when the broker refuses."""
    return {TopicPartition(p["topic"], p["partition"]): OffsetAndMetadata(p["start_offset"], "", None)
            for p in share_group_offsets(admin, group_id) if p["start_offset"] is not None}


def _error_text(code: int, message: str | None) -> str:
    import kafka.errors
    error = kafka.errors.for_code(code)
    return message or f"{error.message}: {error.description}"


def _check_group(group_id: str, response) -> None:
    if response.error_code == NON_EMPTY_GROUP:
        raise ToolError(not_empty(group_id))
    if response.error_code:
        raise ToolError(f"share group '{group_id}': {_error_text(response.error_code, response.error_message)}")


def alter_share_offsets(admin, group_id: str, offsets: dict[TopicPartition, int],
                        advance: Callable[[int], None] = lambda n: None) -> None:
    """AlterShareGroupOffsets: each share-partition of ``offsets`` starts afresh at its offset;
    then ``advance(len(offsets))`` (a progress bar).  Raises ToolError with Kafka's message
    while the group has members, and naming the partitions the broker refused."""
    if not offsets:
        return
    cls = messages.API_CLASSES[ALTER_KEY][0][0]
    topic_cls = cls.AlterShareGroupOffsetsRequestTopic
    by_topic: dict[str, list] = {}
    for tp, offset in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            topic_cls.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=offset))
    response = to_coordinator(admin, group_id, cls(group_id=group_id, topics=[
        topic_cls(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))
    _check_group(group_id, response)
    refused = [f"{t.topic_name}-{p.partition_index}: {_error_text(p.error_code, p.error_message)}"
               for t in response.responses for p in t.partitions if p.error_code]
    advance(len(offsets))
    if refused:
        raise ToolError(f"the broker refused start offsets of share group '{group_id}': {', '.join(refused)}")


def delete_share_offsets(admin, group_id: str, topics: Iterable[str]) -> dict[str, str | None]:
    """DeleteShareGroupOffsets: topic -> None when its share-partitions' state was deleted,
    else the broker's error.  Raises ToolError for the group's own error (Kafka's message
    while it has members)."""
    cls = messages.API_CLASSES[DELETE_KEY][0][0]
    topics = sorted(set(topics))
    response = to_coordinator(admin, group_id, cls(group_id=group_id, topics=[
        cls.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))
    _check_group(group_id, response)
    out: dict[str, str | None] = {t: None for t in topics}
    for t in response.responses:
        out[t.topic_name] = _error_text(t.error_code, t.error_message) if t.error_code else None
    return out


def cmd_delete_share_offsets(admin, args) -> int:
    """``kwire groups delete-offsets`` of a share group: Kafka's TOPIC / STATUS table, or JSON."""
    group_id = args.group[0]
    if any(partitions is not None for _, partitions in args.topic_specs):
        raise ToolError(f"'{group_id}' is a share group: delete-offsets takes whole topics "
                        "(DeleteShareGroupOffsets deletes every share-partition of a topic)")
    try:
        statuses = delete_share_offsets(admin, group_id, (t for t, _ in args.topic_specs))
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        if args.output == "json":
            emit(args, {"group": group_id, "error": str(exc), "topics": []}, [], [])
        return 1
    failed = any(statuses.values())
    if failed:
        print("Error: Encountered some topic-level error, see the follow-up details.", file=sys.stderr)
    elif args.output == "table":
        print(f"Request succeeded for deleting offsets from share group {group_id}.")
    emit(args, {"group": group_id, "error": "topic errors" if failed else None,
                "topics": [{"topic": t, "error": e} for t, e in statuses.items()]},
         ["TOPIC", "STATUS"], [[t, f"Error: {e}" if e else "Successful"] for t, e in statuses.items()])
    return 1 if failed else 0
