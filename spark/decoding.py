"""Executor side of Schema Registry decoding: one Confluent-framed key or value → a row of the
reader struct (the ``*_decoded`` column), or an error text (``*_decode_error``).

Confluent's wire format, as every Confluent serializer writes it::

    byte 0        magic byte 0
    bytes 1-4     schema id (big-endian, unsigned): the writer's schema in the registry
    PROTOBUF      message indexes: zig-zag varint count N, then N zig-zag varints naming the
                  message (top-level #i0, its nested #i1, ...); the single byte 0 means [0]
    the rest      Avro binary (no container header), JSON text, or the protobuf message

Each record is read with its writer's schema, then conformed to the reader struct by field
name: fields the writer lacks are null, fields the reader lacks are dropped.  Avro records
are first resolved against the reader's Avro schema (defaults, aliases, promotions) when
fastavro can; if the two do not resolve, the writer's fields are projected as above.

A ``RecordDecoder`` lives in one Python worker and is never pickled (``decoder_for`` caches
one per spec in the worker).  It fetches each writer schema once (``?format=serialized``:
protobuf as a base64 ``FileDescriptorProto``, the other types unchanged) and keeps it parsed;
a failed fetch is remembered for ``FAILURE_TTL_S``, so an unreachable registry costs one
attempt per schema id, not one per record.
"""
from __future__ import annotations

import base64
import binascii
import datetime as dt
import io
import json
import struct
import time
from dataclasses import dataclass

from pyspark.sql.types import _parse_datatype_json_string

from .conform import DecodeFailure, conform
from .schema_types import PB_MESSAGE_TYPES, TIMESTAMP, WRAPPERS, is_map, is_repeated

MAGIC = 0
HEADER = struct.Struct(">bI")   # magic byte, schema id
assert HEADER.size == 5
MAX_MESSAGE_INDEXES = 100
FAILURE_TTL_S = 10.0
UTC = dt.timezone.utc


@dataclass(frozen=True)
class DecodeSpec:
    """What to decode and into what; plain data, pickled with the reader."""
    column: str          # "value" or "key"
    subject: str
    schema_type: str     # the reader schema's: AVRO | JSON | PROTOBUF
    schema_id: int       # the reader schema's id: the subject's latest at query start
    message: str | None  # PROTOBUF: the reader message's full name
    struct_json: str     # the reader Spark type, ``DataType.json()``
    registry: tuple      # SchemaRegistryClient conf as sorted (key, value) pairs

    @property
    def decoded(self) -> str:
        return f"{self.column}_decoded"

    @property
    def error(self) -> str:
        return f"{self.column}_decode_error"


# -- framing ----------------------------------------------------------------------------------

def split_frame(data: bytes) -> tuple[int, memoryview]:
    """(schema id, payload) of Confluent-framed bytes.  Raises DecodeFailure otherwise."""
    if len(data) < HEADER.size or data[0] != MAGIC:
        raise DecodeFailure("not in Confluent's wire format (magic byte 0 and a 4-byte schema "
                            f"id); first byte {data[:1].hex() or 'none'}, {len(data)} bytes")
    _, schema_id = HEADER.unpack_from(data)
    return schema_id, memoryview(data)[HEADER.size:]


def _zigzag_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise DecodeFailure("truncated protobuf message indexes")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def message_indexes(payload: memoryview) -> tuple[list[int], memoryview]:
    """(indexes, message bytes) of a protobuf payload.  Raises DecodeFailure."""
    count, pos = _zigzag_varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise DecodeFailure(f"bad protobuf message index count {count}")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag_varint(payload, pos)
        indexes.append(index)
    return indexes, payload[pos:]


# -- registry and schemas ---------------------------------------------------------------------

_CLIENTS: dict = {}   # one SchemaRegistryClient per conf in each (reused) Python worker
_DECODERS: dict = {}


def registry_client(conf: tuple):
    client = _CLIENTS.get(conf)
    if client is None:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        client = _CLIENTS[conf] = SchemaRegistryClient(dict(conf))
    return client


def fetch_references(client, schema) -> list[tuple[str, object]]:
    """[(reference name, Schema)] of everything ``schema`` references, transitively,
    dependencies first.  Raises the client's errors."""
    found: dict = {}

    def walk(s, visiting: tuple) -> None:
        for ref in s.references or ():
            if ref.name in found or ref.name in visiting:
                continue
            dep = client.get_version(ref.subject, ref.version, fmt="serialized").schema
            walk(dep, visiting + (ref.name,))
            found[ref.name] = dep
    walk(schema, ())
    return list(found.items())


def _file_proto(name: str, schema_str: str):
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError
    try:
        raw = base64.b64decode(schema_str, validate=True)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, TypeError, DecodeError) as exc:
        raise DecodeFailure(f"the registry did not serve protobuf schema {name} as a serialized "
                            f"FileDescriptorProto (format=serialized): {exc}") from None
    fdp.name = name
    return fdp


def _builtin_file(name: str):
    """A file the protobuf runtime ships (google/protobuf/*, confluent/*), as a proto."""
    from google.protobuf import (any_pb2, descriptor_pb2, descriptor_pool, duration_pb2,  # noqa: F401
                                 empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2)
    try:
        from confluent_kafka.schema_registry.confluent import meta_pb2  # noqa: F401
    except ImportError:
        pass
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise DecodeFailure(f"protobuf import {name!r} is neither a schema reference nor built in") from None
    return descriptor_pb2.FileDescriptorProto.FromString(found.serialized_pb)


def protobuf_pool(main_name: str, schema, refs: list):
    """(DescriptorPool, FileDescriptorProto of the main file) holding ``schema`` and its
    references.  Raises DecodeFailure."""
    from google.protobuf import descriptor_pool
    files = {name: _file_proto(name, s.schema_str) for name, s in refs}
    files[main_name] = _file_proto(main_name, schema.schema_str)
    pool, added = descriptor_pool.DescriptorPool(), set()

    def add(name: str) -> None:
        if name in added:
            return
        added.add(name)
        fdp = files.get(name) or _builtin_file(name)
        for dep in fdp.dependency:
            add(dep)
        pool.Add(fdp)
    add(main_name)
    return pool, files[main_name]


def message_name(fdp, indexes: list[int]) -> str:
    """Full name of the message ``indexes`` names in file ``fdp``.  Raises DecodeFailure."""
    name, messages = fdp.package, fdp.message_type
    for i in indexes:
        if not 0 <= i < len(messages):
            raise DecodeFailure(f"protobuf message index {indexes} is not in the schema")
        name = f"{name}.{messages[i].name}" if name else messages[i].name
        messages = messages[i].nested_type
    return name


# -- decoding ---------------------------------------------------------------------------------

def decoder_for(spec: DecodeSpec) -> "RecordDecoder":
    decoder = _DECODERS.get(spec)
    if decoder is None:
        decoder = _DECODERS[spec] = RecordDecoder(spec)
    return decoder


class RecordDecoder:
    """Decodes one column (key or value) for one spec; see the module doc.  Not thread-safe."""

    def __init__(self, spec: DecodeSpec):
        self.spec = spec
        self.struct = _parse_datatype_json_string(spec.struct_json)
        self._writers: dict = {}    # schema id -> payload -> Python object
        self._failures: dict = {}   # schema id -> (error text, monotonic time)
        self._reader_avro = None

    def decode(self, data) -> tuple[object, str | None]:
        """(row or None, error text or None); a null key/value is (None, None)."""
        if data is None:
            return None, None
        try:
            schema_id, payload = split_frame(data)
            return conform(self._writer(schema_id)(payload), self.struct), None
        except DecodeFailure as exc:
            return None, str(exc)
        except Exception as exc:  # a payload its own schema cannot read
            return None, f"{type(exc).__name__}: {exc}"

    def _writer(self, schema_id: int):
        fn = self._writers.get(schema_id)
        if fn is not None:
            return fn
        failed = self._failures.get(schema_id)
        if failed is not None and time.monotonic() - failed[1] < FAILURE_TTL_S:
            raise DecodeFailure(failed[0])
        try:
            client = registry_client(self.spec.registry)
            schema = client.get_schema(schema_id, fmt="serialized")
            fn = self._build(client, schema_id, schema)
        except Exception as exc:
            text = f"schema id {schema_id}: {exc}"
            self._failures[schema_id] = (text, time.monotonic())
            raise DecodeFailure(text) from None
        self._writers[schema_id] = fn
        return fn

    def _build(self, client, schema_id: int, schema):
        refs = fetch_references(client, schema)
        kind = schema.schema_type or "AVRO"
        if kind == "JSON":
            return lambda payload: json.loads(bytes(payload))
        if kind == "PROTOBUF":
            return _protobuf_reader(*protobuf_pool(f"schema-{schema_id}.proto", schema, refs))
        if kind != "AVRO":
            raise DecodeFailure(f"unknown schemaType {kind}")
        writer = _parse_avro(schema, refs)
        reader = None
        if self.spec.schema_type == "AVRO" and schema_id != self.spec.schema_id:
            reader = self._reader_schema(client)
        return _avro_reader(writer, reader)

    def _reader_schema(self, client):
        if self._reader_avro is None:
            schema = client.get_schema(self.spec.schema_id, fmt="serialized")
            self._reader_avro = _parse_avro(schema, fetch_references(client, schema))
        return self._reader_avro


def _parse_avro(schema, refs):
    import fastavro
    named: dict = {}
    for _, ref in refs:
        fastavro.parse_schema(json.loads(ref.schema_str), named_schemas=named)
    return fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)


def _avro_reader(writer, reader):
    import fastavro
    from fastavro.read import SchemaResolutionError
    state = {"reader": reader}

    def read(payload):
        if state["reader"] is not None:
            try:
                return fastavro.schemaless_reader(io.BytesIO(payload), writer, state["reader"],
                                                  return_record_name=True,
                                                  return_record_name_override=True)
            except SchemaResolutionError:
                state["reader"] = None  # these two do not resolve: project by field name
        return fastavro.schemaless_reader(io.BytesIO(payload), writer, None, return_record_name=True,
                                          return_record_name_override=True)
    return read


def _protobuf_reader(pool, fdp):
    from google.protobuf.message_factory import GetMessageClass
    classes: dict = {}

    def read(payload):
        indexes, body = message_indexes(payload)
        key = tuple(indexes)
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = GetMessageClass(pool.FindMessageTypeByName(message_name(fdp, indexes)))
        return message_to_python(cls.FromString(bytes(body)))
    return read


def message_to_python(msg) -> dict:
    """A protobuf message as a dict by field name: enums by name, Timestamp as datetime,
    wrappers as their value, an absent message or optional scalar as None."""
    out = {}
    for fd in msg.DESCRIPTOR.fields:
        value = getattr(msg, fd.name)
        if is_map(fd):
            value_fd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _pb_value(value_fd, v) for k, v in value.items()}
        elif is_repeated(fd):
            out[fd.name] = [_pb_value(fd, v) for v in value]
        elif fd.has_presence and not msg.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _pb_value(fd, value)
    return out


def _pb_value(fd, v):
    if fd.type == 14:  # enum
        known = fd.enum_type.values_by_number.get(v)
        return known.name if known is not None else str(v)
    if fd.type in PB_MESSAGE_TYPES:
        name = fd.message_type.full_name
        if name == TIMESTAMP:
            return v.ToDatetime(tzinfo=UTC)
        if name in WRAPPERS:
            return v.value
        return message_to_python(v)
    return v


__all__ = ["DecodeFailure", "DecodeSpec", "RecordDecoder", "conform", "decoder_for",
           "fetch_references", "message_indexes", "message_name", "message_to_python",
           "protobuf_pool", "registry_client", "split_frame"]
