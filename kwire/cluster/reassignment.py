"""Partition reassignment in a cluster (KIP-455): the ZooKeeper side of kwire.admin.reassignment.

* Any broker takes AlterPartitionReassignments: it validates each entry against the
  snapshot and writes the new RS/AR/RR into the topic znode, conditionally on the version
  it read (a lost race reads again).  The controller does the rest, level-triggered.
* The controller (``control``) completes reassignments whose target replicas are all in
  the ISR, sets right the states a cancellation left pointing outside the replica set,
  and turns the entries of ``/admin/reassign_partitions`` into reassignments.
* Every broker (``drop_unreplicated``) deletes its log of each partition it no longer
  replicates, once it neither leads nor follows it (it creates the log of one it starts
  replicating: ``ClusterNode._materialize``).
"""
from __future__ import annotations

import logging

import trio

from kwire.admin.reassignment import ReassignmentError, ReplicaAssignment, legacy_steps, validate_target
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.runtime import blocking

logger = logging.getLogger("kwire.cluster")

TopicPartition = tuple[str, int]
ATTEMPTS = 5           # conditional topic writes that lose a race are retried on a fresh read


async def refresh(node, timeout_s: float = 5.0) -> None:
    """Until a reconciliation that read ZooKeeper after this call began has finished."""
    for _ in range(2):          # the first may have read before this call
        changed = node.changed
        node._dirty.set()
        with trio.move_on_after(timeout_s):
            await changed.wait()


async def alter(node, requested: dict[TopicPartition, list[int] | None], *,
                allow_replication_factor_change: bool = True) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """AlterPartitionReassignments: start (a replica list) or cancel (None) the reassignment
    of each partition; the error code and message per partition."""
    results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    by_topic: dict[str, dict[int, list[int] | None]] = {}
    for (name, p), target in requested.items():
        by_topic.setdefault(name, {})[p] = target
    await refresh(node)
    for name, parts in by_topic.items():
        for _ in range(ATTEMPTS):
            snap = node.snapshot
            meta = snap.topics.get(name)
            changes: dict[int, ReplicaAssignment] = {}
            for p, target in parts.items():
                if meta is None or name in snap.deleting or p not in meta.assignment:
                    results[(name, p)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"Unknown topic or partition {name}-{p}.")
                    continue
                current = meta.replica_assignment(p)
                try:
                    validate_target(target, current, snap.brokers,
                                    allow_replication_factor_change=allow_replication_factor_change)
                except ReassignmentError as exc:
                    results[(name, p)] = (exc.code, exc.message)
                    continue
                changes[p] = current.cancelled() if target is None else current.reassign_to(target)
                results[(name, p)] = (ErrorCode.NONE, None)
            if not changes:
                break
            if await blocking.run_detached(node.zk.write_topic_assignment, name, meta, changes):
                for p, a in changes.items():
                    logger.info("%s-%d: reassignment %s: replicas %s, adding %s, removing %s", name, p,
                                "cancelled" if parts[p] is None else "started", list(a.replicas),
                                list(a.adding), list(a.removing))
                break
            await refresh(node)
        else:
            for p in parts:
                results[(name, p)] = (ErrorCode.REQUEST_TIMED_OUT,
                                      f"the assignment of {name} kept changing; retry")
    await refresh(node)
    return results


async def in_progress(node, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
    """ListPartitionReassignments: the partitions (all, or those asked) being reassigned."""
    await refresh(node)
    snap = node.snapshot
    wanted = None if partitions is None else set(partitions)
    found = {}
    for name, meta in sorted(snap.topics.items()):
        for p in sorted(meta.assignment):
            a = meta.replica_assignment(p)
            if a.in_progress and (wanted is None or (name, p) in wanted):
                found[(name, p)] = a
    return found


def reassigning(snap) -> dict[TopicPartition, ReplicaAssignment]:
    """Every partition of the snapshot with a reassignment in progress."""
    return {(name, p): a for name, meta in snap.topics.items() if name not in snap.deleting
            for p in set(meta.adding) | set(meta.removing)
            if (a := meta.replica_assignment(p)).in_progress}


async def control(node, snap, view, skip: set[TopicPartition]) -> bool:
    """The controller's reassignment work for this snapshot; True when it wrote something."""
    zk, epoch_version = node.zk, node.controller_epoch_version
    wrote = False
    fixes, completed = node.controller.on_reassignments(view, skip)
    if fixes:
        await blocking.run_detached(zk.write_states, fixes, epoch_version)
        wrote = True
    for name, (changes, writes) in completed.items():
        if await blocking.run_detached(zk.complete_reassignment, name, snap.topics[name], changes, writes,
                                       epoch_version):
            for w in writes:
                logger.info("controller: reassignment of %s-%d complete: replicas %s, leader %d, isr %s",
                            name, w.partition, list(changes[w.partition].replicas), w.state.leader,
                            list(w.state.isr))
        wrote = True
    entries = snap.legacy_reassignments
    if entries is not None:
        current = {tp: snap.topics[tp[0]].replica_assignment(tp[1]) for tp in entries
                   if tp[0] in snap.topics and tp[0] not in snap.deleting and tp[1] in snap.topics[tp[0]].assignment}
        starts, remaining = legacy_steps(entries, current, snap.brokers)
        by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
        for (name, p), a in starts.items():
            by_topic.setdefault(name, {})[p] = a
        for name, changes in by_topic.items():
            if name not in completed:      # its znode moved this round: the next one starts these
                await blocking.run_detached(zk.write_topic_assignment, name, snap.topics[name], changes)
                logger.info("controller: started reassignments of %s from %s: %s", name,
                            "/admin/reassign_partitions", {p: list(a.replicas) for p, a in changes.items()})
            wrote = True
        if remaining != entries:
            await blocking.run_detached(zk.set_legacy_reassignments, remaining)
            wrote = True
    return wrote


async def drop_unreplicated(node, snap) -> None:
    """Delete this broker's log of every partition it is not a replica of (any more), once it
    does not lead it: Kafka's StopReplica with delete after a reassignment removed it.  The
    partition stays known, absent (kwire.log.manager.AbsentReplica)."""
    logs = node.broker.logs
    for name, meta in snap.topics.items():
        topic = logs.get(name)
        if topic is None:
            continue
        for p, replicas in meta.assignment.items():
            if node.node_id in replicas or p >= len(topic.partitions) or topic.partitions[p].absent:
                continue
            tp = (name, p)
            if node.replicas.leader(tp) is not None:
                continue
            async with node.replicas.lock(tp):
                for fetcher in node.fetchers.values():
                    fetcher.forget(tp)
                node.broker.log_dir_mover.cancel(tp)
                plog = logs.detach_replica(name, p)
            if plog is None:
                continue
            await blocking.run_blocking(plog.delete)
            logger.info("%s-%d: deleted the local replica (broker %d is no longer a replica)", name, p, node.node_id)
