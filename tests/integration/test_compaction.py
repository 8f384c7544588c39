"""Compacted topics (cleanup.policy=compact) as stock clients see them.

Every test writes keyed records through a stock producer, keeps the offsets the
producer's acknowledgements gave, lets the broker's log cleaner run, and checks
what a user checks: the records a consumer reads back (confluent-kafka,
kafka-python, aiokafka), their offsets, the earliest/latest offsets of
ListOffsets.  The expected read-back after a clean is computed from the
acknowledgements alone: the latest record of each key, at the offset the
producer was told, in offset order.

Topics use ``segment.bytes=1024`` so segments roll every few records, and every
test ends its writes with records of unique keys ("filler") so that the
duplicates sit in closed segments: the active segment is never cleaned.  The
broker polls for cleanable logs every 100 ms (``log.cleaner.backoff.ms``), and
tests wait for the read-back with a bounded poll loop that fails with counts of
what was expected, read, lost and left uncleaned.

The kill -9 tests (a crash at each step of the cleaner's segment swap, and a
restart after many offset commits) are in test_compaction_faults.py and reuse
the helpers here.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Callable, Iterable

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import InvalidRecordError

import kwire.testing

TIMEOUT = 15            # one client call
CLEAN_TIMEOUT = 30      # waiting for the cleaner to produce the expected read-back
INVALID_RECORD = 87

# Broker keys for every test here: a cleaner that looks for work every 100 ms, retention every 300 ms.
CLEANER_PROPS = {"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "300"}
# Topic keys of a compacted topic whose segments roll every few records and that is cleaned at once.
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}

# One record as (offset, key, value); value None is a tombstone.
Rec = tuple[int, bytes, "bytes | None"]


# ---- bookkeeping of what was acknowledged ----

class Acked:
    """The records a producer's acknowledgements reported, by offset."""

    def __init__(self) -> None:
        self.by_offset: dict[int, tuple[bytes, bytes | None]] = {}

    def add(self, offset: int, key: bytes, value: bytes | None) -> None:
        assert offset >= 0, f"acknowledged with offset {offset}"
        assert offset not in self.by_offset, f"offset {offset} acknowledged twice"
        self.by_offset[offset] = (key, value)

    def all(self) -> list[Rec]:
        return [(o, k, v) for o, (k, v) in sorted(self.by_offset.items())]

    def latest(self, *, tombstones: bool = True, keys: Callable[[bytes], bool] | None = None) -> list[Rec]:
        """The latest record of each key (what a clean keeps), in offset order; ``tombstones=False``
        drops keys whose latest record is a tombstone (what a clean past delete.retention.ms keeps)."""
        last: dict[bytes, Rec] = {}
        for offset, (key, value) in sorted(self.by_offset.items()):
            last[key] = (offset, key, value)
        out = sorted(last.values())
        if not tombstones:
            out = [r for r in out if r[2] is not None]
        if keys is not None:
            out = [r for r in out if keys(r[1])]
        return out

    def __len__(self) -> int:
        return len(self.by_offset)


def difference(expected: list[Rec], got: list[Rec]) -> str:
    """Counts for an assertion message: expected, read, lost (expected, not read), not cleaned
    (read, not expected), and whether the read-back is in offset order."""
    want, have = set(expected), set(got)
    lost, extra = sorted(want - have), sorted(have - want)
    ordered = [r[0] for r in got] == sorted(r[0] for r in got)
    return (f"expected {len(expected)} records, read {len(got)}; {len(lost)} expected but not read "
            f"(lost) e.g. {lost[:4]}; {len(extra)} read but not expected (not cleaned, or wrong offset/value) "
            f"e.g. {extra[:4]}; {'in' if ordered else 'NOT in'} offset order")


def key_value(prefix: str, i: int, label: str, pad: int = 40) -> tuple[bytes, bytes]:
    return f"{prefix}{i}".encode(), f"{prefix}{i}={label}:".encode().ljust(pad, b".")


# ---- admin ----

def topic_name(prefix: str = "cmp") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})        # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1, config={k: str(v) for k, v in configs.items()})],
                        operation_timeout=10)[name].result(TIMEOUT)
    return name


def set_topic_configs(bootstrap: str, name: str, **configs) -> None:
    """IncrementalAlterConfigs SET of each key, applied to the live topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(earliest, latest) from ListOffsets, as confluent-kafka reports them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(CkTopicPartition(topic, partition), timeout=TIMEOUT, cached=False)
    finally:
        c.close()


# ---- producing ----

def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes | None]], acked: Acked, *,
            timestamp: int = 0, one_per_batch: bool = True, **conf) -> list[int]:
    """Send keyed records to partition 0 through confluent-kafka (acks=all), record each
    acknowledgement in ``acked`` and return the offsets in send order.  ``one_per_batch`` puts
    every record in a batch of its own, so segment.bytes rolls segments at predictable points."""
    records = list(records)
    errors: list = []
    offsets: dict[int, int] = {}
    batching = {"linger.ms": 0, "batch.num.messages": 1} if one_per_batch else {"linger.ms": 5}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000,
                         **batching, **conf})

    def report(i, err, msg):
        if err is not None:
            errors.append(err)
        else:
            offsets[i] = msg.offset()
            acked.add(msg.offset(), msg.key(), msg.value())

    for i, (key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, partition=0, timestamp=timestamp,
                         on_delivery=lambda err, msg, i=i: report(i, err, msg))
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "records left undelivered"
    assert not errors, f"{len(errors)} of {len(records)} records refused: {errors[:3]}"
    return [offsets[i] for i in range(len(records))]


def fill(bootstrap: str, topic: str, acked: Acked, n: int = 20, timestamp: int = 0) -> None:
    """Records of unique keys after the ones under test: they roll the segments under test out of
    the active segment (which is never cleaned) and are themselves the latest of their keys."""
    tag = uuid.uuid4().hex[:6]
    produce(bootstrap, topic, [key_value(f"fill-{tag}-", i, "f") for i in range(n)], acked, timestamp=timestamp)


# ---- reading back, one reader per client: from an offset to the end of the partition ----

def read_confluent(bootstrap: str, topic: str, start: int = OFFSET_BEGINNING, *, committed: bool = False,
                   small_fetches: bool = False, timeout: float = 20) -> list[Rec]:
    """Every record from ``start`` until the partition's end (librdkafka's partition-EOF event).
    Fails, with what was read, if the end is not reached within ``timeout`` s: a consumer stuck
    at an offset."""
    conf = {"bootstrap.servers": bootstrap, "group.id": topic_name("reader"), "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 20,
            "isolation.level": "read_committed" if committed else "read_uncommitted"}
    if small_fetches:       # each Fetch answers with one batch (a broker always sends at least one)
        conf.update({"max.partition.fetch.bytes": 1, "fetch.max.bytes": 1024, "message.max.bytes": 1000})
    consumer = Consumer(conf)
    consumer.assign([CkTopicPartition(topic, 0, start)])
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"confluent-kafka read error after {len(out)} records: {msg.error()}")
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"confluent-kafka did not reach the end of {topic} from offset {start} within "
                         f"{timeout} s: read {len(out)} records, last {out[-1:]}, watermarks "
                         f"{watermarks(bootstrap, topic)}")


def read_kafka_python(bootstrap: str, topic: str, start: int | None = None, *, committed: bool = False,
                      small_fetches: bool = False, timeout: float = 20) -> list[Rec]:
    """Every record from ``start`` (None: the beginning) until the consumer's position reaches the
    end offset; fails if it does not within ``timeout`` s (a consumer stuck at an offset)."""
    conf = {"max_partition_fetch_bytes": 1, "fetch_max_bytes": 1} if small_fetches else {}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level="read_committed" if committed else "read_uncommitted", **conf)
    tp = KpTopicPartition(topic, 0)
    out: list[Rec] = []
    try:
        consumer.assign([tp])
        if start is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"kafka-python did not reach the end offset {end} of {topic} from "
                                     f"{start} within {timeout} s: stuck at position {consumer.position(tp)} "
                                     f"after {len(out)} records, last {out[-1:]}")
            for records in consumer.poll(timeout_ms=200).values():
                out.extend((r.offset, r.key, r.value) for r in records)
    finally:
        consumer.close()
    return out


def read_aiokafka(bootstrap: str, topic: str, *, timeout: float = 20) -> list[Rec]:
    """Every record from the beginning until the consumer's position reaches the end offset."""
    async def main() -> list[Rec]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        out: list[Rec] = []
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            deadline = time.monotonic() + timeout
            while await consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise AssertionError(f"aiokafka did not reach the end offset {end} of {topic} within "
                                         f"{timeout} s: stuck at {await consumer.position(tp)} after "
                                         f"{len(out)} records")
                batch = await consumer.getmany(tp, timeout_ms=200)
                out.extend((r.offset, r.key, r.value) for r in batch.get(tp, []))
            return out
        finally:
            await consumer.stop()

    return asyncio.run(main())


def wait_read_back(bootstrap: str, topic: str, expected: list[Rec], *, what: str,
                   timeout: float = CLEAN_TIMEOUT, nudge: Callable[[], None] | None = None,
                   committed: bool = False) -> list[Rec]:
    """Read the partition (confluent-kafka) until it holds exactly ``expected``; returns it.
    ``nudge`` runs between attempts (e.g. more traffic).  Fails after ``timeout`` s with counts."""
    deadline = time.monotonic() + timeout
    while True:
        got = read_confluent(bootstrap, topic, committed=committed)
        if got == expected:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout} s: {difference(expected, got)}")
        if nudge is not None:
            nudge()
        time.sleep(0.3)


def assert_all_clients_read(bootstrap: str, topic: str, expected: list[Rec], *, aiokafka: bool = True,
                            committed: bool = False) -> None:
    readers = {"confluent-kafka": lambda: read_confluent(bootstrap, topic, committed=committed),
               "kafka-python": lambda: read_kafka_python(bootstrap, topic, committed=committed)}
    if aiokafka and not committed:
        readers["aiokafka"] = lambda: read_aiokafka(bootstrap, topic)
    for client, read in readers.items():
        got = read()
        assert got == expected, f"{client} after the clean: {difference(expected, got)}"


@pytest.fixture(scope="module")
def cleaner_broker():
    """One in-process broker for this module: a cleaner that polls every 100 ms."""
    with kwire.testing.broker(properties=CLEANER_PROPS) as b:
        yield b


def now_ms() -> int:
    return int(time.time() * 1000)


# ---- 1. latest value per key, original offsets ----

def test_latest_value_of_each_key_is_read_back_by_every_client_at_its_original_offset(cleaner_broker, caplog):
    caplog.set_level(logging.INFO, logger="kwire.log.cleaner")
    bootstrap = cleaner_broker.bootstrap
    topic = create_topic(bootstrap, topic_name(), **COMPACT)
    acked = Acked()
    # 30 keys written 5 times, the rounds interleaved so every segment holds superseded records
    for rnd in range(5):
        produce(bootstrap, topic, [key_value("k", i, f"r{rnd}") for i in range(30)], acked)
    fill(bootstrap, topic, acked)
    total = len(acked)
    expected = acked.latest()
    assert len(expected) == 30 + 20
    wait_read_back(bootstrap, topic, expected, what="latest value of each key, original offsets")
    assert_all_clients_read(bootstrap, topic, expected)
    # the offsets the producer was told are the offsets read back: each key's round-4 offset
    last_round = {k: o for o, (k, v) in acked.by_offset.items() if v is not None and b"=r4:" in v}
    assert {k: o for o, k, _ in expected if k.startswith(b"k")} == last_round
    # compaction leaves the partition's range alone: earliest 0, latest after the last record
    assert watermarks(bootstrap, topic) == (0, total)
    # the operator's view: one INFO line per clean
    assert any(r.name == "kwire.log.cleaner" and r.getMessage().startswith(f"cleaned {topic}-0:")
               for r in caplog.records), "no 'cleaned <topic>-<partition>:' line logged"
    # and the log takes new records after the last offset
    more = produce(bootstrap, topic, [key_value("k", 0, "after")], acked)
    assert more == [total]


def test_a_small_dedupe_buffer_and_two_throttled_cleaner_threads_still_keep_only_the_latest_values(caplog):
    """log.cleaner.dedupe.buffer.size room for about 8 keys per thread: each clean covers only part
    of the dirty log, and further cleans must finish the job; two threads share two topics, and
    never clean the same log at once (no failed clean is logged, no swap file is left)."""
    caplog.set_level(logging.INFO, logger="kwire.log.cleaner")
    props = {**CLEANER_PROPS, "log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "2300",
             "log.cleaner.io.max.bytes.per.second": "500000"}
    with kwire.testing.broker(properties=props) as b:
        topics = [create_topic(b.bootstrap, topic_name("small-map"), **COMPACT) for _ in range(2)]
        acked = {t: Acked() for t in topics}
        for rnd in range(4):
            for t in topics:
                produce(b.bootstrap, t, [key_value("k", i, f"r{rnd}") for i in range(40)], acked[t])
        for t in topics:
            fill(b.bootstrap, t, acked[t])
        for t in topics:
            expected = acked[t].latest()
            wait_read_back(b.bootstrap, t, expected, what="a dedupe buffer smaller than the keys, in passes")
            assert read_kafka_python(b.bootstrap, t) == expected
        failures = [r.getMessage() for r in caplog.records
                    if r.name == "kwire.log.cleaner" and r.levelno >= logging.WARNING]
        assert not failures, f"{len(failures)} cleaner warnings, e.g. {failures[:2]}"
        for t in topics:
            leftovers = [f for f in os.listdir(os.path.join(b.data_dir, f"{t}-0"))
                         if f.endswith((".cleaned", ".swap", ".swapend", ".tmp"))]
            assert not leftovers, f"{t}: files of a swap left behind: {leftovers}"


# ---- 2. tombstones ----

def test_cleaner_threads_set_on_the_running_broker_start_cleaning():
    """log.cleaner.threads=0 at start-up: nothing is cleaned; a dynamic broker config of one
    thread (IncrementalAlterConfigs on the broker, no restart) starts the cleaner."""
    with kwire.testing.broker(properties={"log.cleaner.threads": 0, "log.cleaner.backoff.ms": 100}) as b:
        topic = create_topic(b.bootstrap, topic_name(), **COMPACT)
        acked = Acked()
        for rnd in range(3):
            produce(b.bootstrap, topic, [key_value("k", i, f"r{rnd}") for i in range(20)], acked)
        fill(b.bootstrap, topic, acked)
        time.sleep(1)                               # ten back-offs: a running cleaner would have cleaned
        assert len(read_confluent(b.bootstrap, topic)) == len(acked) == 80
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("log.cleaner.threads", "1", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(TIMEOUT)
        wait_read_back(b.bootstrap, topic, acked.latest(), what="the latest value of each key")


def test_tombstones_remove_keys_and_go_after_delete_retention_ms(cleaner_broker):
    bootstrap = cleaner_broker.bootstrap
    gone = create_topic(bootstrap, topic_name("tomb0"), **COMPACT, **{"delete.retention.ms": 0})
    kept = create_topic(bootstrap, topic_name("tombday"), **COMPACT, **{"delete.retention.ms": 86400000})
    acked = {gone: Acked(), kept: Acked()}
    for topic in (gone, kept):
        produce(bootstrap, topic, [key_value("t", i, "v1") for i in range(20)], acked[topic])
        produce(bootstrap, topic, [key_value("t", i, "v2") for i in range(20)], acked[topic])
        produce(bootstrap, topic, [(f"t{i}".encode(), None) for i in range(10)], acked[topic])   # delete t0..t9
        fill(bootstrap, topic, acked[topic])

    # with delete.retention.ms=0 the deleted keys vanish entirely, old values and tombstones, with
    # no further writes needed
    expected = acked[gone].latest(tombstones=False)
    got = wait_read_back(bootstrap, gone, expected, what="delete.retention.ms=0: deleted keys and tombstones gone")
    assert not [r for r in got if r[1] in {f"t{i}".encode() for i in range(10)}]
    assert read_kafka_python(bootstrap, gone) == expected

    # with a day of delete.retention.ms the old values are gone but each tombstone is still read
    expected = acked[kept].latest(tombstones=True)
    got = wait_read_back(bootstrap, kept, expected, what="delete.retention.ms=1 day: tombstones kept")
    tombstones = [(o, k) for o, k, v in got if v is None]
    assert [k for _, k in tombstones] == [f"t{i}".encode() for i in range(10)]
    assert read_kafka_python(bootstrap, kept) == expected
    # the tombstones stay through further cleans (more writes make the log dirty again)
    fill(bootstrap, kept, acked[kept], n=10)
    expected = acked[kept].latest(tombstones=True)
    got = wait_read_back(bootstrap, kept, expected, what="tombstones kept after more cleans")
    assert [(o, k) for o, k, v in got if v is None] == tombstones


# ---- 3. min.compaction.lag.ms and max.compaction.lag.ms ----

def test_min_compaction_lag_keeps_recent_duplicates(cleaner_broker):
    bootstrap = cleaner_broker.bootstrap
    topic = create_topic(bootstrap, topic_name("minlag"), **COMPACT, **{"min.compaction.lag.ms": 600000})
    acked = Acked()
    hour_ago = now_ms() - 3600 * 1000
    # old-timestamped duplicates, then old filler spanning more than one segment, then recent ones
    produce(bootstrap, topic, [key_value("a", i, "old1") for i in range(15)], acked, timestamp=hour_ago)
    produce(bootstrap, topic, [key_value("a", i, "old2") for i in range(15)], acked, timestamp=hour_ago)
    fill(bootstrap, topic, acked, n=25, timestamp=hour_ago)
    boundary = max(acked.by_offset) + 1
    produce(bootstrap, topic, [key_value("b", i, "new1") for i in range(15)], acked)
    produce(bootstrap, topic, [key_value("b", i, "new2") for i in range(15)], acked)
    fill(bootstrap, topic, acked)
    # cleaned: the old part (older than the lag); untouched: everything from the first recent record
    expected = sorted([r for r in acked.latest() if r[0] < boundary] + [r for r in acked.all() if r[0] >= boundary])
    got = wait_read_back(bootstrap, topic, expected, what="old duplicates cleaned, recent ones kept")
    time.sleep(1.0)     # ten more cleaner passes: still nothing recent is removed
    again = read_confluent(bootstrap, topic)
    assert again == got, f"a record newer than min.compaction.lag.ms was cleaned: {difference(got, again)}"
    recent_b = [v for _, k, v in again if k.startswith(b"b")]
    assert len(recent_b) == 30, f"both recent values of each b key: {len(recent_b)} of 30 read"


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(cleaner_broker):
    bootstrap = cleaner_broker.bootstrap
    topic = create_topic(bootstrap, topic_name("maxlag"), **COMPACT)
    acked = Acked()
    # a first clean, so that the log has a clean part to weigh the next dirty part against
    for rnd in range(3):
        produce(bootstrap, topic, [key_value("k", i, f"r{rnd}", pad=200) for i in range(60)], acked)
    fill(bootstrap, topic, acked)
    cleaned = wait_read_back(bootstrap, topic, acked.latest(), what="the first clean")
    # now a dirty ratio of 0.9 is needed; a few duplicates (a quarter of the log at most) are below it
    set_topic_configs(bootstrap, topic, **{"min.cleanable.dirty.ratio": "0.9"})
    produce(bootstrap, topic, [key_value("k", i, "late") for i in range(5)], acked)
    fill(bootstrap, topic, acked)
    time.sleep(3.0)     # thirty cleaner passes
    expected = cleaned + [r for r in acked.all() if r[0] > cleaned[-1][0]]
    got = read_confluent(bootstrap, topic)
    assert got == expected, f"below min.cleanable.dirty.ratio nothing is cleaned: {difference(expected, got)}"
    # max.compaction.lag.ms of 1 s: the duplicates are older than that, so the log must be cleaned now
    set_topic_configs(bootstrap, topic, **{"max.compaction.lag.ms": "1000"})
    wait_read_back(bootstrap, topic, acked.latest(), what="max.compaction.lag.ms=1000 forcing a clean")


# ---- 4. compact,delete ----

def test_compact_delete_topic_is_compacted_and_retention_still_deletes(cleaner_broker):
    bootstrap = cleaner_broker.bootstrap
    topic = create_topic(bootstrap, topic_name("cd"), **{**COMPACT, "cleanup.policy": "compact,delete",
                                                         "retention.ms": 3600000})
    acked = Acked()
    day_ago = now_ms() - 24 * 3600 * 1000
    produce(bootstrap, topic, [key_value("o", i, "old") for i in range(20)], acked, timestamp=day_ago)
    fill(bootstrap, topic, acked, n=25, timestamp=day_ago)      # more old segments after the o keys
    last_old_key = max(o for o, (k, _) in acked.by_offset.items() if k.startswith(b"o"))
    produce(bootstrap, topic, [key_value("n", i, "v1") for i in range(15)], acked)
    produce(bootstrap, topic, [key_value("n", i, "v2") for i in range(15)], acked)
    fill(bootstrap, topic, acked)
    total = len(acked)

    deadline = time.monotonic() + CLEAN_TIMEOUT
    while True:
        low, high = watermarks(bootstrap, topic)
        got = read_confluent(bootstrap, topic)
        expected = [r for r in acked.latest() if r[0] >= low]
        if low > last_old_key and got == expected:
            break
        assert time.monotonic() < deadline, (
            f"compact,delete: earliest offset {low} (want > {last_old_key}: the day-old o keys deleted by "
            f"retention.ms), compaction: {difference(expected, got)}")
        time.sleep(0.3)
    assert high == total
    # (superseded recent records may go with a segment the clean left holding only old records)
    first_kept_new = min(o for o, k, _ in acked.latest() if k.startswith(b"n"))
    assert low <= first_kept_new, f"retention deleted recent values: earliest offset {low} > {first_kept_new}"
    assert [r for r in got if r[1].startswith(b"n")] == acked.latest(keys=lambda k: k.startswith(b"n"))
    assert read_kafka_python(bootstrap, topic) == got


# ---- 5. keyless records ----

def test_keyless_records_are_refused_by_compact_delete_and_by_a_topic_made_compacted(cleaner_broker):
    # cleanup.policy=compact alone: tests/integration/test_poison_batches.py
    bootstrap = cleaner_broker.bootstrap
    both = create_topic(bootstrap, topic_name("cdnokey"), **{"cleanup.policy": "compact,delete"})
    altered = create_topic(bootstrap, topic_name("altnokey"))
    kp = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        assert kp.send(altered, b"no key, delete policy", partition=0).get(timeout=10).offset == 0
        set_topic_configs(bootstrap, altered, **{"cleanup.policy": "compact"})
        for topic in (both, altered):
            with pytest.raises(InvalidRecordError):
                kp.send(topic, b"no key", partition=0).get(timeout=10)
            assert kp.send(topic, b"keyed", key=b"k", partition=0).get(timeout=10).offset in (0, 1)
    finally:
        kp.close()
    for topic in (both, altered):
        errors: list = []
        ck = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        ck.produce(topic, b"no key", partition=0, on_delivery=lambda e, m: errors.append(e))
        ck.flush(10)
        assert errors and errors[0] is not None and errors[0].code() == INVALID_RECORD, (topic, errors)
    assert [v for _, _, v in read_confluent(bootstrap, both)] == [b"keyed"]
    assert [v for _, _, v in read_confluent(bootstrap, altered)] == [b"no key, delete policy", b"keyed"]


# ---- 7. transactions ----

def test_cleaner_removes_aborted_transactions_and_keeps_committed_values(cleaner_broker):
    bootstrap = cleaner_broker.bootstrap
    # held back by min.compaction.lag.ms until the uncleaned log has been read
    topic = create_topic(bootstrap, topic_name("txn"), **COMPACT, **{"min.compaction.lag.ms": 3600000})
    acked, aborted = Acked(), set()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name("tid"), "linger.ms": 5})
    producer.init_transactions(30)

    def txn(records, commit):
        def report(err, msg):
            assert err is None, err
            acked.add(msg.offset(), msg.key(), msg.value())
            if not commit:
                aborted.add(msg.offset())
        producer.begin_transaction()
        for key, value in records:
            producer.produce(topic, key=key, value=value, partition=0, on_delivery=report)
        assert producer.flush(TIMEOUT) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(30)

    txn([key_value("k", i, "c1") for i in range(10)], commit=True)
    txn([key_value("k", i, "aborted") for i in range(10)] + [key_value("x", i, "aborted") for i in range(5)],
        commit=False)
    txn([key_value("k", i, "c2") for i in range(5)], commit=True)
    fill(bootstrap, topic, acked)
    committed = Acked()
    committed.by_offset = {o: kv for o, kv in acked.by_offset.items() if o not in aborted}

    before_committed = read_confluent(bootstrap, topic, committed=True)
    assert before_committed == committed.all(), f"read_committed before the clean: " \
                                                f"{difference(committed.all(), before_committed)}"
    before_uncommitted = read_confluent(bootstrap, topic)
    assert before_uncommitted == acked.all(), "read_uncommitted before the clean sees aborted data too"

    set_topic_configs(bootstrap, topic, **{"min.compaction.lag.ms": 0})
    expected = committed.latest()
    assert {k: v for _, k, v in expected if not k.startswith(b"fill")} == {
        **{f"k{i}".encode(): key_value("k", i, "c2")[1] for i in range(5)},
        **{f"k{i}".encode(): key_value("k", i, "c1")[1] for i in range(5, 10)}}
    # after the clean both isolation levels read the latest committed values and no aborted record
    wait_read_back(bootstrap, topic, expected, what="read_uncommitted after the clean: aborted data removed")
    latest_before = Acked()
    for offset, key, value in before_committed:
        latest_before.add(offset, key, value)
    assert latest_before.latest() == expected, "read_committed's latest values are unchanged by the clean"
    for committed_reader in (True, False):
        for client, read in (("confluent-kafka", read_confluent), ("kafka-python", read_kafka_python)):
            got = read(bootstrap, topic, committed=committed_reader)
            assert got == expected, (f"{client} {'read_committed' if committed_reader else 'read_uncommitted'}"
                                     f": {difference(expected, got)}")
    # the transactional producer carries on after its data was cleaned
    txn([key_value("k", 0, "c3")], commit=True)
    got = read_confluent(bootstrap, topic, committed=True)
    assert got[-1][1:] == key_value("k", 0, "c3")


# ---- 9. consumers positioned in a gap ----

SHARED = [f"s{j}".encode() for j in range(5)]
LAYOUTS = ("trailing-removed", "leading-removed", "alternating", "all-removed")


def batch_layout(rnd: int, layout: str) -> list[bytes]:
    unique = [f"u{rnd}-{j}".encode() for j in range(5)]
    if layout == "trailing-removed":
        return unique + SHARED
    if layout == "leading-removed":
        return SHARED + unique
    if layout == "alternating":
        return [k for pair in zip(unique, SHARED) for k in pair]
    return SHARED + SHARED


@pytest.mark.parametrize("codec", [None, "gzip"])
def test_consumers_positioned_in_a_gap_continue_at_the_next_surviving_record(cleaner_broker, codec):
    """Batches of 10 records (kafka-python, one batch per flush) whose trailing, leading, every
    other or all records are superseded by later batches.  After the clean, both clients read to
    the end with one batch per Fetch, and a consumer placed at each removed offset receives the
    next surviving record first."""
    bootstrap = cleaner_broker.bootstrap
    topic = create_topic(bootstrap, topic_name("gap"), **COMPACT)
    acked = Acked()
    kp = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10000, batch_size=100_000, acks="all",
                       compression_type=codec)
    try:
        for rnd in range(12):
            keys = batch_layout(rnd, LAYOUTS[rnd % len(LAYOUTS)])
            futures = [kp.send(topic, key=k, value=k + b"@" + str(rnd).encode(), partition=0) for k in keys]
            kp.flush(TIMEOUT)
            for key, future in zip(keys, futures):
                md = future.get(TIMEOUT)
                acked.add(md.offset, key, key + b"@" + str(rnd).encode())
        futures = [kp.send(topic, key=k, value=k + b"@last", partition=0) for k in SHARED]
        kp.flush(TIMEOUT)
        for key, future in zip(SHARED, futures):
            acked.add(future.get(TIMEOUT).offset, key, key + b"@last")
    finally:
        kp.close()
    fill(bootstrap, topic, acked)
    expected = acked.latest()
    wait_read_back(bootstrap, topic, expected, what="batches with removed records")
    surviving = [o for o, _, _ in expected]
    removed = sorted(set(acked.by_offset) - set(surviving))
    assert len(removed) == len(acked) - len(expected) > 50

    for client, read in (("confluent-kafka", read_confluent), ("kafka-python", read_kafka_python)):
        got = read(bootstrap, topic, small_fetches=True)
        assert got == expected, f"{client}, one batch per fetch, from the start: {difference(expected, got)}"

    # a consumer placed at a removed offset (the first and last of each removed run) gets the next
    # surviving record first; from a few of them, it reads on to the end
    edges = [o for o in removed if o - 1 not in removed or o + 1 not in removed]
    for client, first_at in (("confluent-kafka", first_record_confluent), ("kafka-python", first_record_kafka_python)):
        firsts = first_at(bootstrap, topic, edges)
        wrong = {o: firsts[o] for o in edges if firsts[o] != next((r for r in expected if r[0] > o), None)}
        assert not wrong, (f"{client} placed at {len(wrong)} of {len(edges)} removed offsets did not get the next "
                           f"surviving record first: {dict(list(wrong.items())[:4])}")
    for client, read in (("confluent-kafka", read_confluent), ("kafka-python", read_kafka_python)):
        for offset in (removed[0], removed[len(removed) // 2], removed[-1]):
            want = [r for r in expected if r[0] > offset]
            got = read(bootstrap, topic, offset, small_fetches=True)
            assert got == want, f"{client} from removed offset {offset}: {difference(want, got)}"


def first_record_confluent(bootstrap: str, topic: str, offsets: list[int], timeout: float = 10) -> dict:
    """For each offset: the first record one confluent-kafka consumer, assigned there, receives
    (None if it reaches the end first or gets nothing within ``timeout`` s)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("reader"),
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "max.partition.fetch.bytes": 1, "fetch.max.bytes": 1024, "message.max.bytes": 1000})
    out: dict[int, Rec | None] = {}
    try:
        for offset in offsets:
            consumer.assign([CkTopicPartition(topic, 0, offset)])
            out[offset] = None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    break
                out[offset] = (msg.offset(), msg.key(), msg.value())
                break
    finally:
        consumer.close()
    return out


def first_record_kafka_python(bootstrap: str, topic: str, offsets: list[int], timeout: float = 10) -> dict:
    """For each offset: the first record one kafka-python consumer, seeked there, receives."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             max_partition_fetch_bytes=1, fetch_max_bytes=1)
    tp = KpTopicPartition(topic, 0)
    consumer.assign([tp])
    out: dict[int, Rec | None] = {}
    try:
        for offset in offsets:
            consumer.seek(tp, offset)
            out[offset] = None
            deadline = time.monotonic() + timeout
            while out[offset] is None and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200, max_records=1).values():
                    out[offset] = (records[0].offset, records[0].key, records[0].value)
    finally:
        consumer.close()
    return out


# ---- fetches racing the cleaner ----

def test_readers_racing_many_cleans_only_ever_see_acknowledged_records_in_order(cleaner_broker, caplog):
    """A producer rewrites 20 keys over and over while the cleaner cleans again and again, and
    a reader reads the partition from the start over and over meanwhile: every pass reads to
    the end without an error, offsets only go up, and every record read is one that was
    acknowledged at that offset with that key and value (never a half-swapped segment's bytes)."""
    caplog.set_level(logging.INFO, logger="kwire.log.cleaner")
    b = cleaner_broker
    topic = create_topic(b.bootstrap, topic_name("race"), **COMPACT)
    acked = Acked()
    produce(b.bootstrap, topic, [key_value("k", i, "r0") for i in range(20)], acked)
    passes, rounds, seen = 0, 0, 0
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        rounds += 1
        produce(b.bootstrap, topic, [key_value("k", i, f"r{rounds}") for i in range(20)], acked)
        got = read_confluent(b.bootstrap, topic, timeout=10)
        offsets = [o for o, _k, _v in got]
        assert offsets == sorted(set(offsets)), f"pass {passes}: offsets not increasing"
        for offset, key, value in got:
            assert acked.by_offset.get(offset) == (key, value), \
                f"pass {passes}: offset {offset} read as {key!r}={value!r}, acknowledged {acked.by_offset.get(offset)}"
        passes, seen = passes + 1, seen + len(got)
    cleans = [r for r in caplog.records if r.name == "kwire.log.cleaner" and r.getMessage().startswith(f"cleaned {topic}-0")]
    assert len(cleans) >= 3, f"only {len(cleans)} clean(s) ran during {passes} read passes"
    assert len(got) < len(acked.by_offset) // 2, "the reads raced no compaction"
