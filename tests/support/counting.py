"""Counting what a user counts in a fault test: records acknowledged, read back, lost.

Producers write record ``i`` (value ``str(i)``) to partition ``i % partitions``
and report the acknowledged values per partition, in acknowledgement order,
through one of three stock clients:

    acked = produce_counted("confluent", bootstrap, "orders", 20000, pause_every=100)
    acked = produce_counted("kafka-python", ...)
    acked = produce_counted("aiokafka", ...)
    seen = read_all(bootstrap, "orders", 3, expected=total_acked(acked))
    assert tally(acked, seen)["lost"] == 0

Every producer is idempotent with acks=all unless told otherwise, retries for
as long as ``timeout`` allows, and flushes every ``pause_every`` records so the
load lasts long enough for a fault to land in the middle of it.
"""
from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

CLIENTS = ("confluent", "kafka-python", "aiokafka")


def create_topic(bootstrap: str, name: str, partitions: int = 3, rf: int = 3, **configs) -> None:
    """CreateTopics through confluent's AdminClient; ``min_insync_replicas=2`` spells a config."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, rf, config={k.replace("_", "."): str(v)
                                                                          for k, v in configs.items()})])
    futures[name].result(30)


def wait_for(predicate, timeout: float, what: str):
    """Poll until ``predicate()`` is truthy and return it; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def partition_states(zookeeper_connect: str, topic: str) -> dict[int, dict]:
    """Each partition's state znode as an operator reads it: {partition: {"leader", "isr", ...}}."""
    from kazoo.client import KazooClient
    zk = KazooClient(zookeeper_connect)
    zk.start(timeout=10)
    try:
        states = {}
        for p in zk.get_children(f"/brokers/topics/{topic}/partitions"):
            data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
            states[int(p)] = json.loads(data)
        return states
    finally:
        zk.stop()


def wait_full_isrs(zookeeper_connect: str, topic: str, replicas: int = 3, timeout: float = 30) -> dict:
    return wait_for(lambda: (s := partition_states(zookeeper_connect, topic)) and
                    all(len(v["isr"]) == replicas for v in s.values()) and s, timeout, f"full ISRs of {topic}")


def produce_counted(client: str, bootstrap: str, topic: str, count: int, *, partitions: int = 3,
                    acks: str = "all", idempotent: bool = True, pause_every: int = 0,
                    timeout: float = 60, acked: dict[int, list[int]] | None = None) -> dict[int, list[int]]:
    """Produce ``count`` records through ``client`` (one of ``CLIENTS``); returns the
    acknowledged values per partition in acknowledgement order.  ``acked``, when given, is
    filled as acknowledgements arrive (a test in another thread waits for some before a fault)."""
    acked = {} if acked is None else acked
    args = (bootstrap, topic, count, partitions, acks, idempotent, pause_every, timeout, acked)
    if client == "confluent":
        _produce_confluent(*args)
    elif client == "kafka-python":
        _produce_kafka_python(*args)
    elif client == "aiokafka":
        import asyncio
        asyncio.run(_produce_aiokafka(*args))
    else:
        raise ValueError(f"unknown client {client!r}; one of {CLIENTS}")
    return acked


def produce_in_background(client: str, bootstrap: str, topic: str, count: int, **kwargs):
    """Start ``produce_counted`` in a thread; returns (thread, acked), ``acked`` filled live.
    An exception in the thread is re-raised by ``join_producer``."""
    import threading
    acked: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def run():
        try:
            produce_counted(client, bootstrap, topic, count, acked=acked, **kwargs)
        except BaseException as exc:       # surfaced by join_producer
            errors.append(exc)
    thread = threading.Thread(target=run, name=f"produce-{client}")
    thread.errors = errors
    thread.start()
    return thread, acked


def join_producer(thread, timeout: float = 120) -> None:
    thread.join(timeout)
    assert not thread.is_alive(), f"the producer did not finish within {timeout} s"
    if thread.errors:
        raise thread.errors[0]


def wait_acknowledged(thread, acked: dict, at_least: int, timeout: float = 60) -> None:
    """Wait until ``at_least`` records are acknowledged, the producer still running."""
    wait_for(lambda: total(acked) >= at_least or not thread.is_alive(), timeout,
             f"{at_least} acknowledged records")
    assert thread.is_alive(), f"the producer ended with {total(acked)} acknowledged, before the fault"


def _produce_confluent(bootstrap, topic, count, partitions, acks, idempotent, pause_every, timeout, acked):
    def report(err, msg):
        if err is None:
            acked.setdefault(msg.partition(), []).append(int(msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent,
                         "linger.ms": 5, "message.timeout.ms": int(timeout * 1000),
                         "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000})
    for i in range(count):
        producer.produce(topic, str(i).encode(), key=str(i % partitions).encode(),
                         partition=i % partitions, on_delivery=report)
        producer.poll(0)
        if pause_every and i % pause_every == pause_every - 1:
            producer.flush(timeout)
    producer.flush(timeout)


def _produce_kafka_python(bootstrap, topic, count, partitions, acks, idempotent, pause_every, timeout, acked):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks=-1 if acks == "all" else int(acks),
                             enable_idempotence=idempotent, linger_ms=5, retry_backoff_ms=100,
                             request_timeout_ms=5000, delivery_timeout_ms=int(timeout * 1000),
                             metadata_max_age_ms=1000)
    try:
        for i in range(count):
            future = producer.send(topic, str(i).encode(), key=str(i % partitions).encode(),
                                   partition=i % partitions)
            future.add_callback(lambda md, v=i: acked.setdefault(md.partition, []).append(v))
            if pause_every and i % pause_every == pause_every - 1:
                producer.flush(timeout)
        producer.flush(timeout)
    finally:
        try:
            producer.close(5)
        except Exception:
            # kafka-python's close() flushes first and, when that times out, raises before it
            # stops its sender thread; stop it, or it keeps retrying for the rest of the session
            producer._sender.force_close()
            raise


async def _produce_aiokafka(bootstrap, topic, count, partitions, acks, idempotent, pause_every, timeout, acked):
    import asyncio

    from aiokafka import AIOKafkaProducer
    # aiokafka expires a batch waiting for a leader after request_timeout_ms (it has no
    # delivery.timeout.ms): give it the whole budget, as a user riding out a failover would
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all" if acks == "all" else int(acks),
                                enable_idempotence=idempotent, linger_ms=5, retry_backoff_ms=100,
                                request_timeout_ms=int(timeout * 1000), metadata_max_age_ms=1000)
    await producer.start()

    async def one(i: int) -> None:
        try:
            md = await (await producer.send(topic, str(i).encode(), key=str(i % partitions).encode(),
                                            partition=i % partitions))
        except Exception:       # not acknowledged: counted as such
            return
        acked.setdefault(md.partition, []).append(i)

    try:
        step = pause_every or count
        for start in range(0, count, step):
            await asyncio.gather(*(one(i) for i in range(start, min(start + step, count))))
    finally:
        await producer.stop()


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> dict[int, list[int]]:
    """Every value in ``topic`` per partition, read from the start by a new group (confluent),
    until ``expected`` records or ``timeout`` seconds; a few more are waited for briefly so
    that duplicates would be seen."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    total = 0
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if total >= expected:
                    break
                continue
            if msg.error() and msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            assert msg.error() is None, msg.error()
            seen[msg.partition()].append(int(msg.value()))
            total += 1
    finally:
        consumer.close()
    return seen


def total(records: dict[int, list[int]]) -> int:
    return sum(len(v) for v in records.values())


def tally(acked: dict[int, list[int]], seen: dict[int, list[int]]) -> dict[str, int]:
    """{"acknowledged", "read", "lost", "duplicates", "out_of_order"}: lost counts acknowledged
    values never read; out_of_order counts partitions whose values are not increasing."""
    return {
        "acknowledged": total(acked),
        "read": total(seen),
        "lost": sum(len(set(v) - set(seen.get(p, []))) for p, v in acked.items()),
        "duplicates": sum(len(v) - len(set(v)) for v in seen.values()),
        "out_of_order": sum(v != sorted(v) for v in seen.values()),
    }
