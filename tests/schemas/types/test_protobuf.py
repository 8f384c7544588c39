"""PROTOBUF schemas as a registry user meets them: .proto text (Java serializer, curl) and base64
descriptors (the Python serializer), imports as references, evolution, producing messages."""
import base64

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kwire.schemas.types import RecordInvalid, SchemaError, compatibility_errors, parse

F = descriptor_pb2.FieldDescriptorProto

ORDER = """
// the orders topic
syntax = "proto3";
package com.acme.orders;

import "google/protobuf/timestamp.proto";

option java_multiple_files = true;

message Order {
  string id = 1;
  int64 amount_cents = 2;
  repeated Line lines = 3;
  map<string, string> labels = 4;
  oneof payment {
    string card = 5;
    string iban = 6;
  }
  optional string note = 7;
  google.protobuf.Timestamp placed_at = 8;
  Status status = 9;

  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
  enum Status {
    STATUS_UNKNOWN = 0;
    STATUS_PAID = 1;
  }
}

message Refund {
  string order_id = 1;
}
"""


def proto(text, references=()):
    return parse("PROTOBUF", text, list(references))


def message_class(schema, full_name: str):
    """A message class the way a client builds one: from the descriptor the registry serves."""
    pool = descriptor_pool.DescriptorPool()
    for serialized in _WELL_KNOWN:
        pool.AddSerializedFile(serialized)
    for name, ref in schema.references:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(ref.formatted("serialized")))
        file.name = name
        pool.Add(file)
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    file.name = "default"
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def _well_known():
    from google.protobuf import any_pb2, source_context_pb2, timestamp_pb2, type_pb2
    return [m.DESCRIPTOR.serialized_pb for m in (any_pb2, source_context_pb2, type_pb2, timestamp_pb2)]


_WELL_KNOWN = _well_known()


def zigzag(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def indexes(*path: int) -> bytes:
    """Confluent's message-index array: [0] is the single byte 0."""
    if path == (0,):
        return b"\x00"
    return zigzag(len(path)) + b"".join(zigzag(i) for i in path)


# -- parsing ------------------------------------------------------------------------------------------

def test_a_proto_file_with_the_usual_features_parses():
    order = proto(ORDER)
    assert order.record_names() == ["com.acme.orders.Order", "com.acme.orders.Refund", "com.acme.orders.Order.Line"]
    assert order.references_names() == []     # google/protobuf imports are built in


@pytest.mark.parametrize("text, fragment", [
    ('syntax = "proto3"; message A { string a = 1 }', "line 1: expected ';'"),
    ('syntax = "proto3";\nmessage A {\n  string a = ;\n}', "line 3"),
    ('syntax = "proto4";', "proto4"),
    ('syntax = "proto3"; message A { Missing a = 1; }', "Missing"),
    ('syntax = "proto3"; message A { string a = 1; int32 b = 1; }', "duplicate field number"),
    ('syntax = "proto3"; enum E { FIRST = 1; }', "first value must be zero"),
    ('syntax = "proto3"; message A { required string a = 1; }', "required"),
    ('syntax = "proto3"; option no_such_option = 1;', "no_such_option"),
    ('syntax = "proto3"; import "address.proto"; message A {}', "'address.proto'"),
    ('edition = "2023";', "editions"),
    ('syntax = "proto3"; message A { string a = 1; ', "the end of the schema"),
    ("QUJD", "not a base64 FileDescriptorProto"),     # base64 of b"ABC": no descriptor
])
def test_invalid_schemas_say_why(text, fragment):
    with pytest.raises(SchemaError, match="Invalid schema") as caught:
        proto(text)
    assert fragment in str(caught.value)


# -- the two spellings ----------------------------------------------------------------------------------

def order_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto the Python serializer registers for a small schema (what protoc emits)."""
    file = descriptor_pb2.FileDescriptorProto(name="orders.proto", package="shop", syntax="proto3")
    msg = file.message_type.add(name="Order")
    msg.field.add(name="order_id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="orderId")
    msg.field.add(name="total", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_DOUBLE, json_name="total")
    msg.field.add(name="kind", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_ENUM, type_name=".shop.Kind",
                  json_name="kind")
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="KIND_UNKNOWN", number=0)
    kind.value.add(name="KIND_GIFT", number=1)
    return file


ORDER_TEXT = """syntax = "proto3";
package shop;
message Order {
  string order_id = 1;
  double total = 2;
  Kind kind = 3;
}
enum Kind { KIND_UNKNOWN = 0; KIND_GIFT = 1; }
"""


def test_base64_descriptor_and_text_are_the_same_schema():
    registered = base64.b64encode(order_descriptor().SerializeToString()).decode()
    from_python = proto(registered)
    from_java = proto(ORDER_TEXT)
    assert from_python.raw == registered and from_python.formatted(None) == registered
    assert from_python.canonical() == from_java.canonical()
    assert from_python.normalized() == from_java.normalized()
    assert from_python.record_names() == ["shop.Order"]


def test_serialized_format_is_what_the_python_deserializer_reads():
    schema = proto(ORDER_TEXT)
    served = schema.formatted("serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served))
    assert [m.name for m in file.message_type] == ["Order"]
    assert file.message_type[0].field[2].type_name == ".shop.Kind"
    order = message_class(schema, "shop.Order")(order_id="o-1", total=9.5, kind=1)
    schema.validate(indexes(0) + order.SerializeToString())


def test_canonical_ignores_layout_and_comments_not_meaning():
    squeezed = " ".join(line.split("//")[0] for line in ORDER.splitlines())
    assert proto(squeezed).canonical() == proto(ORDER).canonical()
    assert proto(ORDER.replace("int32 quantity", "int64 quantity")).canonical() != proto(ORDER).canonical()
    assert proto(ORDER.replace("= 2;\n  repeated", "= 12;\n  repeated")).canonical() != proto(ORDER).canonical()


def test_canonical_text_parses_back_to_itself():
    order = proto(ORDER)
    again = proto(order.canonical())
    assert again.canonical() == order.canonical()
    assert again.formatted("serialized") == order.formatted("serialized")


def test_normalize_sorts_imports_and_options():
    a = proto('syntax = "proto3"; import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto";'
              ' option java_package = "x"; option go_package = "y"; message M { string a = 1; }')
    b = proto('syntax = "proto3"; import "google/protobuf/duration.proto"; import "google/protobuf/timestamp.proto";'
              ' option go_package = "y"; option java_package = "x"; message M { string a = 1; }')
    assert a.canonical() != b.canonical()
    assert a.normalized() == b.normalized()


# -- references -------------------------------------------------------------------------------------------

ADDRESS = 'syntax = "proto3"; package com.acme.common; message Address { string street = 1; string city = 2; }'
CUSTOMER = """syntax = "proto3";
package com.acme;
import "com/acme/common/address.proto";
message Customer { string name = 1; com.acme.common.Address home = 2; }
"""


def test_an_import_resolves_to_a_reference():
    address = proto(ADDRESS)
    customer = proto(CUSTOMER, [("com/acme/common/address.proto", address)])
    assert customer.references_names() == ["com/acme/common/address.proto"]
    assert "import \"com/acme/common/address.proto\";" in customer.canonical()
    cls = message_class(customer, "com.acme.Customer")
    msg = cls(name="Ann")
    msg.home.street = "Main St"
    customer.validate(indexes(0) + msg.SerializeToString())


def test_references_of_references_enter_the_pool_first():
    address = proto(ADDRESS)
    customer = proto(CUSTOMER, [("com/acme/common/address.proto", address)])
    order = proto('syntax = "proto3"; import "customer.proto"; message Order { com.acme.Customer buyer = 1; }',
                  [("com/acme/common/address.proto", address), ("customer.proto", customer)])
    assert order.references_names() == ["customer.proto"]
    order_only_direct = proto('syntax = "proto3"; import "customer.proto"; message O { com.acme.Customer c = 1; }',
                              [("customer.proto", customer)])   # the reference brings its own import along
    assert order_only_direct.record_names() == ["O"]


def test_a_base64_schema_with_an_import_resolves_it_by_name():
    address = proto(ADDRESS)
    file = descriptor_pb2.FileDescriptorProto(name="customer.proto", package="com.acme", syntax="proto3",
                                              dependency=["com/acme/common/address.proto"])
    msg = file.message_type.add(name="Customer")
    msg.field.add(name="home", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                  type_name=".com.acme.common.Address")
    text = base64.b64encode(file.SerializeToString()).decode()
    assert proto(text, [("com/acme/common/address.proto", address)]).canonical() == \
        proto(CUSTOMER.replace("string name = 1; com.acme.common.Address home = 2;",
                               "com.acme.common.Address home = 1;"),
              [("com/acme/common/address.proto", address)]).canonical()
    with pytest.raises(SchemaError, match="com/acme/common/address.proto"):
        proto(text)


# -- compatibility ------------------------------------------------------------------------------------------

def evolve(old_fields: str, new_fields: str, level="BACKWARD", syntax="proto3"):
    def schema(fields):
        return proto(f'syntax = "{syntax}"; package p; message M {{ {fields} }} message Other {{ int32 x = 1; }}')
    return compatibility_errors(level, schema(new_fields), [schema(old_fields)])


def test_changing_a_fields_type_is_incompatible():
    errors = evolve("int32 a = 1;", "string a = 1;")
    assert len(errors) == 1 and "FIELD_SCALAR_KIND_CHANGED: p.M.a (field 1) is int32 in the writer, string" in errors[0]
    errors = evolve("int32 a = 1;", "Other a = 1;")
    assert len(errors) == 1 and "FIELD_KIND_CHANGED" in errors[0]


@pytest.mark.parametrize("old, new", [
    ("int32 a = 1;", "int64 a = 1;"),                 # one varint group
    ("sint32 a = 1;", "sint64 a = 1;"),
    ("string a = 1;", "bytes a = 1;"),
    ("int32 a = 1;", "int32 a = 1; string b = 2;"),   # field added
    ("int32 a = 1; string b = 2;", "int32 a = 1;"),   # field removed
    ("int32 a = 1;", "int32 renamed = 1;"),
    ("string a = 1;", "repeated string a = 1;"),      # length-delimited: singular <-> repeated is fine
    ("string a = 1;", "oneof choice { string a = 1; }"),   # a single field into a new oneof
])
def test_compatible_changes(old, new):
    assert evolve(old, new, "FULL") == []


def test_moving_fields_out_of_a_oneof_is_backward_compatible_only():
    one_of, flat = "oneof choice { string a = 1; string b = 2; }", "string a = 1; string b = 2;"
    assert evolve(one_of, flat, "BACKWARD") == []
    assert "MULTIPLE_FIELDS_MOVED_TO_ONEOF" in evolve(one_of, flat, "FORWARD")[0]


@pytest.mark.parametrize("old, new, kind", [
    ("int32 a = 1;", "double a = 1;", "FIELD_SCALAR_KIND_CHANGED"),
    ("Other a = 1;", "M a = 1;", "FIELD_NAMED_TYPE_CHANGED"),
    ("int32 a = 1;", "repeated int32 a = 1;", "FIELD_NUMERIC_LABEL_CHANGED"),
    ("map<string, int32> a = 1;", "map<string, string> a = 1;", "FIELD_SCALAR_KIND_CHANGED"),
    ("map<string, int32> a = 1;", "repeated Other a = 1;", "FIELD_KIND_CHANGED"),
    ("string a = 1; string b = 2;", "oneof choice { string a = 1; string b = 2; }", "MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
    ("oneof choice { string a = 1; string b = 2; }", "oneof choice { string a = 1; }", "ONEOF_FIELD_REMOVED"),
])
def test_incompatible_changes(old, new, kind):
    errors = evolve(old, new)
    assert errors and kind in errors[0], errors


def test_proto2_required_fields():
    errors = evolve("optional int32 a = 1;", "optional int32 a = 1; required string b = 2;", syntax="proto2")
    assert len(errors) == 1 and "REQUIRED_FIELD_ADDED" in errors[0]
    errors = evolve("required int32 a = 1;", "", syntax="proto2")
    assert len(errors) == 1 and "REQUIRED_FIELD_REMOVED" in errors[0]


def test_removing_a_message_or_changing_the_package():
    old = proto('syntax = "proto3"; package p; message A { int32 x = 1; } message B { int32 y = 1; }')
    fewer = proto('syntax = "proto3"; package p; message A { int32 x = 1; }')
    errors = compatibility_errors("BACKWARD", fewer, [old])
    assert len(errors) == 1 and "MESSAGE_REMOVED: message p.B" in errors[0]
    assert compatibility_errors("BACKWARD", old, [fewer]) == []
    # Confluent's rule is symmetric: under FORWARD the added message is the one "removed"
    assert "MESSAGE_REMOVED" in compatibility_errors("FORWARD", old, [fewer])[0]
    moved = proto('syntax = "proto3"; package q; message A { int32 x = 1; } message B { int32 y = 1; }')
    assert "PACKAGE_CHANGED" in compatibility_errors("BACKWARD", moved, [old])[0]


def test_transitive_protobuf_history():
    v1 = proto('syntax = "proto3"; message M { int32 a = 1; }')
    v2 = proto('syntax = "proto3"; message M { }')
    v3 = proto('syntax = "proto3"; message M { string a = 1; }')
    assert compatibility_errors("BACKWARD", v3, [v1, v2]) == []
    errors = compatibility_errors("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert len(errors) == 1 and "version #1 of 2" in errors[0] and "FIELD_SCALAR_KIND_CHANGED" in errors[0]


# -- payloads --------------------------------------------------------------------------------------------------

def test_validate_messages_named_by_the_index_array():
    order = proto(ORDER)
    Order = message_class(order, "com.acme.orders.Order")
    Refund = message_class(order, "com.acme.orders.Refund")
    Line = message_class(order, "com.acme.orders.Order.Line")
    placed = Order(id="o-1", amount_cents=1999, card="4111", note="gift")
    placed.lines.add(sku="A-1", quantity=2)
    placed.labels["channel"] = "web"
    placed.placed_at.seconds = 1_700_000_000
    order.validate(indexes(0) + placed.SerializeToString())
    order.validate(memoryview(indexes(1) + Refund(order_id="o-1").SerializeToString()))
    # Order's nested types are [LabelsEntry (the map's), Line]: protoc's order, which clients index by
    order.validate(indexes(0, 1) + Line(sku="B", quantity=1).SerializeToString())
    order.validate(b"\x00")   # an empty message is a valid proto3 message


@pytest.mark.parametrize("payload, reason", [
    (b"", "cut short"),
    (b"\x02", "cut short"),                              # one index announced, none given
    (indexes(2) + b"", "names no message"),
    (indexes(0, 5) + b"", "names no message"),
    (b"\x00\x0a\x05ab", "not a valid com.acme.orders.Order message"),   # a string field cut short
    (b"\x00\xff\xff\xff", "not a valid"),
])
def test_validate_refuses_broken_payloads(payload, reason):
    with pytest.raises(RecordInvalid, match=reason):
        proto(ORDER).validate(payload)


def test_validate_checks_proto2_required_fields():
    schema = proto('syntax = "proto2"; message M { required string id = 1; optional int32 n = 2; }')
    M = message_class(schema, "M")
    schema.validate(b"\x00" + M(id="x").SerializeToString())
    with pytest.raises(RecordInvalid, match="lacks required fields: id"):
        schema.validate(b"\x00" + M(n=1).SerializePartialToString())
