"""The package's face: parse() dispatch, the levels of compatibility_errors, what every type offers."""
import json

import pytest

from kwire.schemas.types import (COMPATIBILITY_LEVELS, SCHEMA_TYPES, AvroSchema, JsonSchema, ParsedSchema,
                                 ProtobufSchema, RecordInvalid, SchemaError, compatibility_errors, parse)

AVRO_V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
AVRO_V3 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0},
    {"name": "email", "type": "string"}]})
AVRO_V1_AGAIN_NO_NAME = json.dumps({"type": "record", "name": "User", "fields": [{"name": "age", "type": "int"}]})


def test_the_constants_are_confluents():
    assert SCHEMA_TYPES == ("AVRO", "JSON", "PROTOBUF")
    assert COMPATIBILITY_LEVELS == ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                                    "FULL", "FULL_TRANSITIVE")
    assert issubclass(SchemaError, ValueError) and issubclass(RecordInvalid, ValueError)


@pytest.mark.parametrize("schema_type, text, cls", [
    ("AVRO", '"string"', AvroSchema),
    ("", '"string"', AvroSchema),          # the REST client gave no schemaType
    ("JSON", '{"type": "string"}', JsonSchema),
    ("PROTOBUF", 'syntax = "proto3"; message M { string a = 1; }', ProtobufSchema),
])
def test_parse_dispatches_on_the_type(schema_type, text, cls):
    parsed = parse(schema_type, text)
    assert isinstance(parsed, cls) and isinstance(parsed, ParsedSchema)
    assert parsed.raw == text and parsed.schema_type == (schema_type or "AVRO")
    assert parsed.formatted(None) == text and parsed.formatted("") == text and parsed.formatted("nope") == text


def test_an_unknown_schema_type_is_a_schema_error():
    with pytest.raises(SchemaError, match="XML"):
        parse("XML", "<a/>")


def test_a_reference_of_another_type_is_a_schema_error():
    json_ref = parse("JSON", '{"type": "string"}')
    with pytest.raises(SchemaError, match="not AVRO"):
        parse("AVRO", '"string"', [("x", json_ref)])


def test_none_and_an_empty_history_are_always_compatible():
    new = parse("AVRO", AVRO_V1_AGAIN_NO_NAME)
    assert compatibility_errors("NONE", new, [parse("AVRO", AVRO_V1)]) == []
    for level in COMPATIBILITY_LEVELS:
        assert compatibility_errors(level, new, []) == []


def test_an_unknown_level_is_a_value_error():
    with pytest.raises(ValueError, match="SIDEWAYS"):
        compatibility_errors("SIDEWAYS", parse("AVRO", AVRO_V1), [])


def test_different_types_never_read_each_other():
    errors = compatibility_errors("BACKWARD", parse("JSON", '{}'), [parse("AVRO", '"string"')])
    assert len(errors) == 1 and "JSON" in errors[0] and "AVRO" in errors[0]


def test_backward_checks_only_the_latest_and_transitive_checks_all():
    v1, v2, v3 = (parse("AVRO", t) for t in (AVRO_V1, AVRO_V2, AVRO_V1_AGAIN_NO_NAME))
    # v3 drops name and adds age without default: it reads v2 data (age there) but not v1 data
    assert compatibility_errors("BACKWARD", v3, [v1, v2]) == []
    errors = compatibility_errors("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert len(errors) == 1 and "version #1 of 2" in errors[0] and "age" in errors[0]


def test_forward_and_full_directions():
    v1, v2, v3 = (parse("AVRO", t) for t in (AVRO_V1, AVRO_V2, AVRO_V3))
    # adding a field with a default: both directions fine
    for level in ("BACKWARD", "FORWARD", "FULL", "FULL_TRANSITIVE"):
        assert compatibility_errors(level, v2, [v1]) == [], level
    # adding a field without a default: old readers ignore it (forward), new ones cannot read old data
    assert compatibility_errors("FORWARD", v3, [v2]) == []
    assert compatibility_errors("FORWARD_TRANSITIVE", v3, [v1, v2]) == []
    backward = compatibility_errors("BACKWARD", v3, [v2])
    assert len(backward) == 1 and "READER_FIELD_MISSING_DEFAULT_VALUE" in backward[0] and "email" in backward[0]
    full = compatibility_errors("FULL", v3, [v2])
    assert full == [e.replace("BACKWARD:", "FULL:") for e in backward]


def test_forward_transitive_reads_with_every_old_version():
    old = parse("AVRO", json.dumps({"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}))
    middle = parse("AVRO", AVRO_V2)
    new = parse("AVRO", AVRO_V1)   # drops age: the oldest version needs it (no default there)
    assert compatibility_errors("FORWARD", new, [old, middle]) == []
    errors = compatibility_errors("FORWARD_TRANSITIVE", new, [old, middle])
    assert len(errors) == 1 and "version #1 of 2 (oldest first) cannot read" in errors[0]


@pytest.mark.parametrize("schema_type, text", [
    ("AVRO", AVRO_V1), ("JSON", '{"type": "object"}'), ("PROTOBUF", 'syntax = "proto3"; message M { int32 a = 1; }')])
def test_a_schema_is_compatible_with_itself_at_every_level(schema_type, text):
    schema = parse(schema_type, text)
    for level in COMPATIBILITY_LEVELS:
        assert compatibility_errors(level, schema, [schema, parse(schema_type, text)]) == []


# -- robustness: broken input raises only the documented errors -------------------------------------------

def _samples():
    from tests.schemas.types.test_avro import USER
    from tests.schemas.types.test_json import PERSON
    from tests.schemas.types.test_proto_parser import PROTO2
    from tests.schemas.types.test_protobuf import ORDER
    return [("AVRO", json.dumps(USER)), ("JSON", json.dumps(PERSON)), ("PROTOBUF", ORDER), ("PROTOBUF", PROTO2)]


@pytest.mark.parametrize("index", range(4))
def test_random_payloads_raise_only_record_invalid(index):
    import random
    rng = random.Random(index)
    schema_type, text = _samples()[index]
    schema = parse(schema_type, text)
    for _ in range(300):
        payload = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        try:
            schema.validate(payload)
        except RecordInvalid:
            pass


@pytest.mark.parametrize("index", range(4))
def test_mangled_schemas_raise_only_schema_error_and_forms_parse_back(index):
    import random
    rng = random.Random(100 + index)
    schema_type, text = _samples()[index]
    original = parse(schema_type, text)
    for _ in range(150):
        chars = list(text)
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(len(chars))
            if rng.random() < 0.4:
                del chars[pos]
            else:
                chars.insert(pos, rng.choice('{}[]();=,"\'\\0a9-.<>\n/*'))
        try:
            schema = parse(schema_type, "".join(chars))
        except SchemaError:
            continue
        assert parse(schema_type, schema.normalized()).normalized() == schema.normalized()
        compatibility_errors("FULL", schema, [original])   # any answer, but no exception
