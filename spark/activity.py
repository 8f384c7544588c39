"""Website-activity pipeline (the LinkedIn use case Kafka was built for), on Structured
Streaming over a Kafka-protocol broker.

    generator ──► topic "activity" (page views, clicks, searches as JSON)
                  topic "service-logs" (level/service log lines as JSON)
    query page_views_parquet : views per page per 1-minute window, watermark
                               → Parquet (file sink: exactly-once with the checkpoint)
    query page_views_topic   : the same aggregate in update mode
                               → topic "page-views-per-minute" (key = page, JSON value)
    query log_counts_parquet : log lines per level/service per window → Parquet
    top_pages(...)           : top pages per window and overall, from the Parquet output

Run it: ``kwire spark-demo --help`` (or ``python -m kwire.spark.cli``; the CLI imports this
module, never the reverse).
"""
from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field

ACTIVITY_SCHEMA = ("event_id STRING, type STRING, user STRING, page STRING, "
                   "target STRING, query STRING, ts LONG")
LOG_SCHEMA = "ts LONG, level STRING, service STRING, message STRING"
PAGE_VIEWS_SCHEMA = "window_start TIMESTAMP, window_end TIMESTAMP, page STRING, views LONG"

PAGES = ["/", "/feed", "/jobs", "/jobs/search", "/messaging", "/notifications",
         "/profile/ada", "/profile/grace", "/company/kwire", "/learning"]
PAGE_WEIGHTS = [30, 25, 12, 8, 7, 6, 4, 3, 3, 2]
SEARCHES = ["python", "kafka", "spark", "data engineer", "streaming", "trio"]
TARGETS = ["connect", "like", "apply", "follow", "share"]
SERVICES = ["web", "search", "feed", "messaging"]
LEVELS = ["INFO", "INFO", "INFO", "INFO", "WARN", "ERROR"]


# -- event generator -----------------------------------------------------------------------

def activity_events(n: int, start_ms: int, span_ms: int, seed: int = 0,
                    first_id: int = 0) -> list[dict]:
    """``n`` deterministic activity events with timestamps spread over
    [start_ms, start_ms + span_ms): ~60% page views, 25% clicks, 15% searches."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        kind = rng.choices(["page_view", "click", "search"], [60, 25, 15])[0]
        page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
        events.append({
            "event_id": f"e{first_id + i:08d}", "type": kind, "user": f"u{rng.randrange(500)}",
            "page": "/search" if kind == "search" else page,
            "target": rng.choice(TARGETS) if kind == "click" else None,
            "query": rng.choice(SEARCHES) if kind == "search" else None,
            "ts": start_ms + (i * span_ms) // max(n, 1),
        })
    return events


def log_events(n: int, start_ms: int, span_ms: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed ^ 0x5EED)
    return [{"ts": start_ms + (i * span_ms) // max(n, 1), "level": rng.choice(LEVELS),
             "service": rng.choice(SERVICES), "message": f"request {i} handled"}
            for i in range(n)]


def ensure_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create missing topics (name → partitions) with the Kafka admin API."""
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(t, p, 1) for t, p in topics.items() if t not in existing]
        if new:
            admin.create_topics(new)
    finally:
        admin.close()


def produce_json(bootstrap: str, topic: str, events: list[dict], key: str | None = None,
                 producer=None) -> None:
    """Send events as JSON with their ``ts`` as the record timestamp; waits for all acks."""
    from kafka import KafkaProducer
    p = producer or KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = [p.send(topic, value=json.dumps(e, separators=(",", ":")).encode(),
                          key=(str(e[key]).encode() if key else None), timestamp_ms=e["ts"])
                   for e in events]
        p.flush(60)
        for f in futures:
            f.get(60)
    finally:
        if producer is None:
            p.close(10)


def expected_page_views(events: list[dict], window_ms: int = 60000) -> dict:
    """{(window_start_ms, page): views} — what the pipeline must output."""
    out: dict = {}
    for e in events:
        if e["type"] == "page_view":
            k = (e["ts"] - e["ts"] % window_ms, e["page"])
            out[k] = out.get(k, 0) + 1
    return out


def expected_log_counts(events: list[dict], window_ms: int = 60000) -> dict:
    """{(window_start_ms, level, service): count}."""
    out: dict = {}
    for e in events:
        k = (e["ts"] - e["ts"] % window_ms, e["level"], e["service"])
        out[k] = out.get(k, 0) + 1
    return out


# -- the streaming queries -------------------------------------------------------------------

@dataclass
class PipelineConfig:
    bootstrap: str
    out_dir: str
    checkpoint_dir: str
    fmt: str = "kwire-kafka"  # or "kafka" (Spark's connector)
    activity_topic: str = "activity"
    logs_topic: str = "service-logs"
    output_topic: str = "page-views-per-minute"
    window: str = "1 minute"
    watermark: str = "30 seconds"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    extra_options: dict = field(default_factory=dict)


def read_topic(spark, cfg: PipelineConfig, topic: str):
    reader = (spark.readStream.format(cfg.fmt)
              .option("kafka.bootstrap.servers", cfg.bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", cfg.starting_offsets))
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    for k, v in cfg.extra_options.items():
        reader = reader.option(k, v)
    return reader.load()


def page_views_per_minute(events_df, cfg: PipelineConfig):
    """Kafka rows → (window_start, window_end, page, views) with a watermark."""
    from pyspark.sql import functions as F
    parsed = (events_df
              .select(F.from_json(F.col("value").cast("string"), ACTIVITY_SCHEMA).alias("e"))
              .select("e.*")
              .withColumn("event_time", F.timestamp_millis("ts"))
              .withWatermark("event_time", cfg.watermark)
              .where(F.col("type") == "page_view"))
    return (parsed.groupBy(F.window("event_time", cfg.window), "page")
            .agg(F.count(F.lit(1)).alias("views"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "page", "views"))


def log_counts(logs_df, cfg: PipelineConfig):
    """Kafka rows → (window_start, window_end, level, service, lines) with a watermark."""
    from pyspark.sql import functions as F
    parsed = (logs_df
              .select(F.from_json(F.col("value").cast("string"), LOG_SCHEMA).alias("l"))
              .select("l.*")
              .withColumn("event_time", F.timestamp_millis("ts"))
              .withWatermark("event_time", cfg.watermark))
    return (parsed.groupBy(F.window("event_time", cfg.window), "level", "service")
            .agg(F.count(F.lit(1)).alias("lines"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "level", "service", "lines"))


def start_pipeline(spark, cfg: PipelineConfig, trigger: dict, with_topic_sink: bool = True):
    """Start the queries; returns them (all already running). ``trigger`` is passed to
    ``DataStreamWriter.trigger``, e.g. ``{"availableNow": True}`` or
    ``{"processingTime": "1 second"}``."""
    from pyspark.sql import functions as F
    ckpt, out = cfg.checkpoint_dir, cfg.out_dir
    views = page_views_per_minute(read_topic(spark, cfg, cfg.activity_topic), cfg)
    queries = [
        views.writeStream.queryName("page_views_parquet").format("parquet")
        .outputMode("append").option("path", os.path.join(out, "page_views"))
        .option("checkpointLocation", os.path.join(ckpt, "page_views_parquet"))
        .trigger(**trigger).start(),
        log_counts(read_topic(spark, cfg, cfg.logs_topic), cfg)
        .writeStream.queryName("log_counts_parquet").format("parquet")
        .outputMode("append").option("path", os.path.join(out, "log_counts"))
        .option("checkpointLocation", os.path.join(ckpt, "log_counts_parquet"))
        .trigger(**trigger).start(),
    ]
    if with_topic_sink:
        live = page_views_per_minute(read_topic(spark, cfg, cfg.activity_topic), cfg)
        records = live.select(
            F.col("page").alias("key"),
            F.to_json(F.struct(
                F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                "page", "views")).alias("value"))
        # Update mode (each changed count goes out in the next micro-batch) through
        # foreachBatch: Python stream writers only take append mode.
        queries.append(
            records.writeStream.queryName("page_views_topic").outputMode("update")
            .foreachBatch(_topic_writer(cfg))
            .option("checkpointLocation", os.path.join(ckpt, "page_views_topic"))
            .trigger(**trigger).start())
    return queries


def _topic_writer(cfg: PipelineConfig):
    def write(batch_df, batch_id: int) -> None:
        (batch_df.write.format(cfg.fmt).mode("append")
         .option("kafka.bootstrap.servers", cfg.bootstrap)
         .option("topic", cfg.output_topic).save())
    return write


def await_all(queries, timeout_s: float) -> None:
    """Wait for availableNow queries to finish; raises the first query's failure, or
    TimeoutError (after stopping them) when they run past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for q in queries:
        remaining = max(0.1, deadline - time.monotonic())
        if not q.awaitTermination(remaining):
            for other in queries:
                other.stop()
            raise TimeoutError(f"query {q.name} still running after {timeout_s}s")
        if q.exception() is not None:
            raise RuntimeError(f"query {q.name} failed: {q.exception()}")


def run_available_now(spark, cfg: PipelineConfig, timeout_s: float = 240,
                      with_topic_sink: bool = True) -> None:
    """Process everything in the topics now, then stop (one run of the pipeline)."""
    await_all(start_pipeline(spark, cfg, {"availableNow": True}, with_topic_sink), timeout_s)


def top_pages(spark, out_dir: str, n: int = 3):
    """(overall, per_window) from the Parquet output: overall is [(page, views)] for the
    top ``n`` pages; per_window maps window start → [(page, views)] top ``n``."""
    from pyspark.sql import Window, functions as F
    path = os.path.join(out_dir, "page_views")
    if not os.path.isdir(path):
        return [], {}
    df = spark.read.schema(PAGE_VIEWS_SCHEMA).parquet(path)
    overall = [(r.page, r.views) for r in df.groupBy("page").agg(F.sum("views").alias("views"))
               .orderBy(F.desc("views"), "page").limit(n).collect()]
    ranked = (df.withColumn("rank", F.row_number().over(
        Window.partitionBy("window_start").orderBy(F.desc("views"), "page")))
        .where(F.col("rank") <= n).orderBy("window_start", "rank").collect())
    per_window: dict = {}
    for r in ranked:
        per_window.setdefault(r.window_start, []).append((r.page, r.views))
    return overall, per_window
