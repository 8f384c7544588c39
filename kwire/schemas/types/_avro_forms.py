"""Avro schemas as JSON: the normalized form, and a bounded walk over binary data.

The normalized form (``normal_form``) is the Avro spec's Parsing Canonical Form extended with what
changes how data is read or shown: every name is written in full (no ``namespace`` attribute),
attributes come in a fixed order (type, name, fields/symbols/items/values/size, default, then the
rest sorted), a primitive with no attributes collapses to its name, a field's ``"order":
"ascending"`` (the default) is dropped, and defaults, aliases, logical types, docs and custom
properties are kept.  Two spellings of one schema normalize alike; the result is itself a valid
schema, so the registry can store it under ``normalize=true``.

``skip_datum`` walks one datum without building Python objects.  It exists for one case fastavro
cannot bound: an array whose items encode in zero bytes (``null``, ``fixed`` of size 0, a record
of such fields) lets a 10-byte block count ask for 2**62 items, which fastavro would build one by
one; the walk skips such a block in constant time.
"""
from __future__ import annotations

import json

import avro.schema

from kwire.codecs.errors import CorruptFrame
from kwire.codecs.primitives import read_varint

_NAMED_STRUCTURE = {"type", "name", "namespace", "fields", "symbols", "size", "default", "aliases", "doc"}
_FIELD_STRUCTURE = {"name", "type", "default", "aliases", "doc", "order"}
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class Normalizer:
    """Builds the normalized JSON of parsed avro schemas.

    ``known`` are full names written as a bare name at first use (a reference's types, whose
    definitions live in the referenced schema); the others are defined inline at first use.
    ``used_known`` collects which of ``known`` were met.
    """

    def __init__(self, known: set[str] = frozenset()):
        self.known = set(known)
        self.seen: set[str] = set()
        self.used_known: set[str] = set()

    def dump(self, schema: avro.schema.Schema) -> str:
        return json.dumps(self.form(schema), separators=(",", ":"), ensure_ascii=False)

    def form(self, schema: avro.schema.Schema):
        if isinstance(schema, avro.schema.UnionSchema):
            return [self.form(branch) for branch in schema.schemas]
        if isinstance(schema, avro.schema.NamedSchema):
            return self._named(schema)
        if isinstance(schema, avro.schema.ArraySchema):
            return _with_extras({"type": "array", "items": self.form(schema.items)}, schema.props, {"items"})
        if isinstance(schema, avro.schema.MapSchema):
            return _with_extras({"type": "map", "values": self.form(schema.values)}, schema.props, {"values"})
        extras = {k: v for k, v in schema.props.items() if k != "type"}
        return _with_extras({"type": schema.type}, extras, set()) if extras else schema.type

    def _named(self, schema: avro.schema.NamedSchema):
        name = schema.fullname
        if name in self.known:
            self.used_known.add(name)
            return name
        if name in self.seen:
            return name
        self.seen.add(name)
        out: dict = {"type": schema.type, "name": name}
        if isinstance(schema, avro.schema.RecordSchema):
            out["fields"] = [self._field(field) for field in schema.fields]
        elif isinstance(schema, avro.schema.EnumSchema):
            out["symbols"] = list(schema.symbols)
        elif isinstance(schema, avro.schema.FixedSchema):
            out["size"] = schema.size
        props = schema.props
        if "default" in props:
            out["default"] = props["default"]
        if props.get("aliases"):
            namespace = name.rpartition(".")[0]
            out["aliases"] = [a if "." in a or not namespace else f"{namespace}.{a}" for a in props["aliases"]]
        if props.get("doc") is not None:
            out["doc"] = props["doc"]
        return _with_extras(out, props, _NAMED_STRUCTURE)

    def _field(self, field: avro.schema.Field) -> dict:
        out = {"name": field.name, "type": self.form(field.type)}
        props = field.props
        if "default" in props:
            out["default"] = props["default"]
        if props.get("aliases"):
            out["aliases"] = list(props["aliases"])
        if props.get("doc") is not None:
            out["doc"] = props["doc"]
        if props.get("order", "ascending") != "ascending":
            out["order"] = props["order"]
        return _with_extras(out, props, _FIELD_STRUCTURE)


def _with_extras(out: dict, props: dict, structure: set[str]) -> dict:
    for key in sorted(props):
        if key not in structure and key not in out:
            out[key] = props[key]
    return out


# -- binary walk ----------------------------------------------------------------------------------

def named_types(form, found: dict | None = None) -> dict:
    """Full name -> definition of every named type defined inline in a normalized form."""
    found = {} if found is None else found
    if isinstance(form, list):
        for branch in form:
            named_types(branch, found)
    elif isinstance(form, dict):
        if "name" in form and form["type"] in ("record", "error", "enum", "fixed"):
            found[form["name"]] = form
        for field in form.get("fields", ()):
            named_types(field["type"], found)
        for key in ("items", "values"):
            if key in form:
                named_types(form[key], found)
    return found


def always_empty(form, names: dict, visiting: frozenset = frozenset()) -> bool:
    """Whether every datum of ``form`` encodes in zero bytes."""
    if isinstance(form, str):
        if form in names:
            return form not in visiting and always_empty(names[form], names, visiting | {form})
        return form == "null"
    if isinstance(form, dict):
        kind = form["type"]
        if kind == "fixed":
            return form["size"] == 0
        if kind in ("record", "error"):
            inner = visiting | {form["name"]}
            return all(always_empty(f["type"], names, inner) for f in form["fields"])
        return kind == "null"
    return False


def has_empty_items(form, names: dict) -> bool:
    """Whether some array of ``form`` has items that encode in zero bytes."""
    stack, visited = [form], set()
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            if node in names and node not in visited:
                visited.add(node)
                stack.append(names[node])
        elif isinstance(node, dict):
            if node["type"] == "array" and always_empty(node["items"], names):
                return True
            stack.extend(f["type"] for f in node.get("fields", ()))
            stack.extend(node[k] for k in ("items", "values") if k in node)
    return False


class Truncated(ValueError):
    """The datum ends before the schema says it should, or holds a value the schema forbids."""


def read_long(data, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos`` (the wire codec's reader): (value, next position); raises
    Truncated."""
    try:
        return read_varint(data, pos)
    except CorruptFrame as exc:
        raise Truncated(f"the data ends inside a varint or has one over 10 bytes ({exc})") from None


_FIXED_WIDTH = {"null": 0, "float": 4, "double": 8}


def skip_datum(form, names: dict, data, pos: int) -> int:
    """Walk one datum of ``form`` from ``pos``; returns the position after it.  Raises Truncated."""
    if isinstance(form, list):
        index, pos = read_long(data, pos)
        if not 0 <= index < len(form):
            raise Truncated(f"union branch {index} of {len(form)}")
        return skip_datum(form[index], names, data, pos)
    if isinstance(form, str) and form in names:
        form = names[form]
    kind = form if isinstance(form, str) else form["type"]
    if kind in _FIXED_WIDTH or kind == "fixed":
        end = pos + (_FIXED_WIDTH[kind] if kind in _FIXED_WIDTH else form["size"])
    elif kind == "boolean":
        if pos < len(data) and data[pos] > 1:
            raise Truncated(f"boolean byte {data[pos]}")
        end = pos + 1
    elif kind in ("int", "long"):
        return read_long(data, pos)[1]
    elif kind in ("bytes", "string"):
        size, pos = read_long(data, pos)
        if size < 0:
            raise Truncated(f"negative length {size}")
        end = pos + size
        if kind == "string" and end <= len(data):
            try:
                bytes(data[pos:end]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise Truncated(f"a string that is not UTF-8 ({exc.reason})") from None
    elif kind == "enum":
        index, end = read_long(data, pos)
        if not 0 <= index < len(form["symbols"]):
            raise Truncated(f"enum index {index} of {len(form['symbols'])}")
    elif kind in ("record", "error"):
        for field in form["fields"]:
            pos = skip_datum(field["type"], names, data, pos)
        return pos
    elif kind in ("array", "map"):
        return _skip_blocks(form, names, data, pos)
    else:
        raise Truncated(f"unknown type {kind!r}")
    if end > len(data):
        raise Truncated(f"the data ends inside a {kind}")
    return end


def _skip_blocks(form, names: dict, data, pos: int) -> int:
    is_map = form["type"] == "map"
    item = form["values"] if is_map else form["items"]
    empty = not is_map and always_empty(item, names)
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            return pos
        if count < 0:
            count = -count
            _, pos = read_long(data, pos)   # the block's byte size: a hint we do not need
        if empty:
            continue
        for _ in range(count):
            if is_map:
                pos = skip_datum("string", names, data, pos)
            pos = skip_datum(item, names, data, pos)

