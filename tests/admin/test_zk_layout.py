"""Kafka's znode formats: literal JSON as Kafka writes it decodes, and our bytes round-trip."""
from __future__ import annotations

import json
import uuid

import pytest

from kwire.admin import zk_layout as z
from kwire.admin.broker_config import Listener
from kwire.admin.zk_layout import BrokerInfo, PartitionState, ZnodeFormatError


def test_paths_are_kafkas():
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.config_topic_path("t") == "/config/topics/t"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert (z.CONTROLLER, z.CONTROLLER_EPOCH, z.CLUSTER_ID) == ("/controller", "/controller_epoch", "/cluster/id")
    assert z.PREFERRED_ELECTION == "/admin/preferred_replica_election"
    assert {z.BROKER_IDS, z.TOPICS, z.DELETE_TOPICS, z.CONFIG_TOPICS, z.ISR_CHANGE_NOTIFICATION} \
        <= set(z.PERSISTENT_PATHS)


# -- brokers -------------------------------------------------------------------------------------
KAFKA_BROKER_V5 = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                   b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"features":{},'
                   b'"host":"localhost","timestamp":"1700000000000","port":9092,"version":5}')


def test_broker_encodes_kafkas_v5_json():
    got = json.loads(z.encode_broker(BrokerInfo(1, "localhost", 9092, None, 1700000000000)))
    assert got == json.loads(KAFKA_BROKER_V5)
    assert "rack" not in got


def test_broker_round_trip_with_rack():
    info = BrokerInfo(7, "b7.example", 19092, "rack-a", 12345)
    data = z.encode_broker(info)
    assert json.loads(data)["rack"] == "rack-a"
    assert z.decode_broker(data, 7) == info


def test_broker_decodes_kafka_literal():
    assert z.decode_broker(KAFKA_BROKER_V5, 1) == BrokerInfo(1, "localhost", 9092, None, 1700000000000)


def test_broker_prefers_plaintext_listener_through_protocol_map():
    data = json.dumps({"version": 4, "host": "", "port": -1, "jmx_port": 9999, "timestamp": "1",
                       "endpoints": ["SECURE://h:9093", "CLIENT://h:9092"], "rack": "dc1",
                       "listener_security_protocol_map": {"SECURE": "SSL", "CLIENT": "PLAINTEXT"}}).encode()
    info = z.decode_broker(data, 2)
    assert (info.host, info.port, info.rack, info.timestamp_ms) == ("h", 9092, "dc1", 1)
    assert info.endpoints == (Listener("SECURE", "h", 9093, "SSL"), Listener("CLIENT", "h", 9092))


# Kafka 2.8's KafkaZkClient.registerBroker for listeners=CLIENT://...,INTERNAL://... without a
# PLAINTEXT-protocol listener: no default host for old clients, so host null and port -1
KAFKA_BROKER_V5_SECURE = (b'{"listener_security_protocol_map":{"CLIENT":"SASL_SSL","INTERNAL":"SSL"},'
                          b'"endpoints":["CLIENT://b1.example:9093","INTERNAL://10.0.0.1:9094"],"jmx_port":-1,'
                          b'"features":{},"host":null,"timestamp":"1700000000000","port":-1,"version":5,'
                          b'"rack":"r1"}')
SECURE_ENDPOINTS = (Listener("CLIENT", "b1.example", 9093, "SASL_SSL"),
                    Listener("INTERNAL", "10.0.0.1", 9094, "SSL"))


def test_broker_with_only_secured_listeners_encodes_null_host_and_port_minus_one():
    info = BrokerInfo.of(1, SECURE_ENDPOINTS, "r1", 1700000000000)
    assert json.loads(z.encode_broker(info)) == json.loads(KAFKA_BROKER_V5_SECURE)
    assert z.decode_broker(KAFKA_BROKER_V5_SECURE, 1) == info
    # with no PLAINTEXT endpoint, the address used without a listener name is the first one
    assert (info.host, info.port) == ("b1.example", 9093)


def test_broker_every_listener_is_reachable_by_name():
    endpoints = (*SECURE_ENDPOINTS, Listener("PLAIN", "::1", 9092, "PLAINTEXT"))
    info = z.decode_broker(z.encode_broker(BrokerInfo.of(3, endpoints)), 3)
    assert info.endpoint("INTERNAL") == Listener("INTERNAL", "10.0.0.1", 9094, "SSL")
    assert info.endpoint("PLAIN") == Listener("PLAIN", "::1", 9092, "PLAINTEXT")
    assert info.endpoint("EXTERNAL") is None
    got = json.loads(z.encode_broker(info))
    assert (got["host"], got["port"]) == ("::1", 9092)      # the PLAINTEXT-protocol endpoint's
    assert got["endpoints"][2] == "PLAIN://[::1]:9092"
    assert got["listener_security_protocol_map"] == {"CLIENT": "SASL_SSL", "INTERNAL": "SSL", "PLAIN": "PLAINTEXT"}


def test_broker_v2_endpoints_are_named_by_their_protocol():
    data = b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"5",' \
           b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}'
    assert z.decode_broker(data, 4).endpoints == (Listener("PLAINTEXT", "h", 9092),
                                                  Listener("SSL", "h", 9093, "SSL"))


def test_broker_listener_without_a_protocol_is_a_format_error():
    # Kafka's EndPoint.createEndPoint fails the same way
    data = b'{"version":4,"endpoints":["CLIENT://h:1"],"listener_security_protocol_map":{"OTHER":"SSL"}}'
    with pytest.raises(ZnodeFormatError, match="CLIENT"):
        z.decode_broker(data, 1)
    with pytest.raises(ZnodeFormatError, match="CLIENT"):
        z.decode_broker(b'{"version":3,"endpoints":["CLIENT://h:1"]}', 1)


def test_broker_v1_uses_top_level_host_and_port():
    data = b'{"version":1,"host":"old","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert z.decode_broker(data, 0) == BrokerInfo(0, "old", 9092, None, 2233345666)


def test_broker_ipv6_endpoint_is_bracketed():
    data = z.encode_broker(BrokerInfo(1, "::1", 9092))
    assert json.loads(data)["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert z.decode_broker(data, 1).host == "::1"


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"version":0}', b'{"version":5,"endpoints":["x"]}',
                                  b'{"version":1,"host":3,"port":1}', b"\xff\xfe"])
def test_broker_garbage_raises_format_error(data):
    with pytest.raises(ZnodeFormatError):
        z.decode_broker(data, 1)


# -- topics ---------------------------------------------------------------------------------------
def test_topic_id_is_kafkas_base64_url_without_padding():
    topic_id = uuid.UUID("fbeb4a1f-f9c3-4fd2-8a2c-1a7e0e0d5f3e")
    text = z.encode_topic_id(topic_id)
    assert len(text) == 22 and "=" not in text
    assert z.decode_topic_id(text) == topic_id
    # bytes 0xfb 0xeb: standard base64 would start "++", URL-safe "--"
    assert z.encode_topic_id(uuid.UUID(bytes=b"\xfb\xef\xbe" * 5 + b"\x00")).startswith("--")


@pytest.mark.parametrize("text", ["", "abc", "A" * 30, "!!!!!!!!!!!!!!!!!!!!!!"])
def test_bad_topic_id_raises(text):
    with pytest.raises(ZnodeFormatError):
        z.decode_topic_id(text)


def test_assignment_version_2_literal():
    data = b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}'
    assert z.decode_assignment(data) == ({0: (1, 2, 3), 1: (2, 3, 1)}, None)
    assert json.loads(z.encode_assignment({0: [1, 2, 3], 1: [2, 3, 1]})) == json.loads(data)


def test_assignment_version_1_literal():
    assert z.decode_assignment(b'{"version":1,"partitions":{"0":[1],"2":[3]}}') == ({0: (1,), 2: (3,)}, None)


def test_assignment_version_3_with_topic_id_round_trip():
    topic_id = uuid.uuid4()
    data = z.encode_assignment({1: (2, 3), 0: (1, 2)}, topic_id)
    obj = json.loads(data)
    assert obj["version"] == 3 and obj["topic_id"] == z.encode_topic_id(topic_id)
    assert list(obj["partitions"]) == ["0", "1"]
    assert z.decode_assignment(data) == ({0: (1, 2), 1: (2, 3)}, topic_id)


def test_assignment_with_reassignment_in_progress():
    data = z.encode_assignment({0: (1, 2, 3)}, adding_replicas={0: (3,)}, removing_replicas={0: (1,)})
    topic = z.decode_topic(data)
    assert topic.adding_replicas == {0: (3,)} and topic.removing_replicas == {0: (1,)}
    assert z.decode_topic(b"") == z.TopicAssignment({})


@pytest.mark.parametrize("data", [b'{"partitions":{"x":[1]}}', b'{"partitions":{"0":["a"]}}',
                                  b'{"partitions":[1]}', b'{"partitions":{"0":[1]},"topic_id":"zz"}'])
def test_bad_assignment_raises(data):
    with pytest.raises(ZnodeFormatError):
        z.decode_assignment(data)


# -- partition state -------------------------------------------------------------------------------
def test_partition_state_literal_and_round_trip():
    data = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    state = z.decode_partition_state(data, 4)
    assert state == PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1, version=4)
    assert json.loads(z.encode_partition_state(state)) == json.loads(data)
    assert z.decode_partition_state(z.encode_partition_state(state), 4) == state


def test_partition_state_offline_and_kafka_3_2_recovery_key():
    data = b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":7,"isr":[2],"leader_recovery_state":1}'
    assert z.decode_partition_state(data) == PartitionState(-1, 7, (2,), 3, -1)


@pytest.mark.parametrize("data", [b'{"leader":1}', b'{"leader":1,"leader_epoch":0,"isr":"1","controller_epoch":1}',
                                  b'{"leader":true,"leader_epoch":0,"isr":[],"controller_epoch":1}'])
def test_bad_partition_state_raises(data):
    with pytest.raises(ZnodeFormatError):
        z.decode_partition_state(data, 0)


# -- controller, epoch, cluster id, configs, notifications ------------------------------------------
def test_controller_literal_and_round_trip():
    data = b'{"version":1,"brokerid":1,"timestamp":"1700000000000"}'
    assert json.loads(z.encode_controller(1, 1700000000000)) == json.loads(data)
    assert z.decode_controller(data) == 1
    assert z.decode_controller_info(data) == (1, 1700000000000)
    # Kafka 3.4+ (migration) writes version 2 with kraftControllerEpoch
    assert z.decode_controller(b'{"version":2,"brokerid":3,"timestamp":"1","kraftControllerEpoch":-1}') == 3


def test_controller_epoch_is_plain_text():
    assert z.encode_controller_epoch(12) == b"12"
    assert z.decode_controller_epoch(b"12") == 12
    with pytest.raises(ZnodeFormatError):
        z.decode_controller_epoch(b'{"epoch":1}')


def test_cluster_id_version_is_a_string():
    data = z.encode_cluster_id("abcDEF123")
    assert json.loads(data) == {"version": "1", "id": "abcDEF123"}
    assert z.decode_cluster_id(b'{"version":"1","id":"Xy-z_0"}') == "Xy-z_0"
    with pytest.raises(ZnodeFormatError):
        z.decode_cluster_id(b'{"version":"1"}')


def test_topic_config_literal_and_round_trip():
    data = b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'
    assert z.decode_topic_config(data) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert json.loads(z.encode_topic_config({"retention.ms": 1000})) == {"version": 1,
                                                                         "config": {"retention.ms": "1000"}}
    assert z.decode_topic_config(b"") == {} and z.decode_topic_config(None) == {}
    assert z.decode_topic_config(b'{"version":1,"config":{}}') == {}
    with pytest.raises(ZnodeFormatError):
        z.decode_topic_config(b'{"version":1,"config":{"a":1}}')


def test_config_change_notification():
    assert json.loads(z.encode_config_change("topics/t")) == {"version": 2, "entity_path": "topics/t"}


def test_preferred_election_and_isr_change_literals():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    assert z.decode_preferred_election(data) == [("t", 0), ("u", 3)]
    assert json.loads(z.encode_preferred_election([("t", 0), ("u", 3)])) == json.loads(data)
    assert z.decode_isr_change(z.encode_isr_change([("t", 1)])) == [("t", 1)]
    with pytest.raises(ZnodeFormatError):
        z.decode_preferred_election(b'{"version":1,"partitions":[{"topic":"t"}]}')


def test_producer_id_block():
    data = z.encode_producer_id_block(1000, 1000, broker_id=2)
    assert json.loads(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert z.decode_producer_id_block_end(data) == 1999


def test_non_ascii_is_written_as_utf8_like_jackson():
    data = z.encode_topic_config({"k": "été"})
    assert "été".encode() in data
    assert z.decode_topic_config(data) == {"k": "été"}
