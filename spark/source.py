"""``format("kwire-kafka")``: a Spark data source in Python (PySpark's
``pyspark.sql.datasource`` API) with the schema and option names of Spark's own Kafka
source, batch and streaming, over kafka-python.

Stream offsets are Spark's partition-offset JSON (``{"topic": {"0": 42}}``): the
end offset of every micro-batch is written to the checkpoint before the batch runs,
and ``partitions(start, end)`` is a pure function of the two, so a batch replayed after
a crash reads exactly the same records. That is what lets Spark's file sink be
exactly-once on top of this source.

Options (as in Spark's Kafka source): ``kafka.bootstrap.servers`` and any other
``kafka.*`` consumer setting; one of ``subscribe``, ``subscribePattern``, ``assign``;
``startingOffsets``, ``endingOffsets`` (batch), ``startingTimestamp``,
``startingOffsetsByTimestamp``, ``endingTimestamp``, ``endingOffsetsByTimestamp``,
``startingOffsetsByTimestampStrategy`` (error|latest), ``maxOffsetsPerTrigger``,
``minPartitions``, ``failOnDataLoss``, ``includeHeaders``, ``kafkaConsumer.pollTimeoutMs``.
The writer (see writer.py) takes ``topic`` and ``kafka.*`` producer settings.

Schema Registry decoding (registry.py, decoding.py, schema_types.py): with
``schema.registry.url`` (and ``schema.registry.basic.auth.user.info=user:password``...) the
rows keep every Kafka column and gain ``value_decoded``, a struct shaped by the latest schema
of ``valueSubject`` (default ``<topic>-value``; required with ``subscribePattern`` or several
topics) at query start, and ``value_decode_error``.  ``valueFormat`` is ``avro``,
``protobuf``, ``json`` or ``auto`` (default: the subject's schemaType).  Each record is read
with its writer's schema, found by the id in its Confluent header, and conformed to that
struct by field name (missing fields null).  A record that is not Confluent-framed, or whose
schema cannot be fetched or read, gets a null ``value_decoded`` and the reason in
``value_decode_error``; ``failOnDecodeError=true`` fails the query instead.
``keyFormat``/``keySubject`` add ``key_decoded``/``key_decode_error`` the same way.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from .kafka_io import (EARLIEST, LATEST, OffsetResolver, TopicPartition, data_loss,
                       offsets_from_json, offsets_to_json, read_range, subscription_strategy)
from .registry import decoded_columns, decoded_fields, requested, resolve_specs, specs_from_schema

NAME = "kwire-kafka"
log = logging.getLogger("kwire.spark.source")

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, column for column."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key.lower())
    return default if value is None else str(value).strip().lower() == "true"


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task: offsets [from_offset, until_offset) of one topic partition."""
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class KafkaDataSource(DataSource):
    """Registered with ``spark.dataSource.register(KafkaDataSource)``; see the module doc."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self):
        base = kafka_schema(_bool(self.options, "includeHeaders", False))
        options = {k.lower(): v for k, v in self.options.items()}
        if not requested(options):
            return base
        # the subjects' latest schemas now, once: every task decodes to this struct
        specs = resolve_specs(options, subscription_strategy(options))
        return StructType(base.fields + decoded_fields(specs))

    def reader(self, schema):
        return KafkaBatchReader(dict(self.options), schema)

    def streamReader(self, schema):
        return KafkaStreamReader(dict(self.options), schema)

    def writer(self, schema, overwrite):
        from .writer import KafkaBatchWriter
        return KafkaBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema, overwrite):
        from .writer import KafkaStreamWriter
        return KafkaStreamWriter(dict(self.options), schema)


class _KafkaReaderBase:
    """Option parsing and the executor-side ``read`` shared by batch and streaming."""

    def __init__(self, options: dict, schema: StructType):
        self.options = {k.lower(): v for k, v in options.items()}
        self.schema = schema
        self.strategy = subscription_strategy(self.options)
        self.fail_on_data_loss = _bool(self.options, "failOnDataLoss", True)
        self.include_headers = "headers" in schema.fieldNames()
        self.poll_timeout_ms = int(self.options.get("kafkaconsumer.polltimeoutms", 120000))
        self.min_partitions = int(self.options.get("minpartitions", 0) or 0)
        self.decode_specs = specs_from_schema(self.options, schema)
        self.fail_on_decode_error = _bool(self.options, "failOnDecodeError", False)

    # -- driver side --------------------------------------------------------------------

    def _resolver(self) -> OffsetResolver:
        return OffsetResolver(self.options, self.strategy)

    def _resolve(self, resolver: OffsetResolver, tps, kind: str, default: str) -> dict:
        """Offsets for ``tps`` from the starting*/ending* options of ``kind`` ("starting" or
        "ending"), with Spark's precedence: *Timestamp, then *OffsetsByTimestamp, then
        *Offsets. Raises ValueError for a specification Spark would refuse."""
        o = self.options
        if o.get(f"{kind}timestamp") is not None:
            ts = int(o[f"{kind}timestamp"])
            return self._by_timestamp(resolver, {tp: ts for tp in tps}, kind)
        if o.get(f"{kind}offsetsbytimestamp") is not None:
            wanted = offsets_from_json(o[f"{kind}offsetsbytimestamp"])
            _check_covers(wanted, tps, f"{kind}OffsetsByTimestamp")
            return self._by_timestamp(resolver, {tp: wanted[tp] for tp in tps}, kind)
        spec = str(o.get(f"{kind}offsets", default)).strip()
        if spec == "earliest":
            return resolver.earliest(tps)
        if spec == "latest":
            return resolver.latest(tps)
        wanted = offsets_from_json(spec)
        _check_covers(wanted, tps, f"{kind}Offsets")
        need_earliest = [tp for tp in tps if wanted[tp] == EARLIEST]
        need_latest = [tp for tp in tps if wanted[tp] == LATEST]
        out = {tp: wanted[tp] for tp in tps}
        out.update(resolver.earliest(need_earliest))
        out.update(resolver.latest(need_latest))
        return out

    def _by_timestamp(self, resolver, timestamps: dict, kind: str) -> dict:
        found = resolver.by_timestamp(timestamps)
        missing = [tp for tp, off in found.items() if off is None]
        if not missing:
            return found
        strategy = self.options.get("startingoffsetsbytimestampstrategy", "error").lower()
        if kind == "starting" and strategy != "latest":
            raise ValueError(
                "No offset matched the starting timestamp for "
                + ", ".join(f"{tp.topic}-{tp.partition} (timestamp {timestamps[tp]})" for tp in missing)
                + '. Set "startingOffsetsByTimestampStrategy" to "latest" to start from the '
                "latest offset of such partitions instead.")
        found.update(resolver.latest(missing))  # ending by timestamp: none matched → latest
        return found

    def _ranges(self, start: dict, end: dict, earliest_of_new: int | None) -> list[OffsetRange]:
        """Tasks covering [start, end) per partition; partitions that appeared since
        ``start`` begin at 0 (so data deleted from them is reported as data loss, as Spark
        does); ``minPartitions`` splits large ranges."""
        ranges = []
        for tp in sorted(start, key=lambda t: (t.topic, t.partition)):
            if tp not in end:
                data_loss(f"{tp.topic}-{tp.partition} is gone (topic or partition deleted)",
                          self.fail_on_data_loss, log.warning)
        for tp in sorted(end, key=lambda t: (t.topic, t.partition)):
            frm = start.get(tp, earliest_of_new)
            until = end[tp]
            if frm is None or frm == until:
                continue
            if frm > until:
                data_loss(f"{tp.topic}-{tp.partition}'s offset went back from {frm} to {until}",
                          self.fail_on_data_loss, log.warning)
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, frm, until))
        return _split(ranges, self.min_partitions)

    # -- executor side ------------------------------------------------------------------

    def read(self, partition):
        if not isinstance(partition, OffsetRange):
            return iter(())  # Spark's placeholder partition for an empty plan
        return self._read(partition)

    def __getstate__(self):
        state = dict(self.__dict__)
        if "_resolver_obj" in state:
            state["_resolver_obj"] = None  # sockets stay in the process that opened them
        return state

    def _read(self, r: OffsetRange) -> Iterator:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        if pa_schema.names != ["key", "value", "topic", "partition", "offset", "timestamp",
                               "timestampType"] + (["headers"] if self.include_headers else []) \
                + [name for s in self.decode_specs for name in (s.decoded, s.error)]:
            raise ValueError(f"{NAME} cannot produce the schema {self.schema.simpleString()}; "
                             "select columns after loading instead of passing a schema")
        for records in read_range(self.options, r.tp, r.from_offset, r.until_offset,
                                  self.fail_on_data_loss, self.poll_timeout_ms, log.warning):
            decoded = decoded_columns(self.decode_specs, records, self.fail_on_decode_error)
            yield _to_arrow(pa, pa_schema, records, self.include_headers, decoded)


def _to_arrow(pa, pa_schema, records, include_headers: bool, extra: list = ()):
    n = len(records)
    columns = [
        [r.key for r in records], [r.value for r in records], [records[0].topic] * n,
        [r.partition for r in records], [r.offset for r in records],
        [None if r.timestamp is None or r.timestamp < 0 else r.timestamp * 1000 for r in records],
        [r.timestamp_type for r in records],
    ]
    if include_headers:
        # a record without headers has null, not an empty array, as in Spark's connector
        columns.append([[{"key": k, "value": v} for k, v in r.headers] if r.headers else None
                        for r in records])
    columns += extra
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, pa_schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa_schema)


def _check_covers(wanted: dict, tps, option: str) -> None:
    missing = [f"{tp.topic}-{tp.partition}" for tp in tps if tp not in wanted]
    if missing:
        raise ValueError(f'"{option}" must give every subscribed partition; missing '
                         + ", ".join(missing))


def _split(ranges: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: with ``minPartitions`` above the range count,
    cut each range into pieces proportional to its size."""
    total = sum(r.until_offset - r.from_offset for r in ranges)
    if min_partitions <= len(ranges) or total == 0:
        return ranges
    out = []
    for r in ranges:
        size = r.until_offset - r.from_offset
        parts = max(1, math.floor(size / total * min_partitions))
        step = size / parts
        bounds = [r.from_offset + math.floor(i * step) for i in range(parts)] + [r.until_offset]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if a < b]
    return out


class KafkaBatchReader(_KafkaReaderBase, DataSourceReader):
    """``spark.read.format("kwire-kafka")``: offsets fixed when the query is planned."""

    def partitions(self):
        resolver = self._resolver()
        try:
            tps = resolver.partitions()
            self._check_batch_bounds()
            start = self._resolve(resolver, tps, "starting", "earliest")
            end = self._resolve(resolver, tps, "ending", "latest")
        finally:
            resolver.close()
        return self._ranges(start, end, None)

    def _check_batch_bounds(self) -> None:
        """Spark refuses a batch that starts at "latest" or ends at "earliest"."""
        for key, bad, name in (("startingoffsets", LATEST, "latest"),
                               ("endingoffsets", EARLIEST, "earliest")):
            spec = str(self.options.get(key, "")).strip()
            if spec == name or (spec.startswith("{") and bad in offsets_from_json(spec).values()):
                raise ValueError(f'{key.replace("offsets", "Offsets")} "{name}" ({bad}) is not '
                                 "valid for batch queries")


class KafkaStreamReader(_KafkaReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kwire-kafka")``. Lives in one driver-side Python process
    for the whole query; keeps one metadata consumer there."""

    def __init__(self, options: dict, schema: StructType):
        super().__init__(options, schema)
        self._resolver_obj = None
        self._target = None  # Trigger.AvailableNow: the latest offsets when it started
        max_offsets = self.options.get("maxoffsetspertrigger")
        self.max_offsets = int(max_offsets) if max_offsets else None

    def _resolver(self) -> OffsetResolver:
        if self._resolver_obj is None:
            self._resolver_obj = OffsetResolver(self.options, self.strategy)
        return self._resolver_obj

    def initialOffset(self) -> dict:
        resolver = self._resolver()
        tps = resolver.partitions()
        return offsets_to_json(self._resolve(resolver, tps, "starting", "latest"))

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_offsets) if self.max_offsets else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        resolver = self._resolver()
        self._target = resolver.latest(resolver.partitions())

    def reportLatestOffset(self):
        resolver = self._resolver()
        return offsets_to_json(resolver.latest(resolver.partitions()))

    def latestOffset(self, start: dict = None, limit=None) -> dict:
        resolver = self._resolver()
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = resolver.latest(resolver.partitions())
        if start is not None and isinstance(limit, ReadMaxRows):
            latest = _rate_limit(offsets_from_json(start), latest, limit.max_rows)
        return offsets_to_json(latest)

    def partitions(self, start: dict, end: dict):
        return self._ranges(offsets_from_json(start), offsets_from_json(end), 0)

    def commit(self, end: dict) -> None:
        # The checkpoint is the record of progress: nothing is committed to Kafka (as
        # Spark's source, which never commits offsets to the broker either).
        pass

    def stop(self) -> None:
        if self._resolver_obj is not None:
            self._resolver_obj.close()
            self._resolver_obj = None


def _rate_limit(start: dict, latest: dict, limit: int) -> dict:
    """Spark's maxOffsetsPerTrigger: share ``limit`` among partitions in proportion to
    their backlog (new partitions count from 0)."""
    sizes = {tp: max(0, off - start.get(tp, 0)) for tp, off in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return latest
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, 0)
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + step) if end >= begin else end
    return out


def register(spark) -> str:
    """Register the data source with a SparkSession; returns its format name."""
    spark.dataSource.register(KafkaDataSource)
    return NAME


__all__ = ["KafkaDataSource", "KafkaBatchReader", "KafkaStreamReader", "NAME", "OffsetRange",
           "kafka_schema", "register"]
