"""The records of the ``_schemas`` topic, in Confluent Schema Registry's key/value JSON, so a
``_schemas`` topic written by Confluent's registry can be read and ours by theirs.

Every record is one JSON key and one JSON value (null: a tombstone, which compaction keeps
until ``delete.retention.ms``).  Keys are written compact, fields in this order, because
compaction compares key bytes::

    SCHEMA          {"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}
                    {"subject":"orders-value","version":1,"id":7,"schemaType":"PROTOBUF",
                     "references":[{"name":"a.proto","subject":"a","version":1}],
                     "schema":"...","deleted":false}
                    (schemaType left out for AVRO, references when empty; deleted true: a
                    soft-deleted version; a null value: the version was deleted for good)
    CONFIG          {"keytype":"CONFIG","subject":null,"magic":0}        (null subject: global)
                    {"compatibilityLevel":"FULL"[,"normalize":true]}      (null: back to default)
    MODE            {"keytype":"MODE","subject":"orders-value","magic":0}
                    {"mode":"READONLY"}                                   (null: back to default)
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":"orders-value","magic":0}
                    {"subject":"orders-value","version":3}   (every version up to 3 soft-deleted)
    CLEAR_SUBJECT   {"keytype":"CLEAR_SUBJECT","subject":"orders-value","magic":0}
                    {"subject":"orders-value"}                (the subject was deleted for good)
    NOOP            {"keytype":"NOOP","magic":0}                          (ignored)

Unknown key types (Confluent's later CONTEXT, ...) and malformed records are skipped by the
reader with a reason, never fatal: the topic is shared with other writers.
"""
from __future__ import annotations

import dataclasses
import json

__all__ = ["Reference", "SchemaValue", "Record", "RecordFormatError", "decode",
           "schema_record", "config_record", "mode_record", "delete_subject_record",
           "clear_subject_record"]


class RecordFormatError(ValueError):
    """A ``_schemas`` record this reader does not understand."""


@dataclasses.dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One decoded record: ``keytype`` and ``subject`` from the key (``version`` for SCHEMA);
    ``value`` the decoded value (SchemaValue for SCHEMA, else a dict), None for a tombstone."""
    keytype: str
    subject: str | None
    version: int | None
    value: object


def _dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _key(keytype: str, subject: str | None, version: int | None = None) -> bytes:
    if keytype == "SCHEMA":
        return _dump({"keytype": keytype, "subject": subject, "version": version, "magic": 1})
    return _dump({"keytype": keytype, "subject": subject, "magic": 0})


def schema_record(value: SchemaValue | None, subject: str, version: int) -> tuple[bytes, bytes | None]:
    """(key, value) of a SCHEMA record; ``value`` None writes the tombstone of a hard delete."""
    if value is None:
        return _key("SCHEMA", subject, version), None
    obj: dict = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        obj["schemaType"] = value.schema_type
    if value.references:
        obj["references"] = [r.as_json() for r in value.references]
    obj["schema"] = value.schema
    obj["deleted"] = value.deleted
    return _key("SCHEMA", subject, version), _dump(obj)


def config_record(subject: str | None, level: str | None, normalize: bool | None = None
                  ) -> tuple[bytes, bytes | None]:
    if level is None:
        return _key("CONFIG", subject), None
    obj: dict = {"compatibilityLevel": level}
    if normalize is not None:
        obj["normalize"] = normalize
    return _key("CONFIG", subject), _dump(obj)


def mode_record(subject: str | None, mode: str | None) -> tuple[bytes, bytes | None]:
    return _key("MODE", subject), (None if mode is None else _dump({"mode": mode}))


def delete_subject_record(subject: str, version: int) -> tuple[bytes, bytes]:
    return _key("DELETE_SUBJECT", subject), _dump({"subject": subject, "version": version})


def clear_subject_record(subject: str) -> tuple[bytes, bytes]:
    return _key("CLEAR_SUBJECT", subject), _dump({"subject": subject})


def _load(data, what: str):
    try:
        return json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"{what} is not JSON: {exc}") from None


def decode(key, value) -> Record:
    """One ``_schemas`` record.  Raises RecordFormatError."""
    if key is None:
        raise RecordFormatError("record without a key")
    k = _load(key, "key")
    if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
        raise RecordFormatError(f"key without a keytype: {k!r}")
    keytype, subject = k["keytype"], k.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise RecordFormatError(f"key with a subject that is not a string: {k!r}")
    version = k.get("version")
    if keytype == "SCHEMA" and (not isinstance(version, int) or subject is None):
        raise RecordFormatError(f"SCHEMA key without subject and version: {k!r}")
    v = None if value is None else _load(value, "value")
    if v is not None and not isinstance(v, dict):
        raise RecordFormatError(f"{keytype} value is not an object: {v!r}")
    if keytype == "SCHEMA" and v is not None:
        v = _schema_value(v)
    return Record(keytype, subject, version, v)


def _schema_value(v: dict) -> SchemaValue:
    try:
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in v.get("references") or ())
        schema_type = v.get("schemaType") or "AVRO"
        return SchemaValue(str(v["subject"]), int(v["version"]), int(v["id"]), str(schema_type),
                           str(v["schema"]), refs, bool(v.get("deleted", False)))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordFormatError(f"SCHEMA value without {exc}: {v!r}") from None
