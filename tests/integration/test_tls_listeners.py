"""SSL listeners beside PLAINTEXT ones, through stock clients over real TLS.

A ``kwire serve`` process listens on PLAINTEXT and SSL ports (and a mutual-TLS
one), configured with Kafka's ``ssl.*`` keys and a CA made for the test
(tests/support/certs.py).  Each client produces and reads back over TLS; it
can only do so if Metadata answers with the SSL listener's endpoint, since
the client reconnects there.  Bad input on a TLS port closes that connection
and the broker goes on serving."""
from __future__ import annotations

import shutil
import socket
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.support.roundtrip import (aiokafka_produce_and_consume, kafka_python_produce_and_consume,
                                     produce_and_consume)
from kwire.testing.process import BrokerProcess, BrokerStartError, free_port
from tests.support.certs import CertificateAuthority

pytestmark = pytest.mark.clients

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(broker, server files, alice's client files, {listener name: port})."""
    directory = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(key_type="ec")
    server = ca.server_files(directory)
    alice = ca.client_files(directory, "CN=alice,OU=eng,O=kwire,C=US")
    ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "MTLS": free_port()}
    properties = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        **server.kafka_properties("PEM"),
        "listener.name.mtls.ssl.client.auth": "required",
    }
    broker = BrokerProcess(port=ports["PLAINTEXT"], properties=properties).start()
    yield broker, server, alice, ports
    broker.close()


def test_confluent_kafka_produces_and_consumes_over_tls(tls):
    broker, server, alice, ports = tls
    config = {"security.protocol": "SSL", **alice.librdkafka_config(client_certificate=False)}
    config["bootstrap.servers"] = f"127.0.0.1:{ports['SSL']}"
    got = produce_and_consume(config, "tls-confluent", 200, b"tls-")
    assert got == [b"tls-%d" % i for i in range(200)]
    metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", **config}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", ports["SSL"])]
    plain = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [b.port for b in plain.brokers.values()] == [ports["PLAINTEXT"]]
    assert "tls-confluent" in plain.topics                 # one log behind every listener


def test_kafka_python_over_tls(tls):
    _broker, _server, alice, ports = tls
    options = dict(bootstrap_servers=f"127.0.0.1:{ports['SSL']}", security_protocol="SSL",
                   ssl_context=alice.ssl_context(client_certificate=False))
    assert kafka_python_produce_and_consume(options, "tls-kafka-python", 50, b"kp-") == [
        b"kp-%d" % i for i in range(50)]


def test_aiokafka_over_mutual_tls(tls):
    _broker, _server, alice, ports = tls
    options = dict(bootstrap_servers=f"127.0.0.1:{ports['MTLS']}", security_protocol="SSL",
                   ssl_context=alice.ssl_context())
    assert aiokafka_produce_and_consume(options, "tls-aiokafka", 30, b"aio-") == [
        b"aio-%d" % i for i in range(30)]


def test_mutual_tls_refuses_a_client_without_a_certificate(tls):
    broker, _server, alice, ports = tls
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports['MTLS']}", "security.protocol": "SSL",
                         "message.timeout.ms": 3000, **alice.librdkafka_config(client_certificate=False)})
    failures = []
    producer.produce("tls-refused", b"x", on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(10)
    assert failures and failures[0] is not None
    assert "TLS handshake on listener MTLS failed" in broker.log_text()


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_over_tls(tls):
    _broker, server, _alice, ports = tls
    bootstrap = f"127.0.0.1:{ports['SSL']}"
    options = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={server.truststore}"]
    subprocess.run([KCAT, "-b", bootstrap, *options, "-P", "-t", "tls-kcat"], input=b"one\ntwo\nthree\n",
                   check=True, timeout=30)
    out = subprocess.run([KCAT, "-b", bootstrap, *options, "-C", "-t", "tls-kcat", "-o", "beginning", "-e",
                          "-q"], capture_output=True, check=True, timeout=30)
    assert out.stdout.split() == [b"one", b"two", b"three"]


@pytest.mark.parametrize("payload", [b"\x00\x00\x00\x10" + b"\x00" * 16,           # a plaintext Kafka frame
                                     b"\x16\x03\x01\x02\x00" + b"\xff" * 600])    # a mangled ClientHello
def test_garbage_on_a_tls_port_closes_only_that_connection(tls, payload):
    broker, _server, alice, ports = tls
    with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=15) as s:
        s.sendall(payload)
        received, closed = b"", False
        try:
            while len(received) < 65536:
                data = s.recv(4096)          # a TLS alert at most, then the end
                if not data:
                    closed = True
                    break
                received += data
        except ConnectionResetError:
            closed = True
        assert closed, f"the broker kept the connection open after {received[:40]!r}"
    # the broker still serves TLS and plaintext clients
    context = alice.ssl_context(client_certificate=False)
    with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=15) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.version() in ("TLSv1.2", "TLSv1.3")
    assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers
    assert broker.alive()
    assert "TLS handshake on listener SSL failed" in broker.log_text()


def test_a_tls_listener_without_a_keystore_refuses_to_start(tmp_path):
    broker = BrokerProcess(tmp_path, port=free_port(), properties={
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{free_port()}",
    })
    try:
        with pytest.raises(BrokerStartError):
            broker.start(timeout=15)
        assert "ssl.keystore.location" in broker.log_text()
        assert broker.proc.poll() not in (None, 0)
    finally:
        broker.close()
