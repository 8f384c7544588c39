"""Share-group APIs in-process: a real Connection over memory streams, the mock clock.

Share sessions and their errors, ApiVersions gating, a classic group's id refused, the
acknowledgement errors, and a ShareFetch long poll woken by new records.
"""
from __future__ import annotations

import base64

import trio
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from tests.log.logkit import build_batch
from tests.server.test_connection_inprocess import connected, create_topic, real_time, run

HEARTBEAT, DESCRIBE, FETCH, ACK = (messages.API_CLASSES[k][0] for k in (76, 77, 78, 79))
FetchTopic = FETCH.FetchTopic
AckTopic = ACK.AcknowledgeTopic
# api_key -> the versions advertised (single node: the persister RPCs 83-87 are a cluster's)
SHARE_VERSIONS = {76: (0, 1), 77: (0, 1), 78: (0, 2), 79: (0, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
SHARE_KEYS = set(SHARE_VERSIONS)


async def setup(client, broker, group="g", topic="t"):
    with real_time():
        await create_topic(client, topic)
    # no worker-thread file work under the mock clock: the topic the group's records go to is
    # made here (the heartbeat would create it)
    if broker.logs.get("__consumer_offsets") is None:
        broker.logs.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"}, now_ms=0, internal=True)
    r = await client.call(HEARTBEAT, 1, group_id=group, member_id="m-1", member_epoch=0, rack_id=None,
                          subscribed_topic_names=[topic])
    assert r.error_code == 0 and r.member_epoch > 0
    topic_id = broker.logs.get(topic).topic_id
    assert [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions] == [(topic_id, [0])]
    # no worker-thread file work under the mock clock: the state topic is made here, the group
    # config (kwire.services.group_configs, tested through a client elsewhere) set directly
    broker.logs.create_topic("__share_group_state", 1, {"cleanup.policy": "compact"}, now_ms=0, internal=True)
    broker.shares.coordinator.set_offset_reset(group, "earliest")
    return topic_id


def append(broker, topic, values):
    broker.logs.partition(topic, 0).append(build_batch(values), now_ms=0)
    broker.notify_appended([(topic, 0)])


def fetch(topic_id, epoch, acks=(), partitions=(0,), wait=0, member="m-1"):
    parts = [FetchTopic.FetchPartition(partition_index=p, acknowledgement_batches=[
        FetchTopic.FetchPartition.AcknowledgementBatch(first_offset=f, last_offset=lst, acknowledge_types=[t])
        for f, lst, t in acks]) for p in partitions]
    return dict(group_id="g", member_id=member, share_session_epoch=epoch, max_wait_ms=wait, min_bytes=1,
                max_bytes=1 << 20, max_records=500, batch_size=500,
                topics=[FetchTopic(topic_id=topic_id, partitions=parts)], forgotten_topics_data=[])


def test_share_apis_are_advertised_at_their_versions_unless_turned_off(tmp_path):
    async def scenario():
        async with connected(tmp_path / "on") as (_, client):
            r = await client.call(ApiVersionsRequest, 3, client_software_name="t", client_software_version="1")
            assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys
                    if k.api_key in SHARE_KEYS | {83, 84, 85, 86, 87}} == SHARE_VERSIONS
        for off in ({"group.share.enable": "false"}, {"group.coordinator.rebalance.protocols": "classic,consumer"}):
            async with connected(tmp_path / str(len(off)) / next(iter(off)), **off) as (_, client):
                r = await client.call(ApiVersionsRequest, 3, client_software_name="t", client_software_version="1")
                assert not SHARE_KEYS & {k.api_key for k in r.api_keys}
    run(scenario)


def test_version_0_the_coordinator_names_the_member_and_fetch_has_no_max_records(tmp_path):
    """The Java 4.0 client's v0: it joins with an empty member id and parses the one it gets as a
    Kafka Uuid (22 characters of URL-safe base64); its ShareFetch has PartitionMaxBytes, no MaxRecords."""
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            with real_time():
                await create_topic(client, "t")
            for internal in ("__consumer_offsets", "__share_group_state"):   # no worker-thread file work
                broker.logs.create_topic(internal, 1, {"cleanup.policy": "compact"}, now_ms=0, internal=True)
            broker.shares.coordinator.set_offset_reset("g", "earliest")
            r = await client.call(HEARTBEAT, 0, group_id="g", member_id="", member_epoch=0, rack_id=None,
                                  subscribed_topic_names=["t"])
            member = r.member_id
            assert r.error_code == 0 and r.member_epoch > 0 and len(member) == 22
            assert base64.urlsafe_b64decode(member + "==") and not member.startswith("-")
            tid = broker.logs.get("t").topic_id
            assert [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions] == [(tid, [0])]
            again = await client.call(HEARTBEAT, 0, group_id="g", member_id=member, member_epoch=r.member_epoch,
                                      rack_id=None, subscribed_topic_names=None)
            assert (again.error_code, again.member_id, again.assignment) == (0, member, None)
            append(broker, "t", [b"a", b"b"])
            fields = fetch(tid, 0, member=member)
            del fields["max_records"], fields["batch_size"]
            for t in fields["topics"]:
                for p in t.partitions:
                    p.partition_max_bytes = 1 << 20
            f = await client.call(FETCH, 0, **fields)
            part = f.responses[0].partitions[0]
            assert f.error_code == 0
            assert [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records] == [(0, 1, 1)]
            a = await client.call(ACK, 0, group_id="g", member_id=member, share_session_epoch=1, topics=[
                AckTopic(topic_id=tid, partitions=[AckTopic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                    AckTopic.AcknowledgePartition.AcknowledgementBatch(first_offset=0, last_offset=1,
                                                                       acknowledge_types=[1])])])])
            assert [(p.partition_index, p.error_code) for p in a.responses[0].partitions] == [(0, 0)]
            assert broker.shares.coordinator.partitions[("g", tid, 0)].spso == 2
    run(scenario)


def test_share_session_epochs_and_their_errors(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            tid = await setup(client, broker)
            append(broker, "t", [b"a", b"b", b"c"])
            assert (await client.call(FETCH, 1, **fetch(tid, 1))).error_code == E.SHARE_SESSION_NOT_FOUND
            assert (await client.call(FETCH, 1, **fetch(tid, 0, member="stranger"))).error_code == E.UNKNOWN_MEMBER_ID
            r = await client.call(FETCH, 1, **fetch(tid, 0))
            part = r.responses[0].partitions[0]
            assert (r.error_code, r.acquisition_lock_timeout_ms) == (0, 30000)
            assert [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records] == [(0, 2, 1)]
            assert part.records                                   # the whole batch, as stored
            assert (await client.call(FETCH, 1, **fetch(tid, 5))).error_code == E.INVALID_SHARE_SESSION_EPOCH
            r = await client.call(FETCH, 1, **fetch(tid, 1, acks=[(0, 0, 1), (5, 5, 1)]))
            assert r.error_code == 0
            assert r.responses[0].partitions[0].acknowledge_error_code == E.INVALID_RECORD_STATE     # 5 not held
            a = await client.call(ACK, 1, group_id="g", member_id="m-1", share_session_epoch=0, topics=[])
            assert a.error_code == E.INVALID_SHARE_SESSION_EPOCH
            a = await client.call(ACK, 1, group_id="g", member_id="m-1", share_session_epoch=2, topics=[
                AckTopic(topic_id=tid, partitions=[AckTopic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                    AckTopic.AcknowledgePartition.AcknowledgementBatch(first_offset=1, last_offset=2,
                                                                       acknowledge_types=[2])])])])
            assert [(p.partition_index, p.error_code) for p in a.responses[0].partitions] == [(0, 0)]
            r = await client.call(FETCH, 1, **fetch(tid, 3))          # 1-2 released: delivered again
            assert [(x.first_offset, x.last_offset, x.delivery_count)
                    for x in r.responses[0].partitions[0].acquired_records] == [(1, 2, 2)]
            r = await client.call(FETCH, 1, **fetch(tid, -1, acks=[(1, 2, 1)]))     # close, accepting
            assert r.error_code == 0 and r.responses[0].partitions[0].acknowledge_error_code == 0
            assert r.responses[0].partitions[0].records == b""    # empty, never null (librdkafka rejects null)
            assert broker.shares.coordinator.partitions[("g", tid, 0)].spso == 3
            # DescribeGroups: v5 describes the share group (kwire's view), v6 says it is not classic, as Kafka
            d5, d6 = [(await client.call(DescribeGroupsRequest, v, groups=["g"],
                                         include_authorized_operations=False)).groups[0] for v in (5, 6)]
            assert (d5.error_code, d5.protocol_type, len(d5.members)) == (0, "share", 1)
            assert (d6.error_code, d6.group_state, d6.members) == (E.GROUP_ID_NOT_FOUND, "Dead", [])
            assert d6.error_message == "Group g is not a classic group."
    run(scenario)


def test_a_classic_group_id_is_refused(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            with real_time():
                await create_topic(client, "t")
            Topic = OffsetCommitRequest.OffsetCommitRequestTopic
            with real_time():      # creates __consumer_offsets in a worker thread
                c = await client.call(OffsetCommitRequest, 2, group_id="classic", generation_id_or_member_epoch=-1,
                                      member_id="", retention_time_ms=-1, topics=[Topic(name="t", partitions=[
                                          Topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                             committed_metadata="")])])
            assert c.topics[0].partitions[0].error_code == 0      # a classic group with offsets only
            r = await client.call(HEARTBEAT, 1, group_id="classic", member_id="m", member_epoch=0, rack_id=None,
                                  subscribed_topic_names=["t"])
            assert r.error_code == E.GROUP_ID_NOT_FOUND
    run(scenario)


def test_share_fetch_long_polls_until_records_arrive(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            tid = await setup(client, broker)
            start = trio.current_time()

            async def later():
                await trio.sleep(2)
                append(broker, "t", [b"late"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(later)
                r = await client.call(FETCH, 1, **fetch(tid, 0, wait=10000))
            assert 2 <= trio.current_time() - start < 3
            assert [(x.first_offset, x.last_offset) for x in r.responses[0].partitions[0].acquired_records] == [(0, 0)]
            start = trio.current_time()
            r = await client.call(FETCH, 1, **fetch(tid, 1, wait=3000))        # nothing: the whole wait
            assert r.responses == [] and trio.current_time() - start >= 3
    run(scenario)


def test_a_lock_expiry_wakes_a_parked_share_fetch(tmp_path):
    async def scenario():
        async with connected(tmp_path, **{"group.share.record.lock.duration.ms": "1000"}) as (broker, client):
            tid = await setup(client, broker)
            append(broker, "t", [b"x"])
            first = await client.call(FETCH, 1, **fetch(tid, 0))
            assert first.responses[0].partitions[0].acquired_records[0].delivery_count == 1
            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                await nursery.start(broker.shares.run_timers)
                r = await client.call(FETCH, 1, **fetch(tid, 1, wait=5000))      # the same member: its lock ends
                nursery.cancel_scope.cancel()
            assert 1 <= trio.current_time() - start < 1.5
            assert r.responses[0].partitions[0].acquired_records[0].delivery_count == 2
    run(scenario)


def test_a_share_group_id_is_refused_to_a_classic_join(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await setup(client, broker, group="queue")
            with real_time():
                j = await client.call(JoinGroupRequest, 5, group_id="queue", session_timeout_ms=10000,
                                      rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
                                      protocol_type="consumer", protocols=[
                                          JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
            assert j.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    run(scenario)


def test_with_an_authorizer_share_apis_need_the_group_and_the_topics(tmp_path):
    from kwire.admin.acls import AclOperation as Op, ResourceType as R
    from tests.server.test_acl_topics_inprocess import ACLS, create_topics, grant

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "t", "secret")
            broker.logs.create_topic("__share_group_state", 1, {"cleanup.policy": "compact"}, now_ms=0, internal=True)
            broker.logs.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"}, now_ms=0, internal=True)
            broker.shares.coordinator.set_offset_reset("g", "earliest")
            beat = dict(group_id="g", member_id="m-1", member_epoch=0, rack_id=None, subscribed_topic_names=["t"])
            assert (await client.call(HEARTBEAT, 1, **beat)).error_code == E.GROUP_AUTHORIZATION_FAILED
            grant(broker, R.GROUP, "g", Op.READ)
            assert (await client.call(HEARTBEAT, 1, **beat)).error_code == E.TOPIC_AUTHORIZATION_FAILED
            grant(broker, R.TOPIC, "t", Op.READ)                     # READ implies DESCRIBE
            assert (await client.call(HEARTBEAT, 1, **beat)).error_code == 0
            append(broker, "t", [b"ok"])
            append(broker, "secret", [b"no"])
            t, secret = broker.logs.get("t").topic_id, broker.logs.get("secret").topic_id
            fields = fetch(t, 0)
            fields["topics"].append(FetchTopic(topic_id=secret, partitions=[FetchTopic.FetchPartition(
                partition_index=0, acknowledgement_batches=[])]))
            r = await client.call(FETCH, 1, **fields)
            by_topic = {x.topic_id: x.partitions[0] for x in r.responses}
            assert by_topic[secret].error_code == E.TOPIC_AUTHORIZATION_FAILED and not by_topic[secret].records
            assert [(a.first_offset, a.last_offset) for a in by_topic[t].acquired_records] == [(0, 0)]
    run(scenario)
