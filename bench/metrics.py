"""Metrics benchmark: what prometheus.listener costs produce and consume throughput.

    .venv/bin/python bench/metrics.py [--records 200000] [--sync-records 5000] [--repeat 5]

Two ``kwire serve`` processes on loopback, one without prometheus.listener ("off") and
one with it; each repeat runs on "off", on "on" unscraped, on "on" while a thread scrapes
its /metrics once a second (as Prometheus would) and on "off" again, each on a topic of its
own, alternating between the brokers, after a round on each broker that is not counted.
"off again" / "off" is the noise floor of the machine: a ratio of "on" inside it is no
measurable cost.

1. Produce 1 KiB records with librdkafka (confluent-kafka, acks=1, batched: the TLS
   benchmark's client settings).
2. Consume them back from the beginning (assign mode).
3. Produce 1 KiB records one request each (flush after every record): the worst case for
   a per-request cost, since nothing is amortised over a batch.

Prints records/s and the broker process's CPU time per record (user + system, from
/proc, less sensitive than throughput to what else the machine runs), medians of the
repeats, with the ratios to "off"; then what one scrape cost (its time and size) and what
the counters cost per call, timed in-process.  No
pass/fail (this is not a timed test); the goal is ratios within noise of 1.00.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
import threading
import time
import timeit
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.tls import VALUE, consume, produce  # noqa: E402
from kwire.testing.process import BrokerProcess, free_port  # noqa: E402

VARIANTS = ("off", "on", "on+scraped", "off again")
# Runs alternate between the brokers, so neither starts a run while still writing back the
# last one's 200 MB (back to back on one broker, that doubled the second run's CPU).
ORDERS = (("off", "on", "off again", "on+scraped"), ("off again", "on+scraped", "off", "on"))


def produce_sync(bootstrap: str, topic: str, records: int) -> float:
    """One Produce request per record: flush after each."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    started = time.perf_counter()
    for _ in range(records):
        producer.produce(topic, VALUE)
        if producer.flush(30):
            raise RuntimeError(f"{topic}: a record left unacknowledged")
    return records / (time.perf_counter() - started)


class Scraper:
    """Scrapes a /metrics URL once a second while running; keeps each scrape's time and size."""

    def __init__(self, url: str):
        self.url = url
        self.times: list[float] = []
        self.sizes: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scrape(self) -> None:
        started = time.perf_counter()
        with urllib.request.urlopen(self.url, timeout=10) as response:
            self.sizes.append(len(response.read()))
        self.times.append(time.perf_counter() - started)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scrape()
            self._stop.wait(1.0)

    def __enter__(self) -> "Scraper":
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads) so far, at clock-tick
    resolution (10 ms): the default record counts make that 1-3 % of a run."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_variant(broker: BrokerProcess, name: str, i: int, args, runs: dict) -> None:
    """Run the three workloads on ``broker``; records/s under (workload, name) and the broker's
    CPU µs per record under (workload + " cpu", name)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    slug = re.sub(r"[^a-z]+", "-", name)
    topic, sync_topic = f"metrics-{slug}-{i}", f"metrics-sync-{slug}-{i}"
    for t in (topic, sync_topic):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
    config = {"bootstrap.servers": broker.bootstrap}
    for key, records, work in (("produce", args.records, lambda: produce(config, topic, args.records)),
                               ("consume", args.records, lambda: consume(config, topic, args.records)),
                               ("sync", args.sync_records,
                                lambda: produce_sync(broker.bootstrap, sync_topic, args.sync_records))):
        before = cpu_seconds(broker.pid)
        runs.setdefault((key, name), []).append(work())
        runs.setdefault((key + " cpu", name), []).append((cpu_seconds(broker.pid) - before) / records * 1e6)


def counter_costs() -> dict[str, float]:
    """ns per call of the counters the request path bumps (kwire.metrics.counters), in this process."""
    from kwire.metrics.counters import BrokerMetrics

    metrics = BrokerMetrics()
    started = time.perf_counter()
    n = 200_000
    costs = {
        "request_done (per request)": timeit.timeit(lambda: metrics.request_done(0, 9, started), number=n),
        "produced (per partition appended)": timeit.timeit(lambda: metrics.produced("t", 100, 102400), number=n),
        "the off switch (broker.metrics is None)": timeit.timeit("m is not None", globals={"m": None}, number=n),
    }
    return {k: v / n * 1e9 for k, v in costs.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--sync-records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    metrics_port = free_port()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    off = BrokerProcess(args=["--log-level", "WARNING"])
    on = BrokerProcess(args=["--log-level", "WARNING"], properties={"prometheus.listener": f"127.0.0.1:{metrics_port}"})
    runs: dict[tuple[str, str], list[float]] = {}
    scraper = Scraper(url)
    with off, on:
        for broker in (off, on):           # a round not counted: both brokers and clients warm
            run_variant(broker, "warm-up", broker.port, args, {})
        for i in range(args.repeat):
            for variant in ORDERS[i % 2]:
                if variant == "on+scraped":
                    with scraper:
                        run_variant(on, variant, i, args, runs)
                else:
                    run_variant(on if variant == "on" else off, variant, i, args, runs)
        scraper.scrape()
    report(runs, args)
    print(f"scrapes: {len(scraper.times)}, median {statistics.median(scraper.times) * 1000:.1f} ms, "
          f"last {scraper.sizes[-1]:,} bytes")
    for name, ns in counter_costs().items():
        print(f"{name:<44} {ns:>10,.0f} ns")
    return 0


def report(runs: dict, args) -> None:
    m = {k: statistics.median(v) for k, v in runs.items()}
    labels = (("produce", f"produce {args.records} (acks=1, batched)"),
              ("consume", f"consume {args.records} (assign, from the start)"),
              ("sync", f"produce {args.sync_records}, one request per record"))
    for suffix, title, digits in (("", "records/s", 0), (" cpu", "broker CPU µs per record", 2)):
        title = f"{title}, 1 KiB records, median of {args.repeat}"
        print(f"{title:<50} {'off':>9} {'on':>9} {'scraped':>9} {'off again':>9} {'on/off':>7} "
              f"{'scraped/off':>11} {'again/off':>9}")
        for key, label in labels:
            row = [m[(key + suffix, v)] for v in VARIANTS]
            ratios = [r / row[0] if row[0] else math.nan for r in row[1:]]
            print(f"{label:<50} " + " ".join(f"{r:>9,.{digits}f}" for r in row) +
                  f" {ratios[0]:>7.2f} {ratios[1]:>11.2f} {ratios[2]:>9.2f}")


if __name__ == "__main__":
    sys.exit(main())
