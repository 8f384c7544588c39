#!/usr/bin/env python
"""How fast the web console's pages load on a big cluster.

    .venv/bin/python bench/console.py [--partitions 1000] [--groups 200] [--rounds 20] [--json PATH]

Issue 32's target: pages load in under 300 ms on a 3-broker dev cluster with 1,000 partitions
and 200 groups.  The bench starts three kwire brokers and ZooKeeper (kwire.testing's
ClusterProcess: loopback, temporary data, stopped by PID), creates ``--partitions`` partitions
(topics of 10), writes a few records to each, commits offsets for ``--groups`` groups (each on
the partitions of one topic) and starts ``kwire console`` on the cluster.  Then, for each page:

- **server**: the time to the last byte of the page over HTTP (keep-alive, ``--rounds`` times,
  median and p95);
- **browser**: chromium's navigation to the ``load`` event through Playwright (median of
  ``--rounds // 4``), which includes the stylesheet and scripts.

There is no reference broker here: a console is a client of the cluster, and what it costs a
page is its own work.  The cluster's answer time is in the figures (the topic page asks the
brokers fresh; the lists read the console's background sample).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kwire.testing.cluster import ClusterProcess                     # noqa: E402
from tests.support.console import ConsoleProcess                     # noqa: E402


def build(cluster: ClusterProcess, partitions: int, groups: int) -> list[str]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [f"bench-{i:03d}" for i in range(max(1, partitions // 10))]
    for start in range(0, len(topics), 10):
        futures = admin.create_topics([NewTopic(t, 10, 2) for t in topics[start:start + 10]],
                                      request_timeout=120, operation_timeout=120)
        for f in futures.values():
            f.result(180)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
    for t in topics:
        for p in range(10):
            for _ in range(3):
                producer.produce(t, b"v" * 50, partition=p)
    assert producer.flush(120) == 0
    for g in range(groups):
        topic = topics[g % len(topics)]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"bench-group-{g:03d}",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(topic, p, 1) for p in range(10)], asynchronous=False)
        consumer.close()
    return topics


def server_times(url: str, path: str, rounds: int) -> list[float]:
    host, port = url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        times.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}")
    conn.close()
    return times


def browser_times(url: str, paths: list[str], rounds: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright
    out: dict[str, list[float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        for path in paths:
            out[path] = []
            for _ in range(rounds):
                page.goto(url + path, wait_until="load")
                timing = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                                       " return n.loadEventEnd - n.startTime; }")
                out[path].append(float(timing))
        browser.close()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    results: dict = {"partitions": args.partitions, "groups": args.groups, "pages": {}}
    with ClusterProcess(3, properties={"offsets.topic.num.partitions": 10}) as cluster:
        started = time.monotonic()
        topics = build(cluster, args.partitions, args.groups)
        print(f"cluster built in {time.monotonic() - started:.0f} s: {len(topics)} topics, "
              f"{len(topics) * 10} partitions, {args.groups} groups", flush=True)
        console = ConsoleProcess(cluster.bootstrap, os.path.join(cluster.data_dir, "console.log"),
                                 sample_interval_s=5).start(120)
        try:
            paths = ["/", "/topics", f"/topics/{topics[0]}", "/groups", "/groups/bench-group-000",
                     f"/messages?topic={topics[0]}&partition=0"]
            for path in list(paths):   # a first load each (templates compiled, clients connected)
                try:
                    server_times(console.url, path, 1)
                except RuntimeError as exc:
                    print(f"skipped: {exc}")
                    paths.remove(path)
            browser = browser_times(console.url, paths, max(3, args.rounds // 4))
            print(f"{'page':40} {'server median':>14} {'p95':>8} {'browser load':>13}")
            for path in paths:
                times = sorted(server_times(console.url, path, args.rounds))
                median, p95 = statistics.median(times), times[int(0.95 * (len(times) - 1))]
                load = statistics.median(browser[path])
                results["pages"][path] = {"server_median_ms": round(median, 1), "server_p95_ms": round(p95, 1),
                                          "browser_load_ms": round(load, 1)}
                print(f"{path:40} {median:11.1f} ms {p95:5.1f} ms {load:10.1f} ms", flush=True)
        finally:
            console.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
