"""The .proto reader and writer on their own: every construct survives text -> descriptor -> text."""
import pytest
from google.protobuf import descriptor_pb2

from kwire.schemas.types import SchemaError, parse
from kwire.schemas.types._proto_lexer import tokenize, unquote
from kwire.schemas.types._proto_parser import parse_proto

F = descriptor_pb2.FieldDescriptorProto

PROTO2 = r'''
syntax = "proto2";
package legacy.v1;

option java_package = "com.acme.legacy";
option optimize_for = SPEED;
option (acme.file_tag) = "x";

message Account {
  option deprecated = true;
  required string id = 1;
  optional int32 level = 2 [default = 3];
  optional string motto = 3 [default = "say \"hi\"\n"];
  optional bytes magic = 4 [default = "\001\377ab"];
  optional double ratio = 5 [default = -inf];
  optional Tier tier = 6 [default = GOLD];
  repeated int64 ids = 7 [packed = true];
  optional string shown = 8 [json_name = "display", deprecated = true, (acme.field_tag).level = 2];
  extensions 100 to 199, 1000 to max;
  reserved 20, 30 to 40;
  reserved "old_field";

  enum Tier {
    option allow_alias = true;
    SILVER = 1;
    GOLD = 2;
    AURUM = 2 [deprecated = true];
    reserved 10 to 12, 99;
    reserved "COPPER";
  }
}

extend Account {
  optional string nickname = 100;
}

service Accounts {
  rpc Get (Account) returns (Account);
  rpc Watch (stream Account) returns (stream Account) {
    option deprecated = true;
  }
}
'''


def test_a_proto2_file_round_trips():
    schema = parse("PROTOBUF", PROTO2)
    text = schema.canonical()
    assert parse("PROTOBUF", text).canonical() == text
    for expected in ['optional int32 level = 2 [default = 3];',
                     r'optional string motto = 3 [default = "say \"hi\"\n"];',
                     r'optional bytes magic = 4 [default = "\001\377ab"];',
                     'optional double ratio = 5 [default = -inf];',
                     'optional .legacy.v1.Account.Tier tier = 6 [default = GOLD];',
                     'repeated int64 ids = 7 [packed = true];',
                     'optional string shown = 8 [json_name = "display", deprecated = true, (acme.field_tag).level = 2];',
                     'extensions 100 to 199;', 'extensions 1000 to max;',
                     'reserved 20, 30 to 40;', 'reserved "old_field";',
                     'reserved 10 to 12, 99;', 'AURUM = 2 [deprecated = true];',
                     'option (acme.file_tag) = "x";', 'option optimize_for = SPEED;',
                     'extend .legacy.v1.Account {', 'optional string nickname = 100;',
                     'rpc Get (.legacy.v1.Account) returns (.legacy.v1.Account);',
                     'rpc Watch (stream .legacy.v1.Account) returns (stream .legacy.v1.Account) {']:
        assert expected in text, expected


def test_the_descriptor_is_what_protoc_would_build():
    fdp = parse_proto(PROTO2)
    account = fdp.message_type[0]
    assert account.field[0].label == F.LABEL_REQUIRED
    assert account.field[2].default_value == 'say "hi"\n'
    assert account.field[3].default_value == r"\001\377ab"
    assert account.field[7].json_name == "display"
    assert [(r.start, r.end) for r in account.reserved_range] == [(20, 21), (30, 41)]
    assert [(r.start, r.end) for r in account.extension_range] == [(100, 200), (1000, 536870912)]
    assert [(r.start, r.end) for r in account.enum_type[0].reserved_range] == [(10, 12), (99, 99)]
    assert fdp.options.java_package == "com.acme.legacy"
    assert fdp.options.uninterpreted_option[0].name[0].is_extension


def test_proto3_optional_gets_a_synthetic_oneof_after_the_real_ones():
    fdp = parse_proto('syntax = "proto3"; message M { optional string a = 1; oneof o { int32 b = 2; } }')
    message = fdp.message_type[0]
    assert [o.name for o in message.oneof_decl] == ["o", "_a"]
    assert message.field[0].proto3_optional and message.field[0].oneof_index == 1
    assert message.field[1].oneof_index == 0


def test_map_fields_get_protocs_entry_type():
    fdp = parse_proto('syntax = "proto3"; message M { map<string, int64> word_counts = 1; }')
    entry = fdp.message_type[0].nested_type[0]
    assert entry.name == "WordCountsEntry" and entry.options.map_entry
    assert [(f.name, f.number, f.type) for f in entry.field] == [("key", 1, F.TYPE_STRING), ("value", 2, F.TYPE_INT64)]
    field = fdp.message_type[0].field[0]
    assert field.label == F.LABEL_REPEATED and field.type_name == "WordCountsEntry"


def test_keywords_can_be_names():
    schema = parse("PROTOBUF", 'syntax = "proto3"; message message { string option = 1; int32 map = 2; '
                               'enum enum { enum_zero = 0; } string reserved = 4; message syntax { } }')
    assert "string option = 1;" in schema.canonical() and "int32 map = 2;" in schema.canonical()


def test_tokens_and_strings():
    kinds = [k for k, _, _ in tokenize('a.b = 0x1F 1.5e3 "s" /* c */ // d\n;')]
    assert kinds == ["ident", "symbol", "ident", "symbol", "number", "number", "string", "symbol", "end"]
    assert unquote(r'"a\tb\x41\101\'\377"') == b"a\tbAA'\xff"
    assert unquote('"é"') == "é".encode()
    with pytest.raises(SchemaError, match="line 2"):
        tokenize("a\n@")


def test_adjacent_strings_concatenate():
    fdp = parse_proto('syntax = "proto3"; option java_package = "com." "acme";')
    assert fdp.options.java_package == "com.acme"


@pytest.mark.parametrize("text, fragment", [
    ('syntax = "proto2"; message M { optional group G = 1 { } }', "groups"),
    ('syntax = "proto3"; message M { string a = 1 [json_name = 5]; }', "json_name"),
    ('syntax = "proto3"; option java_multiple_files = "yes";', "java_multiple_files"),
    ('syntax = "proto3"; option optimize_for = FASTEST;', "optimize_for"),
    ('syntax = "proto3"; package a; package b;', "second package"),
    ('syntax = "proto3"; option (x) = { a: 1 ', "unterminated"),
])
def test_refusals(text, fragment):
    with pytest.raises(SchemaError) as caught:
        parse("PROTOBUF", text)
    assert fragment in str(caught.value)
