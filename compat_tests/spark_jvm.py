"""The `spark-jvm` row: Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10
over Apache Kafka's Java client) against the broker, crossed with the column's client.

The client writes records; Spark reads them (batch: everything, offsets as JSON, by
timestamp, with headers; streaming with ``availableNow``); Spark writes (batch and streaming
sinks) and the client reads that back.  Every check needs an exact count.  The connector's
jars come from the same folder as the Java client's (``java.jars_dir()``); PySpark from
``pip install kwire[spark]``.  One local SparkSession per run, stopped at the end.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from typing import Any

from . import java
from .model import Fail, Skip, check, records

N = 40


def _session():
    why = java.unavailable()
    if why:
        raise Skip(why)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise Skip("PySpark is not installed (pip install 'kwire[spark]')") from None
    from kwire.spark.session import KafkaConnector, build_session, expand_kafka_jars
    try:
        jars = expand_kafka_jars(str(java.jars_dir()))
    except ValueError as exc:
        raise Skip(f"Spark's Kafka connector: {exc}") from None
    return build_session("kwire-compat-spark-jvm", connector=KafkaConnector("kafka", jars=jars))


def _read(spark, bootstrap, **options):
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _await(q, timeout=120):
    if not q.awaitTermination(timeout):
        q.stop()
        raise Fail(f"availableNow query still running after {timeout}s")
    if q.exception() is not None:
        raise Fail(f"query failed: {str(q.exception())[:150]}")


@dataclasses.dataclass
class _Run:
    """What every check of one run shares: the session, the column's client, the topic the
    client wrote ``by_value`` to (record i at ``t0`` + i s) and a scratch folder."""
    spark: Any
    c: Any
    env: Any
    work: str
    topic: str
    t0: int
    by_value: dict


def _prepare(spark, c, env, work: str) -> _Run:
    """Create the input topic and have the client write N records with keys and headers."""
    topic = env.setup.create_topic("sparkin", 2)
    t0 = int(time.time() * 1000) - 3_600_000
    sent = records(N, keys=8, headers=True, t0=t0)
    for i, r in enumerate(sent):
        r.partition = i % 2
    c.produce(topic, sent)
    return _Run(spark, c, env, work, topic, t0, {r.value: r for r in sent})


def _batch(x: _Run) -> None:
    rows = _read(x.spark, x.env.bootstrap, subscribe=x.topic, includeHeaders="true").collect()
    check(len(rows) == N, f"{len(rows)} rows, want {N}")
    for row in rows:
        want = x.by_value[bytes(row.value)]
        check((bytes(row.key), row.partition) == (want.key, want.partition), f"row {row.value!r}")
        check([(h.key, bytes(h.value)) for h in row.headers] == want.headers, f"headers {row.headers}")
        check(int(row.timestamp.timestamp() * 1000) == want.timestamp, f"timestamp {row.timestamp}")
    offsets = sorted((r.partition, r.offset) for r in rows)
    check(offsets == [(p, o) for p in (0, 1) for o in range(N // 2)], "offsets not 0.. per partition")


def _offsets_json(x: _Run) -> None:
    topic = x.topic
    n = _read(x.spark, x.env.bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
              endingOffsets=json.dumps({topic: {"0": 10, "1": -1}})).count()
    check(n == 5 + N // 2, f"{n} rows, want {5 + N // 2}")


def _by_timestamp(x: _Run) -> None:
    # record i has t0 + i s; partition p holds the i with i % 2 == p
    n = _read(x.spark, x.env.bootstrap, subscribe=x.topic, startingTimestamp=str(x.t0 + 30_000)).count()
    check(n == N - 30, f"{n} rows from t0+30s, want {N - 30}")


def _streaming(x: _Run) -> None:
    spark = x.spark
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", x.env.bootstrap)
         .option("subscribe", x.topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "15").load()
         .writeStream.format("memory").queryName("compat_spark_stream")
         .option("checkpointLocation", f"{x.work}/stream").trigger(availableNow=True).start())
    _await(q)
    n = spark.sql("SELECT count(DISTINCT partition, offset), count(*) FROM compat_spark_stream").collect()[0]
    check(tuple(n) == (N, N), f"streamed {n[1]} rows ({n[0]} distinct), want {N}")


def _batch_sink(x: _Run) -> None:
    out = x.env.setup.create_topic("sparkout")
    (x.spark.range(30).selectExpr("CAST(id AS STRING) AS key", "concat('s-', id) AS value")
     .write.format("kafka").option("kafka.bootstrap.servers", x.env.bootstrap).option("topic", out).save())
    got = x.c.fetch(out, 30, partitions=[0])
    check(sorted(r.value for r in got) == sorted(f"s-{i}".encode() for i in range(30)),
          f"{x.c.name} read back {len(got)} of 30")


def _stream_sink(x: _Run) -> None:
    bs = x.env.bootstrap
    out = x.env.setup.create_topic("sparkss")
    q = (x.spark.readStream.format("kafka").option("kafka.bootstrap.servers", bs)
         .option("subscribe", x.topic).option("startingOffsets", "earliest").load()
         .selectExpr("key", "value").writeStream.format("kafka")
         .option("kafka.bootstrap.servers", bs).option("topic", out)
         .option("checkpointLocation", f"{x.work}/sink").trigger(availableNow=True).start())
    _await(q)
    got = x.c.fetch(out, N, partitions=[0])
    check(sorted(r.value for r in got) == sorted(x.by_value), f"{x.c.name} read back {len(got)} of {N}")


CHECKS = (("batch read", _batch), ("offsets as JSON", _offsets_json), ("by timestamp", _by_timestamp),
          ("streaming availableNow", _streaming), ("batch sink", _batch_sink),
          ("streaming sink", _stream_sink))


def checks(c, env) -> str:
    spark = _session()
    version = spark.version
    work = tempfile.mkdtemp(prefix="kwire-compat-spark-")
    done, failures = [], []
    try:
        run = _prepare(spark, c, env, work)
        for label, fn in CHECKS:
            try:
                fn(run)
                done.append(label)
            except Exception as exc:       # one line per failed check, the others still run
                failures.append(f"{label}: {type(exc).__name__}: {exc}"[:160])
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        raise Fail("; ".join(failures))
    return f"Spark {version}: " + ", ".join(done)
