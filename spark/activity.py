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

    with a Schema Registry (``schema_registry_url``), one schema'd topic as well:
    generator ──► topic "orders" (Avro through confluent-kafka's AvroSerializer: magic byte,
                  schema id, Avro binary; the schema registered under "orders-value")
    query revenue_parquet    : revenue and orders per 1-minute window, from the decoded
                               ``value_decoded`` struct of format("kwire-kafka") → Parquet
    revenue(...)             : the latest closed windows' revenue, from the Parquet output

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
REVENUE_SCHEMA = "window_start TIMESTAMP, window_end TIMESTAMP, revenue DECIMAL(20,2), orders LONG"
ORDER_AVRO_SCHEMA = {
    "type": "record", "name": "Order", "namespace": "kwire.demo", "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "user", "type": "string"},
        {"name": "items", "type": "int"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ]}

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


def order_events(n: int, start_ms: int, span_ms: int, seed: int = 0,
                 first_id: int = 0) -> list[dict]:
    """``n`` deterministic orders (ORDER_AVRO_SCHEMA) spread over [start_ms, start_ms + span_ms)."""
    from decimal import Decimal
    rng = random.Random(seed ^ 0x0DE5)
    return [{"order_id": f"o{first_id + i:08d}", "user": f"u{rng.randrange(500)}",
             "items": rng.randint(1, 5), "amount": Decimal(rng.randrange(199, 20000)) / 100,
             "ts": start_ms + (i * span_ms) // max(n, 1),
             "coupon": rng.choice([None, None, None, "WELCOME10"])}
            for i in range(n)]


def order_serializer(registry_url: str):
    """``serialize(order, topic) -> bytes``: confluent-kafka's AvroSerializer against the
    registry (registers ORDER_AVRO_SCHEMA under ``<topic>-value`` on first use)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    avro = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER_AVRO_SCHEMA))
    return lambda order, topic: avro(order, SerializationContext(topic, MessageField.VALUE))


def register_order_schema(registry_url: str, topic: str) -> int:
    """Register ORDER_AVRO_SCHEMA under ``<topic>-value`` (TopicNameStrategy); returns its id.
    Raises confluent-kafka's SchemaRegistryError, e.g. for an incompatible schema there."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    client = SchemaRegistryClient({"url": registry_url})
    try:
        return client.register_schema(f"{topic}-value", Schema(json.dumps(ORDER_AVRO_SCHEMA), "AVRO"))
    finally:
        client.close()


def produce_orders(bootstrap: str, topic: str, orders: list[dict], serialize, producer=None) -> None:
    """Send orders Avro-encoded (``serialize`` from order_serializer), keyed by user, with
    their ``ts`` as the record timestamp; waits for all acks."""
    from kafka import KafkaProducer
    p = producer or KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = [p.send(topic, value=serialize(o, topic), key=o["user"].encode(), timestamp_ms=o["ts"])
                   for o in orders]
        p.flush(60)
        for f in futures:
            f.get(60)
    finally:
        if producer is None:
            p.close(10)


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
    orders_topic: str | None = None         # the Avro topic; needs schema_registry_url
    schema_registry_url: str | None = None


def read_topic(spark, cfg: PipelineConfig, topic: str, fmt: str | None = None, options: dict | None = None):
    reader = (spark.readStream.format(fmt or cfg.fmt)
              .option("kafka.bootstrap.servers", cfg.bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", cfg.starting_offsets))
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    for k, v in {**cfg.extra_options, **(options or {})}.items():
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


def revenue_per_minute(orders_df, cfg: PipelineConfig):
    """Decoded order rows → (window_start, window_end, revenue, orders) with a watermark;
    records that did not decode (``value_decoded`` null) are left out."""
    from pyspark.sql import functions as F
    orders = (orders_df.where(F.col("value_decoded").isNotNull())
              .select("value_decoded.*")
              .withWatermark("ts", cfg.watermark))
    return (orders.groupBy(F.window("ts", cfg.window))
            .agg(F.sum("amount").cast("decimal(20,2)").alias("revenue"), F.count(F.lit(1)).alias("orders"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "revenue", "orders"))


def _revenue_query(spark, cfg: PipelineConfig, trigger: dict):
    # kwire's data source whichever connector the other queries use: Spark's own Kafka
    # connector has no Schema Registry decoding
    orders = read_topic(spark, cfg, cfg.orders_topic, fmt="kwire-kafka",
                        options={"schema.registry.url": cfg.schema_registry_url, "valueFormat": "avro"})
    return (revenue_per_minute(orders, cfg).writeStream.queryName("revenue_parquet")
            .format("parquet").outputMode("append")
            .option("path", os.path.join(cfg.out_dir, "revenue"))
            .option("checkpointLocation", os.path.join(cfg.checkpoint_dir, "revenue_parquet"))
            .trigger(**trigger).start())


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
    if cfg.orders_topic and cfg.schema_registry_url:
        # each kwire-kafka query starts a Python process on the driver and Spark gives it 10 s
        # to connect back; on a loaded machine that fails while other queries run their first
        # micro-batch, so this one starts once they have (bounded wait)
        _wait_first_batch(queries, timeout_s=60)
        queries.append(_revenue_query(spark, cfg, trigger))
    return queries


def _wait_first_batch(queries, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(q.isActive and q.lastProgress is None for q in queries):
        time.sleep(0.2)


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


def revenue(spark, out_dir: str, n: int = 3) -> list[tuple]:
    """[(window_start, revenue, orders)] of the latest ``n`` closed windows, oldest first,
    from the Parquet output of revenue_parquet ([] before any window closed)."""
    path = os.path.join(out_dir, "revenue")
    if not os.path.isdir(path):
        return []
    rows = (spark.read.schema(REVENUE_SCHEMA).parquet(path)
            .orderBy("window_start", ascending=False).limit(n).collect())
    return [(r.window_start, r.revenue, r.orders) for r in reversed(rows)]
