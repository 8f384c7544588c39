"""A parser for ``.proto`` text (proto2 and proto3) building a ``FileDescriptorProto``.

Why our own: proto-schema-parser (on an ANTLR runtime) gives a syntax tree, not descriptors, so
the descriptor building below would remain; grpcio-tools runs protoc in-process and does install
beside protobuf 7, but it pulls in grpcio, raises the floor to protobuf>=7.35.1, reads the files
from disk and prints its errors to stderr, where this package does no I/O and must put the reason
in the SchemaError.  So this module reads the subset Confluent users write and leaves name
resolution and the semantic checks (duplicate numbers, proto3's first enum value 0, unknown types,
...) to ``DescriptorPool``, whose messages become the SchemaError.

Read: comments; ``syntax``; ``package``; ``import`` (``public``/``weak``); ``option`` (the
standard options are set as fields, custom ``(name)`` options kept as uninterpreted options);
``message`` with fields (labels, proto3 ``optional`` with its synthetic oneof, ``[default=...,
json_name=..., packed=...]``), ``map<K, V>`` (the ``...Entry`` type protoc would synthesize),
``oneof``, nested messages and enums, ``reserved``, ``extensions``, ``extend``; ``enum``;
``service``/``rpc``.  Refused with a SchemaError: ``edition``, proto2 groups.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

from ._base import SchemaError
from ._proto_lexer import Cursor, camel_json_name
from ._proto_options import apply_option, default_text

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}
LABELS = {"optional": F.LABEL_OPTIONAL, "required": F.LABEL_REQUIRED, "repeated": F.LABEL_REPEATED}
FIELD_MAX = 536870911        # 2**29 - 1, the largest field number
ENUM_MAX = 2147483647

def parse_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """Parse ``.proto`` text into an unresolved FileDescriptorProto (type names as written).

    Raises SchemaError with the line of the first syntax error.
    """
    return _Parser(Cursor(text)).file()


class _Parser:
    def __init__(self, cursor: Cursor):
        self.c = cursor
        self.proto3 = False

    def file(self) -> descriptor_pb2.FileDescriptorProto:
        c = self.c
        fdp = descriptor_pb2.FileDescriptorProto()
        if c.peek()[1] == "edition":
            raise c.error("protobuf editions are not supported; use syntax = \"proto2\" or \"proto3\"")
        if c.accept("syntax"):
            c.take("=")
            syntax = c.string()
            if syntax not in ("proto2", "proto3"):
                raise SchemaError(f"Invalid schema: unknown syntax {syntax!r}")
            c.take(";")
            self.proto3 = syntax == "proto3"
            fdp.syntax = syntax
        while c.peek()[0] != "end":
            self._file_statement(fdp)
        return fdp

    def _file_statement(self, fdp) -> None:
        c = self.c
        word = c.peek()[1] if c.peek()[0] == "ident" else None
        if c.accept(";"):
            return
        if word == "package":
            c.take()
            if fdp.package:
                raise c.error("a second package statement")
            fdp.package = c.full_ident()
            c.take(";")
        elif word == "import":
            c.take()
            modifier = c.take() if c.peek()[1] in ("public", "weak") and c.peek()[0] == "ident" else None
            if modifier == "public":
                fdp.public_dependency.append(len(fdp.dependency))
            elif modifier == "weak":
                fdp.weak_dependency.append(len(fdp.dependency))
            fdp.dependency.append(c.string())
            c.take(";")
        elif word == "option":
            self._option_statement(fdp.options)
        elif word == "message":
            self._message(fdp.message_type.add())
        elif word == "enum":
            self._enum(fdp.enum_type.add())
        elif word == "service":
            self._service(fdp.service.add())
        elif word == "extend":
            self._extend(fdp.extension, fdp.message_type)
        else:
            raise c.error("expected a package, import, option, message, enum, service or extend statement")

    # -- options -----------------------------------------------------------------------------------

    def _option_statement(self, options) -> None:
        self.c.take("option")
        name = self._option_name()
        self.c.take("=")
        apply_option(options, name, self._constant())
        self.c.take(";")

    def _option_name(self) -> list[tuple[str, bool]]:
        c, parts = self.c, []
        while True:
            if c.accept("("):
                parts.append((c.type_name(), True))
                c.take(")")
            else:
                parts.append((c.take(kind="ident"), False))
            if not c.accept("."):
                return parts

    def _constant(self) -> tuple[str, object]:
        c = self.c
        kind, text, _ = c.peek()
        if kind == "string":
            return "string", c.raw_string()
        if text == "{":
            return "aggregate", self._aggregate()
        if text in ("-", "+") or kind == "number":
            sign = -1 if c.accept("-") else (c.accept("+") and 1) or 1
            kind, text, _ = c.peek()
            if kind == "ident" and text in ("inf", "nan"):
                c.take()
                return "float", sign * float(text)
            if kind == "number" and not text.lower().startswith("0x") and any(ch in text for ch in ".eE"):
                c.take()
                return "float", sign * float(text)
            return "int", sign * c.integer()
        return "ident", c.full_ident()

    def _aggregate(self) -> str:
        c, depth, parts = self.c, 0, []
        while True:
            kind, text, _ = c.peek()
            if kind == "end":
                raise c.error("an unterminated { ... } option value")
            c.take()
            depth += {"{": 1, "}": -1}.get(text, 0) if kind == "symbol" else 0
            if depth == 0:
                return " ".join(parts[1:])
            parts.append(text)

    def _bracket_options(self, options) -> None:
        c = self.c
        if not c.accept("["):
            return
        while True:
            name = self._option_name()
            c.take("=")
            apply_option(options, name, self._constant())
            if not c.accept(","):
                break
        c.take("]")

    def _field_options(self, field) -> None:
        c = self.c
        if not c.accept("["):
            return
        while True:
            name = self._option_name()
            c.take("=")
            value = self._constant()
            if name == [("default", False)]:
                field.default_value = default_text(field, value)
            elif name == [("json_name", False)]:
                if value[0] != "string":
                    raise c.error("json_name takes a string")
                field.json_name = value[1].decode("utf-8", "replace")
            else:
                apply_option(field.options, name, value)
            if not c.accept(","):
                break
        c.take("]")

    # -- messages ----------------------------------------------------------------------------------

    def _message(self, msg) -> None:
        c = self.c
        c.take("message")
        msg.name = c.take(kind="ident")
        c.take("{")
        synthetic: list = []
        while not c.accept("}"):
            self._message_statement(msg, synthetic)
        # protoc puts proto3 optional's synthetic oneofs after the real ones
        for field in synthetic:
            field.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name="_" + field.name)

    def _message_statement(self, msg, synthetic: list) -> None:
        c = self.c
        word = c.peek()[1] if c.peek()[0] == "ident" else None
        following = c.peek(1)[1]
        if c.accept(";"):
            return
        if word == "message" and following not in (".", "="):
            self._message(msg.nested_type.add())
        elif word == "enum" and following not in (".", "="):
            self._enum(msg.enum_type.add())
        elif word == "option" and following != "=":
            self._option_statement(msg.options)
        elif word == "oneof" and following not in (".", "="):
            self._oneof(msg)
        elif word == "reserved" and following not in (".", "="):
            self._reserved(msg.reserved_range, msg.reserved_name, FIELD_MAX, end_inclusive=False)
        elif word == "extensions" and following not in (".", "="):
            self._extensions(msg)
        elif word == "extend" and following not in (".", "="):
            self._extend(msg.extension, msg.nested_type)
        elif word == "map" and following == "<":
            self._map_field(msg)
        else:
            field = self._field(msg.field.add(), msg.nested_type)
            if field.proto3_optional:
                synthetic.append(field)

    def _field(self, field, nested, in_oneof: bool = False):
        c = self.c
        word = c.peek()[1]
        if word in LABELS and c.peek()[0] == "ident" and c.peek(1)[1] not in ("=",) and not in_oneof:
            c.take()
            if word == "optional" and self.proto3:
                field.proto3_optional = True
            elif word == "required" and self.proto3:
                raise SchemaError(f"Invalid schema: line {c.peek()[2]}: required fields are not allowed in proto3")
            field.label = LABELS[word]
        else:
            field.label = F.LABEL_OPTIONAL
        if c.peek()[1] == "group" and c.peek()[0] == "ident" and c.peek(1)[0] == "ident":
            raise c.error("proto2 groups are not supported")
        type_name = c.type_name()
        if type_name in SCALARS:
            field.type = SCALARS[type_name]
        else:
            field.type_name = type_name
        field.name = c.take(kind="ident")
        c.take("=")
        field.number = c.integer()
        self._field_options(field)
        c.take(";")
        return field

    def _map_field(self, msg) -> None:
        c = self.c
        c.take("map")
        c.take("<")
        key = c.type_name()
        c.take(",")
        value = c.type_name()
        c.take(">")
        field = msg.field.add(label=F.LABEL_REPEATED)
        field.name = c.take(kind="ident")
        c.take("=")
        field.number = c.integer()
        self._field_options(field)
        c.take(";")
        entry = msg.nested_type.add(name=camel_json_name("_" + field.name) + "Entry")
        entry.options.map_entry = True
        for number, (name, type_name) in enumerate((("key", key), ("value", value)), start=1):
            part = entry.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
            if type_name in SCALARS:
                part.type = SCALARS[type_name]
            else:
                part.type_name = type_name
        field.type_name = entry.name

    def _oneof(self, msg) -> None:
        c = self.c
        c.take("oneof")
        index = len(msg.oneof_decl)
        oneof = msg.oneof_decl.add(name=c.take(kind="ident"))
        c.take("{")
        while not c.accept("}"):
            if c.accept(";"):
                continue
            if c.peek()[1] == "option" and c.peek(1)[1] != "=":
                self._option_statement(oneof.options)
                continue
            field = self._field(msg.field.add(), msg.nested_type, in_oneof=True)
            field.oneof_index = index

    def _reserved(self, ranges, names, maximum: int, end_inclusive: bool) -> None:
        c = self.c
        c.take("reserved")
        while True:
            if c.peek()[0] == "string":
                names.append(c.string())
            else:
                start = c.integer()
                end = start
                if c.accept("to"):
                    end = maximum if c.accept("max") else c.integer()
                ranges.add(start=start, end=end if end_inclusive else end + 1)
            if not c.accept(","):
                break
        c.take(";")

    def _extensions(self, msg) -> None:
        c = self.c
        c.take("extensions")
        added = []
        while True:
            start = end = c.integer()
            if c.accept("to"):
                end = FIELD_MAX if c.accept("max") else c.integer()
            added.append(msg.extension_range.add(start=start, end=end + 1))
            if not c.accept(","):
                break
        options = descriptor_pb2.ExtensionRangeOptions()
        self._bracket_options(options)
        for extension_range in added:
            if options.ListFields():
                extension_range.options.CopyFrom(options)
        c.take(";")

    def _extend(self, extensions, nested) -> None:
        c = self.c
        c.take("extend")
        extendee = c.type_name()
        c.take("{")
        while not c.accept("}"):
            if c.accept(";"):
                continue
            field = self._field(extensions.add(), nested)
            field.extendee = extendee

    # -- enums and services ------------------------------------------------------------------------

    def _enum(self, enum) -> None:
        c = self.c
        c.take("enum")
        enum.name = c.take(kind="ident")
        c.take("{")
        while not c.accept("}"):
            word = c.peek()[1]
            if c.accept(";"):
                continue
            if word == "option" and c.peek(1)[1] != "=":
                self._option_statement(enum.options)
            elif word == "reserved" and c.peek(1)[1] != "=":
                self._reserved(enum.reserved_range, enum.reserved_name, ENUM_MAX, end_inclusive=True)
            else:
                value = enum.value.add(name=c.take(kind="ident"))
                c.take("=")
                value.number = c.integer()
                self._bracket_options(value.options)
                c.take(";")

    def _service(self, service) -> None:
        c = self.c
        c.take("service")
        service.name = c.take(kind="ident")
        c.take("{")
        while not c.accept("}"):
            if c.accept(";"):
                continue
            if c.peek()[1] == "option" and c.peek(1)[1] != "=":
                self._option_statement(service.options)
                continue
            c.take("rpc")
            method = service.method.add(name=c.take(kind="ident"))
            method.client_streaming, method.input_type = self._rpc_type()
            c.take("returns")
            method.server_streaming, method.output_type = self._rpc_type()
            if c.accept("{"):
                while not c.accept("}"):
                    if not c.accept(";"):
                        self._option_statement(method.options)
            else:
                c.take(";")

    def _rpc_type(self) -> tuple[bool, str]:
        c = self.c
        c.take("(")
        # "stream" is a keyword only when a type name follows it
        streaming = c.peek()[1] == "stream" and c.peek(1)[0] in ("ident", "symbol") and c.peek(1)[1] != ")"
        if streaming:
            c.take()
        type_name = c.type_name()
        c.take(")")
        return streaming, type_name
