"""AVRO schemas: parsed by the ``avro`` library, checked by its reader/writer resolution rules,
payloads decoded by fastavro.

References: a referenced Avro schema's named types (and those of its own references) are known
by full name while this schema parses, as Confluent's registry does; they are not inlined in the
canonical or normalized text, which therefore still needs the same references.

Compatibility is ``avro.compatibility.ReaderWriterCompatibilityChecker`` (the Avro spec's schema
resolution: fields matched by name or alias, a reader field missing from the writer needs a
default, promotions int -> long -> float -> double and string <-> bytes, enum symbols, union
branches, fixed sizes, names).  The checker reports its messages and locations as unordered sets;
``_PairingChecker`` keeps each problem's message with its location so the answer says where.

Payloads: fastavro's ``schemaless_reader`` with the schema parsed once per instance; bytes left
after one whole datum make the payload invalid.  fastavro is lenient in two ways we keep (an int
wider than 32 bits and a boolean byte other than 0/1 decode); see ``_avro_forms`` for the one
schema shape it cannot bound, which is walked instead.
"""
from __future__ import annotations

import io
import json
import warnings

import avro.compatibility
import avro.errors
import avro.name
import avro.schema
import fastavro

from . import _avro_forms
from ._base import ParsedSchema, RecordInvalid, SchemaError


class AvroSchema(ParsedSchema):
    """A parsed AVRO schema (``parse_avro`` builds it)."""

    schema_type = "AVRO"

    def __init__(self, raw: str, references, parsed: avro.schema.Schema, own_types: dict, ref_types: dict):
        super().__init__(raw, references)
        self.parsed = parsed
        # full name -> avro schema of the named types this schema defines / gets from references
        self.own_types = own_types
        self.ref_types = ref_types
        normalizer = _avro_forms.Normalizer(set(ref_types))
        self._normalized = normalizer.dump(parsed)
        self._used_references = sorted(normalizer.used_known)
        # the standalone form (references inlined) is what fastavro and the walk read
        self._standalone = _avro_forms.Normalizer().form(parsed)
        names = _avro_forms.named_types(self._standalone)
        self._walk_names = names if _avro_forms.has_empty_items(self._standalone, names) else None
        try:
            self._reader = fastavro.parse_schema(self._standalone, named_schemas={})
        except Exception as exc:   # fastavro's schema errors have no common base class
            raise SchemaError(f"Invalid Avro schema: fastavro cannot read it: {exc}") from exc

    def canonical(self) -> str:
        # the normalized form keeps every attribute that changes meaning, so it doubles as the
        # "same schema?" key, and two spellings of one schema register once (as in Confluent)
        return self._normalized

    def normalized(self) -> str:
        return self._normalized

    def references_names(self) -> list[str]:
        return list(self._used_references)

    def formatted(self, fmt: str | None) -> str:
        # Confluent's "resolved": the referenced named types inlined, so the text stands alone
        if fmt == "resolved":
            return json.dumps(self._standalone, separators=(",", ":"), ensure_ascii=False)
        return self.raw

    def record_names(self) -> list[str]:
        """The top-level named type's full name, then the other records defined here; [] when the
        top level is not a named type (a union, a primitive): no record name to go by."""
        if not isinstance(self.parsed, avro.schema.NamedSchema):
            return []
        top = self.parsed.fullname
        return [top] + [name for name, schema in self.own_types.items()
                        if name != top and isinstance(schema, avro.schema.RecordSchema)]

    def validate(self, payload: bytes | memoryview) -> None:
        data = bytes(payload)
        if self._walk_names is not None:
            try:
                end = _avro_forms.skip_datum(self._standalone, self._walk_names, data, 0)
            except (_avro_forms.Truncated, RecursionError) as exc:
                raise RecordInvalid(f"not a valid Avro datum of this schema: {exc}") from None
        else:
            stream = io.BytesIO(data)
            try:
                fastavro.schemaless_reader(stream, self._reader, None)
            except Exception as exc:   # fastavro raises EOFError, IndexError, UnicodeDecodeError, ...
                raise RecordInvalid(f"not a valid Avro datum of this schema: {_reason(exc)}") from None
            end = stream.tell()
        if end != len(data):
            raise RecordInvalid(f"{len(data) - end} bytes left after the Avro datum")

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        checker = _PairingChecker()
        result = checker.get_compatibility(self.parsed, writer.parsed)
        if result.compatibility is not avro.compatibility.SchemaCompatibilityType.incompatible:
            return []
        return _describe(checker, result, self.parsed)


def parse_avro(schema: str, references: list[tuple[str, ParsedSchema]]) -> AvroSchema:
    """Parse an AVRO schema whose named types may come from ``references``.

    Raises SchemaError for invalid JSON, an invalid Avro schema, an unknown named type, or a
    reference that is not an Avro schema.
    """
    ref_types: dict[str, avro.schema.NamedSchema] = {}
    for name, ref in references:
        if not isinstance(ref, AvroSchema):
            raise SchemaError(f"Invalid schema: reference {name!r} is a {ref.schema_type} schema, not AVRO")
        ref_types.update(ref.ref_types)
        ref_types.update(ref.own_types)
    try:
        data = json.loads(schema)
    except (json.JSONDecodeError, TypeError) as exc:
        raise SchemaError(f"Invalid schema: not JSON: {exc}") from None
    names = avro.name.Names()
    names.names.update(ref_types)
    try:
        with warnings.catch_warnings():
            # an unknown logicalType is legal Avro (the underlying type is used); not worth a log line
            warnings.simplefilter("ignore", avro.errors.IgnoredLogicalType)
            parsed = avro.schema.make_avsc_object(data, names)
    except (avro.errors.AvroException, TypeError, AttributeError, KeyError, ValueError) as exc:
        raise SchemaError(f"Invalid schema: {exc}") from None
    own_types = {n: s for n, s in names.names.items() if n not in ref_types}
    return AvroSchema(schema, references, parsed, own_types, ref_types)


def _reason(exc: Exception) -> str:
    if isinstance(exc, (EOFError, StopIteration)):
        return f"the data ends too early ({exc})" if str(exc) else "the data ends too early"
    if isinstance(exc, IndexError):
        return "an enum or union index out of range, or the data ends too early"
    if isinstance(exc, UnicodeDecodeError):
        return f"a string that is not UTF-8 ({exc.reason})"
    return f"{type(exc).__name__}: {exc}"


# -- compatibility messages -----------------------------------------------------------------------

class _PairingChecker(avro.compatibility.ReaderWriterCompatibilityChecker):
    """The stock checker, remembering (kind, message, location) of every single problem it meets.

    A result holding exactly one incompatibility pairs its message with its location; a reader
    field without default next to another problem in the same record is the one problem never
    seen alone, so the record-field step records those itself.
    """

    def __init__(self):
        super().__init__()
        self.problems: dict[tuple[str, str, str], None] = {}

    def get_compatibility(self, reader, writer, reference_token="/", location=None):
        result = super().get_compatibility(reader, writer, reference_token, location)
        self._remember(result)
        return result

    def check_reader_writer_record_fields(self, reader, writer, location):
        result = super().check_reader_writer_record_fields(reader, writer, location)
        for i, field in enumerate(reader.fields):
            # a missing enum field with a symbol default is checked as a type (the library's rule)
            enum_default = field.type.type == "enum" and field.type.props.get("default")
            if not field.has_default and not enum_default \
                    and avro.compatibility.lookup_writer_field(writer, field) is None:
                where = "/".join(location + ["fields", str(i)]).lstrip("/")
                self.problems[("reader_field_missing_default_value", field.name, "/" + where)] = None
        return result

    def _remember(self, result) -> None:
        if len(result.incompatibilities) == 1 and len(result.messages) == 1 and len(result.locations) == 1:
            kind = result.incompatibilities[0].value
            self.problems[(kind, next(iter(result.messages)), next(iter(result.locations)))] = None


def _describe(checker: _PairingChecker, result, reader: avro.schema.Schema) -> list[str]:
    out = []
    messages = set()
    for kind, message, location in checker.problems:
        messages.add(message)
        where = "/" + location.strip("/")
        field = _field_path(reader, where)
        at = f"at {where}" + (f" (field {field})" if field else "")
        out.append(f"{kind.upper()} {at}: {_explain(kind, message)}")
    leftover = sorted(result.messages - messages)
    if leftover:
        out.append(f"also: {'; '.join(leftover)} at {', '.join(sorted(result.locations))}")
    return out


def _explain(kind: str, message: str) -> str:
    if kind == "reader_field_missing_default_value":
        return f"the reader's field {message!r} has no default and the writer's schema lacks it"
    if kind == "missing_enum_symbols":
        return f"the writer's enum has symbols {message} that the reader lacks (and it has no default)"
    if kind == "name_mismatch":
        return f"named types differ ({message}; an alias would match)"
    return message


def _field_path(schema: avro.schema.Schema, location: str) -> str:
    """The dotted field names a checker location such as ``/fields/0/type/fields/2`` walks."""
    names = []
    parts = [p for p in location.split("/") if p]
    i = 0
    while i < len(parts):
        if parts[i] == "fields" and i + 1 < len(parts) and isinstance(schema, avro.schema.RecordSchema):
            index = int(parts[i + 1])
            if index >= len(schema.fields):
                break
            names.append(schema.fields[index].name)
            schema = schema.fields[index].type
            i += 2
        elif parts[i] == "type":
            i += 1
        else:
            break
    return ".".join(names)
