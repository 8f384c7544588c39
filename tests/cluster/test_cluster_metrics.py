"""Prometheus metrics of a three-broker cluster, scraped from each broker as Prometheus would:
each broker counts only the partitions it holds a replica of (a cluster node keeps a log of
every partition, most of them empty), leaders add up to the partitions, records are counted
in on their leader only, followers' fetches are FetchFollower requests, and a stopped broker
shows as under-replicated partitions on the leaders it followed."""
from __future__ import annotations

import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kwire.testing.cluster import ClusterProcess
from kwire.testing.process import free_port
from tests.cluster.conftest import require_zookeeper

TOPIC = "replicated"
PARTITIONS, REPLICATION = 3, 2
RECORDS = 90


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(scrapes: list[dict], name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    return sum(s.get(key, 0) for s in scrapes)


def logs_of(metrics: dict) -> set[tuple[str, str]]:
    return {(dict(labels)["topic"], dict(labels)["partition"]) for (name, labels) in metrics
            if name == "kafka_log_log_size"}


def test_each_broker_reports_its_own_replicas_and_leaders():
    require_zookeeper()
    cluster = ClusterProcess(3, properties={"replica.lag.time.max.ms": 2000})
    ports = {}
    for i, broker in cluster.brokers.items():
        ports[i] = free_port()
        broker.properties["prometheus.listener"] = f"127.0.0.1:{ports[i]}"
    with cluster:
        cluster.wait_until_ready()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce(TOPIC, b"r%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0

        def settled():
            scrapes = [scrape(p) for p in ports.values()]
            if total(scrapes, "kafka_server_replicamanager_underreplicatedpartitions") == 0 and \
                    total(scrapes, "kafka_server_replicamanager_leadercount") == PARTITIONS:
                return scrapes
            return None
        scrapes = cluster.wait_for(settled, what="every replica in sync")
        assert total(scrapes, "kafka_server_replicamanager_partitioncount") == PARTITIONS * REPLICATION
        replicas = [logs_of(s) for s in scrapes]
        assert sum(len(r) for r in replicas) == PARTITIONS * REPLICATION
        for p in range(PARTITIONS):
            holders = [r for r in replicas if (TOPIC, str(p)) in r]
            assert len(holders) == REPLICATION
        assert total(scrapes, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS
        assert sum(v for s in scrapes for (name, labels), v in s.items()
                   if name == "kafka_network_requestmetrics_requests_total"
                   and dict(labels)["request"] == "FetchFollower") > 0

        stopped = next(i for i, r in zip(ports, replicas) if r)     # a broker holding replicas
        cluster.stop(stopped)
        survivors = [p for i, p in ports.items() if i != stopped]

        def under_replicated():
            scrapes = [scrape(p) for p in survivors]
            under = total(scrapes, "kafka_server_replicamanager_underreplicatedpartitions")
            return scrapes if under == len(replicas[list(ports).index(stopped)]) else None
        scrapes = cluster.wait_for(under_replicated, what="the stopped broker's partitions under-replicated")
        assert total(scrapes, "kafka_server_replicamanager_leadercount") == PARTITIONS
