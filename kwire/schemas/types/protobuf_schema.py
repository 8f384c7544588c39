"""PROTOBUF schemas: ``.proto`` text or a base64 ``FileDescriptorProto``, built into a private
DescriptorPool, payloads parsed by a message class of that pool.

Two spellings arrive: Confluent's Java serializer and curl users register ``.proto`` text (read by
``_proto_parser``); confluent-kafka's Python serializer registers base64 of the serialized
``FileDescriptorProto`` and asks for the same back with ``format=serialized``.  A schema string made
only of base64 characters is the latter (``.proto`` text always holds a space or ``;``).

References: each reference's file enters the pool under its reference name (its own references
first), so ``import "<name>"`` resolves to it; ``google/protobuf/*.proto`` imports are built in.
Confluent's ``confluent/meta.proto`` and ``confluent/type/decimal.proto`` are not: register them as
references.  The schema's own file is named ``default`` in the pool, as confluent-kafka's
deserializer names the file it reads.

Payload layout (after Confluent's 5-byte header)::

    message-index array: zig-zag varint count N, then N zig-zag varint indexes
                         (the single byte 0x00 means [0], the first message)
    message bytes:       the protobuf encoding of the message the indexes name
                         (top-level message #i0, its nested message #i1, ...)
"""
from __future__ import annotations

import base64
import binascii
import re

from google.protobuf import (any_pb2, api_pb2, descriptor_pb2, descriptor_pool, duration_pb2, empty_pb2,
                             field_mask_pb2, message, message_factory, source_context_pb2, struct_pb2,
                             timestamp_pb2, type_pb2, wrappers_pb2)

from kwire.codecs.errors import CorruptFrame
from kwire.codecs.primitives import read_varint

from . import _proto_compat
from ._base import ParsedSchema, RecordInvalid, SchemaError
from ._proto_parser import parse_proto
from ._proto_text import render

MAIN_FILE = "default"
# dependencies first: type.proto imports any and source_context, api.proto imports type
_BUILTINS = {module.DESCRIPTOR.name: module.DESCRIPTOR.serialized_pb for module in (
    descriptor_pb2, any_pb2, source_context_pb2, type_pb2, api_pb2, duration_pb2, empty_pb2,
    field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2)}
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_MAX_INDEXES = 100


class ProtobufSchema(ParsedSchema):
    """A parsed PROTOBUF schema (``parse_protobuf`` builds it)."""

    schema_type = "PROTOBUF"

    def __init__(self, raw: str, references, file: descriptor_pb2.FileDescriptorProto,
                 dependencies: dict[str, descriptor_pb2.FileDescriptorProto], pool):
        super().__init__(raw, references)
        self.file = file                  # resolved: fully-qualified type names, types set
        self.dependencies = dependencies  # import name -> resolved file, references of references first
        self._pool = pool
        self._canonical = render(file)
        self._normalized = render(file, normalize=True)
        self._classes: dict[tuple[int, ...], type] = {}

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._normalized

    def formatted(self, fmt: str | None) -> str:
        if fmt == "serialized":
            return base64.standard_b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")
        return self.raw

    def references_names(self) -> list[str]:
        return [name for name in self.file.dependency if name not in _BUILTINS]

    def record_names(self) -> list[str]:
        prefix = self.file.package + "." if self.file.package else ""
        names: list[str] = []

        def walk(messages, scope: str) -> None:
            for msg in messages:
                if not msg.options.map_entry:
                    names.append(scope + msg.name)
            for msg in messages:
                walk(msg.nested_type, f"{scope}{msg.name}.")

        walk(self.file.message_type, prefix)
        return names

    def validate(self, payload: bytes | memoryview) -> None:
        data = bytes(payload)
        indexes, pos = read_message_indexes(data)
        cls = self._classes.get(indexes) or self._message_class(indexes)
        msg = cls()
        try:
            msg.ParseFromString(data[pos:])
        except message.DecodeError as exc:
            raise RecordInvalid(f"not a valid {cls.DESCRIPTOR.full_name} message: {exc}") from None
        if not msg.IsInitialized():
            missing = ", ".join(msg.FindInitializationErrors())
            raise RecordInvalid(f"{cls.DESCRIPTOR.full_name} lacks required fields: {missing}")

    def _message_class(self, indexes: tuple[int, ...]) -> type:
        prefix = self.file.package + "." if self.file.package else ""
        candidates = [self._pool.FindMessageTypeByName(prefix + m.name) for m in self.file.message_type]
        descriptor = None
        for index in indexes:
            if not 0 <= index < len(candidates):
                raise RecordInvalid(f"message index {list(indexes)} names no message of the schema")
            descriptor = candidates[index]
            candidates = list(descriptor.nested_types)
        if descriptor is None:
            raise RecordInvalid("an empty message-index array")
        cls = message_factory.GetMessageClass(descriptor)
        self._classes[indexes] = cls
        return cls

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        return _proto_compat.reader_errors(self.file, writer.file)


def parse_protobuf(schema: str, references: list[tuple[str, ParsedSchema]]) -> ProtobufSchema:
    """Parse ``.proto`` text or a base64 FileDescriptorProto whose imports are ``references``.

    Raises SchemaError for a syntax error, bad base64 or descriptor bytes, an import with no
    reference, a reference that is not a PROTOBUF schema, or what the DescriptorPool refuses
    (unknown types, duplicate field numbers, ...).
    """
    if _BASE64.fullmatch(schema):
        try:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema, validate=False))
        except (binascii.Error, message.DecodeError, ValueError) as exc:
            raise SchemaError(f"Invalid schema: not a base64 FileDescriptorProto: {exc}") from None
    else:
        fdp = parse_proto(schema)
    fdp.name = MAIN_FILE
    dependencies = _dependencies(references)
    pool = descriptor_pool.DescriptorPool()
    _add_files(pool, [*dependencies.values(), fdp])
    resolved = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(MAIN_FILE).CopyToProto(resolved)
    return ProtobufSchema(schema, references, resolved, dependencies, pool)


def _dependencies(references) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, ref in references:
        if not isinstance(ref, ProtobufSchema):
            raise SchemaError(f"Invalid schema: reference {name!r} is a {ref.schema_type} schema, not PROTOBUF")
        for dep_name, dep in ref.dependencies.items():
            files.setdefault(dep_name, dep)
        if name not in files:
            own = descriptor_pb2.FileDescriptorProto()
            own.CopyFrom(ref.file)
            own.name = name
            files[name] = own
    return files


def _add_files(pool, files: list[descriptor_pb2.FileDescriptorProto]) -> None:
    known = {f.name for f in files}
    if any(d in _BUILTINS and d not in known for f in files for d in f.dependency):
        for serialized in _BUILTINS.values():
            pool.AddSerializedFile(serialized)
        known |= set(_BUILTINS)
    for file in files:
        missing = [d for d in file.dependency if d not in known]
        if missing:
            where = "the schema" if file.name == MAIN_FILE else f"reference {file.name!r}"
            raise SchemaError(f"Invalid schema: {where} imports {missing[0]!r}, but no reference of that name "
                              f"was given")
        try:
            pool.Add(file)
            pool.FindFileByName(file.name)
        except (TypeError, KeyError, ValueError) as exc:
            detail = str(exc).removeprefix("Couldn't build proto file into descriptor pool: ")
            raise SchemaError(f"Invalid schema: {detail}") from None


def read_message_indexes(data: bytes) -> tuple[tuple[int, ...], int]:
    """The message-index array at the start of a Confluent Protobuf payload (which message of
    the schema, nested by index; ``(0,)`` for the first) and where the message starts.
    Raises RecordInvalid (a ValueError)."""
    count, pos = _zigzag(data, 0)
    if count == 0:
        return (0,), pos
    if not 0 < count <= _MAX_INDEXES:
        raise RecordInvalid(f"a message-index array of {count} entries")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag(data, pos)
        indexes.append(index)
    return tuple(indexes), pos


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of the message-index array (the wire codec's reader)."""
    try:
        return read_varint(data, pos)
    except CorruptFrame:
        raise RecordInvalid("the message-index array is cut short") from None
