"""Client quotas on a real broker process, seen by stock clients: a producer_byte_rate quota
set with AlterClientQuotas holds a librdkafka producer near its rate and its responses carry
throttle time; a consumer_byte_rate quota does the same for a consumer; the Java AdminClient
alters and describes quotas (KIP-546 filters); a controller_mutation_rate quota refuses
CreateTopics with THROTTLING_QUOTA_EXCEEDED; ``kwire quotas`` sets and shows them; /metrics
shows who was throttled.

The broker runs with ``quota.window.num=2`` so a rate settles within a second instead of
Kafka's ten (the default 11 samples are tested in tests/admin/test_quotas.py).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.topics import CreateTopicsRequest

from tests.support.broker import BrokerProcess, free_port
from tests.support.java import java_available, run_to_end

pytestmark = pytest.mark.clients

WINDOW_NUM = 2


@pytest.fixture(scope="module")
def qbroker():
    metrics_port = free_port()
    b = BrokerProcess(properties={"quota.window.num": WINDOW_NUM, "prometheus.listener": f"127.0.0.1:{metrics_port}"})
    b.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    b.start()
    yield b
    b.close()


def send(broker, request):
    """One request through kafka-python's admin client (its generated protocol classes)."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        async def call():
            return await admin._manager.send(request)
        return admin._manager.run(call)
    finally:
        admin.close()


def set_quota(broker, entity: dict, values: dict, validate_only: bool = False):
    E = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(entries=[E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[E.OpData(key=k, value=float(v or 0), remove=v is None) for k, v in values.items()])],
        validate_only=validate_only)
    return send(broker, request)


def describe_all(broker) -> dict:
    response = send(broker, DescribeClientQuotasRequest(components=[], strict=False))
    assert response.error_code == 0
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def scrape(broker) -> str:
    return urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()


def test_producer_byte_rate_holds_a_producer_near_its_quota(qbroker):
    quota = 200_000
    topic = f"pq-{uuid.uuid4().hex[:8]}"
    assert set_quota(qbroker, {"client-id": "quota-producer"}, {"producer_byte_rate": quota}).entries[0].error_code == 0
    throttles, acked, errors = [], [], []
    lock = threading.Lock()

    def delivered(err, msg):
        with lock:
            (errors if err else acked).append((time.monotonic(), len(msg.value())))

    producer = Producer({"bootstrap.servers": qbroker.bootstrap, "client.id": "quota-producer", "linger.ms": 5,
                         "batch.size": 16384, "queue.buffering.max.kbytes": 256, "acks": 1,
                         "throttle_cb": lambda event: throttles.append((time.monotonic(), event.throttle_time))})
    value = b"v" * 1000
    sent = 0
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    stopped = time.monotonic()
    assert producer.flush(30) == 0
    throttles = [(at, ms) for at, ms in throttles if ms > 0]     # librdkafka reports 0 when one ends
    assert throttles, "no Produce response carried a throttle time"
    first = throttles[0][0]
    assert first < stopped - 3, f"throttled only after {first - (end - 5):.1f} s"
    window = [size for at, size in acked if first <= at <= stopped]
    rate = sum(window) / (stopped - first)
    print(f"producer: throttled from {first - (end - 5):.2f} s, {rate:.0f} B/s, {len(throttles)} throttles")
    assert 0.75 * quota <= rate <= 1.25 * quota, f"{rate:.0f} B/s against a quota of {quota} B/s"
    assert not errors and len(acked) == sent          # throttled, never lost

    consumer = Consumer({"bootstrap.servers": qbroker.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 20
    while read < sent and time.monotonic() < deadline:
        read += sum(1 for m in consumer.consume(1000, 0.5) if m.error() is None)
    consumer.close()
    assert read == sent

    text = scrape(qbroker)
    assert 'kafka_server_produce_throttle_time_ms_total{client_id="quota-producer",user=""}' in text
    line = next(l for l in text.splitlines()
                if l.startswith('kafka_server_produce_throttled_total{client_id="quota-producer"'))
    assert float(line.split()[-1]) > 0
    set_quota(qbroker, {"client-id": "quota-producer"}, {"producer_byte_rate": None})


def test_consumer_byte_rate_holds_a_consumer_near_its_quota(qbroker):
    quota = 300_000
    topic = f"cq-{uuid.uuid4().hex[:8]}"
    # small batches: a fetch returns at least one whole batch, and one larger than the quota's
    # window (quota x (quota.window.num - 1) s) would be throttled every time, as in Kafka
    producer = Producer({"bootstrap.servers": qbroker.bootstrap, "linger.ms": 5, "acks": 1, "batch.size": 16384})
    count = 3000
    for i in range(count):
        producer.produce(topic, b"%06d" % i + b"c" * 994)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert set_quota(qbroker, {"client-id": "quota-consumer"}, {"consumer_byte_rate": quota}).entries[0].error_code == 0
    throttles = []
    consumer = Consumer({"bootstrap.servers": qbroker.bootstrap, "group.id": f"g-{topic}", "client.id": "quota-consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "throttle_cb": lambda event: throttles.append((time.monotonic(), event.throttle_time))})
    consumer.subscribe([topic])
    seen, at = [], []
    end = time.monotonic() + 4.5
    while time.monotonic() < end:
        for m in consumer.consume(500, 0.2):
            if m.error() is None:
                seen.append(int(m.value()[:6]))
                at.append(time.monotonic())
    stopped = time.monotonic()
    throttles = [(at, ms) for at, ms in throttles if ms > 0]
    assert throttles, "no Fetch response carried a throttle time"
    first = throttles[0][0]
    assert first < stopped - 2.5
    rate = sum(1000 for t in at if t >= first) / (stopped - first)
    print(f"consumer: throttled from {first - (end - 4.5):.2f} s, {rate:.0f} B/s, {len(throttles)} throttles")
    assert 0.6 * quota <= rate <= 1.3 * quota, f"{rate:.0f} B/s against a quota of {quota} B/s"
    assert len(seen) < count                         # the quota, not the data, ended the read
    set_quota(qbroker, {"client-id": "quota-consumer"}, {"consumer_byte_rate": None})
    deadline = time.monotonic() + 20
    while len(seen) < count and time.monotonic() < deadline:
        seen += [int(m.value()[:6]) for m in consumer.consume(1000, 0.5) if m.error() is None]
    consumer.close()
    assert seen == list(range(count))               # in order, nothing lost or repeated


def test_alter_and_describe_errors_and_validate_only(qbroker):
    bad = set_quota(qbroker, {"user": "x", "user2": "y"}, {"producer_byte_rate": 10})
    assert bad.entries[0].error_code == 42
    assert bad.entries[0].error_message == "Unhandled client quota entity type: user2"
    assert set_quota(qbroker, {"ip": "10.0.0.1"}, {"connection_creation_rate": 1}).entries[0].error_code == 42
    fractional = set_quota(qbroker, {"user": "x"}, {"producer_byte_rate": 10.5})
    assert fractional.entries[0].error_message == "producer_byte_rate cannot be a fractional value."
    assert set_quota(qbroker, {"user": "vo"}, {"request_percentage": 10}, validate_only=True).entries[0].error_code == 0
    assert (("user", "vo"),) not in describe_all(qbroker)
    C = DescribeClientQuotasRequest.ComponentData
    response = send(qbroker, DescribeClientQuotasRequest(components=[C(entity_type="user", match_type=0, match=None)],
                                                          strict=False))
    assert (response.error_code, response.entries) == (42, None)


def test_controller_mutation_rate_refuses_topic_creation(qbroker):
    assert set_quota(qbroker, {"client-id": "kwire-mutator"}, {"controller_mutation_rate": 1}).entries[0].error_code == 0
    admin = KafkaAdminClient(bootstrap_servers=qbroker.bootstrap, client_id="kwire-mutator", request_timeout_ms=10000)
    T = CreateTopicsRequest.CreatableTopic
    prefix = uuid.uuid4().hex[:6]
    try:
        async def create(name, partitions):
            return await admin._manager.send(CreateTopicsRequest(
                topics=[T(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=10000, validate_only=False))
        first = admin._manager.run(create, f"m1-{prefix}", 3)      # 2 tokens of burst: allowed, goes below 0
        assert first.topics[0].error_code == 0
        second = admin._manager.run(create, f"m2-{prefix}", 1)
        assert second.topics[0].error_code == 89, second           # THROTTLING_QUOTA_EXCEEDED
        assert 0 < second.throttle_time_ms <= 1000
    finally:
        admin.close()
        set_quota(qbroker, {"client-id": "kwire-mutator"}, {"controller_mutation_rate": None})


def quotas_cli(broker, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kwire", "quotas", *args], capture_output=True, text=True, timeout=60)


def test_cli_alters_and_describes(qbroker):
    done = quotas_cli(qbroker, "--bootstrap-server", qbroker.bootstrap, "--alter", "--entity-type", "users",
                      "--entity-name", "cli-user", "--entity-type", "clients", "--entity-default",
                      "--add-config", "producer_byte_rate=1024,request_percentage=50")
    assert (done.returncode, done.stdout) == (
        0, "Completed updating config for user-principal 'cli-user', the default client-id.\n"), done.stderr
    shown = quotas_cli(qbroker, "describe", "--bootstrap-server", qbroker.bootstrap, "--entity-type", "users",
                       "--entity-name", "cli-user", "--entity-type", "clients", "--entity-default")
    assert shown.stdout == ("Quota configs for user-principal 'cli-user', the default client-id are "
                            "producer_byte_rate=1024.0,request_percentage=50.0\n"), shown.stderr
    assert describe_all(qbroker)[(("client-id", None), ("user", "cli-user"))] == {
        "producer_byte_rate": 1024.0, "request_percentage": 50.0}
    refused = quotas_cli(qbroker, "alter", "--bootstrap-server", qbroker.bootstrap, "--entity-type", "clients",
                         "--entity-name", "x", "--add-config", "bogus=1")
    assert refused.returncode == 1 and "Invalid configuration key bogus" in refused.stderr
    done = quotas_cli(qbroker, "alter", "--bootstrap-server", qbroker.bootstrap, "--entity-type", "users",
                      "--entity-name", "cli-user", "--entity-type", "clients", "--entity-default",
                      "--delete-config", "producer_byte_rate,request_percentage")
    assert done.returncode == 0, done.stderr
    assert (("client-id", None), ("user", "cli-user")) not in describe_all(qbroker)



def test_quotas_survive_a_restart(qbroker):
    assert set_quota(qbroker, {"user": None}, {"consumer_byte_rate": 1_000_000}).entries[0].error_code == 0
    qbroker.stop()
    qbroker.start()
    assert describe_all(qbroker)[(("user", None),)] == {"consumer_byte_rate": 1_000_000.0}
    set_quota(qbroker, {"user": None}, {"consumer_byte_rate": None})


def test_java_admin_client_alters_and_describes(qbroker, tmp_path):
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    out, code = run_to_end("JcQuotas", qbroker.bootstrap, "jq-user", stderr_path=tmp_path / "stderr")
    checks = {}
    for line in out.splitlines():
        item = json.loads(line)
        checks[item.pop("check")] = item
    stderr = (tmp_path / "stderr").read_text()[-3000:]
    assert all(c.get("ok") for c in checks.values()), (checks, stderr)
    assert "done" in checks, stderr
    assert (checks["alter_invalid"]["bob"], checks["alter_invalid"]["empty"]) == ("InvalidRequestException",) * 2
    assert checks["validate_only"]["described"] == {}
    everything = checks["describe_all"]["entities"]
    assert everything["client-id=jq-client,user=jq-user"] == {"producer_byte_rate": 4096.0}
    assert everything["client-id=<default>"] == {"consumer_byte_rate": 8192.0}
    assert checks["describe_user_strict"]["entities"] == {"client-id=jq-client,user=jq-user": {"producer_byte_rate": 4096.0}}
    assert checks["describe_default_clients"]["entities"] == {"client-id=<default>": {"consumer_byte_rate": 8192.0}}
    assert "client-id=jq-client,user=jq-user" not in checks["remove"]["entities"]


def test_acls_gate_the_quota_apis_and_a_user_quota_follows_the_login(tmp_path):
    """With an authorizer: Describe needs DESCRIBE_CONFIGS and Alter ALTER_CONFIGS on the
    cluster (refusals as Kafka answers them); a quota of user ``alice`` throttles her SASL
    login, whatever its client id, and not ``bob``."""
    from confluent_kafka.admin import AclOperation, NewTopic, ResourceType
    from tests.support.acl_broker import AclBroker

    def send_as(b, user, request):
        admin = KafkaAdminClient(**b.kafka_python(user), request_timeout_ms=10000)
        try:
            async def call():
                return await admin._manager.send(request)
            return admin._manager.run(call)
        finally:
            admin.close()

    E = AlterClientQuotasRequest.EntryData
    alter_alice = AlterClientQuotasRequest(entries=[E(entity=[E.EntityData(entity_type="user", entity_name="alice")],
                                                      ops=[E.OpData(key="producer_byte_rate", value=100_000.0,
                                                                    remove=False)])], validate_only=False)
    with AclBroker(tmp_path, **{"quota.window.num": WINDOW_NUM}) as b:
        refused = send_as(b, "alice", DescribeClientQuotasRequest(components=[], strict=False))
        assert (refused.error_code, refused.entries) == (31, None)          # CLUSTER_AUTHORIZATION_FAILED
        refused = send_as(b, "alice", alter_alice)
        assert [e.error_code for e in refused.entries] == [31]
        assert send_as(b, "admin", alter_alice).entries[0].error_code == 0
        b.allow("alice", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)
        shown = send_as(b, "alice", DescribeClientQuotasRequest(components=[], strict=False))
        assert [(e.entity[0].entity_name, e.values[0].value) for e in shown.entries] == [("alice", 100_000.0)]

        topic = f"uq-{uuid.uuid4().hex[:6]}"
        admin = b.admin()
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        for user in ("alice", "bob"):
            b.allow(user, ResourceType.TOPIC, topic, AclOperation.WRITE)
        results = {}
        for user in ("alice", "bob"):
            throttles, acked = [], []
            producer = Producer({**b.client(user), "client.id": f"any-{uuid.uuid4().hex[:4]}", "linger.ms": 5,
                                 "batch.size": 16384, "queue.buffering.max.kbytes": 64,
                                 "throttle_cb": lambda e, t=throttles: t.append(e.throttle_time)})
            started = time.monotonic()
            end = started + 2.5
            while time.monotonic() < end:
                try:
                    producer.produce(topic, b"u" * 1000, on_delivery=lambda err, m, a=acked: a.append(err))
                except BufferError:
                    producer.poll(0.01)
                producer.poll(0)
            assert producer.flush(30) == 0
            assert all(err is None for err in acked)
            results[user] = (sum(1 for t in throttles if t > 0), len(acked), time.monotonic() - started)
        assert results["alice"][0] > 0 and results["bob"][0] == 0, results
        # held to her quota: what she got acknowledged (until her flush ended) is the quota over
        # that time plus at most the burst a fresh window allows
        assert results["alice"][1] * 1000 <= 100_000 * (results["alice"][2] + WINDOW_NUM), results
        assert results["bob"][1] > 2 * results["alice"][1], results
