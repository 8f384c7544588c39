"""kwire-kafka, the Python data source, against a kwire broker process: batch reads with
offsets/timestamps as JSON, the sink read back by a stock client, streaming offsets and
rate limits, failOnDataLoss after DeleteRecords."""
import json
import os

import pytest
from pyspark.errors import PySparkException
from py4j.protocol import Py4JJavaError

from kwire.spark.source import NAME, kafka_schema

from .helpers import consume_all, create_topic, delete_records, produce

pytestmark = pytest.mark.clients


def read(spark, bootstrap, **options):
    r = spark.read.format(NAME).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def offsets_of(df):
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_schema_matches_sparks_kafka_source(spark, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t)
    assert read(spark, broker.bootstrap, subscribe=t).schema == kafka_schema(False)
    df = read(spark, broker.bootstrap, subscribe=t, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert df.count() == 0


def test_batch_read_with_offsets_as_json(spark, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, partitions=2)
    for p in (0, 1):
        produce(broker.bootstrap, t, [f"p{p}-{i}".encode() for i in range(30)], partition=p)
    everything = read(spark, broker.bootstrap, subscribe=t)
    assert everything.count() == 60
    df = read(spark, broker.bootstrap, subscribe=t,
              startingOffsets=json.dumps({t: {"0": 5, "1": -2}}),
              endingOffsets=json.dumps({t: {"0": 12, "1": -1}}))
    assert offsets_of(df) == [(0, o) for o in range(5, 12)] + [(1, o) for o in range(30)]
    rows = df.where("partition = 0").orderBy("offset").collect()
    assert [r.value for r in rows] == [f"p0-{i}".encode() for i in range(5, 12)]
    assert {r.topic for r in rows} == {t} and {r.timestampType for r in rows} == {0}
    # assign + minPartitions splits one partition's range across tasks, same rows
    df = read(spark, broker.bootstrap, assign=json.dumps({t: [1]}), minPartitions="4",
              startingOffsets=json.dumps({t: {"1": 3}}), endingOffsets=json.dumps({t: {"1": 23}}))
    assert df.rdd.getNumPartitions() == 4
    assert offsets_of(df) == [(1, o) for o in range(3, 23)]


def test_batch_read_refuses_what_spark_refuses(spark, broker, topic_name):
    t = topic_name()
    create_topic(broker.bootstrap, t, partitions=2)
    for bad in ({"startingOffsets": "latest"}, {"endingOffsets": "earliest"},
                {"startingOffsets": json.dumps({t: {"0": 0}})}):  # partition 1 missing
        with pytest.raises((PySparkException, Py4JJavaError)):
            read(spark, broker.bootstrap, subscribe=t, **bad).count()


def test_subscribe_pattern_and_headers(spark, broker, topic_name):
    base = topic_name("pat")
    for suffix in ("a", "b"):
        create_topic(broker.bootstrap, f"{base}-{suffix}")
        produce(broker.bootstrap, f"{base}-{suffix}", [suffix.encode()] * 3, keys=[b"k"] * 3,
                headers=[[("h", b"1"), ("h2", b"2")]] * 3)
    df = read(spark, broker.bootstrap, subscribePattern=f"{base}-.*", includeHeaders="true")
    rows = df.collect()
    assert sorted((r.topic, r.value) for r in rows) == \
        [(f"{base}-a", b"a")] * 3 + [(f"{base}-b", b"b")] * 3
    assert all(r.key == b"k" for r in rows)
    assert [(h.key, h.value) for h in rows[0].headers] == [("h", b"1"), ("h2", b"2")]


def test_write_dataframe_then_read_back_with_kafka_python(spark, broker, topic_name):
    t = topic_name("sink")
    create_topic(broker.bootstrap, t, partitions=2)
    rows = [(f"k{i}", f"value {i}", i % 2, [("src", b"spark")]) for i in range(50)]
    df = spark.createDataFrame(
        rows, "key string, value string, partition int, headers array<struct<key:string,value:binary>>")
    (df.write.format(NAME).mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", t).save())
    got = consume_all(broker.bootstrap, t, partitions=(0, 1))
    assert sorted((r.key, r.value, r.partition) for r in got) == \
        sorted((k.encode(), v.encode(), p) for k, v, p, _ in rows)
    assert all(list(r.headers) == [("src", b"spark")] for r in got)
    # a topic column instead of the option; binary values
    t2 = topic_name("sink2")
    create_topic(broker.bootstrap, t2)
    spark.createDataFrame([(t2, bytearray(b"\x00\x01"))], "topic string, value binary") \
        .write.format(NAME).mode("append").option("kafka.bootstrap.servers", broker.bootstrap).save()
    assert [r.value for r in consume_all(broker.bootstrap, t2)] == [b"\x00\x01"]
    with pytest.raises((PySparkException, Py4JJavaError, ValueError)):
        spark.createDataFrame([("x",)], "key string").write.format(NAME).mode("append") \
            .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", t2).save()


def test_starting_by_timestamp(spark, broker, topic_name):
    t = topic_name("ts")
    create_topic(broker.bootstrap, t, partitions=2)
    base = 1_700_000_000_000
    produce(broker.bootstrap, t, [b"a%d" % i for i in range(10)], partition=0,
            timestamps=[base + 1000 * i for i in range(10)])
    produce(broker.bootstrap, t, [b"b%d" % i for i in range(10)], partition=1,
            timestamps=[base + 500 * i for i in range(10)])
    # first record with timestamp >= target, per partition
    df = read(spark, broker.bootstrap, subscribe=t, startingTimestamp=str(base + 4000))
    assert offsets_of(df) == [(0, o) for o in range(4, 10)] + [(1, 8), (1, 9)]
    assert df.where("partition = 0").agg({"timestamp": "min"}).collect()[0][0] is not None
    df = read(spark, broker.bootstrap, subscribe=t,
              startingOffsetsByTimestamp=json.dumps({t: {"0": base + 8500, "1": base}}),
              endingOffsetsByTimestamp=json.dumps({t: {"0": base + 60_000, "1": base + 1000}}))
    # ending: partition 0 has nothing at or after +60s → latest (10); partition 1 → offset 2
    assert offsets_of(df) == [(0, 9), (1, 0), (1, 1)]
    # nothing at or after the starting timestamp: ListOffsets answers -1
    late = str(base + 3_600_000)
    with pytest.raises((PySparkException, Py4JJavaError)) as err:
        read(spark, broker.bootstrap, subscribe=t, startingTimestamp=late).count()
    assert "No offset matched" in str(err.value)
    df = read(spark, broker.bootstrap, subscribe=t, startingTimestamp=late,
              startingOffsetsByTimestampStrategy="latest")
    assert df.count() == 0


def test_fail_on_data_loss_after_delete_records_batch(spark, broker, topic_name):
    t = topic_name("loss")
    create_topic(broker.bootstrap, t)
    produce(broker.bootstrap, t, [b"%d" % i for i in range(100)])
    delete_records(broker.bootstrap, t, 0, 40)
    start = json.dumps({t: {"0": 10}})
    with pytest.raises((PySparkException, Py4JJavaError)) as err:
        read(spark, broker.bootstrap, subscribe=t, startingOffsets=start).count()
    assert "Some data may have been lost" in str(err.value)
    df = read(spark, broker.bootstrap, subscribe=t, startingOffsets=start, failOnDataLoss="false")
    assert offsets_of(df) == [(0, o) for o in range(40, 100)]
    assert read(spark, broker.bootstrap, subscribe=t).count() == 60  # earliest = log start


def _stream_to_parquet(spark, bootstrap, topic, base, **options):
    """One availableNow run into a Parquet file sink with its checkpoint under ``base``;
    returns (query, every row in the sink so far)."""
    r = (spark.readStream.format(NAME).option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
         .writeStream.format("parquet").option("path", os.path.join(base, "out"))
         .option("checkpointLocation", os.path.join(base, "ckpt"))
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "availableNow query did not finish"
    except Exception:
        pass  # a failed query raises here; the caller checks q.exception()
    finally:
        q.stop()
    rows = spark.read.schema("v string, partition int, offset long").parquet(os.path.join(base, "out")).collect()
    return q, sorted((r.partition, r.offset, r.v) for r in rows)


def test_streaming_rate_limit_and_resume_from_checkpoint(spark, broker, topic_name, tmp_path):
    t = topic_name("stream")
    create_topic(broker.bootstrap, t, partitions=2)
    for p in (0, 1):
        produce(broker.bootstrap, t, [b"%d-%d" % (p, i) for i in range(40)], partition=p)
    base = str(tmp_path)
    q, rows = _stream_to_parquet(spark, broker.bootstrap, t, base, maxOffsetsPerTrigger="30")
    assert q.exception() is None
    assert rows == [(p, o, f"{p}-{o}") for p in (0, 1) for o in range(40)]
    offsets_dir = os.path.join(base, "ckpt", "offsets")
    batches = sorted(int(f) for f in os.listdir(offsets_dir) if f.isdigit())
    assert len(batches) == 3  # 80 records at 30 per trigger
    ends = [json.loads(open(os.path.join(offsets_dir, str(b))).read().splitlines()[-1])
            for b in batches]
    assert ends[0] == {t: {"0": 15, "1": 15}} and ends[-1] == {t: {"0": 40, "1": 40}}
    # more data, same checkpoint: the new records are added once, nothing is repeated
    produce(broker.bootstrap, t, [b"new"] * 5, partition=1)
    q, rows = _stream_to_parquet(spark, broker.bootstrap, t, base)
    assert q.exception() is None
    assert rows == sorted([(p, o, f"{p}-{o}") for p in (0, 1) for o in range(40)]
                          + [(1, o, "new") for o in range(40, 45)])


def test_streaming_fail_on_data_loss(spark, broker, topic_name, tmp_path):
    t = topic_name("sloss")
    create_topic(broker.bootstrap, t)
    produce(broker.bootstrap, t, [b"%d" % i for i in range(20)])
    fail_dir, skip_dir = str(tmp_path / "fail"), str(tmp_path / "skip")
    for base in (fail_dir, skip_dir):
        _stream_to_parquet(spark, broker.bootstrap, t, base)
    produce(broker.bootstrap, t, [b"%d" % i for i in range(20, 50)])
    delete_records(broker.bootstrap, t, 0, 35)  # 20..34 never read by either query
    q, rows = _stream_to_parquet(spark, broker.bootstrap, t, fail_dir)
    assert q.exception() is not None and "Some data may have been lost" in str(q.exception())
    assert [o for _, o, _ in rows] == list(range(20))
    q, rows = _stream_to_parquet(spark, broker.bootstrap, t, skip_dir, failOnDataLoss="false")
    assert q.exception() is None
    assert [o for _, o, _ in rows] == list(range(20)) + list(range(35, 50))
