"""Coordinator record keys and values, encoded and decoded from Kafka's JSON data specs.

The records of ``__consumer_offsets``, ``__transaction_state`` and
``__share_group_state`` are Kafka "data" messages: each key and value is an
int16 version followed by the message at that version, in the same encoding as
a protocol message (classic or, at a flexible version, compact with tagged
fields; see ``messages`` and ``primitives`` for the byte layouts).  Their specs
live in ``codecs/specs`` beside the API specs (``OffsetCommitKey.json``,
``ConsumerGroupMemberMetadataValue.json``, ``TransactionLogValue.json``,
``ShareSnapshotValue.json``, ...); kafka-python's spec loader turns each into a
schema, ``messages`` encodes from it and this module decodes with the
bounds-checked ``primitives.Reader``, so no record layout is written by hand.

Values are plain dicts with kafka-python's snake_case field names; nested
structs are dicts, arrays lists.  A field absent at the decoded version (or a
tagged field not present) reads as its spec default.  A classic bytes field
with length -1 reads as empty, as kwire has always read a member's
subscription.
"""
from __future__ import annotations

import struct

from .messages import data_spec, encode_data
from .primitives import INT8, INT16, INT32, INT64, UINT16, Reader

_FIXED = {"int8": INT8, "int16": INT16, "uint16": UINT16, "int32": INT32, "int64": INT64}
_MIN_SIZE = {"string": (2, 1), "bytes": (4, 1), "uuid": (16, 16)}   # (classic, flexible)
# decode step kinds
_FIX, _STRING, _BYTES, _UUID, _ARRAY, _STRUCT = range(6)


class _Plan:
    """How one struct is read at one version."""

    __slots__ = ("steps", "tagged", "absent", "flexible", "min_size", "flat", "names", "defaults")

    def __init__(self, steps, tagged, absent, flexible, names, defaults):
        self.steps = steps        # (name, kind, arg, nullable) in wire order
        self.tagged = tagged      # tag -> (name, kind, arg, nullable)
        self.absent = absent      # (name, default): fields not on the wire unless tagged
        self.flexible = flexible
        self.min_size = sum(_min_size(kind, arg, flexible) for _, kind, arg, _ in steps) + flexible
        # Classic ints and strings only (every key, the offset commit value): written by
        # ``_compile_flat``'s generated function, the commit path's shortcut past the general encoder.
        self.flat = not flexible and all(kind in (_FIX, _STRING) for _, kind, _, _ in steps)
        self.names = names        # every field the spec knows, at any version
        self.defaults = defaults  # name -> default of the fields in steps

    def without_presence(self, tags: tuple[int, ...]) -> "_Plan":
        """This plan with the tagged structs ``tags`` read as non-nullable (no presence byte)."""
        tagged = {tag: (f[0], f[1], f[2], False) if tag in tags else f for tag, f in self.tagged.items()}
        return _Plan(self.steps, tagged, self.absent, self.flexible, self.names, self.defaults)


def _min_size(kind: int, arg, flexible: bool) -> int:
    if kind == _FIX:
        return arg.size
    if kind == _STRUCT:
        return arg.min_size
    if kind == _ARRAY:
        return 1 if flexible else 4
    return _MIN_SIZE[("string", "bytes", "uuid")[kind - 1]][flexible]


def _step(field, version: int, flexible: bool):
    if field.is_array():
        item = field.array_of
        inner = (_STRUCT, _plan(item, version, flexible)) if field.is_struct_array() else \
            _step(item, version, flexible)[1:3]
        return field.name, _ARRAY, inner, field.nullable_for_version_q(version)
    if field.is_struct():
        return field.name, _STRUCT, _plan(field, version, flexible), field.nullable_for_version_q(version)
    type_str = field.type_str
    if type_str in _FIXED:
        return field.name, _FIX, _FIXED[type_str], False
    kind = {"string": _STRING, "bytes": _BYTES, "uuid": _UUID}[type_str]
    return field.name, kind, None, field.nullable_for_version_q(version)


def _plan(schema, version: int, flexible: bool) -> _Plan:
    steps, tagged, absent, defaults = [], {}, [], {}
    for field in schema.fields.values():
        if field.for_version_q(version) and field.tagged_field_q(version):
            tagged[field.tag] = _step(field, version, flexible)
        elif field.for_version_q(version):
            steps.append(_step(field, version, flexible))
            defaults[field.name] = _default(field)
            continue
        absent.append((field.name, _default(field)))
    return _Plan(tuple(steps), tagged, tuple(absent), flexible, frozenset(schema.fields), defaults)


def _compile_flat(plan: _Plan, version: int):
    """A function writing ``values`` as a flat plan (classic ints and strings) at ``version``,
    the int16 version first: the bytes ``messages.encode_data`` writes, in one join.  Generated
    once per spec and version, so a commit pays no per-field loop (the commit path writes a
    key and a value per partition)."""
    env = {"INT16": INT16, "names": plan.names, "prefix": INT16.pack(version)}
    lines = ["def encode(values):",
             "    if type(values) is not dict:",
             "        raise TypeError(f'expected a dict, got {type(values).__name__}')",
             "    if not values.keys() <= names:",
             "        raise ValueError(f'unknown fields: {sorted(values.keys() - names)}')",
             "    get = values.get"]
    parts = ["prefix"]
    for i, (name, kind, arg, _nullable) in enumerate(plan.steps):
        env[f"d{i}"] = plan.defaults[name]
        lines.append(f"    v{i} = get({name!r}, d{i})")
        if kind == _FIX:
            env[f"p{i}"] = arg.pack
            parts.append(f"p{i}(v{i})")
        else:
            lines += [f"    if v{i} is None:", f"        s{i} = b'\\xff\\xff'", "    else:",
                      f"        b{i} = str(v{i}).encode()", f"        s{i} = INT16.pack(len(b{i})) + b{i}"]
            parts.append(f"s{i}")
    lines.append(f"    return b''.join(({', '.join(parts)},))")
    exec(compile("\n".join(lines), f"<{plan.names and 'record spec'} v{version}>", "exec"), env)   # noqa: S102
    return env["encode"]


def _compile_positional(plan: _Plan, version: int):
    """Like ``_compile_flat`` but taking the fields as positional arguments in wire order
    (``encode.fields`` names them), with consecutive fixed-size fields packed by one
    ``struct.Struct``: for the per-partition records of a commit, as fast as a hand-written
    layout while the layout still comes from the spec."""
    env = {"INT16": INT16, "version": version}
    args, lines, parts, run_fmt, run_args = [], [], [], ">h", ["version"]

    def close_run():
        if run_args:
            env[f"S{len(parts)}"] = struct.Struct(run_fmt)
            parts.append(f"S{len(parts)}.pack({', '.join(run_args)})")

    for i, (name, kind, arg, nullable) in enumerate(plan.steps):
        args.append(f"a{i}")
        if kind == _FIX:
            run_fmt += arg.format.lstrip("><!=@")
            run_args.append(f"a{i}")
            continue
        close_run()
        run_fmt, run_args = ">", []
        lines.append(f"    b{i} = str(a{i}).encode()")
        if nullable:
            lines[-1] = f"    b{i} = None if a{i} is None else str(a{i}).encode()"
            parts.append(f"(b'\\xff\\xff' if b{i} is None else INT16.pack(len(b{i})) + b{i})")
        else:
            parts.append(f"INT16.pack(len(b{i}))")
            parts.append(f"b{i}")
    close_run()
    source = "\n".join([f"def encode({', '.join(args)}):", *lines, f"    return b''.join(({', '.join(parts)},))"])
    exec(compile(source, f"<record spec v{version}>", "exec"), env)   # noqa: S102
    encode = env["encode"]
    encode.fields = tuple(name for name, *_ in plan.steps)
    return encode


def _default(field):
    try:
        default = field.default
    except NotImplementedError:
        return None
    return None if default == "null" else default


def _read(r: Reader, kind: int, arg, nullable: bool, flexible: bool):
    if kind == _FIX:
        return arg.unpack(r.take(arg.size))[0]
    if kind == _STRING:
        if flexible:
            return r.compact_nullable_string() if nullable else r.compact_string()
        return r.nullable_string() if nullable else r.string()
    if kind == _BYTES:
        n = r.uvarint() - 1 if flexible else r.int32()
        if n == -1:
            return None if nullable else b""
        return bytes(r.take(n))
    if kind == _UUID:
        return r.uuid()
    if kind == _STRUCT:
        if nullable and r.int8() < 0:
            return None
        return _read_struct(r, arg)
    item_kind, item_arg = arg
    n = r.count(r.uvarint() - 1 if flexible else r.int32(), _min_size(item_kind, item_arg, flexible), nullable)
    if n is None:
        return None
    return [_read(r, item_kind, item_arg, False, flexible) for _ in range(n)]


def _read_struct(r: Reader, plan: _Plan) -> dict:
    flexible = plan.flexible
    values = {name: _read(r, kind, arg, nullable, flexible) for name, kind, arg, nullable in plan.steps}
    values.update(plan.absent)
    if flexible:
        for tag, data in r.tagged_fields().items():
            field = plan.tagged.get(tag)
            if field is not None:
                values[field[0]] = _read_tagged(r, tag, data, field)
    return values


def _read_tagged(r: Reader, tag: int, data, field):
    _name, kind, arg, nullable = field
    if kind == _FIX and len(data) != arg.size:
        raise r.error(f"tagged field {tag} has {len(data)} bytes, not {arg.size}")
    sub = type(r)(data)
    value = _read(sub, kind, arg, nullable, True)
    sub.end()
    return value


class RecordSpec:
    """One key or value spec: ``encode`` and ``decode`` at any of its versions."""

    def __init__(self, name: str):
        self.name = name
        self._schema, self._flexible, self.versions = data_spec(name)
        self._plans: dict[int, _Plan] = {}
        self._flat: dict = {}          # version -> compiled encoder of a flat plan

    def encode(self, version: int, values: dict) -> bytes:
        """The int16 ``version`` and ``values`` at that version.  Raises ``ValueError`` for a
        name the spec does not know or a value out of range, ``TypeError`` for a wrong kind."""
        plan = self._plans.get(version) or self._plan(version, ValueError)
        try:
            if plan.flat:
                return self._flat[version](values)
            return INT16.pack(version) + encode_data(self._schema, version, plan.flexible, values)
        except struct.error as exc:
            raise ValueError(f"{self.name} v{version}: {exc}") from None

    def positional(self, version: int):
        """The encoder of a flat ``version`` (classic ints and strings only) taking its fields
        positionally, in wire order (``.fields``); ValueError for any other version."""
        plan = self._plans.get(version) or self._plan(version, ValueError)
        if not plan.flat:
            raise ValueError(f"{self.name} v{version} is not flat")
        return _compile_positional(plan, version)

    def decode(self, r: Reader, version: int, presence_free_tags: tuple[int, ...] = ()) -> dict:
        """The fields of ``version`` read from ``r`` (whose int16 version the caller has read);
        raises ``r.error``.  The caller checks ``r.end()``.  ``presence_free_tags``: top-level
        tagged nullable structs written without their presence byte (an older kwire layout)."""
        plan = self._plans.get(version) or self._plan(version, r.error)
        if presence_free_tags:
            plan = plan.without_presence(presence_free_tags)
        return _read_struct(r, plan)

    def _plan(self, version: int, error: type[Exception]) -> _Plan:
        if version not in self.versions:
            raise error(f"unknown {self.name} version {version}")
        plan = self._plans[version] = _plan(self._schema, version, self._flexible(version))
        if plan.flat:
            self._flat[version] = _compile_flat(plan, version)
        return plan
