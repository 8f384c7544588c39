"""Dynamic broker configs, sans-I/O: which keys may change, the checks of an alter, and the
layers in force (this broker over the cluster default over server.properties)."""
from __future__ import annotations

import pytest

from kwire.admin.broker_config import broker_config_from_text
from kwire.admin.dynamic_config import DYNAMIC_KEYS, apply_incremental, validate_update, with_dynamic
from kwire.codecs.errors import ErrorCode, KafkaApiError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def test_the_broker_defaults_of_topic_configs_and_max_connections_may_change():
    assert {"log.retention.ms", "log.retention.hours", "log.segment.bytes", "message.max.bytes",
            "min.insync.replicas", "log.cleanup.policy", "log.cleaner.delete.retention.ms",
            "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second", "max.connections"} <= DYNAMIC_KEYS
    assert not {"log.dirs", "listeners", "broker.id", "zookeeper.connect", "num.partitions"} & DYNAMIC_KEYS


@pytest.mark.parametrize("configs, code, words", [
    ({"log.dirs": "/x", "broker.id": "2"}, ErrorCode.INVALID_REQUEST,
     "Cannot update these configs dynamically: Set(broker.id, log.dirs)"),
    ({"no.such.key": "1"}, ErrorCode.INVALID_CONFIG, "no.such.key"),
    ({"message.max.bytes": "-5"}, ErrorCode.INVALID_CONFIG, "message.max.bytes"),
    ({"message.max.bytes": None}, ErrorCode.INVALID_REQUEST, "Null value"),
])
def test_an_alter_is_refused_whole(configs, code, words):
    with pytest.raises(KafkaApiError) as excinfo:
        validate_update(configs)
    assert excinfo.value.code == code and words in excinfo.value.message


def test_incremental_operations_on_one_entity():
    current = {"log.retention.ms": "1000"}
    assert apply_incremental(current, [("log.retention.ms", DELETE, None), ("message.max.bytes", SET, "2000")]) == \
        {"message.max.bytes": "2000"}
    assert apply_incremental({}, [("log.cleanup.policy", APPEND, "compact")]) == {"log.cleanup.policy": "delete,compact"}
    assert apply_incremental({"log.cleanup.policy": "delete,compact"},
                             [("log.cleanup.policy", SUBTRACT, "delete")]) == {"log.cleanup.policy": "compact"}
    for ops, code in [([("message.max.bytes", APPEND, "1")], ErrorCode.INVALID_CONFIG),
                      ([("message.max.bytes", SET, "1"), ("message.max.bytes", SET, "2")], ErrorCode.INVALID_REQUEST)]:
        with pytest.raises(KafkaApiError) as excinfo:
            apply_incremental({}, ops)
        assert excinfo.value.code == code


def test_this_broker_over_the_default_over_the_file_and_a_bad_stored_value_is_skipped():
    static = broker_config_from_text("message.max.bytes=5000\nlog.retention.hours=10\nnum.partitions=4\n")
    config = with_dynamic(static, {"message.max.bytes": "3000", "log.retention.ms": "60000"},
                          {"message.max.bytes": "2000", "log.retention.minutes": "oops", "log.dirs": "/x"})
    assert config.value_of("message.max.bytes") == 2000
    assert config.log_retention_ms == 60000              # ms over the file's hours
    assert config.num_partitions == 4 and config.log_dirs == static.log_dirs
    assert dict(config.dynamic_broker) == {"message.max.bytes": "2000"}
    assert with_dynamic(config, {}, {}).value_of("message.max.bytes") == 5000      # back to the file
