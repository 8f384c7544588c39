"""The ``kwire-kafka`` sink: rows → Kafka records through kafka-python's KafkaProducer,
with the column contract of Spark's Kafka sink.

Columns: ``value`` (string or binary, required), ``key`` (string or binary), ``topic``
(string; the ``topic`` option overrides it), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>). Every task flushes its producer before it
reports success, so a committed batch is durable in Kafka (acks=all). Like Spark's own
Kafka sink this is at-least-once: a replayed micro-batch writes its rows again.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from .kafka_io import producer

FLUSH_TIMEOUT_S = 120


@dataclass
class Written(WriterCommitMessage):
    records: int


def _check_schema(schema: StructType, options: dict) -> None:
    """Raises ValueError where Spark's Kafka sink raises AnalysisException."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise ValueError(f"{name} attribute type must be a string or binary")
    if "topic" not in options and "topic" not in fields:
        raise ValueError("topic option required when no 'topic' attribute is present. "
                         "Use the topic option for setting a topic.")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ValueError("topic attribute type must be a string")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError("partition attribute type must be an int")


def _bytes(v):
    return v.encode("utf-8") if isinstance(v, str) else (bytes(v) if v is not None else None)


class KafkaBatchWriter(DataSourceWriter):
    """``df.write.format("kwire-kafka")``."""

    def __init__(self, options: dict, schema: StructType):
        self.options = {k.lower(): v for k, v in options.items()}
        self.names = set(schema.fieldNames())
        _check_schema(schema, self.options)

    def write(self, iterator) -> Written:
        p = producer(self.options)
        fixed_topic = self.options.get("topic")
        names = self.names
        count = 0
        futures = []
        try:
            for row in iterator:
                topic = fixed_topic or row["topic"]
                if topic is None:
                    raise ValueError("null topic present in the data. Use the topic option "
                                     "for setting a topic.")
                headers = None
                if "headers" in names and row["headers"] is not None:
                    headers = [(h["key"], _bytes(h["value"])) for h in row["headers"]]
                futures.append(p.send(
                    topic, value=_bytes(row["value"]),
                    key=_bytes(row["key"]) if "key" in names else None,
                    partition=row["partition"] if "partition" in names else None,
                    headers=headers))
                count += 1
                if len(futures) >= 10000:
                    _settle(p, futures)
            _settle(p, futures)
        finally:
            p.close(timeout=FLUSH_TIMEOUT_S)
        return Written(count)

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        pass  # records already sent stay in Kafka, as with Spark's sink


def _settle(p, futures: list) -> None:
    """Flush and surface the first send error (raises it)."""
    p.flush(timeout=FLUSH_TIMEOUT_S)
    for f in futures:
        f.get(timeout=FLUSH_TIMEOUT_S)
    futures.clear()


class KafkaStreamWriter(KafkaBatchWriter, DataSourceStreamWriter):
    """``df.writeStream.format("kwire-kafka")``."""

    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass
