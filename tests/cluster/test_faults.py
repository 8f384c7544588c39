"""Faults a leader survives without acknowledging what it cannot keep.

* SIGSTOP of a partition leader past zookeeper.session.timeout.ms, then
  SIGCONT: the rest of the cluster elects a new leader; the old one, waking up
  with produce requests in its socket, must not acknowledge them (fencing).
* A network partition of one broker (TcpProxy in front of its ZooKeeper
  connection, of its listener for everyone, and of the other brokers'
  listeners for its own connections): the same, then the heal.
* auto.leader.rebalance.enable moves leadership back to the preferred replica.

Each test counts acknowledged, read and lost records, checks per-partition
order and that the replicas end up identical.
"""
from __future__ import annotations

import glob
import hashlib
import os
import socket
import struct
import time

from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.testing.cluster import ClusterProcess
from tests.support import counting
from tests.support.counting import create_topic, read_all, tally, wait_for, wait_full_isrs

STALE = -1          # the value of the record sent to a fenced leader; never acknowledged, never read


def send_stale_produce(address: tuple[str, int], topic: str, partition: int,
                       timeout_ms: int) -> socket.socket:
    """Send one acks=all Produce v8 of the record ``STALE`` on a new connection and return the
    socket without waiting for the answer (the broker may be paused: the kernel accepts)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=str(STALE).encode(), headers=[])
    R = ProduceRequest[8]
    request = R(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=partition, records=bytes(builder.build()))])])
    request.with_header(correlation_id=7, client_id="stale-client")
    s = socket.create_connection(address, timeout=5)
    s.sendall(bytes(request.encode(header=True, framed=True)))
    return s


def stale_produce_answer(s: socket.socket, timeout: float) -> int:
    """The error code the broker answered; -1 when it closed the connection or stayed silent."""
    s.settimeout(timeout)
    try:
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return -1
            data += chunk
    except OSError:
        return -1
    finally:
        s.close()
    response = ProduceResponse[8].decode(data[4:], header=True)
    return response.responses[0].partition_responses[0].error_code


def replica_digests(cluster: ClusterProcess, topic: str, partition: int) -> dict[int, str]:
    """md5 of each broker's segments of one partition, concatenated in offset order."""
    digests = {}
    for i, b in cluster.brokers.items():
        h = hashlib.md5()
        for path in sorted(glob.glob(os.path.join(b.data_dir, "logs", f"{topic}-{partition}", "*.log"))):
            with open(path, "rb") as f:
                h.update(f.read())
        digests[i] = h.hexdigest()
    return digests


def wait_identical_replicas(cluster: ClusterProcess, topic: str, partitions: int, timeout: float = 30) -> None:
    for p in range(partitions):
        wait_for(lambda: len(set(replica_digests(cluster, topic, p).values())) == 1, timeout,
                 f"identical replicas of {topic}-{p}")


def produce_in_background(bootstrap: str, topic: str, records: int):
    """A confluent-kafka producer in a thread, returned once a fifth of the records are acknowledged."""
    thread, acked = counting.produce_in_background("confluent", bootstrap, topic, records,
                                                   pause_every=100, timeout=90)
    counting.wait_acknowledged(thread, acked, records // 5)
    return thread, acked


def check_counts(acked: dict, bootstrap: str, topic: str, records: int, what: str) -> None:
    seen = read_all(bootstrap, topic, 3, counting.total(acked), timeout=60)
    counts = tally(acked, seen)
    print(f"{what}: {counts}")
    assert counts == {"acknowledged": records, "read": records, "lost": 0, "duplicates": 0, "out_of_order": 0}
    assert not any(STALE in v for v in seen.values()), "the fenced leader's record was kept"


def test_a_leader_paused_past_its_session_is_fenced_and_nothing_is_lost(cluster):
    create_topic(cluster.bootstrap, "paused", partitions=3, rf=3, min_insync_replicas=2)
    wait_full_isrs(cluster.zookeeper.connect, "paused")
    victim = counting.partition_states(cluster.zookeeper.connect, "paused")[0]["leader"]
    others = ",".join(cluster.broker(i).bootstrap for i in cluster.brokers if i != victim)
    producer, acked = produce_in_background(cluster.bootstrap, "paused", 30000)
    cluster.pause(victim)
    stale = send_stale_produce(("127.0.0.1", cluster.broker(victim).port), "paused", 0, timeout_ms=20000)
    wait_for(lambda: cluster.metadata(others)["topics"]["paused"][0]["leader"] not in (victim, -1), 30,
             "a new leader while the old one sleeps")
    time.sleep(1)
    cluster.resume(victim)                 # it wakes up still believing it leads, requests waiting
    answer = stale_produce_answer(stale, 40)
    assert answer != 0, "a fenced leader acknowledged an acks=all write"
    counting.join_producer(producer)
    check_counts(acked, cluster.bootstrap, "paused", 30000, f"pause (stale answer {answer})")
    wait_full_isrs(cluster.zookeeper.connect, "paused", timeout=60)     # it rejoined, truncated
    wait_identical_replicas(cluster, "paused", 3)


def test_a_partitioned_leader_is_fenced_and_rejoins_after_the_heal(isolatable_cluster):
    cluster = isolatable_cluster
    bootstrap = cluster.proxied_bootstrap
    create_topic(bootstrap, "split", partitions=3, rf=3, min_insync_replicas=2)
    wait_full_isrs(cluster.zookeeper.connect, "split")
    victim = counting.partition_states(cluster.zookeeper.connect, "split")[0]["leader"]
    producer, acked = produce_in_background(bootstrap, "split", 30000)
    cluster.isolate(victim)
    # a client on the victim's side of the partition: it still reaches the broker directly
    stale = send_stale_produce(("127.0.0.1", cluster.broker(victim).port), "split", 0, timeout_ms=15000)
    answer = stale_produce_answer(stale, 40)
    assert answer != 0, "a partitioned leader acknowledged an acks=all write"
    others = ",".join(cluster.broker(i).bootstrap for i in cluster.brokers if i != victim)
    wait_for(lambda: cluster.metadata(others)["topics"]["split"][0]["leader"] not in (victim, -1), 30,
             "a new leader on the majority side")
    cluster.heal()
    counting.join_producer(producer)
    check_counts(acked, bootstrap, "split", 30000, f"partition (stale answer {answer})")
    wait_full_isrs(cluster.zookeeper.connect, "split", timeout=60)
    wait_identical_replicas(cluster, "split", 3)
    assert sorted(cluster.metadata()["brokers"]) == [1, 2, 3]


def test_auto_leader_rebalance_moves_leadership_back_to_the_preferred_replica(cluster_factory):
    cluster = cluster_factory(3, properties={"leader.imbalance.check.interval.seconds": 1})
    create_topic(cluster.bootstrap, "rebalanced", partitions=3, rf=3)
    wait_full_isrs(cluster.zookeeper.connect, "rebalanced")
    preferred = {p: v["replicas"][0] for p, v in cluster.metadata()["topics"]["rebalanced"].items()}
    victim = preferred[0]
    cluster.stop(victim)                                   # controlled shutdown: leadership moves away
    assert cluster.metadata()["topics"]["rebalanced"][0]["leader"] != victim
    cluster.start_broker(victim)
    wait_for(lambda: all(p["leader"] == preferred[n] for n, p in
                         cluster.metadata()["topics"]["rebalanced"].items()), 30,
             "leadership back on the preferred replicas without an ElectLeaders request")
    acked = counting.produce_counted("kafka-python", cluster.bootstrap, "rebalanced", 300)
    assert counting.total(acked) == 300
