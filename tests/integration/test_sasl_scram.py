"""SCRAM-SHA-256/512 logins against credentials set with ``kwire scram`` on the running broker.

The broker stores only salted credentials (kwire.security.scram_store); clients log in
with the password, the broker proves it knows the credential (server signature,
checked by the clients), and a wrong password or a deleted user fails."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer

from kwire.testing.process import BrokerProcess, free_port

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def scram(tmp_path_factory):
    """(broker, SASL_PLAINTEXT bootstrap) with alice (SHA-256) and bob (SHA-512) set."""
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    broker = BrokerProcess(tmp_path_factory.mktemp("scram"), port=ports["PLAINTEXT"], properties={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": "50",
    }).start()
    for user, mechanism in (("alice", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-512")):
        kwire_scram(broker, "set", "--user", user, "--mechanism", mechanism, "--password", f"{user}-secret")
    yield broker, f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    broker.close()


def kwire_scram(broker, *args) -> None:
    done = subprocess.run([sys.executable, "-m", "kwire", "scram", "--bootstrap-server", broker.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def login(bootstrap: str, user: str, password: str, mechanism: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def produce_one(config: dict, topic: str) -> object:
    outcome = []
    producer = Producer({**config, "message.timeout.ms": 5000})
    producer.produce(topic, b"scram", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    return outcome[0] if outcome else "no delivery report"


@pytest.mark.parametrize("user, mechanism", [("alice", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-512")])
def test_confluent_kafka_logs_in_with_scram(scram, user, mechanism):
    _broker, bootstrap = scram
    config = login(bootstrap, user, f"{user}-secret", mechanism)
    assert produce_one(config, f"scram-{user}") is None
    consumer = Consumer({**config, "group.id": f"g-{user}", "auto.offset.reset": "earliest"})
    consumer.subscribe([f"scram-{user}"])
    deadline, got = time.monotonic() + 20, None
    while got is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got = msg.value()
    consumer.close()
    assert got == b"scram"


def test_kafka_python_logs_in_with_scram_sha_512(scram):
    from kafka import KafkaProducer
    _broker, bootstrap = scram
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                             sasl_plain_password="bob-secret")
    metadata = producer.send("scram-kafka-python", b"x").get(timeout=15)
    assert metadata.offset == 0
    producer.close()


def test_a_wrong_password_or_mechanism_or_a_deleted_user_fails(scram):
    broker, bootstrap = scram
    assert produce_one(login(bootstrap, "alice", "bob-secret", "SCRAM-SHA-256"), "scram-denied") is not None
    # alice has no SHA-512 credential
    assert produce_one(login(bootstrap, "alice", "alice-secret", "SCRAM-SHA-512"), "scram-denied") is not None
    kwire_scram(broker, "set", "--user", "carol", "--mechanism", "SCRAM-SHA-256", "--password", "carol-secret")
    carol = login(bootstrap, "carol", "carol-secret", "SCRAM-SHA-256")
    assert produce_one(carol, "scram-carol") is None
    kwire_scram(broker, "delete", "--user", "carol", "--mechanism", "SCRAM-SHA-256")
    assert produce_one(carol, "scram-carol") is not None
    log = broker.log_text()
    assert "SASL authentication failed" in log
    assert "alice-secret" not in log and "carol-secret" not in log
