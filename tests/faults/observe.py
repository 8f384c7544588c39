"""Watching the cluster from outside: partition state znodes over time, and the log read back.

``IsrSampler`` reads ``/brokers/topics/<t>/partitions/<p>/state`` of every
watched partition through its own kazoo session (straight to ZooKeeper, not
through a broker's proxy) every ``interval`` seconds and appends an
``IsrSample`` to the history; while ZooKeeper is down it records nothing.
``read_log`` reads a topic from the beginning to its end with a fresh
confluent consumer (read_uncommitted or read_committed), ``watermarks`` and
``last_stable_offsets`` ask the leaders for the high watermark and the LSO.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .history import History, IsrSample, Log

__all__ = ["IsrSampler", "last_stable_offsets", "read_log", "watermarks"]

_quiet = logging.getLogger("tests.faults.kazoo")
_quiet.setLevel(logging.CRITICAL)     # ZooKeeper going away is the point of some faults


class IsrSampler(threading.Thread):
    """Samples partition states into ``history.isr_samples`` until ``stop()``; ``latest``
    is the newest sample (None before the first)."""

    def __init__(self, zookeeper_connect: str, history: History, interval: float = 0.2):
        super().__init__(name="isr-sampler", daemon=True)
        self.connect = zookeeper_connect
        self.history = history
        self.interval = interval
        self.topics: list[str] = []
        self.replication: dict[str, int] = {}
        self.latest: IsrSample | None = None
        self._halt = threading.Event()

    def watch(self, topics: Iterable[str]) -> None:
        """Sample these topics from now on (the list is replaced whole, so it is thread-safe)."""
        self.topics = list(topics)

    def run(self) -> None:
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=self.connect, timeout=4.0, logger=_quiet,
                         connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1.0})
        try:
            zk.start(timeout=15)
            while not self._halt.is_set():
                try:
                    self._sample(zk)
                except Exception:           # ConnectionLoss, SessionExpired, NoNode mid-creation
                    pass
                self._halt.wait(self.interval)
        finally:
            zk.stop()
            zk.close()

    def _sample(self, zk) -> None:
        at = time.monotonic()
        states = {}
        for topic in self.topics:
            partitions = zk.get_children(f"/brokers/topics/{topic}/partitions")
            if topic not in self.replication:
                assignment = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
                self.replication[topic] = len(next(iter(assignment.values())))
            for p in partitions:
                state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                states[f"{topic}-{p}"] = (state["leader"], tuple(state["isr"]))
        sample = IsrSample(at, states)
        self.history.isr_samples.append(sample)
        self.latest = sample

    def replication_of(self) -> dict[str, int]:
        """{"topic-p": replication factor} of every partition sampled so far."""
        latest = self.latest
        if latest is None:
            return {}
        return {tp: self.replication.get(tp.rsplit("-", 1)[0], 0) for tp in latest.states}

    def stop(self, timeout: float = 10) -> None:
        self._halt.set()
        self.join(timeout)


def read_log(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted",
             timeout: float = 60) -> tuple[Log, list[str]]:
    """Every (offset, value) of ``topic`` per partition up to its end (the high watermark, or the
    LSO for read_committed), and notes on what could not be read.  Values must be integers."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"readback-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation, "auto.offset.reset": "earliest", "log_level": 3})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    log: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    notes: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                elif len(notes) < 5:
                    notes.append(f"read {topic} ({isolation}): {msg.error()}")
                continue
            at_end.discard(msg.partition())
            try:
                log[msg.partition()].append((msg.offset(), int(msg.value())))
            except (TypeError, ValueError):
                notes.append(f"{topic}-{msg.partition()}@{msg.offset()}: value {msg.value()!r} is no integer")
    finally:
        consumer.close()
    if len(at_end) < partitions:
        notes.append(f"read {topic} ({isolation}): partitions {sorted(set(range(partitions)) - at_end)} "
                     f"not read to their end within {timeout:.0f}s")
    return log, notes


def _list_offsets(bootstrap: str, topic: str, partitions: int, isolation: IsolationLevel,
                  timeout: float) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=timeout)
    return {tp.partition: f.result(timeout).offset for tp, f in futures.items()}


def watermarks(bootstrap: str, topic: str, partitions: int, timeout: float = 15) -> dict[int, int]:
    """{partition: high watermark} from the leaders.  Raises ``KafkaException``."""
    return _list_offsets(bootstrap, topic, partitions, IsolationLevel.READ_UNCOMMITTED, timeout)


def last_stable_offsets(bootstrap: str, topic: str, partitions: int, timeout: float = 15) -> dict[int, int]:
    """{partition: last stable offset} from the leaders.  Raises ``KafkaException``."""
    return _list_offsets(bootstrap, topic, partitions, IsolationLevel.READ_COMMITTED, timeout)
