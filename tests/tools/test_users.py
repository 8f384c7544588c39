"""``kwire users`` against a broker with SASL (PLAIN and SCRAM) and Kafka's ACL authorizer: a
user set by the super user ``admin`` logs in with SCRAM through kafka-python, is described, and
cannot log in once deleted; ``alice`` (no cluster ACLs) is refused."""
from __future__ import annotations

import subprocess
import sys

import pytest
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from kwire.tools.users import main, parse_add_config
from kwire.tools.common import UsageError
from tests.support.acl_broker import AclBroker
from tests.support.tool_output import run_tool, run_tool_json, tables, unique_name

clients = pytest.mark.clients      # these start a broker; the argument checks stay in the fast lane


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with AclBroker(tmp_path_factory.mktemp("users"),
                   **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}) as b:
        yield b


@pytest.fixture(scope="module")
def admin_config(broker, tmp_path_factory) -> str:
    return broker.command_config("admin", tmp_path_factory.mktemp("admin"))


def users(broker, admin_config, capsys, *argv: str):
    return run_tool(main, broker.bootstrap, capsys, *argv, "--command-config", admin_config)


def logs_in(broker, user: str, password: str, mechanism: str) -> bool:
    """Whether kafka-python's consumer gets through SASL/SCRAM as ``user``."""
    try:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                                 request_timeout_ms=5000, bootstrap_timeout_ms=3000)
    except KafkaError:
        return False
    try:
        consumer.topics()
        return True
    except KafkaError:
        return False
    finally:
        consumer.close()


@clients
def test_set_user_logs_in_is_described_and_cannot_after_delete(broker, admin_config, capsys):
    user = unique_name("carol")
    code, out, err = users(broker, admin_config, capsys, "set", "--user", user, "--mechanism", "SCRAM-SHA-512",
                           "--iterations", "8192", "--password", "carol-secret")
    assert (code, out) == (0, f"Completed updating config for user {user}.\n"), err
    assert logs_in(broker, user, "carol-secret", "SCRAM-SHA-512")
    assert not logs_in(broker, user, "wrong", "SCRAM-SHA-512")

    code, out, err = users(broker, admin_config, capsys, "describe", "--user", user)
    assert code == 0, err
    [table] = tables(out)
    assert table["rows"] == [{"USER": user, "MECHANISM": "SCRAM-SHA-512", "ITERATIONS": "8192"}]
    everyone = run_tool_json(main, broker.bootstrap, capsys, "describe", "--command-config", admin_config)
    assert {"user": user, "mechanism": "SCRAM-SHA-512", "iterations": 8192} in everyone["users"]

    code, out, err = users(broker, admin_config, capsys, "delete", "--user", user, "--mechanism", "SCRAM-SHA-512")
    assert code == 0, err
    assert not logs_in(broker, user, "carol-secret", "SCRAM-SHA-512")
    code, out, err = users(broker, admin_config, capsys, "describe", "--user", user)
    assert code == 1 and user in err


@clients
def test_kafka_configs_spelling_and_a_password_from_stdin(broker, admin_config, capsys):
    user = unique_name("dave")
    code, _, err = users(broker, admin_config, capsys, "--alter", "--add-config",
                         "SCRAM-SHA-256=[iterations=8192,password=dave-secret]",
                         "--entity-type", "users", "--entity-name", user)
    assert code == 0, err
    assert logs_in(broker, user, "dave-secret", "SCRAM-SHA-256")
    described = run_tool_json(main, broker.bootstrap, capsys, "--describe", "--entity-type", "users",
                              "--entity-name", user, "--command-config", admin_config)
    assert described["users"] == [{"user": user, "mechanism": "SCRAM-SHA-256", "iterations": 8192}]

    # a second mechanism, its password read from standard input (out of the process list)
    done = subprocess.run([sys.executable, "-m", "kwire.tools.users", "set", "--user", user, "--mechanism",
                           "SCRAM-SHA-512", "--password-file", "-", "--bootstrap-server", broker.bootstrap,
                           "--command-config", admin_config],
                          input="dave-512\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert logs_in(broker, user, "dave-512", "SCRAM-SHA-512")

    code, _, err = users(broker, admin_config, capsys, "--alter", "--delete-config", "SCRAM-SHA-256",
                         "--entity-type", "users", "--entity-name", user)
    assert code == 0, err
    assert not logs_in(broker, user, "dave-secret", "SCRAM-SHA-256")
    assert logs_in(broker, user, "dave-512", "SCRAM-SHA-512")


@clients
def test_a_user_who_may_not_alter_the_cluster_gets_the_brokers_refusal(broker, capsys, tmp_path):
    alice = broker.command_config("alice", tmp_path)
    code, out, err = run_tool(main, broker.bootstrap, capsys, "set", "--user", "mallory", "--password", "x" * 8,
                              "--command-config", alice)
    assert (code, out) == (1, "")
    assert "Error while updating config for user mallory" in err and "uthoriz" in err
    assert not logs_in(broker, "mallory", "x" * 8, "SCRAM-SHA-256")


@clients
def test_too_few_iterations_are_refused_by_the_broker(broker, admin_config, capsys):
    code, out, err = users(broker, admin_config, capsys, "set", "--user", unique_name("weak"),
                           "--iterations", "100", "--password", "pw")
    assert (code, out) == (1, "")
    assert "Error while updating config" in err


@pytest.mark.parametrize("argv, message", [
    (["set", "--user", "u"], "--password"),
    (["set", "--user", "u", "--password", "p", "--mechanism", "SCRAM-SHA-1"], "invalid choice"),
    (["set", "--user", "u", "--password-file", "/nonexistent/pw"], "the password"),
    (["delete"], "--user"),
    (["--alter", "--entity-type", "users", "--entity-name", "u"], "--add-config and --delete-config"),
    (["--alter", "--entity-type", "users", "--entity-name", "u", "--delete-config", "PLAIN"], "expected one of"),
    (["--alter", "--entity-type", "topics", "--entity-name", "u", "--delete-config", "SCRAM-SHA-256"], "invalid choice"),
    (["--alter", "--entity-type", "users", "--entity-name", "u", "--add-config", "SCRAM-SHA-256=[iterations=9]"],
     "a password is needed"),
])
def test_bad_arguments_exit_2_before_any_connection(argv, message, capsys):
    assert main([*argv, "--bootstrap-server", "127.0.0.1:9"]) == 2
    assert message in capsys.readouterr().err


def test_add_config_is_read_as_kafka_configs_reads_it():
    assert parse_add_config("SCRAM-SHA-512=[password=a=b,iterations=8192]") == ("SCRAM-SHA-512", 8192, "a=b")
    assert parse_add_config("scram-sha-256=[password=pw]") == ("SCRAM-SHA-256", 4096, "pw")
    with pytest.raises(UsageError):
        parse_add_config("SCRAM-SHA-256=[iterations=many,password=pw]")
