"""AlterReplicaLogDirs on three brokers with two log dirs each: the leader's and a follower's
replica move to their other dir while an acks=all producer writes; nothing acknowledged is
lost and the replicas stay byte-identical below the high watermark.  A replica a broker does
not hold yet is answered REPLICA_NOT_AVAILABLE and created in the dir asked for once a
reassignment adds it, as Kafka does: here ``kwire reassign`` with a ``log_dirs`` entry."""
from __future__ import annotations

import json
import os

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError, ReplicaNotAvailableError

from kwire.testing.cluster import ClusterProcess
from tests.faults.replicas import compare_replicas
from tests.support.cluster_state import reassign
from tests.support.counting import (join_producer, partition_states, produce_in_background, read_all, tally,
                                    total, wait_acknowledged, wait_for)
from tests.cluster.conftest import require_zookeeper

pytestmark = pytest.mark.clients


def test_the_leaders_and_a_followers_replica_move_dirs_under_acks_all_load(tmp_path):
    require_zookeeper()
    cluster = ClusterProcess(3, data_dir=tmp_path, properties={
        "replica.alter.log.dirs.io.max.bytes.per.second": 300_000})
    dirs = {i: [str(tmp_path / f"broker-{i}" / "a"), str(tmp_path / f"broker-{i}" / "b")] for i in cluster.brokers}
    for i, b in cluster.brokers.items():
        b.properties["log.dirs"] = ",".join(dirs[i])
    try:
        cluster.start()
        cluster.wait_until_ready()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("dirs", num_partitions=1, replica_assignment=[[1, 2, 3]]),
                             NewTopic("later", num_partitions=1, replica_assignment=[[1, 2]])])["dirs"].result(30)
        wait_for(lambda: len(partition_states(cluster.zookeeper.connect, "dirs")[0]["isr"]) == 3, 30, "a full ISR")
        thread, acked = produce_in_background("confluent", cluster.bootstrap, "dirs", 15000, partitions=1,
                                              pause_every=20, timeout=90)
        wait_acknowledged(thread, acked, 3000)

        def where(i: int) -> str:
            [d] = [d for d in dirs[i] if os.path.isdir(os.path.join(d, "dirs-0"))]
            return d
        leader = partition_states(cluster.zookeeper.connect, "dirs")[0]["leader"]
        follower = next(i for i in (1, 2, 3) if i != leader)
        moves = {TopicPartitionReplica("dirs", 0, i): next(d for d in dirs[i] if d != where(i))
                 for i in (leader, follower)}
        # broker 3 holds no replica of "later": its log goes where last asked once it is one (a
        # dir other than the one the topic's description is kept in, where it would go otherwise)
        def described_in(i: int) -> list[str]:
            return [d for d in dirs[i] if os.path.exists(os.path.join(d, "__kwire_topics", "later.json"))]
        wait_for(lambda: described_in(3), 20, "broker 3 to know topic later")
        [home] = described_in(3)
        asked = next(d for d in dirs[3] if d != home)
        later = TopicPartitionReplica("later", 0, 3)
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            assert kafka_admin.alter_replica_log_dirs(moves) == {r: NoError for r in moves}
            assert kafka_admin.alter_replica_log_dirs({later: home}) == {later: ReplicaNotAvailableError}
        finally:
            kafka_admin.close()
        (tmp_path / "later.json").write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "later", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", "any", asked]}]}))
        run = reassign(cluster, "--execute", "--reassignment-json-file", str(tmp_path / "later.json"))
        assert run.returncode == 0, run.stderr
        assert "Successfully started log directory move for: later-0-3" in run.stdout
        wait_for(lambda: "Reassignment of replica later-0-3 completed successfully." in reassign(
            cluster, "--verify", "--reassignment-json-file", str(tmp_path / "later.json")).stdout, 30,
            "--verify to report the replica in its log dir")
        assert os.path.isdir(os.path.join(asked, "later-0")) and not os.path.exists(os.path.join(home, "later-0"))
        def moved(broker: int, dest: str) -> bool:
            old = next(x for x in dirs[broker] if x != dest)
            return not os.path.exists(os.path.join(old, "dirs-0")) and \
                not os.path.exists(os.path.join(dest, "dirs-0", ".kwire-future"))
        wait_for(lambda: all(moved(r.broker_id, d) for r, d in moves.items()), 60, "both replicas in their new dirs")
        assert thread.is_alive(), "the producer ended before the moves: they did not happen under load"
        join_producer(thread, 120)
        seen = read_all(cluster.bootstrap, "dirs", 1, expected=total(acked))
        counts = tally(acked, seen)
        assert counts["acknowledged"] == 15000 and counts["lost"] == 0 and counts["duplicates"] == 0, counts
        hw = len(seen[0])
        assert compare_replicas({i: where(i) for i in (1, 2, 3)}, "dirs", {0: hw}) == []
    finally:
        cluster.close()
