"""confluent-kafka (librdkafka 2.x) and kcat (Debian's librdkafka 2.0.2) against kwire."""
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def topic_name(prefix="ck"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(bootstrap, topic, n, **conf):
    delivered = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})

    def report(err, msg):
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    for i in range(n):
        producer.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode(),
                         headers=[("idx", str(i).encode())], on_delivery=report)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return delivered


def consume(bootstrap, topic, n, partitions=(0,), timeout=30, **conf):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         **conf})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out = []
    import time
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(msg)
    consumer.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_each_codec(broker, codec):
    topic = topic_name()
    delivered = produce(broker.bootstrap, topic, 500, **{"compression.type": codec, "acks": "all"})
    assert sorted(o for _, o in delivered) == list(range(500))
    got = consume(broker.bootstrap, topic, 500)
    assert [m.offset() for m in got] == list(range(500))
    assert [m.value() for m in got] == [f"value-{i}".encode() for i in range(500)]
    assert got[7].headers() == [("idx", b"7")]


def test_idempotent_producer_and_read_committed(broker):
    topic = topic_name()
    delivered = produce(broker.bootstrap, topic, 2000, **{"enable.idempotence": True})
    assert sorted(o for _, o in delivered) == list(range(2000))
    got = consume(broker.bootstrap, topic, 2000, **{"isolation.level": "read_committed"})
    assert len(got) == 2000 and len({m.offset() for m in got}) == 2000


def test_admin_create_six_partitions_and_spread(broker):
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(15)
    delivered = produce(broker.bootstrap, topic, 600)
    parts = {p for p, _ in delivered}
    assert parts == set(range(6))
    got = consume(broker.bootstrap, topic, 600, partitions=range(6))
    assert len(got) == 600
    per_key = {}
    for m in got:
        per_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(ps) == 1 for ps in per_key.values()), "a key always lands on one partition"
    futures = admin.create_topics([NewTopic(topic, 6, 1)])
    with pytest.raises(KafkaException) as err:
        futures[topic].result(15)
    assert err.value.args[0].name() == "TOPIC_ALREADY_EXISTS"


def test_message_too_large_is_refused(broker):
    topic = topic_name()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 3_000_000})
    errors = []
    producer.produce(topic, value=b"x" * 2_000_000, on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    assert errors and errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE"


kcat = shutil.which("kcat")


@pytest.mark.skipif(kcat is None, reason="kcat not installed (scripts/test installs it)")
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_and_consume(broker, codec):
    topic = topic_name("kcat")
    lines = "".join(f"key{i}:line {i}\n" for i in range(100))
    subprocess.run([kcat, "-b", broker.bootstrap, "-t", topic, "-P", "-K:", "-z", codec,
                    "-X", "topic.request.required.acks=-1"],
                   input=lines.encode(), check=True, timeout=30)
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-t", topic, "-C", "-o", "beginning", "-e",
                          "-f", "%o %k %s\n"], capture_output=True, check=True, timeout=30).stdout.decode()
    assert out.splitlines() == [f"{i} key{i} line {i}" for i in range(100)]
    listing = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-t", topic], capture_output=True,
                             check=True, timeout=30).stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in listing
