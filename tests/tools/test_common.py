"""kwire.tools.common: the Java client's properties of --command-config in kafka-python's terms."""
from __future__ import annotations

import argparse
import io
import json

import pytest

from kwire.tools.common import (UsageError, add_common_arguments, client_config, emit, java_client_keywords,
                                kafka_style, key_value_args, progress, unused_properties)


def parse(argv):
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_to_kwire_serves_address():
    assert client_config(parse([])) == {"bootstrap_servers": ["127.0.0.1:9092"]}


def test_sasl_ssl_properties_become_kafka_python_keywords(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=sasl_ssl\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
        '    username="alice" password="al\\\\"ice";\n'
        "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/etc/client.pem\nssl.key.password=k\n"
        "ssl.endpoint.identification.algorithm=\n"
        "client.id=ops\nrequest.timeout.ms=5000\nlinger.ms=5\n")
    args = parse(["--bootstrap-server", "a:1,b:2", "--command-config", str(props)])
    assert client_config(args, api_version_auto_timeout_ms=100) == {
        "bootstrap_servers": ["a:1", "b:2"], "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": 'al"ice',
        "ssl_cafile": "/etc/ca.pem", "ssl_certfile": "/etc/client.pem", "ssl_keyfile": "/etc/client.pem",
        "ssl_password": "k", "ssl_check_hostname": False, "client_id": "ops", "request_timeout_ms": 5000,
        "api_version_auto_timeout_ms": 100}
    assert unused_properties({"linger.ms": "5", "client.id": "x"}) == ["linger.ms"]


@pytest.mark.parametrize("text, complaint", [
    ("ssl.truststore.location=/etc/trust.jks\n", "PEM files only"),
    ("ssl.keystore.type=PKCS12\nssl.keystore.location=/etc/k.p12\n", "PEM files only"),
    ("sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n", "not supported"),
    ("sasl.jaas.config=nonsense\n", "sasl.jaas.config"),
    ("request.timeout.ms=soon\n", "not valid"),
])
def test_properties_these_tools_cannot_honour_are_usage_errors(tmp_path, text, complaint):
    props = tmp_path / "client.properties"
    props.write_text(text)
    with pytest.raises(UsageError, match=complaint):
        client_config(parse(["--command-config", str(props)]))


def test_a_missing_command_config_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="--command-config"):
        client_config(parse(["--command-config", str(tmp_path / "absent")]))


def test_emit_prints_a_table_or_one_json_document(capsys):
    emit(parse([]), [{"topic": "t"}], ["TOPIC", "PARTITIONS"], [["orders", 3], ["audit", None]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITIONS"]
    assert [line.split() for line in lines[2:]] == [["orders", "3"], ["audit", "-"]]
    emit(parse(["--output", "json"]), [{"topic": "t"}], ["TOPIC"], [["t"]])
    assert json.loads(capsys.readouterr().out) == [{"topic": "t"}]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_on_a_terminal_for_long_work_only():
    quiet, shown = _Terminal(), _Terminal()
    for args, total, stream in ((parse([]), 10, quiet), (parse(["--output", "json"]), 5000, quiet),
                                (parse([]), 5000, io.StringIO()), (parse([]), 5000, shown)):
        with progress(args, "resetting offsets", total, stream=stream) as advance:
            advance(total)
    assert quiet.getvalue() == ""
    assert "resetting offsets" in shown.getvalue()


@pytest.mark.parametrize("argv, expected", [
    (["--bootstrap-server", "b:1", "--describe", "--topic", "t"],
     ["describe", "--bootstrap-server", "b:1", "--topic", "t"]),
    (["describe", "--topic", "t"], ["describe", "--topic", "t"]),
    (["--list", "--describe"], ["--list", "--describe"]),          # two actions: argparse refuses them
    (["--topic", "t"], ["--topic", "t"]),
])
def test_kafka_style_action_flags_become_subcommands(argv, expected):
    assert kafka_style(argv, {"--list": "list", "--describe": "describe"}) == expected


def test_java_client_properties_become_keywords_of_that_client():
    from kafka import KafkaConsumer, KafkaProducer
    keywords, unknown = java_client_keywords(
        {"acks": "all", "linger.ms": "5", "enable.idempotence": "FALSE", "compression.type": "none",
         "transactional.id": "tx", "buffer.memory": "1000", "key.serializer": "org.Foo", "send.buffer.bytes": "9",
         "security.protocol": "ssl", "ssl.truststore.location": "/etc/ca.pem"},
        KafkaProducer.DEFAULT_CONFIG)
    assert keywords == {"acks": -1, "linger_ms": 5, "enable_idempotence": False, "compression_type": None,
                        "transactional_id": "tx", "send_buffer_bytes": 9, "security_protocol": "SSL",
                        "ssl_cafile": "/etc/ca.pem"}
    assert unknown == ["buffer.memory", "key.serializer"]
    keywords, unknown = java_client_keywords({"isolation.level": "read_committed", "max.poll.records": "7",
                                              "group.id": "g", "fetch.max.wait.ms": "100"},
                                             KafkaConsumer.DEFAULT_CONFIG)
    assert keywords == {"isolation_level": "read_committed", "max_poll_records": 7, "group_id": "g",
                        "fetch_max_wait_ms": 100}
    for bad in ({"linger.ms": "soon"}, {"enable.idempotence": "yes"}, {"acks": "some"}):
        with pytest.raises(UsageError, match="is not valid"):
            java_client_keywords(bad, KafkaProducer.DEFAULT_CONFIG)


def test_key_value_args_split_at_the_first_equals_sign():
    assert key_value_args(["a=1", "b=x=y", "c="], "--property") == {"a": "1", "b": "x=y", "c": ""}
    assert key_value_args(None, "--property") == {}
    for bad in ("novalue", "=v"):
        with pytest.raises(UsageError, match="--property"):
            key_value_args([bad], "--property")
