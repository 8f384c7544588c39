"""``kwire groups`` for Kafka 4.x's group types: share groups (KIP-932) and consumer groups of
the KIP-848 protocol, which DescribeGroups does not describe.

* A share group's ``describe`` shows each share-partition's start offset (every record
  below it is delivery-complete) and its lag (records up to the high watermark not
  delivered and acknowledged yet), from DescribeShareGroupOffsets, as Kafka's
  kafka-share-groups.sh --describe; ``--members`` comes from DescribeGroups, which kwire
  answers for share groups.
* A KIP-848 consumer group's ``describe`` shows its committed offsets and lag as for a
  classic group, with the members from ConsumerGroupDescribe.

kafka-python 3.0 has no calls for these APIs; the requests go to the group's coordinator
through the admin client's own connection manager, with the classes of kwire's specs.
"""
from __future__ import annotations

from typing import Any

from kafka.structs import TopicPartition

from kwire.codecs import messages

from kwire.tools.common import ToolError, print_table

SHARE_OFFSETS_KEY, CONSUMER_DESCRIBE_KEY = 90, 69
SHARE_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
_SHARE_KEYS = ["group", "topic", "partition", "start_offset", "lag"]


def group_types(admin) -> dict[str, str]:
    """group id -> its type (classic, consumer, share) as ListGroups v5 names it."""
    return {g["group_id"]: g.get("group_type") or "classic" for g in admin.list_groups()}


def _to_coordinator(admin, group_id: str, request):
    async def call():
        node_id = await admin._find_coordinator_id(group_id)
        return await admin._manager.send(request, node_id=node_id)
    return admin._manager.run(call)


def describe_share_offsets(admin, group_id: str, args) -> dict:
    """The share-partitions of ``group_id`` (DescribeShareGroupOffsets v1, every topic)."""
    cls = messages.API_CLASSES[SHARE_OFFSETS_KEY][0][1]
    response = _to_coordinator(admin, group_id, cls(groups=[
        cls.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]))
    group = response.groups[0]
    if group.error_code:
        raise ToolError(f"group '{group_id}': {group.error_message or f'error {group.error_code}'}")
    partitions = []
    for topic in group.topics:
        for p in topic.partitions:
            known = p.error_code == 0 and p.start_offset >= 0
            partitions.append({"group": group_id, "topic": topic.topic_name, "partition": p.partition_index,
                               "start_offset": p.start_offset if known else None,
                               "lag": p.lag if known and p.lag >= 0 else None})
    partitions.sort(key=lambda d: (d["topic"], d["partition"]))
    if args.output == "table" and partitions:
        print_table(SHARE_COLUMNS, [[d[k] for k in _SHARE_KEYS] for d in partitions])
    return {"group": group_id, "type": "share", "partitions": partitions}


def consumer_group_members(admin, group_id: str) -> tuple[str, list[dict[str, Any]]]:
    """(state, members) of a KIP-848 consumer group (ConsumerGroupDescribe v0); each member
    {consumer_id, group_instance_id, host, client_id, assignment: [TopicPartition]}."""
    cls = messages.API_CLASSES[CONSUMER_DESCRIBE_KEY][0][0]
    response = _to_coordinator(admin, group_id, cls(group_ids=[group_id], include_authorized_operations=False))
    group = response.groups[0]
    if group.error_code:
        raise ToolError(f"group '{group_id}': {group.error_message or f'error {group.error_code}'}")
    members = []
    for m in group.members:
        assignment = [TopicPartition(tp.topic_name, p) for tp in m.assignment.topic_partitions
                      for p in tp.partitions]
        members.append({"consumer_id": m.member_id, "group_instance_id": m.instance_id, "host": m.client_host,
                        "client_id": m.client_id, "assignment": assignment})
    return group.group_state, members
