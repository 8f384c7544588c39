"""Request/response codec glue over kafka-python's generated protocol classes.

Kafka's JSON message specs (shipped with kafka-python 3.x) are the single
source of truth for every API body.  Requests are decoded by kafka-python's
generated decoder, every low-level failure turned into ``CorruptFrame``.
Responses are encoded here, in one walk over the schema straight from the
handlers' plain dicts: nothing is written per API by hand, and the only
module that reads kafka-python's private attributes is this one.

Byte layout of the values a response schema is made of (big-endian)::

    int8 int16 uint16 int32 int64 float64 bool   fixed width
    bitfield (kafka-python's authorized_operations)   uint32; None = bit 31 only
    uuid                16 bytes; None = all zero
    string              classic: int16 length, -1 = null | utf-8
                        flexible: uvarint(length + 1), 0 = null | utf-8
    bytes, records      classic: int32 length, -1 = null | bytes
                        flexible: uvarint(length + 1), 0 = null | bytes
    array               classic: int32 count, -1 = null | items
                        flexible: uvarint(count + 1), 0 = null | items
    struct              its fields in schema order, then (flexible) tagged fields
    nullable struct     int8 -1 = null, 1 = present | struct
    tagged fields       uvarint count | per field, ascending tag:
                        uvarint tag | uvarint size | value (flexible encoding)

A ``records`` value may be *deferred*: any object with a ``size`` attribute
that is not bytes (file slices sent later with sendfile).  Its length prefix
is written in place and the object itself becomes a separate part, so its
position is known structurally (no markers searched for in the output).
"""
from __future__ import annotations

import struct
import types
import uuid

from kafka.protocol import admin as _admin
from kafka.protocol import consumer as _consumer
from kafka.protocol import metadata as _metadata
from kafka.protocol import producer as _producer
from kafka.protocol import sasl as _sasl
from kafka.protocol.api_data import ApiData as _ApiData

from . import specs as _specs
from .errors import CorruptFrame
from .primitives import uvarint

_MODULES = (_admin, _consumer, _metadata, _producer, _sasl)


def _collect() -> dict[int, tuple[type, type]]:
    pairs: dict[int, tuple[type, type]] = {}
    for module in _MODULES:
        for name in dir(module):
            if not name.endswith("Request"):
                continue
            req = getattr(module, name)
            resp = getattr(module, name[: -len("Request")] + "Response", None)
            if resp is None or not hasattr(req, "API_KEY"):
                continue
            pairs[req.API_KEY] = (req, resp)
    for name in _specs.NAMES:       # kwire's own specs: APIs kafka-python does not ship
        req, resp = getattr(_specs, name + "Request"), getattr(_specs, name + "Response")
        if req.API_KEY in pairs:
            raise RuntimeError(f"{name}: kafka-python now ships api_key {req.API_KEY}; "
                               f"remove kwire's spec of it (codecs/specs)")
        pairs[req.API_KEY] = (req, resp)
    return pairs


API_CLASSES: dict[int, tuple[type, type]] = _collect()


def response_class(api_key: int) -> type:
    return API_CLASSES[api_key][1]


def api_name(api_key: int) -> str:
    pair = API_CLASSES.get(api_key)
    return pair[0].__name__[: -len("Request")] if pair else f"api_key {api_key}"


def request_is_flexible(api_key: int, api_version: int) -> bool | None:
    pair = API_CLASSES.get(api_key)
    if pair is None:
        return None
    return pair[0].flexible_version_q(api_version)


def response_header_v1(api_key: int, api_version: int) -> bool:
    """Whether the response uses header v1 (tagged fields); never for ApiVersions."""
    if api_key == 18:
        return False
    return bool(API_CLASSES[api_key][1].flexible_version_q(api_version))


def response_has_field(api_key: int, api_version: int, name: str) -> bool:
    """Whether the response body has top-level field ``name`` at ``api_version``."""
    field = API_CLASSES[api_key][1]._struct.fields.get(name)
    return field is not None and field.for_version_q(api_version)


def decode_request(api_key: int, api_version: int, frame: bytes, offset: int):
    """Decode a request body; raises ``CorruptFrame`` on any malformed input."""
    cls = API_CLASSES[api_key][0]
    try:
        return cls.decode(memoryview(frame)[offset:], version=api_version)
    except CorruptFrame:
        raise
    except Exception as exc:  # struct.error, IndexError, ValueError, UnicodeDecodeError...
        raise CorruptFrame(f"cannot decode {cls.__name__} v{api_version}: {exc!r}") from exc


# --- response encoding ------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_ZERO_UUID = bytes(16)
_BYTES_LIKE = (bytes, bytearray, memoryview)
_FIXED = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q",
          "float64": "d", "bool": "?"}
# Step kinds; _RUN packs consecutive fixed-width fields with one struct.Struct.
(_RUN, _FIX, _STRING, _BYTES, _RECORDS, _UUID, _BITFIELD,
 _STRUCTS, _STRUCT, _ARRAY_FIXED, _ARRAY) = range(11)
_SIMPLE = {"string": _STRING, "bytes": _BYTES, "records": _RECORDS, "uuid": _UUID,
           "bitfield": _BITFIELD}


class _Plan:
    """How one struct is written at one version: wire-order steps, then tagged fields."""

    __slots__ = ("path", "names", "steps", "tagged", "tagged_names", "flexible")

    def __init__(self, path, names, steps, tagged, flexible):
        self.path = path
        self.names = names          # every field name the schema knows, at any version
        self.steps = steps          # (kind, name, default, arg); for _RUN name = ((name, default), ...)
        self.tagged = tagged        # (tag, name, default, kind, arg), ascending tag
        self.tagged_names = frozenset(t[1] for t in tagged)
        self.flexible = flexible


def _default(field):
    try:
        return field.default
    except NotImplementedError:  # a struct without a declared default: all its defaults
        return {}


def _step(field, version: int, flexible: bool, path: str) -> tuple[int, object]:
    """The (kind, arg) that writes ``field``'s value at ``version``."""
    if field.is_struct_array():
        return _STRUCTS, _plan(field.array_of, version, flexible, f"{path}.{field.name}[]")
    if field.is_array():
        item = field.array_of.type_str
        if item in _FIXED:
            return _ARRAY_FIXED, ">%d" + _FIXED[item]
        return _ARRAY, _step(field.array_of, version, flexible, path)
    if field.is_struct():
        return _STRUCT, (_plan(field, version, flexible, f"{path}.{field.name}"),
                         field.nullable_for_version_q(version))
    if field.type_str in _FIXED:
        return _FIX, struct.Struct(">" + _FIXED[field.type_str])
    return _SIMPLE[field.type_str], None


def _plan(schema, version: int, flexible: bool, path: str) -> _Plan:
    steps: list = []
    tagged: list = []
    run: list = []  # pending fixed-width fields: (name, default, format char)

    def end_run():
        if run:
            fmt = ">" + "".join(f for _, _, f in run)
            steps.append((_RUN, tuple((n, d) for n, d, _ in run), None, struct.Struct(fmt)))
            run.clear()

    for field in schema.fields.values():
        if not field.for_version_q(version):
            continue
        if field.tagged_field_q(version):
            if flexible:
                tagged.append((field.tag, field.name, _default(field),
                               *_step(field, version, flexible, path)))
            continue
        kind, arg = _step(field, version, flexible, path)
        if kind == _FIX:
            run.append((field.name, field.default, _FIXED[field.type_str]))
            continue
        end_run()
        steps.append((kind, field.name, _default(field), arg))
    end_run()
    tagged.sort(key=lambda t: t[0])
    return _Plan(path, frozenset(schema.fields), tuple(steps), tuple(tagged), flexible)


_PLANS: dict[tuple[int, int], _Plan] = {}
_DATA_PLANS: dict[tuple[int, int], _Plan] = {}    # (id of a data spec's schema, version); schemas live forever


def _response_plan(api_key: int, api_version: int) -> _Plan:
    plan = _PLANS.get((api_key, api_version))
    if plan is None:
        cls = API_CLASSES[api_key][1]
        if not 0 <= api_version <= cls.max_version:
            raise ValueError(f"{cls.__name__} has no version {api_version}")
        plan = _plan(cls._struct, api_version, cls.flexible_version_q(api_version),
                     f"{cls.__name__} v{api_version}")
        _PLANS[(api_key, api_version)] = plan
    return plan


def _length(n: int | None, flexible: bool, classic: struct.Struct) -> bytes:
    if flexible:
        return b"\x00" if n is None else uvarint(n + 1)
    return classic.pack(-1 if n is None else n)


def _put(kind: int, arg, value, buf: bytearray, parts: list | None, flexible: bool) -> None:
    """Append ``value`` encoded as ``kind`` to ``buf`` (deferred records go to ``parts``)."""
    if kind == _STRUCTS:
        if value is None:
            buf += _length(None, flexible, _I32)
            return
        buf += _length(len(value), flexible, _I32)
        for item in value:
            _walk(arg, item, buf, parts)
    elif kind == _STRING:
        data = None if value is None else str(value).encode()
        buf += _length(None if data is None else len(data), flexible, _I16)
        if data:
            buf += data
    elif kind == _RECORDS or kind == _BYTES:
        _put_bytes(kind, value, buf, parts, flexible)
    elif kind == _ARRAY_FIXED:
        buf += _length(None if value is None else len(value), flexible, _I32)
        if value:
            buf += struct.pack(arg % len(value), *value)
    elif kind == _FIX:
        buf += arg.pack(value)
    elif kind == _STRUCT:
        plan, nullable = arg
        if nullable:
            buf.append(0xFF if value is None else 1)
            if value is None:
                return
        _walk(plan, value, buf, parts)
    elif kind == _UUID:
        buf += _ZERO_UUID if value is None else (
            value.bytes if isinstance(value, uuid.UUID) else uuid.UUID(value).bytes)
    elif kind == _BITFIELD:
        buf += _U32.pack(sum(1 << bit for bit in ({31} if value is None else value)))
    else:  # _ARRAY of strings, uuids...
        buf += _length(None if value is None else len(value), flexible, _I32)
        for item in value or ():
            _put(arg[0], arg[1], item, buf, parts, flexible)


def _put_bytes(kind: int, value, buf: bytearray, parts: list | None, flexible: bool) -> None:
    if value is None or isinstance(value, _BYTES_LIKE):
        buf += _length(None if value is None else len(value), flexible, _I32)
        if value:
            buf += value
        return
    if kind == _BYTES or not hasattr(value, "size") or parts is None:
        raise TypeError(f"cannot encode a {type(value).__name__} as {'bytes' if kind == _BYTES else 'records'}"
                        + (" inside a tagged field" if parts is None else ""))
    buf += _length(value.size, flexible, _I32)
    if value.size:
        parts.append(bytes(buf))
        parts.append(value)
        buf.clear()


def _walk(plan: _Plan, values: dict, buf: bytearray, parts: list | None) -> None:
    """Append the struct ``values`` (a dict) encoded by ``plan`` to ``buf``."""
    if type(values) is not dict:
        raise TypeError(f"{plan.path}: expected a dict, got {type(values).__name__}")
    if not values.keys() <= plan.names:
        raise ValueError(f"unknown fields for {plan.path}: {sorted(values.keys() - plan.names)}")
    get = values.get
    flexible = plan.flexible
    for kind, name, default, arg in plan.steps:
        if kind == _RUN:
            try:
                buf += arg.pack(*[get(n, d) for n, d in name])
            except struct.error as exc:
                raise ValueError(f"{plan.path}: cannot encode {[n for n, _ in name]}: {exc}") from None
        else:
            _put(kind, arg, get(name, default), buf, parts, flexible)
    if not flexible:
        return
    if plan.tagged_names.isdisjoint(values):
        buf.append(0)
        return
    present = [t for t in plan.tagged if t[1] in values and values[t[1]] != t[2]]
    buf += uvarint(len(present))
    for tag, name, _default_value, kind, arg in present:
        value = bytearray()
        _put(kind, arg, values[name], value, None, True)
        buf += uvarint(tag)
        buf += uvarint(len(value))
        buf += value


def encode_spliced(api_key: int, api_version: int, fields: dict) -> list:
    """Encode a response body; returns parts in wire order: ``bytes`` and deferred records.

    Parts alternate bytes, deferred, bytes, ... and start and end with bytes.
    Nested structs are dicts, arrays of structs lists of dicts, with
    kafka-python's snake_case names; a missing field takes its schema default
    and fields absent at this version are ignored.  Raises ``ValueError`` for
    a name the schema does not know or a value that does not fit its type,
    ``TypeError`` for a value of the wrong kind.  Pure function.
    """
    parts: list = []
    buf = bytearray()
    _walk(_response_plan(api_key, api_version), fields, buf, parts)
    parts.append(bytes(buf))
    return parts


def data_spec(name: str):
    """``(schema, flexible_version_q, versions)`` of the data spec ``codecs/specs/<name>.json``
    (a coordinator record's key or value), loaded by kafka-python's generator."""
    cls = types.new_class(name, (_ApiData,), {"load_json": _specs})
    return cls._struct, cls.flexible_version_q, range(cls.min_version, cls.max_version + 1)


def encode_data(schema, version: int, flexible: bool, fields: dict) -> bytes:
    """Encode one struct of a kafka-python schema (a ``data`` spec's ``_struct``) at
    ``version``, as a response body is encoded; raises as ``encode_spliced``."""
    plan = _DATA_PLANS.get((id(schema), version))
    if plan is None:
        plan = _DATA_PLANS[(id(schema), version)] = _plan(schema, version, flexible, f"{schema.name} v{version}")
    buf = bytearray()
    _walk(plan, fields, buf, None)
    return bytes(buf)


def encode_response(api_key: int, api_version: int, fields: dict) -> bytes:
    """Encode a response body whose records (if any) are all bytes; raises as ``encode_spliced``."""
    parts = encode_spliced(api_key, api_version, fields)
    if len(parts) != 1:
        raise TypeError("deferred records need encode_spliced")
    return parts[0]


def parts_size(parts: list) -> int:
    """Bytes on the wire for ``encode_spliced``'s parts."""
    return sum(len(p) if isinstance(p, (bytes, bytearray)) else p.size for p in parts)
