"""JSON schemas: JSON Schema documents checked against their draft's meta-schema by ``jsonschema``,
payloads validated by a compiled validator, compatibility by ``_json_compat``.

Drafts: ``$schema`` picks draft 4, 6, 7, 2019-09 or 2020-12; without it (or with a URI jsonschema
does not know) draft 7, Confluent's default.  Format keywords are annotations only (no format
checker), as jsonschema does by default.

References: each reference is a resource of the ``referencing`` registry under its reference name
(and under that name resolved against this schema's ``$id``, and under its own ``$id``), so
``{"$ref": "address.json"}`` or ``"address.json#/definitions/street"`` reach the referenced
schema.  A ``$ref`` to a document that is neither given nor this one is a SchemaError.
"""
from __future__ import annotations

import json
from urllib.parse import urljoin

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema

from . import _json_compat
from ._base import ParsedSchema, RecordInvalid, SchemaError

_SPECIFICATIONS = {
    jsonschema.Draft3Validator: referencing.jsonschema.DRAFT3,
    jsonschema.Draft4Validator: referencing.jsonschema.DRAFT4,
    jsonschema.Draft6Validator: referencing.jsonschema.DRAFT6,
    jsonschema.Draft7Validator: referencing.jsonschema.DRAFT7,
    jsonschema.Draft201909Validator: referencing.jsonschema.DRAFT201909,
    jsonschema.Draft202012Validator: referencing.jsonschema.DRAFT202012,
}
# keywords whose values are data, not subschemas: a "$ref" key inside them refers to nothing
_DATA_KEYWORDS = {"enum", "const", "default", "examples"}
_MAX_REASON = 300


class JsonSchema(ParsedSchema):
    """A parsed JSON schema (``parse_json`` builds it)."""

    schema_type = "JSON"

    def __init__(self, raw: str, references, contents, validator_cls, resources: dict):
        super().__init__(raw, references)
        self.contents = contents
        self.validator_cls = validator_cls
        self.draft = validator_cls.META_SCHEMA.get("$schema", "")
        specification = _SPECIFICATIONS.get(validator_cls, referencing.jsonschema.DRAFT7)
        self.resource = specification.create_resource(contents)
        # uri -> Resource of every referenced document (references of references included)
        self.resources = resources
        self.registry = referencing.Registry().with_resources(resources.items())
        self._validator = validator_cls(contents, registry=self.registry)

    def resolver(self) -> referencing.Resolver:
        """A resolver rooted at this schema, reaching its references."""
        return self.registry.resolver_with_root(self.resource)

    def canonical(self) -> str:
        # key order kept, as Confluent's canonical string keeps it; only whitespace goes
        return json.dumps(self.contents, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(self.contents, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def references_names(self) -> list[str]:
        return sorted({ref.partition("#")[0] for ref in _refs(self.contents)} - {""})

    def record_names(self) -> list[str]:
        title = self.contents.get("title") if isinstance(self.contents, dict) else None
        return [title] if isinstance(title, str) else []

    def validate(self, payload: bytes | memoryview) -> None:
        try:
            instance = json.loads(bytes(payload).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise RecordInvalid(f"not UTF-8 text: {exc.reason}") from None
        except json.JSONDecodeError as exc:
            raise RecordInvalid(f"not JSON: {exc}") from None
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(instance))
        except referencing.exceptions.Unresolvable as exc:
            raise RecordInvalid(f"the schema's reference {exc.ref!r} does not resolve") from None
        except RecursionError:
            raise RecordInvalid("the JSON document nests too deeply to validate") from None
        if error is not None:
            where = "$" + "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in error.absolute_path)
            reason = f"{where}: {error.message}"
            raise RecordInvalid(reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON - 3] + "...")

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        return _json_compat.reader_errors(self, writer)


def parse_json(schema: str, references: list[tuple[str, ParsedSchema]]) -> JsonSchema:
    """Parse a JSON Schema document whose ``$ref``s may name ``references``.

    Raises SchemaError for invalid JSON, a document that fails its draft's meta-schema, a
    reference that is not a JSON schema, or a ``$ref`` to a document nobody gave.
    """
    try:
        contents = json.loads(schema)
    except (json.JSONDecodeError, TypeError) as exc:
        raise SchemaError(f"Invalid schema: not JSON: {exc}") from None
    if not isinstance(contents, (dict, bool)):
        raise SchemaError(f"Invalid schema: a JSON schema is an object or a boolean, not {type(contents).__name__}")
    try:
        validator_cls = jsonschema.validators.validator_for(contents, default=jsonschema.Draft7Validator)
        validator_cls.check_schema(contents)
        base = contents.get("$id", "") if isinstance(contents, dict) else ""
        parsed = JsonSchema(schema, references, contents, validator_cls,
                            _reference_resources(references, base if isinstance(base, str) else ""))
        _check_refs_resolve(parsed)
    except jsonschema.exceptions.SchemaError as exc:
        where = "".join(f"/{p}" for p in exc.absolute_path)
        raise SchemaError(f"Invalid schema: at #{where}: {exc.message}") from None
    except SchemaError:
        raise
    except (ValueError, TypeError, referencing.exceptions.Unresolvable) as exc:
        # a URI urllib cannot split ($schema, $id), an unknown dialect of a subschema, ...
        raise SchemaError(f"Invalid schema: {exc}") from None
    return parsed


def _reference_resources(references, base: str) -> dict:
    resources: dict[str, referencing.Resource] = {}
    for name, ref in references:
        if not isinstance(ref, JsonSchema):
            raise SchemaError(f"Invalid schema: reference {name!r} is a {ref.schema_type} schema, not JSON")
        resources.update(ref.resources)
        for uri in {name, urljoin(base, name), ref.resource.id() or name}:
            resources[uri] = ref.resource
    return resources


def _check_refs_resolve(parsed: JsonSchema) -> None:
    if _has_nested_ids(parsed.contents):
        return   # relative refs under a nested $id need that scope; the validator resolves them lazily
    resolver = parsed.resolver()
    for ref in _refs(parsed.contents):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            document = ref.partition("#")[0]
            if document:
                raise SchemaError(f"Invalid schema: $ref {ref!r} names no reference given with the schema") from None
            raise SchemaError(f"Invalid schema: $ref {ref!r} points nowhere in the schema") from None


def _refs(node):
    """Every ``$ref`` string of a schema document (not those inside enum/const/default data)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    yield value
                elif key not in _DATA_KEYWORDS:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def _has_nested_ids(contents) -> bool:
    stack = [v for k, v in contents.items() if k not in _DATA_KEYWORDS] if isinstance(contents, dict) else []
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("$id"), str) or isinstance(node.get("id"), str):
                return True
            stack.extend(v for k, v in node.items() if k not in _DATA_KEYWORDS)
        elif isinstance(node, list):
            stack.extend(node)
    return False
