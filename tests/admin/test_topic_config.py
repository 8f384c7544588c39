"""Topic config validation, the effective LogConfig, and IncrementalAlterConfigs semantics."""
from __future__ import annotations

import dataclasses

import pytest

from kwire.admin.broker_config import BROKER_KEYS, ConfigError, ConfigType, broker_config_from_text
from kwire.admin.topic_config import (
    TOPIC_KEYS, AlterOp, apply_incremental, broker_default, effective_log_config, validate_topic_configs,
)
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.config import LogConfig

DEFAULTS = broker_config_from_text("")


def _error(fn, *args) -> KafkaApiError:
    with pytest.raises(KafkaApiError) as info:
        fn(*args)
    return info.value


# -- validation --------------------------------------------------------------------------------

def test_valid_configs_come_back_canonical():
    assert validate_topic_configs({
        "cleanup.policy": "compact, delete", "retention.ms": " 1000 ", "preallocate": "TRUE",
        "min.cleanable.dirty.ratio": "0.50", "compression.type": "zstd", "retention.bytes": "-1",
        "leader.replication.throttled.replicas": "0:1, 1:1",
    }) == {
        "cleanup.policy": "compact,delete", "retention.ms": "1000", "preallocate": "true",
        "min.cleanable.dirty.ratio": "0.5", "compression.type": "zstd", "retention.bytes": "-1",
        "leader.replication.throttled.replicas": "0:1,1:1",
    }


def test_empty_is_valid():
    assert validate_topic_configs({}) == {}


def test_unknown_topic_config_is_invalid_config():
    err = _error(validate_topic_configs, {"retention.ms": "1", "log.retention.ms": "5"})
    assert err.code == ErrorCode.INVALID_CONFIG
    assert err.message == "Unknown topic config name: log.retention.ms"


def test_null_value_is_invalid_config():
    err = _error(validate_topic_configs, {"retention.ms": None})
    assert err.code == ErrorCode.INVALID_CONFIG and "retention.ms" in err.message


@pytest.mark.parametrize("name, value, fragment", [
    ("retention.ms", "-2", "at least -1"),
    ("retention.ms", "soon", "LONG"),
    ("segment.bytes", "10", "at least 14"),
    ("segment.ms", "0", "at least 1"),
    ("max.message.bytes", "-5", "at least 0"),
    ("cleanup.policy", "archive", "compact, delete"),
    ("compression.type", "brotli", "gzip"),
    ("message.timestamp.type", "AppendTime", "CreateTime, LogAppendTime"),
    ("min.cleanable.dirty.ratio", "2", "no more than 1"),
    ("unclean.leader.election.enable", "maybe", "true or false"),
    ("min.insync.replicas", "0", "at least 1"),
    ("flush.messages", "0", "at least 1"),
    ("follower.replication.throttled.replicas", "all", "PartitionId"),
])
def test_bad_values_are_invalid_config_naming_key_and_value(name, value, fragment):
    err = _error(validate_topic_configs, {name: value})
    assert err.code == ErrorCode.INVALID_CONFIG
    assert name in err.message and value in err.message and fragment in err.message


def test_compaction_lag_conflict():
    err = _error(validate_topic_configs, {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert err.code == ErrorCode.INVALID_CONFIG and "min.compaction.lag.ms" in err.message


def test_every_topic_key_synonym_is_a_broker_key_with_the_same_kind_of_type():
    for key in TOPIC_KEYS.values():
        for synonym, _ in key.synonyms:
            assert BROKER_KEYS[synonym].type in (key.type, ConfigType.INT, ConfigType.LONG, ConfigType.SHORT)


# -- defaults from the broker --------------------------------------------------------------------

def test_topic_defaults_match_kafka():
    expected = {
        "cleanup.policy": ("delete",), "compression.type": "producer", "delete.retention.ms": 86400000,
        "file.delete.delay.ms": 60000, "flush.messages": 9223372036854775807,
        "flush.ms": 9223372036854775807, "index.interval.bytes": 4096,
        "max.compaction.lag.ms": 9223372036854775807, "max.message.bytes": 1048588,
        "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": 0.5,
        "min.compaction.lag.ms": 0, "min.insync.replicas": 1, "preallocate": False,
        "retention.bytes": -1, "retention.ms": 604800000, "segment.bytes": 1073741824,
        "segment.index.bytes": 10485760, "segment.jitter.ms": 0, "segment.ms": 604800000,
        "unclean.leader.election.enable": False, "leader.replication.throttled.replicas": (),
    }
    for name, value in expected.items():
        assert broker_default(DEFAULTS, name)[0] == value, name


def test_broker_synonyms_feed_topic_defaults_with_units():
    b = broker_config_from_text("log.retention.minutes=3\nlog.roll.hours=2\nlog.roll.jitter.hours=1\n"
                                "message.max.bytes=2000")
    assert broker_default(b, "retention.ms") == (180000, "log.retention.minutes")
    assert broker_default(b, "segment.ms") == (7200000, "log.roll.hours")
    assert broker_default(b, "segment.jitter.ms") == (3600000, "log.roll.jitter.hours")
    assert broker_default(b, "max.message.bytes") == (2000, "message.max.bytes")
    assert broker_default(broker_config_from_text("log.retention.hours=-1"), "retention.ms")[0] == -1


def test_effective_log_config_without_overrides_is_the_broker_log_config():
    b = broker_config_from_text("log.retention.minutes=3\nlog.segment.bytes=4096\nlog.cleanup.policy=compact")
    assert effective_log_config(b, {}) == dataclasses.replace(
        LogConfig(), retention_ms=180000, segment_bytes=4096, cleanup_policy="compact")
    assert effective_log_config(DEFAULTS, {}) == LogConfig()


def test_page_cache_hints_are_broker_settings_that_no_topic_overrides():
    b = broker_config_from_text("log.writeback.interval.bytes=0\nlog.page.cache.keep.bytes=-1")
    assert effective_log_config(b, {}) == dataclasses.replace(
        LogConfig(), writeback_interval_bytes=0, page_cache_keep_bytes=-1)
    assert (LogConfig().writeback_interval_bytes, LogConfig().page_cache_keep_bytes) == (8 << 20, 64 << 20)
    for bad in ("log.writeback.interval.bytes=-1", "log.page.cache.keep.bytes=-2",
                "log.writeback.interval.bytes=lots"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            broker_config_from_text(bad)


def test_effective_log_config_overrides_win():
    b = broker_config_from_text("log.retention.hours=1\nmessage.max.bytes=500")
    config = effective_log_config(b, {
        "retention.ms": "-1", "segment.bytes": "2048", "segment.ms": "100", "retention.bytes": "10",
        "flush.messages": "1", "flush.ms": "50", "index.interval.bytes": "10",
        "message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact,delete",
        "compression.type": "gzip",
    })
    assert config == LogConfig(segment_bytes=2048, segment_ms=100, retention_ms=-1, retention_bytes=10,
                               flush_interval_messages=1, flush_interval_ms=50, index_interval_bytes=10,
                               max_message_bytes=500, message_timestamp_type="LogAppendTime",
                               cleanup_policy="compact,delete")


# -- IncrementalAlterConfigs -------------------------------------------------------------------

def test_set_and_delete():
    current = {"retention.ms": "100", "segment.ms": "5"}
    result = apply_incremental(current, [("retention.ms", AlterOp.SET, "200"), ("segment.ms", 1, None),
                                         ("max.message.bytes", 0, "1000")])
    assert result == {"retention.ms": "200", "max.message.bytes": "1000"}
    assert current == {"retention.ms": "100", "segment.ms": "5"}


def test_delete_of_absent_key_is_fine():
    assert apply_incremental({}, [("retention.ms", AlterOp.DELETE, None)]) == {}


def test_append_starts_from_the_static_default_and_skips_duplicates():
    assert apply_incremental({}, [("cleanup.policy", AlterOp.APPEND, "compact")]) == {
        "cleanup.policy": "delete,compact"}
    assert apply_incremental({"cleanup.policy": "compact"},
                             [("cleanup.policy", AlterOp.APPEND, "compact,delete")]) == {
        "cleanup.policy": "compact,delete"}
    assert apply_incremental({}, [("leader.replication.throttled.replicas", AlterOp.APPEND, "0:1")]) == {
        "leader.replication.throttled.replicas": "0:1"}


def test_subtract():
    assert apply_incremental({"cleanup.policy": "compact,delete"},
                             [("cleanup.policy", AlterOp.SUBTRACT, "delete")]) == {"cleanup.policy": "compact"}
    assert apply_incremental({"leader.replication.throttled.replicas": "0:1,1:1"},
                             [("leader.replication.throttled.replicas", AlterOp.SUBTRACT, "0:1,7:7")]) == {
        "leader.replication.throttled.replicas": "1:1"}


def test_subtract_to_empty_cleanup_policy_is_invalid_config():
    err = _error(apply_incremental, {"cleanup.policy": "delete"}, [("cleanup.policy", AlterOp.SUBTRACT, "delete")])
    assert err.code == ErrorCode.INVALID_CONFIG and "cleanup.policy" in err.message


@pytest.mark.parametrize("op", [AlterOp.APPEND, AlterOp.SUBTRACT])
def test_append_or_subtract_on_non_list_is_invalid_config(op):
    err = _error(apply_incremental, {}, [("retention.ms", op, "5")])
    assert err.code == ErrorCode.INVALID_CONFIG
    assert err.message == f"Can't {op.name} to key retention.ms because its type is not LIST."


@pytest.mark.parametrize("ops, code, fragment", [
    ([("retention.ms", 0, "1"), ("retention.ms", 1, None)], ErrorCode.INVALID_REQUEST, "duplicate"),
    ([("retention.ms", 7, "1")], ErrorCode.INVALID_REQUEST, "Unknown alter config operation"),
    ([("retention.ms", 0, None)], ErrorCode.INVALID_REQUEST, "Null value"),
    ([("no.such.key", 0, "1")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.key"),
    ([("no.such.key", 1, None)], ErrorCode.INVALID_CONFIG, "Unknown topic config name"),
    ([("retention.ms", 0, "forever")], ErrorCode.INVALID_CONFIG, "retention.ms"),
])
def test_alter_errors(ops, code, fragment):
    err = _error(apply_incremental, {}, ops)
    assert err.code == code and fragment in err.message
