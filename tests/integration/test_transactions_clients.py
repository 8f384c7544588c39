"""Transactions through kafka-python and aiokafka, and read_committed readers of all three Python
clients (confluent-kafka, kafka-python, aiokafka) on one topic that holds committed, aborted,
interleaved and open transactions.  confluent-kafka's own transactional tests are in
test_transactions.py; the helpers for it come from there."""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import ProducerFenced
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import ProducerFencedError

from tests.integration.test_transactions import create, name, txn_producer, values

# (offset, value) pairs: what a reader handed to the application, in the order it was handed.
Seen = list[tuple[int, bytes]]
PARTITIONS = (0, 1)


# ---- readers, one per client: from the start, until idle_s pass with nothing new after the first record ----

def read_confluent(bootstrap: str, topic: str, partition: int, *, committed: bool,
                   idle_s: float = 2.0, timeout_s: float = 30.0) -> Seen:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": name("ck"), "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([CkTopicPartition(topic, partition, OFFSET_BEGINNING)])
    seen: Seen = []
    deadline, quiet_until = time.monotonic() + timeout_s, time.monotonic() + idle_s
    try:
        while time.monotonic() < deadline and (not seen or time.monotonic() < quiet_until):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            seen.append((msg.offset(), msg.value()))
            quiet_until = time.monotonic() + idle_s
    finally:
        consumer.close()
    return seen


def read_kafka_python(bootstrap: str, topic: str, partition: int, *, committed: bool,
                      idle_s: float = 2.0, timeout_s: float = 30.0) -> Seen:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level="read_committed" if committed else "read_uncommitted")
    tp = KpTopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    seen: Seen = []
    deadline, quiet_until = time.monotonic() + timeout_s, time.monotonic() + idle_s
    try:
        while time.monotonic() < deadline and (not seen or time.monotonic() < quiet_until):
            for records in consumer.poll(timeout_ms=200).values():
                seen.extend((r.offset, r.value) for r in records)
                quiet_until = time.monotonic() + idle_s
    finally:
        consumer.close()
    return seen


def read_aiokafka(bootstrap: str, topic: str, partition: int, *, committed: bool,
                  idle_s: float = 2.0, timeout_s: float = 30.0) -> Seen:
    async def main() -> Seen:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    isolation_level="read_committed" if committed else "read_uncommitted")
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, partition)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            seen: Seen = []
            deadline, quiet_until = time.monotonic() + timeout_s, time.monotonic() + idle_s
            while time.monotonic() < deadline and (not seen or time.monotonic() < quiet_until):
                batch = await consumer.getmany(tp, timeout_ms=200)
                if batch.get(tp):
                    seen.extend((r.offset, r.value) for r in batch[tp])
                    quiet_until = time.monotonic() + idle_s
            return seen
        finally:
            await consumer.stop()

    return asyncio.run(main())


READERS = {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka}


def committed_end_offsets(bootstrap: str, topic: str, partition: int) -> dict[str, int]:
    """The end offset a read_committed reader of each client is told (ListOffsets READ_COMMITTED)."""
    ck = Consumer({"bootstrap.servers": bootstrap, "group.id": name("w"), "isolation.level": "read_committed"})
    _, ck_end = ck.get_watermark_offsets(CkTopicPartition(topic, partition), timeout=10, cached=False)
    ck.close()
    kp = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    kp_end = kp.end_offsets([KpTopicPartition(topic, partition)])[KpTopicPartition(topic, partition)]
    kp.close()

    async def aio_end() -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, partition)
            return (await consumer.end_offsets([tp]))[tp]
        finally:
            await consumer.stop()

    return {"confluent-kafka": ck_end, "kafka-python": kp_end, "aiokafka": asyncio.run(aio_end())}


# ---- a topic with every kind of transaction, written by confluent-kafka ----

class MixedTopic:
    """Per partition, in log order:

    p0 x5 (plain) | a x20 committed | b x20 aborted | c (aborted) and d (committed) x10 each,
    alternating record by record from two transactional ids | p1 x5 (plain) |
    open x10, a transaction left open | e x10 committed after it | p2 x5 (plain)

    read_committed readers stop at the open transaction: p0, a, d, p1.
    """

    COMMITTED_BEFORE_OPEN = ("p0", "a", "d", "p1")

    def __init__(self, bootstrap: str):
        self.bootstrap, self.topic = bootstrap, name("mixed")
        create(bootstrap, self.topic, partitions=len(PARTITIONS))
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        first, second = (txn_producer(bootstrap, name("tid"), **{"linger.ms": 0}) for _ in range(2))
        self.open = txn_producer(bootstrap, name("tid"), **{"linger.ms": 0, "transaction.timeout.ms": 600_000})
        self.labels: list[str] = []                     # label of each record, in log order

        self._send(plain, "p0", 5)
        first.begin_transaction()
        self._send(first, "a", 20)
        first.commit_transaction(30)
        first.begin_transaction()
        self._send(first, "b", 20)
        first.abort_transaction(30)
        first.begin_transaction()
        second.begin_transaction()
        for i in range(10):
            self._send(first, "c", 1, start=i)
            self._send(second, "d", 1, start=i)
        first.abort_transaction(30)
        second.commit_transaction(30)
        self._send(plain, "p1", 5)
        self.open.begin_transaction()
        self._send(self.open, "open", 10)
        first.begin_transaction()
        self._send(first, "e", 10)
        first.commit_transaction(30)
        self._send(plain, "p2", 5)

    def _send(self, producer: Producer, label: str, n: int, start: int = 0) -> None:
        for i in range(start, start + n):
            for partition in PARTITIONS:
                producer.produce(self.topic, f"{label}-{i}".encode(), partition=partition)
            producer.flush(30)                      # one record at a time keeps the interleaving exact
            self.labels.append(label)

    def expected(self, labels) -> list[bytes]:
        counts: dict[str, int] = {}
        out = []
        for label in self.labels:
            if label in labels:
                out.append(f"{label}-{counts.get(label, 0)}".encode())
            counts[label] = counts.get(label, 0) + 1
        return out

    def all_values(self) -> list[bytes]:
        return self.expected(set(self.labels))

    @property
    def last_stable_offset(self) -> int:
        """The open transaction's first offset: the markers of a, b, c and d precede it."""
        return self.labels.index("open") + 4

    @property
    def log_end_offset(self) -> int:
        """Every record and five markers (a, b, c, d, e); the open transaction has none yet."""
        return len(self.labels) + 5


@pytest.fixture(scope="module")
def mixed(broker):
    topic = MixedTopic(broker.bootstrap)
    yield topic
    topic.open.abort_transaction(30)


def assert_offsets_increase(seen: Seen) -> None:
    offsets = [o for o, _ in seen]
    assert offsets == sorted(set(offsets)), offsets


# ---- readers of all three clients on the mixed topic ----

@pytest.mark.parametrize("partition", PARTITIONS)
def test_read_committed_readers_of_all_three_clients_see_the_same_committed_records(mixed, partition):
    seen = {client: reader(mixed.bootstrap, mixed.topic, partition, committed=True)
            for client, reader in READERS.items()}
    want = mixed.expected(MixedTopic.COMMITTED_BEFORE_OPEN)
    for client, got in seen.items():
        assert [v for _, v in got] == want, client
        assert_offsets_increase(got)
    assert seen["kafka-python"] == seen["confluent-kafka"] == seen["aiokafka"]     # offsets too
    assert committed_end_offsets(mixed.bootstrap, mixed.topic, partition) == dict.fromkeys(
        READERS, mixed.last_stable_offset)


def test_read_committed_consumers_report_the_last_stable_offset_from_fetch(mixed):
    """What a lag monitor reads: after draining, the position is the last stable offset and the
    high watermark is the log end, past the open transaction."""
    lso, log_end = mixed.last_stable_offset, mixed.log_end_offset
    kp = KafkaConsumer(bootstrap_servers=mixed.bootstrap, group_id=None, enable_auto_commit=False,
                       isolation_level="read_committed")
    tp = KpTopicPartition(mixed.topic, 0)
    kp.assign([tp])
    kp.seek_to_beginning(tp)
    deadline = time.monotonic() + 30
    while kp.position(tp) < lso and time.monotonic() < deadline:
        kp.poll(timeout_ms=200)
    assert (kp.position(tp), kp.highwater(tp)) == (lso, log_end)
    kp.close()

    async def aio() -> tuple[int, int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=mixed.bootstrap, enable_auto_commit=False,
                                    isolation_level="read_committed")
        await consumer.start()
        try:
            tp = AioTopicPartition(mixed.topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            async with asyncio.timeout(30):
                while await consumer.position(tp) < lso:
                    await consumer.getmany(tp, timeout_ms=200)
            return await consumer.position(tp), consumer.last_stable_offset(tp), consumer.highwater(tp)
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == (lso, lso, log_end)


@pytest.mark.parametrize("client", READERS)
def test_read_uncommitted_readers_see_aborted_and_open_records_but_never_a_marker(mixed, client):
    got = READERS[client](mixed.bootstrap, mixed.topic, 0, committed=False)
    assert [v for _, v in got] == mixed.all_values()
    assert_offsets_increase(got)
    assert got[-1][0] == mixed.log_end_offset - 1      # the offsets skip the five markers


def committed_everywhere(bootstrap: str, topic: str) -> dict[str, list[bytes]]:
    """Partition 0's values as each client's read_committed reader sees them."""
    return {client: [v for _, v in reader(bootstrap, topic, 0, committed=True)]
            for client, reader in READERS.items()}


def uncommitted(bootstrap: str, topic: str) -> list[bytes]:
    return [v for _, v in read_kafka_python(bootstrap, topic, 0, committed=False)]


def fill(bootstrap: str, topic: str, items: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in items:
        producer.produce(topic, v, partition=0)
    producer.flush(30)


# ---- kafka-python's transactional producer ----

def kp_producer(bootstrap: str, transactional_id: str) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5)
    producer.init_transactions()
    return producer


def kp_send(producer: KafkaProducer, topic: str, items: list[bytes]) -> None:
    """Sends and waits for every acknowledgement, so an aborted transaction's records are in the
    log and a reader that hides them hides them because of the abort."""
    futures = [producer.send(topic, v, partition=0) for v in items]
    producer.flush()
    for f in futures:
        f.get(timeout=30)


def test_kafka_python_commit_is_read_and_abort_is_not(broker):
    topic = name("kp-txn")
    create(broker.bootstrap, topic)
    producer = kp_producer(broker.bootstrap, name("tid"))
    for label, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        kp_send(producer, topic, values(label, 50))
        (producer.commit_transaction if commit else producer.abort_transaction)()
    producer.close()
    want = values("a", 50) + values("c", 50)
    assert committed_everywhere(broker.bootstrap, topic) == dict.fromkeys(READERS, want)
    assert uncommitted(broker.bootstrap, topic) == values("a", 50) + values("b", 50) + values("c", 50)


def test_kafka_python_second_producer_with_the_same_id_fences_the_first(broker):
    topic, tid = name("kp-fence"), name("tid")
    create(broker.bootstrap, topic)
    first = kp_producer(broker.bootstrap, tid)
    first.begin_transaction()
    kp_send(first, topic, values("zombie", 10))
    second = kp_producer(broker.bootstrap, tid)        # aborts the first's open transaction
    with pytest.raises(ProducerFencedError):
        first.commit_transaction()
    first.close()
    second.begin_transaction()
    kp_send(second, topic, values("live", 10))
    second.commit_transaction()
    second.close()
    assert committed_everywhere(broker.bootstrap, topic) == dict.fromkeys(READERS, values("live", 10))
    assert uncommitted(broker.bootstrap, topic) == values("zombie", 10) + values("live", 10)


def test_kafka_python_consume_transform_produce_is_exactly_once_across_an_aborted_batch(broker):
    source, sink, group = name("kp-in"), name("kp-out"), name("kp-eos")
    create(broker.bootstrap, source)
    create(broker.bootstrap, sink)
    fill(broker.bootstrap, source, values("n", 300))
    consumer = KafkaConsumer(source, bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    producer = kp_producer(broker.bootstrap, name("tid"))
    done, aborted, deadline = 0, 0, time.monotonic() + 60
    while done < 300 and time.monotonic() < deadline:
        polled = consumer.poll(timeout_ms=1000, max_records=50)
        if not polled:
            continue
        batch = [r for records in polled.values() for r in records]
        producer.begin_transaction()
        kp_send(producer, sink, [r.value.upper() for r in batch])
        producer.send_offsets_to_transaction(
            {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in polled}, consumer.group_metadata())
        if done >= 100 and not aborted:                # a failed step: abort, rewind, redo
            producer.abort_transaction()
            aborted = len(batch)
            for tp in polled:
                consumer.seek(tp, consumer.committed(tp))
            continue
        producer.commit_transaction()
        done += len(batch)
    consumer.close()
    producer.close()
    assert aborted and done == 300
    want = [v.upper() for v in values("n", 300)]
    assert committed_everywhere(broker.bootstrap, sink) == dict.fromkeys(READERS, want)
    assert len(uncommitted(broker.bootstrap, sink)) == 300 + aborted     # the aborted output is there, hidden
    check = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    assert check.committed(KpTopicPartition(source, 0)) == 300
    check.close()


# ---- aiokafka's transactional producer ----

class Abort(Exception):
    """Raised inside ``producer.transaction()`` to make aiokafka abort it."""


async def aio_producer(bootstrap: str, transactional_id: str) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5)
    await producer.start()                              # InitProducerId with the transactional id
    return producer


async def aio_send(producer: AIOKafkaProducer, topic: str, items: list[bytes]) -> None:
    """Sends and waits for every acknowledgement (see kp_send)."""
    futures = [await producer.send(topic, v, partition=0) for v in items]
    await asyncio.gather(*futures)


def test_aiokafka_commit_is_read_and_abort_is_not(broker):
    topic = name("aio-txn")
    create(broker.bootstrap, topic)

    async def main():
        producer = await aio_producer(broker.bootstrap, name("tid"))
        try:
            async with producer.transaction():
                await aio_send(producer, topic, values("a", 50))
            with pytest.raises(Abort):
                async with producer.transaction():
                    await aio_send(producer, topic, values("b", 50))
                    raise Abort
            async with producer.transaction():
                await aio_send(producer, topic, values("c", 50))
        finally:
            await producer.stop()

    asyncio.run(main())
    want = values("a", 50) + values("c", 50)
    assert committed_everywhere(broker.bootstrap, topic) == dict.fromkeys(READERS, want)
    assert uncommitted(broker.bootstrap, topic) == values("a", 50) + values("b", 50) + values("c", 50)


def test_aiokafka_second_producer_with_the_same_id_fences_the_first(broker):
    topic, tid = name("aio-fence"), name("tid")
    create(broker.bootstrap, topic)

    async def main():
        first = await aio_producer(broker.bootstrap, tid)
        try:
            await first.begin_transaction()
            await aio_send(first, topic, values("zombie", 10))
            second = await aio_producer(broker.bootstrap, tid)   # aborts the first's open transaction
            try:
                with pytest.raises(ProducerFenced):
                    await first.commit_transaction()
                async with second.transaction():
                    await aio_send(second, topic, values("live", 10))
            finally:
                await second.stop()
        finally:
            await first.stop()

    asyncio.run(main())
    assert committed_everywhere(broker.bootstrap, topic) == dict.fromkeys(READERS, values("live", 10))
    assert uncommitted(broker.bootstrap, topic) == values("zombie", 10) + values("live", 10)


def test_aiokafka_consume_transform_produce_is_exactly_once_across_an_aborted_batch(broker):
    source, sink, group = name("aio-in"), name("aio-out"), name("aio-eos")
    create(broker.bootstrap, source)
    create(broker.bootstrap, sink)
    fill(broker.bootstrap, source, values("n", 300))
    tp = AioTopicPartition(source, 0)

    async def main() -> tuple[int, int]:
        consumer = AIOKafkaConsumer(source, bootstrap_servers=broker.bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    isolation_level="read_committed")
        producer = await aio_producer(broker.bootstrap, name("tid"))
        await consumer.start()
        done, aborted = 0, 0
        try:
            async with asyncio.timeout(60):
                while done < 300:
                    batch = (await consumer.getmany(tp, timeout_ms=1000, max_records=50)).get(tp, [])
                    if not batch:
                        continue
                    await producer.begin_transaction()
                    await aio_send(producer, sink, [r.value.upper() for r in batch])
                    await producer.send_offsets_to_transaction({tp: await consumer.position(tp)}, group)
                    if done >= 100 and not aborted:        # a failed step: abort, rewind, redo
                        await producer.abort_transaction()
                        aborted = len(batch)
                        consumer.seek(tp, await consumer.committed(tp))
                        continue
                    await producer.commit_transaction()
                    done += len(batch)
        finally:
            await consumer.stop()
            await producer.stop()
        return done, aborted

    done, aborted = asyncio.run(main())
    assert aborted and done == 300
    want = [v.upper() for v in values("n", 300)]
    assert committed_everywhere(broker.bootstrap, sink) == dict.fromkeys(READERS, want)
    assert len(uncommitted(broker.bootstrap, sink)) == 300 + aborted
    check = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    assert check.committed(KpTopicPartition(source, 0)) == 300
    check.close()


def test_read_committed_readers_move_past_an_open_transaction_once_it_commits(broker):
    mixed = MixedTopic(broker.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level="read_committed")
    tp = KpTopicPartition(mixed.topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)

    def poll_until_quiet(idle_s: float = 2.0) -> list[bytes]:
        got, quiet_until, deadline = [], time.monotonic() + idle_s, time.monotonic() + 30
        while time.monotonic() < deadline and (not got or time.monotonic() < quiet_until):
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
                quiet_until = time.monotonic() + idle_s
        return got

    try:
        assert poll_until_quiet() == mixed.expected(MixedTopic.COMMITTED_BEFORE_OPEN)
        mixed.open.commit_transaction(30)
        assert poll_until_quiet() == mixed.expected(("open", "e", "p2"))   # the same consumer, not re-sought
    finally:
        consumer.close()
    committed = mixed.expected(("p0", "a", "d", "p1", "open", "e", "p2"))
    for client, reader in READERS.items():
        assert [v for _, v in reader(broker.bootstrap, mixed.topic, 1, committed=True)] == committed, client
    # one more marker, the open transaction's commit
    assert committed_end_offsets(broker.bootstrap, mixed.topic, 1) == dict.fromkeys(READERS, mixed.log_end_offset + 1)
