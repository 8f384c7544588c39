"""A three-broker cluster on ZooKeeper, driven by stock clients over real sockets.

Each test counts what a user would: records acknowledged, read back, lost.
The cluster fixture (tests/cluster/conftest.py) runs ZooKeeper and three
``kwire serve`` processes with zookeeper.session.timeout.ms=6000.
"""
from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.support import counting
from tests.support.counting import create_topic, read_all, tally, wait_for


def partition_states(cluster, topic: str) -> dict[int, dict]:
    return counting.partition_states(cluster.zookeeper.connect, topic)


def produce_counted(bootstrap: str, topic: str, count: int, *, keyed_partitions: int = 3, **kwargs):
    return counting.produce_counted("confluent", bootstrap, topic, count, partitions=keyed_partitions, **kwargs)


def test_three_brokers_form_a_cluster_with_kafkas_zookeeper_layout(cluster):
    create_topic(cluster.bootstrap, "layout", partitions=3, rf=3)
    # the broker asked may not have applied the new topic's states yet (CreateTopics waits
    # only on the broker that served it)
    meta = wait_for(lambda: (m := cluster.metadata()) and len(m["topics"].get("layout", {})) == 3
                    and all(p["leader"] >= 0 for p in m["topics"]["layout"].values()) and m,
                    10, "every broker's view of the new topic")
    assert sorted(meta["brokers"]) == [1, 2, 3]
    assert meta["controller_id"] in (1, 2, 3)
    parts = meta["topics"]["layout"]
    assert sorted(parts) == [0, 1, 2]
    assert sorted(p["leader"] for p in parts.values()) == [1, 2, 3]    # leaders spread round-robin
    for p in parts.values():
        assert sorted(p["replicas"]) == [1, 2, 3]
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        broker = json.loads(zk.get("/brokers/ids/1")[0])
        assert broker["endpoints"] and broker["version"] == 5
        topic = json.loads(zk.get("/brokers/topics/layout")[0])
        assert sorted(topic["partitions"]) == ["0", "1", "2"]
        assert json.loads(zk.get("/controller")[0])["brokerid"] == meta["controller_id"]
        assert zk.exists("/cluster/id") and zk.exists("/controller_epoch")
    finally:
        zk.stop()
    states = wait_for(lambda: (s := partition_states(cluster, "layout")) and
                      all(len(v["isr"]) == 3 for v in s.values()) and s, 20, "full ISRs")
    assert {p: s["leader"] for p, s in states.items()} == {p: v["leader"] for p, v in parts.items()}


def test_acks_all_records_survive_the_loss_of_two_brokers(cluster):
    create_topic(cluster.bootstrap, "durable", partitions=3, rf=3)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(cluster, "durable").values()),
             20, "full ISRs")
    acked = produce_counted(cluster.bootstrap, "durable", 3000)
    assert sum(len(v) for v in acked.values()) == 3000
    leader0 = partition_states(cluster, "durable")[0]["leader"]
    survivors = [b for b in (1, 2, 3) if b != leader0]
    cluster.kill(leader0)
    cluster.kill(survivors[0])
    bootstrap = cluster.broker(survivors[1]).bootstrap
    seen = read_all(bootstrap, "durable", 3, 3000, timeout=60)
    lost = sum(len(set(acked[p]) - set(seen[p])) for p in acked)
    assert lost == 0, f"{lost} acknowledged records lost"
    for p in acked:
        assert seen[p] == sorted(seen[p]) and len(seen[p]) == len(set(seen[p]))   # order, no duplicates


@pytest.mark.parametrize("client, records", [("confluent", 40000), ("kafka-python", 10000),
                                             ("aiokafka", 10000)])
def test_kill_9_of_leaders_under_acks_all_load_loses_nothing(cluster, client, records):
    create_topic(cluster.bootstrap, "load", partitions=3, rf=3, min_insync_replicas=2)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(cluster, "load").values()),
             20, "full ISRs")
    producer, acked = counting.produce_in_background(client, cluster.bootstrap, "load", records,
                                                     pause_every=100, timeout=90)
    counting.wait_acknowledged(producer, acked, records // 5)
    victim = partition_states(cluster, "load")[0]["leader"]
    started = time.monotonic()
    cluster.kill(victim)
    counting.join_producer(producer)
    new_states = wait_for(lambda: (s := partition_states(cluster, "load")) and s[0]["leader"] != victim and s,
                          20, "a new leader")
    assert new_states[0]["leader_epoch"] >= 1
    seen = read_all(cluster.bootstrap, "load", 3, counting.total(acked), timeout=60)
    counts = tally(acked, seen)
    print(f"{client}: {counts}, killed broker {victim} {time.monotonic() - started:.1f} s before the end")
    assert counts == {"acknowledged": records, "read": records, "lost": 0, "duplicates": 0, "out_of_order": 0}


def test_min_insync_replicas_refuses_acks_all_when_the_isr_is_too_small(cluster):
    create_topic(cluster.bootstrap, "strict", partitions=1, rf=3, min_insync_replicas=3)
    state = wait_for(lambda: (s := partition_states(cluster, "strict")[0]) and len(s["isr"]) == 3 and s,
                     20, "full ISR")
    follower = next(b for b in (1, 2, 3) if b != state["leader"])
    cluster.kill(follower)
    wait_for(lambda: len(partition_states(cluster, "strict")[0]["isr"]) == 2, 30, "the ISR to shrink")
    errors = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 3000})
    producer.produce("strict", b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT)
    acked = produce_counted(cluster.bootstrap, "strict", 10, acks="1", idempotent=False, keyed_partitions=1)
    assert len(acked[0]) == 10                        # acks=1 does not need the ISR


def test_killing_the_controller_elects_another(cluster):
    controller = cluster.metadata()["controller_id"]
    cluster.kill(controller)
    bootstrap = ",".join(cluster.broker(b).bootstrap for b in (1, 2, 3) if b != controller)
    new = wait_for(lambda: (c := cluster.metadata(bootstrap)["controller_id"]) not in (-1, controller) and c,
                   30, "a new controller")
    assert new != controller
    create_topic(bootstrap, "after-controller", partitions=2, rf=2)
    acked = produce_counted(bootstrap, "after-controller", 100, keyed_partitions=2)
    assert sum(len(v) for v in acked.values()) == 100


def test_a_zookeeper_restart_loses_nothing(cluster):
    create_topic(cluster.bootstrap, "zk-restart", partitions=2, rf=3)
    first = produce_counted(cluster.bootstrap, "zk-restart", 500, keyed_partitions=2)
    cluster.zookeeper.restart()
    second = produce_counted(cluster.bootstrap, "zk-restart", 500, keyed_partitions=2)
    acked = {p: first.get(p, []) + second.get(p, []) for p in (0, 1)}
    assert sum(len(v) for v in acked.values()) == 1000
    seen = read_all(cluster.bootstrap, "zk-restart", 2, 1000)
    assert sum(len(set(acked[p]) - set(seen[p])) for p in acked) == 0
    assert sorted(cluster.metadata()["brokers"]) == [1, 2, 3]


def test_controlled_shutdown_moves_leadership_before_the_process_exits(cluster):
    create_topic(cluster.bootstrap, "graceful", partitions=3, rf=3)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(cluster, "graceful").values()),
             20, "full ISRs")
    leader = partition_states(cluster, "graceful")[0]["leader"]
    cluster.stop(leader)                                  # SIGTERM; waits for the exit
    states = partition_states(cluster, "graceful")
    assert all(s["leader"] not in (leader, -1) for s in states.values())
    assert all(leader not in s["isr"] for s in states.values())
    started = time.monotonic()
    acked = produce_counted(cluster.bootstrap, "graceful", 1, keyed_partitions=1, idempotent=False)
    assert acked[0] == [0]
    assert time.monotonic() - started < 5


def test_followers_of_a_new_leader_do_not_wait_out_their_long_poll_or_back_off(cluster_factory):
    # A follower's fetch parks at its leader for up to replica.fetch.wait.max.ms, and a
    # partition the leader does not lead yet used to wait replica.fetch.backoff.ms: with
    # both at seconds, the first acks=all write after a controlled shutdown took that long.
    cluster = cluster_factory(properties={"replica.fetch.wait.max.ms": 4000, "replica.fetch.backoff.ms": 8000,
                                          "replica.lag.time.max.ms": 20000})
    create_topic(cluster.bootstrap, "moved", partitions=3, rf=3)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(cluster, "moved").values()),
             20, "full ISRs")
    leader = partition_states(cluster, "moved")[0]["leader"]
    cluster.stop(leader)                                  # SIGTERM; leadership moved before the exit
    started = time.monotonic()
    acked = produce_counted(cluster.live_bootstrap(), "moved", 30, idempotent=False)
    elapsed = time.monotonic() - started
    assert sorted(v for vs in acked.values() for v in vs) == list(range(30))
    assert elapsed < 3, f"acks=all writes after the controlled shutdown took {elapsed:.1f} s"


def test_a_new_leader_answers_list_offsets_only_once_it_knows_what_was_committed(cluster_factory):
    # A new leader's high watermark is the one it had as a follower, a fetch behind; until its
    # followers report in, Kafka answers OFFSET_NOT_AVAILABLE rather than a high watermark
    # below what was acknowledged (a consumer resetting to latest would read records again).
    from kafka.protocol.consumer import ListOffsetsRequest
    from kwire.testing.cluster import send_request
    Topic = ListOffsetsRequest.ListOffsetsTopic
    cluster = cluster_factory(properties={"replica.fetch.wait.max.ms": 4000, "replica.lag.time.max.ms": 20000})
    create_topic(cluster.bootstrap, "latest", partitions=1, rf=3)
    wait_for(lambda: len(partition_states(cluster, "latest")[0]["isr"]) == 3, 20, "a full ISR")
    acked = produce_counted(cluster.bootstrap, "latest", 20, keyed_partitions=1, idempotent=False)[0]
    cluster.stop(partition_states(cluster, "latest")[0]["leader"])
    request = ListOffsetsRequest[4](replica_id=-1, isolation_level=0, topics=[Topic(name="latest", partitions=[
        Topic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    answers, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline and (not answers or answers[-1] != (0, len(acked))):
        for i in cluster.live_ids():
            p = send_request(cluster.broker(i).bootstrap, request).topics[0].partitions[0]
            if p.error_code != 6:          # NOT_LEADER_OR_FOLLOWER: not the leader (yet)
                answers.append((p.error_code, p.offset))
    assert answers and answers[-1] == (0, len(acked)), answers
    assert set(answers) <= {(0, len(acked)), (78, -1)}   # 78: OFFSET_NOT_AVAILABLE, answers


def test_preferred_leader_election_moves_leadership_back(cluster):
    create_topic(cluster.bootstrap, "preferred", partitions=3, rf=3)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(cluster, "preferred").values()),
             20, "full ISRs")
    meta = cluster.metadata()["topics"]["preferred"]
    preferred = {p: v["replicas"][0] for p, v in meta.items()}
    victim = preferred[0]
    cluster.stop(victim)
    cluster.start_broker(victim)
    wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(cluster, "preferred").values()),
             30, "the restarted broker back in the ISRs")
    assert partition_states(cluster, "preferred")[0]["leader"] != victim
    from confluent_kafka import ElectionType, TopicPartition
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("preferred", p) for p in range(3)]).result(30)
    states = wait_for(lambda: (s := partition_states(cluster, "preferred")) and
                      all(s[p]["leader"] == preferred[p] for p in range(3)) and s, 20, "preferred leaders")
    assert states[0]["leader"] == victim
