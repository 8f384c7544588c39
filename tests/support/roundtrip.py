"""Produce N records with confluent-kafka and read them back in a consumer group: the check a
user makes of a new listener or login (TLS, SASL); and a producer and a consumer kept busy for a
while, for what must survive on open connections (SASL re-authentication)."""
from __future__ import annotations

import collections
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
    got = read(consumer, [], count, 30)
    consumer.close()
    return got


def read(consumer: Consumer, got: list[bytes], count: int, seconds: float, poll_s: float = 0.5) -> list[bytes]:
    """Append the values ``consumer`` reads to ``got`` until it holds ``count`` or ``seconds`` have
    passed; ``got``."""
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(poll_s)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    return got


def produce_while_consuming(config: dict, topic: str, seconds: float, group: str) -> tuple[int, list[bytes], list]:
    """For ``seconds``, produce ``b"0"``, ``b"1"``, ... (acks=all) while a consumer in ``group``
    reads ``topic`` from the beginning, long-polling for 100 ms at most; then flush and read the
    rest (20 s at most).  (records sent, values read, delivery errors); both clients are closed."""
    failed: list = []
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    got: list[bytes] = []
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, b"%d" % sent, on_delivery=lambda err, _m: err and failed.append(err))
        sent += 1
        producer.poll(0)
        msg = consumer.poll(0.02)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    assert producer.flush(30) == 0
    read(consumer, got, sent, 20, poll_s=0.2)
    consumer.close()
    return sent, got, failed


def check_each_once(got: list[bytes], count: int) -> None:
    """Every value ``b"0"`` .. ``b"<count - 1>"`` read exactly once."""
    repeated = [v for v, n in collections.Counter(got).items() if n > 1]
    assert not repeated, f"read more than once: {repeated[:10]}"
    assert sorted(int(v) for v in got) == list(range(count))


def kafka_python_produce_and_consume(options: dict, topic: str, count: int, prefix: bytes) -> list[bytes]:
    """The same with kafka-python; ``options`` are its keyword arguments (bootstrap, security)."""
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(**options)
    for i in range(count):
        producer.send(topic, prefix + b"%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **options)
    got: list[bytes] = []
    try:
        for message in consumer:      # ends 10 s after the last record, or once all were read
            got.append(message.value)
            if len(got) == count:
                break
        return got
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


def read_messages(bootstrap: str, topic: str, count: int, seconds: float = 30, **config) -> list:
    """confluent-kafka Messages of ``topic`` from the beginning (a group of its own, ``config``
    added), until ``count`` were read or ``seconds`` passed; the consumer is closed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
    consumer.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + seconds
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg)
    finally:
        consumer.close()
    return got
