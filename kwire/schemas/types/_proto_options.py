"""Protobuf option values: set from parsed text, written back as text.

Standard options (``java_package``, ``deprecated``, ``packed``, ...) are fields of the
``*Options`` messages and are set as such; a custom ``(name)`` option stays an uninterpreted
option (the pool does not interpret options, and the registry only needs to keep and compare
them).  A field's ``default`` lives in ``default_value`` as text, bytes C-escaped as protoc does.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

from ._base import SchemaError

F = descriptor_pb2.FieldDescriptorProto


def c_escape(data: bytes) -> str:
    """Bytes as protoc writes a bytes field's default_value: printable ASCII kept, the rest octal."""
    out = []
    for byte in data:
        ch = chr(byte)
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def default_text(field, value: tuple[str, object]) -> str:
    kind, data = value
    if kind == "string":   # data: the literal's bytes
        return c_escape(data) if field.type == F.TYPE_BYTES else data.decode("utf-8", "replace")
    if kind == "float":
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(data, "nan" if data != data else repr(data))
    return str(data)


def apply_option(options, name: list[tuple[str, bool]], value: tuple[str, object]) -> None:
    """Set a standard option as its field, keep a custom one as an uninterpreted option.

    Raises SchemaError for an unknown standard option or a value of the wrong kind.
    """
    kind, data = value
    if len(name) == 1 and not name[0][1]:
        field = options.DESCRIPTOR.fields_by_name.get(name[0][0])
        if field is None:
            raise SchemaError(f"Invalid schema: unknown option {name[0][0]!r} for {options.DESCRIPTOR.name}")
        try:
            setattr(options, field.name, _option_value(field, kind, data))
        except (TypeError, ValueError, KeyError) as exc:
            raise SchemaError(f"Invalid schema: option {field.name} = {data!r}: {exc}") from None
        return
    option = options.uninterpreted_option.add()
    for part, is_extension in name:
        option.name.add(name_part=part, is_extension=is_extension)
    if kind == "string":
        option.string_value = data
    elif kind == "aggregate":
        option.aggregate_value = data
    elif kind == "float":
        option.double_value = data
    elif kind == "int":
        if data >= 0:
            option.positive_int_value = data
        else:
            option.negative_int_value = data
    else:
        option.identifier_value = data


def _option_value(field, kind: str, data):
    if field.type == field.TYPE_BOOL:
        if data not in ("true", "false"):
            raise ValueError("expected true or false")
        return data == "true"
    if field.type == field.TYPE_ENUM:
        return field.enum_type.values_by_name[data].number
    if field.type in (field.TYPE_STRING, field.TYPE_BYTES):
        if kind != "string":
            raise ValueError("expected a string")
        return data.decode("utf-8") if field.type == field.TYPE_STRING else data
    if field.type in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return float(data)
    if kind != "int":
        raise ValueError("expected an integer")
    return data


def quote(text: str) -> str:
    """A string literal that reads back as ``text``."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def option_items(options) -> list[str]:
    """``name = value`` for every option set on an ``*Options`` message, standard ones first in
    field-number order, then the custom (uninterpreted) ones as written."""
    items = []
    for field, value in options.ListFields():
        if field.name == "uninterpreted_option":
            continue
        # protobuf 6+ has is_repeated; older versions only label (gone in 7)
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if field.type == field.TYPE_MESSAGE or repeated:
            continue   # e.g. editions' features: never set by the text we read
        items.append(f"{field.name} = {_value_text(field, value)}")
    for option in options.uninterpreted_option:
        name = ".".join(f"({p.name_part})" if p.is_extension else p.name_part for p in option.name)
        items.append(f"{name} = {_uninterpreted_text(option)}")
    return items


def _value_text(field, value) -> str:
    if field.type == field.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == field.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    if field.type == field.TYPE_STRING:
        return quote(value)
    if field.type == field.TYPE_BYTES:
        return '"' + c_escape(value) + '"'
    return repr(value)


def _uninterpreted_text(option) -> str:
    if option.HasField("identifier_value"):
        return option.identifier_value
    if option.HasField("positive_int_value"):
        return str(option.positive_int_value)
    if option.HasField("negative_int_value"):
        return str(option.negative_int_value)
    if option.HasField("double_value"):
        return repr(option.double_value)
    if option.HasField("string_value"):
        return '"' + c_escape(option.string_value) + '"'
    return "{ " + option.aggregate_value + " }"
