"""Fetch sessions, Fetch by topic id and DescribeTopicPartitions with stock clients over real
sockets.  A recording proxy (tests/support/recording_proxy.py) between client and broker shows
what each client really sends: the Fetch versions, session ids and epochs, and how many
partitions each incremental request lists.

- Java 4.0 (tests/java/FetchConsumer.java): Fetch v17 by topic id with incremental sessions;
  when its session disappears (as after an eviction) it gets FETCH_SESSION_ID_NOT_FOUND, starts
  a new session and reads on.
- kafka-python 3.0: Fetch v12 by name with incremental sessions, and the same recovery.
- librdkafka 2.x: Fetch by topic id, never a session (session 0, epoch -1: librdkafka has no
  KIP-227), all records.
- AdminClient.describeTopics (tests/java/FetchDescribe.java) and kafka-python's
  KafkaAdminClient.describe_topic_partitions: DescribeTopicPartitions, paged with its cursor.
- Fetch v17 by the id of a deleted, then recreated, topic: UNKNOWN_TOPIC_ID (kafka-python's
  generated request classes over a socket).
"""
from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.consumer import FetchRequest, FetchResponse

from kwire.codecs.errors import ErrorCode as E
from tests.support.broker import BrokerProcess
from tests.support.java import java_available, start_java, stop
from tests.support.recording_proxy import RecordingProxy

PARTITIONS = 200
PER_PARTITION = 10


@pytest.fixture
def proxied():
    """A broker of its own that advertises a recording proxy in front of it."""
    broker = BrokerProcess()
    proxy = RecordingProxy(broker.port)
    broker.properties["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    broker.start()
    try:
        yield broker, proxy, f"127.0.0.1:{proxy.port}"
    finally:
        proxy.close()
        broker.close()


def java_or_skip() -> None:
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")


def create_and_fill(bootstrap: str, partitions: int = PARTITIONS, per_partition: int = PER_PARTITION,
                    topic: str | None = None) -> str:
    topic = topic or f"fs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    fill(bootstrap, topic, partitions, per_partition)
    return topic


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: bytes = b"v") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=b"%s-%d-%d" % (tag, p, i), partition=p)
    assert producer.flush(30) == 0


def raw_fetch(bootstrap: str, version: int, **fields):
    """One Fetch over a socket of its own, built and decoded with kafka-python's generated
    classes (header v2: the requests are flexible from v12)."""
    host, port = bootstrap.split(":")
    body = FetchRequest[version](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                 rack_id="", forgotten_topics_data=[], **fields).encode(version=version)
    header = struct.pack(">hhih", 1, version, 1, 4) + b"test" + b"\x00"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + bytes(body))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    return FetchResponse.decode(memoryview(frame)[5:], version=version)   # after correlation id, tags


def close_session(bootstrap: str, session_id: int) -> None:
    """What an eviction does to a client: its session is gone.  A full fetch naming the session
    with epoch -1 closes it (KIP-227)."""
    r = raw_fetch(bootstrap, 12, session_id=session_id, session_epoch=-1, topics=[])
    assert (r.error_code, r.session_id) == (0, 0)


def session_in_use(proxy) -> int:
    for f in reversed(proxy.fetches()):
        if f.epoch > 0 and f.response_error == 0:
            return f.session_id
    raise AssertionError("no incremental fetch seen")


def assert_incremental(proxy, by_id: bool) -> list:
    fetches = [f for f in proxy.fetches() if f.response_error is not None]
    full = [f for f in fetches if f.epoch == 0 and f.partitions == PARTITIONS]
    incremental = [f for f in fetches if f.epoch > 0 and f.response_error == 0]
    assert full and full[0].response_session_id, "a full fetch of every partition opened a session"
    assert len(incremental) >= 3, f"incremental fetches were sent: {fetches[:10]}"
    assert all(f.by_id == by_id for f in incremental)
    assert max(f.partitions for f in incremental[-3:]) < PARTITIONS, \
        "caught-up incremental fetches list only the partitions that changed"
    return incremental


def wait_for_line(proc, prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"no line {prefix!r} from the Java consumer")


def test_java_consumer_fetches_by_id_in_an_incremental_session_and_recovers_a_lost_one(proxied, tmp_path):
    java_or_skip()
    broker, proxy, bootstrap = proxied
    topic = create_and_fill(bootstrap)
    first = PARTITIONS * PER_PARTITION
    with open(tmp_path / "java.stderr", "w") as stderr:
        proc = start_java("FetchConsumer", bootstrap, topic, 2 * first, 90, stdout=subprocess.PIPE, stderr=stderr)
        try:
            wait_for_line(proc, f"count {first}", 60)
            time.sleep(1.0)                     # caught up: a few empty incremental fetches
            assert proxy.versions(1) == {17}
            assert_incremental(proxy, by_id=True)
            lost = session_in_use(proxy)
            close_session(bootstrap, lost)
            fill(bootstrap, topic, PARTITIONS, PER_PARTITION, tag=b"w")
            done = wait_for_line(proc, "done", 60)
        finally:
            stop(proc)
    assert done.split()[1] == str(2 * first), (done, (tmp_path / "java.stderr").read_text()[-2000:])
    after = [f for f in proxy.fetches() if f.session_id == lost and f.response_error == E.FETCH_SESSION_ID_NOT_FOUND]
    assert after, "the client's next incremental fetch found its session gone"
    later = proxy.fetches()[proxy.fetches().index(after[0]) + 1:]
    assert any(f.epoch == 0 and f.response_session_id not in (0, lost) for f in later), \
        "it opened a new session with a full fetch"
    assert any(f.epoch > 0 and f.response_error == 0 for f in later)


def test_kafka_python_consumer_uses_incremental_sessions_and_recovers_a_lost_one(proxied):
    broker, proxy, bootstrap = proxied
    topic = create_and_fill(bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        seen = drain(consumer, PARTITIONS * PER_PARTITION)
        for _ in range(5):
            consumer.poll(timeout_ms=300)       # caught up: empty incremental fetches
        assert proxy.versions(1) == {12}
        assert_incremental(proxy, by_id=False)
        lost = session_in_use(proxy)
        close_session(bootstrap, lost)
        fill(bootstrap, topic, PARTITIONS, PER_PARTITION, tag=b"w")
        seen += drain(consumer, PARTITIONS * PER_PARTITION)
    finally:
        consumer.close()
    assert sorted(seen) == sorted([b"%s-%d-%d" % (t, p, i) for t in (b"v", b"w") for p in range(PARTITIONS)
                                   for i in range(PER_PARTITION)])
    assert any(f.session_id == lost and f.response_error == E.FETCH_SESSION_ID_NOT_FOUND for f in proxy.fetches())


def drain(consumer, expected: int, timeout: float = 60) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    assert len(values) == expected, f"read {len(values)} of {expected}"
    return values


def test_librdkafka_fetches_by_topic_id_without_sessions(proxied):
    broker, proxy, bootstrap = proxied
    topic = create_and_fill(bootstrap)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fs-rdk", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 200})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values = []
        deadline = time.monotonic() + 60
        while len(values) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(1000, timeout=0.5) if not m.error()]
    finally:
        consumer.close()
    assert len(values) == len(set(values)) == PARTITIONS * PER_PARTITION
    fetches = proxy.fetches()
    assert min(f.version for f in fetches) >= 13 and all(f.by_id for f in fetches)
    assert {(f.session_id, f.epoch) for f in fetches} == {(0, -1)}, "librdkafka has no fetch sessions"


def test_java_admin_describe_topics_pages_through_describe_topic_partitions(proxied, tmp_path):
    java_or_skip()
    broker, proxy, bootstrap = proxied
    names = [create_and_fill(bootstrap, n, 0, topic=f"fsd-{c}-{uuid.uuid4().hex[:6]}") for c, n in (("a", 5), ("b", 2))]
    with open(tmp_path / "describe.stderr", "w") as stderr:
        proc = start_java("FetchDescribe", bootstrap, 3, *names, stdout=subprocess.PIPE, stderr=stderr)
        try:
            out, _ = proc.communicate(timeout=60)
        finally:
            stop(proc)
    assert proc.returncode == 0, (tmp_path / "describe.stderr").read_text()[-3000:]
    from kafka.admin import KafkaAdminClient   # Metadata's ids, to compare
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        ids = {t["name"]: t["topic_id"] for t in admin.describe_topics(names)}
    finally:
        admin.close()
    rows = [line.split() for line in out.splitlines()]
    assert [(r[0], int(r[2])) for r in rows] == [(names[0], 5), (names[1], 2)]
    for r in rows:
        assert r[1] != "AAAAAAAAAAAAAAAAAAAAAA" and uuid_matches(r[1], ids[r[0]])
    assert proxy.versions(75) == {0}
    assert sum(1 for k, _ in proxy.api_calls if k == 75) >= 3, "7 partitions at 3 per page"


def uuid_matches(java_id: str, metadata_id) -> bool:
    """The Java client prints ids base64url-encoded; kafka-python gives a UUID or its string."""
    import base64
    raw = base64.urlsafe_b64decode(java_id + "==")
    return uuid.UUID(bytes=raw) == uuid.UUID(str(metadata_id))


def test_kafka_python_admin_describe_topic_partitions_with_its_cursor(broker):
    from kafka.admin import KafkaAdminClient
    topic = create_and_fill(broker.bootstrap, 5, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        first = admin.describe_topic_partitions([topic], response_partition_limit=2)
        assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1]
        assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}
        rest = admin.describe_topic_partitions([topic], response_partition_limit=10, cursor=first["next_cursor"])
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2, 3, 4]
        assert rest["next_cursor"] is None
        ids = {t["name"]: t["topic_id"] for t in admin.describe_topics([topic])}
        assert str(first["topics"][0]["topic_id"]) == str(ids[topic])
        missing = admin.describe_topic_partitions([f"{topic}-nope"])
        assert missing["topics"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        admin.close()


def test_fetch_by_the_id_of_a_deleted_or_recreated_topic_is_unknown_topic_id(broker):
    from kafka.admin import KafkaAdminClient
    topic = create_and_fill(broker.bootstrap, 1, 3)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def fetch_by_id(topic_id):
        T = FetchRequest.FetchTopic
        r = raw_fetch(broker.bootstrap, 18, session_id=0, session_epoch=-1, topics=[T(topic_id=topic_id, partitions=[
            T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=1 << 20)])])
        return r.responses[0].partitions[0]

    try:
        old = uuid.UUID(str(admin.describe_topics([topic])[0]["topic_id"]))
        assert (fetch_by_id(old).error_code, fetch_by_id(old).high_watermark) == (0, 3)
        admin.delete_topics([topic])
        deadline = time.monotonic() + 10
        while fetch_by_id(old).error_code != E.UNKNOWN_TOPIC_ID and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fetch_by_id(old).error_code == E.UNKNOWN_TOPIC_ID
        create_and_fill(broker.bootstrap, 1, 2, topic=topic)
        new = uuid.UUID(str(admin.describe_topics([topic])[0]["topic_id"]))
        assert new != old
        assert fetch_by_id(old).error_code == E.UNKNOWN_TOPIC_ID
        assert (fetch_by_id(new).error_code, fetch_by_id(new).high_watermark) == (0, 2)
    finally:
        admin.close()
