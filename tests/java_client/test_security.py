"""Apache Kafka's Java client over TLS and SASL_SSL: Kafka's own perf tools (``ProducerPerformance``,
``ConsumerPerformance``), configured the way a Java user configures them (a client
properties file with ``security.protocol``, a PEM truststore, ``sasl.jaas.config``), produce
to and read back from a kwire process with SSL and SASL_SSL listeners."""
from __future__ import annotations

import uuid

import pytest

from kwire.testing.process import BrokerProcess, free_port
from tests.java_client.test_perf_tools import TOOLS_JAR, run_tool
from tests.support.certs import CertificateAuthority

COUNT = 5_000
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="alice-secret"')


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    if not TOOLS_JAR.is_file():
        pytest.skip(f"no {TOOLS_JAR.name} (the shared jars folder next to the project)")
    directory = tmp_path_factory.mktemp("java-tls")
    server = CertificateAuthority().server_files(directory)
    ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "SASL_SSL": free_port()}
    broker = BrokerProcess(directory / "data", port=ports["PLAINTEXT"], properties={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f"{JAAS} user_alice=\"alice-secret\";",
        **server.kafka_properties("PEM")}).start()
    yield broker, server, ports, directory
    broker.close()


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_java_perf_tools_over(secured, protocol):
    _broker, server, ports, directory = secured
    config = directory / f"client-{protocol}.properties"
    lines = [f"security.protocol={protocol}", "ssl.truststore.type=PEM",
             f"ssl.truststore.location={server.truststore}"]
    if protocol == "SASL_SSL":
        lines += ["sasl.mechanism=PLAIN", f"sasl.jaas.config={JAAS};"]
    config.write_text("\n".join(lines) + "\n")
    bootstrap = f"127.0.0.1:{ports[protocol]}"
    topic = f"jc-{protocol.lower()}-{uuid.uuid4().hex[:6]}"
    produced = run_tool("ProducerPerformance", "--topic", topic, "--num-records", str(COUNT), "--record-size",
                        "200", "--throughput", "-1", "--producer.config", str(config),
                        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all")
    assert produced.stdout.strip().splitlines()[-1].startswith(f"{COUNT} records sent")
    consumed = run_tool("ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                        "--messages", str(COUNT), "--timeout", "30000", "--group", f"{topic}-g",
                        "--consumer.config", str(config))
    lines = consumed.stdout.strip().splitlines()
    row = dict(zip((h.strip() for h in lines[-2].split(",")), (v.strip() for v in lines[-1].split(","))))
    assert int(row["data.consumed.in.nMsg"]) == COUNT
