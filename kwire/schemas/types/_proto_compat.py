"""Can a PROTOBUF reader read what a writer's schema produces?  Confluent's rules, on descriptors.

Confluent compares the writer's file (the original) with the reader's (the update) and names each
difference; some kinds break compatibility.  Those reported here (all others pass):

* PACKAGE_CHANGED: the package differs;
* MESSAGE_REMOVED: a message of the writer is missing from the reader (so under FORWARD a new
  message is reported, as Confluent does);
* FIELD_KIND_CHANGED: a field became or stopped being a scalar, a message, an enum or a map;
* FIELD_SCALAR_KIND_CHANGED: a scalar changed outside its wire-compatible group ({int32, uint32,
  int64, uint64, bool}, {sint32, sint64}, {fixed32, sfixed32}, {fixed64, sfixed64}, {string, bytes});
* FIELD_NAMED_TYPE_CHANGED: a message or enum field names another type;
* FIELD_NUMERIC_LABEL_CHANGED: a numeric or enum field changed between repeated and singular (the
  packed encoding differs; for string, bytes and messages the change is compatible);
* REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED (proto2);
* ONEOF_FIELD_REMOVED: a field of a writer's oneof is gone;
* MULTIPLE_FIELDS_MOVED_TO_ONEOF: two fields the writer could set together share one oneof of the
  reader (moving a single field into a new oneof is safe).

Compatible, as Confluent has them: added messages, fields, enums and enum constants; removed
fields (outside oneofs), enums and constants; renamed fields; fields moved out of a oneof.
Not compared: options, services, extensions, reserved ranges, syntax.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto
_GROUPS = [{F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
           {F.TYPE_SINT32, F.TYPE_SINT64}, {F.TYPE_FIXED32, F.TYPE_SFIXED32},
           {F.TYPE_FIXED64, F.TYPE_SFIXED64}, {F.TYPE_STRING, F.TYPE_BYTES}]
_TYPE_NAMES = {number: name.removeprefix("TYPE_").lower() for name, number in F.Type.items()}
_LENGTH_DELIMITED = {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE, F.TYPE_GROUP}


def reader_errors(reader: descriptor_pb2.FileDescriptorProto, writer: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """Why ``reader`` cannot read all that ``writer`` produces; [] if it can (both resolved)."""
    errors = []
    if reader.package != writer.package:
        errors.append(f"PACKAGE_CHANGED: the writer's package {writer.package!r} is {reader.package!r} in the reader")
    reader_messages, writer_messages = _messages(reader), _messages(writer)
    for name, writer_message in writer_messages.items():
        reader_message = reader_messages.get(name)
        if writer_message.options.map_entry:
            continue   # compared through its map field
        if reader_message is None:
            errors.append(f"MESSAGE_REMOVED: message {name.lstrip('.')} of the writer is missing from the reader")
            continue
        errors.extend(_message_errors(name.lstrip("."), reader_message, writer_message,
                                      reader_messages, writer_messages))
    return errors


def _messages(fdp) -> dict[str, descriptor_pb2.DescriptorProto]:
    """Fully-qualified name (with the leading dot) -> message, nested ones included."""
    found = {}
    stack = [(("." + fdp.package) if fdp.package else "", m) for m in fdp.message_type]
    while stack:
        scope, msg = stack.pop(0)
        name = f"{scope}.{msg.name}"
        found[name] = msg
        stack.extend((name, nested) for nested in msg.nested_type)
    return found


def _kind(field, messages: dict) -> str:
    if field.type == F.TYPE_MESSAGE:
        entry = messages.get(field.type_name)
        if entry is not None and entry.options.map_entry and field.label == F.LABEL_REPEATED:
            return "map"
        return "message"
    return "enum" if field.type == F.TYPE_ENUM else "scalar"


def _real_oneof(msg, field) -> int | None:
    return None if not field.HasField("oneof_index") or field.proto3_optional else field.oneof_index


def _message_errors(name: str, reader, writer, reader_messages: dict, writer_messages: dict) -> list[str]:
    errors = []
    reader_fields = {f.number: f for f in reader.field}
    for wf in writer.field:
        where = f"{name}.{wf.name} (field {wf.number})"
        rf = reader_fields.get(wf.number)
        if rf is None:
            if wf.label == F.LABEL_REQUIRED:
                errors.append(f"REQUIRED_FIELD_REMOVED: {where} is required by the writer and gone from the reader")
            elif _real_oneof(writer, wf) is not None:
                errors.append(f"ONEOF_FIELD_REMOVED: {where} of oneof "
                              f"{writer.oneof_decl[wf.oneof_index].name} is gone from the reader")
            continue
        errors.extend(_field_errors(where, rf, wf, reader_messages, writer_messages))
    writer_numbers = {f.number for f in writer.field}
    for rf in reader.field:
        if rf.number not in writer_numbers and rf.label == F.LABEL_REQUIRED:
            errors.append(f"REQUIRED_FIELD_ADDED: {name}.{rf.name} (field {rf.number}) is required by the reader "
                          "and the writer never sets it")
    errors.extend(_oneof_errors(name, reader, writer))
    return errors


def _field_errors(where: str, rf, wf, reader_messages: dict, writer_messages: dict) -> list[str]:
    reader_kind, writer_kind = _kind(rf, reader_messages), _kind(wf, writer_messages)
    if reader_kind != writer_kind:
        return [f"FIELD_KIND_CHANGED: {where} is a {writer_kind} in the writer, a {reader_kind} in the reader"]
    errors = []
    if reader_kind == "scalar" and rf.type != wf.type and not any({rf.type, wf.type} <= g for g in _GROUPS):
        errors.append(f"FIELD_SCALAR_KIND_CHANGED: {where} is {_TYPE_NAMES[wf.type]} in the writer, "
                      f"{_TYPE_NAMES[rf.type]} in the reader")
    if reader_kind in ("message", "enum") and rf.type_name != wf.type_name:
        errors.append(f"FIELD_NAMED_TYPE_CHANGED: {where} is {wf.type_name.lstrip('.')} in the writer, "
                      f"{rf.type_name.lstrip('.')} in the reader")
    if reader_kind == "map":
        errors.extend(_field_errors(f"{where} map value", _entry_value(rf, reader_messages),
                                    _entry_value(wf, writer_messages), reader_messages, writer_messages))
    repeated_changed = (rf.label == F.LABEL_REPEATED) != (wf.label == F.LABEL_REPEATED)
    if repeated_changed and reader_kind != "map" and wf.type not in _LENGTH_DELIMITED:
        errors.append(f"FIELD_NUMERIC_LABEL_CHANGED: {where} changed between repeated and singular")
    if (rf.label == F.LABEL_REQUIRED) != (wf.label == F.LABEL_REQUIRED):
        kind = "REQUIRED_FIELD_ADDED" if rf.label == F.LABEL_REQUIRED else "REQUIRED_FIELD_REMOVED"
        errors.append(f"{kind}: {where} is {'now' if rf.label == F.LABEL_REQUIRED else 'no longer'} required")
    return errors


def _entry_value(field, messages: dict):
    return next(f for f in messages[field.type_name].field if f.number == 2)


def _oneof_errors(name: str, reader, writer) -> list[str]:
    writer_fields = {f.number: f for f in writer.field}
    groups: dict[int, list] = {}
    for rf in reader.field:
        index = _real_oneof(reader, rf)
        if index is not None and rf.number in writer_fields:
            groups.setdefault(index, []).append(writer_fields[rf.number])
    errors = []
    for index, fields in groups.items():
        writer_oneofs = {_real_oneof(writer, wf) for wf in fields}
        # fields from one writer oneof were never set together; any other mix may have been
        if len(fields) > 1 and (len(writer_oneofs) > 1 or None in writer_oneofs):
            names = ", ".join(f.name for f in fields)
            errors.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {name} oneof {reader.oneof_decl[index].name} holds "
                          f"{names}, which the writer can set together")
    return errors
