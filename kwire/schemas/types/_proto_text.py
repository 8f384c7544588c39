"""Writes a resolved ``FileDescriptorProto`` back as ``.proto`` text.

The text is the PROTOBUF schema's canonical form: it depends only on the descriptor, so the same
schema registered as text by a Java client and as a base64 descriptor by the Python client comes
out alike.  Type names are written fully qualified (``.pkg.Msg``), which reads back to the same
types in any scope; a json_name equal to protoc's default is left out (protoc writes it into
descriptors, people rarely do); ``syntax`` is always written.  The normalized form also sorts the
imports and each options list; declaration order (which the message-index array depends on) is
never changed.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

from ._proto_options import option_items, quote
from ._proto_lexer import camel_json_name
from ._proto_parser import FIELD_MAX, SCALARS

F = descriptor_pb2.FieldDescriptorProto
_SCALAR_NAMES = {number: name for name, number in SCALARS.items()}
_LABEL_NAMES = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required", F.LABEL_REPEATED: "repeated"}


def render(fdp: descriptor_pb2.FileDescriptorProto, normalize: bool = False) -> str:
    """The ``.proto`` text of a descriptor resolved by a DescriptorPool."""
    out = _Writer(fdp.syntax == "proto3", normalize)
    out.line(0, f'syntax = "{fdp.syntax or "proto2"}";')
    if fdp.package:
        out.line(0, f"package {fdp.package};")
    imports = []
    for i, dependency in enumerate(fdp.dependency):
        modifier = "public " if i in fdp.public_dependency else "weak " if i in fdp.weak_dependency else ""
        imports.append(f"import {modifier}{quote(dependency)};")
    for text in sorted(imports) if normalize else imports:
        out.line(0, text)
    out.options(0, fdp.options)
    scope = "." + fdp.package if fdp.package else ""
    for message in fdp.message_type:
        out.message(0, message, scope)
    for enum in fdp.enum_type:
        out.enum(0, enum)
    out.extends(0, fdp.extension)
    for service in fdp.service:
        out.service(service)
    return "\n".join(out.lines) + "\n"


class _Writer:
    def __init__(self, proto3: bool, normalize: bool):
        self.proto3 = proto3
        self.normalize = normalize
        self.lines: list[str] = []

    def line(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def options(self, depth: int, options) -> None:
        items = option_items(options)
        for item in sorted(items) if self.normalize else items:
            self.line(depth, f"option {item};")

    def bracket(self, items: list[str]) -> str:
        if not items:
            return ""
        return " [" + ", ".join(sorted(items) if self.normalize else items) + "]"

    def message(self, depth: int, message, scope: str) -> None:
        name = f"{scope}.{message.name}"
        entries = {f"{name}.{n.name}": n for n in message.nested_type if n.options.map_entry}
        self.line(depth, f"message {message.name} {{")
        self.options(depth + 1, message.options)
        self.reserved(depth + 1, message.reserved_range, message.reserved_name, inclusive=False)
        for extension_range in message.extension_range:
            end = "max" if extension_range.end - 1 == FIELD_MAX else str(extension_range.end - 1)
            span = str(extension_range.start) if end == str(extension_range.start) else f"{extension_range.start} to {end}"
            self.line(depth + 1, f"extensions {span}{self.bracket(option_items(extension_range.options))};")
        real_oneofs = {i for i, _ in enumerate(message.oneof_decl)
                       if not all(f.proto3_optional for f in message.field if f.HasField("oneof_index")
                                  and f.oneof_index == i)}
        written: set[int] = set()
        for field in message.field:
            if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
                if field.oneof_index not in written:
                    written.add(field.oneof_index)
                    self.oneof(depth + 1, message, field.oneof_index, entries)
                continue
            self.field(depth + 1, field, entries)
        for nested in message.nested_type:
            if not nested.options.map_entry:
                self.message(depth + 1, nested, name)
        for enum in message.enum_type:
            self.enum(depth + 1, enum)
        self.extends(depth + 1, message.extension)
        self.line(depth, "}")

    def oneof(self, depth: int, message, index: int, entries: dict) -> None:
        self.line(depth, f"oneof {message.oneof_decl[index].name} {{")
        self.options(depth + 1, message.oneof_decl[index].options)
        for field in message.field:
            if field.HasField("oneof_index") and field.oneof_index == index:
                self.field(depth + 1, field, entries, in_oneof=True)
        self.line(depth, "}")

    def field(self, depth: int, field, entries: dict, in_oneof: bool = False) -> None:
        entry = entries.get(field.type_name)
        if entry is not None and field.label == F.LABEL_REPEATED:
            key, value = (_type_text(f) for f in sorted(entry.field, key=lambda f: f.number))
            head = f"map<{key}, {value}>"
        else:
            label = "" if in_oneof else _label(field, self.proto3)
            head = f"{label}{_type_text(field)}"
        items = []
        if field.HasField("default_value"):
            items.append(f"default = {_default_text(field)}")
        if field.HasField("json_name") and field.json_name != camel_json_name(field.name):
            items.append(f"json_name = {quote(field.json_name)}")
        items.extend(option_items(field.options))
        self.line(depth, f"{head} {field.name} = {field.number}{self.bracket(items)};")

    def enum(self, depth: int, enum) -> None:
        self.line(depth, f"enum {enum.name} {{")
        self.options(depth + 1, enum.options)
        self.reserved(depth + 1, enum.reserved_range, enum.reserved_name, inclusive=True)
        for value in enum.value:
            self.line(depth + 1, f"{value.name} = {value.number}{self.bracket(option_items(value.options))};")
        self.line(depth, "}")

    def reserved(self, depth: int, ranges, names, inclusive: bool) -> None:
        spans = []
        for span in ranges:
            end = span.end if inclusive else span.end - 1
            spans.append(str(span.start) if end == span.start else f"{span.start} to {end}")
        if spans:
            self.line(depth, f"reserved {', '.join(spans)};")
        if names:
            self.line(depth, f"reserved {', '.join(quote(n) for n in names)};")

    def extends(self, depth: int, extensions) -> None:
        by_extendee: dict[str, list] = {}
        for field in extensions:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, fields in by_extendee.items():
            self.line(depth, f"extend {extendee} {{")
            for field in fields:
                self.field(depth + 1, field, {})
            self.line(depth, "}")

    def service(self, service) -> None:
        self.line(0, f"service {service.name} {{")
        self.options(1, service.options)
        for method in service.method:
            request = ("stream " if method.client_streaming else "") + method.input_type
            response = ("stream " if method.server_streaming else "") + method.output_type
            items = option_items(method.options)
            if items:
                self.line(1, f"rpc {method.name} ({request}) returns ({response}) {{")
                for item in sorted(items) if self.normalize else items:
                    self.line(2, f"option {item};")
                self.line(1, "}")
            else:
                self.line(1, f"rpc {method.name} ({request}) returns ({response});")
        self.line(0, "}")


def _label(field, proto3: bool) -> str:
    if proto3:
        if field.label == F.LABEL_REPEATED:
            return "repeated "
        return "optional " if field.proto3_optional else ""
    return _LABEL_NAMES[field.label] + " "


def _type_text(field) -> str:
    return _SCALAR_NAMES.get(field.type) or field.type_name


def _default_text(field) -> str:
    if field.type == F.TYPE_STRING:
        return quote(field.default_value)
    if field.type == F.TYPE_BYTES:
        return '"' + field.default_value + '"'   # already C-escaped in the descriptor
    return field.default_value
