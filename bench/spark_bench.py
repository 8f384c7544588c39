"""Spark figures for kwire: records/s of a batch read through the kwire-kafka Python data
source and through Spark's own JVM connector (format("kafka"), when its jars are found),
and the activity pipeline's end-to-end latency from producing an event to its
per-minute aggregate appearing in the output topic (processingTime trigger).

    python bench/spark_bench.py [--records 200000] [--samples 20] [--out results.json]
        [--connectors kwire-kafka,kafka] [--kafka-jars ../shared/jars] [--no-latency]

Both connectors read the same topics in the same SparkSession, one after the other, and
the result holds each one's median and their ratio (kafka / kwire-kafka).

Starts its own kwire broker process on a free loopback port unless --bootstrap is given.
Every wait is bounded; the broker is stopped by PID at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

from kafka import KafkaConsumer, TopicPartition

from kwire.spark import activity as A
from kwire.spark.cli import start_broker
from kwire.spark.session import KafkaConnector, build_session, expand_kafka_jars

SHARED_JARS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "jars")


def produce_fixed(bootstrap: str, topic: str, n: int, size: int) -> float:
    """n records of ``size`` bytes, round-robin over partitions; returns records/s."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    payload = b"x" * size
    t = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, key=b"%d" % i)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0, "records left unsent"
    return n / (time.perf_counter() - t)


def raw_consume(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    """kafka-python alone, one consumer, assign mode: the ceiling for the data source."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      max_poll_records=10000, max_partition_fetch_bytes=8 << 20,
                      fetch_max_bytes=64 << 20)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    got, t = 0, time.perf_counter()
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=500).values():
            got += len(recs)
    rate = got / (time.perf_counter() - t)
    c.close()
    return rate


def spark_read(spark, bootstrap: str, topic: str, n: int, runs: int, fmt: str = "kwire-kafka",
               **options) -> list[float]:
    rates = []
    for _ in range(runs):
        r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap) \
            .option("subscribe", topic)
        for k, v in options.items():
            r = r.option(k, v)
        t = time.perf_counter()
        count, total = r.load().selectExpr("count(*)", "sum(length(value))").collect()[0]
        elapsed = time.perf_counter() - t
        assert count == n, f"read {count} records, expected {n}"
        rates.append(n / elapsed)
    return rates


def latency(spark, bootstrap: str, workdir: str, samples: int, trigger: str) -> list[float]:
    """Seconds from sending one page view to its aggregate's arrival in the output topic."""
    cfg = A.PipelineConfig(bootstrap, os.path.join(workdir, "out"), os.path.join(workdir, "ckpt"),
                           activity_topic="lat-activity", logs_topic="lat-logs",
                           output_topic="lat-views", starting_offsets="latest")
    A.ensure_topics(bootstrap, {cfg.activity_topic: 2, cfg.logs_topic: 2, cfg.output_topic: 1})
    queries = A.start_pipeline(spark, cfg, {"processingTime": trigger})
    out = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                        fetch_max_wait_ms=10)
    tp = TopicPartition(cfg.output_topic, 0)
    out.assign([tp])
    out.seek_to_end()
    out.position(tp)
    results = []
    try:
        time.sleep(5)  # let every query plan its first (empty) batch
        for i in range(samples + 2):
            page = f"/bench/{i}"
            event = {"event_id": f"b{i}", "type": "page_view", "user": "bench", "page": page,
                     "target": None, "query": None, "ts": int(time.time() * 1000)}
            sent = time.monotonic()
            A.produce_json(bootstrap, cfg.activity_topic, [event], key="user")
            deadline = sent + 60
            seen = False
            while not seen and time.monotonic() < deadline:
                for recs in out.poll(timeout_ms=50).values():
                    seen = seen or any(json.loads(r.value)["page"] == page for r in recs)
            if not seen:
                raise TimeoutError(f"aggregate of {page} not seen in 60 s")
            if i >= 2:  # the first two include query warm-up
                results.append(time.monotonic() - sent)
            time.sleep(random.uniform(0, 1))  # land at random points of the trigger cycle
        for q in queries:
            if q.exception() is not None:
                raise RuntimeError(f"{q.name} failed: {q.exception()}")
    finally:
        for q in queries:
            q.stop()
        out.close()
    return results


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--trigger", default="1 second")
    ap.add_argument("--out")
    ap.add_argument("--connectors", default="kwire-kafka,kafka",
                    help="formats to read with (kafka: Spark's JVM connector, skipped without its jars)")
    ap.add_argument("--kafka-jars", default=os.environ.get("KWIRE_SPARK_KAFKA_JARS") or SHARED_JARS,
                    help="Spark's connector: a folder or comma-separated jars (default ../shared/jars)")
    ap.add_argument("--no-latency", action="store_true", help="batch reads only")
    args = ap.parse_args(argv)
    fmts = [f.strip() for f in args.connectors.split(",") if f.strip()]
    jars = None
    if "kafka" in fmts:
        try:
            jars = expand_kafka_jars(args.kafka_jars)
        except ValueError as exc:
            print(f"format('kafka') left out: {exc}", file=sys.stderr)
            fmts.remove("kafka")
    workdir = tempfile.mkdtemp(prefix="kwire-spark-bench-")
    broker, bootstrap = (None, args.bootstrap)
    if bootstrap is None:
        broker = start_broker(os.path.join(workdir, "broker"))
        bootstrap = broker.bootstrap
    result = {"records": args.records, "value_bytes": args.size, "cores": os.cpu_count()}
    try:
        A.ensure_topics(bootstrap, {"bench-1p": 1, "bench-2p": 2})
        for topic in ("bench-1p", "bench-2p"):
            result[f"produce_{topic}_rps"] = round(produce_fixed(bootstrap, topic, args.records, args.size))
        result["kafka_python_consume_1p_rps"] = round(raw_consume(bootstrap, "bench-1p", 1, args.records))
        spark = build_session("kwire-spark-bench",
                              connector=KafkaConnector("kwire-kafka", jars=jars) if jars else None)
        result["spark_version"] = spark.version
        for fmt in fmts:   # warm-up: Python workers, the JVM connector's classes and consumer pool
            spark_read(spark, bootstrap, "bench-1p", args.records, 1, fmt)
        for label, topic, opts in (("1 partition, 1 task", "bench-1p", {}),
                                   ("1 partition, minPartitions=2", "bench-1p", {"minPartitions": "2"}),
                                   ("2 partitions, 2 tasks", "bench-2p", {})):
            for fmt in fmts:
                rates = spark_read(spark, bootstrap, topic, args.records, args.runs, fmt, **opts)
                name = "spark_read_rps" if fmt == "kwire-kafka" else f"spark_read_rps_{fmt}"
                result[f"{name}[{label}]"] = round(statistics.median(rates))
            if {"kafka", "kwire-kafka"} <= set(fmts):
                result[f"ratio_kafka_to_kwire_kafka[{label}]"] = round(
                    result[f"spark_read_rps_kafka[{label}]"] / result[f"spark_read_rps[{label}]"], 2)
        if not args.no_latency:
            lat = latency(spark, bootstrap, workdir, args.samples, args.trigger)
            result["e2e_latency_s"] = {"trigger": args.trigger, "samples": len(lat),
                                       "p50": round(pct(lat, 50), 3), "p95": round(pct(lat, 95), 3),
                                       "max": round(max(lat), 3), "min": round(min(lat), 3)}
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
