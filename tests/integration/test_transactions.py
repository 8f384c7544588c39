"""Transactions through confluent-kafka (librdkafka): commit, abort, fencing, exactly-once
consume-transform-produce, a transaction left open, kill -9 in the middle, the timeout."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, partitions: int = 1, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})      # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(30)


def txn_producer(bootstrap: str, transactional_id: str, **conf) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, **conf})
    producer.init_transactions(30)
    return producer


def read(bootstrap: str, topic: str, *, committed: bool, expect: int | None = None, partitions=(0,),
         idle_s: float = 3.0, timeout_s: float = 30.0) -> list[bytes]:
    """Values from the start of ``partitions``: until ``expect`` arrived, else until ``idle_s``
    pass with nothing new (or ``timeout_s``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": name("reader"), "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    values: list[bytes] = []
    deadline, quiet_until = time.monotonic() + timeout_s, time.monotonic() + idle_s
    try:
        while time.monotonic() < deadline and (len(values) < expect if expect is not None
                                               else time.monotonic() < quiet_until):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
            quiet_until = time.monotonic() + idle_s
    finally:
        consumer.close()
    return values


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def send_all(producer: Producer, topic: str, items: list[bytes], partition: int = 0) -> None:
    for v in items:
        producer.produce(topic, v, partition=partition)
    producer.flush(30)


def test_committed_records_are_read_and_aborted_ones_are_not(broker):
    topic = name("txn")
    create(broker.bootstrap, topic)
    producer = txn_producer(broker.bootstrap, name("tid"))
    for label, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        send_all(producer, topic, values(label, 50))
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    assert read(broker.bootstrap, topic, committed=True, expect=100) == values("a", 50) + values("c", 50)
    everything = read(broker.bootstrap, topic, committed=False, expect=150)
    assert everything == values("a", 50) + values("b", 50) + values("c", 50)   # markers never handed out


def test_an_open_transaction_holds_read_committed_readers_at_the_last_stable_offset(broker):
    topic = name("open")
    create(broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    send_all(plain, topic, values("before", 10))
    producer = txn_producer(broker.bootstrap, name("tid"))
    producer.begin_transaction()
    send_all(producer, topic, values("open", 20))
    send_all(plain, topic, values("after", 5))         # behind the open transaction
    assert read(broker.bootstrap, topic, committed=True, idle_s=2) == values("before", 10)
    assert len(read(broker.bootstrap, topic, committed=False, expect=35)) == 35
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("w"),
                         "isolation.level": "read_committed"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    consumer.close()
    assert (low, high) == (0, 10)                      # ListOffsets READ_COMMITTED: the LSO
    producer.commit_transaction(30)
    assert read(broker.bootstrap, topic, committed=True, expect=35) == (
        values("before", 10) + values("open", 20) + values("after", 5))


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    topic, tid = name("fence"), name("tid")
    create(broker.bootstrap, topic)
    first = txn_producer(broker.bootstrap, tid)
    first.begin_transaction()
    send_all(first, topic, values("zombie", 10))
    second = txn_producer(broker.bootstrap, tid)        # aborts the first's open transaction
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(30)
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                           KafkaError.INVALID_PRODUCER_EPOCH)
    second.begin_transaction()
    send_all(second, topic, values("live", 10))
    second.commit_transaction(30)
    assert read(broker.bootstrap, topic, committed=True, expect=10) == values("live", 10)


def test_consume_transform_produce_is_exactly_once_across_an_aborted_batch(broker):
    consume_transform_produce(broker.bootstrap)


def consume_transform_produce(bootstrap: str, replication_factor: int = 1) -> None:
    """300 records through a read_committed consumer and a transactional producer that sends
    its offsets to the transaction; one step aborts and rewinds.  The output must hold each
    record once, in order, and the group's committed offset must be 300."""
    source, sink, group = name("in"), name("out"), name("eos")
    create(bootstrap, source, replication_factor=replication_factor)
    create(bootstrap, sink, replication_factor=replication_factor)
    plain = Producer({"bootstrap.servers": bootstrap})
    send_all(plain, source, values("n", 300))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = txn_producer(bootstrap, name("tid"))
    done, aborted_once, deadline = 0, False, time.monotonic() + 60
    while done < 300 and time.monotonic() < deadline:
        batch = consumer.consume(50, 1.0)
        if not batch:
            continue
        producer.begin_transaction()
        for msg in batch:
            assert msg.error() is None, msg.error()
            producer.produce(sink, msg.value().upper(), partition=0)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if done >= 100 and not aborted_once:             # a failed step: abort, rewind, redo
            producer.abort_transaction(30)
            aborted_once = True
            committed = consumer.committed(consumer.assignment(), 10)
            for tp in committed:
                consumer.seek(tp)
            continue
        producer.commit_transaction(30)
        done += len(batch)
    consumer.close()
    assert aborted_once and done == 300
    assert read(bootstrap, sink, committed=True, expect=300) == [v.upper() for v in values("n", 300)]
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    assert [tp.offset for tp in check.committed([TopicPartition(source, 0)], 10)] == [300]
    check.close()


def test_kill_9_in_the_middle_of_a_transaction_keeps_committed_data_and_aborts_the_rest(fresh_broker):
    b = fresh_broker()
    topic, tid = name("crash"), name("tid")
    create(b.bootstrap, topic)
    producer = txn_producer(b.bootstrap, tid, **{"transaction.timeout.ms": 4000})
    producer.begin_transaction()
    send_all(producer, topic, values("kept", 30))
    producer.commit_transaction(30)
    producer.begin_transaction()
    send_all(producer, topic, values("lost", 30))
    b.kill()
    b.start()
    # the coordinator replays __transaction_state, finds the open transaction and aborts it
    # once it times out; the last stable offset moves past it
    plain = Producer({"bootstrap.servers": b.bootstrap})
    send_all(plain, topic, values("later", 5))
    assert read(b.bootstrap, topic, committed=True, expect=35, timeout_s=40) == (
        values("kept", 30) + values("later", 5))


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(fresh_broker):
    b = fresh_broker()
    topic = name("timeout")
    create(b.bootstrap, topic)
    producer = txn_producer(b.bootstrap, name("tid"), **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    send_all(producer, topic, values("stale", 20))
    time.sleep(4)
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)
    plain = Producer({"bootstrap.servers": b.bootstrap})
    send_all(plain, topic, values("fresh", 5))
    assert read(b.bootstrap, topic, committed=True, expect=5) == values("fresh", 5)


def test_kill_9_during_a_stream_of_commits_keeps_every_transaction_whole(fresh_broker):
    """A producer commits transactions of 10 records (5 per partition) back to back while the
    broker is killed (-9) at some point of one of them: Produce, AddPartitionsToTxn or EndTxn.
    After the restart every transaction whose commit returned is read whole, every transaction
    read is whole (all 10 records or none), and only the one in flight may be added to them."""
    b = fresh_broker()
    topic = name("stream")
    create(b.bootstrap, topic, partitions=2)

    def crash(_transactional_id: str) -> str:
        b.kill()
        b.start()
        return b.bootstrap
    commit_stream_through(b.bootstrap, topic, crash)


def commit_stream_through(bootstrap: str, topic: str, crash, transactions_before: int = 20) -> None:
    """Commit transactions of 10 records to ``topic`` (2 partitions) in a thread; once
    ``transactions_before`` are acknowledged call ``crash(transactional_id)`` (returns the
    bootstrap to use after it), end the dead producer's transaction with a new one of the same id, and check
    with a read_committed reader: nothing acknowledged lost, nothing torn, at most the
    transaction in flight added."""
    import threading

    tid = name("tid")
    committed: list[int] = []
    stop = threading.Event()

    def commits() -> None:
        producer = txn_producer(bootstrap, tid, **{"transaction.timeout.ms": 5000, "message.timeout.ms": 4000})
        i = 0
        try:
            while not stop.is_set():
                producer.begin_transaction()
                for j in range(10):
                    producer.produce(topic, f"t{i}-{j}".encode(), partition=j % 2)
                producer.commit_transaction(5)
                committed.append(i)
                i += 1
        except KafkaException:
            pass                                      # its broker died under it

    worker = threading.Thread(target=commits, daemon=True)
    worker.start()
    deadline = time.monotonic() + 30
    while len(committed) < transactions_before and time.monotonic() < deadline:
        time.sleep(0.05)
    in_flight = len(committed)
    after = crash(tid)
    stop.set()
    worker.join(30)
    acknowledged = list(committed)
    again = txn_producer(after, tid)                 # fences the first producer, ends its transaction
    again.begin_transaction()
    send_all(again, topic, [b"after"])
    again.commit_transaction(30)
    seen = [v.decode() for v in read(after, topic, committed=True, partitions=(0, 1), idle_s=3)]
    by_txn: dict[int, int] = {}
    for v in seen:
        if v != "after":
            txn = int(v[1:v.index("-")])
            by_txn[txn] = by_txn.get(txn, 0) + 1
    lost = [i for i in acknowledged if by_txn.get(i) != 10]
    torn = {i: n for i, n in by_txn.items() if n != 10}
    extra = set(by_txn) - set(acknowledged)
    print(f"\ncommitted {len(acknowledged)} transactions ({in_flight} when the crash began), read "
          f"{len(by_txn)} ({len(seen)} records), lost {len(lost)}, torn {len(torn)}, extra {sorted(extra)}")
    assert "after" in seen
    assert not lost and not torn
    assert len(extra) <= 1 and all(i >= in_flight for i in extra)    # only what was in flight
