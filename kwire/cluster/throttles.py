"""Replication throttles (Kafka's ReplicationQuotaManager), so a reassignment does not starve
producers.

Two quotas per broker, each a byte rate over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``:

* leader: ``leader.replication.throttled.rate``, over what this broker sends to followers
  of the partitions whose topic lists ``<partition>:<this broker>`` (or ``*``) in
  ``leader.replication.throttled.replicas``, for followers not in the ISR;
* follower: ``follower.replication.throttled.rate``, over what this broker fetches for the
  partitions its topic lists in ``follower.replication.throttled.replicas`` while this broker
  is not in their ISR.

While a quota is exceeded, a throttled partition is left out: the leader answers it with
no records, the follower does not ask for it.  In-sync replicas are never throttled.
"""
from __future__ import annotations

import collections

LONG_MAX = (1 << 63) - 1
LEADER_KEY = "leader.replication.throttled.replicas"
FOLLOWER_KEY = "follower.replication.throttled.replicas"

TopicPartition = tuple[str, int]


class WindowedRate:
    """Bytes per second over the last ``samples`` windows of ``window_ms`` (Kafka's Rate with
    SampledStat: the elapsed time counts at least ``samples - 1`` whole windows)."""

    def __init__(self, samples: int = 11, window_ms: int = 1000):
        self.samples = samples
        self.window_ms = window_ms
        self._windows: collections.deque[list[int]] = collections.deque()   # [start_ms, bytes]

    def record(self, nbytes: int, now_ms: int) -> None:
        if not self._windows or now_ms - self._windows[-1][0] >= self.window_ms:
            self._windows.append([now_ms, 0])
        self._windows[-1][1] += nbytes
        self._expire(now_ms)

    def _expire(self, now_ms: int) -> None:
        while self._windows and now_ms - self._windows[0][0] >= self.samples * self.window_ms:
            self._windows.popleft()

    def rate(self, now_ms: int) -> float:
        self._expire(now_ms)
        if not self._windows:
            return 0.0
        elapsed = max(now_ms - self._windows[0][0], (self.samples - 1) * self.window_ms)
        return sum(b for _, b in self._windows) * 1000.0 / elapsed


class ReplicationQuota:
    """One direction's quota: its rate limit, the partitions it applies to, the rate."""

    def __init__(self, samples: int = 11, window_ms: int = 1000):
        self.limit = LONG_MAX
        self.partitions: set[TopicPartition] = set()
        self.rate = WindowedRate(samples, window_ms)

    def throttled(self, tp: TopicPartition) -> bool:
        return self.limit < LONG_MAX and tp in self.partitions

    def exceeded(self, now_ms: int) -> bool:
        return self.limit < LONG_MAX and self.rate.rate(now_ms) > self.limit

    def holds_back(self, tp: TopicPartition, now_ms: int) -> bool:
        """Whether ``tp`` sits this fetch out."""
        return self.throttled(tp) and self.exceeded(now_ms)

    def record(self, nbytes: int, now_ms: int) -> None:
        if nbytes and self.limit < LONG_MAX:
            self.rate.record(nbytes, now_ms)


def throttled_partitions(value: str | None, partitions: int, broker_id: int) -> set[int]:
    """The partitions of a ``*.replication.throttled.replicas`` value that name ``broker_id``."""
    if not value:
        return set()
    value = value.strip()
    if value == "*":
        return set(range(partitions))
    found = set()
    for item in value.split(","):
        p, _, b = item.strip().partition(":")
        if p.strip().isdigit() and b.strip().isdigit() and int(b) == broker_id:
            found.add(int(p))
    return found


class ReplicationThrottles:
    """A broker's leader and follower quotas, refreshed from each ZooKeeper snapshot."""

    def __init__(self, node_id: int, config=None):
        """``config``: the broker's (its replication.quota.window.* keys); None: Kafka's defaults."""
        self.node_id = node_id
        samples = config.value_of("replication.quota.window.num") if config is not None else 11
        window_ms = config.value_of("replication.quota.window.size.seconds") * 1000 if config is not None else 1000
        self.leader = ReplicationQuota(samples, window_ms)
        self.follower = ReplicationQuota(samples, window_ms)

    def refresh(self, config, snap) -> None:
        """The rates from the broker config in force, the throttled partitions from the topic
        configs; a follower's only while this broker is not in the partition's ISR."""
        self.leader.limit = config.value_of("leader.replication.throttled.rate")
        self.follower.limit = config.value_of("follower.replication.throttled.rate")
        leader, follower = set(), set()
        for name, meta in snap.topics.items():
            configs = snap.configs.get(name, {})
            n = len(meta.assignment)
            leader |= {(name, p) for p in throttled_partitions(configs.get(LEADER_KEY), n, self.node_id)}
            for p in throttled_partitions(configs.get(FOLLOWER_KEY), n, self.node_id):
                state = snap.states.get((name, p))
                if state is None or self.node_id not in state.isr:
                    follower.add((name, p))
        self.leader.partitions, self.follower.partitions = leader, follower
