"""kwire.security.tls_stream's TLS connections against real clients.

Megabytes each way through confluent-kafka (reads of many TLS records at once,
writes that fill the socket buffer and are retried), and clients that misbehave
with the stdlib's ssl module: one that drops its socket in the middle of a frame,
one that never finishes its handshake, one that sends close_notify.  The broker
must go on serving everyone else."""
from __future__ import annotations

import hashlib
import os
import socket
import ssl
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kwire.security.listeners import HANDSHAKE_TIMEOUT_S
from kwire.testing.process import BrokerProcess, free_port
from tests.support.certs import CertificateAuthority

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(broker, SSL port, client ssl.SSLContext, librdkafka config for the SSL listener)."""
    directory = tmp_path_factory.mktemp("tls-stream")
    ca = CertificateAuthority(key_type="ec")
    server = ca.server_files(directory)
    ports = {"PLAINTEXT": free_port(), "SSL": free_port()}
    broker = BrokerProcess(port=ports["PLAINTEXT"], properties={
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        **server.kafka_properties("PEM")}).start()
    context = ssl.create_default_context(cafile=str(server.truststore))
    config = {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
              "ssl.ca.location": str(server.truststore)}
    yield broker, ports["SSL"], context, config
    broker.close()


def api_versions_frame(correlation_id: int) -> bytes:
    """An ApiVersions v0 request, framed (request header v1, client id "t", empty body)."""
    header = struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t"
    return struct.pack(">i", len(header)) + header


def read_frame(sock) -> bytes:
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    return read_exactly(sock, size)


def read_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = sock.recv(n - len(data))
        assert more, f"EOF after {len(data)} of {n} bytes"
        data += more
    return data


def assert_still_serving(port: int, context: ssl.SSLContext, correlation_id: int = 7) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(api_versions_frame(correlation_id))
            response = read_frame(s)
    assert struct.unpack(">ih", response[:6]) == (correlation_id, 0)


def test_megabytes_produced_and_fetched_over_tls_arrive_intact(tls):
    """About 12 MB: records up to 900 KB (frames larger than any socket buffer, written in
    many retries) and many small ones, read back in fetches of up to 50 MB."""
    broker, _port, _context, config = tls
    topic = "tls-large"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    values = [os.urandom(900_000) for _ in range(6)] + [os.urandom(1000 + i) for i in range(6000)]
    producer = Producer({**config, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "message.max.bytes": 1_000_000})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(60) == 0
    consumer = Consumer({**config, "group.id": "tls-large", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            assert msg.error() is None, msg.error()
            got.append(hashlib.sha256(msg.value()).digest())
    consumer.close()
    assert got == [hashlib.sha256(v).digest() for v in values]


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_dropping_its_socket_mid_frame_closes_only_that_connection(tls, how):
    broker, port, context, config = tls
    raw = socket.create_connection(("127.0.0.1", port), timeout=15)
    s = context.wrap_socket(raw, server_hostname="localhost")
    s.sendall(api_versions_frame(1))
    assert struct.unpack(">i", read_frame(s)[:4]) == (1,)
    s.sendall(struct.pack(">i", 100_000) + b"\x00\x00" * 5000)     # a tenth of a frame
    if how == "reset":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()            # no close_notify: the socket just goes (FIN, or RST with linger 0)
    assert_still_serving(port, context)
    assert AdminClient(config).list_topics(timeout=10).brokers
    assert broker.alive()
    if how == "close":
        deadline = time.monotonic() + 10
        while "connection closed mid-frame" not in broker.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "connection closed mid-frame" in broker.log_text()


def test_a_client_that_never_finishes_its_handshake_is_closed_after_the_timeout(tls):
    broker, port, context, _config = tls
    silent = socket.create_connection(("127.0.0.1", port), timeout=HANDSHAKE_TIMEOUT_S + 10)
    partial = socket.create_connection(("127.0.0.1", port), timeout=HANDSHAKE_TIMEOUT_S + 10)
    partial.sendall(b"\x16\x03\x01\x02\x00" + b"\x01\x00")    # the start of a ClientHello, no more
    started = time.monotonic()
    assert_still_serving(port, context)        # meanwhile others are served
    for s in (silent, partial):
        try:
            assert s.recv(4096) == b""
        except ConnectionResetError:
            pass
        s.close()
    assert HANDSHAKE_TIMEOUT_S - 1 < time.monotonic() - started < HANDSHAKE_TIMEOUT_S + 8
    assert "not done after" in broker.log_text()
    assert broker.alive()


def test_close_notify_from_the_client_is_answered_with_close_notify(tls):
    _broker, port, context, _config = tls
    with socket.create_connection(("127.0.0.1", port), timeout=15) as raw:
        s = context.wrap_socket(raw, server_hostname="localhost")
        s.sendall(api_versions_frame(3))
        assert struct.unpack(">ih", read_frame(s)[:6]) == (3, 0)
        plain = s.unwrap()        # sends close_notify, returns once the broker's arrives
        assert plain.recv(1) == b""
    # close_notify in the middle of a frame: the broker closes too
    with socket.create_connection(("127.0.0.1", port), timeout=15) as raw:
        s = context.wrap_socket(raw, server_hostname="localhost")
        s.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
        plain = s.unwrap()
        assert plain.recv(1) == b""
    assert_still_serving(port, context)


def test_pipelined_requests_over_one_tls_connection_are_all_answered_in_order(tls):
    """Many requests written at once, responses read only afterwards: the broker's reads and
    writes of one connection interleave, and its writes wait for room."""
    _broker, port, context, _config = tls
    count = 2000
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"".join(api_versions_frame(i) for i in range(count)))
            ids = [struct.unpack(">i", read_frame(s)[:4])[0] for _ in range(count)]
    assert ids == list(range(count))


def test_abandoned_tls_long_polls_release_their_sockets(tls):
    """TLS clients park a fetch (no wait limit), then close their sockets without close_notify,
    as librdkafka and kafka-python do: the broker sees the FIN under TLS and lets the
    connections go at once, not at the fetch deadline; then it serves a new client."""
    from tests.integration.test_connections import fetch_frame, open_fds, wait_until
    broker, port, context, _config = tls
    topic = "tls-parked"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    time.sleep(0.3)
    before = open_fds(broker.proc.pid)
    clients = []
    for i in range(40):
        s = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15),
                                server_hostname="localhost")
        s.sendall(fetch_frame(topic if i % 2 else None))
        clients.append(s)
    assert wait_until(lambda: open_fds(broker.proc.pid) >= before + 40, 10)
    for s in clients:
        s.close()                    # SSLSocket.close() sends no close_notify: a FIN only
    after = wait_until(lambda: (n := open_fds(broker.proc.pid)) <= before + 3 and n, 10) \
        or open_fds(broker.proc.pid)
    assert after <= before + 3, f"{after - before} descriptors still held after the clients left"
    assert_still_serving(port, context, correlation_id=9)
