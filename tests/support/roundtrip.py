"""Produce N records with confluent-kafka and read them back in a consumer group: the check a
user makes of a new listener or login (TLS, SASL)."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer


def produce_and_consume(config: dict, topic: str, count: int, prefix: bytes) -> list[bytes]:
    """Produce ``prefix + i`` for i < count (acks=all) with ``config`` (bootstrap and security
    settings), then consume the topic from the beginning in a group of its own; the values
    read within 30 s, in order."""
    producer = Producer({"acks": "all", **config})
    for i in range(count):
        producer.produce(topic, prefix + b"%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"group.id": f"g-{topic}", "auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got
