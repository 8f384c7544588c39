"""DescribeLogDirs (35): what each log dir of this broker holds, and how full its volume is;
AlterReplicaLogDirs (34): move a partition to another of its dirs.

As Kafka's ``ReplicaManager.describeLogDirs`` answers it: one result per ``log.dirs`` entry
(absolute path), listing the partitions stored there -- all of them when the request's topics
are null, else only the ones asked for that live here -- with

- ``partition_size``: the bytes of the partition's segment files (``.log``; indexes are not
  counted, as in Kafka's ``UnifiedLog.size``);
- ``offset_lag``: ``max(high watermark - log end offset, 0)``, Kafka's formula, so 0 for a
  leader and for a follower that has what its leader acknowledged; -1 for an offline
  partition (Kafka's INVALID_OFFSET_LAG for a log that is not online);
- ``is_future_key``: true for the copy of a partition being moved into the dir by
  AlterReplicaLogDirs (kwire.services.log_dirs), whose ``offset_lag`` is how far the copy
  is behind the partition (Kafka's future replica); the partition itself stays listed in
  its current dir until the switch;
- v4+: ``total_bytes`` / ``usable_bytes`` of the dir's volume (statvfs; usable is what an
  unprivileged writer may still use).  A dir whose volume cannot be read answers
  KAFKA_STORAGE_ERROR with no partitions, as Kafka answers an offline dir.

Kafka 4.0 serves v1-v4 (v0 is gone; v5's ``is_cordoned`` belongs to a later release).  The
ACL (DESCRIBE on the cluster) is the server's gate before dispatch; refused, the answer is an
empty result list with CLUSTER_AUTHORIZATION_FAILED at top level (v3+).
"""
from __future__ import annotations

import os

from kwire.runtime.blocking import run_blocking
from kwire.codecs.errors import ErrorCode

from kwire.handlers.registry import handles

INVALID_OFFSET_LAG = -1


def volume_usage(log_dir: str) -> tuple[int, int] | None:
    """(total bytes, usable bytes) of the volume holding ``log_dir``, or None if it cannot be
    read.  Blocks on the file system: run it off the Trio thread."""
    try:
        st = os.statvfs(log_dir)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def partition_entry(index: int, plog) -> dict:
    if plog.health.offline:
        lag = INVALID_OFFSET_LAG
    else:
        lag = max(plog.high_watermark - plog.log_end_offset, 0)
    return {"partition_index": index, "partition_size": plog.size_bytes(), "offset_lag": lag,
            "is_future_key": False}


def future_entry(index: int, move) -> dict:
    return {"partition_index": index, "partition_size": move.future.size_bytes(), "offset_lag": move.lag,
            "is_future_key": True}


def dir_entries(logs, mover, wanted: dict[str, set[int]] | None) -> dict[str, list[dict]]:
    """The topic entries of every log dir: each partition in the dir holding it, a move's
    copy in its destination; a topic none of whose partitions was asked for is left out."""
    by_dir: dict[str, dict[str, list[dict]]] = {d: {} for d in logs.log_dirs}
    for topic in logs.topics.values():
        if wanted is not None and topic.name not in wanted:
            continue
        for i, plog in enumerate(topic.partitions):
            if plog.absent or (wanted is not None and i not in wanted[topic.name]):
                continue
            by_dir.setdefault(os.path.dirname(plog.path), {}).setdefault(topic.name, []).append(
                partition_entry(i, plog))
            move = mover.future_of(plog) if mover is not None else None
            if move is not None:
                by_dir.setdefault(move.dest_dir, {}).setdefault(topic.name, []).append(future_entry(i, move))
    return {d: [{"name": name, "partitions": parts} for name, parts in topics.items()]
            for d, topics in by_dir.items()}


def volume_usages(log_dirs: list[str]) -> dict[str, tuple[int, int] | None]:
    return {d: volume_usage(d) for d in log_dirs}


@handles(35, 1, 4)
async def handle_describe_log_dirs(ctx, request):
    logs = ctx.broker.logs
    wanted = None
    if request.topics is not None:
        wanted = {}
        for t in request.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    usages = await run_blocking(volume_usages, list(logs.log_dirs))
    # no await from here on: the topic table is read in one go
    results = []
    for log_dir, topics in dir_entries(logs, getattr(ctx.broker, "log_dir_mover", None), wanted).items():
        usage = usages.get(log_dir)
        if usage is None:
            results.append({"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": log_dir,
                            "topics": [], "total_bytes": -1, "usable_bytes": -1})
        else:
            results.append({"error_code": 0, "log_dir": log_dir, "topics": topics,
                            "total_bytes": usage[0], "usable_bytes": usage[1]})
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}


@handles(34, 1, 2)
async def handle_alter_replica_log_dirs(ctx, request):
    """AlterReplicaLogDirs: move each listed partition of this broker into the dir given
    (kwire.services.log_dirs); answered at once, the copy goes on in the background."""
    mover = ctx.broker.log_dir_mover
    results: dict[str, list[dict]] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = mover.alter(t.name, p, d.path)
                results.setdefault(t.name, []).append({"partition_index": p, "error_code": int(code)})
    return {"throttle_time_ms": 0, "results": [{"topic_name": name, "partitions": parts}
                                               for name, parts in results.items()]}
