"""SASL_PLAINTEXT and SASL_SSL listeners through stock clients, and what bad input gets.

A ``kwire serve`` process with a PLAINTEXT listener, a SASL_PLAINTEXT one
(PLAIN and SCRAM-SHA-256/512 enabled) and a SASL_SSL one (PLAIN), configured
with Kafka's keys and JAAS syntax.  Each client logs in and produces and
reads back; a wrong password, an unknown mechanism, a request before the login
and an oversized token each end in a closed connection and a log line while
the broker serves everyone else."""
from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)

from tests.support.roundtrip import (aiokafka_produce_and_consume, kafka_python_produce_and_consume,
                                     produce_and_consume)
from kwire.testing.process import BrokerProcess, free_port
from tests.support.certs import CertificateAuthority

pytestmark = pytest.mark.clients

KCAT = shutil.which("kcat")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
DELAY_MS = 300


@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    """(broker, server TLS files, {listener: port})."""
    directory = tmp_path_factory.mktemp("sasl")
    server = CertificateAuthority().server_files(directory)
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    properties = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": str(DELAY_MS),
        **server.kafka_properties("PEM"),
    }
    broker = BrokerProcess(port=ports["PLAINTEXT"], properties=properties).start()
    yield broker, server, ports
    broker.close()


def plain(user: str, password: str) -> dict:
    return {"sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}


def test_confluent_kafka_plain_over_sasl_plaintext(sasl):
    _broker, _server, ports = sasl
    config = {"security.protocol": "SASL_PLAINTEXT", **plain("alice", "alice-secret")}
    config["bootstrap.servers"] = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    assert produce_and_consume(config, "sasl-plain", 100, b"sasl-") == [
        b"sasl-%d" % i for i in range(100)]
    metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}", **config}
                           ).list_topics(timeout=10)
    assert [b.port for b in metadata.brokers.values()] == [ports["SASL_PLAINTEXT"]]


def test_confluent_kafka_plain_over_sasl_ssl(sasl):
    _broker, server, ports = sasl
    config = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(server.truststore),
              **plain("admin", "admin-secret")}
    config["bootstrap.servers"] = f"127.0.0.1:{ports['SASL_SSL']}"
    assert produce_and_consume(config, "sasl-ssl", 50, b"sasl-") == [
        b"sasl-%d" % i for i in range(50)]


def test_kafka_python_plain(sasl):
    _broker, _server, ports = sasl
    options = dict(bootstrap_servers=f"127.0.0.1:{ports['SASL_PLAINTEXT']}", security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    assert kafka_python_produce_and_consume(options, "sasl-kafka-python", 20, b"kp-") == [
        b"kp-%d" % i for i in range(20)]


def test_aiokafka_plain_over_sasl_ssl(sasl):
    _broker, server, ports = sasl
    options = dict(bootstrap_servers=f"127.0.0.1:{ports['SASL_SSL']}", security_protocol="SASL_SSL",
                   ssl_context=server.ssl_context(client_certificate=False), sasl_mechanism="PLAIN",
                   sasl_plain_username="alice", sasl_plain_password="alice-secret")
    assert aiokafka_produce_and_consume(options, "sasl-aiokafka", 20, b"aio-") == [
        b"aio-%d" % i for i in range(20)]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_plain(sasl):
    _broker, _server, ports = sasl
    options = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
               "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    bootstrap = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    subprocess.run([KCAT, "-b", bootstrap, *options, "-P", "-t", "sasl-kcat"], input=b"a\nb\n", check=True,
                   timeout=30)
    out = subprocess.run([KCAT, "-b", bootstrap, *options, "-C", "-t", "sasl-kcat", "-o", "beginning", "-e",
                          "-q"], capture_output=True, check=True, timeout=30)
    assert out.stdout.split() == [b"a", b"b"]


def test_a_wrong_password_fails_and_is_logged(sasl):
    broker, _server, ports = sasl
    errors = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                         "security.protocol": "SASL_PLAINTEXT", "message.timeout.ms": 3000,
                         "error_cb": errors.append, **plain("alice", "Not-Alices-Password-93")})
    failed = []
    producer.produce("sasl-denied", b"x", on_delivery=lambda err, _m: failed.append(err))
    producer.flush(10)
    assert failed and failed[0] is not None
    assert any("Authentication failed" in str(e) or "SASL" in str(e) for e in errors), errors
    assert "SASL authentication failed" in broker.log_text()
    assert "Not-Alices-Password-93" not in broker.log_text()        # passwords are never logged
    failures = broker.log_text().count("SASL authentication failed: PLAIN: wrong password for 'alice'")
    assert failures <= 10 / (DELAY_MS / 1000) + 2      # each retry waited the failure delay


def frame(request, version: int, correlation_id: int = 1) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="raw")
    return request.encode(header=True, framed=True)


def closed(sock: socket.socket, timeout: float = 10) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def test_an_unknown_mechanism_gets_the_enabled_list_then_the_connection_closes(sasl):
    broker, _server, ports = sasl
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as s:
        started = time.monotonic()
        s.sendall(frame(SaslHandshakeRequest[1](mechanism="GSSAPI"), 1))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(size, socket.MSG_WAITALL)
        response = SaslHandshakeResponse.decode(memoryview(body), version=1, header=True)
        assert response.error_code == 33                      # UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed(s)
        assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
    assert "SASL handshake for 'GSSAPI' refused" in broker.log_text()


def test_a_request_before_authentication_closes_the_connection(sasl):
    broker, _server, ports = sasl
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(frame(MetadataRequest[1](topics=None), 1))
        assert closed(s)
    assert "Metadata request before SASL authentication" in broker.log_text()
    assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers


def test_an_oversized_frame_before_authentication_is_refused_unread(sasl):
    broker, _server, ports = sasl
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(struct.pack(">i", 10 * 1024 * 1024) + b"\x00" * 1000)    # announces 10 MiB
        assert closed(s)
    assert broker.alive()
    assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers


def test_sasl_messages_out_of_order_get_illegal_sasl_state_then_a_close(sasl):
    broker, _server, ports = sasl
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(frame(SaslAuthenticateRequest[1](auth_bytes=b"\x00alice\x00alice-secret"), 1))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        response = SaslAuthenticateResponse.decode(memoryview(s.recv(size, socket.MSG_WAITALL)), version=1,
                                                   header=True)
        assert response.error_code == 34                      # ILLEGAL_SASL_STATE
        assert closed(s)
    assert broker.alive()
