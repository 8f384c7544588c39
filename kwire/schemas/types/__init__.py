"""Schema types of the built-in Schema Registry: AVRO, JSON and PROTOBUF.

Synchronous and pure: parse a schema (with its references already parsed), compare versions
under a compatibility level, check a record payload.  No I/O, no clock, no trio.

    parse(schema_type, schema, references) -> ParsedSchema      raises SchemaError
    compatibility_errors(level, new, previous) -> list[str]     raises ValueError (unknown level)
    ParsedSchema.validate(payload)                              raises RecordInvalid
"""
from __future__ import annotations

from ._base import COMPATIBILITY_LEVELS, SCHEMA_TYPES, ParsedSchema, RecordInvalid, SchemaError
from .avro_schema import AvroSchema, parse_avro
from .compatibility import compatibility_errors
from .json_schema import JsonSchema, parse_json
from .protobuf_schema import ProtobufSchema, parse_protobuf

__all__ = [
    "COMPATIBILITY_LEVELS", "SCHEMA_TYPES", "AvroSchema", "JsonSchema", "ParsedSchema", "ProtobufSchema",
    "RecordInvalid", "SchemaError", "compatibility_errors", "parse",
]

_PARSERS = {"AVRO": parse_avro, "JSON": parse_json, "PROTOBUF": parse_protobuf}


def parse(schema_type: str, schema: str, references: list[tuple[str, ParsedSchema]] = ()) -> ParsedSchema:
    """Parse ``schema`` of ``schema_type`` ("AVRO" when the REST client gives none).

    ``references``: (name, parsed schema) of every schema it references, already parsed and in
    dependency order.  Avro named types defined in them are usable by name; a JSON ``$ref`` to a
    reference's name resolves to it; a Protobuf ``import "<name>"`` resolves to it.

    Raises SchemaError for an invalid schema, an unresolvable reference or an unknown schema_type.
    """
    parser = _PARSERS.get(schema_type or "AVRO")
    if parser is None:
        raise SchemaError(f"Invalid schema type {schema_type!r}; expected one of {', '.join(SCHEMA_TYPES)}")
    if not isinstance(schema, str):
        raise SchemaError(f"Invalid schema: expected a string, not {type(schema).__name__}")
    try:
        return parser(schema, list(references))
    except RecursionError:
        raise SchemaError("Invalid schema: nested too deeply") from None
