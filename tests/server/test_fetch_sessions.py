"""kwire.services.fetch_sessions without I/O: contexts, epochs, response filtering and eviction, as in
Kafka's FetchSessionTest (time and ids are passed in, so every rule is checked directly)."""
from __future__ import annotations

import random
import uuid

from kwire.codecs.errors import ErrorCode as E
from kwire.services.fetch_sessions import (
    EPOCH_MAX, FINAL_EPOCH, CachedPartition, FetchSessionCache, Full, Incremental, SessionError, Sessionless,
    next_epoch,
)


def parts(n: int, topic: str = "t", topic_id=None) -> list[CachedPartition]:
    return [CachedPartition(topic, topic_id, i, fetch_offset=0, partition_max_bytes=1000) for i in range(n)]


def context(cache, session_id, epoch, *, version=12, wanted=(), forgotten=(), now=0, privileged=False):
    return cache.new_context(version, session_id, epoch, privileged, lambda ids: list(wanted),
                             lambda ids: list(forgotten), now)


def entry(hw=10, lso=0, records=b"", error=0) -> dict:
    return {"high_watermark": hw, "log_start_offset": lso, "records": records, "error_code": error}


def test_epoch_sequence_wraps_to_one_and_final_stays_final():
    assert [next_epoch(e) for e in (0, 1, 41)] == [1, 2, 42]
    assert next_epoch(EPOCH_MAX) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_contexts():
    cache = FetchSessionCache(10)
    assert isinstance(context(cache, 0, -1), Sessionless)
    full = context(cache, 0, 0, version=13)
    assert isinstance(full, Full) and full.uses_topic_ids and not full.privileged
    assert isinstance(context(cache, 0, 0, privileged=True), Full)
    assert isinstance(FetchSessionCache(0).new_context(12, 0, 0, False, None, None, 0), Sessionless), \
        "0 slots disables sessions"


def test_a_full_fetch_naming_a_session_closes_it():
    cache = FetchSessionCache(10, rng=random.Random(1))
    sid = cache.create_session(0, False, False, parts(3))
    assert isinstance(context(cache, sid, 0), Full)
    assert sid not in cache.sessions
    sid = cache.create_session(0, False, False, parts(3))
    assert isinstance(context(cache, sid, FINAL_EPOCH), Sessionless)
    assert sid not in cache.sessions


def test_incremental_errors():
    cache = FetchSessionCache(10)
    assert context(cache, 1234, 1) == SessionError(E.FETCH_SESSION_ID_NOT_FOUND)
    sid = cache.create_session(0, False, False, parts(2))
    assert context(cache, sid, 2) == SessionError(E.INVALID_FETCH_SESSION_EPOCH)
    assert context(cache, sid, 1, version=13) == SessionError(E.FETCH_SESSION_TOPIC_ID_ERROR)
    ids = cache.create_session(0, False, True, parts(2, None, uuid.uuid4()))
    assert context(cache, ids, 1, version=12) == SessionError(E.FETCH_SESSION_TOPIC_ID_ERROR)


def test_incremental_updates_adds_and_forgets_and_bumps_the_epoch():
    cache = FetchSessionCache(10)
    sid = cache.create_session(0, False, False, parts(3))
    moved = CachedPartition("t", None, 1, fetch_offset=7, partition_max_bytes=500)
    added = CachedPartition("u", None, 0, fetch_offset=3, partition_max_bytes=1000)
    ctx = context(cache, sid, 1, wanted=[moved, added], forgotten=[("t", 0)], now=5)
    assert isinstance(ctx, Incremental)
    session = cache.sessions[sid]
    assert list(session.partitions) == [("t", 1), ("t", 2), ("u", 0)]
    assert (session.partitions[("t", 1)].fetch_offset, session.partitions[("t", 1)].partition_max_bytes) == (7, 500)
    assert session.epoch == 2 and session.last_used_ms == 5 and session.cached_size == 3
    assert cache.epoch_still_current(ctx)
    assert isinstance(context(cache, sid, 2), Incremental)
    assert not cache.epoch_still_current(ctx), "a later request of the session came in"


def test_forgetting_every_partition_closes_the_session():
    cache = FetchSessionCache(10)
    sid = cache.create_session(0, False, False, parts(2))
    assert isinstance(context(cache, sid, 1, forgotten=[("t", 0), ("t", 1)]), Sessionless)
    assert sid not in cache.sessions


def test_sessions_by_topic_id_key_partitions_by_id():
    tid = uuid.uuid4()
    cache = FetchSessionCache(10)
    sid = cache.create_session(0, False, True, parts(2, None, tid))
    context(cache, sid, 1, version=17, forgotten=[(tid, 0)])
    assert list(cache.sessions[sid].partitions) == [(tid, 1)]


def test_must_respond_rules():
    cp = CachedPartition("t", None, 0, 0, 100, high_watermark=10, local_log_start_offset=0)
    assert not cp.must_respond(entry())
    assert cp.must_respond(entry(records=b"x"))
    assert cp.must_respond(entry(hw=11)) and cp.high_watermark == 11
    assert not cp.must_respond(entry(hw=11))
    assert cp.must_respond(entry(hw=11, lso=4)) and cp.local_log_start_offset == 4
    assert cp.must_respond(entry(hw=11, lso=4, error=6)) and cp.high_watermark == -1
    assert cp.must_respond(entry(hw=11, lso=4)), "sent again once the error clears"


def test_full_cache_evicts_a_stale_session_first():
    cache = FetchSessionCache(2, eviction_ms=100)
    a = cache.create_session(0, False, False, parts(5))
    b = cache.create_session(50, False, False, parts(5))
    assert cache.create_session(60, False, False, parts(1)) == 0, "nothing stale, nothing evictable yet"
    c = cache.create_session(101, False, False, parts(1))
    assert c and a not in cache.sessions and b in cache.sessions and cache.evictions == 1


def test_eviction_by_value_once_sessions_are_old_enough():
    cache = FetchSessionCache(2, eviction_ms=100)
    small = cache.create_session(0, False, False, parts(2))
    big = cache.create_session(0, False, False, parts(50))
    for sid in (small, big):                      # used recently, but created long ago
        context(cache, sid, 1, now=150)
    assert cache.create_session(160, False, False, parts(1)) == 0, "a smaller session can't evict"
    new = cache.create_session(160, False, False, parts(10))
    assert new and small not in cache.sessions and big in cache.sessions


def test_followers_evict_young_consumer_sessions_but_not_the_reverse():
    cache = FetchSessionCache(1, eviction_ms=100)
    consumer = cache.create_session(0, False, False, parts(100))
    follower = cache.create_session(10, True, False, parts(1))
    assert follower and consumer not in cache.sessions
    assert cache.create_session(20, False, False, parts(500)) == 0, "a consumer can't evict a follower"
    cache.touch(cache.sessions[follower], 200)
    assert cache.create_session(250, False, False, parts(500)) == 0, "nor an aged one: privileged sorts last"


def test_session_ids_are_unique_and_never_zero():
    cache = FetchSessionCache(1000, rng=random.Random(7))
    ids = {cache.create_session(0, False, False, parts(1)) for _ in range(1000)}
    assert len(ids) == 1000 and 0 not in ids
    assert cache.statistics()["sessions"] == 1000
