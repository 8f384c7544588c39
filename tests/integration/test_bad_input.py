"""Bad input gets a Kafka error code or a closed connection, and the broker keeps serving."""
import socket
import struct
import uuid

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse

from tests.support.broker import BrokerProcess


def raw(bootstrap):
    host, port = bootstrap.split(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    return s


def recv_frame(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def assert_closed(s):
    s.settimeout(5)
    try:
        assert s.recv(1) == b""
    except ConnectionResetError:
        pass


def header(api_key, version, correlation_id=1, client_id=b"raw"):
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def still_serving(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=5000)
    try:
        admin.list_topics()
    finally:
        admin.close()


@pytest.mark.parametrize("payload", [
    b"\xde\xad\xbe\xef" * 16,                       # garbage (length prefix is huge/negative)
    struct.pack(">i", 2**31 - 1) + b"x",            # huge length prefix
    struct.pack(">i", -5),                          # negative length
    struct.pack(">i", 6) + header(3, 1)[:6],        # frame shorter than a request header
    struct.pack(">i", 12) + header(9999, 0),        # unknown api key
    struct.pack(">i", 12) + header(3, 99),          # unsupported Metadata version
    struct.pack(">i", 20) + header(3, 1) + b"\x00\x00\x00\x03\x00\x09ab\x00",  # body runs short
], ids=["garbage", "huge", "negative", "short-header", "unknown-api", "bad-version", "corrupt-body"])
def test_connection_closed_and_broker_keeps_serving(broker, payload):
    s = raw(broker.bootstrap)
    s.sendall(payload)
    assert_closed(s)
    s.close()
    still_serving(broker)


def test_truncated_frame_then_disconnect(broker):
    s = raw(broker.bootstrap)
    s.sendall(struct.pack(">i", 100) + header(3, 1))
    s.close()
    still_serving(broker)


def test_unsupported_api_versions_version_answered_as_v0(broker):
    s = raw(broker.bootstrap)
    body = header(18, 99, correlation_id=42) + b"\x00\x00"
    s.sendall(struct.pack(">i", len(body)) + body)
    frame = recv_frame(s)
    assert struct.unpack(">i", frame[:4])[0] == 42
    resp = ApiVersionsResponse.decode(frame[4:], version=0)
    assert resp.error_code == 35
    assert any(k.api_key == 18 and k.max_version >= 3 for k in resp.api_keys)
    s.close()


def test_pipelined_requests_answered_in_order(broker):
    s = raw(broker.bootstrap)
    out = b""
    for cid in range(20):
        req = MetadataRequest[1](topics=None)
        req.with_header(correlation_id=cid, client_id="pipe")
        out += bytes(req.encode(header=True, framed=True))
    s.sendall(out)
    got = []
    for _ in range(20):
        frame = recv_frame(s)
        got.append(struct.unpack(">i", frame[:4])[0])
        MetadataResponse.decode(frame[4:], version=1)
    assert got == list(range(20))
    s.close()


def test_unknown_topic_with_auto_create_off(fresh_broker):
    b = fresh_broker(**{"auto.create.topics.enable": "false"})
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, max_block_ms=2000)
    with pytest.raises(KafkaTimeoutError):
        producer.send("does-not-exist", b"x").get(timeout=5)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    assert "does-not-exist" not in admin.list_topics()
    admin.close()


def test_invalid_topic_name_in_metadata(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    errors = []
    producer.produce("bad topic name!", b"x", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert errors and errors[0] is not None
    still_serving(broker)


def test_oversized_request_closes_only_that_connection(fresh_broker):
    b = fresh_broker(**{"socket.request.max.bytes": "10000"})
    s = raw(b.bootstrap)
    s.sendall(struct.pack(">i", 10001) + b"\x00" * 100)
    assert_closed(s)
    still_serving(b)
    topic = f"after-{uuid.uuid4().hex[:6]}"
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    assert p.send(topic, b"ok").get(timeout=10).offset == 0
    p.close()


def test_failed_acks_zero_produce_closes_connection(broker):
    from kafka.protocol.producer import ProduceRequest
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=7, records=b"\x00" * 70)
    req = ProduceRequest[7](transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="no-such-topic-acks0", partition_data=[part])])
    req.with_header(correlation_id=3, client_id="acks0")
    s = raw(broker.bootstrap)
    s.sendall(bytes(req.encode(header=True, framed=True)))
    assert_closed(s)   # no response for acks=0; the broker closes so the producer notices
    s.close()
    still_serving(broker)
