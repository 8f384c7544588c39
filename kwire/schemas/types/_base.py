"""What every schema type offers the registry and the produce-path validators.

One ``ParsedSchema`` subclass per Confluent schema type.  The registry's REST API turns
``SchemaError`` into 422 / error_code 42201; the produce path turns ``RecordInvalid`` into a
refused record.  Nothing here does I/O or reads a clock: parsing, normalising, compatibility
and payload checks are pure functions of their arguments.
"""
from __future__ import annotations

import abc

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE")


class SchemaError(ValueError):
    """The schema text is not a valid schema of its type (the REST API answers 422 / error_code 42201
    with str(exc))."""


class RecordInvalid(ValueError):
    """A record's payload does not decode against its schema; str(exc) is a short readable reason."""


class ParsedSchema(abc.ABC):
    """A schema that parsed: its registered text and what the registry and the validators ask of it.

    Instances are immutable once built, so they can be shared between requests and cached by id;
    ``validate`` keeps its compiled reader on the instance.
    """

    schema_type: str = ""

    def __init__(self, raw: str, references: list[tuple[str, ParsedSchema]]):
        self.raw = raw
        self.references = list(references)

    @abc.abstractmethod
    def canonical(self) -> str:
        """The form that decides whether two registrations are the same schema: insensitive to
        whitespace and formatting, not to semantic differences."""

    @abc.abstractmethod
    def normalized(self) -> str:
        """Confluent's ``normalize=true`` form: two semantically equal schemas written differently
        normalize to the same string (which is itself a valid schema of this type)."""

    def formatted(self, fmt: str | None) -> str:
        """The text served by ``GET /schemas/ids/{id}?format=fmt``: the raw text unless the type
        knows ``fmt``."""
        return self.raw

    @abc.abstractmethod
    def references_names(self) -> list[str]:
        """The names this schema imports or refers to (so the registry can check the references
        it was given)."""

    @abc.abstractmethod
    def record_names(self) -> list[str]:
        """Fully-qualified record/message names this schema defines, the top-level one first."""

    @abc.abstractmethod
    def validate(self, payload: bytes | memoryview) -> None:
        """Check one record payload (what follows Confluent's 5-byte header).

        Raises RecordInvalid when it does not decode against this schema.
        """

    @abc.abstractmethod
    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        """Why this schema, as a reader, cannot read all data written with ``writer`` (same
        type); [] when it can."""

    def __repr__(self) -> str:
        text = self.raw if len(self.raw) <= 60 else self.raw[:57] + "..."
        return f"<{type(self).__name__} {text!r}>"
