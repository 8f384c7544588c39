"""kwire's own JSON specs (codecs/specs) go through kafka-python's generated codec like its own."""
from __future__ import annotations

import json
import pathlib
import re

import kafka.protocol.admin
import kafka.protocol.consumer
import pytest

from kwire.codecs import messages, specs
from kwire.codecs.errors import CorruptFrame

SPEC_DIR = pathlib.Path(specs.__file__).parent


def _spec(path: pathlib.Path) -> dict:
    return json.loads(re.sub(r"(?m)^\s*//.*$", "", path.read_text()))


@pytest.mark.parametrize("name", specs.NAMES)
def test_each_spec_pair_is_registered_under_its_api_key(name):
    request, response = _spec(SPEC_DIR / f"{name}Request.json"), _spec(SPEC_DIR / f"{name}Response.json")
    assert request["apiKey"] == response["apiKey"]
    assert request["validVersions"] == response["validVersions"]
    req_cls, resp_cls = messages.API_CLASSES[request["apiKey"]]
    assert (req_cls.__name__, resp_cls.__name__) == (f"{name}Request", f"{name}Response")
    assert messages.api_name(request["apiKey"]) == name


def test_no_spec_shadows_one_kafka_python_ships():
    shipped = {getattr(module, n).API_KEY for module in (kafka.protocol.admin, kafka.protocol.consumer)
               for n in dir(module) if n.endswith("Request") and hasattr(getattr(module, n), "API_KEY")}
    assert not shipped & {messages.API_CLASSES[_spec(SPEC_DIR / f"{n}Request.json")["apiKey"]][0].API_KEY
                          for n in specs.NAMES}


def test_consumer_group_heartbeat_v1_round_trips_with_the_regex_field():
    req_cls, _ = messages.API_CLASSES[68]
    sent = req_cls(version=1, group_id="g", member_id="m-1", member_epoch=3, instance_id=None, rack_id="r",
                   rebalance_timeout_ms=30000, subscribed_topic_names=None, subscribed_topic_regex="orders-.*",
                   server_assignor="uniform", topic_partitions=[])
    frame = sent.encode(version=1)
    got = messages.decode_request(68, 1, frame, 0)
    assert (got.group_id, got.member_epoch, got.subscribed_topic_regex, got.rack_id) == ("g", 3, "orders-.*", "r")
    assert got.subscribed_topic_names is None
    with pytest.raises(CorruptFrame):
        messages.decode_request(68, 1, frame[:len(frame) // 2], 0)


def test_consumer_group_heartbeat_response_encodes_a_null_and_a_present_assignment():
    base = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
            "member_epoch": 2, "heartbeat_interval_ms": 5000}
    _, resp_cls = messages.API_CLASSES[68]
    empty = resp_cls.decode(messages.encode_response(68, 0, dict(base, assignment=None)), version=0)
    assert empty.assignment is None and empty.member_epoch == 2
    full = resp_cls.decode(messages.encode_response(68, 0, dict(base, assignment={"topic_partitions": [
        {"topic_id": "00000000-0000-0000-0000-000000000007", "partitions": [0, 2]}]})), version=0)
    assert [list(tp.partitions) for tp in full.assignment.topic_partitions] == [[0, 2]]


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe_round_trips_and_member_type_is_v1_only(version):
    req_cls, resp_cls = messages.API_CLASSES[69]
    frame = req_cls(version=version, group_ids=["a", "b"], include_authorized_operations=True).encode(version=version)
    got = messages.decode_request(69, version, frame, 0)
    assert (list(got.group_ids), got.include_authorized_operations) == (["a", "b"], True)
    tp = {"topic_id": "00000000-0000-0000-0000-000000000009", "topic_name": "t", "partitions": [1, 3]}
    member = {"member_id": "m", "instance_id": None, "rack_id": "r", "member_epoch": 4, "client_id": "c",
              "client_host": "/h", "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
              "assignment": {"topic_partitions": [tp]}, "target_assignment": {"topic_partitions": []},
              "member_type": 1}
    fields = {"throttle_time_ms": 0, "groups": [
        {"error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable", "group_epoch": 5,
         "assignment_epoch": 5, "assignor_name": "uniform", "members": [member],
         "authorized_operations": -2147483648}]}
    decoded = resp_cls.decode(messages.encode_response(69, version, fields), version=version)
    m = decoded.groups[0].members[0]
    assert (m.member_epoch, list(m.assignment.topic_partitions[0].partitions)) == (4, [1, 3])
    assert m.member_type == (1 if version == 1 else -1)


@pytest.mark.parametrize("api_key,versions", [(76, (0, 1)), (77, (0, 1)), (78, (0, 2)), (79, (0, 2))])
def test_the_share_apis_cover_their_versions(api_key, versions):
    """Version 0 (Kafka 4.0's early access), 1 (4.1) and, for ShareFetch/ShareAcknowledge, 2 (4.2)."""
    req_cls, resp_cls = messages.API_CLASSES[api_key]
    assert (req_cls.min_version, req_cls.max_version) == (resp_cls.min_version, resp_cls.max_version) == versions


def _share_fetch(version: int) -> bytes:
    req_cls, _ = messages.API_CLASSES[78]
    part_cls = req_cls.FetchTopic.FetchPartition
    sizes = {"partition_max_bytes": 1048576} if version == 0 else {}
    partition = part_cls(partition_index=2, acknowledgement_batches=[part_cls.AcknowledgementBatch(
        first_offset=5, last_offset=6, acknowledge_types=[1, 2])], **sizes)
    topic = req_cls.FetchTopic(topic_id="00000000-0000-0000-0000-000000000007", partitions=[partition])
    extra = {"max_records": 50, "batch_size": 10} if version >= 1 else {}
    return req_cls(version=version, group_id="g", member_id="m", share_session_epoch=1, max_wait_ms=500,
                   min_bytes=1, max_bytes=52428800, topics=[topic], forgotten_topics_data=[],
                   **extra).encode(version=version)


def test_share_fetch_v0_has_partition_max_bytes_and_v1_max_records_and_batch_size():
    v0, v1 = messages.decode_request(78, 0, _share_fetch(0), 0), messages.decode_request(78, 1, _share_fetch(1), 0)
    assert v0.topics[0].partitions[0].partition_max_bytes == 1048576
    assert (v1.max_records, v1.batch_size) == (50, 10)
    for got in (v0, v1):
        batch = got.topics[0].partitions[0].acknowledgement_batches[0]
        assert (batch.first_offset, batch.last_offset, list(batch.acknowledge_types)) == (5, 6, [1, 2])
    # v0 - v1: one int32 per partition, less two top-level int32s
    assert len(_share_fetch(1)) - len(_share_fetch(0)) == 4


def test_share_fetch_response_v0_has_no_acquisition_lock_timeout():
    _, resp_cls = messages.API_CLASSES[78]
    fields = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 30000,
              "responses": [], "node_endpoints": []}
    v0, v1 = messages.encode_response(78, 0, fields), messages.encode_response(78, 1, fields)
    assert len(v1) - len(v0) == 4
    assert resp_cls.decode(v1, version=1).acquisition_lock_timeout_ms == 30000
    assert resp_cls.decode(v0, version=0).error_code == 0
