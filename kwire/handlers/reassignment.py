"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455.

Both need the cluster permission the server checks before dispatch (ALTER, DESCRIBE on
CLUSTER: kwire.admin.acl_operations).  Kafka's ZooKeeper controller serves them itself;
any kwire broker does (the write goes to ZooKeeper and the controller picks it up), so a
client that sends them to the controller it found in Metadata is served there too.
The work is kwire.cluster.reassignment's; a single node can only "move" a partition to
itself.
"""
from __future__ import annotations

from kwire.handlers.registry import handles


@handles(45, 0, 1)
async def handle_alter_partition_reassignments(ctx, request):
    requested = {}
    for t in request.topics:
        for p in t.partitions:
            requested[(t.name, p.partition_index)] = None if p.replicas is None else list(p.replicas)
    allow = getattr(request, "allow_replication_factor_change", True)
    results = await ctx.broker.partitions.alter_reassignments(requested, allow)
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow, "error_code": 0, "error_message": None,
            "responses": [{"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": int(results[(t.name, p.partition_index)][0]),
                 "error_message": results[(t.name, p.partition_index)][1]} for p in t.partitions]}
                for t in request.topics]}


@handles(46, 0, 0)
async def handle_list_partition_reassignments(ctx, request):
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    found = await ctx.broker.partitions.list_reassignments(wanted)
    topics: dict[str, list[dict]] = {}
    for (name, p), a in found.items():
        topics.setdefault(name, []).append({"partition_index": p, "replicas": list(a.replicas),
                                            "adding_replicas": list(a.adding), "removing_replicas": list(a.removing)})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}
