"""Spark's own Kafka connector, ``format("kafka")`` (spark-sql-kafka-0-10 over Apache Kafka's
Java client, from ../shared/jars), against a kwire broker process, with exact counts:
batch reads (earliest to latest, offsets as JSON, by timestamp, with headers), streaming
reads (availableNow, resumed from the checkpoint; a processing-time trigger while records
arrive) and both sinks, read back with confluent-kafka.  Records are written by
kafka-python and confluent-kafka, so every check crosses clients."""
import json
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kwire.spark.source import NAME

from .helpers import create_topic, produce

pytestmark = pytest.mark.clients

T0 = 1_700_000_000_000      # record timestamps: T0 + i seconds


def read(spark, bootstrap, **options):
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def rows_of(df):
    """[(partition, offset, value)] sorted."""
    return sorted((r.partition, r.offset, r.value.decode())
                  for r in df.select("partition", "offset", "value").collect())


def confluent_read_all(bootstrap, topic, partitions, timeout_s=30):
    """Every record now in ``topic``, read back by confluent-kafka in assign mode."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jvm-connector-readback",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out, positions = [], {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in positions):
            assert time.monotonic() < deadline, f"read back {len(out)} records, ends {ends}"
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append(m)
                positions[m.partition()] = m.offset() + 1
        return out
    finally:
        c.close()


@pytest.fixture(scope="module")
def two_partitions(broker):
    """A topic of 2 partitions x 50 records, value "p<partition>-<i>", timestamp T0 + i s,
    and on every third record two headers (one repeated key, one null value)."""
    topic = f"jvm-read-{time.time_ns()}"
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in (0, 1):
        for i in range(50):
            producer.produce(topic, f"p{p}-{i}".encode(), f"k{i}".encode(), partition=p,
                             timestamp=T0 + i * 1000,
                             headers=[("h", b"1"), ("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else None)
    assert producer.flush(30) == 0
    return topic


def test_batch_read_earliest_to_latest(jvm_spark, broker, two_partitions):
    df = read(jvm_spark, broker.bootstrap, subscribe=two_partitions)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>")
    assert df.count() == 100
    assert rows_of(df) == [(p, i, f"p{p}-{i}") for p in (0, 1) for i in range(50)]
    first = df.where("partition = 1 AND offset = 7").selectExpr(
        "CAST(key AS STRING) k", "unix_millis(timestamp) ts", "timestampType", "topic").collect()
    assert [tuple(r) for r in first] == [("k7", T0 + 7000, 0, two_partitions)]
    # explicit earliest/latest, and a pattern subscription reads the same
    assert read(jvm_spark, broker.bootstrap, subscribe=two_partitions, startingOffsets="earliest",
                endingOffsets="latest").count() == 100
    assert read(jvm_spark, broker.bootstrap, subscribePattern=two_partitions.replace(".", r"\.") + "$"
                ).count() == 100


def test_batch_read_specific_offsets_as_json(jvm_spark, broker, two_partitions):
    t = two_partitions
    df = read(jvm_spark, broker.bootstrap, subscribe=t,
              startingOffsets=json.dumps({t: {"0": 5, "1": -2}}),
              endingOffsets=json.dumps({t: {"0": 12, "1": -1}}))
    assert rows_of(df) == [(0, i, f"p0-{i}") for i in range(5, 12)] + [(1, i, f"p1-{i}") for i in range(50)]
    # assign instead of subscribe: only the partitions named
    df = read(jvm_spark, broker.bootstrap, assign=json.dumps({t: [1]}),
              startingOffsets=json.dumps({t: {"1": 40}}), endingOffsets=json.dumps({t: {"1": 45}}))
    assert rows_of(df) == [(1, i, f"p1-{i}") for i in range(40, 45)]
    # minPartitions splits one partition's range across tasks (the part of the connector the
    # shared build patched: KafkaOffsetRangeCalculator), same rows
    df = read(jvm_spark, broker.bootstrap, assign=json.dumps({t: [1]}), minPartitions="4",
              startingOffsets=json.dumps({t: {"1": 3}}), endingOffsets=json.dumps({t: {"1": 23}}))
    assert df.rdd.getNumPartitions() == 4
    assert rows_of(df) == [(1, i, f"p1-{i}") for i in range(3, 23)]


def test_batch_read_by_timestamp(jvm_spark, broker, two_partitions):
    t = two_partitions
    # one timestamp for every partition: the first record at or after it
    df = read(jvm_spark, broker.bootstrap, subscribe=t, startingTimestamp=str(T0 + 20_000))
    assert df.count() == 60
    assert rows_of(df) == [(p, i, f"p{p}-{i}") for p in (0, 1) for i in range(20, 50)]
    # per partition, a timestamp between two records, and an end by timestamp
    df = read(jvm_spark, broker.bootstrap, subscribe=t,
              startingOffsetsByTimestamp=json.dumps({t: {"0": T0 + 9_500, "1": T0 + 40_000}}),
              endingOffsetsByTimestamp=json.dumps({t: {"0": T0 + 15_000, "1": T0 + 60_000}}))
    assert rows_of(df) == [(0, i, f"p0-{i}") for i in range(10, 15)] + [(1, i, f"p1-{i}") for i in range(40, 50)]
    # partition 1's end, 60 s, is past every record: ListOffsets finds none and the
    # connector ends at the latest offset (Kafka's behaviour, as on a Kafka broker)
    assert df.count() == 15


def test_batch_read_with_headers(jvm_spark, broker, two_partitions):
    df = read(jvm_spark, broker.bootstrap, subscribe=two_partitions, includeHeaders="true")
    assert df.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")
    rows = df.where("partition = 0").orderBy("offset").select("offset", "headers").collect()
    assert len(rows) == 50
    for r in rows:
        if r.offset % 3 == 0:
            assert [(h.key, h.value) for h in r.headers] == [("h", b"1"), ("h", f"{r.offset}".encode()),
                                                             ("n", None)]
        else:
            assert r.headers is None, (r.offset, r.headers)    # null, not an empty array
    assert df.where("size(headers) = 3").count() == 2 * 17


def test_both_connectors_return_the_same_rows(jvm_spark, broker, two_partitions):
    """kwire's Python source and Spark's connector: the same rows, column for column."""
    def everything(fmt):
        df = (jvm_spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", two_partitions).option("includeHeaders", "true").load())
        return df.schema, sorted(tuple(r) for r in df.collect())
    schema, rows = everything("kafka")
    assert len(rows) == 100
    assert everything(NAME) == (schema, rows)


def test_streaming_available_now_resumes_from_checkpoint(jvm_spark, broker, tmp_path):
    topic = f"jvm-stream-{time.time_ns()}"
    create_topic(broker.bootstrap, topic, partitions=2)
    for p in (0, 1):
        produce(broker.bootstrap, topic, [f"a{p}-{i}".encode() for i in range(60)], partition=p)

    def run_once():
        q = (jvm_spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "40").load()
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120), "availableNow query still running after 120 s"
        assert q.exception() is None, q.exception()
        return q

    q = run_once()
    out = jvm_spark.read.parquet(str(tmp_path / "out"))
    assert out.count() == 120
    assert sorted((r.partition, r.offset, r.v) for r in out.collect()) == \
        [(p, i, f"a{p}-{i}") for p in (0, 1) for i in range(60)]
    assert q.lastProgress["batchId"] >= 2, "maxOffsetsPerTrigger=40 over 120 records: 3 batches at least"

    for p in (0, 1):
        produce(broker.bootstrap, topic, [f"b{p}-{i}".encode() for i in range(25)], partition=p)
    run_once()
    rows = sorted((r.partition, r.offset, r.v) for r in jvm_spark.read.parquet(str(tmp_path / "out")).collect())
    assert len(rows) == 170, "resumed from the checkpoint: the 50 new records once, nothing twice"
    assert rows == sorted([(p, i, f"a{p}-{i}") for p in (0, 1) for i in range(60)]
                          + [(p, 60 + i, f"b{p}-{i}") for p in (0, 1) for i in range(25)])


def test_streaming_processing_time_trigger_sees_records_as_they_arrive(jvm_spark, broker):
    topic = f"jvm-live-{time.time_ns()}"
    create_topic(broker.bootstrap, topic, partitions=2)
    name = topic.replace("-", "_")
    q = (jvm_spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest").load()
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
         .writeStream.format("memory").queryName(name).outputMode("append")
         .trigger(processingTime="500 milliseconds").start())
    try:
        for round_ in range(3):
            produce(broker.bootstrap, topic, [f"r{round_}-{i}".encode() for i in range(40)])
            deadline = time.monotonic() + 60
            while jvm_spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] < 40 * (round_ + 1):
                assert q.exception() is None, q.exception()
                assert time.monotonic() < deadline, f"round {round_}: records not streamed in 60 s"
                time.sleep(0.2)
        time.sleep(1.5)         # three more triggers: nothing read twice
        values = [r.v for r in jvm_spark.sql(f"SELECT v FROM {name}").collect()]
        assert sorted(values) == sorted(f"r{n}-{i}" for n in range(3) for i in range(40))
        # each round was sent after the previous one was visible: a micro-batch of its own
        assert len([p for p in q.recentProgress if p["numInputRows"] > 0]) >= 3
    finally:
        q.stop()


def test_batch_sink_read_back_by_confluent_kafka(jvm_spark, broker):
    topic = f"jvm-sink-{time.time_ns()}"
    create_topic(broker.bootstrap, topic, partitions=3)
    df = jvm_spark.range(300).selectExpr(
        "CAST(id AS STRING) AS key", "concat('v-', id) AS value", "CAST(id % 3 AS INT) AS partition",
        "array(named_struct('key', 'src', 'value', CAST('spark' AS BINARY))) AS headers")
    (df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic).save())
    got = confluent_read_all(broker.bootstrap, topic, 3)
    assert len(got) == 300
    assert sorted((m.partition(), m.key().decode(), m.value().decode()) for m in got) == \
        sorted((i % 3, str(i), f"v-{i}") for i in range(300))
    assert {tuple(m.headers()) for m in got} == {(("src", b"spark"),)}
    for p in range(3):       # offsets contiguous from 0 in every partition
        assert sorted(m.offset() for m in got if m.partition() == p) == list(range(100))


def test_streaming_sink_read_back_by_confluent_kafka(jvm_spark, broker, tmp_path):
    source, sink = f"jvm-ss-in-{time.time_ns()}", f"jvm-ss-out-{time.time_ns()}"
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(150):
        p.produce(source, f"w{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0

    def run_once():
        q = (jvm_spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120), "availableNow query still running after 120 s"
        assert q.exception() is None, q.exception()

    run_once()
    got = confluent_read_all(broker.bootstrap, sink, 1)
    assert sorted((m.key().decode(), m.value().decode()) for m in got) == \
        sorted((f"k{i}", f"W{i}") for i in range(150))
    for i in range(150, 180):
        p.produce(source, f"w{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    run_once()
    got = confluent_read_all(broker.bootstrap, sink, 1)
    assert len(got) == 180, "the second run wrote only the 30 new records"
    assert sorted(m.value().decode() for m in got) == sorted(f"W{i}" for i in range(180))
