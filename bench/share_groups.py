"""Share-group (KIP-932) consumption throughput: 1, 3 and 6 ShareConsumers on a 1-partition topic.

Starts ``kwire serve`` in a process of its own; for each consumer count, fills a new topic
of one partition with RECORDS records (100-byte values, in batches of about 100), sets the
group's ``share.auto.offset.reset`` to earliest, starts the consumers (confluent-kafka's
ShareConsumer, one thread each, implicit acknowledgement) and times from the first record
received to the last distinct offset (joining the group is left out; "with join" is from
the consumers' start).  Deliveries after
that are not counted: librdkafka 2.16 closes a share consumer without acknowledging the
records of its last poll, so the broker hands those to the consumers still polling, as
Kafka would (at-least-once)::

    python bench/share_groups.py                 # 50 000 records
    python bench/share_groups.py --records 200000 --consumers 1 3 6 12

Prints a table: consumers, records, seconds, records/s, deliveries beyond one per record
(redeliveries; 0 expected), and how the records were spread over the consumers.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType,
)

from tests.support.broker import BrokerProcess  # noqa: E402


def fill(bootstrap: str, topic: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 100})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def run(bootstrap: str, consumers: int, records: int, timeout: float) -> tuple:
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    fill(bootstrap, topic, records)
    earliest(bootstrap, group)
    lock = threading.Lock()
    seen: set[int] = set()
    per_consumer = [0] * consumers
    deliveries = [0]
    redelivered = [0]          # delivery_count > 1: released or timed out before
    first = [None]
    done = threading.Event()

    def member(index: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        try:
            while not done.is_set():
                msgs = c.poll(0.2) or []
                with lock:
                    for m in msgs:
                        if m.error() is not None or done.is_set():
                            continue
                        if first[0] is None:
                            first[0] = time.perf_counter()
                        deliveries[0] += 1
                        if m.delivery_count() > 1:
                            redelivered[0] += 1
                        per_consumer[index] += 1
                        seen.add(m.offset())
                    if len(seen) >= records:
                        first.append(time.perf_counter())
                        done.set()
        finally:
            c.close()
    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(consumers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    done.wait(timeout)
    done.set()
    for t in threads:
        t.join(30)
    if len(first) < 2:
        return (consumers, len(seen), float("nan"), 0.0, float("nan"), deliveries[0] - len(seen), redelivered[0],
                per_consumer)
    seconds = first[1] - first[0]
    return (consumers, len(seen), seconds, len(seen) / seconds, first[1] - started, deliveries[0] - len(seen),
            redelivered[0], per_consumer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    with BrokerProcess(args=["--log-level", "WARNING"]) as broker:
        rows = [run(broker.bootstrap, n, args.records, args.timeout) for n in args.consumers]
    print(f"{'consumers':>9} {'records':>8} {'seconds':>8} {'records/s':>10} {'with join':>9} {'duplicates':>10} "
          f"{'count>1':>8}  per consumer")
    for consumers, records, seconds, rate, total, extra, again, per in rows:
        print(f"{consumers:>9} {records:>8} {seconds:>8.2f} {rate:>10.0f} {total:>8.2f}s {extra:>10} {again:>8}  {per}")


if __name__ == "__main__":
    main()
