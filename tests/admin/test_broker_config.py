"""server.properties parsing, precedence, validation and the LogConfig a broker hands to topics."""
from __future__ import annotations

import pytest

from kwire.admin.broker_config import (
    BrokerConfig, ConfigError, Listener, broker_config_from_text, load_broker_config, parse_overrides,
    parse_properties,
)
from kwire.admin.topic_config import effective_log_config
from kwire.log.config import LogConfig

LONG_MAX = 9223372036854775807


# -- java.util.Properties syntax ---------------------------------------------------------------

def test_properties_separators_comments_and_whitespace():
    text = (
        "# a comment\n"
        "! another comment\n"
        "   # indented comment\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d  =  4  \n"
        "e:=5\n"
        "f\n"
        "g=\n"
        "h = x=y:z\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4  ", "e": "=5", "f": "", "g": "", "h": "x=y:z",
    }


def test_properties_line_continuations():
    text = "log.dirs=/a,\\\n      /b,\\\n\t/c\nnext=1\n"
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "next": "1"}


def test_properties_even_backslashes_do_not_continue():
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}


def test_properties_continuation_of_comment_does_not_continue():
    assert parse_properties("# comment \\\nkey=value") == {"key": "value"}


def test_properties_continuation_line_starting_with_hash_is_not_a_comment():
    assert parse_properties("a=1,\\\n  #2") == {"a": "1,#2"}


def test_properties_escapes_and_crlf():
    text = "key\\ with\\=odd\\:chars = v\\tw\\u0041\r\nother=1\rlast=2"
    assert parse_properties(text) == {"key with=odd:chars": "v\twA", "other": "1", "last": "2"}


def test_properties_duplicate_key_last_wins():
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_properties_malformed_unicode_escape():
    with pytest.raises(ConfigError, match="uXXXX"):
        parse_properties("a=\\u12")


def test_properties_trailing_backslash_at_end_of_file():
    assert parse_properties("a=1\\") == {"a": "1"}


def test_parse_overrides():
    assert parse_overrides(["a=1", "b=x=y", "a=3"]) == {"a": "3", "b": "x=y"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["novalue"])


# -- defaults ----------------------------------------------------------------------------------

def test_defaults():
    c = broker_config_from_text("")
    assert c.node_id == 1
    assert c.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert (c.listen_host, c.listen_port, c.advertised_host, c.advertised_port) == ("127.0.0.1", 9092,
                                                                                    "127.0.0.1", 9092)
    assert c.log_dirs == ("./kwire-data",)
    assert c.num_partitions == 1 and c.default_replication_factor == 1
    assert c.auto_create_topics_enable is True and c.delete_topic_enable is True
    assert c.log_retention_ms == 168 * 3600 * 1000
    assert c.log_roll_ms == 168 * 3600 * 1000
    assert c.log_flush_interval_ms == LONG_MAX and c.log_flush_interval_messages == LONG_MAX
    assert c.message_max_bytes == 1048588 and c.socket_request_max_bytes == 104857600
    assert c.max_connections == 2147483647
    assert c.offsets_topic_num_partitions == 50 and c.offsets_retention_ms == 10080 * 60000
    assert c.cluster_id is None
    assert c.warnings == () and c.notes == ()


def test_log_config_defaults_match_log_layer_defaults():
    assert effective_log_config(broker_config_from_text(""), {}) == LogConfig()


def test_log_config_from_broker_keys():
    c = broker_config_from_text(
        "log.segment.bytes=1024\nlog.roll.hours=1\nlog.retention.bytes=5000\nlog.flush.interval.messages=10\n"
        "log.flush.scheduler.interval.ms=2000\nlog.index.interval.bytes=100\nmessage.max.bytes=500\n"
        "log.message.timestamp.type=LogAppendTime\nlog.cleanup.policy=compact, delete\n")
    assert effective_log_config(c, {}) == LogConfig(segment_bytes=1024, segment_ms=3600000, retention_ms=604800000,
                                       retention_bytes=5000, flush_interval_messages=10,
                                       flush_interval_ms=2000, index_interval_bytes=100,
                                       max_message_bytes=500, message_timestamp_type="LogAppendTime",
                                       cleanup_policy="compact,delete")


# -- precedence --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("log.retention.hours=1", 3600000),
    ("log.retention.minutes=2\nlog.retention.hours=1", 120000),
    ("log.retention.ms=5\nlog.retention.minutes=2\nlog.retention.hours=1", 5),
    ("log.retention.hours=-1", -1),
    ("log.retention.minutes=-5", -1),
    ("log.retention.ms=-1\nlog.retention.hours=1", -1),
])
def test_retention_precedence(text, expected):
    assert broker_config_from_text(text).log_retention_ms == expected


def test_roll_and_flush_precedence():
    c = broker_config_from_text("log.roll.ms=10\nlog.roll.hours=2\nlog.flush.interval.ms=7\n"
                                "log.flush.scheduler.interval.ms=9")
    assert (c.log_roll_ms, c.log_flush_interval_ms) == (10, 7)
    c = broker_config_from_text("log.roll.hours=2\nlog.flush.scheduler.interval.ms=9")
    assert (c.log_roll_ms, c.log_flush_interval_ms) == (7200000, 9)


def test_log_dirs_wins_over_log_dir():
    assert broker_config_from_text("log.dir=/one\nlog.dirs=/a, /b").log_dirs == ("/a", "/b")
    assert broker_config_from_text("log.dir=/one").log_dirs == ("/one",)


def test_node_id_and_broker_id_are_synonyms():
    assert broker_config_from_text("broker.id=4").node_id == 4
    assert broker_config_from_text("node.id=5").node_id == 5
    assert broker_config_from_text("node.id=5\nbroker.id=5").node_id == 5
    with pytest.raises(ConfigError, match="broker.id"):
        broker_config_from_text("node.id=5\nbroker.id=6")


def test_overrides_win_over_file():
    c = broker_config_from_text("num.partitions=3\nnode.id=2", {"num.partitions": "7"})
    assert (c.num_partitions, c.node_id) == (7, 2)
    assert c.originals["num.partitions"] == "7"


def test_load_broker_config_reads_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=4\nlog.dirs=" + str(tmp_path / "data") + "\n")
    c = load_broker_config(str(path), {"auto.create.topics.enable": "false"})
    assert c.num_partitions == 4 and c.log_dirs == (str(tmp_path / "data"),)
    assert c.auto_create_topics_enable is False
    assert load_broker_config(None).num_partitions == 1
    with pytest.raises(OSError):
        load_broker_config(str(tmp_path / "missing.properties"))


# -- types and validation ----------------------------------------------------------------------

def test_values_are_trimmed_and_booleans_case_insensitive():
    c = broker_config_from_text("num.partitions =  3  \nauto.create.topics.enable = FALSE ")
    assert c.num_partitions == 3 and c.auto_create_topics_enable is False


@pytest.mark.parametrize("key, value, fragment", [
    ("num.partitions", "0", "at least 1"),
    ("num.partitions", "abc", "INT"),
    ("num.partitions", "2147483648", "INT"),
    ("num.partitions", "1_000", "INT"),
    ("message.max.bytes", "-1", "at least 0"),
    ("log.segment.bytes", "13", "at least 14"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("log.message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
    ("log.cleanup.policy", "delete,archive", "compact, delete"),
    ("log.cleanup.policy", "", "Empty list"),
    ("log.retention.check.interval.ms", "0", "at least 1"),
    ("log.flush.interval.messages", "9223372036854775808", "LONG"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "no more than 1"),
    ("compression.type", "brotli", "producer"),
    ("offsets.topic.replication.factor", "40000", "SHORT"),
    ("group.consumer.migration.policy", "sideways", "bidirectional"),
])
def test_invalid_values_name_key_value_and_rule(key, value, fragment):
    with pytest.raises(ConfigError) as info:
        broker_config_from_text(f"{key}={value}")
    message = str(info.value)
    assert key in message and value.split(",")[0] in message and fragment in message
    assert isinstance(info.value, ValueError)


def test_the_migration_policy_is_read_in_any_case_as_kafka_reads_it():
    """Kafka's docs list DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL (CaseInsensitiveValidString)."""
    for value in ("BIDIRECTIONAL", "Upgrade", "disabled"):
        assert broker_config_from_text(f"group.consumer.migration.policy={value}").value_of(
            "group.consumer.migration.policy") == value


def test_invalid_value_in_override_is_refused():
    with pytest.raises(ConfigError, match="num.partitions"):
        broker_config_from_text("num.partitions=2", {"num.partitions": "-3"})


def test_unknown_keys_are_warnings_not_errors():
    c = broker_config_from_text("num.partitions=2\nnot.a.kafka.key=1\nlog.retention.hourz=5")
    assert c.num_partitions == 2
    assert len(c.warnings) == 2
    assert any("not.a.kafka.key" in w for w in c.warnings)
    assert any("log.retention.hourz" in w for w in c.warnings)


def test_kraft_keys_accepted_and_noted():
    c = broker_config_from_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n")
    assert c.warnings == ()
    assert c.listeners == (Listener("PLAINTEXT", "", 9092),)
    assert c.advertised_listeners == (Listener("PLAINTEXT", "localhost", 9092),)
    assert any("process.roles" in n for n in c.notes)
    assert any("CONTROLLER" in n for n in c.notes)


# -- listeners ---------------------------------------------------------------------------------

def test_empty_listener_host_binds_all_and_advertises_loopback():
    c = broker_config_from_text("listeners=PLAINTEXT://:9093")
    assert c.listen_host == "" and c.listen_port == 9093
    assert c.advertised_host == "127.0.0.1" and c.advertised_port == 9093


def test_advertised_listeners_and_ipv6():
    c = broker_config_from_text("listeners=PLAINTEXT://[::1]:0\nadvertised.listeners=PLAINTEXT://kafka.example:19092")
    assert c.listeners == (Listener("PLAINTEXT", "::1", 0),)
    assert (c.advertised_host, c.advertised_port) == ("kafka.example", 19092)
    assert str(c.listeners[0]) == "PLAINTEXT://[::1]:0"


def test_custom_listener_name_via_protocol_map():
    c = broker_config_from_text("listeners=CLIENT://127.0.0.1:9092\n"
                                "listener.security.protocol.map=CLIENT:PLAINTEXT")
    assert c.listeners[0].name == "CLIENT"


@pytest.mark.parametrize("text, fragment", [
    ("listeners=localhost:9092", "NAME://host:port"),
    ("listeners=PLAINTEXT://:99999", "65535"),
    ("listeners=KERBEROS://:9093\nlistener.security.protocol.map=KERBEROS:GSSAPI", "serves PLAINTEXT, SSL"),
    # a cluster reaches its brokers through the listener named PLAINTEXT by default
    ("listeners=SSL://127.0.0.1:9093\nzookeeper.connect=127.0.0.1:2181",
     "must be a listener name defined in advertised.listeners"),
    ("listeners=CLIENT://:9093", "security protocol"),
    ("listeners=PLAINTEXT://:1,PLAINTEXT://:2", "repeats"),
    ("listeners=PLAINTEXT://0.0.0.0:9092", "0.0.0.0"),
    ("advertised.listeners=OTHER://h:1", "not one of the listeners"),
])
def test_bad_listeners(text, fragment):
    with pytest.raises(ConfigError, match=fragment) as info:
        broker_config_from_text(text)
    assert text.split("=")[0] in str(info.value)


def test_notes_never_show_passwords():
    c = broker_config_from_text("ssl.keystore.password=secret\nnum.partitions=3\n"
                                "listener.name.client.ssl.key.password=secret2")
    assert c.num_partitions == 3
    assert c.value_of("ssl.keystore.password") == "secret"
    assert not any("secret" in line for line in c.notes + c.warnings)


def test_several_listeners_with_their_security_protocols():
    c = broker_config_from_text("listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,CLIENT://127.0.0.1:0\n"
                                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENT:SSL\n"
                                "listener.name.client.ssl.client.auth=required")
    assert [(x.name, x.protocol) for x in c.listeners] == [("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL"),
                                                         ("CLIENT", "SSL")]
    assert [(x.name, x.protocol) for x in c.advertised_listeners] == [
        ("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL"), ("CLIENT", "SSL")]
    assert not c.warnings                 # listener.name.<l>.ssl.* is a known override
    from kwire.admin.security_config import listener_settings
    client = listener_settings(c.values, c.originals, "CLIENT", "ssl.")
    assert client["ssl.client.auth"] == "required" and client["ssl.keystore.type"] == "JKS"
    assert listener_settings(c.values, c.originals, "SSL", "ssl.")["ssl.client.auth"] == "none"


def test_broker_config_is_frozen():
    c = broker_config_from_text("")
    with pytest.raises(AttributeError):
        c.num_partitions = 5  # type: ignore[misc]
    assert isinstance(c, BrokerConfig)


STOCK_KRAFT_PROPERTIES = """\
############################# Server Basics #############################

# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller

# The node id associated with this instance's roles
node.id=1

# List of controller endpoints used connect to the controller cluster
controller.quorum.bootstrap.servers=localhost:9093

############################# Socket Server Settings #############################
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Flush Policy #############################
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000

############################# Log Retention Policy #############################
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kafka_stock_kraft_server_properties_runs_without_warnings():
    c = broker_config_from_text(STOCK_KRAFT_PROPERTIES)
    assert c.warnings == ()
    assert c.node_id == 1 and c.log_dirs == ("/tmp/kraft-combined-logs",)
    assert (c.listen_host, c.listen_port) == ("", 9092)
    assert (c.advertised_host, c.advertised_port) == ("localhost", 9092)
    assert effective_log_config(c, {}) == LogConfig()
    assert {n.split("=")[0] for n in c.notes} >= {"process.roles", "controller.quorum.bootstrap.servers",
                                                  "inter.broker.listener.name", "num.io.threads"}
