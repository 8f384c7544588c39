"""``kwire configs`` against an embedded kwire broker: describe and alter topic and broker configs
as kafka-configs.sh does, checked in the printed tables, the JSON documents and the exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

import kwire.testing
from kwire.tools.common import UsageError
from kwire.tools.configs import main, parse_add_config, parse_delete_config
from kwire.tools.topics import main as topics_main
from tests.support.tool_output import run_tool, run_tool_json, tables

clients = pytest.mark.clients      # these start a broker; the parser tests stay in the fast lane


@pytest.fixture(scope="module")
def broker():
    with kwire.testing.broker(log_retention_hours=100) as b:
        yield b


def configs(broker, capsys, *argv: str) -> tuple[int, str, str]:
    return run_tool(main, broker.bootstrap, capsys, *argv)


def configs_json(broker, capsys, *argv: str):
    return run_tool_json(main, broker.bootstrap, capsys, *argv)


def new_topic(broker, capsys, *config: str) -> str:
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    argv = ["create", "--topic", topic, "--bootstrap-server", broker.bootstrap]
    for c in config:
        argv += ["--config", c]
    assert topics_main(argv) == 0
    capsys.readouterr()
    return topic


def by_name(document) -> dict:
    [entity] = document["entities"]
    return {c["name"]: c for c in entity["configs"]}


@clients
def test_describe_a_topic_shows_its_overrides_as_a_table(broker, capsys):
    topic = new_topic(broker, capsys, "retention.ms=60000")
    code, out, err = configs(broker, capsys, "describe", "--entity-type", "topics", "--entity-name", topic)
    assert code == 0, err
    [table] = tables(out)
    assert table["title"] == f"Dynamic configs for topic {topic}"
    assert table["columns"] == ["Name", "Value", "Source", "Sensitive", "ReadOnly"]
    assert table["rows"] == [{"Name": "retention.ms", "Value": "60000", "Source": "DYNAMIC_TOPIC_CONFIG",
                              "Sensitive": "false", "ReadOnly": "false"}]
    entry = by_name(configs_json(broker, capsys, "describe", "--topic", topic))["retention.ms"]
    # the synonyms say what the override hides: the broker's log.retention.hours from server.properties,
    # and Kafka's default under it
    assert entry["synonyms"] == [{"name": "retention.ms", "value": "60000", "source": "DYNAMIC_TOPIC_CONFIG"},
                                 {"name": "log.retention.hours", "value": "100", "source": "STATIC_BROKER_CONFIG"},
                                 {"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"}]


@clients
def test_all_shows_defaults_and_broker_overrides_too(broker, capsys):
    topic = new_topic(broker, capsys)
    code, out, err = configs(broker, capsys, "describe", "--topic", topic, "--all")
    [table] = tables(out)
    assert table["title"] == f"All configs for topic {topic}"
    rows = {r["Name"]: r for r in table["rows"]}
    assert (rows["segment.bytes"]["Value"], rows["segment.bytes"]["Source"]) == ("1073741824", "DEFAULT_CONFIG")
    assert (rows["retention.ms"]["Value"], rows["retention.ms"]["Source"]) == \
        (str(100 * 3600 * 1000), "STATIC_BROKER_CONFIG")
    code, out, err = configs(broker, capsys, "describe", "--topic", topic)
    assert out == f"No dynamic configs for topic {topic} (--all lists every config).\n"


@clients
def test_alter_sets_list_values_in_brackets_and_deletes(broker, capsys):
    topic = new_topic(broker, capsys, "retention.ms=60000", "segment.ms=3600000")
    code, out, err = configs(broker, capsys, "alter", "--entity-type", "topics", "--entity-name", topic,
                             "--add-config", "cleanup.policy=[compact,delete],max.message.bytes=2000000",
                             "--delete-config", "retention.ms")
    assert (code, out) == (0, f"Completed updating config for topic {topic}.\n"), err
    now = by_name(configs_json(broker, capsys, "describe", "--topic", topic))
    assert {k: c["value"] for k, c in now.items()} == \
        {"cleanup.policy": "compact,delete", "max.message.bytes": "2000000", "segment.ms": "3600000"}
    # kafka-configs.sh's own spelling, and JSON out
    done = configs_json(broker, capsys, "--alter", "--topic", topic, "--delete-config", "segment.ms,cleanup.policy")
    assert done == {"entity_type": "topics", "entity_name": topic, "set": {},
                    "deleted": ["segment.ms", "cleanup.policy"]}
    assert list(by_name(configs_json(broker, capsys, "--describe", "--topic", topic))) == ["max.message.bytes"]


@clients
def test_alter_from_a_properties_file(broker, capsys, tmp_path):
    topic = new_topic(broker, capsys)
    props = tmp_path / "topic.properties"
    props.write_text("# retention for audits\nretention.bytes=1048576\nmin.insync.replicas=1\n")
    code, _, err = configs(broker, capsys, "alter", "--topic", topic, "--add-config-file", str(props))
    assert code == 0, err
    assert {k: c["value"] for k, c in by_name(configs_json(broker, capsys, "describe", "--topic", topic)).items()} \
        == {"retention.bytes": "1048576", "min.insync.replicas": "1"}


@clients
def test_alter_errors_print_the_reason_and_exit_1(broker, capsys):
    topic = new_topic(broker, capsys)
    code, _, err = configs(broker, capsys, "alter", "--topic", topic, "--delete-config", "retention.ms")
    assert (code, err.strip()) == (1, "kwire: Invalid config(s): retention.ms")
    code, _, err = configs(broker, capsys, "alter", "--topic", topic, "--add-config", "no.such.config=1")
    assert (code, err.strip()) == (1, "kwire: Unknown topic config name: no.such.config")
    code, _, err = configs(broker, capsys, "alter", "--topic", topic, "--add-config", "retention.ms=soon")
    assert code == 1 and "retention.ms" in err
    code, _, err = configs(broker, capsys, "alter", "--topic", "absent-topic", "--add-config", "retention.ms=1")
    assert (code, err.strip()) == (1, "kwire: Topic 'absent-topic' does not exist.")
    code, _, err = configs(broker, capsys, "describe", "--topic", "absent-topic")
    assert (code, err.strip()) == (1, "kwire: Topic 'absent-topic' does not exist.")


@clients
def test_broker_configs_static_and_dynamic(capsys):
    with kwire.testing.broker(log_retention_hours=100) as broker:      # its own: the alters stay here
        code, out, err = configs(broker, capsys, "describe", "--entity-type", "brokers", "--entity-name", "1")
        assert (code, out) == (0, "No dynamic configs for broker 1 (--all lists every config).\n"), err
        document = configs_json(broker, capsys, "describe", "--entity-type", "brokers", "--all")
        assert [e["name"] for e in document["entities"]] == ["1", ""]     # every broker, then the default
        every = {c["name"]: c for c in document["entities"][0]["configs"]}
        assert every["log.retention.hours"] == {"name": "log.retention.hours", "value": "100",
                                                "source": "STATIC_BROKER_CONFIG", "sensitive": False,
                                                "read_only": False, "synonyms": every["log.retention.hours"]["synonyms"]}
        assert every["log.dirs"]["read_only"] is True
        assert every["ssl.keystore.password"]["sensitive"] is True and every["ssl.keystore.password"]["value"] is None
        code, out, err = configs(broker, capsys, "describe", "--broker", "1", "--all")
        rows = {r["Name"]: r for r in tables(out)[0]["rows"]}
        assert rows["ssl.keystore.password"]["Value"] == "(sensitive)"
        # a key that can change at runtime: in force at once, shown as this broker's dynamic config
        code, out, err = configs(broker, capsys, "alter", "--broker", "1", "--add-config", "log.retention.hours=50")
        assert (code, out) == (0, "Completed updating config for broker 1.\n"), err
        code, out, err = configs(broker, capsys, "describe", "--broker", "1")
        [row] = tables(out)[0]["rows"]
        assert (row["Name"], row["Value"], row["Source"]) == ("log.retention.hours", "50", "DYNAMIC_BROKER_CONFIG")
        code, _, err = configs(broker, capsys, "alter", "--broker", "1", "--add-config", "log.dirs=/elsewhere")
        assert (code, err.strip()) == (1, "kwire: Cannot update these configs dynamically: Set(log.dirs)")
        # the cluster-wide default (kafka-configs --entity-default), which every broker falls back to
        code, out, err = configs(broker, capsys, "alter", "--entity-type", "brokers", "--entity-default",
                                 "--add-config", "message.max.bytes=3000")
        assert (code, out) == (0, "Completed updating config for the brokers' default.\n"), err
        code, out, err = configs(broker, capsys, "describe", "--entity-type", "brokers", "--entity-default")
        [row] = tables(out)[0]["rows"]
        assert (row["Name"], row["Value"], row["Source"]) == ("message.max.bytes", "3000",
                                                               "DYNAMIC_DEFAULT_BROKER_CONFIG"), out
        every = by_name(configs_json(broker, capsys, "describe", "--broker", "1", "--all"))
        assert (every["message.max.bytes"]["value"], every["message.max.bytes"]["source"]) == \
            ("3000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        code, _, err = configs(broker, capsys, "describe", "--entity-default", "--topic", "t")
        assert code == 2 and "--entity-default" in err
        code, _, err = configs(broker, capsys, "describe", "--broker", "7")
        assert (code, err.strip()) == (1, "kwire: Broker 7 is not a live broker of the cluster (live: 1)")


@clients
def test_python_dash_m(broker, capsys):
    topic = new_topic(broker, capsys, "retention.ms=1234")
    done = subprocess.run([sys.executable, "-m", "kwire.tools.configs", "describe", "--topic", topic, "--output",
                           "json", "--bootstrap-server", broker.bootstrap], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert by_name(json.loads(done.stdout))["retention.ms"]["value"] == "1234"


@pytest.mark.parametrize("argv", [
    ["alter", "--topic", "t"],                                        # nothing to change
    ["alter", "--entity-type", "topics", "--add-config", "a=1"],      # no name
    ["describe"],                                                      # no entity type
    ["describe", "--topic", "t", "--broker", "1"],                    # two
    ["describe", "--entity-type", "brokers", "--entity-name", "one"],
    ["alter", "--topic", "t", "--add-config", "novalue"],
    ["describe", "--entity-type", "users"],
])
def test_bad_arguments_exit_2_before_any_connection(argv, capsys):
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2


@pytest.mark.parametrize("entries, expected", [
    (["a=1"], {"a": "1"}),
    (["a=1,b=2", "c = 3"], {"a": "1", "b": "2", "c": "3"}),
    (["cleanup.policy=[compact,delete],retention.ms=5"], {"cleanup.policy": "compact,delete", "retention.ms": "5"}),
    (["leader.replication.throttled.replicas=[0:1,1:2]"], {"leader.replication.throttled.replicas": "0:1,1:2"}),
    (["k=[]"], {"k": ""}),
])
def test_add_config_is_read_as_kafka_configs_sh_reads_it(entries, expected):
    assert parse_add_config(entries, None) == expected


@pytest.mark.parametrize("entries", [["a"], ["a=1=2"], ["=1"], ["a=1,,b=2"]])
def test_add_config_refuses_what_kafka_refuses(entries):
    with pytest.raises(UsageError, match="key=val"):
        parse_add_config(entries, None)


def test_delete_config_takes_comma_separated_keys():
    assert parse_delete_config(["a,b", " c "]) == ["a", "b", "c"]
