"""The _schemas records in Confluent's key/value JSON: the exact key bytes (compaction compares
them), values as Confluent's registry writes them, and a reader that skips what it cannot read."""
from __future__ import annotations

import json

import pytest

from kwire.schemas.records import (Reference, RecordFormatError, SchemaValue, clear_subject_record, config_record,
                                   decode, delete_subject_record, mode_record, schema_record)


def test_keys_are_confluents_bytes():
    value = SchemaValue("orders-value", 3, 7, "AVRO", '"string"')
    assert schema_record(value, "orders-value", 3)[0] == \
        b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    assert config_record(None, "FULL")[0] == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert mode_record("s", "READONLY")[0] == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert delete_subject_record("s", 2)[0] == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    assert clear_subject_record("s")[0] == b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}'


def test_schema_values_round_trip_and_leave_out_avro_type_and_empty_references():
    plain = SchemaValue("a", 1, 1, "AVRO", '"int"')
    key, raw = schema_record(plain, "a", 1)
    assert json.loads(raw) == {"subject": "a", "version": 1, "id": 1, "schema": '"int"', "deleted": False}
    assert decode(key, raw).value == plain
    rich = SchemaValue("b", 2, 9, "PROTOBUF", "syntax = \"proto3\";", (Reference("x.proto", "x", 1),), True)
    key, raw = schema_record(rich, "b", 2)
    assert json.loads(raw)["schemaType"] == "PROTOBUF"
    assert decode(key, raw).value == rich
    # a hard delete is a tombstone of the version's key
    key, raw = schema_record(None, "b", 2)
    assert raw is None and decode(key, None).value is None


def test_a_value_written_by_confluents_registry_is_read():
    key = b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}'
    value = (b'{"subject":"t-value","version":1,"id":100001,"schemaType":"JSON","schema":"{\\"type\\":\\"object\\"}",'
             b'"deleted":false,"metadata":null,"ruleSet":null}')
    record = decode(key, value)
    assert (record.keytype, record.subject, record.version) == ("SCHEMA", "t-value", 1)
    assert record.value.id == 100001 and record.value.schema_type == "JSON"
    config = decode(b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}')
    assert config.subject is None and config.value == {"compatibilityLevel": "FULL"}


@pytest.mark.parametrize("key, value", [
    (None, b"{}"),
    (b"not json", b"{}"),
    (b'{"subject":"s"}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","magic":1}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"[1, 2]"),
    (b'{"keytype":"CONFIG","subject":5,"magic":0}', b"{}"),
])
def test_records_it_cannot_read_raise_one_error(key, value):
    with pytest.raises(RecordFormatError):
        decode(key, value)
