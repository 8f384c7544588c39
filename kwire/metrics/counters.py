"""What the request path counts for the Prometheus endpoint: plain integers, nothing else.

``Broker.metrics`` is a ``BrokerMetrics`` when ``prometheus.listener`` is set and None
otherwise, so a broker without the endpoint pays one ``is None`` test per request,
per produced partition and per fetch response.  With it, the cost is

* per request: two ``perf_counter`` calls, a ``bisect`` into the time buckets and
  three integer additions (``request_done``);
* per produced partition: one dict lookup and three additions (``produced``);
* per fetch response: one dict lookup and three additions per topic (``fetched``).

Nothing here knows Prometheus: ``kwire.metrics.collector`` turns these integers
and the broker's own state into metric families when /metrics is scraped, on the
Trio thread, so no lock is needed anywhere.

Which produce and fetch failures count as *failed* follows Kafka's ReplicaManager:
the errors it treats as known client conditions (an unknown partition, not the
leader, a record or batch too large, a corrupt batch, a storage error, ...) are
answered but not counted; every other failure of a partition (a record the
validator refuses, a producer sequence or epoch error, too few in-sync replicas)
is.  That keeps ``failedproducerequests`` an alert on the broker, as in Kafka.
"""
from __future__ import annotations

import bisect
from time import perf_counter

from kwire.codecs.errors import ErrorCode as E

# Upper bounds of the request-time buckets, in ms (Kafka's TotalTimeMs unit).
TIME_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BOUNDS_S = tuple(ms / 1000 for ms in TIME_BUCKETS_MS)
MAX_VERSIONS = 64                    # request versions counted per API (the handlers stop at ~17)

# Request-metric keys besides the api_keys: Kafka counts a Fetch under "Fetch" and again
# under FetchConsumer or FetchFollower.
FETCH_CONSUMER, FETCH_FOLLOWER = -1, -2
FETCH_API_KEY = 1

# Per-topic counters, indexes into BrokerMetrics.topics[name] (Kafka's BrokerTopicMetrics).
MESSAGES_IN, BYTES_IN, BYTES_OUT, TOTAL_PRODUCE, FAILED_PRODUCE, TOTAL_FETCH, FAILED_FETCH = range(7)
TOPIC_COUNTERS = 7
ALL_TOPICS = ""                      # the key of the all-topics sums (no topic label)

# Kafka's ReplicaManager.appendToLocalLog answers these without marking FailedProduceRequestsPerSec
# ("supposed to indicate un-expected failures of a broker"); an internal topic is refused before.
PRODUCE_NOT_FAILED = frozenset({
    E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE,
    E.CORRUPT_MESSAGE, E.KAFKA_STORAGE_ERROR, E.UNKNOWN_TOPIC_ID, E.INVALID_TOPIC_EXCEPTION,
})
# ReplicaManager.readFromLocalLog's known errors, likewise not FailedFetchRequestsPerSec.
FETCH_NOT_FAILED = frozenset({
    E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_LEADER_EPOCH,
    E.FENCED_LEADER_EPOCH, E.REPLICA_NOT_AVAILABLE, E.KAFKA_STORAGE_ERROR, E.OFFSET_OUT_OF_RANGE,
    E.INCONSISTENT_TOPIC_ID, E.UNKNOWN_TOPIC_ID, E.TOPIC_AUTHORIZATION_FAILED,
})


class RequestStats:
    """One request type's count per version and time histogram (bucket counts, not cumulative)."""
    __slots__ = ("versions", "buckets", "seconds")

    def __init__(self):
        self.versions = [0] * MAX_VERSIONS
        self.buckets = [0] * (len(_BOUNDS_S) + 1)          # the last one is +Inf
        self.seconds = 0.0

    def add(self, version: int, elapsed_s: float) -> None:
        self.versions[version] += 1
        self.buckets[bisect.bisect_left(_BOUNDS_S, elapsed_s)] += 1
        self.seconds += elapsed_s


class BrokerMetrics:
    """Counters of one broker since it started; read by ``kwire.metrics.collector``."""

    def __init__(self):
        self.requests: dict[int, RequestStats] = {}
        self.topics: dict[str, list[int]] = {ALL_TOPICS: [0] * TOPIC_COUNTERS}
        self.listener_connections: dict[str, int] = {}

    # -- the request path -------------------------------------------------------------------
    def request_done(self, api_key: int, version: int, started: float, request=None) -> None:
        """A request handled (its response encoded): ``started`` is the ``perf_counter()``
        taken when it was decoded; ``request`` tells a follower's Fetch from a consumer's."""
        elapsed = perf_counter() - started
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        stats.add(version, elapsed)
        if api_key == FETCH_API_KEY:
            role = FETCH_FOLLOWER if fetch_replica_id(request, version) >= 0 else FETCH_CONSUMER
            stats = self.requests.get(role)
            if stats is None:
                stats = self.requests[role] = RequestStats()
            stats.add(version, elapsed)

    def _topic(self, name: str) -> list[int]:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = [0] * TOPIC_COUNTERS
        return counters

    def produced(self, topic: str, records: int, size: int) -> None:
        """A partition append of ``records`` records in ``size`` bytes succeeded."""
        for counters in (self._topic(topic), self.topics[ALL_TOPICS]):
            counters[MESSAGES_IN] += records
            counters[BYTES_IN] += size
            counters[TOTAL_PRODUCE] += 1

    def produce_failed(self, topic: str, code: int) -> None:
        """A partition append answered ``code``; counted as failed unless Kafka would not."""
        failed = code not in PRODUCE_NOT_FAILED
        for counters in (self._topic(topic), self.topics[ALL_TOPICS]):
            counters[TOTAL_PRODUCE] += 1
            counters[FAILED_PRODUCE] += failed

    def fetched(self, responses: list[dict]) -> None:
        """A consumer's Fetch response, before its records are materialized: each partition
        entry's ``records`` is empty or ``RecordSlices`` (with ``size``)."""
        total = self.topics[ALL_TOPICS]
        for topic in responses:
            name = topic["topic"]
            if name is None:              # an unknown topic id
                continue
            partitions = topic["partitions"]
            size = failed = 0
            for entry in partitions:
                records = entry["records"]
                if records:
                    size += records.size
                if entry["error_code"] not in FETCH_NOT_FAILED:
                    failed += 1
            for counters in (self._topic(name), total):
                counters[BYTES_OUT] += size
                counters[TOTAL_FETCH] += len(partitions)
                counters[FAILED_FETCH] += failed

    def connection_opened(self, listener: str) -> None:
        self.listener_connections[listener] = self.listener_connections.get(listener, 0) + 1

    def connection_closed(self, listener: str) -> None:
        self.listener_connections[listener] -= 1

    # -- scrape time ------------------------------------------------------------------------
    def forget_topics(self, existing) -> None:
        """Drop the counters of topics not in ``existing`` (deleted), as Kafka removes a
        deleted topic's metrics."""
        for name in [n for n in self.topics if n != ALL_TOPICS and n not in existing]:
            del self.topics[name]


def fetch_replica_id(request, version: int) -> int:
    """The replica id of a Fetch request (v15+ moved it into ReplicaState); -1 for a consumer."""
    if request is None:
        return -1
    if version < 15:
        return request.replica_id
    state = request.replica_state
    return state.replica_id if state is not None else -1
