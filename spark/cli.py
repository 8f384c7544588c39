"""``kwire spark-demo`` / ``python -m kwire.spark.cli``: watch the activity pipeline
run on PySpark (local mode) against kwire — or any Kafka broker with ``--bootstrap``.

Without ``--bootstrap`` it starts ``python -m kwire serve`` as a child process on a free
loopback port (the broker as a process, as any user would), with its Schema Registry on
another, and stops it at the end.  With a registry (the demo broker's, or
``--schema-registry URL``) the generator also writes Avro orders and the pipeline sums
their decoded amounts per minute.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from kwire.testing import BrokerProcess
from kwire.testing.process import free_port, wait_port

from . import activity as A


def parse_args(argv):
    p = argparse.ArgumentParser(prog="kwire spark-demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start kwire)")
    p.add_argument("--dir", default="./kwire-spark-demo",
                   help="Parquet output, checkpoints and the demo broker's data (default %(default)s)")
    p.add_argument("--duration", type=float, default=60, help="seconds to run (default %(default)s)")
    p.add_argument("--rate", type=int, default=200, help="activity events per second (default %(default)s)")
    p.add_argument("--trigger", default="1 second", help='processing-time trigger (default "%(default)s")')
    p.add_argument("--once", action="store_true",
                   help="process what is in the topics with trigger(availableNow) and exit")
    p.add_argument("--no-generate", action="store_true", help="do not produce events")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--source", default="auto", choices=["auto", "kafka", "kwire-kafka"],
                   help="Spark's connector (needs --kafka-packages/--kafka-jars) or kwire's "
                        "Python data source (default: kafka if configured, else kwire-kafka)")
    p.add_argument("--kafka-packages", help="Maven coordinate of spark-sql-kafka-0-10 (needs Maven Central)")
    p.add_argument("--kafka-jars", help="comma-separated local jars (spark-sql-kafka-0-10, its token provider, "
                   "kafka-clients, commons-pool2) or a folder holding them, e.g. ../shared/jars")
    p.add_argument("--partitions", type=int, default=2, help="partitions of the input topics")
    p.add_argument("--spark-log-level", default="ERROR", type=str.upper,
                   choices=["ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"],
                   help="Spark's own log (default %(default)s: its warnings, such as a trigger "
                        "falling behind, would bury the demo's output)")
    p.add_argument("--activity-topic", default="activity")
    p.add_argument("--logs-topic", default="service-logs")
    p.add_argument("--output-topic", default="page-views-per-minute")
    p.add_argument("--orders-topic", default="orders", help="the Avro topic (default %(default)s)")
    p.add_argument("--schema-registry", metavar="URL",
                   help="Schema Registry for the Avro orders topic (default: the demo broker's own; "
                        "with --bootstrap and no URL, no orders topic)")
    return p.parse_args(argv)


def start_broker(data_dir: str, timeout_s: float = 20, registry: bool = True) -> BrokerProcess:
    """``python -m kwire serve`` on a free loopback port, data and log under ``data_dir``,
    with ``registry`` its Schema Registry on another (``.registry_url``, else None).

    Production defaults (no test shortcuts).  Raises ``BrokerStartError``; stop it
    with ``.stop()`` (SIGTERM, then -9 after 10 s).
    """
    os.makedirs(data_dir, exist_ok=True)
    port = free_port() if registry else None
    properties = {"schema.registry.listeners": f"http://127.0.0.1:{port}"} if port else {}
    broker = BrokerProcess(data_dir, test_defaults=False, properties=properties).start(timeout_s)
    broker.registry_url = None
    if port:
        try:
            wait_port("127.0.0.1", port, timeout_s, broker.proc)
        except BaseException:
            broker.stop()
            raise
        broker.registry_url = f"http://127.0.0.1:{port}"
    return broker


def generate(bootstrap: str, cfg: A.PipelineConfig, rate: int, stop: threading.Event) -> None:
    """Produce live events (event time = now) at ``rate``/s until ``stop`` is set; with an
    orders topic, an order for every fifth activity event as well."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    serialize = A.order_serializer(cfg.schema_registry_url) if cfg.orders_topic else None
    sent, seed = 0, 0
    try:
        while not stop.is_set():
            now = int(time.time() * 1000)
            batch = max(1, rate // 10)
            A.produce_json(bootstrap, cfg.activity_topic,
                           A.activity_events(batch, now, 100, seed=seed, first_id=sent),
                           key="user", producer=producer)
            A.produce_json(bootstrap, cfg.logs_topic,
                           A.log_events(max(1, batch // 4), now, 100, seed=seed), producer=producer)
            if serialize is not None:
                A.produce_orders(bootstrap, cfg.orders_topic,
                                 A.order_events(max(1, batch // 5), now, 100, seed=seed, first_id=sent),
                                 serialize, producer=producer)
            sent += batch
            seed += 1
            stop.wait(0.1)
    finally:
        producer.close(10)


class LiveCounts:
    """Follows the output topic (update mode: the newest record per window and page is
    its current count) with a stock consumer, for the demo's live view."""

    def __init__(self, bootstrap: str, topic: str):
        from kafka import KafkaConsumer, TopicPartition
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                      enable_auto_commit=False)
        tps = [TopicPartition(topic, p) for p in self.consumer.partitions_for_topic(topic) or [0]]
        self.consumer.assign(tps)
        self.consumer.seek_to_end()
        self.counts: dict = {}

    def poll(self) -> None:
        import json
        for recs in self.consumer.poll(timeout_ms=100, max_records=100000).values():
            for r in recs:
                v = json.loads(r.value)
                self.counts[(v["window_start"], v["page"])] = v["views"]

    def top(self, n: int = 3):
        if not self.counts:
            return None, []
        window = max(w for w, _ in self.counts)
        pages = sorted(((p, c) for (w, p), c in self.counts.items() if w == window),
                       key=lambda pc: (-pc[1], pc[0]))
        return window, pages[:n]

    def close(self) -> None:
        self.consumer.close()


def report(spark, cfg: A.PipelineConfig, queries, live: LiveCounts | None = None, out=print) -> None:
    for q in queries:
        p = q.lastProgress
        if p:
            out(f"  {q.name:20s} batch {p['batchId']:>4}  rows {p['numInputRows']:>6}  "
                f"{p.get('processedRowsPerSecond', 0):8.0f} rows/s")
    if live is not None:
        live.poll()
        window, pages = live.top()
        if window:
            out(f"  live ({cfg.output_topic}) window {window}: "
                + ", ".join(f"{pg} {v}" for pg, v in pages))
    overall, per_window = A.top_pages(spark, cfg.out_dir, n=3)
    if overall:
        out(f"  Parquet, {len(per_window)} closed windows; top pages: "
            + ", ".join(f"{page} {views}" for page, views in overall))
    if cfg.orders_topic:
        windows = A.revenue(spark, cfg.out_dir, n=3)
        if windows:
            out(f"  revenue per minute ({cfg.orders_topic}, Avro via the Schema Registry): "
                + ", ".join(f"{w:%H:%M} {rev} ({n} orders)" for w, rev, n in windows))


def drain_and_stop(queries, timeout_s: float = 30) -> None:
    """Let each query catch up with what was produced (bounded), then stop it: stopping
    in the middle of a batch is safe for the checkpoint but noisy in Spark's log."""
    def drain():
        for q in queries:
            q.processAllAvailable()
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    t.join(timeout_s)
    for q in queries:
        q.stop()


def _registry_client_installed() -> bool:
    try:
        import confluent_kafka.schema_registry.avro  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None) -> int:
    args = parse_args(list(argv if argv is not None else sys.argv[1:]))
    from .session import build_session, choose_connector
    try:
        connector = choose_connector(args.source, args.kafka_packages, args.kafka_jars)
    except ValueError as exc:
        print(f"kwire spark-demo: {exc}", file=sys.stderr)
        return 2
    base = os.path.abspath(args.dir)
    broker = None
    bootstrap = args.bootstrap
    registry_url = args.schema_registry
    if registry_url and not _registry_client_installed():
        print("kwire spark-demo: --schema-registry needs confluent-kafka's schema registry client "
              '(pip install "confluent-kafka[schemaregistry,avro]")', file=sys.stderr)
        return 2
    if bootstrap is None:
        broker = start_broker(os.path.join(base, "broker"), registry=_registry_client_installed())
        bootstrap = broker.bootstrap
        print(f"kwire broker at {bootstrap} (pid {broker.pid})")
        if broker.registry_url:
            registry_url = registry_url or broker.registry_url
            print(f"Schema Registry at {broker.registry_url}")
    stop = threading.Event()
    gen = None
    try:
        cfg = A.PipelineConfig(bootstrap, os.path.join(base, "out"), os.path.join(base, "checkpoints"),
                               fmt=connector.fmt, max_offsets_per_trigger=args.max_offsets_per_trigger,
                               activity_topic=args.activity_topic, logs_topic=args.logs_topic,
                               output_topic=args.output_topic,
                               orders_topic=args.orders_topic if registry_url else None,
                               schema_registry_url=registry_url)
        topics = {cfg.activity_topic: args.partitions, cfg.logs_topic: args.partitions, cfg.output_topic: 1}
        if cfg.orders_topic:
            topics[cfg.orders_topic] = args.partitions
            # before the query starts: it reads the subject's latest schema then
            A.register_order_schema(registry_url, cfg.orders_topic)
        A.ensure_topics(bootstrap, topics)
        spark = build_session("kwire-spark-demo", connector=connector, log_level=args.spark_log_level)
        print(f"Spark {spark.version}, source format({connector.fmt!r}); output in {cfg.out_dir}")
        if args.once:
            A.run_available_now(spark, cfg, timeout_s=max(args.duration, 60))
            report(spark, cfg, [])
            return 0
        if not args.no_generate:
            gen = threading.Thread(target=generate, args=(bootstrap, cfg, args.rate, stop), daemon=True)
            gen.start()
        queries = A.start_pipeline(spark, cfg, {"processingTime": args.trigger})
        live = LiveCounts(bootstrap, cfg.output_topic)
        deadline = time.monotonic() + args.duration
        try:
            while time.monotonic() < deadline:
                time.sleep(min(5, max(0.1, deadline - time.monotonic())))
                failed = [q for q in queries if q.exception() is not None]
                if failed:
                    print(f"query {failed[0].name} failed: {failed[0].exception()}", file=sys.stderr)
                    return 1
                print(f"[{time.strftime('%H:%M:%S')}]")
                report(spark, cfg, queries, live)
            stop.set()
            if gen is not None:
                gen.join(15)
            drain_and_stop(queries)
            print("final:")
            report(spark, cfg, [], live)
        finally:
            for q in queries:
                q.stop()
            live.close()
        return 0
    finally:
        stop.set()
        if gen is not None:
            gen.join(15)
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
