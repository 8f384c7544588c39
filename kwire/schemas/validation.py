"""Broker-side schema validation of one record's key or value (Confluent Server's schema ID
validation, plus kwire's optional payload decoding).  Synchronous and pure: the registry is
reached only through a ``SchemaSource``, so every rule here is tested without a broker.

Confluent's wire format of a serialized key or value::

    offset  size  field
         0     1  magic byte      0
         1     4  schema id       int32, big-endian: the id the Schema Registry gave the schema
         5     -  payload         AVRO binary; JSON text; PROTOBUF: the message indexes
                                  (varints) and then the message

The rules, in the order they are checked (the first that fails is the reason):

1. a null key or value passes: Confluent Server's documented behaviour ("messages with a null
   value or a null key will pass validation"), so tombstones reach compacted topics;
2. the bytes must start with the 5-byte prefix above (magic byte 0);
3. the schema id must be known to the registry;
4. the id must be registered under the subject the topic's strategy names (some live version
   of that subject has this id): TopicNameStrategy ``<topic>-key`` / ``<topic>-value``,
   RecordNameStrategy the schema's record name, TopicRecordNameStrategy
   ``<topic>-<record name>``.  A PROTOBUF file may define several messages and the payload's
   message indexes pick one; kwire does not resolve them to a name, so for PROTOBUF any of the
   schema's message names whose subject holds the id passes;
5. with ``decode`` (topic config ``kwire.schema.validation.decode``, default true), the payload
   must decode with the schema (``ParsedSchema.validate``).  Confluent Server stops at 4.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Protocol

from kwire.admin.topic_config import strategy_short_name

if TYPE_CHECKING:       # kwire.schemas.types: the schema parsers (AVRO, JSON, PROTOBUF)
    from kwire.schemas.types import ParsedSchema

MAGIC_BYTE = 0
PREFIX_SIZE = 5          # magic byte + 4-byte schema id


class SchemaSource(Protocol):
    """What validation asks the Schema Registry (``kwire.schemas``' registry implements it)."""

    def schema_by_id(self, schema_id: int) -> "ParsedSchema | None":
        """The schema registered with ``schema_id``, None when no schema has it."""

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        """Whether some live (not deleted) version of ``subject`` has ``schema_id``."""


class Strategy(enum.Enum):
    """Confluent's subject name strategies (``io.confluent.kafka.serializers.subject.*``)."""

    TOPIC = "TopicNameStrategy"
    RECORD = "RecordNameStrategy"
    TOPIC_RECORD = "TopicRecordNameStrategy"

    @classmethod
    def named(cls, name: str) -> Strategy:
        """The strategy of a short or full class name.  Raises ValueError for any other name
        (topic configs are checked when set, so only a corrupt stored config gets here)."""
        short = strategy_short_name(name)
        if short is None:
            raise ValueError(f"unknown subject name strategy {name!r}")
        return cls(short)


@dataclasses.dataclass(frozen=True, slots=True)
class FieldRule:
    """How one side of the records of a topic is checked: ``field`` is "key" or "value"."""

    field: str
    strategy: Strategy = Strategy.TOPIC
    decode: bool = True


def subjects_for(rule: FieldRule, topic: str, schema: "ParsedSchema") -> list[str]:
    """The subjects under which ``schema`` may be registered for ``rule`` (one, or for a
    PROTOBUF schema under a record strategy, one per message); empty when the strategy needs
    a record name and the schema has none."""
    if rule.strategy is Strategy.TOPIC:
        return [f"{topic}-{rule.field}"]
    names = list(schema.record_names())
    if schema.schema_type != "PROTOBUF":
        names = names[:1]
    if rule.strategy is Strategy.RECORD:
        return names
    return [f"{topic}-{name}" for name in names]


def check_field(topic: str, rule: FieldRule, data: bytes | memoryview | None,
                source: SchemaSource) -> str | None:
    """Why the key or value ``data`` breaks ``rule`` (see the module's rules), or None when it
    passes.  Raises only what ``source`` raises: an exception of the schema's ``validate`` is a
    reason."""
    return FieldChecker(topic, rule, source)(data)


def split_prefix(field: str, data: bytes | memoryview) -> tuple[int, str | None]:
    """(schema id, None) of data in Confluent's wire format, else (-1, why it is not)."""
    if len(data) < PREFIX_SIZE:
        return -1, (f"{field} of {len(data)} bytes is not in Confluent's wire format (a magic byte 0 "
                    "and a 4-byte schema id come first)")
    if data[0] != MAGIC_BYTE:
        return -1, (f"{field} starts with byte 0x{data[0]:02x}, not the magic byte 0 of Confluent's "
                    "wire format")
    return int.from_bytes(data[1:PREFIX_SIZE], "big", signed=True), None


def registered_schema(topic: str, rule: FieldRule, schema_id: int,
                      source: SchemaSource) -> tuple["ParsedSchema | None", str | None]:
    """(the schema, None) when ``schema_id`` is registered under the rule's subject, else
    (the schema or None, why not).  Raises what ``source`` raises."""
    schema = source.schema_by_id(schema_id)
    if schema is None:
        return None, f"{rule.field} has schema id {schema_id}, which is not registered"
    subjects = subjects_for(rule, topic, schema)
    if not subjects:
        return schema, (f"{rule.field} has schema id {schema_id} ({schema.schema_type}), which has no "
                        f"record name for {rule.strategy.value}")
    if any(source.subject_has_id(subject, schema_id) for subject in subjects):
        return schema, None
    return schema, (f"{rule.field} has schema id {schema_id}, which is not registered under subject "
                    f"{' or '.join(subjects)} ({rule.strategy.value})")


def decode_reason(field: str, schema_id: int, schema: "ParsedSchema", payload: memoryview) -> str | None:
    """Why ``payload`` (the bytes after the prefix) does not decode with ``schema``, or None."""
    try:
        schema.validate(payload)
    except Exception as exc:            # RecordInvalid(reason), or a parser's own failure
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return f"{field} does not match schema id {schema_id} ({schema.schema_type}): {reason}"
    return None


class FieldChecker:
    """``check_field`` for the records of one batch: a schema id's registry verdict is looked
    up once per batch (records of a batch usually share one id); decoding runs per record."""

    __slots__ = ("topic", "rule", "source", "_verdicts")

    def __init__(self, topic: str, rule: FieldRule, source: SchemaSource):
        self.topic, self.rule, self.source = topic, rule, source
        self._verdicts: dict[int, tuple[ParsedSchema | None, str | None]] = {}

    def __call__(self, data: bytes | memoryview | None) -> str | None:
        """As ``check_field``."""
        if data is None:
            return None
        schema_id, reason = split_prefix(self.rule.field, data)
        if reason is not None:
            return reason
        verdict = self._verdicts.get(schema_id)
        if verdict is None:
            verdict = self._verdicts[schema_id] = registered_schema(self.topic, self.rule, schema_id, self.source)
        schema, reason = verdict
        if reason is not None or not self.rule.decode:
            return reason
        return decode_reason(self.rule.field, schema_id, schema, memoryview(data)[PREFIX_SIZE:])
