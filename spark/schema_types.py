"""Spark types for registry schemas: an Avro schema, a JSON Schema or a Protobuf message
descriptor → the ``DataType`` of the ``value_decoded``/``key_decoded`` column.  Pure functions
of the schema: no registry, no Spark session (tests run them without a JVM).

Avro, as Spark's ``from_avro`` maps it: boolean, int, long, float, double, bytes, string →
the Spark type of that name; enum → string; fixed → binary; record → struct; array →
array; map → map<string, …>; ``["null", T]`` → T, nullable; ``[int, long]`` → long,
``[float, double]`` → double; any other union → struct<member0, member1, …> with one field
per non-null branch (each field's metadata ``avro.branch`` names its branch).  Logical
types: date → date, timestamp-millis/-micros → timestamp, local-timestamp-millis/-micros →
timestamp_ntz, decimal(p ≤ 38, s) → decimal(p, s) (wider: string), uuid → string,
time-millis → int and time-micros → long (milliseconds/microseconds of the day).

JSON Schema: object with ``properties`` → struct (a field is nullable unless ``required``);
object with only an ``additionalProperties`` schema → map<string, …>; array with ``items`` →
array; string, integer (long), number (double), boolean; ``"type": [T, "null"]`` and
``anyOf``/``oneOf`` of T and null → T, nullable; integer with number → double; ``$ref`` into
the same document (``#/definitions/…``, ``#/$defs/…``).  Anything else (no type, several
types, a bare object) → string holding the JSON text.

Protobuf: double, float, int32/sint32/sfixed32 (int), int64/sint64/sfixed64 (long),
uint32/fixed32 (long), uint64/fixed64 (decimal(20,0)), bool, string, bytes, enum → string
(the value's name), message → struct, repeated → array, map<K, V> → map;
``google.protobuf.Timestamp`` → timestamp, the wrappers (``StringValue``…) → their scalar.
A field whose message type contains itself (recursion) is left out, as Spark's
``from_protobuf`` does by default.

Recursive Avro records and JSON ``$ref`` cycles raise ValueError: Spark types are finite.
"""
from __future__ import annotations

from typing import Mapping

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DateType,
                               DecimalType, DoubleType, FloatType, IntegerType, LongType,
                               MapType, NullType, StringType, StructField, StructType,
                               TimestampNTZType, TimestampType)

UNION_BRANCH = "avro.branch"  # metadata key on the member fields of a multi-branch union
MAX_DECIMAL_PRECISION = 38     # Spark's DecimalType limit

_AVRO_PRIMITIVES = {"null": NullType(), "boolean": BooleanType(), "int": IntegerType(),
                    "long": LongType(), "float": FloatType(), "double": DoubleType(),
                    "bytes": BinaryType(), "string": StringType()}
_AVRO_LOGICAL = {"date": DateType(), "timestamp-millis": TimestampType(),
                 "timestamp-micros": TimestampType(), "local-timestamp-millis": TimestampNTZType(),
                 "local-timestamp-micros": TimestampNTZType(), "uuid": StringType(),
                 "time-millis": IntegerType(), "time-micros": LongType()}


def as_nullable(dt: DataType) -> DataType:
    """``dt`` with every nested field, element and map value nullable (Spark's ``asNullable``,
    which ``from_json`` applies for the same reason: a record written with another schema
    may lack any field)."""
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, as_nullable(f.dataType), True, f.metadata)
                           for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(as_nullable(dt.elementType), True)
    if isinstance(dt, MapType):
        return MapType(as_nullable(dt.keyType), as_nullable(dt.valueType), True)
    return dt


# -- Avro --------------------------------------------------------------------------------------

def avro_to_spark(schema, references: list | tuple = ()) -> DataType:
    """The Spark type of an Avro schema (parsed JSON: a type name, a dict or a union list).
    ``references`` are parsed schemas defining named types the schema uses (Confluent's
    schema references), dependencies first.  Raises ValueError for a name that is not
    defined or a recursive record."""
    converter = _AvroConverter()
    for ref in references:
        converter.convert(ref, "", ())
    return converter.convert(schema, "", ())[0]


class _AvroConverter:
    def __init__(self):
        self.named: dict[str, dict] = {}  # full name -> definition, in order of appearance

    def convert(self, s, namespace: str, stack: tuple) -> tuple[DataType, bool]:
        """(type, nullable) of schema ``s`` inside ``namespace``; ``stack`` holds the records
        being converted (a record reached again is recursion)."""
        if isinstance(s, list):
            return self._union(s, namespace, stack)
        if isinstance(s, str):
            if s in _AVRO_PRIMITIVES:
                return _AVRO_PRIMITIVES[s], s == "null"
            return self._named(self._resolve(s, namespace), stack)
        if not isinstance(s, dict) or "type" not in s:
            raise ValueError(f"not an Avro schema: {s!r}")
        kind = s["type"]
        if kind in ("record", "error", "enum", "fixed"):
            full = _full_name(s, namespace)
            self.named[full] = {**s, "_namespace": full.rpartition(".")[0]}
            return self._named(full, stack)
        logical = _avro_logical(s)
        if logical is not None:
            return logical, False
        if kind == "array":
            item, item_null = self.convert(s["items"], namespace, stack)
            return ArrayType(item, item_null), False
        if kind == "map":
            value, value_null = self.convert(s["values"], namespace, stack)
            return MapType(StringType(), value, value_null), False
        return self.convert(kind, namespace, stack)  # {"type": "string"} or {"type": {...}}

    def _resolve(self, name: str, namespace: str) -> str:
        for candidate in ((f"{namespace}.{name}" if namespace and "." not in name else name), name):
            if candidate in self.named:
                return candidate
        raise ValueError(f"Avro type {name!r} is not defined (a missing schema reference?)")

    def _named(self, full: str, stack: tuple) -> tuple[DataType, bool]:
        s = self.named[full]
        logical = _avro_logical(s)  # a decimal on a fixed
        if logical is not None:
            return logical, False
        if s["type"] == "enum":
            return StringType(), False
        if s["type"] == "fixed":
            return BinaryType(), False
        if full in stack:
            raise ValueError(f"Avro record {full} is recursive: it has no Spark type")
        fields = []
        for f in s.get("fields", ()):
            dt, nullable = self.convert(f["type"], s["_namespace"], stack + (full,))
            fields.append(StructField(f["name"], dt, nullable))
        return StructType(fields), False

    def _union(self, branches: list, namespace: str, stack: tuple) -> tuple[DataType, bool]:
        nullable = any(b == "null" or (isinstance(b, dict) and b.get("type") == "null")
                       for b in branches)
        others = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        if not others:
            return NullType(), True
        converted = [self.convert(b, namespace, stack)[0] for b in others]
        if len(converted) == 1:
            return converted[0], nullable
        kinds = {type(dt) for dt in converted}
        if kinds <= {IntegerType, LongType}:
            return LongType(), nullable
        if kinds <= {FloatType, DoubleType}:
            return DoubleType(), nullable
        return StructType([StructField(f"member{i}", dt, True,
                                       {UNION_BRANCH: self._branch_name(b, namespace)})
                           for i, (b, dt) in enumerate(zip(others, converted))]), nullable

    def _branch_name(self, b, namespace: str) -> str:
        if isinstance(b, str):
            return b if b in _AVRO_PRIMITIVES else self._resolve(b, namespace)
        if b.get("type") in ("record", "error", "enum", "fixed"):
            return _full_name(b, namespace)
        return b["type"] if isinstance(b["type"], str) else "complex"


def _full_name(s: dict, namespace: str) -> str:
    name = s["name"]
    if "." in name:
        return name
    ns = s.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _avro_logical(s: dict) -> DataType | None:
    logical = s.get("logicalType")
    if logical == "decimal" and s["type"] in ("bytes", "fixed"):
        precision, scale = int(s.get("precision", 0)), int(s.get("scale", 0))
        if 0 < precision <= MAX_DECIMAL_PRECISION:
            return DecimalType(precision, scale)
        return StringType()
    return _AVRO_LOGICAL.get(logical) if isinstance(s["type"], str) else None


# -- JSON Schema ------------------------------------------------------------------------------

_JSON_SCALARS = {"string": StringType(), "integer": LongType(), "number": DoubleType(),
                 "boolean": BooleanType(), "null": NullType()}


def json_schema_to_spark(schema: Mapping) -> DataType:
    """The Spark type of a JSON Schema document (see the module doc).  Raises ValueError for
    a ``$ref`` outside the document or a reference cycle."""
    return _json(schema, schema, ())[0]


def _json(s, root, refs: tuple) -> tuple[DataType, bool]:
    if not isinstance(s, Mapping):
        return StringType(), True  # true/false schemas: anything
    if "$ref" in s:
        ref = s["$ref"]
        if ref in refs:
            raise ValueError(f"JSON Schema $ref {ref} is recursive: it has no Spark type")
        return _json(_pointer(root, ref), root, refs + (ref,))
    for key in ("anyOf", "oneOf"):
        if key in s:
            members = s[key]
            nullable = any(isinstance(m, Mapping) and m.get("type") == "null" for m in members)
            others = [m for m in members if not (isinstance(m, Mapping) and m.get("type") == "null")]
            if len(others) == 1:
                dt, inner = _json(others[0], root, refs)
                return dt, nullable or inner
            return StringType(), True
    kind = s.get("type")
    nullable = False
    if isinstance(kind, list):
        nullable = "null" in kind
        kinds = [k for k in kind if k != "null"]
        if set(kinds) == {"integer", "number"}:
            return DoubleType(), nullable
        if len(kinds) != 1:
            return StringType(), True
        kind = kinds[0]
    if kind is None:
        kind = "object" if "properties" in s else "array" if "items" in s else None
    if kind == "object":
        return _json_object(s, root, refs), nullable
    if kind == "array":
        items = s.get("items")
        element = _json(items, root, refs) if isinstance(items, Mapping) else (StringType(), True)
        return ArrayType(element[0], element[1]), nullable
    if kind in _JSON_SCALARS:
        return _JSON_SCALARS[kind], nullable or kind == "null"
    return StringType(), True


def _json_object(s: Mapping, root, refs: tuple) -> DataType:
    props = s.get("properties")
    if props:
        required = set(s.get("required", ()))
        fields = []
        for name, sub in props.items():
            dt, nullable = _json(sub, root, refs)
            fields.append(StructField(name, dt, nullable or name not in required))
        return StructType(fields)
    extra = s.get("additionalProperties")
    if isinstance(extra, Mapping) and extra:
        dt, nullable = _json(extra, root, refs)
        return MapType(StringType(), dt, nullable)
    return StringType()


def _pointer(root, ref: str):
    if not ref.startswith("#"):
        raise ValueError(f"JSON Schema $ref {ref!r} points outside the schema (references to "
                         "other registered schemas are not supported)")
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        try:
            node = node[int(part) if isinstance(node, list) else part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ValueError(f"JSON Schema $ref {ref!r} names nothing in the schema") from None
    return node


# -- Protobuf ---------------------------------------------------------------------------------

# FieldDescriptor.TYPE_* numbers (descriptor.proto)
_PB_TYPES = {1: DoubleType(), 2: FloatType(), 3: LongType(), 4: DecimalType(20, 0),
             5: IntegerType(), 6: DecimalType(20, 0), 7: LongType(), 8: BooleanType(),
             9: StringType(), 12: BinaryType(), 13: LongType(), 14: StringType(),
             15: IntegerType(), 16: LongType(), 17: IntegerType(), 18: LongType()}
PB_MESSAGE_TYPES = (10, 11)  # group, message
TIMESTAMP = "google.protobuf.Timestamp"
WRAPPERS = {f"google.protobuf.{n}Value" for n in
            ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}


def is_repeated(fd) -> bool:
    repeated = getattr(fd, "is_repeated", None)  # protobuf ≥ 5.28; ``label`` before
    return bool(repeated) if repeated is not None else fd.label == 3


def is_map(fd) -> bool:
    return fd.type == 11 and fd.message_type.GetOptions().map_entry


def protobuf_to_spark(descriptor) -> StructType:
    """The Spark struct of a protobuf message ``Descriptor`` (see the module doc)."""
    return _pb_message(descriptor, (descriptor.full_name,))


def _pb_message(descriptor, stack: tuple) -> StructType:
    fields = []
    for fd in descriptor.fields:
        dt = _pb_field(fd, stack)
        if dt is not None:
            # presence: messages, oneof members and `optional` scalars can be absent
            fields.append(StructField(fd.name, dt, fd.type in PB_MESSAGE_TYPES or bool(fd.has_presence)))
    return StructType(fields)


def _pb_field(fd, stack: tuple) -> DataType | None:
    if is_map(fd):
        key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        value = _pb_single(value_fd, stack)
        return None if value is None else MapType(_pb_single(key_fd, stack), value, True)
    single = _pb_single(fd, stack)
    if single is None or not is_repeated(fd):
        return single
    return ArrayType(single, False)


def _pb_single(fd, stack: tuple) -> DataType | None:
    if fd.type not in PB_MESSAGE_TYPES:
        return _PB_TYPES[fd.type]
    message = fd.message_type
    if message.full_name == TIMESTAMP:
        return TimestampType()
    if message.full_name in WRAPPERS:
        return _PB_TYPES[message.fields_by_name["value"].type]
    if message.full_name in stack:
        return None  # recursive: dropped
    return _pb_message(message, stack + (message.full_name,))


__all__ = ["UNION_BRANCH", "as_nullable", "avro_to_spark", "is_map", "is_repeated",
           "json_schema_to_spark", "protobuf_to_spark"]
