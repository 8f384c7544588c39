"""LogManager: which partitions have files.  A single node holds every partition of its topics;
a cluster broker (``sparse``) only those it replicates, the others absent until it does."""
from __future__ import annotations

import os

from kwire.log.config import LogConfig
from kwire.log.manager import LogManager

from logkit import build_batch, decode


def manager(tmp_path, *, sparse: bool) -> LogManager:
    logs = LogManager([str(tmp_path / "logs")], lambda overrides: LogConfig(), node_id=1, sparse=sparse)
    logs.open(now_ms=0)
    return logs


def folders(tmp_path, topic: str) -> set[int]:
    return {int(n.rsplit("-", 1)[1]) for n in os.listdir(tmp_path / "logs") if n.startswith(f"{topic}-")}


def test_a_single_node_holds_every_partition_and_recreates_a_lost_folder(tmp_path):
    logs = manager(tmp_path, sparse=False)
    logs.create_topic("t", 3, {}, now_ms=0)
    assert folders(tmp_path, "t") == {0, 1, 2}
    logs.close()
    os.rename(tmp_path / "logs" / "t-1", tmp_path / "elsewhere")
    logs = manager(tmp_path, sparse=False)
    assert folders(tmp_path, "t") == {0, 1, 2}
    assert not any(p.absent for p in logs.get("t").partitions)


def test_a_cluster_broker_holds_files_only_for_its_replicas_across_a_restart(tmp_path):
    logs = manager(tmp_path, sparse=True)
    topic = logs.create_topic("t", 4, {}, now_ms=0, held={1, 3})
    assert folders(tmp_path, "t") == {1, 3}
    assert [p.absent for p in topic.partitions] == [True, False, True, False]
    assert [plog for _, plog in logs.all_partitions()] == [topic.partitions[1], topic.partitions[3]]
    absent = logs.partition("t", 0)          # known, empty, never readable as a log
    assert (absent.log_start_offset, absent.log_end_offset, absent.high_watermark) == (0, 0, 0)
    logs.add_partitions("t", 6, now_ms=0, held={5})
    assert folders(tmp_path, "t") == {1, 3, 5}
    logs.partition("t", 3).append(build_batch([b"kept"]), now_ms=0)
    logs.close()

    logs = manager(tmp_path, sparse=True)
    assert [p.absent for p in logs.get("t").partitions] == [True, False, True, False, True, False]
    assert [v for _, _, v in decode(logs.partition("t", 3).read(0, 1 << 20))] == [b"kept"]
    assert folders(tmp_path, "t") == {1, 3, 5}


def test_a_replica_comes_and_goes_with_its_files(tmp_path):
    logs = manager(tmp_path, sparse=True)
    topic = logs.create_topic("t", 2, {}, now_ms=0, held={0})
    (tmp_path / "logs" / "t-1").mkdir()               # a crash's leftover is not taken for the log
    (tmp_path / "logs" / "t-1" / "00000000000000000007.log").write_bytes(b"stale")
    plog = logs.open_replica(topic, 1, now_ms=0)
    assert logs.install_replica(topic, 1, plog)
    assert logs.partition("t", 1) is plog and plog.log_end_offset == 0
    assert not logs.install_replica(topic, 1, plog)   # held already: nothing changes
    plog.append(build_batch([b"a", b"b"]), now_ms=0)
    assert folders(tmp_path, "t") == {0, 1}

    detached = logs.detach_replica("t", 1)
    assert detached is plog and logs.partition("t", 1).absent
    assert logs.detach_replica("t", 1) is None
    detached.delete()
    assert folders(tmp_path, "t") == {0}
    logs.delete_topic("t")
    assert folders(tmp_path, "t") == set()
