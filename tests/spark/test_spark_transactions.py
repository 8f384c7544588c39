"""Spark batch reads of a topic holding committed, aborted and open transactions (written by
confluent-kafka): with ``kafka.isolation.level=read_committed`` (the option name of both
sources: Spark's connector hands ``kafka.*`` options to its admin client's ListOffsets and
to its consumers, kwire's maps them to kafka-python's) exactly the committed records come
back, and none past the open transaction; without it, everything.  Through kwire's Python
source ``kwire-kafka`` and Spark's JVM connector ``format("kafka")`` from ../shared/jars."""
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kwire.spark.source import NAME
from tests.support.java import JARS

pytestmark = pytest.mark.clients

# the connector and what it needs beyond PySpark's own jars (../shared/jars/README.md)
CONNECTOR_JARS = ["spark-sql-kafka-0-10_2.13-4.3.0.jar", "spark-token-provider-kafka-0-10_2.13-4.3.0.jar",
                  "kafka-clients-4.0.0-SNAPSHOT.jar", "commons-pool2-2.11.1.jar",
                  "deps/protobuf-java-3.21.12.jar", "deps/opentelemetry-proto-1.0.0-protoc3.21.jar"]
PER_LABEL = 10          # records per label, over two partitions


def send(producer: Producer, topic: str, label: str) -> None:
    for i in range(PER_LABEL):
        producer.produce(topic, f"{label}-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def per_partition(labels) -> dict[int, list[str]]:
    return {p: [f"{label}-{i}" for label in labels for i in range(p, PER_LABEL, 2)] for p in (0, 1)}


@pytest.fixture(scope="module")
def txn_topic(broker):
    """Per partition, in log order: plain, a (committed) with b (aborted) interleaved, a2 (a's),
    c (committed), o (left open for the module), after (plain, behind the open transaction)."""
    topic = f"spark-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    # a long timeout: the broker must not abort the open transaction while Spark reads
    one, two = ({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-{n}",
                 "transaction.timeout.ms": 600_000, "linger.ms": 5} for n in (1, 2))
    one, two = Producer(one), Producer(two)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in (one, two):
        p.init_transactions(30)
    send(plain, topic, "plain")
    one.begin_transaction()
    send(one, topic, "a")
    two.begin_transaction()
    send(two, topic, "b")
    send(one, topic, "a2")
    one.commit_transaction(30)
    two.abort_transaction(30)
    two.begin_transaction()
    send(two, topic, "c")
    two.commit_transaction(30)
    one.begin_transaction()
    send(one, topic, "o")
    send(plain, topic, "after")
    yield topic
    one.abort_transaction(30)


def connector_jars_missing() -> str | None:
    missing = [j for j in CONNECTOR_JARS if not (JARS / j).is_file()]
    return f"Spark's Kafka connector needs {', '.join(missing)} in {JARS}" if missing else None


def use_spark_connector(spark) -> None:
    """Make ``format("kafka")`` resolvable in the shared session, which is built without the
    connector unless KWIRE_SPARK_KAFKA_JARS names it: ADD JAR puts it on the session's class
    loader and ships it to the executors."""
    if "spark-sql-kafka" in spark.conf.get("spark.jars", ""):
        return
    listed = {row[0] for row in spark.sql("LIST JAR").collect()}
    for jar in CONNECTOR_JARS:
        if not any(entry.endswith("/" + jar.split("/")[-1]) for entry in listed):
            spark.sql(f"ADD JAR '{JARS / jar}'")


def read(spark, fmt, bootstrap, topic, **options) -> dict[int, list[str]]:
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        r = r.option(key, value)
    rows = r.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS v").collect()
    out: dict[int, list[str]] = {0: [], 1: []}
    for row in sorted(rows, key=lambda row: (row.partition, row.offset)):
        out[row.partition].append(row.v)
    return out


@pytest.mark.parametrize("fmt", [NAME, "kafka"])
def test_read_committed_batch_returns_exactly_the_committed_records(spark, broker, txn_topic, fmt):
    if fmt == "kafka":
        why = connector_jars_missing()
        if why:
            pytest.skip(why)
        use_spark_connector(spark)
    committed = read(spark, fmt, broker.bootstrap, txn_topic, **{"kafka.isolation.level": "read_committed"})
    everything = read(spark, fmt, broker.bootstrap, txn_topic)
    print(f"\n{fmt}: read_committed {sum(map(len, committed.values()))} records, "
          f"read_uncommitted {sum(map(len, everything.values()))}")
    assert committed == per_partition(["plain", "a", "a2", "c"])
    assert everything == per_partition(["plain", "a", "b", "a2", "c", "o", "after"])
