"""Broker-side schema validation (kwire.schemas.validation) rule by rule against a small in-test
SchemaSource, the produce path's decode of a partition's records (kwire.schemas.record_reader),
a topic's plan of checks (kwire.schemas.produce_checks), and the produce path itself through a
real Connection of an in-process broker whose ``schema_registry`` is the in-test source.
(End-to-end through the real registry and clients: the registry's own tests.)"""
from __future__ import annotations

import dataclasses
import struct

import crc32c
import pytest
from hypothesis import given, settings, strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.admin.broker_config import broker_config_from_text
from kwire.codecs import records as batches
from kwire.codecs.errors import ErrorCode as E, KafkaApiError
from kwire.schemas.produce_checks import TopicChecks, plan_topic, rejected, schema_errors
from kwire.schemas.record_reader import field_runs, produced_records
from kwire.schemas.validation import FieldChecker, FieldRule, Strategy, check_field
from tests.server.test_connection_inprocess import connected, real_time, run


class RecordInvalid(Exception):
    """Shaped as kwire.schemas.types.RecordInvalid: the reason is its text."""


@dataclasses.dataclass
class FakeSchema:
    """ParsedSchema-shaped: validate() accepts payloads starting with ``accepts``."""
    schema_type: str
    names: tuple[str, ...] = ()
    accepts: bytes = b"ok"

    def record_names(self) -> list[str]:
        return list(self.names)

    def validate(self, payload) -> None:
        if not bytes(payload).startswith(self.accepts):
            raise RecordInvalid(f"payload does not start with {self.accepts!r}")


class DictSource:
    """A SchemaSource: schemas by id and the ids each subject's live versions have."""

    def __init__(self, schemas: dict, subjects: dict):
        self.schemas, self.subjects = schemas, subjects
        self.lookups = 0

    def schema_by_id(self, schema_id):
        return self.schemas.get(schema_id)

    def subject_has_id(self, subject, schema_id):
        self.lookups += 1
        return schema_id in self.subjects.get(subject, ())

    async def refresh(self):
        """The registry's catch-up before a refusal: nothing new here."""


def framed(schema_id: int, payload: bytes = b"ok") -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


SOURCE = DictSource(
    {1: FakeSchema("AVRO", ("com.acme.Order", "com.acme.Line")), 2: FakeSchema("JSON", ()),
     3: FakeSchema("PROTOBUF", ("acme.A", "acme.B")), 4: FakeSchema("AVRO", ("com.acme.Order",))},
    {"orders-value": {1, 2}, "orders-key": {4}, "com.acme.Order": {1}, "orders-com.acme.Order": {1},
     "acme.B": {3}, "com.acme.Line": {4}})
VALUE = FieldRule("value")


# -- the rules, one by one ------------------------------------------------------------------------

def test_a_registered_id_under_the_topic_subject_whose_payload_decodes_passes():
    assert check_field("orders", VALUE, framed(1), SOURCE) is None
    assert check_field("orders", FieldRule("key"), framed(4), SOURCE) is None


def test_null_keys_and_values_pass_as_in_confluent_server():
    assert check_field("orders", VALUE, None, SOURCE) is None
    assert check_field("orders", FieldRule("key"), None, SOURCE) is None


@pytest.mark.parametrize("data, fragment", [
    (b"", "value of 0 bytes is not in Confluent's wire format"),
    (b"\x00\x00\x01", "value of 3 bytes is not in Confluent's wire format"),
    (b'{"id": 1}', "value starts with byte 0x7b, not the magic byte 0"),
    (b"\x01" + struct.pack(">i", 1) + b"ok", "starts with byte 0x01"),
])
def test_framing_errors(data, fragment):
    assert fragment in check_field("orders", VALUE, data, SOURCE)


def test_an_unknown_id_is_named():
    assert check_field("orders", VALUE, framed(42), SOURCE) == "value has schema id 42, which is not registered"
    assert "schema id -1," in check_field("orders", VALUE, b"\x00\xff\xff\xff\xff", SOURCE)


def test_topic_name_strategy_uses_topic_dash_key_or_value():
    # id 4 is the key's schema, not the value's; id 1 is registered for values only
    assert check_field("orders", VALUE, framed(4), SOURCE) == (
        "value has schema id 4, which is not registered under subject orders-value (TopicNameStrategy)")
    assert "under subject orders-key" in check_field("orders", FieldRule("key"), framed(1), SOURCE)
    assert "under subject payments-value" in check_field("payments", VALUE, framed(1), SOURCE)


def test_record_name_strategy_uses_the_top_level_record_name():
    rule = FieldRule("value", Strategy.RECORD)
    assert check_field("anything", rule, framed(1), SOURCE) is None
    # id 4's record com.acme.Order has versions 1 only; Line (a nested name) does not count for AVRO
    assert check_field("anything", rule, framed(4), SOURCE) == (
        "value has schema id 4, which is not registered under subject com.acme.Order (RecordNameStrategy)")
    assert check_field("anything", rule, framed(2), SOURCE) == (
        "value has schema id 2 (JSON), which has no record name for RecordNameStrategy")


def test_protobuf_under_a_record_strategy_passes_with_any_of_its_message_names():
    assert check_field("t", FieldRule("value", Strategy.RECORD), framed(3), SOURCE) is None


def test_topic_record_name_strategy_uses_topic_dash_record_name():
    rule = FieldRule("value", Strategy.TOPIC_RECORD)
    assert check_field("orders", rule, framed(1), SOURCE) is None
    assert "under subject other-com.acme.Order (TopicRecordNameStrategy)" in check_field("other", rule, framed(1),
                                                                                       SOURCE)


def test_decode_failure_and_decode_off():
    bad = framed(1, b"garbage")
    assert check_field("orders", VALUE, bad, SOURCE) == (
        "value does not match schema id 1 (AVRO): payload does not start with b'ok'")
    assert check_field("orders", FieldRule("value", decode=False), bad, SOURCE) is None
    # id-only still checks the id
    assert "not registered" in check_field("orders", FieldRule("value", decode=False), framed(9), SOURCE)


def test_a_batch_looks_each_id_up_once():
    source = DictSource(SOURCE.schemas, SOURCE.subjects)
    checker = FieldChecker("orders", VALUE, source)
    assert [checker(framed(i % 2 + 1)) for i in range(100)] == [None] * 100
    assert source.lookups == 2


def test_strategies_by_short_and_full_class_name():
    assert Strategy.named("RecordNameStrategy") is Strategy.RECORD
    assert Strategy.named("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy") is Strategy.TOPIC_RECORD
    with pytest.raises(ValueError):
        Strategy.named("io.confluent.kafka.serializers.subject.Nope")


# -- the records of a partition, decoded ------------------------------------------------------------

def build(entries, compression=0, base_timestamp=1_000) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value, headers) in enumerate(entries):
        builder.append(i, timestamp=base_timestamp + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_records_are_decoded_with_keys_values_headers_and_timestamps(compression):
    blob = build([(b"k", b"v0", [("h", b"x"), ("n", None)]), (None, None, [])], compression) + \
        build([(b"k2", b"v2", [])], compression, base_timestamp=5_000)
    out = produced_records(blob, "t", 3, 1_000_000)
    assert [i for i, _ in out] == [0, 1, 2]
    first, second, third = (r for _, r in out)
    assert first == ("t", 3, 0, 1_000, b"k", b"v0", (("h", b"x"), ("n", None)))
    assert (second.key, second.value, second.timestamp, second.offset_delta) == (None, None, 1_001, 1)
    assert (third.key, third.timestamp, third.offset_delta) == (b"k2", 5_000, 0)


def heads(pairs, head):
    """The (key, value) pairs cut to their first ``head`` bytes (None: whole)."""
    cut = (lambda b: b if b is None or head is None else b[:head])
    return [(cut(k), cut(v)) for k, v in pairs]


def expand(runs):
    out = []
    for first, count, key, value in runs:
        assert first == len(out)
        out += [(key, value)] * count
    return out


FIELDS = st.sampled_from([None, b"", b"abc", framed(1), framed(1, b"ok" * 40), framed(2, b"ok" * 40),
                          framed(1, b"no" * 40), b"\x01" + framed(1, b"x" * 39)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(FIELDS, FIELDS, st.sampled_from([[], [("h", b"x")]]), st.integers(1, 90)),
                max_size=8), st.sampled_from([None, 5]), st.sampled_from([0, 1]),
       st.sampled_from([(True, True), (False, True), (True, False)]))
def test_field_runs_agree_with_each_records_key_and_value(shapes, head, compression, sides):
    """Runs merged by their shared layout and prefix (head=5, the schema-ID check) or one per
    record (head=None) say for every record exactly what reading it alone says; the records
    come in stretches of one shape, as a serializer writes them, so runs form and break."""
    entries = [(k, v, h) for k, v, h, n in shapes for _ in range(n)]
    blob = build(entries, compression) if entries else b""
    keys, values = sides
    runs = field_runs(blob, 1 << 30, head, keys=keys, values=values)
    alone = [(r.key if keys else None, r.value if values else None)
             for _, r in produced_records(blob, "t", 0, 1 << 30)]
    assert heads(expand(runs), head) == heads(alone, head)


@pytest.mark.parametrize("compression", [0, 1])
def test_records_of_one_shape_merge_into_few_runs(compression):
    uniform = build([(None, framed(1, b"ok" * 40), [])] * 3000, compression, base_timestamp=0)
    runs = field_runs(uniform, 1 << 30, 5)
    assert expand(runs) == [(None, framed(1)[:5])] * 3000 and len(runs) < 30


def test_field_runs_name_the_one_odd_record_in_a_uniform_batch():
    entries = [(None, framed(1, b"ok" * 40), [])] * 500
    entries[321] = (None, framed(42, b"ok" * 40), [])
    runs = field_runs(build(entries), 1 << 30, 5)
    checks = TopicChecks(value=FieldRule("value", decode=False))
    assert schema_errors("orders", checks, runs, SOURCE) == {321: "value has schema id 42, which is not registered"}
    entries[321] = (None, b"\x00\x00", [])
    runs = field_runs(build(entries), 1 << 30, 5)
    assert list(schema_errors("orders", checks, runs, SOURCE)) == [321]


def test_records_of_many_layouts_are_read_by_the_reader(monkeypatch):
    from kwire.schemas import record_reader
    made = []
    reader = record_reader._reader
    monkeypatch.setattr(record_reader, "_reader", lambda *args: made.append(1) or reader(*args))
    entries = [(None, framed(1, b"o" * (40 + i % 7)), []) for i in range(400)]
    runs = field_runs(build(entries), 1 << 30, 5)
    assert expand(runs) == [(None, framed(1)[:5])] * 400 and made == [1]


def test_a_corrupt_batch_is_refused_as_corrupt_even_when_its_records_are_read_first():
    from kwire.schemas.record_reader import crc_errors
    blob = bytearray(build([(None, framed(1, b"ok" * 40), [])] * 100))
    assert crc_errors(bytes(blob)) is None
    blob[batches.HEADER_SIZE + 200] = 0xFF
    assert crc_errors(bytes(blob)).code == E.CORRUPT_MESSAGE


def test_field_runs_refuse_bytes_that_are_not_records():
    blob = bytearray(build([(None, framed(1), [])] * 100))
    header = batches.read_header(bytes(blob), 0)
    blob[batches.HEADER_SIZE + 200] = 0xFF                # a length byte in the middle of a record
    struct.pack_into(">I", blob, 17, crc32c.crc32c(bytes(blob[21:])))
    for head in (None, 5):
        with pytest.raises(KafkaApiError) as info:
            field_runs(bytes(blob), 1 << 30, head)
        assert info.value.code == E.INVALID_RECORD, header


def test_control_batches_are_never_validated():
    blob = batches.build_control_batch(7, 0, True, 0, 1_000) + build([(None, b"v", [])])
    assert [r.value for _, r in produced_records(blob, "t", 0, 1_000_000)] == [b"v"]


def test_bytes_the_append_would_refuse_are_refused_the_same_way():
    blob = bytearray(build([(None, b"v", [])]))
    blob[-1] ^= 1
    with pytest.raises(KafkaApiError) as info:
        produced_records(bytes(blob), "t", 0, 1_000_000)
    assert info.value.code == E.CORRUPT_MESSAGE and "CRC" in info.value.message
    with pytest.raises(KafkaApiError) as info:
        produced_records(bytes(blob[:40]), "t", 0, 1_000_000)
    assert info.value.code == E.CORRUPT_MESSAGE


# -- a topic's plan, the rejection --------------------------------------------------------------------

BROKER = broker_config_from_text("")


def test_a_topic_without_validation_configs_has_no_plan():
    assert plan_topic(BROKER, {}) is None
    assert plan_topic(BROKER, {"retention.ms": "1000", "confluent.value.schema.validation": "false"}) is None


def test_a_topic_plan_from_its_configs():
    checks = plan_topic(BROKER, {"confluent.value.schema.validation": "true",
                                 "confluent.key.schema.validation": "true",
                                 "confluent.key.subject.name.strategy": "RecordNameStrategy",
                                 "kwire.schema.validation.decode": "false",
                                 "kwire.record.validator": "kwire.schemas.validator_examples:no_pii",
                                 "kwire.record.validator.timeout.ms": "250"})
    assert checks.key == FieldRule("key", Strategy.RECORD, False)
    assert checks.value == FieldRule("value", Strategy.TOPIC, False)
    assert checks.validator.__name__ == "no_pii" and checks.timeout_ms == 250 and checks.broken is None


def test_a_stored_validator_outside_the_allow_list_fails_closed():
    checks = plan_topic(broker_config_from_text("kwire.record.validator.allowed.modules="),
                        {"kwire.record.validator": "kwire.schemas.validator_examples:no_pii"})
    assert checks.validator is None and "is not allowed" in checks.broken


def test_the_rejection_names_the_first_bad_record_and_lists_them_all():
    exc = rejected("orders", 0, {5: "value too big", 3: "value has schema id 42, which is not registered"})
    assert exc.code == E.INVALID_RECORD
    assert exc.message == ("record 3 of topic orders partition 0: value has schema id 42, which is not "
                           "registered (and 1 more records rejected)")
    assert [(e.batch_index, e.message) for e in exc.record_errors] == [
        (3, "value has schema id 42, which is not registered"), (5, "value too big")]


# -- the produce path, through a real Connection of an in-process broker ------------------------------

def produce_fields(blobs: dict) -> dict:
    Data = ProduceRequest.TopicProduceData
    return dict(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        Data(name=t, partition_data=[Data.PartitionProduceData(index=p, records=b) for p, b in parts.items()])
        for t, parts in blobs.items()])


async def make_topics(client, topics: dict) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    Config = Topic.CreatableTopicConfig
    with real_time():
        r = await client.call(CreateTopicsRequest, 5, timeout_ms=1000, validate_only=False, topics=[
            Topic(name=n, num_partitions=2, replication_factor=1, assignments=[],
                  configs=[Config(name=k, value=v) for k, v in configs.items()]) for n, configs in topics.items()])
    assert [t.error_code for t in r.topics] == [E.NONE] * len(topics), r


def test_schema_validation_on_the_produce_path(tmp_path):
    """A bad record refuses its partition's append whole (record_errors, a message naming it);
    the other partition and topic of the same request are appended; no registry: refused."""
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await make_topics(client, {"orders": {"confluent.value.schema.validation": "true"}, "plain": {}})
            good, bad = build([(None, framed(1), [])] * 3), build([(None, framed(1), []), (None, framed(42), []),
                                                                    (None, None, []), (None, b'{"id": 1}', [])])
            request = produce_fields({"orders": {0: good, 1: bad}, "plain": {0: bad}})
            r = await client.call(ProduceRequest, 9, **request)
            answers = {(t.name, p.index): p for t in r.responses for p in t.partition_responses}
            assert answers["orders", 1].error_code == E.INVALID_RECORD
            assert "schema.registry.listeners is not set" in answers["orders", 1].error_message
            broker.schema_registry = SOURCE           # what the registry's service sets on the broker
            r = await client.call(ProduceRequest, 9, **request)
            answers = {(t.name, p.index): p for t in r.responses for p in t.partition_responses}
            assert (answers["orders", 0].error_code, answers["plain", 0].error_code) == (E.NONE, E.NONE)
            refused = answers["orders", 1]
            assert refused.error_code == E.INVALID_RECORD
            assert refused.error_message == ("record 1 of topic orders partition 1: value has schema id 42, which "
                                             "is not registered (and 1 more records rejected)")
            assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
                (1, "value has schema id 42, which is not registered"),
                (3, "value starts with byte 0x7b, not the magic byte 0 of Confluent's wire format")]
            assert broker.logs.partition("orders", 1).log_end_offset == 0
            assert broker.logs.partition("orders", 0).log_end_offset == 3
            assert broker.logs.partition("plain", 0).log_end_offset == 8      # both requests: no checks there
    run(scenario)


def test_no_configs_no_cost_of_lookup_beyond_the_topic(tmp_path):
    """A topic without configs of its own never reaches the record checks (no plan is made)."""
    from kwire.schemas import produce_checks

    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await make_topics(client, {"plain": {}})
            r = await client.call(ProduceRequest, 9, **produce_fields({"plain": {0: build([(None, b"v", [])])}}))
            assert r.responses[0].partition_responses[0].error_code == E.NONE
            assert broker not in produce_checks._BY_BROKER
    run(scenario)
