"""The set of topics and partition logs under the broker's log directories.

On-disk layout of one log directory (``log.dirs`` may list several)::

    meta.properties                 cluster.id, node.id, version=1 (as Kafka writes it)
    .kwire_cleanshutdown            present only after a clean shutdown
    __kwire_topics/<topic>.json     {"name", "topic_id", "partitions", "configs"}
    <topic>-<partition>/            one PartitionLog directory per partition
    producer-id-block               next producer id block start (decimal)

Topic metadata files are replaced atomically (``checkpoints.write_atomically``:
write, fsync, rename, fsync the directory) so a crash leaves either the old or
the new description.  The clean-shutdown marker is written only for a log dir
whose every partition closed cleanly (none offline, everything flushed and
its recovery point checkpointed).  A partition directory
without a topic file (crash during create) is ignored and removed.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import uuid
from typing import Callable

from kwire.codecs.errors import ErrorCode, KafkaApiError

from . import relocation
from .checkpoints import write_atomically
from .config import LogConfig
from .partition import PartitionLog

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kwire_cleanshutdown"
TOPICS_DIR = "__kwire_topics"
PRODUCER_ID_FILE = "producer-id-block"
PRODUCER_ID_BLOCK = 1000


@dataclasses.dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionLog]
    log_dir: str
    internal: bool = False


class LogManager:
    """Owns every topic's partition logs; synchronous, time passed in.

    ``config_for(overrides)`` resolves a topic's ``LogConfig`` from its
    per-topic overrides (kept here as strings, as Kafka does).
    """

    def __init__(self, log_dirs: list[str], config_for: Callable[[dict[str, str]], LogConfig],
                 *, node_id: int, cluster_id: str | None = None):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.config_for = config_for
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self._next_producer_id = 0
        self._producer_id_limit = 0

    # -- start-up and shutdown -------------------------------------------------
    def open(self, now_ms: int) -> None:
        """Load every topic, recovering logs of a directory without a clean-shutdown marker."""
        clean = {}
        for d in self.log_dirs:
            fresh = not os.path.exists(os.path.join(d, "meta.properties"))
            os.makedirs(os.path.join(d, TOPICS_DIR), exist_ok=True)
            self._load_meta(d)
            clean[d] = fresh or os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        for d in self.log_dirs:
            self._load_dir(d, now_ms, clean)
        for d in self.log_dirs:
            marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
            if os.path.exists(marker):
                os.unlink(marker)
        self._load_producer_ids()

    def _load_meta(self, d: str) -> None:
        path = os.path.join(d, "meta.properties")
        props = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if "=" in line and not line.startswith("#"):
                        k, v = line.strip().split("=", 1)
                        props[k] = v
        if self.cluster_id is None:
            self.cluster_id = props.get("cluster.id") or _new_cluster_id()
        if props.get("cluster.id") != self.cluster_id or props.get("node.id") != str(self.node_id):
            text = f"version=1\ncluster.id={self.cluster_id}\nnode.id={self.node_id}\n"
            write_atomically(path, text.encode())

    def _load_dir(self, d: str, now_ms: int, clean: dict[str, bool]) -> None:
        """The topics described in ``d``; each partition from whichever log dir holds it (a
        replica moved by AlterReplicaLogDirs lives in another), recovered unless that dir
        was shut down cleanly."""
        tdir = os.path.join(d, TOPICS_DIR)
        for fname in sorted(os.listdir(tdir)):
            if not fname.endswith(".json"):
                continue
            with open(os.path.join(tdir, fname), encoding="utf-8") as f:
                desc = json.load(f)
            config = self.config_for(desc["configs"])
            parts = []
            for i in range(desc["partitions"]):
                path = self._partition_path(desc["name"], i, d)
                parts.append(PartitionLog.open(path, config, now_ms=now_ms,
                                               recover=not clean.get(os.path.dirname(path), True)))
            topic = Topic(desc["name"], uuid.UUID(desc["topic_id"]), desc["configs"], parts, d,
                          desc.get("internal", False))
            self.topics[topic.name] = topic
            self.topics_by_id[topic.topic_id] = topic
        if not clean[d]:
            logger.warning("log dir %s had no clean-shutdown marker: recovered its logs", d)

    def _partition_path(self, name: str, index: int, home: str) -> str:
        """Where partition ``index`` of ``name`` lives: the log dir holding its folder (a move
        a crash interrupted settled first, kwire.log.relocation), else the topic's own."""
        folder = f"{name}-{index}"
        found = [os.path.join(d, folder) for d in self.log_dirs if os.path.isdir(os.path.join(d, folder))]
        if len(found) == 1 and not os.path.exists(os.path.join(found[0], relocation.FUTURE_MARKER)) \
                and not os.path.exists(os.path.join(found[0], relocation.MOVED_MARKER)):
            return found[0]
        return (relocation.resolve(found) if found else None) or os.path.join(home, folder)

    def close(self) -> None:
        """Flush and close every log and write the clean-shutdown markers of the log dirs
        whose partitions all closed cleanly.  Raises OSError if a marker cannot be written."""
        unclean = set()
        for topic in self.topics.values():
            for plog in topic.partitions:
                if not plog.close():
                    unclean.add(os.path.dirname(plog.path))
        for d in self.log_dirs:
            if d in unclean:
                logger.error("log dir %s: not every partition closed cleanly; it will be "
                             "recovered at the next start", d)
            else:
                write_atomically(os.path.join(d, CLEAN_SHUTDOWN_FILE), b"")

    # -- topics ----------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def _pick_dir(self) -> str:
        counts = {d: 0 for d in self.log_dirs}
        for t in self.topics.values():
            counts[t.log_dir] = counts.get(t.log_dir, 0) + len(t.partitions)
        return min(self.log_dirs, key=lambda d: counts[d])

    def _save(self, topic: Topic) -> None:
        desc = {"name": topic.name, "topic_id": str(topic.topic_id),
                "partitions": len(topic.partitions), "configs": topic.configs,
                "internal": topic.internal}
        path = os.path.join(topic.log_dir, TOPICS_DIR, topic.name + ".json")
        write_atomically(path, json.dumps(desc, sort_keys=True).encode())

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], *,
                     now_ms: int, internal: bool = False) -> Topic:
        """Create a topic; raises KafkaApiError(TOPIC_ALREADY_EXISTS, or KAFKA_STORAGE_ERROR
        if its files cannot be written: nothing is left behind then).  The server runs the
        three steps apart, ``write_topic`` in a worker thread (kwire.runtime.blocking)."""
        d = self.pick_dir(name)
        return self.publish_topic(self.write_topic(name, num_partitions, configs, d,
                                                   now_ms=now_ms, internal=internal))

    def pick_dir(self, name: str) -> str:
        """The log dir for new topic ``name``; raises KafkaApiError(TOPIC_ALREADY_EXISTS).  No I/O."""
        if name in self.topics:
            raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        return self._pick_dir()

    def publish_topic(self, topic: Topic) -> Topic:
        """Make a topic written by ``write_topic`` visible.  No I/O."""
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic
        return topic

    def write_topic(self, name: str, num_partitions: int, configs: dict[str, str], d: str, *,
                    now_ms: int, internal: bool = False, topic_id: uuid.UUID | None = None) -> Topic:
        """Write a new topic's files in log dir ``d``; returns it unpublished.  Blocking, and
        reads no shared state, so it may run in a worker thread.  Raises as ``create_topic``.
        ``topic_id`` is the cluster's id for the topic (a new one when None)."""
        config = self.config_for(configs)
        for i in range(num_partitions):  # left over from a crash during an earlier create
            stale = os.path.join(d, f"{name}-{i}")
            if os.path.exists(stale):
                shutil.rmtree(stale)
        parts = [PartitionLog.open(os.path.join(d, f"{name}-{i}"), config, now_ms=now_ms, recover=False)
                 for i in range(num_partitions)]
        topic = Topic(name, topic_id or uuid.uuid4(), dict(configs), parts, d, internal)
        try:
            failed = [p.health.offline_reason for p in parts if p.offline]
            if failed:
                raise OSError(failed[0])
            self._save(topic)
        except OSError as exc:
            for plog in parts:
                plog.delete()
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                                f"cannot create topic '{name}' in {d}: {exc}") from None
        return topic

    def delete_topic(self, name: str) -> Topic:
        """Delete a topic and its data; raises KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION)."""
        topic = self.detach_topic(name)
        self.remove_topic_files(topic)
        return topic

    def detach_topic(self, name: str) -> Topic:
        """Take a topic out of the table (no I/O); raises KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION)."""
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        self.topics_by_id.pop(topic.topic_id, None)
        return topic

    def remove_topic_files(self, topic: Topic) -> None:
        """Remove a detached topic's description and logs.  Blocking; safe in a worker thread."""
        os.unlink(os.path.join(topic.log_dir, TOPICS_DIR, topic.name + ".json"))
        for plog in topic.partitions:
            plog.delete()

    def add_partitions(self, name: str, total: int, *, now_ms: int) -> Topic:
        """Grow a topic to ``total`` partitions; raises KafkaApiError(INVALID_PARTITIONS).
        The server runs ``write_partitions`` in a worker thread, then extends the list."""
        topic = self.topics[name]
        topic.partitions.extend(self.write_partitions(topic, total, now_ms=now_ms))
        return topic

    def write_partitions(self, topic: Topic, total: int, *, now_ms: int) -> list[PartitionLog]:
        """Open ``topic``'s partitions up to ``total`` and persist the new count; returns the new
        logs, not yet in ``topic.partitions``.  Blocking; safe in a worker thread."""
        current = len(topic.partitions)
        if total <= current:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS,
                                f"Topic currently has {current} partitions, which is higher than "
                                f"or equal to the requested {total}.")
        config = self.config_for(topic.configs)
        new = [PartitionLog.open(os.path.join(topic.log_dir, f"{topic.name}-{i}"), config,
                                 now_ms=now_ms, recover=False) for i in range(current, total)]
        self._save(dataclasses.replace(topic, partitions=topic.partitions + new))
        return new

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides, persist them and apply them to its logs live."""
        topic = self.topics[name]
        config = self.config_for(configs)
        topic.configs = dict(configs)
        self._save(topic)
        for plog in topic.partitions:
            plog.update_config(config)

    def refresh_configs(self) -> None:
        """Re-resolve every topic's LogConfig (the broker's defaults changed) and apply it live."""
        for topic in self.topics.values():
            config = self.config_for(topic.configs)
            for plog in topic.partitions:
                plog.update_config(config)

    def all_partitions(self):
        for topic in self.topics.values():
            for plog in topic.partitions:
                yield topic, plog

    # -- producer ids ----------------------------------------------------------
    def _load_producer_ids(self) -> None:
        path = os.path.join(self.log_dirs[0], PRODUCER_ID_FILE)
        start = 0
        if os.path.exists(path):
            with open(path, encoding="ascii") as f:
                start = int(f.read().strip() or 0)
        seen = max((plog.producer_ids() for _, plog in self.all_partitions()), default=-1)
        self._next_producer_id = max(start, seen + 1)
        self._producer_id_limit = self._next_producer_id

    def next_producer_id(self) -> int:
        """A producer id never handed out before, also across restarts (blocks persisted)."""
        if self._next_producer_id >= self._producer_id_limit:
            self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
            write_atomically(os.path.join(self.log_dirs[0], PRODUCER_ID_FILE),
                              str(self._producer_id_limit).encode())
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid


def _new_cluster_id() -> str:
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
