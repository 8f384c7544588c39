"""Topic-level configs: Kafka's keys, their broker synonyms, validation and alter semantics.

A topic override wins; without one the value comes from the broker, through
the first broker synonym that has a value (set by the user or defaulted),
scaled to the topic key's unit -- ``retention.ms`` <- ``log.retention.ms`` <-
``log.retention.minutes`` * 60000 <- ``log.retention.hours`` * 3600000.  This
is how Kafka derives a topic's defaults from ``KafkaConfig``.

Errors are ``KafkaApiError(INVALID_CONFIG)`` (unknown key, bad value) or
``KafkaApiError(INVALID_REQUEST)`` (malformed alter request), as Kafka's
KRaft controller answers them.
"""
from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any, Iterable, Mapping

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.config import LogConfig

from .broker_config import (
    BROKER_KEYS, BrokerConfig, ConfigError, ConfigType, Validator, at_least, between, format_value, invalid,
    one_of, parse_value, subset_of,
)

T = ConfigType
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs ``config_operation``."""
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclasses.dataclass(frozen=True)
class TopicKey:
    name: str
    type: ConfigType
    synonyms: tuple[tuple[str, int], ...]   # (broker key, multiplier to this key's unit), Kafka's order
    doc: str
    validator: Validator | None = None
    default: Any = None                     # only for keys without a broker synonym

    def parse(self, raw: str) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value


def _throttled_replicas(name: str, value: Any) -> None:
    # "*" or a list of partition:broker pairs, as Kafka's ThrottledReplicaListValidator
    if value is None or value == ("*",) or value == ():
        return
    for item in value:
        partition, sep, broker = item.partition(":")
        if not (sep and partition.strip().isdigit() and broker.strip().isdigit()):
            raise invalid(name, ",".join(value), "must be the literal '*' or a list of replicas in the "
                          "form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],...")


def _k(name: str, config_type: ConfigType, synonyms: Iterable[str | tuple[str, int]], doc: str,
       validator: Validator | None = None, default: Any = None) -> TopicKey:
    pairs = tuple(s if isinstance(s, tuple) else (s, 1) for s in synonyms)
    return TopicKey(name, config_type, pairs, doc, validator, default)


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Broker-side record validation (kwire.schemas): Confluent Server's (and Redpanda's) schema ID
# validation keys, and kwire's payload decoding and Python validators.  The subject name
# strategies by Confluent's class names; the short names are accepted too.
STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
SUBJECT_NAME_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
TOPIC_NAME_STRATEGY = STRATEGY_PACKAGE + "TopicNameStrategy"
# kwire.record.validator: "package.module:function" or the name of an entry point (group
# kwire.record_validators); whether it may be loaded is the broker's allow-list
# (kwire.record.validator.allowed.modules), checked by kwire.schemas.validators.
_VALIDATOR_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*|[\w.-]+")


def strategy_short_name(value: str) -> str | None:
    """The short name of a subject name strategy given by its short or Confluent class name,
    None when it is neither."""
    short = value[len(STRATEGY_PACKAGE):] if value.startswith(STRATEGY_PACKAGE) else value
    return short if short in SUBJECT_NAME_STRATEGIES else None


def _subject_name_strategy(name: str, value: Any) -> None:
    if value is not None and strategy_short_name(value) is None:
        names = ", ".join(STRATEGY_PACKAGE + s for s in SUBJECT_NAME_STRATEGIES)
        raise invalid(name, value, f"must be one of {names} (or the short class name)")


def _record_validator(name: str, value: Any) -> None:
    if value and not _VALIDATOR_SPEC.fullmatch(value):
        raise invalid(name, value, "must be empty, package.module:function, or the name of an entry point "
                      "in group kwire.record_validators")


TOPIC_KEYS: dict[str, TopicKey] = {k.name: k for k in [
    _k("cleanup.policy", T.LIST, ["log.cleanup.policy"],
       "The retention policy for old segments: delete, compact, or both.", subset_of("compact", "delete")),
    _k("compression.type", T.STRING, ["compression.type"],
       "Final compression type for the topic; producer keeps the producer's codec.", one_of(*_COMPRESSION)),
    _k("confluent.key.schema.validation", T.BOOLEAN, [],
       "Reject records whose key is not in Confluent's wire format with a schema id registered under "
       "the key's subject (a null key passes).", default=False),
    _k("confluent.key.subject.name.strategy", T.STRING, [],
       "How the key's subject is named: TopicNameStrategy (<topic>-key), RecordNameStrategy (the "
       "schema's record name) or TopicRecordNameStrategy (<topic>-<record name>).",
       _subject_name_strategy, default=TOPIC_NAME_STRATEGY),
    _k("confluent.value.schema.validation", T.BOOLEAN, [],
       "Reject records whose value is not in Confluent's wire format with a schema id registered under "
       "the value's subject (a null value, a tombstone, passes).", default=False),
    _k("confluent.value.subject.name.strategy", T.STRING, [],
       "How the value's subject is named: TopicNameStrategy (<topic>-value), RecordNameStrategy or "
       "TopicRecordNameStrategy.", _subject_name_strategy, default=TOPIC_NAME_STRATEGY),
    _k("delete.retention.ms", T.LONG, ["log.cleaner.delete.retention.ms"],
       "How long delete tombstones are retained on a compacted topic.", at_least(0)),
    _k("file.delete.delay.ms", T.LONG, ["log.segment.delete.delay.ms"],
       "Time to wait before deleting a file from the filesystem.", at_least(0)),
    _k("flush.messages", T.LONG, ["log.flush.interval.messages"],
       "Messages written to a partition between forced fsyncs.", at_least(1)),
    _k("flush.ms", T.LONG, ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
       "Time between forced fsyncs of a partition.", at_least(0)),
    _k("follower.replication.throttled.replicas", T.LIST, [],
       "Replicas whose follower replication is throttled.", _throttled_replicas, default=()),
    _k("index.interval.bytes", T.INT, ["log.index.interval.bytes"],
       "Bytes between entries of the offset index.", at_least(0)),
    _k("kwire.record.validator", T.STRING, [],
       "kwire-specific: a Python function (package.module:function, or an entry point of group "
       "kwire.record_validators) run on each produced record before the append; an exception rejects "
       "the record. Only modules of the broker's kwire.record.validator.allowed.modules may be named.",
       _record_validator, default=""),
    _k("kwire.record.validator.timeout.ms", T.INT, [],
       "kwire-specific: how long kwire.record.validator may take over one partition's records before "
       "they are rejected.", at_least(1), default=1000),
    _k("kwire.schema.validation.decode", T.BOOLEAN, [],
       "kwire-specific: with confluent.*.schema.validation, also decode the payload with its schema "
       "(false: Confluent's check of the framing and the schema id only).", default=True),
    _k("leader.replication.throttled.replicas", T.LIST, [],
       "Replicas whose leader replication is throttled.", _throttled_replicas, default=()),
    _k("max.compaction.lag.ms", T.LONG, ["log.cleaner.max.compaction.lag.ms"],
       "Maximum time a message remains ineligible for compaction.", at_least(1)),
    _k("max.message.bytes", T.INT, ["message.max.bytes"],
       "Largest record batch size allowed, after compression.", at_least(0)),
    _k("message.downconversion.enable", T.BOOLEAN, ["log.message.downconversion.enable"],
       "Whether fetches may down-convert messages to older formats."),
    _k("message.timestamp.after.max.ms", T.LONG, ["log.message.timestamp.after.max.ms"],
       "How far a message timestamp may lie ahead of the broker's clock.", at_least(0)),
    _k("message.timestamp.before.max.ms", T.LONG, ["log.message.timestamp.before.max.ms"],
       "How far a message timestamp may lie behind the broker's clock.", at_least(0)),
    _k("message.timestamp.difference.max.ms", T.LONG, ["log.message.timestamp.difference.max.ms"],
       "Deprecated: maximum difference between a message timestamp and the broker's clock.", at_least(0)),
    _k("message.timestamp.type", T.STRING, ["log.message.timestamp.type"],
       "CreateTime (the producer's timestamp) or LogAppendTime.", one_of("CreateTime", "LogAppendTime")),
    _k("min.cleanable.dirty.ratio", T.DOUBLE, ["log.cleaner.min.cleanable.ratio"],
       "Minimum ratio of dirty log to total log before the cleaner compacts it.", between(0, 1)),
    _k("min.compaction.lag.ms", T.LONG, ["log.cleaner.min.compaction.lag.ms"],
       "Minimum time a message remains uncompacted.", at_least(0)),
    _k("min.insync.replicas", T.INT, ["min.insync.replicas"],
       "Minimum in-sync replicas for a produce with acks=all.", at_least(1)),
    _k("preallocate", T.BOOLEAN, ["log.preallocate"], "Preallocate the file of a new segment."),
    _k("retention.bytes", T.LONG, ["log.retention.bytes"],
       "Maximum size of a partition before old segments are deleted; -1 means no limit."),
    _k("retention.ms", T.LONG, ["log.retention.ms", ("log.retention.minutes", _MINUTE_MS),
                                ("log.retention.hours", _HOUR_MS)],
       "Maximum time a segment is kept before it is deleted; -1 means no time limit.", at_least(-1)),
    _k("segment.bytes", T.INT, ["log.segment.bytes"], "Segment file size.", at_least(14)),
    _k("segment.index.bytes", T.INT, ["log.index.size.max.bytes"],
       "Size of the index that maps offsets to file positions.", at_least(4)),
    _k("segment.jitter.ms", T.LONG, ["log.roll.jitter.ms", ("log.roll.jitter.hours", _HOUR_MS)],
       "Maximum random jitter subtracted from segment.ms.", at_least(0)),
    _k("segment.ms", T.LONG, ["log.roll.ms", ("log.roll.hours", _HOUR_MS)],
       "Time after which a segment is rolled even if it is not full.", at_least(1)),
    _k("unclean.leader.election.enable", T.BOOLEAN, ["unclean.leader.election.enable"],
       "Whether an out-of-sync replica may become leader."),
]}

assert all(s in BROKER_KEYS for key in TOPIC_KEYS.values() for s, _ in key.synonyms)


def _config_error(exc: ConfigError) -> KafkaApiError:
    return KafkaApiError(ErrorCode.INVALID_CONFIG, str(exc))


def _unknown(name: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic overrides (CreateTopics / AlterConfigs) and return them in Kafka's canonical text.

    Raises KafkaApiError(INVALID_CONFIG) for an unknown key, a null value, a
    value of the wrong type or out of range, or min.compaction.lag.ms above
    max.compaction.lag.ms.
    """
    nulls = sorted(name for name, value in configs.items() if value is None)
    if nulls:
        raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                            f"Null value not supported for topic configs: {','.join(nulls)}")
    result: dict[str, str] = {}
    typed: dict[str, Any] = {}
    for name, raw in configs.items():
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise _unknown(name)
        try:
            typed[name] = key.parse(raw)
        except ConfigError as exc:
            raise _config_error(exc) from None
        result[name] = format_value(key.type, typed[name])
    low, high = typed.get("min.compaction.lag.ms"), typed.get("max.compaction.lag.ms")
    if low is not None and high is not None and low > high:
        raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                            f"max.compaction.lag.ms ({high})")
    return result


def broker_default(broker: BrokerConfig, name: str) -> tuple[Any, str | None]:
    """The value topic key ``name`` gets from the broker, and which broker key supplied it.

    The broker key is None for keys without a broker synonym.  KeyError if ``name`` is unknown.
    """
    key = TOPIC_KEYS[name]
    for synonym, scale in key.synonyms:
        value = broker.value_of(synonym)
        if value is not None:
            if scale != 1:
                value = value * scale
            if name == "retention.ms" and value < 0:
                value = -1     # Kafka: any negative broker retention means unlimited
            return value, synonym
    return key.default, None


def topic_value(broker: BrokerConfig, overrides: Mapping[str, str], name: str) -> Any:
    """The typed effective value of topic key ``name``: override, else the broker's.

    Raises KafkaApiError(INVALID_CONFIG) if the stored override is invalid.
    """
    if name in overrides:
        try:
            return TOPIC_KEYS[name].parse(overrides[name])
        except ConfigError as exc:
            raise _config_error(exc) from None
    return broker_default(broker, name)[0]


def effective_log_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The LogConfig a topic's partitions run with: its overrides over the broker's defaults.

    Unknown override keys are ignored here (they were refused when set);
    raises KafkaApiError(INVALID_CONFIG) for an invalid stored value.
    """
    def get(name: str) -> Any:
        return topic_value(broker, overrides, name)
    return LogConfig(
        segment_bytes=get("segment.bytes"),
        segment_ms=get("segment.ms"),
        retention_ms=get("retention.ms"),
        retention_bytes=get("retention.bytes"),
        flush_interval_messages=get("flush.messages"),
        flush_interval_ms=get("flush.ms"),
        index_interval_bytes=get("index.interval.bytes"),
        max_message_bytes=get("max.message.bytes"),
        message_timestamp_type=get("message.timestamp.type"),
        cleanup_policy=",".join(get("cleanup.policy")),
        # As Kafka's LogConfig: an unset (Long.MAX) before/after falls back to the deprecated
        # message.timestamp.difference.max.ms.
        message_timestamp_before_max_ms=_or_difference(get, "message.timestamp.before.max.ms"),
        message_timestamp_after_max_ms=_or_difference(get, "message.timestamp.after.max.ms"),
        min_insync_replicas=get("min.insync.replicas"),
        writeback_interval_bytes=broker.values.get("log.writeback.interval.bytes", LogConfig.writeback_interval_bytes),
        page_cache_keep_bytes=broker.values.get("log.page.cache.keep.bytes", LogConfig.page_cache_keep_bytes),
        delete_retention_ms=get("delete.retention.ms"),
        min_cleanable_dirty_ratio=get("min.cleanable.dirty.ratio"),
        min_compaction_lag_ms=get("min.compaction.lag.ms"),
        max_compaction_lag_ms=get("max.compaction.lag.ms"),
        producer_id_expiration_ms=broker.value_of("producer.id.expiration.ms"),
    )


def _or_difference(get, name: str) -> int:
    value = get(name)
    return get("message.timestamp.difference.max.ms") if value == 2**63 - 1 else value


_OPS = frozenset(int(op) for op in AlterOp)


def apply_incremental(current: Mapping[str, str],
                      ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs on a topic's overrides; returns the new, validated overrides.

    ``ops`` are ``(name, op, value)`` with op SET=0, DELETE=1, APPEND=2, SUBTRACT=3.
    APPEND/SUBTRACT work on list keys, starting from the current override or
    the key's static default (as Kafka's controller does), and APPEND skips
    values already present.  ``current`` is not modified.

    Raises KafkaApiError(INVALID_REQUEST) for a repeated key, an unknown op or
    a null value with an op other than DELETE; KafkaApiError(INVALID_CONFIG)
    for an unknown key, APPEND/SUBTRACT on a non-list key, or an invalid result.
    """
    ops = check_alter_ops(ops)
    result = dict(current)
    for name, op, value in ops:
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise _unknown(name)
        op = AlterOp(op)
        if op is AlterOp.SET:
            result[name] = value
        elif op is AlterOp.DELETE:
            result.pop(name, None)
        else:
            if key.type is not ConfigType.LIST:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    f"Can't {op.name} to key {name} because its type is not LIST.")
            result[name] = list_op(result.get(name, _static_default(key)), op, value)
    return validate_topic_configs(result)


def check_alter_ops(ops: Iterable[tuple[str, int, str | None]]) -> list[tuple[str, int, str | None]]:
    """IncrementalAlterConfigs operations ``(name, op, value)`` as a list, checked as Kafka does
    before looking at any key: KafkaApiError(INVALID_REQUEST) for a repeated key, an unknown op
    or a null value with an op other than DELETE."""
    ops = list(ops)
    seen: set[str] = set()
    for name, op, value in ops:
        if name in seen:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        seen.add(name)
        if op not in _OPS:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op} for {name}")
        if value is None and op != AlterOp.DELETE:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    return ops


def _static_default(key: TopicKey) -> str:
    # Kafka's topic ConfigDef default, not the broker's: what the controller starts APPEND from.
    if key.synonyms:
        return format_value(key.type, BROKER_KEYS[key.synonyms[-1][0]].default) or ""
    return format_value(key.type, key.default) or ""


def list_op(current: str, op: AlterOp, value: str) -> str:
    """APPEND (skipping items already there) or SUBTRACT the comma-separated ``value``."""
    parts = [p for p in current.split(",") if p]
    for item in value.split(","):
        if op is AlterOp.APPEND and item not in parts:
            parts.append(item)
        elif op is AlterOp.SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)
