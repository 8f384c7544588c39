"""kafka-python plumbing behind the Spark data source: option mapping, partition offsets
in Spark's JSON shape, a driver-side offset resolver and the executor-side range reader.

Everything here speaks the public Kafka protocol through kafka-python in assign mode
(no group id, no commits), so it works against any Kafka broker, not only kwire.

Offsets are ``{TopicPartition: int}`` inside and ``{"topic": {"0": 42}}`` outside (the
shape Spark's Kafka source writes to checkpoints). Both directions sort topics and
partitions so one set of offsets always serialises to the same JSON string: Spark
decides "no new data" by comparing those strings.
"""
from __future__ import annotations

import json
import re
import time
from typing import Iterator, Mapping

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, OffsetOutOfRangeError

EARLIEST = -2  # Spark's (and ListOffsets') sentinels inside offset JSON
LATEST = -1

# Spark's Kafka source rejects or overrides these; in assign mode they make no sense.
_IGNORED_KAFKA_KEYS = {"group_id", "auto_offset_reset", "enable_auto_commit",
                       "key_deserializer", "value_deserializer",
                       "key_serializer", "value_serializer", "interceptor_classes"}

# Faster reads than kafka-python's defaults; any kafka.* option overrides them.
CONSUMER_DEFAULTS = {"max_poll_records": 10000, "max_partition_fetch_bytes": 8 << 20,
                     "fetch_max_bytes": 64 << 20, "fetch_max_wait_ms": 100,
                     "enable_auto_commit": False, "group_id": None}


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (DeleteRecords, retention, a deleted topic) and
    failOnDataLoss is true. The message says what was lost, as Spark's does."""


def data_loss(message: str, fail: bool, log=None) -> None:
    """Raise DataLossError when ``fail``; otherwise note it and carry on, as Spark does."""
    text = (message + ". Some data may have been lost because they are not available in "
            "Kafka any more; either the data was aged out by Kafka or the topic may have "
            "been deleted before all the data in the topic was processed.")
    if fail:
        raise DataLossError(text + " If you don't want your streaming query to fail on such "
                            "cases, set the source option \"failOnDataLoss\" to \"false\".")
    if log is not None:
        log(text)


def kafka_params(options: Mapping[str, str], client: type) -> dict:
    """Map Spark's ``kafka.*`` options to kafka-python keyword arguments for ``client``
    (KafkaConsumer or KafkaProducer), converting values to the type of the default.

    Unknown keys are dropped (kafka-python would raise on them); raises ValueError when
    ``kafka.bootstrap.servers`` is missing.
    """
    defaults = client.DEFAULT_CONFIG
    params: dict = {}
    for key, value in options.items():
        if not key.lower().startswith("kafka."):
            continue
        name = key[6:].lower().replace(".", "_")
        if name in _IGNORED_KAFKA_KEYS or name not in defaults:
            continue
        default = defaults[name]
        if isinstance(default, bool):
            value = str(value).lower() == "true"
        elif isinstance(default, int) and name != "acks":
            value = int(value)
        elif isinstance(default, float):
            value = float(value)
        elif name == "acks":
            value = -1 if str(value) == "all" else int(value)
        params[name] = value
    params.update(java_security_params(options))
    if "bootstrap_servers" not in params:
        raise ValueError('Option "kafka.bootstrap.servers" must be specified')
    params["bootstrap_servers"] = [s.strip() for s in str(params["bootstrap_servers"]).split(",")
                                   if s.strip()]
    return params


_JAAS_OPTION = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def java_security_params(options: Mapping[str, str]) -> dict:
    """The Java client's security options, as Spark users write them for ``format("kafka")``,
    in kafka-python's terms: ``kafka.sasl.jaas.config`` (PlainLoginModule or
    ScramLoginModule ``username``/``password``) and a PEM ``kafka.ssl.truststore.location``
    (``kafka.ssl.truststore.type=PEM``, Kafka 2.7+).  kafka-python's own keys
    (``kafka.sasl.plain.username``, ``kafka.ssl.cafile``...) still win."""
    lowered = {k.lower(): v for k, v in options.items()}
    params: dict = {}
    jaas = lowered.get("kafka.sasl.jaas.config")
    if jaas:
        found = {k: bytes(v, "utf-8").decode("unicode_escape") for k, v in _JAAS_OPTION.findall(jaas)}
        if "username" in found:
            params["sasl_plain_username"] = found["username"]
        if "password" in found:
            params["sasl_plain_password"] = found["password"]
    if str(lowered.get("kafka.ssl.truststore.type", "")).upper() == "PEM" and "kafka.ssl.truststore.location" in lowered:
        params["ssl_cafile"] = lowered["kafka.ssl.truststore.location"]
    own = {k[6:].replace(".", "_") for k in lowered if k.startswith("kafka.")}
    return {k: v for k, v in params.items() if k not in own}


def consumer_params(options: Mapping[str, str]) -> dict:
    return {**CONSUMER_DEFAULTS, **kafka_params(options, KafkaConsumer)}


# -- offsets in Spark's JSON shape ---------------------------------------------------------

def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict:
    """``{TopicPartition: n}`` → ``{"topic": {"0": n}}`` with sorted keys."""
    out: dict = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(data: Mapping | str) -> dict:
    """``{"topic": {"0": n}}`` (a dict or its JSON text) → ``{TopicPartition: n}``.
    Raises ValueError on anything else."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as e:
            raise ValueError(f"expected partition offsets as JSON, got {data!r}: {e}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {{\"topic\": {{\"partition\": offset}}}}, got {data!r}")
    out = {}
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            raise ValueError(f"expected {{\"partition\": offset}} for topic {topic!r}, got {parts!r}")
        for p, off in parts.items():
            out[TopicPartition(topic, int(p))] = int(off)
    return out


def assignment_from_json(text: str) -> list[TopicPartition]:
    """Spark's ``assign`` option: ``{"topicA": [0, 1], "topicB": [2]}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f'option "assign" must be JSON like {{"t":[0,1]}}: {e}') from None
    return sorted((TopicPartition(t, int(p)) for t, ps in data.items() for p in ps),
                  key=lambda t: (t.topic, t.partition))


class OffsetResolver:
    """Driver-side view of the topics: which partitions a subscription covers, and their
    earliest, latest and by-timestamp offsets (ListOffsets). Owns one KafkaConsumer that
    never joins a group or fetches. Not thread-safe; call ``close``."""

    def __init__(self, options: Mapping[str, str], strategy: tuple, timeout_ms: int = 30000):
        self.strategy = strategy
        self.timeout_ms = timeout_ms
        self.consumer = KafkaConsumer(**consumer_params(options))

    def close(self) -> None:
        self.consumer.close()

    def partitions(self) -> list[TopicPartition]:
        """The partitions of the subscription now (fresh Metadata; no auto-creation)."""
        kind, arg = self.strategy
        if kind == "assign":
            return list(arg)
        topics = self.consumer.topics()  # refreshes metadata for all topics
        if kind == "subscribe":
            wanted = [t for t in arg if t in topics]
        else:
            wanted = [t for t in topics if arg.fullmatch(t) and not t.startswith("__")]
        tps = [TopicPartition(t, p) for t in wanted
               for p in (self.consumer.partitions_for_topic(t) or ())]
        return sorted(tps, key=lambda t: (t.topic, t.partition))

    def earliest(self, tps) -> dict:
        return dict(self.consumer.beginning_offsets(list(tps), self.timeout_ms)) if tps else {}

    def latest(self, tps) -> dict:
        return dict(self.consumer.end_offsets(list(tps), self.timeout_ms)) if tps else {}

    def by_timestamp(self, timestamps: Mapping[TopicPartition, int]) -> dict:
        """``{tp: ts}`` → ``{tp: offset or None}``: the first offset whose timestamp is ≥ ts,
        None where ListOffsets answered -1 (no such record)."""
        if not timestamps:
            return {}
        found = self.consumer.offsets_for_times(dict(timestamps), self.timeout_ms)
        return {tp: (found[tp].offset if found.get(tp) is not None else None) for tp in timestamps}


def subscription_strategy(options: Mapping[str, str]) -> tuple:
    """Exactly one of Spark's ``subscribe``, ``subscribePattern``, ``assign``.
    Raises ValueError otherwise."""
    given = {k: options.get(k) for k in ("subscribe", "subscribepattern", "assign")
             if options.get(k) not in (None, "")}
    if len(given) != 1:
        raise ValueError('Exactly one of the options "subscribe", "subscribePattern" or '
                         f'"assign" must be specified, got {sorted(given) or "none"}')
    (kind, value), = given.items()
    if kind == "subscribe":
        topics = sorted({t.strip() for t in value.split(",") if t.strip()})
        if not topics:
            raise ValueError('option "subscribe" names no topic')
        return ("subscribe", topics)
    if kind == "subscribepattern":
        return ("pattern", re.compile(value))
    return ("assign", assignment_from_json(value))


# -- executor side -----------------------------------------------------------------------

_CONSUMERS: dict = {}  # one cached consumer per config in each (reused) Python worker


def _cached_consumer(params: dict) -> KafkaConsumer:
    key = json.dumps(params, sort_keys=True, default=str)
    consumer = _CONSUMERS.get(key)
    if consumer is None:
        consumer = _CONSUMERS[key] = KafkaConsumer(**params)
    return consumer


def _drop_consumer(params: dict) -> None:
    consumer = _CONSUMERS.pop(json.dumps(params, sort_keys=True, default=str), None)
    if consumer is not None:
        try:
            consumer.close()
        except Exception:  # a broken consumer is being thrown away anyway
            pass


def read_range(options: Mapping[str, str], tp: TopicPartition, from_offset: int,
               until_offset: int, fail_on_data_loss: bool, poll_timeout_ms: int,
               log=None) -> Iterator[list]:
    """Yield lists of kafka-python ConsumerRecords with ``from_offset <= offset <
    until_offset`` from one partition. Offsets absent from the log (compaction,
    transaction markers) are skipped; offsets deleted below the log start are data loss.

    Raises DataLossError (failOnDataLoss) or TimeoutError when no progress is made for
    ``poll_timeout_ms``. Bounded in time; safe to abandon midway.
    """
    params = consumer_params(options)
    consumer = _cached_consumer(params)
    try:
        yield from _read_range(consumer, tp, from_offset, until_offset, fail_on_data_loss,
                               poll_timeout_ms, log)
    except BaseException:
        _drop_consumer(params)  # its position/buffers are unknown now
        raise


def _read_range(consumer, tp, start, until, fail, poll_timeout_ms, log):
    consumer.assign([tp])
    earliest = consumer.beginning_offsets([tp], poll_timeout_ms)[tp]
    if start < earliest:
        data_loss(f"Cannot fetch offset {start} of {tp.topic}-{tp.partition}: the earliest "
                  f"available offset is {earliest}", fail, log)
        start = earliest
    if start >= until:
        return
    consumer.seek(tp, start)
    deadline = time.monotonic() + poll_timeout_ms / 1000
    while True:
        try:
            batches = consumer.poll(timeout_ms=min(500, poll_timeout_ms))
        except OffsetOutOfRangeError:
            # deleted while we were reading: skip to what is left
            earliest = consumer.beginning_offsets([tp], poll_timeout_ms)[tp]
            position = max(start, earliest)
            data_loss(f"Offsets of {tp.topic}-{tp.partition} below {earliest} were deleted "
                      "while being read", fail, log)
            if position >= until:
                return
            consumer.seek(tp, position)
            continue
        records = batches.get(tp, ())
        if records:
            deadline = time.monotonic() + poll_timeout_ms / 1000
            if records[-1].offset >= until:
                records = [r for r in records if r.offset < until]
            if records:
                yield records
        if consumer.position(tp) >= until:
            return
        if time.monotonic() > deadline:
            position = consumer.position(tp)
            latest = consumer.end_offsets([tp], poll_timeout_ms)[tp]
            if latest <= position:
                data_loss(f"{tp.topic}-{tp.partition} ends at {latest}, before the planned "
                          f"end offset {until}", fail, log)
                return
            raise TimeoutError(f"no records from {tp.topic}-{tp.partition} at offset "
                               f"{position} for {poll_timeout_ms} ms (until {until})")


def producer(options: Mapping[str, str]) -> KafkaProducer:
    """A KafkaProducer from Spark's ``kafka.*`` options (idempotent, acks=all by default)."""
    return KafkaProducer(**kafka_params(options, KafkaProducer))


__all__ = ["EARLIEST", "LATEST", "DataLossError", "KafkaError", "OffsetResolver",
           "TopicPartition", "assignment_from_json", "consumer_params", "data_loss",
           "kafka_params", "offsets_from_json", "offsets_to_json", "producer", "read_range",
           "subscription_strategy"]
