"""Schema Registry options of ``format("kwire-kafka")``, driver side: which columns to decode
with which subject, the reader struct from the subject's latest schema at query start, and
the extra columns of the DataFrame.  The executor side is decoding.py.

Options (case-insensitive, as all Spark options):

* ``schema.registry.url`` (comma-separated URLs) turns decoding on; any other
  ``schema.registry.<key>`` goes to confluent-kafka's ``SchemaRegistryClient`` as ``<key>``:
  ``schema.registry.basic.auth.user.info=user:password``, ``schema.registry.ssl.ca.location``,
  ``schema.registry.timeout``, ...
* ``valueFormat`` = ``avro`` | ``protobuf`` | ``json`` | ``auto`` (default: the subject's
  schemaType); naming a format the subject does not have is an error at query start.
* ``valueSubject`` (default ``<topic>-value``, TopicNameStrategy).  With ``subscribePattern``
  or several topics there is no single default, so it must be given: every record is then
  read with its own writer schema (by the id in its header) and conformed to this subject's
  latest schema by field name.
* ``valueMessage``: protobuf only, the reader message's full name (default: the first message
  of the subject's latest schema).
* ``keyFormat``, ``keySubject`` (default ``<topic>-key``), ``keyMessage``: the same for keys;
  keys are decoded only when one of them is given.
* ``failOnDecodeError`` (default false): fail the query on a record that cannot be decoded
  instead of giving it a null ``*_decoded`` and the reason in ``*_decode_error``.

The decoded struct's fields are all nullable (as ``from_json`` makes them): a record written
with an older schema, or one of another topic, may lack any of them.  The ``*_decoded``
field's metadata ``kwire.registry`` names the subject, schemaType, schema id and message it
was built from; the readers rebuild their ``DecodeSpec`` from it, so the schema fixed at query
start is the one every task decodes to.
"""
from __future__ import annotations

import json
from typing import Mapping

from pyspark.sql.types import StringType, StructField, StructType

from .decoding import (DecodeFailure, DecodeSpec, decoder_for, fetch_references, message_name,
                       protobuf_pool)
from .schema_types import as_nullable, avro_to_spark, json_schema_to_spark, protobuf_to_spark

PREFIX = "schema.registry."
METADATA_KEY = "kwire.registry"
FORMATS = {"auto": None, "avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
COLUMNS = ("value", "key")
_NUMERIC_CONF = {"timeout", "max.retries", "retries.wait.ms", "retries.max.wait.ms",
                 "cache.capacity", "cache.latest.ttl.sec"}
_OPTIONS = [f"{c}{o}" for c in COLUMNS for o in ("format", "subject", "message")] + ["failondecodeerror"]


def registry_conf(options: Mapping[str, str]) -> tuple:
    """SchemaRegistryClient's conf from the ``schema.registry.*`` options (lower-case keys),
    as sorted pairs (hashable: it keys the per-worker client cache)."""
    conf = {}
    for key, value in options.items():
        if key.startswith(PREFIX):
            name = key[len(PREFIX):]
            if name in _NUMERIC_CONF:
                value = float(value) if "." in str(value) else int(value)
            conf[name] = value
    return tuple(sorted(conf.items()))


def requested(options: Mapping[str, str]) -> bool:
    """Whether any registry option is set (lower-case keys)."""
    return any(options.get(o) for o in (PREFIX + "url", *_OPTIONS))


def wanted(options: Mapping[str, str], strategy: tuple) -> list[tuple[str, str | None, str, str | None]]:
    """[(column, schemaType or None for auto, subject, protobuf message or None)] the options
    ask for; [] without ``schema.registry.url``.  Raises ValueError for options that do not
    fit together."""
    if not options.get(PREFIX + "url"):
        stray = [o for o in _OPTIONS if options.get(o)]
        if stray:
            raise ValueError(f'option(s) {", ".join(stray)} need "schema.registry.url"')
        return []
    out = []
    for column in COLUMNS:
        given = {o: options.get(f"{column}{o}") for o in ("format", "subject", "message")}
        if column == "key" and not any(given.values()):
            continue
        fmt = str(given["format"] or "auto").strip().lower()
        if fmt not in FORMATS:
            raise ValueError(f'option "{column}Format" must be avro, protobuf, json or auto, not {fmt!r}')
        subject = given["subject"] or f"{_single_topic(strategy, column)}-{column}"
        out.append((column, FORMATS[fmt], subject, given["message"]))
    return out


def _single_topic(strategy: tuple, column: str) -> str:
    kind, arg = strategy
    topics = sorted(arg) if kind == "subscribe" else sorted({tp.topic for tp in arg}) if kind == "assign" else []
    if len(topics) != 1:
        raise ValueError(f'with subscribePattern or several topics, option "{column}Subject" must '
                         f"name the subject whose latest schema shapes {column}_decoded")
    return topics[0]


def resolve_specs(options: Mapping[str, str], strategy: tuple) -> list[DecodeSpec]:
    """The DecodeSpecs of the options, each with its subject's latest schema (driver side; one
    registry round trip per subject and reference).  Raises ValueError for a subject that is
    missing or of another format, or a schema with no Spark type."""
    wants = wanted(options, strategy)
    if not wants:
        return []
    from confluent_kafka.schema_registry import SchemaRegistryClient
    conf = registry_conf(options)
    client = SchemaRegistryClient(dict(conf))  # fresh: the client caches "latest" for good
    try:
        return [_spec(client, conf, *want) for want in wants]
    finally:
        client.close()


def _spec(client, conf: tuple, column: str, fmt: str | None, subject: str, message: str | None) -> DecodeSpec:
    try:
        latest = client.get_latest_version(subject, fmt="serialized")
        refs = fetch_references(client, latest.schema)
    except Exception as exc:
        raise ValueError(f"{column}: cannot read subject {subject!r} from the Schema Registry: {exc}") from None
    kind = latest.schema.schema_type or "AVRO"
    if fmt is not None and fmt != kind:
        raise ValueError(f'{column}Format is {fmt.lower()} but the latest schema of subject '
                         f"{subject!r} (id {latest.schema_id}) is {kind}")
    try:
        dtype, message = reader_type(latest.schema_id, latest.schema, refs, message)
    except (DecodeFailure, KeyError, ValueError) as exc:
        raise ValueError(f"{column}: subject {subject!r}, schema id {latest.schema_id}: {exc}") from None
    return DecodeSpec(column, subject, kind, latest.schema_id, message, as_nullable(dtype).json(), conf)


def reader_type(schema_id: int, schema, refs: list, message: str | None = None):
    """(Spark type, protobuf message full name or None) of a registered schema.  Raises
    ValueError/KeyError (a message that is not in the schema) or DecodeFailure."""
    kind = schema.schema_type or "AVRO"
    if kind == "AVRO":
        return avro_to_spark(json.loads(schema.schema_str), [json.loads(s.schema_str) for _, s in refs]), None
    if kind == "JSON":
        return json_schema_to_spark(json.loads(schema.schema_str)), None
    if kind == "PROTOBUF":
        pool, fdp = protobuf_pool(f"schema-{schema_id}.proto", schema, refs)
        name = message or message_name(fdp, [0])
        return protobuf_to_spark(pool.FindMessageTypeByName(name)), name
    raise ValueError(f"unknown schemaType {kind}")


def decoded_fields(specs: list[DecodeSpec]) -> list[StructField]:
    """The columns decoding adds: ``<column>_decoded`` and ``<column>_decode_error`` each."""
    from pyspark.sql.types import _parse_datatype_json_string
    out = []
    for s in specs:
        meta = {METADATA_KEY: {"subject": s.subject, "schemaType": s.schema_type,
                               "id": s.schema_id, "message": s.message}}
        out += [StructField(s.decoded, _parse_datatype_json_string(s.struct_json), True, meta),
                StructField(s.error, StringType(), True)]
    return out


def specs_from_schema(options: Mapping[str, str], schema: StructType) -> list[DecodeSpec]:
    """The DecodeSpecs ``decoded_fields`` wrote into ``schema`` (no registry round trip)."""
    conf = registry_conf(options)
    specs = []
    for f in schema.fields:
        meta = f.metadata.get(METADATA_KEY) if f.metadata else None
        if meta and f.name.endswith("_decoded"):
            specs.append(DecodeSpec(f.name[:-len("_decoded")], meta["subject"], meta["schemaType"],
                                    int(meta["id"]), meta.get("message"), f.dataType.json(), conf))
    return specs


def decoded_columns(specs: list[DecodeSpec], records, fail: bool) -> list[list]:
    """Per spec, the ``*_decoded`` and ``*_decode_error`` column values of ``records``
    (kafka-python ConsumerRecords).  With ``fail``, raises ValueError at the first record
    that cannot be decoded."""
    columns = []
    for spec in specs:
        decoder = decoder_for(spec)
        rows, errors = [], []
        for r in records:
            row, error = decoder.decode(getattr(r, spec.column))
            if error is not None and fail:
                raise ValueError(f"cannot decode the {spec.column} of {r.topic}-{r.partition} at offset "
                                 f"{r.offset}: {error} (failOnDecodeError is true)")
            rows.append(row)
            errors.append(error)
        columns += [rows, errors]
    return columns


__all__ = ["decoded_columns", "decoded_fields", "reader_type", "registry_conf", "requested", "resolve_specs",
           "specs_from_schema", "wanted"]
