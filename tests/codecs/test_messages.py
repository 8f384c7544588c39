"""The response encoder against kafka-python's own codec, for every API and version kwire serves.

kafka-python is the oracle: a response dict encoded by kwire must be the bytes
kafka-python's generated encoder writes for the same values, and must decode
(with kafka-python's decoder) back to exactly those values.
"""
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kwire.handlers  # noqa: F401  (registers the handlers)
from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode
from kwire.handlers.errors import error_response
from kwire.handlers.registry import HANDLERS

ADVERTISED = [(key, v) for key, h in sorted(HANDLERS.items())
              for v in range(h.min_version, h.max_version + 1)]
API_VERSIONS = 18
INT_RANGES = {"int8": 7, "int16": 15, "uint16": None, "int32": 31, "int64": 63}


def kafka_python_object(cls, version, fields):
    """kafka-python's data objects for plain ``fields`` (the oracle's input)."""
    def build(schema, values):
        kwargs = {}
        for name, value in values.items():
            field = schema.fields[name]
            if field.is_struct_array() and value is not None:
                value = [build(field, v) for v in value]
            elif field.is_struct() and value is not None:
                value = build(field, value)
            kwargs[name] = value
        return schema.data_class(**kwargs)
    top = {}
    for name, value in fields.items():
        field = cls.fields[name]
        if field.is_struct_array() and value is not None:
            value = [build(field, v) for v in value]
        elif field.is_struct() and value is not None:
            value = build(field, value)
        top[name] = value
    return cls[version](**top)


def assert_matches_kafka_python(api_key, version, fields):
    cls = messages.response_class(api_key)
    ours = messages.encode_response(api_key, version, fields)
    expected = kafka_python_object(cls, version, fields)
    assert ours == bytes(expected.encode()), f"{cls.__name__} v{version}"
    assert cls.decode(ours, version=version) == expected


class Request:
    """What error_response reads from a decoded request: the version, and one entry in each
    list an API answers entry by entry (CreateAcls, DeleteAcls, ElectLeaders,
    DescribeUserScramCredentials, AlterUserScramCredentials, OffsetCommit, TxnOffsetCommit)."""

    def __init__(self, version):
        self.API_VERSION = version
        self.creations = self.filters = [object()]
        self.upsertions, self.deletions = [], [types.SimpleNamespace(name="alice")]
        self.users = [types.SimpleNamespace(name="alice")]
        self.topic_partitions = [types.SimpleNamespace(topic="t", partitions=[0, 1])]
        self.topics = [types.SimpleNamespace(name="t", partitions=[types.SimpleNamespace(partition_index=0)])]


@pytest.mark.parametrize("api_key,version", ADVERTISED)
def test_error_response_round_trips(api_key, version):
    fields = error_response(api_key, Request(version), ErrorCode.UNKNOWN_SERVER_ERROR, "boom")
    if fields is None:
        assert not messages.response_has_field(api_key, version, "error_code")
        return
    if api_key == API_VERSIONS and version > 0:
        # kafka-python decodes any ApiVersions error as v0, as Kafka's clients do
        cls = messages.response_class(api_key)
        assert messages.encode_response(api_key, version, fields) == bytes(cls[version](**fields).encode())
        return
    assert_matches_kafka_python(api_key, version, fields)


def dict_strategy(schema, version, depth=0):
    """Random dicts for ``schema`` at ``version``; any field may be left out (schema default),
    but a non-nullable struct (ConsumerGroupDescribe's Assignment), for which kafka-python has
    no default."""
    fields = [f for f in schema.fields.values() if f.for_version_q(version)]
    required = {f.name for f in fields if f.is_struct() and not f.is_struct_array()
                and not f.nullable_for_version_q(version) and f._tag is None}
    strategies = {f.name: value_strategy(f, version, depth) for f in fields}
    return st.fixed_dictionaries({n: s for n, s in strategies.items() if n in required},
                                 optional={n: s for n, s in strategies.items() if n not in required})


def value_strategy(field, version, depth):
    nullable = field.nullable_for_version_q(version)
    if field.is_struct_array():
        items = st.lists(dict_strategy(field.array_of, version, depth + 1), max_size=2 if depth < 2 else 0)
    elif field.is_array():
        items = st.lists(simple_strategy(field.array_of.type_str), max_size=3)
    elif field.is_struct():
        items = dict_strategy(field, version, depth + 1)
    else:
        items = simple_strategy(field.type_str)
        nullable = nullable and field.type_str in ("string", "bytes", "records")
    return st.one_of(st.none(), items) if nullable else items


def simple_strategy(type_str):
    if type_str in INT_RANGES:
        bits = INT_RANGES[type_str]
        return st.integers(0, 65535) if bits is None else st.integers(-(1 << bits), (1 << bits) - 1)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6),
        "records": st.binary(max_size=40),
        "uuid": st.uuids().filter(lambda u: u.int != 0),
        "bitfield": st.one_of(st.none(), st.sets(st.integers(0, 30), min_size=1, max_size=4)),
    }[type_str]


@pytest.mark.parametrize("api_key,version", ADVERTISED)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_responses_match_kafka_python(api_key, version, data):
    cls = messages.response_class(api_key)
    fields = data.draw(dict_strategy(cls, version))
    if api_key == API_VERSIONS:
        fields["error_code"] = 0  # see test_error_response_round_trips
    assert_matches_kafka_python(api_key, version, fields)


@pytest.mark.parametrize("bad", [
    {"throttle_time_ms": 0, "reponses": []},
    {"responses": [{"name": "t", "partition_responses": [{"index": 0, "eror_code": 0}]}]},
])
def test_misspelt_field_is_an_error(bad):
    with pytest.raises(ValueError, match="unknown fields"):
        messages.encode_response(0, 9, bad)


def test_wrong_types_are_errors():
    with pytest.raises(ValueError, match="throttle_time_ms"):
        messages.encode_response(0, 9, {"throttle_time_ms": "soon"})
    with pytest.raises(TypeError, match="expected a dict"):
        messages.encode_response(0, 9, {"responses": [("t", [])]})
    with pytest.raises(ValueError, match="no version"):
        messages.encode_response(0, 99, {})


def test_only_messages_reads_kafka_pythons_private_schema():
    """The codec boundary: kafka-python's ``_struct`` is read in codecs/messages.py only."""
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    offenders = [str(path.relative_to(root)) for folder in ("codecs", "log", "groups", "admin", "kwire")
                 for path in (root / folder).rglob("*.py")
                 if "._struct" in path.read_text() and path != root / "codecs" / "messages.py"]
    assert offenders == []


def response_field_names() -> set:
    names = set()

    def collect(fields):
        for field in fields.values():
            names.add(field.name)
            if field.is_struct() or field.is_struct_array():
                collect(field.fields)
    for key in HANDLERS:
        collect(messages.response_class(key).fields)
    return names


def test_handlers_spell_response_fields_as_the_schema_does():
    """Every string key a handler writes into a dict is a response field of some API it could be.

    The encoder raises on unknown names at run time; this catches a misspelling
    in a branch no other test reaches."""
    import ast
    import pathlib
    known = response_field_names()
    handlers_dir = pathlib.Path(kwire.handlers.__file__).parent
    unknown = []
    for path in sorted(handlers_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            keys = []
            if isinstance(node, ast.Dict):
                keys = node.keys
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                keys = [node.slice]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "update":
                keys = [ast.Constant(k.arg) for k in node.keywords if k.arg]
            unknown += [f"{path.name}:{node.lineno} {k.value}" for k in keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value not in known]
    assert unknown == []
