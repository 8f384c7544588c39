"""Screenshot the web console's main pages against a live 3-broker cluster, for docs/ and the README.

    .venv/bin/python docs/console_screenshots.py [--out docs/console]

Starts ZooKeeper and three kwire brokers (kwire.testing's ClusterProcess: loopback, temporary
data, stopped by PID), writes a small shop's worth of data through confluent-kafka (an
``orders`` topic of JSON values with headers, a ``payments`` topic, a consumer group that keeps up
and one that falls behind), starts ``kwire console`` and lets headless chromium (Debian's) take
each page through Playwright.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kwire.testing.cluster import ClusterProcess                     # noqa: E402
from tests.support.console import ConsoleProcess                     # noqa: E402

PAGES = [("overview", "/"), ("topics", "/topics"), ("topic", "/topics/orders"),
         ("messages", "/messages?topic=orders&partition=0&start=beginning"),
         ("groups", "/groups"), ("group", "/groups/billing")]


def populate(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("orders", 6, 3), NewTopic("payments", 3, 3),
                                  NewTopic("audit-log", 1, 2, config={"cleanup.policy": "compact"})]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 10})
    for i in range(3000):
        order = {"order_id": i, "customer": {"id": i % 97, "country": ["DE", "FR", "US", "JP"][i % 4]},
                 "total": round(10 + (i * 7.3) % 200, 2), "status": ["new", "paid", "shipped"][i % 3]}
        producer.produce("orders", key=f"order-{i}".encode(), value=json.dumps(order).encode(),
                         headers=[("source", b"web"), ("trace-id", f"{i:08x}".encode())])
        if i % 2 == 0:
            producer.produce("payments", key=f"order-{i}".encode(), value=json.dumps({"order_id": i, "ok": True}).encode())
    assert producer.flush(30) == 0
    for group, share in (("shipping", 1.0), ("billing", 0.6)):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        md = admin.list_topics("orders", timeout=10).topics["orders"].partitions
        offsets = []
        for p in md:
            low, high = consumer.get_watermark_offsets(TopicPartition("orders", p), timeout=10)
            offsets.append(TopicPartition("orders", p, int(high * share)))
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()


def keep_producing(bootstrap: str, stop: threading.Event) -> None:
    """Orders at a changing rate, and the shipping group keeping up, until ``stop``."""
    from confluent_kafka import Consumer, Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "shipping", "auto.offset.reset": "earliest",
                         "auto.commit.interval.ms": 500})
    consumer.subscribe(["orders"])
    i = 0
    while not stop.is_set():
        for _ in range(50 + (i % 7) * 40):
            producer.produce("orders", key=f"order-x{i}".encode(), value=json.dumps({"order_id": i}).encode())
            i += 1
        producer.poll(0)
        consumer.consume(500, timeout=0.2)
    producer.flush(10)
    consumer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "console"))
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    from playwright.sync_api import sync_playwright
    with ClusterProcess(3) as cluster:
        populate(cluster.bootstrap)
        console = ConsoleProcess(cluster.bootstrap, os.path.join(cluster.data_dir, "console.log"),
                                 sample_interval_s=1).start(60)
        stop = threading.Event()
        writer = threading.Thread(target=keep_producing, args=(cluster.bootstrap, stop), daemon=True)
        writer.start()
        try:
            time.sleep(8)           # a few samples while records flow: the rate chart has points
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                for name, path in PAGES:
                    page.goto(console.url + path, wait_until="load")
                    page.wait_for_timeout(600)
                    target = os.path.join(args.out, f"{name}.png")
                    page.screenshot(path=target, full_page=False)
                    print(target)
                browser.close()
        finally:
            stop.set()
            writer.join(20)
            console.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
