"""Steady acks=all load from stock clients, recorded into a ``History`` while the nemesis works.

    load = Load(bootstrap, topic="data", txn_topic="txn", partitions=3, history=h, seed=7)
    load.start(); load.wait_warm(30)
    ...                                   # faults
    load.stop()                           # after the heal: flush, finish the open transaction

Clients, each a thread of this process:

* a confluent-kafka idempotent producer and a kafka-python non-idempotent one
  (max one request in flight, so order is still promised) write ``RATE``
  records a second to ``topic``, record ``i`` of a writer to partition
  ``i % partitions``;
* a confluent-kafka transactional producer writes 1-8 records per transaction
  to ``txn_topic`` and commits about three in four (seeded), aborts the rest;
* a confluent-kafka consumer in a group reads ``topic`` and commits its
  position synchronously twice a second, each successful commit recorded;
* a second consumer of the group (never joining it) fetches the committed
  offsets twice a second.

A producer that hits a fatal error (librdkafka fences or gives up on an
idempotent or transactional producer) is replaced by a new one with a new
writer number: checks are per producer instance, as a broker's are per
producer id.  Every call that can block has a timeout; a stopped load ends
within ``STOP_S`` seconds.
"""
from __future__ import annotations

import functools
import logging
import random
import threading
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .duplicates import pid_event
from .history import ABORTED, COMMITTED, IDEMPOTENT, PLAIN, TRANSACTIONAL, UNKNOWN, Ack, Commit, History, Observed, \
    PidEvent, encode

__all__ = ["Load"]

RATE = 150                            # records a second per plain or idempotent producer
STOP_S = 20.0                         # flush budget once healed
COMMIT_EVERY_S = 0.5
# Bounded waits everywhere; log_level 3 keeps librdkafka's stderr to errors (disconnects are the point).
CONFLUENT_COMMON = {"socket.timeout.ms": 10000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                    "reconnect.backoff.max.ms": 1000, "log_level": 3}
PRODUCER_COMMON = {**CONFLUENT_COMMON, "request.timeout.ms": 5000}


def _offset(msg) -> int:
    """A librdkafka delivery report's offset, -1 when it has none: an idempotent producer reports
    a message whose request timed out as delivered, without an offset, once a later one succeeded
    (the broker then holds it, librdkafka's "persisted" status)."""
    offset = msg.offset()
    return -1 if offset is None or offset < 0 else offset


class _Client(threading.Thread):
    """A client thread: ``errors`` keeps what escaped its loop (a bug in the suite, reported)."""

    def __init__(self, load: "Load", name: str):
        super().__init__(name=name, daemon=True)
        self.load = load
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as exc:        # surfaced by Load.stop()
            self.errors.append(exc)

    def loop(self) -> None:
        raise NotImplementedError

    def note(self, what: str) -> None:
        h = self.load.history
        h.notes.append(f"t={time.monotonic() - h.t0:.2f}s {self.name}: {what}")


class _Paced:
    """Yields at ``rate`` per second, catching up at most one second after a stall."""

    def __init__(self, rate: float):
        self.step = 1.0 / rate
        self.next = time.monotonic()

    def wait(self) -> float:
        now = time.monotonic()
        self.next = max(self.next + self.step, now - 1.0)
        return max(0.0, self.next - now)


class ConfluentWriter(_Client):
    def __init__(self, load: "Load"):
        super().__init__(load, "confluent-idempotent")
        self.fatal = False

    def _new(self) -> tuple[int, Producer]:
        writer = self.load.new_writer(IDEMPOTENT)
        self.fatal = False
        return writer, Producer({"bootstrap.servers": self.load.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 30000,
                                 "error_cb": self._error, **PRODUCER_COMMON,
                                 # its epoch bumps and sequence errors, for a failing schedule's artifacts
                                 "debug": "eos", "log_level": 7, "logger": self._client_logger(writer)})

    def _client_logger(self, writer: int) -> logging.Logger:
        log = logging.getLogger(f"kwire.faults.idempotent.{id(self.load)}.{writer}")
        log.propagate = False
        log.setLevel(logging.DEBUG)
        history = self.load.history
        pids = history.producer_ids.setdefault(writer, [])

        def emit(record: logging.LogRecord) -> None:
            at = record.created - time.time() + time.monotonic() - history.t0
            message = record.getMessage()
            history.client_log.append(f"t={at:.3f}s writer {writer}: {message}")
            change = pid_event(message)     # kept whole: the classification of a duplicate needs them
            if change is not None:
                pids.append(PidEvent(round(at, 3), *change))
        handler = logging.Handler()
        handler.emit = emit
        log.handlers[:] = [handler]
        return log

    def _error(self, err) -> None:
        if err.fatal():
            self.fatal = True
            self.note(f"fatal: {err}")

    def _delivered(self, writer: int, seq: int, err, msg) -> None:
        if err is None:
            self.load.history.acks.append(Ack(writer, IDEMPOTENT, seq, msg.partition(), _offset(msg)))

    def loop(self) -> None:
        writer, producer = self._new()
        pace, seq, load = _Paced(RATE), 0, self.load
        while not load.stopping.is_set():
            if self.fatal:
                producer.purge()
                writer, producer, seq = *self._new(), 0
            try:
                producer.produce(load.topic, encode(writer, seq), partition=seq % load.partitions,
                                 on_delivery=functools.partial(self._delivered, writer, seq))
                seq += 1
            except BufferError:
                pass
            producer.poll(pace.wait())
        left = producer.flush(STOP_S)
        if left:
            self.note(f"{left} records not delivered within {STOP_S}s of the stop")


class KafkaPythonWriter(_Client):
    def __init__(self, load: "Load"):
        super().__init__(load, "kafka-python-plain")

    def loop(self) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError as KafkaPythonError
        load = self.load
        writer = load.new_writer(PLAIN)
        producer = KafkaProducer(bootstrap_servers=load.bootstrap.split(","), acks="all", enable_idempotence=False,
                                 max_in_flight_requests_per_connection=1, linger_ms=5, retry_backoff_ms=100,
                                 request_timeout_ms=5000, delivery_timeout_ms=30000, max_block_ms=5000,
                                 metadata_max_age_ms=1000, reconnect_backoff_max_ms=1000)
        history, pace, seq = load.history, _Paced(RATE), 0
        try:
            while not load.stopping.is_set():
                try:
                    future = producer.send(load.topic, encode(writer, seq), partition=seq % load.partitions)
                    future.add_callback(lambda md, s=seq: history.acks.append(
                        Ack(writer, PLAIN, s, md.partition, md.offset)))
                except KafkaPythonError as exc:     # metadata unavailable past max_block_ms
                    self.note(f"send seq {seq}: {exc!r}")
                seq += 1
                time.sleep(pace.wait())
            producer.flush(STOP_S)
        finally:
            try:
                producer.close(5)
            except Exception:
                producer._sender.force_close()      # see tests/support/counting.py


class TransactionalWriter(_Client):
    def __init__(self, load: "Load"):
        super().__init__(load, "confluent-transactional")
        self.rng = random.Random(load.seed)
        self.txn = 0

    def _new(self) -> tuple[int, Producer]:
        load = self.load
        producer = Producer({"bootstrap.servers": load.bootstrap, "transactional.id": load.transactional_id,
                             "linger.ms": 5, "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                             **PRODUCER_COMMON})
        deadline = time.monotonic() + 60
        while True:
            try:
                producer.init_transactions(10)
                return load.new_writer(TRANSACTIONAL), producer
            except KafkaException as exc:
                if exc.args[0].fatal() or time.monotonic() > deadline:
                    raise
                self.note(f"init_transactions: {exc.args[0]}")

    def loop(self) -> None:
        writer, producer = self._new()
        seq, load = 0, self.load
        while not load.stopping.is_set():
            self.txn += 1
            commit = self.rng.random() < 0.75
            members = load.history.txn_members.setdefault(self.txn, [])
            outcome = self._one(producer, writer, seq, self.rng.randint(1, 8), commit, members)
            seq += len(members)
            load.history.txn_outcomes[self.txn] = outcome
            if outcome == UNKNOWN:          # the producer's state is unsure: fence it with a new one
                producer.purge()
                writer, producer, seq = *self._new(), 0
            producer.poll(0.05)

    def _one(self, producer: Producer, writer: int, seq: int, size: int, commit: bool, members: list[int]) -> str:
        load, txn = self.load, self.txn

        def delivered(s, err, msg):
            if err is None:
                load.history.acks.append(Ack(writer, TRANSACTIONAL, s, msg.partition(), _offset(msg), txn))
        try:
            producer.begin_transaction()
            for s in range(seq, seq + size):
                producer.produce(load.txn_topic, encode(writer, s), partition=s % load.partitions,
                                 on_delivery=functools.partial(delivered, s))
                members.append(int(encode(writer, s)))      # only once it is queued
            if not commit:
                producer.abort_transaction(10)
                return ABORTED
            return self._commit(producer)
        except BufferError as exc:
            return self._abandon(producer, KafkaException(KafkaError(KafkaError._QUEUE_FULL, str(exc))))
        except KafkaException as exc:
            return self._abandon(producer, exc)

    def _commit(self, producer: Producer) -> str:
        for _ in range(3):
            try:
                producer.commit_transaction(10)
                return COMMITTED
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    return self._abandon(producer, exc)
                self.note(f"txn {self.txn} commit retried: {exc.args[0]}")
        return UNKNOWN

    def _abandon(self, producer: Producer, exc: KafkaException) -> str:
        error = exc.args[0]
        self.note(f"txn {self.txn}: {error}")
        if not error.fatal():               # abortable, or an error of ours (a full queue)
            try:
                producer.abort_transaction(10)
                return ABORTED
            except KafkaException as again:
                self.note(f"txn {self.txn} abort failed: {again.args[0]}")
        return UNKNOWN


class GroupConsumer(_Client):
    def __init__(self, load: "Load"):
        super().__init__(load, "group-consumer")

    def loop(self) -> None:
        load = self.load
        consumer = Consumer({"bootstrap.servers": load.bootstrap, "group.id": load.group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 1000, **CONFLUENT_COMMON})
        consumer.subscribe([load.topic])
        last = time.monotonic()
        try:
            while not load.stopping.is_set():
                consumer.poll(0.1)
                if time.monotonic() - last >= COMMIT_EVERY_S:
                    last = time.monotonic()
                    self._commit(consumer)
            self._commit(consumer)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException:              # nothing new to commit, or the coordinator is away
            return
        at = time.monotonic()
        for tp in done or []:
            if tp.error is None and tp.offset >= 0:
                self.load.history.commits.append(Commit(at, tp.partition, tp.offset))


class OffsetWatcher(_Client):
    """OffsetFetch of the group's committed offsets through a consumer of the same group that
    never subscribes (so never joins).  Not the AdminClient: librdkafka's coordinator-bound admin
    requests abort the process when a connection drops under them (librdkafka issue 4605)."""

    def __init__(self, load: "Load"):
        super().__init__(load, "offset-watcher")

    def loop(self) -> None:
        load = self.load
        watcher = Consumer({"bootstrap.servers": load.bootstrap, "group.id": load.group,
                            "enable.auto.commit": False, **CONFLUENT_COMMON})
        partitions = [TopicPartition(load.topic, p) for p in range(load.partitions)]
        try:
            while not load.stopping.is_set():
                self.describe(watcher, partitions)
                load.stopping.wait(COMMIT_EVERY_S)
            self.describe(watcher, partitions)
        finally:
            watcher.close()

    def describe(self, watcher: Consumer, partitions: list) -> None:
        at = time.monotonic()
        try:
            result = watcher.committed(partitions, timeout=5)
        except KafkaException:              # the coordinator is away: nothing observed
            return
        for tp in result:
            if tp.error is None and tp.offset >= 0:
                self.load.history.observed.append(Observed(at, tp.partition, tp.offset))


class Load:
    """All the clients; ``stopping`` is set by ``stop()``."""

    def __init__(self, bootstrap: str, *, topic: str, txn_topic: str, partitions: int, history: History, seed: int):
        self.bootstrap, self.topic, self.txn_topic, self.partitions = bootstrap, topic, txn_topic, partitions
        self.history, self.seed = history, seed
        self.group = f"nemesis-group-{seed}"
        self.transactional_id = f"nemesis-txn-{seed}-{uuid.uuid4().hex[:6]}"
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.clients = [ConfluentWriter(self), KafkaPythonWriter(self), TransactionalWriter(self),
                        GroupConsumer(self), OffsetWatcher(self)]

    def new_writer(self, kind: str) -> int:
        with self._lock:
            writer = len(self.history.writers) + 1
            self.history.writers[writer] = kind
            return writer

    def start(self) -> "Load":
        for c in self.clients:
            c.start()
        return self

    def warm(self) -> bool:
        """Every producer kind acknowledged something, a transaction committed, a commit returned."""
        h = self.history
        kinds = {a.kind for a in h.acks}
        return {IDEMPOTENT, PLAIN, TRANSACTIONAL} <= kinds and COMMITTED in h.txn_outcomes.values() and bool(h.commits)

    def wait_warm(self, timeout: float) -> None:
        """Raises ``TimeoutError`` (naming what is missing) if the load is not warm in time."""
        deadline = time.monotonic() + timeout
        while not self.warm():
            if time.monotonic() > deadline:
                raise TimeoutError(f"load not warm after {timeout}s: {self.describe()}; errors {self.errors()}")
            time.sleep(0.1)

    def describe(self) -> str:
        h = self.history
        return (f"{len(h.acks)} acks by kind {sorted({a.kind for a in h.acks})}, "
                f"{len(h.txn_outcomes)} transactions, {len(h.commits)} commits, {len(h.observed)} describes")

    def stop(self, timeout: float = STOP_S + 25) -> list[str]:
        """Stop every client and wait for it; returns problems (a client still running, an
        exception that escaped a client)."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        problems = []
        for c in self.clients:
            c.join(max(0.1, deadline - time.monotonic()))
            if c.is_alive():
                problems.append(f"{c.name} still running {timeout:.0f}s after the stop")
        return problems + self.errors()

    def errors(self) -> list[str]:
        return [f"{c.name}: {e!r}" for c in self.clients for e in c.errors]
