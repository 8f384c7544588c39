"""``kwire reassign``'s log dir moves: the ``log_dirs`` of Kafka's reassignment JSON, carried
out with AlterReplicaLogDirs (--execute) and read back with DescribeLogDirs (--verify).
Kafka's messages are built in kwire.admin.reassign_plan."""
from __future__ import annotations

import time
from typing import Mapping

from kwire.admin import reassign_plan as plan
from kwire.admin.reassign_plan import TopicPartition
from kwire.tools.common import ToolError

LOG_DIR_RETRY_S = 0.5


def move_log_dirs(admin, dirs: Mapping[plan.Replica, str], timeout_s: float) -> None:
    """AlterReplicaLogDirs for each replica, asked again while its broker answers
    REPLICA_NOT_AVAILABLE (it does not hold the replica yet: a reassignment adding it has just
    started), as Kafka's tool does; ToolError for another error or after ``timeout_s``."""
    from kafka import TopicPartitionReplica
    from kafka.errors import NoError, ReplicaNotAvailableError
    pending = dict(dirs)
    deadline = time.monotonic() + timeout_s
    while pending:
        result = admin.alter_replica_log_dirs({TopicPartitionReplica(*r): d for r, d in pending.items()})
        failed = {}
        for r, error in result.items():
            replica = (r.topic, r.partition, r.broker_id)
            if error is NoError:
                pending.pop(replica, None)
            elif error is not ReplicaNotAvailableError:
                failed[replica] = error
        if failed:
            raise ToolError("Error moving log dirs:\n" + "\n".join(
                f"{plan.replica_name(r)} to {dirs[r]}: {failed[r].message}" for r in sorted(failed)))
        if pending and time.monotonic() > deadline:
            raise ToolError("Timed out before log directory moves could be started for "
                            + ", ".join(plan.replica_name(r) for r in sorted(pending)))
        if pending:
            time.sleep(LOG_DIR_RETRY_S)
    print(f"Successfully started log directory move{'' if len(dirs) == 1 else 's'} for: "
          + ",".join(plan.replica_name(r) for r in sorted(dirs)))


def replica_dirs(admin, replicas) -> dict[int, dict[TopicPartition, tuple[str | None, str | None]] | None]:
    """DescribeLogDirs of each broker of ``replicas``: {broker: {tp: (its log dir, its future
    replica's dir or None)}}, None for a broker that did not answer."""
    from kafka.errors import KafkaError
    found: dict[int, dict | None] = {}
    for b in sorted({broker for _, _, broker in replicas}):
        wanted: dict[str, list[int]] = {}
        for t, p, broker in replicas:
            if broker == b:
                wanted.setdefault(t, []).append(p)
        try:
            [answer] = admin.describe_log_dirs(topic_partitions=wanted, brokers=[b])
        except KafkaError:
            found[b] = None
            continue
        held: dict[TopicPartition, tuple[str | None, str | None]] = {}
        for d in answer["log_dirs"]:
            for t in d["topics"] if d["error_code"] == 0 else ():
                for p in t["partitions"]:
                    current, future = held.get((t["name"], p["partition_index"]), (None, None))
                    held[(t["name"], p["partition_index"])] = \
                        (current, d["log_dir"]) if p["is_future_key"] else (d["log_dir"], future)
        found[b] = held
    return found
