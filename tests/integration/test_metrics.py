"""Prometheus metrics as an operator reads them: ``kwire serve`` with prometheus.listener set,
a known workload through confluent-kafka, then GET /metrics over HTTP and the values checked
against what the clients did and what is on disk.

The workload (module fixture): RECORDS records of VALUE (keyed) into the RECORDS / 3 of each
partition of a 3-partition topic whose segments roll every 64 KiB; a consumer group reads
CONSUMED of them and commits the offsets it read up to, per partition, then leaves.
"""
from __future__ import annotations

import gc
import pathlib
import socket
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.support.broker import BrokerProcess, free_port

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 300
CONSUMED = 120
VALUE = b"v" * 1000
GROUP = "audit"


def scrape(url: str) -> dict:
    """{(sample name, frozenset(labels)): value} of one GET /metrics."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(metrics: dict, name: str, **labels) -> float:
    return metrics[(name, frozenset({k: str(v) for k, v in labels.items()}.items()))]


def by_label(metrics: dict, name: str, label: str, **fixed) -> dict[str, float]:
    """{value of ``label``: sample} of the samples of ``name`` carrying ``fixed`` labels."""
    out = {}
    for (sample_name, labels), value in metrics.items():
        labels = dict(labels)
        if sample_name == name and label in labels and all(labels.get(k) == str(v) for k, v in fixed.items()):
            out[labels[label]] = value
    return out


def segment_files(data_dir: str, topic: str, partition: int) -> list[pathlib.Path]:
    return sorted(pathlib.Path(data_dir, "logs", f"{topic}-{partition}").glob("*.log"))


def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(topics)).values():
        future.result(30)


def consume_and_commit(bootstrap: str) -> tuple[dict[int, int], Consumer]:
    """Read CONSUMED records in group GROUP and commit, per partition, the offset after the last
    one read; (the committed offsets, the consumer, still in the group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000})
    consumer.subscribe([TOPIC])
    committed: dict[int, int] = {}
    deadline = time.monotonic() + 60
    read = 0
    while read < CONSUMED and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None or message.error():
            continue
        committed[message.partition()] = message.offset() + 1
        read += 1
    assert read == CONSUMED
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in committed.items()], asynchronous=False)
    return committed, consumer


@pytest.fixture(scope="module")
def loaded():
    metrics_port = free_port()
    broker = BrokerProcess(properties={"prometheus.listener": f"127.0.0.1:{metrics_port}",
                                       "offsets.topic.num.partitions": 1}).start()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        create_topics(broker.bootstrap, NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": "65536"}))
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all",
                             "batch.size": 16384})
        for i in range(RECORDS):
            producer.produce(TOPIC, VALUE, key=b"k%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        del producer
        committed, consumer = consume_and_commit(broker.bootstrap)
        in_group = scrape(url)
        consumer.close()
        yield broker, url, committed, in_group
    finally:
        broker.close()


def test_the_url_is_logged_at_start(loaded):
    broker, url, *_ = loaded
    assert f"Prometheus metrics at {url}" in broker.log_text()


def test_messages_and_bytes_in_per_topic_are_exact(loaded):
    broker, url, *_ = loaded
    metrics = scrape(url)
    on_disk = sum(f.stat().st_size for p in range(PARTITIONS) for f in segment_files(broker.data_dir, TOPIC, p))
    assert sample(metrics, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS
    assert sample(metrics, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == on_disk
    assert sample(metrics, "kafka_server_brokertopicmetrics_messagesin_total") >= RECORDS     # every topic
    assert sample(metrics, "kafka_server_brokertopicmetrics_bytesin_total") >= on_disk


def test_log_sizes_are_the_segment_files_and_offsets_the_records(loaded):
    broker, url, *_ = loaded
    metrics = scrape(url)
    for p in range(PARTITIONS):
        files = segment_files(broker.data_dir, TOPIC, p)
        assert len(files) > 1, "the 64 KiB segments should have rolled"
        assert sample(metrics, "kafka_log_log_size", topic=TOPIC, partition=p) == sum(f.stat().st_size for f in files)
        assert sample(metrics, "kafka_log_log_numlogsegments", topic=TOPIC, partition=p) == len(files)
        assert sample(metrics, "kafka_log_log_logendoffset", topic=TOPIC, partition=p) == RECORDS // PARTITIONS
        assert sample(metrics, "kafka_log_log_logstartoffset", topic=TOPIC, partition=p) == 0


def test_bytes_out_and_request_counts(loaded):
    _broker, url, *_ = loaded
    metrics = scrape(url)
    assert sample(metrics, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= CONSUMED * len(VALUE)
    requests = {r: sum(by_label(metrics, "kafka_network_requestmetrics_requests_total", "version", request=r).values())
                for r in ("Produce", "Fetch", "FetchConsumer", "FetchFollower", "Metadata")}
    assert requests["Produce"] > 0 and requests["Metadata"] > 0
    assert requests["Fetch"] == requests["FetchConsumer"] > 0 and requests["FetchFollower"] == 0
    for r in ("Produce", "Fetch"):        # every request handled is timed once
        assert sample(metrics, "kafka_network_requestmetrics_totaltimems_count", request=r) == requests[r]
        assert sample(metrics, "kafka_network_requestmetrics_totaltimems_bucket", request=r, le="+Inf") == requests[r]


def test_partition_and_leader_counts(loaded):
    _broker, url, *_ = loaded
    metrics = scrape(url)
    assert sample(metrics, "kafka_server_replicamanager_partitioncount") == PARTITIONS + 1    # + __consumer_offsets
    assert sample(metrics, "kafka_server_replicamanager_leadercount") == PARTITIONS + 1
    assert sample(metrics, "kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_groups_by_state_and_lag_per_partition(loaded):
    _broker, url, committed, in_group = loaded
    groups = "kafka_coordinator_group_groupmetadatamanager_"
    assert sample(in_group, groups + "numgroups") == 1
    assert sample(in_group, groups + "numgroupsstable") == 1
    assert sample(in_group, "kafka_consumergroup_members", consumergroup=GROUP) == 1
    metrics = scrape(url)                  # the member has left: the group is Empty, its offsets stay
    assert sample(metrics, groups + "numgroups") == 1
    assert sample(metrics, groups + "numgroupsempty") == 1
    assert sample(metrics, groups + "numgroupsstable") == 0
    assert sample(metrics, groups + "numoffsets") == len(committed)
    assert sample(metrics, "kafka_consumergroup_members", consumergroup=GROUP) == 0
    end = RECORDS // PARTITIONS
    expected_lag = {str(p): (end - committed[p] if p in committed else -1) for p in range(PARTITIONS)}
    assert by_label(metrics, "kafka_consumergroup_lag", "partition", consumergroup=GROUP, topic=TOPIC) == expected_lag
    assert by_label(metrics, "kafka_consumergroup_current_offset", "partition", consumergroup=GROUP,
                    topic=TOPIC) == {str(p): committed.get(p, -1) for p in range(PARTITIONS)}
    assert sample(metrics, "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == \
        sum(end - o for o in committed.values())


def test_failed_produce_counts_as_in_kafka(loaded):
    """A record the broker's validator refuses (no key on a compacted topic: INVALID_RECORD) is a
    failed produce request, as in Kafka; a record over the topic's max.message.bytes is refused
    (MESSAGE_TOO_LARGE) but, as Kafka's ReplicaManager does for known client errors, not counted
    as failed, only as a produce request."""
    broker, url, *_ = loaded
    create_topics(broker.bootstrap, NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"}),
                  NewTopic("small", 1, 1, config={"max.message.bytes": "2000"}))
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    producer.produce("compacted", b"no key", on_delivery=lambda err, _msg: errors.append(err))
    producer.produce("small", b"x" * 5000, key=b"k", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert sorted(e.code() for e in errors) == sorted([KafkaError.INVALID_RECORD, KafkaError.MSG_SIZE_TOO_LARGE])
    metrics = scrape(url)
    failed = "kafka_server_brokertopicmetrics_failedproducerequests_total"
    total = "kafka_server_brokertopicmetrics_totalproducerequests_total"
    assert sample(metrics, failed, topic="compacted") == 1
    assert sample(metrics, failed, topic="small") == 0
    assert sample(metrics, total, topic="small") == 1
    assert sample(metrics, failed) >= 1
    assert sample(metrics, failed, topic=TOPIC) == 0
    assert sample(metrics, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic=TOPIC) == 0


def connections(url: str) -> float:
    return sample(scrape(url), "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT",
                  networkprocessor=0)


def settled_connections(url: str) -> float:
    """The connection count once it holds still for 0.3 s (clients of earlier tests are gone)."""
    gc.collect()                           # a dropped librdkafka client closes its sockets now
    last = connections(url)
    while True:
        time.sleep(0.3)
        now = connections(url)
        if now == last:
            return now
        last = now


def reached(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_connection_count_follows_client_connections(loaded):
    """Five sockets opened show as five more connections and closing them takes them off.
    The count is the broker's total, so a client of an earlier test closing meanwhile shifts
    it: a round where that happened is tried again (at most three rounds)."""
    broker, url, *_ = loaded
    seen = []
    for _ in range(3):
        before = settled_connections(url)
        sockets = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(5)]
        try:
            opened = reached(lambda: connections(url) == before + 5, 5)
        finally:
            for s in sockets:
                s.close()
        closed = reached(lambda: connections(url) == before, 5)
        seen.append((before, opened, closed, connections(url)))
        if opened and closed:
            return
    raise AssertionError(f"the count did not follow 5 connections (before, opened, closed, now): {seen}")


def address(url: str) -> tuple[str, int]:
    host, port = url.split("//")[1].split("/")[0].split(":")
    return host, int(port)


def raw_http(url: str, data: bytes) -> bytes:
    """What the endpoint answers to ``data`` sent as is (b"" when it closed while we still sent)."""
    received = b""
    with socket.create_connection(address(url), timeout=10) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while chunk := s.recv(65536):
                received += chunk
        except TimeoutError:
            raise
        except OSError:                      # reset, broken pipe, not connected: it closed on us
            pass
    return received


def test_bad_http_requests_do_not_hurt_the_broker(loaded):
    broker, url, *_ = loaded
    base = url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as wrong_path:
        urllib.request.urlopen(base + "/", timeout=10)
    assert wrong_path.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as post:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=10)
    assert post.value.code == 405
    assert raw_http(url, b"\x16\x03\x01\x00\xa5garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    huge = raw_http(url, b"GET /metrics HTTP/1.1\r\nX-Padding: " + b"a" * 200_000 + b"\r\n\r\n")
    assert huge == b"" or huge.startswith(b"HTTP/1.1 431 ")
    idle = socket.create_connection(address(url))           # connects and says nothing
    try:
        assert scrape(url)                 # scraping goes on meanwhile
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("after-bad-http", b"still serving")  # auto-created
        assert producer.flush(30) == 0
    finally:
        idle.close()
    assert broker.alive()
    assert sample(scrape(url), "kafka_server_brokertopicmetrics_messagesin_total", topic="after-bad-http") == 1


def test_the_endpoint_is_off_by_default(broker):
    """The shared broker sets no prometheus.listener: it logs no metrics URL, and its config
    says the key is unset."""
    from confluent_kafka.admin import ConfigResource

    assert "Prometheus metrics at" not in broker.log_text()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values()
    entry = future.result(30)["prometheus.listener"]
    assert entry.value is None and entry.is_default


def share_counts(url: str, group: str, topic: str) -> tuple[dict[str, float], float, float]:
    """(records by state, start offset, end offset) of share-partition ``topic``-0 of ``group``."""
    metrics = scrape(url)
    key = {"group": group, "topic": topic, "partition": 0}
    return (by_label(metrics, "kwire_share_partition_records", "state", **key),
            sample(metrics, "kwire_share_partition_start_offset", **key),
            sample(metrics, "kwire_share_partition_end_offset", **key))


def test_share_partition_records_by_state_follow_a_share_consumer(loaded):
    """A ShareConsumer (explicit acknowledgement) holding ten records shows them acquired; once
    it accepts and rejects all but the first, those show as acknowledged and archived inside
    the window; accepting the first moves the start offset past all ten."""
    try:
        from confluent_kafka import AcknowledgeType, ShareConsumer
    except ImportError:
        pytest.skip("confluent-kafka without ShareConsumer (librdkafka < 2.16)")
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    broker, url, *_ = loaded
    topic, group = "queue", "queue-readers"
    create_topics(broker.bootstrap, NewTopic(topic, 1, 1))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(10):
        producer.produce(topic, b"job-%d" % i)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    earliest = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(10)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        held, deadline = [], time.monotonic() + 30
        while len(held) < 10 and time.monotonic() < deadline:
            held += [m for m in consumer.poll(0.5) or [] if m.error() is None]
        assert sorted(m.offset() for m in held) == list(range(10))
        states, start, end = share_counts(url, group, topic)
        assert states == {"available": 0, "acquired": 10, "acknowledged": 0, "archived": 0}
        assert (start, end) == (0, 10)

        for m in held:
            if m.offset() > 0:
                consumer.acknowledge(m, AcknowledgeType.REJECT if m.offset() % 2 else AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        states, start, end = share_counts(url, group, topic)
        assert states == {"available": 0, "acquired": 1, "acknowledged": 4, "archived": 5}
        assert (start, end) == (0, 10)

        consumer.acknowledge(next(m for m in held if m.offset() == 0), AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        states, start, end = share_counts(url, group, topic)
        assert states == {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
        assert (start, end) == (10, 10)
    finally:
        consumer.close()
