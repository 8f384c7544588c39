"""KIP-714 with stock clients: librdkafka (confluent-kafka) pushes its own metrics once a
client-metrics subscription matches it, /metrics shows them under its client_id, and they go
when the subscription stops matching."""
from __future__ import annotations

import time
import urllib.request

import pytest

import kwire.testing

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def broker():
    with kwire.testing.broker(properties={"prometheus.listener": "127.0.0.1:0"}) as b:
        yield b


def scrape(b) -> str:
    host, port = b.broker.metrics_endpoint
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def client_lines(text: str, client_id: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.startswith("kwire_client_") and f'client_id="{client_id}"' in line]


def subscribe(b, name: str, configs: dict) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, KafkaAdminClient
    with KafkaAdminClient(bootstrap_servers=b.bootstrap) as admin:
        ops = {k: (AlterConfigOp.SET, v) if v is not None else (AlterConfigOp.DELETE, None)
               for k, v in configs.items()}
        result = admin.alter_configs([ConfigResource("CLIENT_METRICS", name, ops)], incremental=True)
    assert result["client_metrics"][name] == "OK", result


def wait_for(condition, timeout: float, poll=lambda: None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll()
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_librdkafka_pushes_its_metrics_while_subscribed(broker):
    subscribe(broker, "rdkafka", {"metrics": "org.apache.kafka.", "interval.ms": "500",
                                  "match": "client_id=tel-rdkafka.*"})
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "tel-rdkafka-p",
                                         "linger.ms": 5})
    try:
        def produce():
            producer.produce("telemetry-t", b"v")
            producer.poll(0.1)
        assert wait_for(lambda: client_lines(scrape(broker), "tel-rdkafka-p"), 20, produce), scrape(broker)[-3000:]
        lines = client_lines(scrape(broker), "tel-rdkafka-p")
        assert any(line.startswith("kwire_client_producer_") for line in lines), lines
        assert all('client_instance_id="' in line and 'principal="User:ANONYMOUS"' in line for line in lines)
        # the subscription stops matching: the client is told so on its next push, asks again,
        # is asked for nothing, and its series go
        subscribe(broker, "rdkafka", {"match": "client_id=nobody"})
        assert wait_for(lambda: not client_lines(scrape(broker), "tel-rdkafka-p"), 20, produce)
    finally:
        producer.flush(5)


def test_the_java_client_pushes_its_metrics_while_subscribed(broker, tmp_path):
    """Apache Kafka's Java producer (ProducerPerformance from the shared jars): its metrics
    arrive while it runs; its terminating push at close removes them."""
    import shutil
    import subprocess

    from tests.support.java import JARS, client_classpath, java_available
    ok, why = java_available()
    tools = JARS / "kafka-tools-perf-4.0.0-SNAPSHOT.jar"
    if not ok or not tools.is_file() or shutil.which("java") is None:
        pytest.skip(f"the Java client cannot run here: {why if not ok else 'no perf tools jar'}")
    subscribe(broker, "java", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500",
                               "match": "client_id=tel-java,client_software_name=apache-kafka-java"})
    command = ["java", f"-Djava.library.path={JARS / 'deps' / 'native'}", "-cp", f"{tools}:{client_classpath()}",
               "org.apache.kafka.tools.ProducerPerformance", "--topic", "telemetry-java", "--num-records", "8000",
               "--record-size", "100", "--throughput", "2000", "--producer-props",
               f"bootstrap.servers={broker.bootstrap}", "client.id=tel-java"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "stderr.txt", "w"))
    try:
        assert wait_for(lambda: client_lines(scrape(broker), "tel-java") or proc.poll() is not None, 30)
        lines = client_lines(scrape(broker), "tel-java")
        assert any(line.startswith("kwire_client_producer_") for line in lines), \
            (tmp_path / "stderr.txt").read_text()[-2000:]
        proc.wait(timeout=60)
        assert wait_for(lambda: not client_lines(scrape(broker), "tel-java"), 10)     # its terminating push
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
