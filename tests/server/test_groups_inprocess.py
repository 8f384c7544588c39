"""The group service through the real handlers, in-process, on Trio's MockClock.

Requests are built with kafka-python's classes, encoded and decoded as on the
wire, and handed to the registered handlers; the broker's clock follows Trio's
(``TrioClock``), so a 10 s session timeout or a 6 s rebalance delay passes in
no real time while the group timers run exactly as in ``kwire serve``.
"""
from __future__ import annotations

import contextlib
import uuid
import struct
import tempfile

import trio
import trio.testing
from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest

from kwire.admin.broker_config import load_broker_config
from kwire.server.broker import Broker
from kwire.runtime.clock import TrioClock
from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.handlers.registry import HANDLERS
from kwire.server.connection import RequestContext

JOIN, HEARTBEAT, SYNC, DESCRIBE = 11, 12, 14, 15
SESSION_MS = 10_000
REBALANCE_MS = 20_000
SUBSCRIPTION = struct.pack(">hih1si", 0, 1, 1, b"t", 0)   # ConsumerProtocolSubscription v0: ["t"], no user data


def run(test, **properties) -> None:
    """Run ``test(broker)`` against a broker on a mock clock that jumps whenever every task waits."""
    async def main():
        with trio.fail_after(600):      # mock seconds: a hang fails instead of spinning forever
            async with running_broker(properties) as broker:
                await test(broker)
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@contextlib.asynccontextmanager
async def running_broker(properties):
    with tempfile.TemporaryDirectory(prefix="kwire-groups-") as data_dir:
        config = load_broker_config(None, {"log.dirs": data_dir, "group.initial.rebalance.delay.ms": "0",
                                           **properties})
        broker = Broker(config, clock=TrioClock())
        broker.open()
        # created up front: its files are written in a worker thread, which MockClock's autojump cannot see
        broker.logs.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"}, now_ms=0, internal=True)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(broker.groups.run_timers)
                yield broker
                nursery.cancel_scope.cancel()
        finally:
            broker.close()


async def call(broker, api_key: int, version: int, **fields) -> dict:
    """One request through its registered handler, decoded from the bytes a client would send."""
    cls = messages.API_CLASSES[api_key][0]
    body = bytes(cls(version=version, **fields).encode(version=version))
    request = messages.decode_request(api_key, version, body, 0)
    ctx = RequestContext(broker=broker, api_key=api_key, api_version=version, correlation_id=1,
                         client_id="inproc", peer="127.0.0.1:40000")
    return await HANDLERS[api_key].func(ctx, request)


async def join(broker, group: str, member_id: str = "") -> dict:
    """JoinGroup v5; a new member does the MEMBER_ID_REQUIRED round trip first."""
    fields = dict(group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
                  group_instance_id=None, protocol_type="consumer",
                  protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])
    r = await call(broker, JOIN, 5, member_id=member_id, **fields)
    if r["error_code"] == E.MEMBER_ID_REQUIRED:
        r = await call(broker, JOIN, 5, member_id=r["member_id"], **fields)
    return r


async def sync(broker, group: str, r: dict) -> dict:
    assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m["member_id"], assignment=b"A")
                   for m in r["members"]]
    return await call(broker, SYNC, 3, group_id=group, generation_id=r["generation_id"], member_id=r["member_id"],
                      group_instance_id=None, assignments=assignments)


async def heartbeat(broker, group: str, r: dict) -> int:
    return (await call(broker, HEARTBEAT, 3, group_id=group, generation_id=r["generation_id"],
                       member_id=r["member_id"], group_instance_id=None))["error_code"]


async def state(broker, group: str) -> tuple[str, int]:
    g = (await call(broker, DESCRIBE, 4, groups=[group], include_authorized_operations=False))["groups"][0]
    return g["group_state"], len(g["members"])


def test_a_silent_member_expires_after_its_session_timeout():
    async def scenario(broker):
        r = await join(broker, "g")
        assert (r["error_code"], r["generation_id"]) == (E.NONE, 1)
        assert (await sync(broker, "g", r))["error_code"] == E.NONE
        assert await state(broker, "g") == ("Stable", 1)
        await trio.sleep(SESSION_MS / 1000 - 0.5)
        assert await state(broker, "g") == ("Stable", 1), "still within its session"
        await trio.sleep(1)
        assert await state(broker, "g") == ("Empty", 0), "expired by the timer task, not by a request"
        assert await heartbeat(broker, "g", r) == E.UNKNOWN_MEMBER_ID
    run(scenario)


def test_heartbeats_keep_a_member_and_the_survivor_rebalances_alone():
    async def scenario(broker):
        a = await join(broker, "g")
        async with trio.open_nursery() as nursery:      # b's join parks until a rejoins
            b_result = {}

            async def join_b():
                b_result.update(await join(broker, "g"))
            nursery.start_soon(join_b)
            await trio.sleep(1)
            assert await heartbeat(broker, "g", a) == E.REBALANCE_IN_PROGRESS
            a = await join(broker, "g", a["member_id"])
        b = b_result
        assert a["generation_id"] == b["generation_id"] == 2
        for r in (a, b):
            assert (await sync(broker, "g", r))["error_code"] == E.NONE
        # a heartbeats every 3 s for 30 s; b goes silent and is gone after its 10 s session
        for _ in range(10):
            await trio.sleep(3)
            error = await heartbeat(broker, "g", a)
            if error == E.REBALANCE_IN_PROGRESS:
                break
            assert error == E.NONE
        assert error == E.REBALANCE_IN_PROGRESS and trio.current_time() < 2 + SESSION_MS / 1000 + 3
        a = await join(broker, "g", a["member_id"])
        assert (a["error_code"], a["generation_id"], len(a["members"])) == (E.NONE, 3, 1)
    run(scenario)


def test_the_initial_rebalance_delay_waits_and_extends_for_new_members():
    async def scenario(broker):
        start = trio.current_time()
        answered = {}

        async def member(name, after):
            await trio.sleep(after)
            answered[name] = (await join(broker, "g"), trio.current_time() - start)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member, "a", 0)
            nursery.start_soon(member, "b", 1)
        # Kafka's InitialDelayedJoin: 3 s from the first join, then 3 s more because b arrived meanwhile
        for name in "ab":
            r, at = answered[name]
            assert (r["error_code"], r["generation_id"], at) == (E.NONE, 1, 6.0)
        leader = next(r for r, _ in answered.values() if r["leader"] == r["member_id"])
        assert len(leader["members"]) == 2
    run(scenario, **{"group.initial.rebalance.delay.ms": "3000"})


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    async def scenario(broker):
        a = await join(broker, "g")
        await sync(broker, "g", a)
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            b_result = {}

            async def join_b():
                b_result.update(await join(broker, "g"))
                b_result["at"] = trio.current_time() - start
            nursery.start_soon(join_b)
            # a keeps heartbeating (answered REBALANCE_IN_PROGRESS) but never rejoins
            while "at" not in b_result:
                await trio.sleep(3)      # heartbeats at 3, 6, ... 18 s; b is answered at 20 s
                if "at" not in b_result:
                    assert await heartbeat(broker, "g", a) == E.REBALANCE_IN_PROGRESS
        assert b_result["at"] == REBALANCE_MS / 1000
        assert (b_result["generation_id"], len(b_result["members"])) == (2, 1)
        assert await heartbeat(broker, "g", a) == E.UNKNOWN_MEMBER_ID
    run(scenario)


def test_offset_commit_and_fetch_v10_name_topics_by_id_and_v9_reads_the_same_offsets():
    """KIP-848's v10: topics by id; an unknown id is UNKNOWN_TOPIC_ID per partition, the others commit."""
    commit_cls, fetch_cls = messages.API_CLASSES[8][0], messages.API_CLASSES[9][0]
    CTopic, FGroup = commit_cls.OffsetCommitRequestTopic, fetch_cls.OffsetFetchRequestGroup

    async def scenario(broker):
        topic_id = broker.logs.create_topic("t", 2, {}, now_ms=0).topic_id
        stranger = uuid.uuid4()
        r = await call(broker, 8, 10, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                       group_instance_id=None, topics=[CTopic(topic_id=tid, partitions=[
                           CTopic.OffsetCommitRequestPartition(partition_index=p, committed_offset=5 + p,
                                                               committed_leader_epoch=-1, committed_metadata="m")
                           for p in (0, 1)]) for tid in (topic_id, stranger)])
        messages.encode_response(8, 10, r)
        assert [(t["topic_id"], [p["error_code"] for p in t["partitions"]]) for t in r["topics"]] == [
            (topic_id, [E.NONE, E.NONE]), (stranger, [E.UNKNOWN_TOPIC_ID, E.UNKNOWN_TOPIC_ID])]

        def offsets(response, key):
            (group,) = response["groups"]
            assert group["error_code"] == E.NONE
            return sorted((t[key], p["partition_index"], p["committed_offset"], p["error_code"])
                          for t in group["topics"] for p in t["partitions"])
        wanted = [FGroup.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0, 1])
                  for tid in (topic_id, stranger)]
        for topics in (wanted, None):      # listed by id, then all of them
            r = await call(broker, 9, 10, groups=[FGroup(group_id="g", member_id=None, member_epoch=-1,
                                                         topics=topics)], require_stable=False)
            messages.encode_response(9, 10, r)
            expected = [(topic_id, 0, 5, 0), (topic_id, 1, 6, 0)]
            if topics is not None:
                expected = sorted(expected + [(stranger, p, -1, E.UNKNOWN_TOPIC_ID) for p in (0, 1)])
            assert offsets(r, "topic_id") == expected
        r = await call(broker, 9, 9, groups=[FGroup(group_id="g", member_id=None, member_epoch=-1, topics=None)],
                       require_stable=False)
        assert offsets(r, "name") == [("t", 0, 5, 0), ("t", 1, 6, 0)]
        # DescribeGroups v6 (KIP-1043): an unknown group is GROUP_ID_NOT_FOUND with a message, v5 a Dead one
        for version, error in ((6, E.GROUP_ID_NOT_FOUND), (5, E.NONE)):
            r = await call(broker, DESCRIBE, version, groups=["nope"], include_authorized_operations=False)
            (d,) = r["groups"]
            assert (d["error_code"], d["group_state"]) == (error, "Dead")
            assert (d["error_message"] is not None) == (version >= 6)
    run(scenario)
