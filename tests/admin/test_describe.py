"""DescribeConfigs entries: values, sources, synonyms in Kafka's order, read-only and sensitive flags."""
from __future__ import annotations

from kwire.admin.broker_config import BROKER_KEYS, broker_config_from_text
from kwire.admin.describe import ConfigSource, ConfigSynonym, describe_broker, describe_topic
from kwire.admin.dynamic_config import DYNAMIC_KEYS, with_dynamic
from kwire.admin.topic_config import TOPIC_KEYS

TOPIC, STATIC, DEFAULT = (int(ConfigSource.DYNAMIC_TOPIC_CONFIG), int(ConfigSource.STATIC_BROKER_CONFIG),
                          int(ConfigSource.DEFAULT_CONFIG))


def _by_name(entries):
    return {e.name: e for e in entries}


def test_topic_describe_all_keys_defaults():
    entries = _by_name(describe_topic(broker_config_from_text(""), {}, None, False, False))
    assert set(entries) == set(TOPIC_KEYS)
    e = entries["retention.ms"]
    assert (e.value, e.source, e.is_default, e.read_only, e.is_sensitive) == ("604800000", DEFAULT, True,
                                                                                False, False)
    assert e.config_type == 5 and e.synonyms == [] and e.documentation is None
    assert entries["flush.messages"].value == "9223372036854775807"
    assert entries["preallocate"].value == "false" and entries["preallocate"].config_type == 1
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].config_type == 7
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    assert entries["leader.replication.throttled.replicas"].value == ""


def test_topic_value_sources_override_static_default():
    broker = broker_config_from_text("log.retention.minutes=10\nlog.retention.hours=2\n")
    entries = _by_name(describe_topic(broker, {"retention.ms": "5000"}, ["retention.ms", "segment.ms"],
                                      True, True))
    e = entries["retention.ms"]
    assert (e.value, e.source, e.is_default) == ("5000", TOPIC, False)
    assert e.synonyms == [
        ConfigSynonym("retention.ms", "5000", TOPIC),
        ConfigSynonym("log.retention.minutes", "10", STATIC),
        ConfigSynonym("log.retention.hours", "2", STATIC),
        ConfigSynonym("log.retention.hours", "168", DEFAULT),
    ]
    assert e.documentation and "deleted" in e.documentation
    e = entries["segment.ms"]
    assert (e.value, e.source) == ("604800000", DEFAULT)
    assert e.synonyms == [ConfigSynonym("log.roll.hours", "168", DEFAULT)]

    e = describe_topic(broker, {}, ["retention.ms"], True, False)[0]
    assert (e.value, e.source) == ("600000", STATIC)


def test_topic_describe_unknown_keys_are_omitted_and_order_is_stable():
    entries = describe_topic(broker_config_from_text(""), {}, ["segment.ms", "nope", "cleanup.policy"],
                             False, False)
    assert [e.name for e in entries] == ["cleanup.policy", "segment.ms"]


def test_topic_synonyms_hidden_unless_asked():
    e = describe_topic(broker_config_from_text(""), {"segment.ms": "9"}, ["segment.ms"], False, False)[0]
    assert e.source == TOPIC and e.synonyms == []


def test_broker_describe_read_only_and_sources():
    broker = broker_config_from_text("num.partitions=3\nlog.retention.minutes=10\n")
    entries = _by_name(describe_broker(broker, None, True, False))
    assert set(BROKER_KEYS) <= set(entries)
    # read-only unless the key can change at runtime (dynamic broker configs)
    assert all(e.read_only == (name not in DYNAMIC_KEYS) for name, e in entries.items())
    assert entries["num.partitions"].read_only and not entries["log.retention.minutes"].read_only
    e = entries["num.partitions"]
    assert (e.value, e.source, e.config_type) == ("3", STATIC, 3)
    assert e.synonyms == [ConfigSynonym("num.partitions", "3", STATIC), ConfigSynonym("num.partitions", "1", DEFAULT)]
    e = entries["log.retention.ms"]                 # unset, null default: Kafka prints null
    assert (e.value, e.source, e.synonyms) == (None, DEFAULT, [])
    e = entries["log.retention.minutes"]
    assert (e.value, e.source) == ("10", STATIC)
    assert e.synonyms == [ConfigSynonym("log.retention.minutes", "10", STATIC),
                          ConfigSynonym("log.retention.hours", "168", DEFAULT)]
    e = entries["log.retention.hours"]
    assert (e.value, e.source) == ("168", DEFAULT)
    assert e.synonyms == [ConfigSynonym("log.retention.hours", "168", DEFAULT)]
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["log.flush.interval.messages"].value == "9223372036854775807"
    assert entries["node.id"].value == "1"


def test_broker_sensitive_and_unknown_keys_hide_values():
    broker = broker_config_from_text("ssl.keystore.password=hunter2\nmy.custom.key=abc\n")
    entries = _by_name(describe_broker(broker, ["ssl.keystore.password", "my.custom.key", "nope"], True, True))
    assert set(entries) == {"ssl.keystore.password", "my.custom.key"}
    e = entries["ssl.keystore.password"]
    assert (e.value, e.is_sensitive, e.config_type, e.source) == (None, True, 9, STATIC)
    assert all(s.value is None for s in e.synonyms)
    e = entries["my.custom.key"]
    assert (e.value, e.is_sensitive, e.config_type) == (None, True, 0)
    assert "hunter2" not in repr(entries) and "abc" not in repr(entries)


def test_broker_describe_cluster_default_resource_lists_only_its_dynamic_configs():
    broker = broker_config_from_text("num.partitions=3\n")
    assert describe_broker(broker, None, True, False, per_broker=False) == []
    broker = with_dynamic(broker, {"log.retention.ms": "5000"}, {"log.retention.hours": "2"})
    [e] = describe_broker(broker, None, True, False, per_broker=False)
    dynamic_default = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (e.name, e.value, e.source, e.read_only) == ("log.retention.ms", "5000", dynamic_default, False)
    assert e.synonyms == [ConfigSynonym("log.retention.ms", "5000", dynamic_default)]
    # this broker's entry: its own dynamic hours, the default's ms, both above the static layer
    entries = _by_name(describe_broker(broker, ["log.retention.ms", "log.retention.hours"], True, False))
    assert entries["log.retention.ms"].source == dynamic_default
    assert entries["log.retention.hours"].synonyms[:1] == [
        ConfigSynonym("log.retention.hours", "2", int(ConfigSource.DYNAMIC_BROKER_CONFIG))]
    assert broker.log_retention_ms == 5000          # ms over hours, whichever layer set them


def test_broker_documentation_only_when_asked():
    broker = broker_config_from_text("")
    assert describe_broker(broker, ["num.partitions"], False, False)[0].documentation is None
    assert describe_broker(broker, ["num.partitions"], False, True)[0].documentation
