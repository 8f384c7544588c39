"""Kafka 4.2's share-group message versions in kwire's specs (codecs/specs): ShareFetch and
ShareAcknowledge v2, WriteShareGroupState v1, ReadShareGroupStateSummary v0-1,
AlterShareGroupOffsets and DeleteShareGroupOffsets v0.  Field layouts checked against Kafka 4.2's
JSON specs (as mirrored by scholzj/go-kafka-protocol): each new field at its place and width."""
from __future__ import annotations

import uuid

import pytest

from kwire.codecs import messages
from kwire.codecs.errors import CorruptFrame

TID = uuid.UUID(int=7)


def _fetch(version: int, **v2) -> bytes:
    req_cls, _ = messages.API_CLASSES[78]
    return req_cls(version=version, group_id="g", member_id="m", share_session_epoch=1, max_wait_ms=0, min_bytes=0,
                   max_bytes=0, max_records=0, batch_size=0, topics=[], forgotten_topics_data=[],
                   **v2).encode(version=version)


def test_share_fetch_v2_adds_acquire_mode_and_renew_after_batch_size():
    v1, v2 = _fetch(1), _fetch(2, share_acquire_mode=1, is_renew_ack=True)
    assert len(v2) - len(v1) == 2                     # int8 + bool
    assert v2[:len(v1) - 3] == v1[:-3]                # the same up to BatchSize (then 2 arrays, tags)
    assert v2[len(v1) - 3:len(v1) - 1] == b"\x01\x01"
    got = messages.decode_request(78, 2, v2, 0)
    assert (got.share_acquire_mode, got.is_renew_ack, got.batch_size) == (1, True, 0)
    for cut in range(len(v2)):
        with pytest.raises(CorruptFrame):
            messages.decode_request(78, 2, v2[:cut], 0)


def test_share_acknowledge_v2_adds_renew_and_the_lock_timeout():
    req_cls, resp_cls = messages.API_CLASSES[79]
    fields = dict(group_id="g", member_id="m", share_session_epoch=3, topics=[])
    v1, v2 = req_cls(**fields).encode(version=1), req_cls(is_renew_ack=True, **fields).encode(version=2)
    assert len(v2) - len(v1) == 1
    assert messages.decode_request(79, 2, v2, 0).is_renew_ack is True
    out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 15000,
           "responses": [], "node_endpoints": []}
    r1, r2 = messages.encode_response(79, 1, out), messages.encode_response(79, 2, out)
    assert len(r2) - len(r1) == 4
    assert resp_cls.decode(r2, version=2).acquisition_lock_timeout_ms == 15000


def test_write_share_group_state_v1_has_the_delivery_complete_count_before_the_batches():
    req_cls, _ = messages.API_CLASSES[85]
    topics = [req_cls.WriteStateData(topic_id=TID, partitions=[req_cls.WriteStateData.PartitionData(
        partition=0, state_epoch=1, leader_epoch=2, start_offset=10, delivery_complete_count=3, state_batches=[])])]
    v0, v1 = (req_cls(group_id="g", topics=topics).encode(version=v) for v in (0, 1))
    assert len(v1) - len(v0) == 4
    p = messages.decode_request(85, 1, v1, 0).topics[0].partitions[0]
    assert (p.start_offset, p.delivery_complete_count, list(p.state_batches)) == (10, 3, [])


@pytest.mark.parametrize("version", [0, 1])
def test_read_share_group_state_summary_round_trips(version):
    req_cls, resp_cls = messages.API_CLASSES[87]
    frame = req_cls(group_id="g", topics=[req_cls.ReadStateSummaryData(topic_id=TID, partitions=[
        req_cls.ReadStateSummaryData.PartitionData(partition=4, leader_epoch=-1)])]).encode(version=version)
    got = messages.decode_request(87, version, frame, 0)
    assert (got.group_id, got.topics[0].topic_id, got.topics[0].partitions[0].partition) == ("g", TID, 4)
    out = {"results": [{"topic_id": TID, "partitions": [{"partition": 4, "error_code": 0, "error_message": None,
                                                         "state_epoch": 2, "leader_epoch": 5, "start_offset": 9,
                                                         "delivery_complete_count": 3}]}]}
    p = resp_cls.decode(messages.encode_response(87, version, out), version=version).results[0].partitions[0]
    assert (p.state_epoch, p.leader_epoch, p.start_offset) == (2, 5, 9)
    assert p.delivery_complete_count == (3 if version == 1 else -1)


def test_alter_and_delete_share_group_offsets_round_trip():
    alter, alter_resp = messages.API_CLASSES[91]
    frame = alter(group_id="g", topics=[alter.AlterShareGroupOffsetsRequestTopic(topic_name="t", partitions=[
        alter.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
            partition_index=1, start_offset=42)])]).encode(version=0)
    got = messages.decode_request(91, 0, frame, 0)
    assert (got.topics[0].topic_name, got.topics[0].partitions[0].start_offset) == ("t", 42)
    out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
        {"topic_name": "t", "topic_id": TID, "partitions": [
            {"partition_index": 1, "error_code": 3, "error_message": None}]}]}
    r = alter_resp.decode(messages.encode_response(91, 0, out), version=0)
    assert (r.responses[0].topic_id, r.responses[0].partitions[0].error_code) == (TID, 3)
    delete, delete_resp = messages.API_CLASSES[92]
    frame = delete(group_id="g", topics=[delete.DeleteShareGroupOffsetsRequestTopic(topic_name="t")]).encode(version=0)
    assert [t.topic_name for t in messages.decode_request(92, 0, frame, 0).topics] == ["t"]
    out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
        {"topic_name": "t", "topic_id": TID, "error_code": 29, "error_message": None}]}
    assert delete_resp.decode(messages.encode_response(92, 0, out), version=0).responses[0].error_code == 29
