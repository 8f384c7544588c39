"""AVRO schemas as a registry user meets them: registering, normalizing, evolving, producing."""
import io
import json

import fastavro
import pytest

from kwire.schemas.types import RecordInvalid, SchemaError, compatibility_errors, parse

USER = {
    "type": "record", "name": "User", "namespace": "com.acme",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["ADMIN", "GUEST"]}},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
    ],
}


def avro(schema, references=()):
    return parse("AVRO", schema if isinstance(schema, str) else json.dumps(schema), list(references))


def record(fields, name="User"):
    return {"type": "record", "name": name, "namespace": "com.acme", "fields": fields}


def encode(schema: dict, datum, named=None) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas=named), datum)
    return out.getvalue()


# -- parsing ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("{not json", "not JSON"),
    ('{"type": "record", "name": "R"}', "fields"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}', "Missing"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "duplicate symbol"),
    ('{"type": "fixed", "name": "F"}', "size"),
    ('"strng"', "strng"),
])
def test_invalid_schemas_say_why(text, fragment):
    with pytest.raises(SchemaError, match="Invalid schema") as caught:
        avro(text)
    assert fragment.lower() in str(caught.value).lower()


def test_record_names_and_primitives():
    user = avro(USER)
    assert user.record_names() == ["com.acme.User"]          # enums are no records
    nested = avro(record([{"name": "a", "type": {"type": "record", "name": "Inner", "fields": []}}]))
    assert nested.record_names() == ["com.acme.User", "com.acme.Inner"]
    assert avro('"string"').record_names() == []
    assert avro(["null", record([])]).record_names() == []   # a union has no record name
    assert user.references_names() == []


# -- canonical and normalized forms -------------------------------------------------------------------

def test_formatting_does_not_make_another_schema():
    compact = avro(json.dumps(USER, separators=(",", ":")))
    spaced = avro(json.dumps(USER, indent=4))
    reordered = avro(json.dumps(dict(reversed(list(USER.items())))))
    assert compact.canonical() == spaced.canonical() == reordered.canonical()
    assert compact.normalized() == reordered.normalized()


def test_namespaces_spelled_differently_normalize_alike():
    relative = avro(USER)
    full = dict(USER, name="com.acme.User")
    del full["namespace"]
    assert avro(full).normalized() == relative.normalized()
    assert avro('{"type": "string"}').normalized() == avro('"string"').normalized() == '"string"'


def test_semantic_differences_stay_different():
    base = avro(USER)
    with_default = json.loads(json.dumps(USER))
    with_default["fields"][0]["default"] = "anon"
    assert avro(with_default).canonical() != base.canonical()
    with_alias = json.loads(json.dumps(USER))
    with_alias["fields"][0]["aliases"] = ["full_name"]
    assert avro(with_alias).canonical() != base.canonical()


def test_normalized_form_keeps_what_readers_use_and_parses_again():
    text = avro(USER).normalized()
    form = json.loads(text)
    assert form["name"] == "com.acme.User" and "namespace" not in form
    assert form["fields"][1]["default"] is None
    assert form["fields"][3]["type"] == {"type": "int", "logicalType": "date"}
    assert avro(text).normalized() == text


# -- references ---------------------------------------------------------------------------------------

ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme",
           "fields": [{"name": "street", "type": "string"}]}
CUSTOMER = record([{"name": "name", "type": "string"}, {"name": "home", "type": "com.acme.Address"}],
                  name="Customer")


def test_a_record_uses_a_named_type_from_a_reference():
    address = avro(ADDRESS)
    customer = avro(CUSTOMER, [("com.acme.Address", address)])
    assert customer.references_names() == ["com.acme.Address"]
    assert customer.record_names() == ["com.acme.Customer"]
    # the reference stays a name in the stored forms; format=resolved inlines it
    assert '"type":"com.acme.Address"' in customer.normalized()
    resolved = avro(customer.formatted("resolved"))
    assert resolved.references_names() == [] and '"name":"com.acme.Address"' in resolved.canonical()
    data = encode(record([{"name": "name", "type": "string"}, {"name": "home", "type": ADDRESS}], "Customer"),
                  {"name": "Ann", "home": {"street": "Main St"}})
    customer.validate(data)


def test_without_the_reference_the_named_type_is_unknown():
    with pytest.raises(SchemaError, match="Address"):
        avro(CUSTOMER)


def test_references_of_references_are_known_too():
    address = avro(ADDRESS)
    customer = avro(CUSTOMER, [("com.acme.Address", address)])
    order = avro(record([{"name": "buyer", "type": "com.acme.Customer"},
                         {"name": "ship_to", "type": "com.acme.Address"}], "Order"),
                 [("com.acme.Address", address), ("com.acme.Customer", customer)])
    assert order.references_names() == ["com.acme.Address", "com.acme.Customer"]


# -- compatibility --------------------------------------------------------------------------------------

V1 = record([{"name": "name", "type": "string"}])


@pytest.mark.parametrize("fields, backward_ok, forward_ok", [
    ([{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}], True, True),
    ([{"name": "name", "type": "string"}, {"name": "age", "type": "int"}], False, True),
    ([], True, False),                                                          # a field without default removed
    ([{"name": "name", "type": "bytes"}], True, True),                          # string <-> bytes
    ([{"name": "name", "type": ["null", "string"], "default": None}], True, False),
    ([{"name": "full_name", "type": "string", "aliases": ["name"]}], True, False),
    ([{"name": "name", "type": "int"}], False, False),
])
def test_evolving_a_record(fields, backward_ok, forward_ok):
    old, new = avro(V1), avro(record(fields))
    assert (compatibility_errors("BACKWARD", new, [old]) == []) is backward_ok
    assert (compatibility_errors("FORWARD", new, [old]) == []) is forward_ok


def test_type_promotions_go_one_way():
    ints, longs, doubles = (avro(record([{"name": "n", "type": t}])) for t in ("int", "long", "double"))
    assert compatibility_errors("BACKWARD", longs, [ints]) == []
    assert compatibility_errors("BACKWARD", doubles, [ints]) == []
    errors = compatibility_errors("BACKWARD", ints, [longs])
    assert len(errors) == 1
    assert "TYPE_MISMATCH at /fields/0/type (field n)" in errors[0] and "long" in errors[0]


def test_enum_symbols_removed_break_readers_unless_there_is_a_default():
    def kind(symbols, default=None):
        enum = {"type": "enum", "name": "Kind", "symbols": symbols}
        if default:
            enum["default"] = default
        return avro(record([{"name": "kind", "type": enum}]))
    errors = compatibility_errors("BACKWARD", kind(["A", "B"]), [kind(["A", "B", "C"])])
    assert len(errors) == 1 and "MISSING_ENUM_SYMBOLS" in errors[0] and "C" in errors[0]
    assert compatibility_errors("BACKWARD", kind(["A", "B"], "A"), [kind(["A", "B", "C"])]) == []
    assert compatibility_errors("BACKWARD", kind(["A", "B", "C"]), [kind(["A", "B"])]) == []


def test_several_problems_each_get_their_location():
    old = avro(record([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}]))
    new = avro(record([{"name": "a", "type": "string"}, {"name": "b", "type": "string"},
                       {"name": "c", "type": "int"}, {"name": "d", "type": "int"}]))
    errors = compatibility_errors("BACKWARD", new, [old])
    joined = "\n".join(errors)
    assert len(errors) == 3, joined
    assert "TYPE_MISMATCH at /fields/0/type (field a)" in joined
    assert "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/2 (field c)" in joined
    assert "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/3 (field d)" in joined


def test_nested_record_problems_name_the_field_path():
    def outer(inner_fields):
        return avro(record([{"name": "address", "type": {"type": "record", "name": "Address",
                                                          "fields": inner_fields}}]))
    old = outer([{"name": "street", "type": "string"}])
    new = outer([{"name": "street", "type": "string"}, {"name": "zip", "type": "string"}])
    errors = compatibility_errors("BACKWARD", new, [old])
    assert len(errors) == 1 and "(field address.zip)" in errors[0]


def test_a_renamed_record_needs_an_alias():
    old = avro(record([{"name": "a", "type": "int"}], name="Old"))
    assert compatibility_errors("BACKWARD", avro(record([{"name": "a", "type": "int"}], name="New")), [old])
    aliased = record([{"name": "a", "type": "int"}], name="New")
    aliased["aliases"] = ["com.acme.Old"]
    assert compatibility_errors("BACKWARD", avro(aliased), [old]) == []


# -- payloads ---------------------------------------------------------------------------------------------

def test_validate_accepts_what_a_client_writes():
    user = avro(USER)
    datum = {"name": "Ann", "age": 41, "kind": "GUEST", "born": 19000}
    user.validate(encode(USER, datum))
    user.validate(memoryview(encode(USER, dict(datum, age=None))))


@pytest.mark.parametrize("mangle, reason", [
    (lambda data: data[:-1], "ends too early"),
    (lambda data: data + b"\x00", "1 bytes left"),
    (lambda data: b"", "ends too early"),
    (lambda data: b"\x06Ann\x08", "index out of range"),    # union branch 4 of 2
])
def test_validate_refuses_broken_payloads(mangle, reason):
    data = encode(USER, {"name": "Ann", "age": 41, "kind": "GUEST", "born": 19000})
    with pytest.raises(RecordInvalid, match=reason):
        avro(USER).validate(mangle(data))


def test_validate_refuses_bad_utf8_in_a_string():
    with pytest.raises(RecordInvalid, match="UTF-8"):
        avro('"string"').validate(b"\x04\xff\xfe")


def test_zero_size_array_items_are_walked_in_constant_time():
    nulls = avro({"type": "array", "items": "null"})
    nulls.validate(b"\x06\x00")                       # three nulls
    # a block count near 2**62 of zero-byte items: accepted without building the list
    huge = b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f" + b"\x00"
    nulls.validate(huge)
    with pytest.raises(RecordInvalid):
        nulls.validate(b"\x06")                       # no terminating block
    empty_record = avro({"type": "array", "items": {"type": "record", "name": "E", "fields": []}})
    empty_record.validate(b"\x02\x00")
