"""Kafka 4.2's share-group API versions in-process (a real Connection over memory streams, the
mock clock), sent with kwire's spec classes as no stock client here sends them: ShareFetch and
ShareAcknowledge v2 (Renew acknowledgements, the record-limit acquire mode), and
AlterShareGroupOffsets / DeleteShareGroupOffsets (91/92) on an empty share group.  The
persister RPCs' new versions (WriteShareGroupState v1, ReadShareGroupStateSummary) are
called on their handlers over a share coordinator's in-memory store."""
from __future__ import annotations

import types
import uuid

import trio

from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.groups.share_coordinator import ShareCoordinator
from kwire.groups.share_partition import RecordState
from kwire.groups.share_records import ShareState, StateBatch
from kwire.handlers.share_state import handle_read_share_group_state_summary, handle_write_share_group_state
from kwire.services.groups import records_to_end
from tests.server.test_connection_inprocess import connected, run
from tests.server.test_share_inprocess import ACK, FETCH, HEARTBEAT, AckTopic, append, fetch, setup

ALTER, DELETE, OFFSETS = (messages.API_CLASSES[k][0] for k in (91, 92, 90))
AlterTopic = ALTER.AlterShareGroupOffsetsRequestTopic


def v2(fields, mode=0, renew=False, **limits):
    return dict(fields, share_acquire_mode=mode, is_renew_ack=renew, **limits)


def ack(tid, epoch, first, last, kind, renew=None):
    extra = {} if renew is None else {"is_renew_ack": renew}
    return dict(group_id="g", member_id="m-1", share_session_epoch=epoch, topics=[AckTopic(topic_id=tid, partitions=[
        AckTopic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            AckTopic.AcknowledgePartition.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                               acknowledge_types=[kind])])])], **extra)


def acquired(response):
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in response.responses[0].partitions[0].acquired_records]


def test_a_renew_keeps_the_records_past_their_first_lock(tmp_path):
    async def scenario():
        async with connected(tmp_path, **{"group.share.record.lock.duration.ms": "1000"}) as (broker, client):
            tid = await setup(client, broker)
            append(broker, "t", [b"a", b"b"])
            sp_key = ("g", tid, 0)
            async with trio.open_nursery() as nursery:
                await nursery.start(broker.shares.run_timers)
                assert acquired(await client.call(FETCH, 2, **v2(fetch(tid, 0)))) == [(0, 1, 1)]
                await trio.sleep(0.7)
                a = await client.call(ACK, 2, **ack(tid, 1, 0, 1, 4, renew=True))
                assert (a.error_code, a.acquisition_lock_timeout_ms) == (0, 1000)
                assert [p.error_code for p in a.responses[0].partitions] == [0]
                await trio.sleep(0.7)                  # 1.4 s: past the first lock, not the renewed one
                records = broker.shares.coordinator.partitions[sp_key].records
                assert [records[o].state for o in (0, 1)] == [RecordState.ACQUIRED] * 2
                # a renewing ShareFetch fetches nothing: its limits must be 0
                bad = await client.call(FETCH, 2, **v2(fetch(tid, 2, acks=[(0, 1, 4)]), renew=True))
                assert bad.error_code == E.INVALID_REQUEST
                zero = dict(fetch(tid, 2, acks=[(0, 1, 4)]), max_wait_ms=0, min_bytes=0, max_bytes=0, max_records=0)
                r = await client.call(FETCH, 2, **v2(zero, renew=True))
                part = r.responses[0].partitions[0]
                assert (r.error_code, part.acknowledge_error_code, part.acquired_records) == (0, 0, [])
                await trio.sleep(0.7)
                assert records[0].state is RecordState.ACQUIRED
                # Renew without IsRenewAck, or before version 2: INVALID_REQUEST for the partition
                assert (await client.call(ACK, 2, **ack(tid, 3, 0, 1, 4, renew=False))).responses[0].partitions[
                    0].error_code == E.INVALID_REQUEST
                assert (await client.call(ACK, 1, **ack(tid, 4, 0, 1, 4))).responses[0].partitions[
                    0].error_code == E.INVALID_REQUEST
                a = await client.call(ACK, 1, **ack(tid, 5, 0, 1, 1))           # version 1 still accepts
                assert a.responses[0].partitions[0].error_code == 0
                nursery.cancel_scope.cancel()
            assert broker.shares.coordinator.partitions[sp_key].spso == 2
    run(scenario)


def test_record_limit_mode_acquires_no_more_than_max_records(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            tid = await setup(client, broker)
            append(broker, "t", [b"%d" % i for i in range(5)])           # one batch of 5
            limited = dict(fetch(tid, 0), max_records=2)
            assert acquired(await client.call(FETCH, 2, **v2(limited, mode=1))) == [(0, 1, 1)]
            limited = dict(fetch(tid, 1), max_records=2)
            r = await client.call(FETCH, 2, **v2(limited, mode=1))
            assert acquired(r) == [(2, 3, 1)] and r.responses[0].partitions[0].records   # the whole batch sent
            assert (await client.call(FETCH, 2, **v2(fetch(tid, 2), mode=7))).error_code == E.INVALID_REQUEST
            assert acquired(await client.call(FETCH, 2, **v2(dict(fetch(tid, 2), max_records=1)))) == [(4, 4, 1)]
    run(scenario)


def test_batch_optimized_mode_takes_whole_batches_past_max_records(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            tid = await setup(client, broker)
            append(broker, "t", [b"%d" % i for i in range(5)])
            assert acquired(await client.call(FETCH, 2, **v2(dict(fetch(tid, 0), max_records=2)))) == [(0, 4, 1)]
    run(scenario)


async def _join(client):
    r = await client.call(HEARTBEAT, 1, group_id="g", member_id="m-1", member_epoch=0, rack_id=None,
                          subscribed_topic_names=["t"])
    assert r.error_code == 0


async def _leave(client, broker):
    r = await client.call(HEARTBEAT, 1, group_id="g", member_id="m-1", member_epoch=-1, rack_id=None,
                          subscribed_topic_names=None)
    assert r.error_code == 0 and broker.shares.coordinator.describe("g").members == {}


async def _alter(client, group="g", topics=(("t", 0, 2),)):
    by_topic: dict = {}
    for name, partition, start in topics:
        by_topic.setdefault(name, []).append(
            AlterTopic.AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=start))
    return await client.call(ALTER, 0, group_id=group, topics=[
        AlterTopic(topic_name=name, partitions=parts) for name, parts in by_topic.items()])


async def _describe_start(client) -> int:
    d = await client.call(OFFSETS, 1, groups=[OFFSETS.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=[
        OFFSETS.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic(
            topic_name="t", partitions=[0])])])
    return d.groups[0].topics[0].partitions[0].start_offset


def test_alter_and_delete_share_group_offsets_of_an_empty_group(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            tid = await setup(client, broker)
            append(broker, "t", [b"%d" % i for i in range(4)])
            assert acquired(await client.call(FETCH, 1, **fetch(tid, 0))) == [(0, 3, 1)]
            assert (await _alter(client)).error_code == E.NON_EMPTY_GROUP        # a member is there
            assert (await _alter(client, group="nobody")).error_code == E.GROUP_ID_NOT_FOUND
            assert (await client.call(DELETE, 0, group_id="g", topics=[])).error_code == E.NON_EMPTY_GROUP
            await client.call(FETCH, 1, **fetch(tid, -1))                      # close the session: 0-3 released
            await _leave(client, broker)
            old_epoch = broker.shares.coordinator.partitions[("g", tid, 0)].state_epoch
            r = await _alter(client, topics=[("t", 0, 2), ("t", 3, 0), ("nope", 0, 0)])
            assert r.error_code == 0
            assert {(t.topic_name, t.topic_id, p.partition_index, p.error_code) for t in r.responses
                    for p in t.partitions} == {("t", tid, 0, 0), ("t", tid, 3, E.UNKNOWN_TOPIC_OR_PARTITION),
                                               ("nope", None, 0, E.UNKNOWN_TOPIC_OR_PARTITION)}    # the zero id
            sp = broker.shares.coordinator.partitions[("g", tid, 0)]
            assert (sp.spso, sp.records, sp.state_epoch) == (2, {}, old_epoch + 1)
            assert await _describe_start(client) == 2
            assert (await _alter(client, topics=[("t", 0, -5)])).responses[0].partitions[0].error_code == \
                E.INVALID_REQUEST
            # a member again: delivered from the new start offset, with fresh delivery counts
            await _join(client)
            assert acquired(await client.call(FETCH, 1, **fetch(tid, 0))) == [(2, 3, 1)]
            await client.call(FETCH, 1, **fetch(tid, -1))
            await _leave(client, broker)
            d = await client.call(DELETE, 0, group_id="g", topics=[DELETE.DeleteShareGroupOffsetsRequestTopic(
                topic_name=n) for n in ("t", "nope")])
            assert d.error_code == 0
            assert [(t.topic_name, t.error_code) for t in d.responses] == [
                ("t", 0), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
            assert ("g", tid, 0) not in broker.shares.coordinator.partitions
            assert await _describe_start(client) == -1
            # the state topic has the tombstone: a restart replays no share-partition
            fresh = ShareCoordinator(broker.shares.coordinator.config)
            for _batch, record in records_to_end(broker.logs.partition("__share_group_state", 0)):
                fresh.replay(record.key, record.value)
            assert ("g", tid, 0) not in fresh.partitions
            # initialized afresh from share.auto.offset.reset (earliest: 0) on the next fetch
            await _join(client)
            assert acquired(await client.call(FETCH, 1, **fetch(tid, 0))) == [(0, 3, 1)]
    run(scenario)


def test_alter_and_delete_need_read_or_delete_on_the_group_and_read_on_the_topics(tmp_path):
    from kwire.admin.acls import AclOperation as Op, ResourceType as R
    from tests.server.test_acl_topics_inprocess import ACLS, create_topics, grant

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "t", "secret")
            assert (await _alter(client)).error_code == E.GROUP_AUTHORIZATION_FAILED
            grant(broker, R.GROUP, "g", Op.READ)
            r = await _alter(client, topics=[("t", 0, 0), ("secret", 0, 0)])
            assert r.error_code == E.GROUP_ID_NOT_FOUND               # authorized: then the group is checked
            delete = dict(group_id="g", topics=[DELETE.DeleteShareGroupOffsetsRequestTopic(topic_name="t")])
            assert (await client.call(DELETE, 0, **delete)).error_code == E.GROUP_AUTHORIZATION_FAILED  # READ only
            grant(broker, R.GROUP, "g", Op.DELETE)
            assert (await client.call(DELETE, 0, **delete)).error_code == E.GROUP_ID_NOT_FOUND
    run(scenario)


def _store(states: dict):
    """A share coordinator's store as the persister handlers use it (``kwire.cluster.share_coordinator``)."""
    async def write(key, state):
        states[key] = state
        return E.NONE
    return types.SimpleNamespace(read=lambda key, epoch: states.get(key), write=write)


def test_write_share_group_state_v1_and_read_share_group_state_summary():
    tid = uuid.uuid4()
    states: dict = {}
    ctx = types.SimpleNamespace(broker=types.SimpleNamespace(shares=types.SimpleNamespace(store=_store(states))))
    write_cls, read_cls = messages.API_CLASSES[85][0], messages.API_CLASSES[87][0]
    W = write_cls.WriteStateData
    frame = write_cls(group_id="g", topics=[W(topic_id=tid, partitions=[W.PartitionData(
        partition=0, state_epoch=2, leader_epoch=5, start_offset=10, delivery_complete_count=4, state_batches=[
            W.PartitionData.StateBatch(first_offset=10, last_offset=12, delivery_state=0, delivery_count=1),
            W.PartitionData.StateBatch(first_offset=13, last_offset=16, delivery_state=2, delivery_count=1)])])]
    ).encode(version=1)

    async def main():
        w = await handle_write_share_group_state(ctx, messages.decode_request(85, 1, frame, 0))
        assert w["results"][0]["partitions"][0]["error_code"] == 0
        assert states[("g", tid, 0)] == ShareState(0, 2, 5, 10, (StateBatch(10, 12, 0, 1), StateBatch(13, 16, 2, 1)))
        R = read_cls.ReadStateSummaryData
        for version in (0, 1):
            request = read_cls(group_id="g", topics=[R(topic_id=tid, partitions=[
                R.PartitionData(partition=p, leader_epoch=-1) for p in (0, 1)])]).encode(version=version)
            out = await handle_read_share_group_state_summary(ctx, messages.decode_request(87, version, request, 0))
            got = messages.API_CLASSES[87][1].decode(messages.encode_response(87, version, out), version=version)
            known, unknown = got.results[0].partitions
            assert (known.state_epoch, known.leader_epoch, known.start_offset) == (2, 5, 10)
            assert known.delivery_complete_count == (4 if version == 1 else -1)    # v0: not on the wire
            assert (unknown.state_epoch, unknown.start_offset, unknown.error_code) == (0, -1, 0)
    trio.run(main)
