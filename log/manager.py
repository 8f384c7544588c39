"""The set of topics and partition logs under the broker's log directories.

On-disk layout of one log directory (``log.dirs`` may list several)::

    meta.properties                 cluster.id, node.id, version=1 (as Kafka writes it)
    .kwire_cleanshutdown            present only after a clean shutdown
    __kwire_topics/<topic>.json     {"name", "topic_id", "partitions", "configs"}
    <topic>-<partition>/            one PartitionLog directory per partition it holds
    producer-id-block               next producer id block start (decimal)

Topic metadata files are replaced atomically (``checkpoints.write_atomically``:
write, fsync, rename, fsync the directory) so a crash leaves either the old or
the new description.  The clean-shutdown marker is written only for a log dir
whose every partition closed cleanly (none offline, everything flushed and
its recovery point checkpointed).  A partition directory
without a topic file (crash during create) is ignored and removed.

A single node holds every partition of its topics.  A cluster broker (``sparse``) holds
files only for the partitions it replicates, as Kafka's brokers do: the others are
``AbsentReplica`` entries in ``Topic.partitions`` (no directory, nothing to read), which
the cluster swaps for a real log when the broker becomes a replica (``open_replica`` /
``install_replica``) and back when it stops (``detach_replica``, then ``PartitionLog.delete``).
Iterating ``all_partitions`` yields only the logs held; ``partition`` returns either kind.
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
from .health import StorageHealth
from .partition import PartitionLog

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kwire_cleanshutdown"
TOPICS_DIR = "__kwire_topics"
PRODUCER_ID_FILE = "producer-id-block"
PRODUCER_ID_BLOCK = 1000


class AbsentReplica:
    """A partition of a topic this (cluster) broker holds no replica of: no files, an empty
    log for whoever looks before asking about leadership, which it never has."""

    absent = True
    offline = False
    log_start_offset = log_end_offset = high_watermark = 0
    leader_epoch = -1

    def __init__(self, path: str):
        self.path = path               # where its folder goes once this broker replicates it
        self.health = StorageHealth(path)

    def __repr__(self) -> str:
        return f"AbsentReplica({self.path!r})"

    def has_open_transaction(self, producer_id: int) -> bool:
        return False

    def size_bytes(self) -> int:
        return 0


@dataclasses.dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionLog | AbsentReplica]
    log_dir: str
    internal: bool = False


class LogManager:
    """Owns every topic's partition logs; synchronous, time passed in.

    ``config_for(overrides)`` resolves a topic's ``LogConfig`` from its
    per-topic overrides (kept here as strings, as Kafka does).  ``sparse`` (a cluster
    broker): a partition whose folder is missing at start is absent, not created empty.
    """

    def __init__(self, log_dirs: list[str], config_for: Callable[[dict[str, str]], LogConfig],
                 *, node_id: int, cluster_id: str | None = None, sparse: bool = False):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.config_for = config_for
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.sparse = sparse
        # AlterReplicaLogDirs for an absent replica: the dir its log is created in (Kafka's
        # preferredLogDirs; kept in memory only, as Kafka does)
        self.preferred_dirs: dict[tuple[str, int], str] = {}
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
                if self.sparse and not os.path.isdir(path):
                    parts.append(AbsentReplica(path))
                    continue
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
        for _topic, plog in self.all_partitions():
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
        for t, _plog in self.all_partitions():
            counts[t.log_dir] = counts.get(t.log_dir, 0) + 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def _save(self, topic: Topic) -> None:
        desc = {"name": topic.name, "topic_id": str(topic.topic_id),
                "partitions": len(topic.partitions), "configs": topic.configs,
                "internal": topic.internal}
        path = os.path.join(topic.log_dir, TOPICS_DIR, topic.name + ".json")
        write_atomically(path, json.dumps(desc, sort_keys=True).encode())

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], *,
                     now_ms: int, internal: bool = False, held=None) -> Topic:
        """Create a topic; raises KafkaApiError(TOPIC_ALREADY_EXISTS, or KAFKA_STORAGE_ERROR
        if its files cannot be written: nothing is left behind then).  The server runs the
        three steps apart, ``write_topic`` in a worker thread (kwire.runtime.blocking)."""
        d = self.pick_dir(name)
        return self.publish_topic(self.write_topic(name, num_partitions, configs, d,
                                                   now_ms=now_ms, internal=internal, held=held))

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
                    now_ms: int, internal: bool = False, topic_id: uuid.UUID | None = None,
                    held=None) -> Topic:
        """Write a new topic's files in log dir ``d``; returns it unpublished.  Blocking, and
        reads no shared state, so it may run in a worker thread.  Raises as ``create_topic``.
        ``topic_id`` is the cluster's id for the topic (a new one when None); ``held``, the
        partitions this broker replicates (None: all), the others are absent."""
        config = self.config_for(configs)
        for i in range(num_partitions):  # left over from a crash during an earlier create
            stale = os.path.join(d, f"{name}-{i}")
            if os.path.exists(stale):
                shutil.rmtree(stale)
        parts = self._open_new(d, name, range(num_partitions), config, now_ms, held)
        topic = Topic(name, topic_id or uuid.uuid4(), dict(configs), parts, d, internal)
        try:
            failed = [p.health.offline_reason for p in parts if p.offline]
            if failed:
                raise OSError(failed[0])
            self._save(topic)
        except OSError as exc:
            for plog in parts:
                if not plog.absent:
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
            if not plog.absent:
                plog.delete()

    def add_partitions(self, name: str, total: int, *, now_ms: int, held=None) -> Topic:
        """Grow a topic to ``total`` partitions; raises KafkaApiError(INVALID_PARTITIONS).
        The server runs ``write_partitions`` in a worker thread, then extends the list."""
        topic = self.topics[name]
        topic.partitions.extend(self.write_partitions(topic, total, now_ms=now_ms, held=held))
        return topic

    def write_partitions(self, topic: Topic, total: int, *, now_ms: int,
                         held=None) -> list[PartitionLog | AbsentReplica]:
        """Open ``topic``'s partitions up to ``total`` (those in ``held``, None: all; the others
        are absent) and persist the new count; returns the new entries, not yet in
        ``topic.partitions``.  Blocking; safe in a worker thread."""
        current = len(topic.partitions)
        if total <= current:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS,
                                f"Topic currently has {current} partitions, which is higher than "
                                f"or equal to the requested {total}.")
        new = self._open_new(topic.log_dir, topic.name, range(current, total), self.config_for(topic.configs),
                             now_ms, held)
        self._save(dataclasses.replace(topic, partitions=topic.partitions + new))
        return new

    @staticmethod
    def _open_new(d: str, name: str, indexes, config: LogConfig, now_ms: int, held) -> list:
        return [PartitionLog.open(os.path.join(d, f"{name}-{i}"), config, now_ms=now_ms, recover=False)
                if held is None or i in held else AbsentReplica(os.path.join(d, f"{name}-{i}"))
                for i in indexes]

    # -- replicas coming and going (a cluster broker) ----------------------------
    def open_replica(self, topic: Topic, index: int, now_ms: int) -> PartitionLog:
        """A new, empty log for partition ``index`` of ``topic``, which this broker does not hold
        yet, in the log dir AlterReplicaLogDirs asked for, else where its absent entry points (a
        folder left by a crash is removed first).  Not yet in ``topic.partitions``: see
        ``install_replica``.  Blocking; safe in a worker thread."""
        path = topic.partitions[index].path
        preferred = self.preferred_dirs.pop((topic.name, index), None)
        if preferred is not None:
            path = os.path.join(preferred, os.path.basename(path))
        if os.path.exists(path):
            shutil.rmtree(path)
        return PartitionLog.open(path, self.config_for(topic.configs), now_ms=now_ms, recover=False)

    def install_replica(self, topic: Topic, index: int, plog: PartitionLog) -> bool:
        """Put a log made by ``open_replica`` in place of the absent entry; False (and nothing
        changed) if the topic was deleted or the partition is held meanwhile.  No I/O."""
        if self.topics.get(topic.name) is not topic or not topic.partitions[index].absent:
            return False
        topic.partitions[index] = plog
        return True

    def detach_replica(self, name: str, index: int) -> PartitionLog | None:
        """Mark partition ``index`` of ``name`` absent; returns its log, whose files the caller
        deletes (``PartitionLog.delete``, blocking), or None if it was not held.  No I/O."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions) or topic.partitions[index].absent:
            return None
        plog = topic.partitions[index]
        topic.partitions[index] = AbsentReplica(plog.path)
        return plog

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides, persist them and apply them to its logs live."""
        topic = self.topics[name]
        config = self.config_for(configs)
        topic.configs = dict(configs)
        self._save(topic)
        for plog in topic.partitions:
            if not plog.absent:
                plog.update_config(config)

    def refresh_configs(self) -> None:
        """Re-resolve every topic's LogConfig (the broker's defaults changed) and apply it live."""
        for topic in self.topics.values():
            config = self.config_for(topic.configs)
            for plog in topic.partitions:
                if not plog.absent:
                    plog.update_config(config)

    def all_partitions(self):
        """(topic, log) of every partition this broker holds (absent ones are left out)."""
        for topic in self.topics.values():
            for plog in topic.partitions:
                if not plog.absent:
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
