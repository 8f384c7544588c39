"""Reading one partition for the messages page: where to start (an offset, a time, the
beginning, the end), then records from there, each with its batch's codec.

The page shows each record's compression codec, which kafka-python's consumer records do not
carry, so the reader sends Metadata, ListOffsets and Fetch requests itself (kafka-python's
generated protocol classes) through kafka-python's connection manager (``Connections``: its
bootstrap, security settings and negotiated versions), and reads the fetched batches with
``kwire.console.batches``.  Fetch is v4-v12, which names topics (v13 names them by id),
read_uncommitted, without a fetch session.

Why not ``KafkaAccess.consumer()``: a KafkaConsumer starts its IO thread before it bootstraps
and, when the bootstrap fails, raises without stopping it, so every page of a dead cluster would
leave a thread behind.  ``Connections`` drives kafka-python's network loop on the calling
thread instead and closes everything, whatever happens.

Bounds, so a page answers whatever the partition or the cluster does:
- time: every request within the read's ``deadline`` (a monotonic time), at most
  ``REQUEST_TIMEOUT_MS`` each; ``ReadError`` when it passes;
- bytes: ``FETCH_MAX_BYTES`` a Fetch (a first batch larger than that still comes whole, as
  Kafka returns at least one batch, up to the broker's message.max.bytes), ``SCAN_BYTES`` a read;
- records: a read stops after ``limit`` records shown or ``SCAN_RECORDS`` examined.

Blocking: call from a worker thread (``await access.run(...)``).
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Callable

from kwire.console.batches import BatchProblem, Record, read_record_set

FETCH_MAX_BYTES = 1 << 20
SCAN_BYTES = 32 << 20
SCAN_RECORDS = 5000
REQUEST_TIMEOUT_MS = 8000
EARLIEST, LATEST = -2, -1                       # ListOffsets' special timestamps
NOT_LEADER_CODES = {6, 74, 75}                  # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH


class ReadError(Exception):
    """A read that could not be done; ``str()`` is the reason to show."""


async def _send_within(manager, request, node_id, timeout_ms: int):
    future = manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms)
    return await manager.wait_for(future, timeout_ms)


def _error(code: int, what: str) -> Exception:
    import kafka.errors as Errors
    return Errors.for_code(code)(what)


class Connections:
    """kafka-python's connection manager for one request, bootstrapped from ``client_config``
    (kafka-python keywords: bootstrap_servers, security) within ``bootstrap_timeout_ms``; its
    network loop runs on the calling thread.  A context manager that closes everything.
    Raises kafka-python's KafkaTimeoutError when no bootstrap server answers."""

    def __init__(self, client_config: dict, bootstrap_timeout_ms: int, client_id: str = "kwire-console-reader"):
        from kafka.net.manager import KafkaConnectionManager
        from kafka.net.selector import NetworkSelector
        config = {"client_id": client_id, "request_timeout_ms": REQUEST_TIMEOUT_MS, **client_config}
        self.net = NetworkSelector(**config)
        self.manager = KafkaConnectionManager(self.net, **config)
        self.bootstrap_timeout_ms = bootstrap_timeout_ms

    def __enter__(self) -> "Connections":
        try:
            self.manager.bootstrap(self.bootstrap_timeout_ms)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.manager.close()
        finally:
            self.net.close()


class PartitionReader:
    """One partition of ``topic`` through ``manager`` (a Connections' manager), within
    ``deadline``.  Raises ReadError, or kafka-python's errors (``access.error_text`` names them)."""

    def __init__(self, manager, topic: str, partition: int, deadline: float):
        self.manager = manager
        self.topic = topic
        self.partition = partition
        self.deadline = deadline
        self.partitions: int | None = None
        self._leader: int | None = None

    def _send(self, request, node_id: int | None = None):
        remaining_ms = int((self.deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            raise ReadError("the cluster did not answer in time")
        return self.manager.run(_send_within, self.manager, request, node_id, min(remaining_ms, REQUEST_TIMEOUT_MS))

    def leader(self, refresh: bool = False) -> int:
        """The partition's leader (a Metadata request the first time).  Raises ReadError when
        the topic or partition does not exist or the partition has no leader."""
        if self._leader is not None and not refresh:
            return self._leader
        from kafka.protocol.metadata import MetadataRequest
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)],
                                  allow_auto_topic_creation=False, min_version=4)
        response = self._send(request)
        topic = next((t for t in response.topics if t.name == self.topic), None)
        if topic is None or topic.error_code == 3:
            raise ReadError(f"there is no topic {self.topic!r}")
        if topic.error_code:
            raise _error(topic.error_code, f"topic {self.topic}")
        self.partitions = len(topic.partitions)
        found = next((p for p in topic.partitions if p.partition_index == self.partition), None)
        if found is None:
            raise ReadError(f"topic {self.topic!r} has no partition {self.partition} "
                            f"(it has {self.partitions}: 0-{self.partitions - 1})")
        if found.leader_id < 0:
            raise ReadError(f"partition {self.topic}-{self.partition} has no leader (offline)")
        self._leader = found.leader_id
        return self._leader

    def list_offset(self, timestamp: int) -> int | None:
        """ListOffsets: ``EARLIEST``, ``LATEST`` or the first offset whose timestamp is at or
        after ``timestamp`` (epoch ms); None when no record is that late."""
        from kafka.protocol.consumer import ListOffsetsRequest
        part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=self.partition, current_leader_epoch=-1, timestamp=timestamp)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, min_version=1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=self.topic, partitions=[part])])
        for attempt in (0, 1):
            response = self._send(request, self.leader(refresh=attempt > 0))
            answer = response.topics[0].partitions[0]
            if answer.error_code in NOT_LEADER_CODES and attempt == 0:
                continue
            if answer.error_code:
                raise _error(answer.error_code, f"offsets of {self.topic}-{self.partition}")
            return None if answer.offset < 0 else answer.offset
        raise AssertionError("unreachable")

    def fetch(self, offset: int):
        """One Fetch at ``offset``: (RecordSet, high_watermark, log_start_offset)."""
        from kafka.protocol.consumer import FetchRequest
        part = FetchRequest.FetchTopic.FetchPartition(
            partition=self.partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES)
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=FETCH_MAX_BYTES,
                               isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                               topics=[FetchRequest.FetchTopic(topic=self.topic, partitions=[part])],
                               forgotten_topics_data=[], min_version=4, max_version=12)
        for attempt in (0, 1):
            response = self._send(request, self.leader(refresh=attempt > 0))
            if getattr(response, "error_code", 0):
                raise _error(response.error_code, "fetch")
            answer = response.responses[0].partitions[0]
            if answer.error_code in NOT_LEADER_CODES and attempt == 0:
                continue
            if answer.error_code:
                raise _error(answer.error_code, f"fetch {self.topic}-{self.partition} at offset {offset}")
            return read_record_set(answer.records or b"", offset), answer.high_watermark, answer.log_start_offset
        raise AssertionError("unreachable")


@dataclass
class Scan:
    """What one read found."""
    records: list[Record]
    start_offset: int                   # the first offset examined
    next_offset: int                    # the offset after the last one examined
    log_start_offset: int
    high_watermark: int
    scanned: int = 0                    # records examined (matched or not)
    capped: bool = False                # stopped at SCAN_RECORDS/SCAN_BYTES before ``stop``
    timed_out: bool = False             # stopped at the deadline
    problems: list[BatchProblem] = field(default_factory=list)


def scan(reader: PartitionReader, start: int, stop: int | None, limit: int,
         match: Callable[[Record], bool] | None = None, *, keep_last: bool = False,
         max_records: int = SCAN_RECORDS, bounds: tuple[int, int] = (0, 0)) -> Scan:
    """Records from ``start`` up to ``stop`` (None: the high watermark as fetches find it) that
    ``match``: the first ``limit`` of them, or with ``keep_last`` the last ``limit``.
    ``bounds`` is (log start, high watermark) as known before the read."""
    kept: collections.deque[Record] | list[Record] = collections.deque(maxlen=limit) if keep_last else []
    result = Scan([], start, start, *bounds)
    position, bytes_read, full = start, 0, False
    while not full and (stop is None or position < stop):
        if result.scanned >= max_records or bytes_read >= SCAN_BYTES:
            result.capped = True
            break
        if time.monotonic() >= reader.deadline - 0.5:
            result.timed_out = True
            break
        found, high_watermark, log_start = reader.fetch(position)
        result.high_watermark, result.log_start_offset = high_watermark, log_start
        result.problems.extend(found.problems)
        bytes_read += found.bytes_read
        end = high_watermark if stop is None else min(stop, high_watermark)
        for record in found.records:
            if record.offset >= end:
                position = max(position, end)       # nothing readable between here and the end
                break
            result.scanned += 1
            position = record.offset + 1
            if match is None or match(record):
                kept.append(record)
                full = not keep_last and len(kept) >= limit
            if full or result.scanned >= max_records:
                break
        else:
            position = max(position, min(found.next_offset, end))   # past control batches too
        if position >= end or (not found.records and found.next_offset <= position):
            break                                   # at the end, or nothing whole to read yet
    result.records = list(kept)
    result.next_offset = position
    return result
