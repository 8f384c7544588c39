"""Connections that misbehave cost the broker nothing for long.

Abandoned long-poll fetches, descriptor exhaustion, idle and slowloris
connections, and many large frames at once, all over real sockets to a
broker process.
"""
import logging
import os
import resource
import socket
import struct
import threading
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.consumer import FetchRequest

from tests.support.measure import process_memory

pytestmark = pytest.mark.clients

logging.getLogger("kafka").setLevel(logging.CRITICAL)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_until(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def create_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def fetch_frame(topic: str | None, max_wait_ms: int = 2**31 - 1, correlation_id: int = 1) -> bytes:
    """A framed Fetch v4 that parks: min_bytes 1 at the log end (or no partitions at all)."""
    topics = []
    if topic is not None:
        part = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        topics = [FetchRequest.FetchTopic(topic=topic, partitions=[part])]
    req = FetchRequest[4](replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                          isolation_level=0, topics=topics)
    req.with_header(correlation_id=correlation_id, client_id="abandoned")
    return bytes(req.encode(header=True, framed=True))


def connect(bootstrap: str, timeout: float = 5) -> socket.socket:
    host, port = bootstrap.split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def recv_frame(s: socket.socket) -> bytes | None:
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf
    head = exact(4)
    return None if head is None else exact(struct.unpack(">i", head)[0])


def closed_by_broker(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def round_trip(bootstrap: str, topic: str) -> None:
    """What a user checks: a stock producer and consumer still work."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, b"still-serving").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    found = any(m.value == b"still-serving" for m in consumer)   # stops at the first match
    consumer.close()
    assert found


def test_abandoned_long_poll_fetches_release_their_sockets(fresh_broker):
    b = fresh_broker()
    topic = f"parked-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic)
    time.sleep(0.3)
    before = open_fds(b.proc.pid)
    socks = []
    for i in range(200):
        s = connect(b.bootstrap)
        s.sendall(fetch_frame(topic if i % 2 else None))   # half name no partition at all
        socks.append(s)
    assert wait_until(lambda: open_fds(b.proc.pid) >= before + 200, 10)
    for s in socks:
        s.close()
    after = wait_until(lambda: (n := open_fds(b.proc.pid)) <= before + 5 and n, 10) or open_fds(b.proc.pid)
    print(f"broker fds: {before} before, {after} after 200 abandoned fetches")
    assert after <= before + 5, f"{after - before} descriptors still held after the clients left"
    round_trip(b.bootstrap, topic)


def test_out_of_descriptors_warns_once_and_recovers(fresh_broker):
    b = fresh_broker()
    topic = f"emfile-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic)
    round_trip(b.bootstrap, topic)
    time.sleep(0.5)
    in_use = open_fds(b.proc.pid)
    _, hard = resource.prlimit(b.proc.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(b.proc.pid, resource.RLIMIT_NOFILE, (in_use + 10, hard))
    held = [connect(b.bootstrap) for _ in range(25)]    # the kernel queues what the broker cannot accept
    assert wait_until(lambda: "cannot accept connections" in b.log_text(), 5)
    time.sleep(1.5)                                     # 15 retry intervals while starved
    log = b.log_text()
    assert log.count("cannot accept connections") == 1, log[-3000:]
    assert "Traceback" not in log and "trio.serve_listeners" not in log, log[-3000:]
    for s in held[:20]:
        s.close()
    round_trip(b.bootstrap, topic)                      # new clients are served again
    assert "accepting connections again" in b.log_text()
    for s in held[20:]:
        s.close()
    assert b.alive()


def test_idle_and_slowloris_connections_closed_while_clients_work(fresh_broker):
    b = fresh_broker(**{"connections.max.idle.ms": "1500", "request.read.timeout.ms": "1000",
                        "fetch.max.wait.ms": "2500"})
    topic = f"timeouts-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic)
    outcome = {}

    def idle():
        s = connect(b.bootstrap)
        t0 = time.monotonic()
        outcome["idle"] = (closed_by_broker(s, 6), time.monotonic() - t0)
        s.close()

    def slowloris():
        s = connect(b.bootstrap)
        frame = fetch_frame(topic)
        t0 = time.monotonic()
        sent = 0
        try:
            for i in range(len(frame) - 1):       # never the last byte
                s.sendall(frame[i:i + 1])
                sent += 1
                time.sleep(0.1)
                if time.monotonic() - t0 > 6:
                    break
        except OSError:
            pass
        outcome["slowloris"] = (closed_by_broker(s, 6), time.monotonic() - t0, sent, len(frame))
        s.close()

    def parked():
        s = connect(b.bootstrap)
        t0 = time.monotonic()
        s.sendall(fetch_frame(f"{topic}-empty", max_wait_ms=2**31 - 1))
        outcome["parked"] = (recv_frame(s) is not None, time.monotonic() - t0)
        s.close()

    create_topic(b.bootstrap, f"{topic}-empty")
    threads = [threading.Thread(target=f) for f in (idle, slowloris, parked)]
    for t in threads:
        t.start()
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0)
    sent = [producer.send(topic, f"m{i}".encode()).get(timeout=10) for i in range(30) if not time.sleep(0.1)]
    producer.close()
    for t in threads:
        t.join(15)
    closed, elapsed = outcome["idle"]
    assert closed and 1.2 <= elapsed < 4, outcome
    closed, elapsed, got, total = outcome["slowloris"]
    assert closed and elapsed < 4 and got < total - 1, outcome
    answered, elapsed = outcome["parked"]     # parked for longer than the idle limit, capped at 2.5 s
    assert answered and 2.2 <= elapsed < 5, outcome
    consumer = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == len(sent):
            break
    consumer.close()
    assert values == [f"m{i}".encode() for i in range(len(sent))]


def big_produce_frame(topic: str, size: int, correlation_id: int) -> bytes:
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=size + 1024)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v" * size, headers=[])
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))
    req = ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[part])])
    req.with_header(correlation_id=correlation_id, client_id="big")
    return bytes(req.encode(header=True, framed=True))


def test_queued_max_request_bytes_bounds_memory_and_answers_everything(fresh_broker):
    from kafka.protocol.producer import ProduceResponse
    size, frames = 20_000_000, 8
    b = fresh_broker(**{"queued.max.request.bytes": str(size), "message.max.bytes": str(size + 100_000)})
    topic = f"big-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic)
    payloads = [big_produce_frame(topic, size, i) for i in range(frames)]
    idle = process_memory(b.proc.pid)["VmRSS"]
    errors = [None] * frames

    def send(i):
        with connect(b.bootstrap, timeout=60) as s:
            s.sendall(payloads[i])
            resp = ProduceResponse[7].decode(recv_frame(s)[4:])
            errors[i] = resp.responses[0].partition_responses[0].error_code

    threads = [threading.Thread(target=send, args=(i,)) for i in range(frames)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    peak = process_memory(b.proc.pid)["VmHWM"]
    print(f"{frames} concurrent {size} byte frames with queued.max.request.bytes={size}: "
          f"broker RSS {idle >> 20} MiB idle, {peak >> 20} MiB peak")
    assert errors == [0] * frames
    assert peak - idle < 3.5 * size, f"peak {peak >> 20} MiB, idle {idle >> 20} MiB"
    consumer = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, fetch_max_bytes=size * 2,
                             max_partition_fetch_bytes=size * 2)
    got = 0
    for message in consumer:
        got += len(message.value) == size
        if got == frames:
            break
    consumer.close()
    assert got == frames
