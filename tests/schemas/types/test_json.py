"""JSON schemas as a registry user meets them: drafts, references, evolution under open and closed
content models, producing documents."""
import json

import pytest

from kwire.schemas.types import RecordInvalid, SchemaError, compatibility_errors, parse


def js(schema, references=()):
    return parse("JSON", schema if isinstance(schema, str) else json.dumps(schema), list(references))


def backward(new, old):
    return compatibility_errors("BACKWARD", js(new), [js(old)])


def forward(new, old):
    return compatibility_errors("FORWARD", js(new), [js(old)])


PERSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "com.acme.Person",
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 50},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
}


def closed(schema):
    return dict(schema, additionalProperties=False)


def with_property(schema, name, sub, required=False):
    out = json.loads(json.dumps(schema))
    out["properties"][name] = sub
    if required:
        out["required"] = out["required"] + [name]
    return out


def without_property(schema, name):
    out = json.loads(json.dumps(schema))
    del out["properties"][name]
    out["required"] = [r for r in out["required"] if r != name]
    return out


# -- parsing ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("{oops", "not JSON"),
    ("[1, 2]", "object or a boolean"),
    ('{"type": "strin"}', "#/type"),
    ('{"type": "object", "properties": {"a": {"minimum": "zero"}}}', "#/properties/a/minimum"),
    ('{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3}', "exclusiveMinimum"),
    ('{"$ref": "#/definitions/nowhere"}', "points nowhere"),
    ('{"$ref": "other.json"}', "no reference"),
])
def test_invalid_schemas_say_why(text, fragment):
    with pytest.raises(SchemaError, match="Invalid schema") as caught:
        js(text)
    assert fragment in str(caught.value)


def test_drafts_follow_dollar_schema_and_default_to_draft_7():
    assert "draft-07" in js({"type": "string"}).draft
    assert "draft-04" in js({"$schema": "http://json-schema.org/draft-04/schema#"}).draft
    assert "2020-12" in js({"$schema": "https://json-schema.org/draft/2020-12/schema"}).draft
    # draft 2020-12's prefixItems is a keyword there, checked against its meta-schema
    with pytest.raises(SchemaError):
        js({"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": 5})


def test_boolean_schemas_are_schemas():
    assert js("true").canonical() == "true"
    with pytest.raises(RecordInvalid):
        js("false").validate(b"1")


def test_record_names_is_the_title():
    assert js(PERSON).record_names() == ["com.acme.Person"]
    assert js({"type": "string"}).record_names() == []


# -- canonical and normalized forms -------------------------------------------------------------------

def test_whitespace_does_not_make_another_schema_but_content_does():
    assert js(json.dumps(PERSON, indent=2)).canonical() == js(json.dumps(PERSON)).canonical()
    assert js(with_property(PERSON, "x", {})).canonical() != js(PERSON).canonical()


def test_normalize_sorts_keys():
    reordered = dict(reversed(list(PERSON.items())))
    assert js(reordered).canonical() != js(PERSON).canonical()      # key order kept, as Confluent does
    assert js(reordered).normalized() == js(PERSON).normalized()
    assert js(js(PERSON).normalized()).normalized() == js(PERSON).normalized()


# -- references ---------------------------------------------------------------------------------------

ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"],
           "definitions": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}


def test_a_ref_to_a_reference_resolves_to_it():
    address = js(ADDRESS)
    customer = js({"type": "object", "properties": {
        "home": {"$ref": "address.json"}, "zip": {"$ref": "address.json#/definitions/zip"}}},
        [("address.json", address)])
    assert customer.references_names() == ["address.json"]
    customer.validate(b'{"home": {"street": "Main St"}, "zip": "12345"}')
    with pytest.raises(RecordInvalid, match="street"):
        customer.validate(b'{"home": {}}')
    with pytest.raises(RecordInvalid, match=r"\$\['zip'\]"):
        customer.validate(b'{"zip": "abc"}')


def test_a_ref_relative_to_the_schema_id_finds_the_reference():
    address = js(ADDRESS)
    customer = js({"$id": "https://acme.example/schemas/customer.json", "type": "object",
                   "properties": {"home": {"$ref": "address.json"}}}, [("address.json", address)])
    with pytest.raises(RecordInvalid):
        customer.validate(b'{"home": {"street": 5}}')


def test_compatibility_follows_references():
    old_address = js(ADDRESS)
    new_address = js(dict(ADDRESS, required=["street", "city"]))
    wrapper = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    old = js(wrapper, [("address.json", old_address)])
    new = js(wrapper, [("address.json", new_address)])
    errors = compatibility_errors("BACKWARD", new, [old])
    assert len(errors) == 1 and "REQUIRED_ATTRIBUTE_ADDED at #/properties/home" in errors[0]
    assert compatibility_errors("FORWARD", new, [old]) == []


# -- compatibility: the content models ------------------------------------------------------------------

def test_adding_an_optional_property_to_a_closed_model_is_backward_compatible():
    old, new = closed(PERSON), with_property(closed(PERSON), "email", {"type": "string"})
    assert backward(new, old) == []
    errors = forward(new, old)   # the old closed reader rejects documents carrying email
    assert len(errors) == 1 and "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/properties/email" in errors[0]


def test_adding_a_property_to_an_open_model_is_not_backward_compatible():
    errors = backward(with_property(PERSON, "email", {"type": "string"}), PERSON)
    assert len(errors) == 1 and "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at #/properties/email" in errors[0]
    # ... unless the new property accepts anything the open model did
    assert backward(with_property(PERSON, "note", {}), PERSON) == []


def test_removing_a_property_depends_on_the_model():
    assert backward(without_property(PERSON, "age"), PERSON) == []
    errors = backward(without_property(closed(PERSON), "age"), closed(PERSON))
    assert len(errors) == 1 and "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/properties/age" in errors[0]


def test_closing_an_open_model_is_not_backward_compatible():
    errors = backward(closed(PERSON), PERSON)
    assert any("ADDITIONAL_PROPERTIES_REMOVED" in e for e in errors)
    assert backward(PERSON, closed(PERSON)) == []


def test_required_properties():
    errors = backward(with_property(PERSON, "email", {"type": "string"}, required=True),
                      with_property(PERSON, "email", {"type": "string"}))
    assert len(errors) == 1 and 'REQUIRED_ATTRIBUTE_ADDED at #: the reader requires "email"' in errors[0]
    assert backward(dict(PERSON, required=[]), PERSON) == []


# -- compatibility: values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, kind", [
    ({"type": ["string", "null"]}, {"type": "string"}, "TYPE_NARROWED"),
    ({"type": "number"}, {"type": "integer"}, "TYPE_NARROWED"),
    ({"type": "string"}, {"type": "string", "maxLength": 5}, "MAX_LENGTH_ADDED"),
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, "MAX_LENGTH_DECREASED"),
    ({"type": "string", "minLength": 1}, {"type": "string", "minLength": 2}, "MIN_LENGTH_INCREASED"),
    ({"type": "string"}, {"type": "string", "pattern": "^a"}, "PATTERN_ADDED"),
    ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1}, "MINIMUM_INCREASED"),
    ({"type": "integer", "minimum": 0}, {"type": "integer", "exclusiveMinimum": 0}, "MINIMUM_INCREASED"),
    ({"type": "integer", "maximum": 10}, {"type": "integer", "maximum": 9}, "MAXIMUM_DECREASED"),
    ({"type": "integer"}, {"type": "integer", "maximum": 9}, "MAXIMUM_ADDED"),
    ({"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 4}, "MULTIPLE_OF_CHANGED"),
    ({"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}, "ENUM_ARRAY_NARROWED"),
    ({"type": "string"}, {"type": "string", "enum": ["a"]}, "ENUM_ADDED"),
    ({"type": "array", "items": {"type": ["integer", "string"]}}, {"type": "array", "items": {"type": "string"}},
     "TYPE_NARROWED"),
    ({"type": "array"}, {"type": "array", "maxItems": 3}, "MAX_ITEMS_ADDED"),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, "UNIQUE_ITEMS_ADDED"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string"}]}, "SUM_TYPE_NARROWED"),
    ({"type": "string"}, {"type": "string", "not": {"const": "x"}}, "NOT_CHANGED"),
])
def test_narrowing_is_not_backward_compatible_and_widening_is(old, new, kind):
    errors = backward(new, old)
    assert errors and kind in errors[0], errors
    assert backward(old, new) == [], (old, new)


@pytest.mark.parametrize("old, new, kind", [
    ({"type": "integer"}, {"type": "string"}, "TYPE_CHANGED"),
    ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, "PATTERN_CHANGED"),
    ({"type": "string", "format": "email"}, {"type": "string", "format": "uri"}, "FORMAT_CHANGED"),
    ({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "string"}}, "TYPE_CHANGED"),
])
def test_changes_break_both_directions(old, new, kind):
    assert kind in backward(new, old)[0]
    assert kind in backward(old, new)[0]


@pytest.mark.parametrize("old, new", [
    ({"type": "integer"}, {"type": "number"}),
    ({"type": "integer", "minimum": 0, "exclusiveMaximum": 10}, {"type": "integer", "minimum": -5, "maximum": 10}),
    ({"type": "integer", "multipleOf": 4}, {"type": "integer", "multipleOf": 2}),
    ({"type": "number", "multipleOf": 0.2}, {"type": "number", "multipleOf": 0.1}),
    ({"enum": ["a"]}, {"type": "string"}),
    ({"const": 3}, {"type": "integer", "minimum": 0}),
    ({"enum": ["ab", "abc"]}, {"type": "string", "minLength": 2, "pattern": "^a"}),
    ({"type": "string"}, {"anyOf": [{"type": "string"}, {"type": "null"}]}),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"type": ["string", "integer", "null"]}),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, {"type": "string", "maxLength": 5}),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": False},
     {"type": "array", "items": {"type": "string"}}),
])
def test_widening_is_backward_compatible(old, new):
    assert backward(new, old) == []


def test_listed_values_are_tried_on_the_reader():
    errors = backward({"type": "integer", "maximum": 5}, {"enum": [1, 7]})
    assert len(errors) == 1 and "ENUM_ARRAY_NARROWED" in errors[0] and "7" in errors[0]


def test_draft_4_exclusive_bounds():
    draft4 = "http://json-schema.org/draft-04/schema#"
    old = {"$schema": draft4, "type": "number", "minimum": 0, "exclusiveMinimum": True}
    new = {"$schema": draft4, "type": "number", "minimum": 0}
    assert backward(new, old) == []
    assert "MINIMUM_INCREASED" in backward(old, new)[0]


def test_nested_objects_are_compared_recursively():
    def order(item):
        return {"type": "object", "properties": {"items": {"type": "array", "items": item}}}
    old = order({"type": "object", "properties": {"sku": {"type": "string"}}, "additionalProperties": False})
    new = order({"type": "object", "properties": {"sku": {"type": "string", "minLength": 3}},
                 "additionalProperties": False})
    errors = backward(new, old)
    assert len(errors) == 1 and "MIN_LENGTH_ADDED at #/properties/items/items/properties/sku" in errors[0]


def test_recursive_schemas_terminate():
    tree = {"definitions": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}},
        "$ref": "#/definitions/node"}
    narrower = json.loads(json.dumps(tree))
    narrower["definitions"]["node"]["properties"]["value"]["minimum"] = 0
    assert backward(tree, narrower) == []
    assert "MINIMUM_ADDED" in backward(narrower, tree)[0]


def test_full_transitive_against_every_version():
    v1 = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    v2 = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
          "additionalProperties": False}
    v3 = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
          "additionalProperties": False}
    errors = compatibility_errors("BACKWARD_TRANSITIVE", js(v3), [js(v1), js(v2)])
    assert len(errors) == 1 and "latest version" in errors[0] and "TYPE_CHANGED" in errors[0]


# -- payloads ---------------------------------------------------------------------------------------------

def test_validate_documents():
    person = js(PERSON)
    person.validate(json.dumps({"name": "Ann", "age": 41, "tags": ["x"]}).encode())
    person.validate(memoryview(b'{"name": "Bob"}'))
    with pytest.raises(RecordInvalid, match=r"\$\['age'\]: -1 is less than the minimum of 0"):
        person.validate(b'{"name": "Ann", "age": -1}')
    with pytest.raises(RecordInvalid, match=r"\$\['tags'\]\[1\]"):
        person.validate(b'{"name": "Ann", "tags": ["a", 2]}')
    with pytest.raises(RecordInvalid, match="'name' is a required property"):
        person.validate(b"{}")
    with pytest.raises(RecordInvalid, match="not JSON"):
        person.validate(b'{"name": ')
    with pytest.raises(RecordInvalid, match="not UTF-8"):
        person.validate(b'"\xff"')


def test_long_reasons_are_cut_short():
    with pytest.raises(RecordInvalid) as caught:
        js({"type": "string"}).validate(json.dumps(list(range(2000))).encode())
    assert len(str(caught.value)) <= 300
