"""Incremental fetch sessions (KIP-227): the broker's FetchSessionCache, sans I/O.

A client that sends Fetch v7+ with ``session_epoch`` 0 asks for a session: the
broker answers the full fetch and, if the cache has room, a ``session_id``.
From then on the client sends only the partitions whose fetch state changed
(offset, max bytes, leader epoch...) and the ones to forget; the broker reads
every partition of the session and answers only those with something new.
With hundreds of partitions and most of them idle, both requests and
responses shrink from O(partitions) to O(changed partitions).

The rules, as in Kafka's FetchSession.scala (no code copied):

* request metadata ``(session_id, epoch)``: epoch 0 = full fetch, create a
  session; epoch -1 = full fetch, no session (what librdkafka and aiokafka
  always send); a non-zero ``session_id`` in a full fetch closes that session.
  Epoch > 0 = incremental: the session must exist (else
  FETCH_SESSION_ID_NOT_FOUND) and the epoch must be the session's next one
  (else INVALID_FETCH_SESSION_EPOCH); a session made with topic ids (Fetch
  v13+) can't be used by a v12- request or the other way round
  (FETCH_SESSION_TOPIC_ID_ERROR).  An incremental fetch that leaves the session
  empty closes it and is answered sessionless.
* epochs go 1, 2, ... 2**31-1, 1, ...
* an incremental response carries a partition when it has records, its high
  watermark or log start offset changed since the last answer, or it has an
  error (the cached high watermark is then set to -1 so the partition is sent
  again once the error clears).  A partition that returned records moves to the
  end of the session's order, so a large partition can't starve the others.
* the cache holds at most ``max.incremental.fetch.session.cache.slots``
  sessions (0 disables sessions).  When full, a new session may evict: first
  the least recently used session if unused for more than ``eviction_ms``
  (Kafka: 120 s); otherwise the least valuable evictable session, valued by
  (privileged, partitions, id), provided it is not more valuable than the new
  one.  Followers' sessions are privileged.  A session becomes evictable by
  anyone ``eviction_ms`` after its creation; a consumer's session is evictable
  at once by a follower's.

Eviction scans the sessions (at most the slot count) only when the cache is full and a
full fetch asks for a session: the common paths (incremental fetches, lookups) are O(1).
Time is passed in (``now_ms``); ids come from the ``random.Random`` given.

Raises nothing: errors are returned as ``SessionError`` contexts.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable, Iterable

from kwire.codecs.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EPOCH_MAX = 2**31 - 1
EVICTION_MS = 120_000          # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == EPOCH_MAX else epoch + 1


@dataclasses.dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a session: the fetch parameters last sent, the state last answered.

    Attribute names match kafka-python's decoded FetchPartition, so the fetch handler
    reads a cached partition and a requested one alike."""
    topic: str | None                 # None while a topic id does not resolve
    topic_id: object                  # uuid.UUID (v13+) or None
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1        # the fetcher's (a follower's) log start offset
    last_fetched_epoch: int = -1
    high_watermark: int = -1          # as last answered
    local_log_start_offset: int = -1  # as last answered

    def update_request(self, p) -> None:
        self.fetch_offset = p.fetch_offset
        self.partition_max_bytes = p.partition_max_bytes
        self.current_leader_epoch = getattr(p, "current_leader_epoch", -1)
        self.log_start_offset = getattr(p, "log_start_offset", -1)
        self.last_fetched_epoch = getattr(p, "last_fetched_epoch", -1)

    def must_respond(self, entry: dict) -> bool:
        """Whether an incremental response carries ``entry``; records what it answers."""
        respond = bool(entry["records"]) or entry.get("error_code", 0) != 0
        if entry["high_watermark"] != self.high_watermark:
            self.high_watermark = entry["high_watermark"]
            respond = True
        if entry["log_start_offset"] != self.local_log_start_offset:
            self.local_log_start_offset = entry["log_start_offset"]
            respond = True
        if entry.get("error_code", 0) != 0:
            self.high_watermark = -1
        return respond


def partition_key(uses_topic_ids: bool, topic: str | None, topic_id, partition: int) -> tuple:
    return (topic_id, partition) if uses_topic_ids else (topic, partition)


@dataclasses.dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[tuple, CachedPartition]        # in fetch order
    cached_size: int = 0
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    @property
    def value(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: less valuable sessions sort first."""
        return (self.privileged, self.cached_size, self.id)

    def update(self, wanted: Iterable[CachedPartition], forgotten: Iterable[tuple]) -> None:
        """Apply an incremental request: new or changed partitions, then forgotten keys."""
        for cp in wanted:
            key = partition_key(self.uses_topic_ids, cp.topic, cp.topic_id, cp.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = cp
            else:
                cached.update_request(cp)
        for key in forgotten:
            self.partitions.pop(key, None)

    def move_to_end(self, cp: CachedPartition) -> None:
        key = partition_key(self.uses_topic_ids, cp.topic, cp.topic_id, cp.partition)
        self.partitions[key] = self.partitions.pop(key)


# -- contexts: what one Fetch request does with the cache ---------------------------------

@dataclasses.dataclass
class SessionError:
    """Answer with ``error_code`` at top level, no partitions, session id 0."""
    error_code: ErrorCode


@dataclasses.dataclass
class Sessionless:
    """Read the request's partitions; answer them all with session id 0."""


@dataclasses.dataclass
class Full:
    """Read the request's partitions; answer them all and try to create a session."""
    privileged: bool
    uses_topic_ids: bool


@dataclasses.dataclass
class Incremental:
    """Read every partition of ``session``; answer only those with news."""
    session: FetchSession
    request_epoch: int


class FetchSessionCache:
    """The broker's sessions, bounded by ``max_entries`` (``max.incremental.fetch.session.cache.slots``)."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS, rng: random.Random | None = None):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._rng = rng or random.Random()

    def statistics(self) -> dict:
        return {"sessions": len(self.sessions), "max_entries": self.max_entries,
                "partitions": sum(s.cached_size for s in self.sessions.values()),
                "evictions": self.evictions}

    # -- request handling ---------------------------------------------------------------
    def new_context(self, version: int, session_id: int, epoch: int, privileged: bool,
                    wanted: Callable[[bool], list[CachedPartition]], forgotten: Callable[[bool], list[tuple]],
                    now_ms: int):
        """The context of one Fetch request.  ``wanted(uses_topic_ids)`` and
        ``forgotten(uses_topic_ids)`` give the request's partitions and forgotten keys, and
        are called only for an incremental fetch."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH or self.max_entries <= 0:
                return Sessionless()
            return Full(privileged, version >= 13)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return SessionError(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(wanted(session.uses_topic_ids), forgotten(session.uses_topic_ids))
        if not session.partitions:
            self.remove(session.id)
            return Sessionless()
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return Incremental(session, epoch)

    def epoch_still_current(self, context: Incremental) -> bool:
        """False when another request of the session came in while this one waited.  A session
        removed meanwhile (evicted, closed) still answers this request, as in Kafka: the next
        one gets FETCH_SESSION_ID_NOT_FOUND."""
        return context.session.epoch == next_epoch(context.request_epoch)

    def create_session(self, now_ms: int, privileged: bool, uses_topic_ids: bool,
                       partitions: list[CachedPartition]) -> int:
        """A new session holding ``partitions`` (in order), or INVALID_SESSION_ID when the cache
        is full and nothing may be evicted for it."""
        if len(self.sessions) >= self.max_entries and \
                not self._try_evict(privileged, (privileged, len(partitions), 0), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        table = {partition_key(uses_topic_ids, cp.topic, cp.topic_id, cp.partition): cp for cp in partitions}
        session = FetchSession(session_id, privileged, uses_topic_ids, now_ms, now_ms,
                               next_epoch(INITIAL_EPOCH), table)
        self.sessions[session_id] = session
        self.touch(session, now_ms)
        return session_id

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        aged = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or aged
        session.evictable_by_all = aged

    # -- internals ----------------------------------------------------------------------
    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, EPOCH_MAX)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, value: tuple[bool, int, int], now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        flag = "evictable_by_privileged" if privileged else "evictable_by_all"
        candidates = [s for s in self.sessions.values() if getattr(s, flag)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: s.value)
        if value < victim.value:
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.sessions.pop(session.id, None)
        self.evictions += 1
