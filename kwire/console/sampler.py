"""The console's view of the cluster, refreshed in the background every ``interval_s``.

A sample is what the overview and the lists need and what would be slow to ask for on every
page load with a thousand partitions and hundreds of groups: the brokers and controller, every
partition's leader/replicas/ISR, log end offsets, ``min.insync.replicas`` per topic, and each
group's committed offsets and lag.  It costs a handful of requests per interval: Metadata,
one ListOffsets per leader, ListGroups per broker and one OffsetFetch per coordinator for all
its groups (OffsetFetch v8), DescribeLogDirs per broker (sizes), and DescribeConfigs every tenth sample.

History (for the charts): the cluster's produce and consume rates, records/s, derived from
successive log end offsets and committed offsets, and each group's total lag; ``HISTORY``
points each.  A failed sample keeps the previous one and records the error; pages show both.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kwire.console.access import KafkaAccess, error_text

logger = logging.getLogger("kwire.console")
HISTORY = 720                 # an hour at the default 5 s
CONFIGS_EVERY = 10            # samples between two reads of the topics' configs
# the topic configs a sample keeps (the topics list shows them; min ISR counts partitions)
LISTED_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes", "min.insync.replicas")


@dataclass
class PartitionState:
    leader: int
    replicas: list[int]
    isr: list[int]
    end_offset: int | None = None


@dataclass
class GroupLag:
    group_id: str
    protocol_type: str            # consumer, share, or "" (a group that only commits offsets)
    group_type: str | None        # classic / consumer / share (ListGroups v5), None when not told
    state: str | None
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    lag: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())


@dataclass
class Sample:
    at: float = 0.0
    cluster_id: str | None = None
    controller_id: int | None = None
    brokers: dict[int, dict] = field(default_factory=dict)      # id -> {host, port, rack}
    topics: dict[str, dict[int, PartitionState]] = field(default_factory=dict)
    internal: set[str] = field(default_factory=set)
    min_isr: dict[str, int] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)   # topic -> LISTED_CONFIGS
    sizes: dict[str, int] = field(default_factory=dict)               # topic -> bytes on its leaders
    groups: dict[str, GroupLag] = field(default_factory=dict)
    broker_counters: dict[str, float] | None = None    # summed over --metrics-url: messagesin, bytesout
    error: str | None = None

    def counts(self) -> dict[str, int]:
        """Partitions: total, under-replicated (ISR smaller than the replicas), offline (no
        leader) and under min ISR (ISR smaller than the topic's min.insync.replicas)."""
        total = under = offline = under_min = 0
        for topic, parts in self.topics.items():
            minimum = self.min_isr.get(topic, 1)
            for p in parts.values():
                total += 1
                under += len(p.isr) < len(p.replicas)
                offline += p.leader < 0
                under_min += len(p.isr) < minimum
        return {"partitions": total, "under_replicated": under, "offline": offline, "under_min_isr": under_min}


class Sampler:
    """Samples in a daemon thread; ``latest`` is the newest sample (empty before the first)."""

    def __init__(self, access: KafkaAccess, interval_s: float = 5.0, metrics_urls: list[str] = ()):
        self.access = access
        self.interval_s = interval_s
        self.metrics_urls = list(metrics_urls)
        self.latest = Sample()
        self.rates: deque[tuple[float, float | None, float | None]] = deque(maxlen=HISTORY)
        self.group_history: dict[str, deque[tuple[float, int]]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._count = 0
        self._fresh = threading.Condition()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="kwire-console-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
            self._thread = None

    def refresh_soon(self) -> None:
        """Sample now rather than at the next interval (after a write changed something)."""
        self._wake.set()

    def wait_for_sample(self, after: float, timeout: float) -> Sample:
        """The first sample taken after ``after`` (time.time()), or the latest at the timeout."""
        self._wake.set()
        with self._fresh:
            self._fresh.wait_for(lambda: self.latest.at > after, timeout)
        return self.latest

    def wait_until(self, predicate, timeout: float) -> Sample:
        """Sample again until ``predicate(sample)`` holds (a write is visible), or ``timeout``
        seconds; returns the latest sample either way."""
        deadline = time.monotonic() + timeout
        sample = self.latest
        while not predicate(sample) and time.monotonic() < deadline:
            sample = self.wait_for_sample(time.time(), max(0.0, deadline - time.monotonic()))
        return sample

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                sample = self.sample_once()
            except Exception as exc:          # noqa: BLE001 - a failed sample keeps the last one
                logger.info("console sample failed: %s", error_text(exc))
                sample = dataclasses.replace(self.latest, at=time.time(), error=error_text(exc))
            with self._fresh:
                self.latest = sample
                self._fresh.notify_all()
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def sample_once(self) -> Sample:
        """Take one sample (blocking), record its rates and lag history, and return it."""
        previous = self.latest
        sample = Sample(at=time.time())
        cluster = self.access.with_admin(lambda a: a.describe_cluster())
        sample.cluster_id = cluster.get("cluster_id")
        sample.controller_id = cluster.get("controller_id")
        sample.brokers = {b["broker_id"]: {"host": b["host"], "port": b["port"], "rack": b.get("rack")}
                          for b in cluster["brokers"]}
        for t in self.access.with_admin(lambda a: a.describe_topics()):
            if t["error_code"] != 0:
                continue
            if t.get("is_internal"):
                sample.internal.add(t["name"])
            sample.topics[t["name"]] = {p["partition_index"]: PartitionState(p["leader_id"], list(p["replica_nodes"]),
                                                                           list(p["isr_nodes"]))
                                        for p in t["partitions"]}
        self._end_offsets(sample)
        if self._count % CONFIGS_EVERY == 0 or set(sample.topics) - set(previous.configs):
            sample.configs = self._configs(list(sample.topics))
        else:
            sample.configs = {t: previous.configs[t] for t in sample.topics if t in previous.configs}
        sample.min_isr = {t: int(c["min.insync.replicas"]) for t, c in sample.configs.items()
                          if c.get("min.insync.replicas", "").isdigit()}
        self._sizes(sample)
        self._groups(sample)
        if self.metrics_urls:
            sample.broker_counters = read_broker_counters(self.metrics_urls)
        self._count += 1
        self._record_history(previous, sample)
        return sample

    def _end_offsets(self, sample: Sample) -> None:
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec
        led = {TopicPartition(t, p): OffsetSpec.LATEST for t, parts in sample.topics.items()
               for p, s in parts.items() if s.leader >= 0}
        if not led:
            return
        try:
            found = self.access.with_admin(lambda a: a.list_partition_offsets(led))
        except Exception:                     # noqa: BLE001 - one partition's error fails the whole call:
            found = self._end_offsets_by_topic(led)     # ask topic by topic, keep what answers
        for tp, info in found.items():
            sample.topics[tp.topic][tp.partition].end_offset = info.offset

    def _end_offsets_by_topic(self, led: dict) -> dict:
        """ListOffsets topic by topic, after the call for all failed (a topic deleted meanwhile,
        a leader just elected); topics that fail again are left without offsets this time."""
        by_topic: dict[str, dict] = {}
        for tp, spec in led.items():
            by_topic.setdefault(tp.topic, {})[tp] = spec
        found: dict = {}
        for topic, specs in by_topic.items():
            try:
                found.update(self.access.with_admin(lambda a: a.list_partition_offsets(specs)))
            except Exception as exc:          # noqa: BLE001
                logger.debug("console: end offsets of %s unknown: %s", topic, error_text(exc))
        return found

    def _configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        from kafka.admin import ConfigResource
        if not topics:
            return {}
        try:
            described = self.access.with_admin(lambda a: a.describe_configs(
                [ConfigResource("TOPIC", t) for t in topics], config_filter="all"))
        except Exception as exc:              # noqa: BLE001 - shown as unknown rather than failing the sample
            logger.info("console: topic configs unknown: %s", error_text(exc))
            return {}
        return {name: {k: entries[k]["value"] for k in LISTED_CONFIGS
                       if k in entries and entries[k].get("value") is not None}
                for name, entries in described.get("topic", {}).items()}

    def _sizes(self, sample: Sample) -> None:
        """Each topic's bytes on its partitions' leaders (DescribeLogDirs; unknown when refused)."""
        try:
            answers = self.access.with_admin(lambda a: a.describe_log_dirs(
                topic_partitions={t: list(parts) for t, parts in sample.topics.items()}))
        except Exception as exc:              # noqa: BLE001 - sizes are optional
            logger.debug("console: sizes unknown: %s", error_text(exc))
            return
        for answer in answers:
            for d in answer["log_dirs"] if answer.get("log_dirs") else ():
                for t in d["topics"] if d["error_code"] == 0 else ():
                    parts = sample.topics.get(t["name"], {})
                    for p in t["partitions"]:
                        state = parts.get(p["partition_index"])
                        if state is not None and state.leader == answer["broker"] and not p["is_future_key"]:
                            sample.sizes[t["name"]] = sample.sizes.get(t["name"], 0) + p["partition_size"]

    def _groups(self, sample: Sample) -> None:
        listed = self.access.with_admin(lambda a: a.list_groups())
        for g in listed:
            gid = g["group_id"]
            sample.groups[gid] = GroupLag(gid, g.get("protocol_type", ""), g.get("group_type"), g.get("group_state"))
        offset_groups = [gid for gid, g in sample.groups.items() if g.protocol_type != "share"]
        if not offset_groups:
            return
        try:
            committed = self.access.with_admin(lambda a: a.list_group_offsets(offset_groups))
        except Exception as exc:              # noqa: BLE001 - lag unknown this time
            sample.error = f"committed offsets: {error_text(exc)}"
            return
        for gid, offsets in committed.items():
            g = sample.groups[gid]
            for tp, om in offsets.items():
                if om.offset < 0:
                    continue
                key = (tp.topic, tp.partition)
                g.committed[key] = om.offset
                state = sample.topics.get(tp.topic, {}).get(tp.partition)
                if state is not None and state.end_offset is not None:
                    g.lag[key] = max(0, state.end_offset - om.offset)

    def _record_history(self, previous: Sample, sample: Sample) -> None:
        def produced(s: Sample) -> int:
            return sum(p.end_offset or 0 for parts in s.topics.values() for p in parts.values())

        def consumed(s: Sample) -> int:
            return sum(sum(g.committed.values()) for g in s.groups.values())

        elapsed = sample.at - previous.at
        produce_rate = consume_rate = None
        if previous.at and elapsed > 0 and sample.broker_counters and previous.broker_counters:
            now, before = sample.broker_counters, previous.broker_counters     # the brokers' own counters
            produce_rate = max(0.0, (now["messagesin"] - before["messagesin"]) / elapsed)
            consume_rate = max(0.0, (now["bytesout"] - before["bytesout"]) / elapsed)
        elif previous.at and elapsed > 0:
            produce_rate = max(0.0, (produced(sample) - produced(previous)) / elapsed)
            consume_rate = max(0.0, (consumed(sample) - consumed(previous)) / elapsed)
        self.rates.append((sample.at, produce_rate, consume_rate))
        for gid, g in sample.groups.items():
            self.group_history.setdefault(gid, deque(maxlen=HISTORY)).append((sample.at, g.total_lag))
        for gid in list(self.group_history):
            if gid not in sample.groups:
                del self.group_history[gid]

    def statistics(self) -> dict[str, Any]:
        return {"samples": self._count, "interval_s": self.interval_s, "last_at": self.latest.at,
                "error": self.latest.error}


METRICS_TIMEOUT_S = 2.0


def read_broker_counters(urls: list[str]) -> dict[str, float] | None:
    """kwire's all-topics counters summed over the brokers' /metrics: records appended
    (MessagesInPerSec) and record bytes sent to consumers (BytesOutPerSec).  None when a
    broker does not answer (the rates then come from offsets)."""
    import urllib.request
    from kwire.metrics.scrape import unlabelled_values
    wanted = {"kafka_server_brokertopicmetrics_messagesin_total": "messagesin",
              "kafka_server_brokertopicmetrics_bytesout_total": "bytesout"}
    totals = {"messagesin": 0.0, "bytesout": 0.0}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=METRICS_TIMEOUT_S) as response:
                text = response.read(16 * 1024 * 1024).decode("utf-8", "replace")
            found = unlabelled_values(text, wanted)
        except (OSError, ValueError) as exc:
            logger.info("console: %s unreadable: %s", url, exc)
            return None
        for name, alias in wanted.items():
            totals[alias] += found.get(name, 0.0)
    return totals
