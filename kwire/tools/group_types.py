"""``kwire groups`` for Kafka 4.x's group types: share groups (KIP-932) and consumer groups of
the KIP-848 protocol, which DescribeGroups does not describe.

* A share group's ``describe`` shows each share-partition's start offset (every record
  below it is delivery-complete) and its lag (records up to the high watermark not
  delivered and acknowledged yet), from DescribeShareGroupOffsets, as Kafka's
  kafka-share-groups.sh --describe; ``--members`` comes from ShareGroupDescribe (DescribeGroups
  v6 answers GROUP_ID_NOT_FOUND for a group that is not classic, as Kafka 4.x).
* A KIP-848 consumer group's ``describe`` shows its committed offsets and lag as for a
  classic group, with the members from ConsumerGroupDescribe.
* ``describe_consumer_groups`` / ``describe_share_groups`` describe many groups with one
  request per coordinator (the console's groups pages use them too).

kafka-python 3.0 has no calls for these APIs; the requests go to the group's coordinator
through the admin client's own connection manager, with the classes of kwire's specs.
"""
from __future__ import annotations

from typing import Any

from kafka.structs import TopicPartition

from kwire.codecs import messages

from kwire.tools.common import ToolError, print_table

SHARE_OFFSETS_KEY, CONSUMER_DESCRIBE_KEY, SHARE_DESCRIBE_KEY = 90, 69, 77
SHARE_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
_SHARE_KEYS = ["group", "topic", "partition", "start_offset", "lag"]


def group_types(admin) -> dict[str, str]:
    """group id -> its type (classic, consumer, share) as ListGroups v5 names it."""
    return {g["group_id"]: g.get("group_type") or "classic" for g in admin.list_groups()}


def to_coordinator(admin, group_id: str, request):
    """``request`` sent to the group's coordinator (FindCoordinator, key type 0); its response."""
    async def call():
        node_id = await admin._find_coordinator_id(group_id)
        return await admin._manager.send(request, node_id=node_id)
    return admin._manager.run(call)


def _to_coordinators(admin, group_ids, make_request) -> list:
    """The described groups of ``make_request(ids)`` sent to each coordinator of ``group_ids``
    with the ids it coordinates: one request per coordinator."""
    async def call():
        found = await admin._find_coordinator_ids(list(group_ids))
        by_node: dict[int, list[str]] = {}
        for group_id, node_id in found.items():
            by_node.setdefault(node_id, []).append(group_id)
        groups = []
        for node_id, ids in by_node.items():
            response = await admin._manager.send(make_request(ids), node_id=node_id)
            groups.extend(response.groups)
        return groups
    return admin._manager.run(call)


def share_group_offsets(admin, group_id: str) -> list[dict]:
    """The share-partitions of ``group_id`` (DescribeShareGroupOffsets v1, every topic), each
    {group, topic, partition, start_offset, lag}; None where the broker does not know them.
    Raises ToolError when the broker refuses the group."""
    cls = messages.API_CLASSES[SHARE_OFFSETS_KEY][0][1]
    response = to_coordinator(admin, group_id, cls(groups=[
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
    return partitions


def describe_share_offsets(admin, group_id: str, args) -> dict:
    """``kwire groups describe`` of a share group: its share-partitions, as a table or JSON."""
    partitions = share_group_offsets(admin, group_id)
    if args.output == "table" and partitions:
        print_table(SHARE_COLUMNS, [[d[k] for k in _SHARE_KEYS] for d in partitions])
    return {"group": group_id, "type": "share", "partitions": partitions}


def consumer_group_members(admin, group_id: str, share: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """(state, members) of a KIP-848 consumer group (ConsumerGroupDescribe v0), or with
    ``share`` of a share group (ShareGroupDescribe); each member {consumer_id,
    group_instance_id, host, client_id, assignment: [TopicPartition]}.  Raises ToolError when
    the coordinator refuses the group."""
    described = (describe_share_groups if share else describe_consumer_groups)(admin, [group_id])[group_id]
    if described["error"]:
        raise ToolError(f"group '{group_id}': {described['error']}")
    return described["state"], described["members"]


def _described(group, members: list[dict[str, Any]]) -> dict[str, Any]:
    error = (group.error_message or f"error {group.error_code}") if group.error_code else None
    return {"state": "Dead" if error else group.group_state, "assignor": group.assignor_name or None,
            "epoch": group.group_epoch, "error": error, "error_code": group.error_code, "members": members}


def _assigned(assignment) -> list[TopicPartition]:
    return [TopicPartition(tp.topic_name, p) for tp in assignment.topic_partitions for p in tp.partitions]


def describe_consumer_groups(admin, group_ids) -> dict[str, dict[str, Any]]:
    """KIP-848 consumer groups (ConsumerGroupDescribe v0, one request per coordinator): group id
    -> {state, assignor, epoch, error, error_code, members}; each member {consumer_id,
    group_instance_id, host, client_id, assignment: [TopicPartition]}.  A group the coordinator
    refuses (GROUP_ID_NOT_FOUND for a group of another type) has its message in ``error``."""
    cls = messages.API_CLASSES[CONSUMER_DESCRIBE_KEY][0][0]
    out = {}
    for group in _to_coordinators(admin, group_ids, lambda ids: cls(group_ids=ids,
                                                                    include_authorized_operations=False)):
        members = [{"consumer_id": m.member_id, "group_instance_id": m.instance_id, "host": m.client_host,
                    "client_id": m.client_id, "assignment": _assigned(m.assignment)} for m in group.members]
        out[group.group_id] = _described(group, members)
    return out


def describe_share_groups(admin, group_ids) -> dict[str, dict[str, Any]]:
    """Share groups (ShareGroupDescribe v1, one request per coordinator): as
    ``describe_consumer_groups``, each member also with its rack, member epoch and
    subscribed topics (``subscribed``); ``group_instance_id`` is always None."""
    cls = messages.API_CLASSES[SHARE_DESCRIBE_KEY][0][1]
    out = {}
    for group in _to_coordinators(admin, group_ids, lambda ids: cls(group_ids=ids,
                                                                    include_authorized_operations=False)):
        members = [{"consumer_id": m.member_id, "group_instance_id": None, "host": m.client_host,
                    "client_id": m.client_id, "rack": m.rack_id, "member_epoch": m.member_epoch,
                    "subscribed": sorted(m.subscribed_topic_names or ()), "assignment": _assigned(m.assignment)}
                   for m in group.members]
        out[group.group_id] = _described(group, members)
    return out
