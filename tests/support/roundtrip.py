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


def kafka_python_produce_and_consume(options: dict, topic: str, count: int, prefix: bytes) -> list[bytes]:
    """The same with kafka-python; ``options`` are its keyword arguments (bootstrap, security)."""
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(**options)
    for i in range(count):
        producer.send(topic, prefix + b"%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **options)
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


def aiokafka_produce_and_consume(options: dict, topic: str, count: int, prefix: bytes) -> list[bytes]:
    """The same with aiokafka (send_and_wait each record); ``options`` are its keyword arguments."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def scenario():
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            for i in range(count):
                await producer.send_and_wait(topic, prefix + b"%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            got: list[bytes] = []
            while len(got) < count:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await consumer.stop()
    return asyncio.run(scenario())
