"""A secured three-broker cluster, driven by stock clients over TLS and SASL.

Every broker has two listeners, as a Kafka operator would set them up:

    CLIENT    SASL_SSL (PLAIN)               for clients
    INTERNAL  SSL, client certificates       inter.broker.listener.name: brokers replicate,
              required (mutual TLS)          write transaction markers, ... through it

Kafka's AclAuthorizer is on; the brokers' certificate DNs (and the admin user) are super
users, so their follower fetches get the CLUSTER_ACTION Kafka requires of replicas.  The
harness watches the cluster over INTERNAL with a client certificate of its own
(CN=admin, a super user too).  Each test counts what a user would: records acknowledged,
read back, lost; which ports Metadata hands out; what ZooKeeper holds.

A second, smaller cluster replicates over SASL_PLAINTEXT with SCRAM-SHA-512, its broker
credential bootstrapped in ZooKeeper before the brokers start, as Kafka's docs do it.
"""
from __future__ import annotations

import json
import re
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as Assignment
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kazoo.client import KazooClient

from kwire.security.scram import format_kafka_credential, scram_credential
from kwire.testing.cluster import ClusterProcess
from tests.cluster.conftest import require_zookeeper
from tests.support.certs import CertificateAuthority
from tests.support.counting import partition_states, tally, total, wait_for, wait_full_isrs

LISTENERS = {"CLIENT": "SASL_SSL", "INTERNAL": "SSL"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret" user_alice="alice-secret";')
BROKER_DN = "CN=broker-{},O=kwire"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """{name: TlsFiles}: broker-1..3 (valid for 127.0.0.1), admin (the harness), rogue-3."""
    directory = tmp_path_factory.mktemp("cluster-pki")
    ca = CertificateAuthority(key_type="ec")
    files = {f"broker-{i}": ca.server_files(directory, subject=BROKER_DN.format(i), name=f"broker-{i}")
             for i in (1, 2, 3)}
    files["rogue-3"] = ca.server_files(directory, subject="CN=rogue-3,O=kwire", name="rogue-3")
    files["admin"] = ca.client_files(directory, "CN=admin,O=kwire", name="admin")
    return files


@pytest.fixture(scope="module")
def cluster(pki):
    """One cluster for the module: the tests run in file order and the last one changes broker 3."""
    require_zookeeper()
    properties = {
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["admin"].truststore),
        "ssl.keystore.type": "PEM",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": ";".join([*(f"User:{BROKER_DN.format(i)}" for i in (1, 2, 3)),
                                 "User:CN=admin,O=kwire", "User:admin"]),
    }
    c = ClusterProcess(3, properties=properties, listeners=LISTENERS, observe_listener="INTERNAL",
                       observe_ssl=pki["admin"].ssl_context())
    for i, b in c.brokers.items():
        b.properties["ssl.keystore.location"] = str(pki[f"broker-{i}"].keystore)
    try:
        c.start()
        c.wait_until_ready()
        yield c
    finally:
        c.close()


def client_config(cluster, pki) -> dict:
    """librdkafka over SASL_SSL as the admin user, verifying the brokers' host names."""
    return {"bootstrap.servers": cluster.bootstrap_for("CLIENT"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret",
            "ssl.ca.location": str(pki["admin"].truststore), "ssl.endpoint.identification.algorithm": "https"}


def kafka_python_options(cluster, pki) -> dict:
    return {"bootstrap_servers": cluster.bootstrap_for("CLIENT").split(","), "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "admin", "sasl_plain_password": "admin-secret",
            "ssl_cafile": str(pki["admin"].truststore)}


def create(cluster, pki, name: str, partitions: int = 3, **kwargs) -> None:
    admin = AdminClient(client_config(cluster, pki))
    admin.create_topics([NewTopic(name, partitions, **kwargs)])[name].result(30)


def ports(cluster, listener: str) -> dict[int, int]:
    return {i: b.ports[listener] for i, b in cluster.brokers.items()}


def test_every_listener_is_registered_in_kafkas_format(cluster):
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        for i, b in cluster.brokers.items():
            registration = json.loads(zk.get(f"/brokers/ids/{i}")[0])
            assert registration["version"] == 5
            assert registration["endpoints"] == [f"CLIENT://127.0.0.1:{b.ports['CLIENT']}",
                                                 f"INTERNAL://127.0.0.1:{b.ports['INTERNAL']}"]
            assert registration["listener_security_protocol_map"] == LISTENERS
            # no PLAINTEXT listener: no default address for old clients, as Kafka writes it
            assert (registration["host"], registration["port"]) == (None, -1)
    finally:
        zk.stop()
        zk.close()


def test_metadata_hands_out_the_ports_of_the_listener_asked(cluster, pki):
    listed = AdminClient(client_config(cluster, pki)).list_topics(timeout=20)
    assert {b.id: b.port for b in listed.brokers.values()} == ports(cluster, "CLIENT")
    admin = KafkaAdminClient(**kafka_python_options(cluster, pki))
    try:
        described = admin.describe_cluster()        # kafka-python, over SASL_SSL
        assert {b["broker_id"]: b["port"] for b in described["brokers"]} == ports(cluster, "CLIENT")
    finally:
        admin.close()
    internal = cluster.metadata()          # the harness, over INTERNAL with its certificate
    assert {i: int(a.rsplit(":", 1)[1]) for i, a in internal["brokers"].items()} == ports(cluster, "INTERNAL")


def produce(config: dict, topic: str, count: int, acked: dict, partitions: int = 3) -> None:
    """Record i (value str(i)) to partition i % partitions, acks=all, idempotent; acknowledged
    values land in ``acked`` as they are confirmed."""
    def report(err, msg):
        if err is None:
            acked.setdefault(msg.partition(), []).append(int(msg.value()))
    producer = Producer({**config, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000})
    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=i % partitions, on_delivery=report)
        producer.poll(0)
        if i % 100 == 99:
            producer.flush(60)
    producer.flush(60)


def read_back(options: dict, topic: str, partitions: int, expected: int) -> dict[int, list[int]]:
    """Every value of ``topic`` per partition, through kafka-python (assigned, from the start)."""
    consumer = KafkaConsumer(**options, enable_auto_commit=False)
    seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 60
        while total(seen) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                seen[tp.partition] += [int(r.value) for r in records]
    finally:
        consumer.close()
    return seen


def test_acks_all_over_sasl_ssl_survives_kill_9_of_a_leader(cluster, pki):
    create(cluster, pki, "secure-orders", replication_factor=3, config={"min.insync.replicas": "2"})
    wait_full_isrs(cluster.zookeeper.connect, "secure-orders")      # replicated over mutual TLS
    acked: dict[int, list[int]] = {}
    producer = threading.Thread(target=produce, args=(client_config(cluster, pki), "secure-orders", 6000, acked))
    producer.start()
    wait_for(lambda: total(acked) >= 1500 or not producer.is_alive(), 60, "1500 acknowledged records")
    victim = partition_states(cluster.zookeeper.connect, "secure-orders")[0]["leader"]
    cluster.kill(victim)
    producer.join(120)
    assert not producer.is_alive()
    seen = read_back(kafka_python_options(cluster, pki), "secure-orders", 3, total(acked))
    counts = tally(acked, seen)
    assert counts["acknowledged"] >= 5000, counts       # the failover did not stall the producer
    assert counts["lost"] == 0 and counts["duplicates"] == 0 and counts["out_of_order"] == 0, counts
    assert {p: s["leader"] for p, s in partition_states(cluster.zookeeper.connect, "secure-orders").items()
            }[0] != victim
    # back on its port and data: it catches up over TLS and rejoins every ISR
    cluster.start_broker(victim)
    wait_full_isrs(cluster.zookeeper.connect, "secure-orders", timeout=60)


def test_transaction_markers_reach_the_other_leaders_through_the_inter_broker_listener(cluster, pki):
    # partitions led by all three brokers: the coordinator writes the markers of two of them
    # with WriteTxnMarkers over INTERNAL; read_committed sees a partition only once its marker is in
    config = client_config(cluster, pki)
    create(cluster, pki, "secure-txn", replication_factor=3)
    wait_full_isrs(cluster.zookeeper.connect, "secure-txn")
    assert {s["leader"] for s in partition_states(cluster.zookeeper.connect, "secure-txn").values()} == {1, 2, 3}
    producer = Producer({**config, "transactional.id": "secure-txn-1", "linger.ms": 5})
    producer.init_transactions(60)
    for label, commit in (("kept", True), ("dropped", False)):
        producer.begin_transaction()
        for i in range(30):
            producer.produce("secure-txn", f"{label}-{i}".encode(), partition=i % 3)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    consumer = Consumer({**config, "group.id": "secure-txn-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([Assignment("secure-txn", p, OFFSET_BEGINNING) for p in range(3)])
    got: list[bytes] = []
    quiet = deadline = time.monotonic() + 30
    while time.monotonic() < min(deadline, quiet):
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
            if len(got) >= 30:
                quiet = time.monotonic() + 2          # a little longer, for anything aborted
    consumer.close()
    assert sorted(got) == sorted(f"kept-{i}".encode() for i in range(30))


def test_a_follower_whose_principal_lacks_cluster_action_does_not_replicate(cluster, pki):
    # broker 3 comes back with a certificate of another name, which super.users does not list
    cluster.stop(3)
    cluster.broker(3).properties["ssl.keystore.location"] = str(pki["rogue-3"].keystore)
    cluster.start_broker(3)
    cluster.wait_until_ready()
    create(cluster, pki, "guarded", 2, replica_assignment=[[1, 2, 3], [2, 1, 3]])
    # it starts in every ISR; the leaders refuse its fetches and drop it after replica.lag.time.max.ms
    wait_for(lambda: all(s["isr"] and 3 not in s["isr"]
                         for s in partition_states(cluster.zookeeper.connect, "guarded").values()),
             30, "broker 3 out of the ISRs of guarded")
    acked: dict[int, list[int]] = {}
    produce(client_config(cluster, pki), "guarded", 200, acked, partitions=2)
    assert total(acked) == 200
    time.sleep(2)
    states = partition_states(cluster.zookeeper.connect, "guarded")
    assert [sorted(s["isr"]) for _p, s in sorted(states.items())] == [[1, 2], [1, 2]]
    # the follower says why, and so do the leaders (the authorizer's line: OffsetForLeaderEpoch,
    # asked first, falls back to DESCRIBE on the topic without CLUSTER_ACTION, as in Kafka)
    assert "refuses to replicate to this broker (TOPIC_AUTHORIZATION_FAILED)" in cluster.broker(3).log_text()
    leader_logs = cluster.broker(1).log_text() + cluster.broker(2).log_text()
    assert re.search(r"User:CN=rogue-3,O=kwire denied (CLUSTER_ACTION on CLUSTER|DESCRIBE on TOPIC guarded)",
                     leader_logs)


# -- a second cluster: replication over SASL_PLAINTEXT with SCRAM-SHA-512 ------------------------
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')


def test_brokers_replicate_over_sasl_scram_with_a_credential_bootstrapped_in_zookeeper(tmp_path):
    require_zookeeper()
    properties = {
        "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "default.replication.factor": "2",
    }
    c = ClusterProcess(2, properties=properties, data_dir=tmp_path,
                       listeners={"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_PLAINTEXT"})
    try:
        c.zookeeper.start()
        # what kafka-configs.sh --zookeeper ... --alter --add-config 'SCRAM-SHA-512=[...]' writes
        zk = KazooClient(c.zookeeper.connect)
        zk.start(timeout=10)
        credential = format_kafka_credential(scram_credential("SCRAM-SHA-512", "broker-secret"))
        zk.create("/config/users/broker", json.dumps({"version": 1, "config": {"SCRAM-SHA-512": credential}}
                                                     ).encode(), makepath=True)
        zk.stop()
        zk.close()
        c.start()
        c.wait_until_ready()
        admin = AdminClient({"bootstrap.servers": c.bootstrap})         # PLAINTEXT, no authorizer
        admin.create_topics([NewTopic("scram-replicated", 2, 2)])["scram-replicated"].result(30)
        wait_full_isrs(c.zookeeper.connect, "scram-replicated", replicas=2, timeout=30)
        acked: dict[int, list[int]] = {}
        produce({"bootstrap.servers": c.bootstrap}, "scram-replicated", 500, acked, partitions=2)
        assert total(acked) == 500
        # both replicas stay in sync while the writes flow through SASL-authenticated fetches
        assert all(sorted(s["isr"]) == [1, 2]
                   for s in partition_states(c.zookeeper.connect, "scram-replicated").values())
        # Metadata through PLAINTEXT names PLAINTEXT ports; the registration's host/port are its
        assert {i: int(a.rsplit(":", 1)[1]) for i, a in c.metadata()["brokers"].items()} == \
            {i: b.port for i, b in c.brokers.items()}
    finally:
        c.close()
