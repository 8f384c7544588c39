"""``kwire acls`` against a broker with SASL users and Kafka's ACL authorizer
(tests/support/acl_broker.py): ACLs added, listed and removed as the super user ``admin``
through ``--command-config``, and what ``alice`` and ``bob`` can then do with confluent-kafka."""
from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer

from kwire.tools.acls import main
from tests.support.acl_broker import AclBroker
from tests.support.tool_output import run_tool, run_tool_json, tables, unique_name

clients = pytest.mark.clients      # these start a broker; the argument checks stay in the fast lane
REFUSED = {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with AclBroker(tmp_path_factory.mktemp("acls")) as b:
        yield b


@pytest.fixture(scope="module")
def as_admin(broker, tmp_path_factory):
    """``kwire acls`` logged in as the super user: (exit code, stdout, stderr) of an argv."""
    config = broker.command_config("admin", tmp_path_factory.mktemp("admin"))

    def call(capsys, *argv: str):
        return run_tool(main, broker.bootstrap, capsys, *argv, "--command-config", config)
    call.config = config
    return call


def acls_json(broker, as_admin, capsys, *argv: str) -> list[dict]:
    document = run_tool_json(main, broker.bootstrap, capsys, *argv, "--command-config", as_admin.config)
    return document[next(iter(document))]


def produce_as_admin(broker, topic: str) -> None:
    producer = Producer(broker.client("admin"))
    producer.produce(topic, b"hello")
    assert producer.flush(15) == 0


def read_as(broker, user: str, topic: str, group: str) -> str:
    """The first message ``user`` reads from ``topic`` in ``group``, or the error's name."""
    consumer = Consumer({**broker.client(user), "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return msg.error().name()
            return msg.value().decode()
        return "nothing read"
    finally:
        consumer.close()


def produce_as(broker, user: str, topic: str) -> str:
    """``OK`` when ``user`` may write ``topic``, else the delivery error's name."""
    outcome = []
    producer = Producer({**broker.client(user), "message.timeout.ms": 5000})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: outcome.append(err.name() if err else "OK"))
    producer.flush(15)
    return outcome[0] if outcome else "no answer"


@clients
def test_consumer_acls_let_alice_read_and_remove_takes_them_away(broker, as_admin, capsys):
    topic, group = unique_name("orders"), unique_name("readers")
    produce_as_admin(broker, topic)
    assert read_as(broker, "alice", topic, group) in REFUSED

    code, out, err = as_admin(capsys, "--add", "--allow-principal", "User:alice", "--consumer",
                              "--topic", topic, "--group", group)
    assert code == 0, err
    [table] = tables(out)
    assert table["columns"] == ["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "NAME", "PATTERN"]
    # kafka-acls.sh's --consumer: Read and Describe on the topic, Read on the group
    assert sorted((r["RESOURCE-TYPE"], r["NAME"], r["OPERATION"]) for r in table["rows"]) == [
        ("GROUP", group, "READ"), ("TOPIC", topic, "DESCRIBE"), ("TOPIC", topic, "READ")]
    assert {(r["PRINCIPAL"], r["HOST"], r["PERMISSION"], r["PATTERN"]) for r in table["rows"]} == {
        ("User:alice", "*", "ALLOW", "LITERAL")}
    assert read_as(broker, "alice", topic, group) == "hello"

    code, out, err = as_admin(capsys, "list", "--topic", topic)
    assert code == 0, err
    assert sorted(r["OPERATION"] for r in tables(out)[0]["rows"]) == ["DESCRIBE", "READ"]
    listed = acls_json(broker, as_admin, capsys, "list", "--group", group, "--principal", "User:alice")
    assert listed == [{"principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW",
                       "resource_type": "GROUP", "name": group, "pattern": "LITERAL"}]

    removed = acls_json(broker, as_admin, capsys, "--remove", "--allow-principal", "User:alice", "--consumer",
                        "--topic", topic, "--group", group, "--force")
    assert len(removed) == 3
    assert acls_json(broker, as_admin, capsys, "list", "--topic", topic) == []
    assert read_as(broker, "alice", topic, unique_name("again")) in REFUSED


@clients
def test_producer_acls_are_kafkas_set_and_let_bob_write(broker, as_admin, capsys):
    topic = unique_name("logs")
    assert produce_as(broker, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"
    added = acls_json(broker, as_admin, capsys, "add", "--allow-principal", "User:bob", "--producer",
                      "--idempotent", "--topic", topic, "--transactional-id", "bob-tx")
    assert sorted((a["resource_type"], a["name"], a["operation"]) for a in added) == [
        ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"), ("TOPIC", topic, "CREATE"), ("TOPIC", topic, "DESCRIBE"),
        ("TOPIC", topic, "WRITE"), ("TRANSACTIONAL_ID", "bob-tx", "DESCRIBE"), ("TRANSACTIONAL_ID", "bob-tx", "WRITE")]
    assert produce_as(broker, "bob", topic) == "OK"
    everything = acls_json(broker, as_admin, capsys, "list", "--principal", "User:bob")
    assert {a["name"] for a in everything} >= {topic, "bob-tx", "kafka-cluster"}

    # without --operation and --principal, remove takes every ACL of the resource
    removed = acls_json(broker, as_admin, capsys, "remove", "--topic", topic, "--force")
    assert sorted(a["operation"] for a in removed) == ["CREATE", "DESCRIBE", "WRITE"]
    assert produce_as(broker, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"
    acls_json(broker, as_admin, capsys, "remove", "--cluster", "--transactional-id", "bob-tx", "--force")


@clients
def test_prefixed_acls_and_deny_rules(broker, as_admin, capsys):
    prefix = unique_name("team") + "-"
    code, _, err = as_admin(capsys, "add", "--allow-principal", "User:alice", "--operation", "Write",
                            "--operation", "describe", "--operation", "create", "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert code == 0, err
    assert produce_as(broker, "alice", prefix + "a") == "OK"
    code, _, err = as_admin(capsys, "add", "--deny-principal", "User:alice", "--operation", "WRITE",
                            "--topic", prefix + "b")
    assert code == 0, err
    assert produce_as(broker, "alice", prefix + "b") == "TOPIC_AUTHORIZATION_FAILED"
    # match: every ACL that applies to the name, prefixed and literal
    applying = acls_json(broker, as_admin, capsys, "list", "--topic", prefix + "b", "--resource-pattern-type", "match")
    assert sorted((a["pattern"], a["permission"], a["operation"]) for a in applying) == [
        ("LITERAL", "DENY", "WRITE"), ("PREFIXED", "ALLOW", "CREATE"), ("PREFIXED", "ALLOW", "DESCRIBE"),
        ("PREFIXED", "ALLOW", "WRITE")]


@clients
def test_remove_without_force_is_refused_when_stdin_is_not_a_terminal(broker, as_admin, capsys):
    topic = unique_name("kept")
    assert as_admin(capsys, "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)[0] == 0
    done = subprocess.run([sys.executable, "-m", "kwire.tools.acls", "--remove", "--topic", topic,
                           "--bootstrap-server", broker.bootstrap, "--command-config", as_admin.config],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--force" in done.stderr
    assert len(acls_json(broker, as_admin, capsys, "list", "--topic", topic)) == 1


@clients
def test_a_user_who_may_not_alter_the_cluster_gets_the_brokers_refusal(broker, capsys, tmp_path):
    alice = broker.command_config("alice", tmp_path)
    code, out, err = run_tool(main, broker.bootstrap, capsys, "add", "--allow-principal", "User:alice",
                              "--operation", "All", "--topic", "*", "--command-config", alice)
    assert (code, out) == (1, "")
    assert "ClusterAuthorizationFailed" in err
    code, out, err = run_tool(main, broker.bootstrap, capsys, "list", "--command-config", alice)
    assert (code, out) == (1, "")
    assert "ClusterAuthorizationFailed" in err


@pytest.mark.parametrize("argv, message", [
    (["add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "is not an operation"),
    (["add", "--allow-principal", "alice", "--topic", "t"], "principalType:name"),
    (["add", "--operation", "Read", "--topic", "t"], "--allow-principal"),
    (["add", "--allow-principal", "User:a", "--operation", "Read"], "at least one resource"),
    (["add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"], "GROUP only supports"),
    (["add", "--allow-principal", "User:a", "--producer", "--group", "g"], "With --producer you must specify a --topic"),
    (["add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--topic and a --group"),
    (["add", "--allow-principal", "User:a", "--consumer", "--operation", "Read", "--topic", "t", "--group", "g"],
     "take no --operation"),
    (["add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"], "only available if --producer"),
    (["add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "invalid choice"),
    (["--list", "--add", "--topic", "t"], "invalid choice"),
])
def test_bad_arguments_exit_2_before_any_connection(argv, message, capsys):
    # port 9 (discard) on 127.0.0.1: nothing listens, so reaching the broker would exit 1
    assert main([*argv, "--bootstrap-server", "127.0.0.1:9"]) == 2
    assert message in capsys.readouterr().err
