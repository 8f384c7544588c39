"""Partition reassignment (KIP-455) on three brokers, with a stock producer writing throughout.

What an operator checks after a move: the partition's replicas are the target, every one of
them in the ISR, the removed brokers no longer hold a copy, and the producer's acknowledged
records are all there, once each.
"""
from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

from tests.support.cluster_state import controller_of, create, held, local_bytes, topic_znode
from tests.support.counting import (join_producer, partition_states, produce_in_background, read_all, tally,
                                    total, wait_acknowledged, wait_for)

pytestmark = pytest.mark.clients








def settled(cluster, topic: str, targets: dict[int, list[int]]) -> bool:
    znode = topic_znode(cluster, topic)
    states = partition_states(cluster.zookeeper.connect, topic)
    return (not znode.get("adding_replicas") and not znode.get("removing_replicas")
            and all(znode["partitions"][str(p)] == t and sorted(states[p]["isr"]) == sorted(t)
                    and states[p]["leader"] in t for p, t in targets.items()))


def test_kafka_python_moves_replicas_while_a_producer_writes_and_loses_nothing(cluster):
    create(cluster, "moving", [[1, 2], [2, 1]])
    thread, acked = produce_in_background("confluent", cluster.bootstrap, "moving", 20000, partitions=2,
                                          pause_every=20, timeout=90)
    wait_acknowledged(thread, acked, 1000)
    before = {b: local_bytes(cluster, b, "moving", 0) for b in (1, 2)}
    assert all(before.values()), before
    assert held(cluster, 3, "moving") == set()        # no replica there yet: no files
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        # p0 leaves both its brokers (the leader moves to 3); p1 gains broker 3 and keeps its leader
        targets = {0: [3], 1: [2, 1, 3]}
        result = admin.alter_partition_reassignments({TopicPartition("moving", p): t for p, t in targets.items()})
        assert result == {TopicPartition("moving", 0): None, TopicPartition("moving", 1): None}
        wait_for(lambda: settled(cluster, "moving", targets), 60, "the reassignments to complete")
        assert admin.list_partition_reassignments() == {}
        assert thread.is_alive(), "the move outlasted the producer: it did not happen under load"
    finally:
        admin.close()
    join_producer(thread, 120)
    states = partition_states(cluster.zookeeper.connect, "moving")
    assert states[0]["leader"] == 3 and states[1]["leader"] == 2, states
    # the brokers that left partition 0 deleted their copies; broker 3 holds the data
    wait_for(lambda: 0 not in held(cluster, 1, "moving") and 0 not in held(cluster, 2, "moving"),
             20, "the removed replicas' copies to be deleted")
    assert local_bytes(cluster, 3, "moving", 0) > 0
    seen = read_all(cluster.bootstrap, "moving", 2, expected=sum(len(v) for v in acked.values()))
    counts = tally(acked, seen)
    assert counts["lost"] == 0 and counts["duplicates"] == 0 and counts["out_of_order"] == 0, counts
    assert counts["acknowledged"] == 20000, counts




def test_a_stuck_reassignment_is_listed_and_cancelled_and_bad_targets_are_refused(cluster_factory):
    # the paused broker's ZooKeeper session outlasts the test: it stays live, just silent
    cluster = cluster_factory(3, properties={"zookeeper.session.timeout.ms": 30000})
    # the admin client talks to the controller: the broker paused is another one
    silent = max(b for b in (1, 2, 3) if b != controller_of(cluster))
    first, second = [b for b in (1, 2, 3) if b != silent]
    create(cluster, "stuck", [[first, second]])
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    tp = TopicPartition("stuck", 0)
    try:
        result = admin.alter_partition_reassignments({tp: [1, 2, 99], TopicPartition("stuck", 5): [1],
                                                      TopicPartition("nowhere", 0): [1]})
        assert result == {tp: InvalidReplicationAssignmentError, TopicPartition("stuck", 5): UnknownTopicOrPartitionError,
                          TopicPartition("nowhere", 0): UnknownTopicOrPartitionError}
        assert admin.alter_partition_reassignments({tp: [1, 1]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}

        cluster.pause(silent)                  # the new replica cannot catch up
        try:
            assert admin.alter_partition_reassignments({tp: [second, silent]}) == {tp: None}
            listed = admin.list_partition_reassignments()
            assert listed == {tp: {"replicas": [second, silent, first], "adding_replicas": [silent],
                                   "removing_replicas": [first]}}, listed
            assert topic_znode(cluster, "stuck")["adding_replicas"] == {"0": [silent]}
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            assert admin.list_partition_reassignments() == {}
            znode = topic_znode(cluster, "stuck")
            # back to the original replicas (in the reassignment's order, as Kafka's reassignTo(origin))
            assert sorted(znode["partitions"]["0"]) == sorted([first, second]) and not znode["adding_replicas"], znode
        finally:
            cluster.resume(silent)
    finally:
        admin.close()
    states = partition_states(cluster.zookeeper.connect, "stuck")
    assert states[0]["leader"] == first and sorted(states[0]["isr"]) == sorted([first, second]), states


def test_a_zookeeper_era_reassign_partitions_znode_is_carried_out_and_removed(cluster):
    from kazoo.client import KazooClient
    create(cluster, "legacy", [[1, 2], [2, 3]])
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": "legacy", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]},
            {"topic": "legacy", "partition": 1, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}).encode(),
            makepath=True)
        wait_for(lambda: settled(cluster, "legacy", {0: [3, 1], 1: [1, 2]}), 60, "the reassignments to complete")
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, 20, "the znode to be removed")
    finally:
        zk.stop()


def test_a_throttled_move_copies_at_the_throttle_rate_while_producers_keep_writing(cluster_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    # two 1 s samples: the rate limits within a second instead of after Kafka's 10 s warm-up
    # (200 kB fetches: a fetch that starts under the rate cannot overshoot it by a whole MB)
    cluster = cluster_factory(3, properties={"replication.quota.window.num": 2, "replica.fetch.max.bytes": 200_000})
    create(cluster, "heavy", [[1, 2]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    value = b"-1" + b" " * 9998                             # read back as -1 by read_all
    for _ in range(300):                                   # 3 MB to copy
        producer.produce("heavy", value, partition=0)
    assert producer.flush(30) == 0
    rate = 600_000
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    brokers = [ConfigResource("BROKER", str(b), incremental_configs=[
        ConfigEntry(k, str(rate), incremental_operation=AlterConfigOpType.SET)
        for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]) for b in (1, 2, 3)]
    topic = ConfigResource("TOPIC", "heavy", incremental_configs=[
        ConfigEntry("leader.replication.throttled.replicas", "0:1,0:2", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("follower.replication.throttled.replicas", "0:3", incremental_operation=AlterConfigOpType.SET)])
    for resource in brokers + [topic]:                    # librdkafka: one BROKER resource per call
        admin.incremental_alter_configs([resource])[resource].result(30)
    thread, acked = produce_in_background("confluent", cluster.bootstrap, "heavy", 20_000, partitions=1,
                                          pause_every=20, timeout=60)
    wait_acknowledged(thread, acked, 500)
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    started = time.monotonic()
    try:
        assert kafka_admin.alter_partition_reassignments({TopicPartition("heavy", 0): [1, 2, 3]}) == \
            {TopicPartition("heavy", 0): None}
        during = total(acked)
        time.sleep(2)
        # the producers keep their pace (the in-sync replicas are not throttled) ...
        assert total(acked) - during > 200, "producers stalled during the throttled move"
        # ... while the new replica copies at about the throttle's rate
        copied = local_bytes(cluster, 3, "heavy", 0)
        assert copied < 4 * rate, f"{copied} bytes copied in 2 s under a {rate} B/s throttle"
        wait_for(lambda: settled(cluster, "heavy", {0: [1, 2, 3]}), 60, "the throttled move to complete")
    finally:
        kafka_admin.close()
    elapsed = time.monotonic() - started
    assert elapsed > 3.5, f"3 MB moved in {elapsed:.1f} s despite a {rate} B/s throttle"
    join_producer(thread, 120)
    seen = read_all(cluster.bootstrap, "heavy", 1, expected=300 + total(acked))
    assert seen[0][:300] == [-1] * 300
    counts = tally(acked, {0: seen[0][300:]})
    assert counts["lost"] == 0 and counts["duplicates"] == 0, counts


def test_the_java_admin_client_moves_a_partition_and_lists_it_while_kafka_python_produces(cluster, tmp_path):
    from tests.support.java import java_available, run_to_end
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    create(cluster, "javamove", [[1, 2]])
    thread, acked = produce_in_background("kafka-python", cluster.bootstrap, "javamove", 6000, partitions=1,
                                          pause_every=20, timeout=90)
    wait_acknowledged(thread, acked, 300)
    out, code = run_to_end("JcReassign", cluster.bootstrap, "javamove", 0, "2,3",
                           stderr_path=tmp_path / "stderr.txt", timeout=120)
    checks = {c.pop("check"): c for c in map(json.loads, out.splitlines())}
    assert code == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert checks["cancelNothing"]["error"] == "NoReassignmentInProgressException", checks
    assert checks["alter"]["ok"], checks["alter"]
    assert checks["list"]["ok"] and checks["list"]["done"], checks["list"]
    described = checks["describe"]
    assert described["replicas"] == [2, 3] and sorted(described["isr"]) == [2, 3] and described["leader"] == 2, \
        described
    join_producer(thread, 120)
    seen = read_all(cluster.bootstrap, "javamove", 1, expected=total(acked))
    counts = tally(acked, seen)
    assert counts["acknowledged"] == 6000 and counts["lost"] == 0 and counts["duplicates"] == 0, counts
