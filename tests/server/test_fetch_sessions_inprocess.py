"""Fetch sessions, topic ids, DescribeTopicPartitions and advertised versions through a real
``Connection`` (kwire.server.connection) over memory streams, requests built with kafka-python's
generated classes (see test_connection_inprocess)."""
from __future__ import annotations

import uuid

import trio

from kafka.protocol.admin import DeleteTopicsRequest, DescribeTopicPartitionsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kwire.codecs.errors import ErrorCode as E
from tests.log.logkit import build_batch, decode
from tests.server.test_connection_inprocess import connected, create_topic, produce_frame, real_time, run

Topic = FetchRequest.FetchTopic
Forgotten = FetchRequest.ForgottenTopic


def fetch(version: int, topics: dict, *, session_id=0, epoch=0, forgotten=(), max_wait_ms=0) -> dict:
    """Fetch fields; ``topics`` maps a name (v12-) or id (v13+) to {partition: offset}."""
    key = "topic_id" if version >= 13 else "topic"
    return dict(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=session_id, session_epoch=epoch, rack_id="",
                forgotten_topics_data=[Forgotten(**{key: t}, partitions=list(ps)) for t, ps in forgotten],
                topics=[Topic(**{key: t}, partitions=[Topic.FetchPartition(
                    partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=1 << 20) for p, o in ps.items()])
                        for t, ps in topics.items()])


def answered(r) -> dict:
    """{(topic or id, partition): (error, high watermark, values)}"""
    return {(t.topic_id if t.topic_id and not t.topic else t.topic, p.partition_index):
            (p.error_code, p.high_watermark, [v for _, _, v in decode(p.records or b"")])
            for t in r.responses for p in t.partitions}


async def produce(client, broker, topic: str, partition: int, *values: bytes) -> None:
    await client.send(produce_frame(client, topic, build_batch(list(values), timestamp=broker.clock.now_ms()),
                                    partition))
    r = await client.response()
    assert r.responses[0].partition_responses[0].error_code == E.NONE


async def topic_id(client, name: str):
    meta = await client.call(MetadataRequest, 12, topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return meta.topics[0].topic_id


def test_incremental_fetches_carry_only_partitions_with_news(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "many", partitions=20)
            for p in range(20):
                await produce(client, broker, "many", p, b"v%d" % p)
            r = await client.call(FetchRequest, 12, **fetch(12, {"many": {p: 0 for p in range(20)}}))
            assert r.error_code == E.NONE and r.session_id != 0
            assert len(answered(r)) == 20
            sid = r.session_id
            # nothing changed: an empty incremental answer, the client sending no partitions
            r = await client.call(FetchRequest, 12, **fetch(12, {"many": {p: 1 for p in range(20)}},
                                                             session_id=sid, epoch=1))
            assert (r.error_code, r.session_id, answered(r)) == (E.NONE, sid, {})
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=2))
            assert answered(r) == {}
            await produce(client, broker, "many", 7, b"new")
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=3))
            assert answered(r) == {("many", 7): (E.NONE, 2, [b"new"])}
            # forget partition 7, then new records there are not sent
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=4,
                                                             forgotten=[("many", [7])]))
            await produce(client, broker, "many", 7, b"unseen")
            await produce(client, broker, "many", 3, b"seen")
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=5))
            assert answered(r) == {("many", 3): (E.NONE, 2, [b"seen"])}
            assert broker.fetch_sessions.sessions[sid].cached_size == 19
    run(scenario)


def test_an_incremental_long_poll_wakes_on_a_session_partition(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "lp", partitions=3)
            r = await client.call(FetchRequest, 12, **fetch(12, {"lp": {0: 0, 1: 0, 2: 0}}))
            sid = r.session_id
            await client.send(client.frame(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=1,
                                                                      max_wait_ms=5000)))
            await trio.sleep(1)                            # parked (mock clock)
            await produce_later(client, broker)
            r = await client.response()
            assert answered(r) == {("lp", 2): (E.NONE, 1, [b"late"])}
    run(scenario)


async def produce_later(client, broker):
    # the produce goes through the same connection: pipelined behind the parked fetch, it
    # would wait for it; so append directly, as another connection's produce would
    broker.logs.partition("lp", 2).append(build_batch([b"late"], timestamp=broker.clock.now_ms()),
                                          now_ms=broker.clock.now_ms())
    broker.notify_appended([("lp", 2)])


def test_session_errors_and_recovery(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "s", partitions=2)
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=424242, epoch=1))
            assert (r.error_code, r.session_id, r.responses) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])
            r = await client.call(FetchRequest, 12, **fetch(12, {"s": {0: 0, 1: 0}}))
            sid = r.session_id
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=5))
            assert r.error_code == E.INVALID_FETCH_SESSION_EPOCH
            r = await client.call(FetchRequest, 13, **fetch(13, {}, session_id=sid, epoch=1))
            assert r.error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
            broker.fetch_sessions.remove(sid)             # evicted
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=1))
            assert r.error_code == E.FETCH_SESSION_ID_NOT_FOUND
            # what clients do next: a full fetch naming the lost session gets a new one
            r = await client.call(FetchRequest, 12, **fetch(12, {"s": {0: 0, 1: 0}}, session_id=sid, epoch=0))
            assert r.error_code == E.NONE and r.session_id not in (0, sid) and len(answered(r)) == 2
    run(scenario)


def test_no_sessions_when_the_cache_has_no_slots_and_none_for_epoch_minus_one(tmp_path):
    async def scenario():
        async with connected(tmp_path, **{"max.incremental.fetch.session.cache.slots": "0"}) as (broker, client):
            await create_topic(client, "z", partitions=2)
            r = await client.call(FetchRequest, 12, **fetch(12, {"z": {0: 0, 1: 0}}))
            assert (r.error_code, r.session_id, len(answered(r))) == (E.NONE, 0, 2)
        async with connected(tmp_path / "b") as (broker, client):
            await create_topic(client, "z", partitions=2)
            r = await client.call(FetchRequest, 12, **fetch(12, {"z": {0: 0, 1: 0}}, epoch=-1))
            assert (r.session_id, len(answered(r))) == (0, 2) and not broker.fetch_sessions.sessions
    run(scenario)


def test_fetch_by_topic_id_unknown_and_inconsistent_ids(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "ids", partitions=1)
            await produce(client, broker, "ids", 0, b"a")
            old = await topic_id(client, "ids")
            assert old == broker.logs.get("ids").topic_id
            r = await client.call(FetchRequest, 17, **fetch(17, {old: {0: 0}}))
            assert r.responses[0].topic_id == old and answered(r)[(old, 0)] == (E.NONE, 1, [b"a"])
            sid = r.session_id
            stranger = uuid.uuid4()
            r = await client.call(FetchRequest, 17, **fetch(17, {stranger: {0: 0}}, epoch=-1))
            assert answered(r) == {(stranger, 0): (E.UNKNOWN_TOPIC_ID, -1, [])}
            with real_time():
                d = await client.call(DeleteTopicsRequest, 6, timeout_ms=1000, topics=[
                    DeleteTopicsRequest.DeleteTopicState(name="ids", topic_id=None)])
                assert d.responses[0].error_code == E.NONE
            await create_topic(client, "ids", partitions=1)
            assert await topic_id(client, "ids") != old
            # the session resolved the old id to "ids", which now has another id
            r = await client.call(FetchRequest, 17, **fetch(17, {}, session_id=sid, epoch=1))
            assert answered(r) == {(old, 0): (E.INCONSISTENT_TOPIC_ID, -1, [])}
            r = await client.call(FetchRequest, 17, **fetch(17, {old: {0: 0}}, epoch=-1))
            assert answered(r) == {(old, 0): (E.UNKNOWN_TOPIC_ID, -1, [])}
    run(scenario)


def test_describe_topic_partitions_pages_with_a_cursor(tmp_path):
    Req = DescribeTopicPartitionsRequest

    async def describe(client, names=(), limit=2000, cursor=None):
        return await client.call(Req, 0, topics=[Req.TopicRequest(name=n) for n in names],
                                 response_partition_limit=limit,
                                 cursor=Req.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)

    def rows(r):
        return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics]

    async def scenario():
        async with connected(tmp_path, **{"max.request.partition.size.limit": "4"}) as (broker, client):
            await create_topic(client, "b", partitions=3)
            await create_topic(client, "a", partitions=2)
            r = await describe(client, limit=3)
            assert rows(r) == [("a", 0, [0, 1]), ("b", 0, [0])]
            assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("b", 1)
            assert r.topics[0].topic_id == broker.logs.get("a").topic_id
            assert r.topics[0].partitions[0].eligible_leader_replicas == []
            r = await describe(client, limit=3, cursor=("b", 1))
            assert rows(r) == [("b", 0, [1, 2])] and r.next_cursor is None
            r = await describe(client, limit=100)            # capped by max.request.partition.size.limit
            assert rows(r) == [("a", 0, [0, 1]), ("b", 0, [0, 1])] and r.next_cursor.partition_index == 2
            r = await describe(client, ["b", "nope", "a"], limit=2)
            assert rows(r) == [("a", 0, [0, 1])]
            assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("b", 0)
            r = await describe(client, ["b", "nope"], cursor=("b", 2))
            assert rows(r) == [("b", 0, [2]), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, [])]
            r = await describe(client, ["a"], cursor=("b", 0))
            assert rows(r) == [("a", E.INVALID_REQUEST, [])]
    run(scenario)


def test_advertised_versions_are_kafka_4_2s(tmp_path):
    """Fetch v18 (its replica high watermark is a follower's tagged field, ignored), Metadata
    v13, DescribeTopicPartitions and FindCoordinator v6 as Kafka 4.2 advertises them; ListOffsets
    v11 (kafka-python infers a broker's release from it: 4.2), with its -6 (earliest pending
    upload: none without tiered storage)."""
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            v = await client.call(ApiVersionsRequest, 3, client_software_name="t", client_software_version="1")
            ranges = {k.api_key: (k.min_version, k.max_version) for k in v.api_keys}
            assert ranges[1] == (4, 18) and ranges[2] == (1, 11) and ranges[3] == (0, 13) and ranges[75] == (0, 0)
            assert ranges[10] == (0, 6) and ranges[15] == (0, 6)
            await create_topic(client, "lo", partitions=1)
            await produce(client, broker, "lo", 0, b"x", b"y")
            T = ListOffsetsRequest.ListOffsetsTopic
            for version in (10, 11):
                r = await client.call(ListOffsetsRequest, version, replica_id=-1, isolation_level=0, timeout_ms=1000,
                                      topics=[T(name="lo", partitions=[T.ListOffsetsPartition(
                                          partition_index=0, current_leader_epoch=-1, timestamp=ts)
                                          for ts in (-1, -2, -5, -6)])])
                assert [p.offset for p in r.topics[0].partitions] == [2, 0, -1, -1]
    run(scenario)


def test_idle_partitions_are_skipped_but_a_recreated_empty_topic_is_still_inconsistent(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "quiet", partitions=2)
            old = await topic_id(client, "quiet")
            r = await client.call(FetchRequest, 17, **fetch(17, {old: {0: 0, 1: 0}}))
            sid = r.session_id
            r = await client.call(FetchRequest, 17, **fetch(17, {}, session_id=sid, epoch=1))
            assert answered(r) == {}
            with real_time():
                await client.call(DeleteTopicsRequest, 6, timeout_ms=1000, topics=[
                    DeleteTopicsRequest.DeleteTopicState(name="quiet", topic_id=None)])
            await create_topic(client, "quiet", partitions=2)      # empty again: same offsets
            r = await client.call(FetchRequest, 17, **fetch(17, {}, session_id=sid, epoch=2))
            assert answered(r) == {(old, 0): (E.INCONSISTENT_TOPIC_ID, -1, []),
                                   (old, 1): (E.INCONSISTENT_TOPIC_ID, -1, [])}
    run(scenario)
