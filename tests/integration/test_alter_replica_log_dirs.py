"""AlterReplicaLogDirs (34): a partition moves to another log dir while a producer writes to it.

What an operator checks: DescribeLogDirs shows the copy (the "future" replica) in the new dir
with its lag while it runs, then the partition in the new dir only; the old folder is gone;
every acknowledged record is there once, also after a restart; a kill -9 in the middle of a
copy leaves the partition whole in its old dir and the unfinished copy is removed.
"""
from __future__ import annotations

import json
import os
import time

import pytest
from kafka import KafkaProducer, TopicPartitionReplica
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError

from kwire.testing.process import BrokerProcess
from tests.support.java import java_available, run_to_end
from tests.support.counting import (join_producer, produce_in_background, read_all, tally, total,
                                    wait_acknowledged, wait_for)

pytestmark = pytest.mark.clients

RATE = 400_000                   # replica.alter.log.dirs.io.max.bytes.per.second
PREFILL = 160                     # records of 10 kB: 1.6 MB, about 4 s to copy at RATE


def dirs_of(tmp_path) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def start(tmp_path) -> BrokerProcess:
    return BrokerProcess(str(tmp_path / "data"), properties={
        "log.dirs": ",".join(dirs_of(tmp_path)), "replica.alter.log.dirs.io.max.bytes.per.second": RATE}).start()


def holder(tmp_path, topic: str) -> str:
    """The log dir whose folder holds partition 0 of ``topic`` (from the file system)."""
    [d] = [d for d in dirs_of(tmp_path) if os.path.isdir(os.path.join(d, f"{topic}-0"))]
    return d


def described(admin, topic: str) -> dict[tuple[str, bool], dict]:
    """{(dir, is_future): partition entry} of partition 0 of ``topic``."""
    [answer] = admin.describe_log_dirs(topic_partitions={topic: [0]})
    return {(r["log_dir"], p["is_future_key"]): p for r in answer["log_dirs"] for t in r["topics"]
            for p in t["partitions"] if t["name"] == topic}


def prefill(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for _ in range(PREFILL):
        producer.send(topic, b"-1" + b" " * 9998, partition=0)   # read back as -1
    producer.flush(30)
    producer.close()


@pytest.fixture
def loaded_broker(tmp_path):
    """A started broker over two dirs, and ``ready(topic)``: the topic created with PREFILL
    records in partition 0, returning (broker id, the dir holding it, the other dir)."""
    b = start(tmp_path)

    def ready(topic: str) -> tuple[int, str, str]:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            b_id = admin.describe_cluster()["controller_id"]
            admin.create_topics([NewTopic(topic, 1, 1)])
        finally:
            admin.close()
        prefill(b.bootstrap, topic)
        source = holder(tmp_path, topic)
        [dest] = [d for d in dirs_of(tmp_path) if d != source]
        return b_id, source, dest
    try:
        yield b, ready
    finally:
        b.close()


def test_a_partition_moves_to_another_dir_under_load_and_survives_a_restart(tmp_path, loaded_broker):
    b, ready = loaded_broker
    b_id, source, dest = ready("moving")
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    thread, acked = produce_in_background("kafka-python", b.bootstrap, "moving", 8000, partitions=1,
                                          pause_every=10, timeout=60)
    wait_acknowledged(thread, acked, 100)
    replica = TopicPartitionReplica("moving", 0, b_id)
    assert admin.alter_replica_log_dirs({replica: dest}) == {replica: NoError}
    progress = wait_for(lambda: described(admin, "moving").get((dest, True)), 10, "the copy in DescribeLogDirs")
    assert progress["offset_lag"] > 0 and (source, False) in described(admin, "moving")
    assert thread.is_alive(), "the producer ended before the copy: the move did not happen under load"
    wait_for(lambda: set(described(admin, "moving")) == {(dest, False)}, 60, "the switch to the new dir")
    assert not os.path.exists(os.path.join(source, "moving-0"))
    join_producer(thread, 120)
    admin.close()
    seen = read_all(b.bootstrap, "moving", 1, expected=PREFILL + total(acked))
    assert seen[0][:PREFILL] == [-1] * PREFILL
    counts = tally(acked, {0: seen[0][PREFILL:]})
    assert counts["lost"] == 0 and counts["duplicates"] == 0 and counts["acknowledged"] == 8000, counts

    b.stop()
    b.start()
    assert holder(tmp_path, "moving") == dest
    again = read_all(b.bootstrap, "moving", 1, expected=PREFILL + 8000)
    assert again == seen


def test_a_kill_9_during_the_copy_keeps_the_partition_whole_in_its_old_dir(tmp_path, loaded_broker):
    b, ready = loaded_broker
    b_id, source, dest = ready("killed")
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    replica = TopicPartitionReplica("killed", 0, b_id)
    assert admin.alter_replica_log_dirs({replica: "/nowhere"}) == {replica: LogDirNotFoundError}
    assert admin.alter_replica_log_dirs({TopicPartitionReplica("absent", 0, b_id): dest}) == \
        {TopicPartitionReplica("absent", 0, b_id): UnknownTopicOrPartitionError}
    assert admin.alter_replica_log_dirs({replica: dest}) == {replica: NoError}
    wait_for(lambda: described(admin, "killed").get((dest, True)), 10, "the copy to start")
    admin.close()
    time.sleep(0.5)
    b.kill()
    assert os.path.exists(os.path.join(dest, "killed-0")), "the copy was not under way"
    b.start()
    assert holder(tmp_path, "killed") == source, "the unfinished copy was not removed"
    seen = read_all(b.bootstrap, "killed", 1, expected=PREFILL)
    assert seen[0] == [-1] * PREFILL


def test_the_java_admin_client_moves_a_replica_and_follows_it_with_describe_replica_log_dirs(tmp_path, loaded_broker):
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    b, ready = loaded_broker
    b_id, source, dest = ready("javadir")
    out, code = run_to_end("JcMoveLogDir", b.bootstrap, b_id, "javadir", 0, dest,
                           stderr_path=tmp_path / "stderr.txt", timeout=120)
    checks = {c.pop("check"): c for c in map(json.loads, out.splitlines())}
    assert code == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert checks["alter"]["ok"], checks["alter"]
    assert checks["moved"] == {**checks["moved"], "ok": True, "future_seen": dest, "current": dest}, checks
    assert holder(tmp_path, "javadir") == dest
    assert read_all(b.bootstrap, "javadir", 1, expected=PREFILL)[0] == [-1] * PREFILL
