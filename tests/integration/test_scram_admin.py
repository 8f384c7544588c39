"""SCRAM users on a real broker process: set with ``python -m kwire.tools.scram`` (kafka-python's
AlterUserScramCredentials underneath), read back with kafka-python's admin client and the
CLI, kept across a restart (the credential file in the log dir), then deleted."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kafka.admin import KafkaAdminClient, ScramMechanism

from kwire.security.scram_store import FILE_NAME
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.clients


def scram_cli(broker, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kwire.tools.scram", "--bootstrap-server", broker.bootstrap,
                           "--timeout-ms", "10000", *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


def describe(broker, users=None) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        return admin.describe_user_scram_credentials(users)
    finally:
        admin.close()


@pytest.fixture
def broker():
    b = BrokerProcess().start()
    yield b
    b.close()


def test_set_describe_restart_delete(broker, tmp_path):
    done = scram_cli(broker, "set", "--user", "alice", "--mechanism", "SCRAM-SHA-256",
                     "--iterations", "8192", "--password", "alice-secret")
    assert (done.returncode, done.stdout) == (0, "Completed updating config for user alice.\n"), done.stderr
    password_file = tmp_path / "pw"
    password_file.write_text("bob-secret\n")
    done = scram_cli(broker, "set", "--user", "bob", "--mechanism", "SCRAM-SHA-512",
                     "--password-file", str(password_file))
    assert done.returncode == 0, done.stderr

    expected = {"alice": {"error": None, "credential_infos": [
                    {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 8192}]},
                "bob": {"error": None, "credential_infos": [
                    {"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 4096}]}}
    assert describe(broker) == expected
    file_text = open(os.path.join(broker.data_dir, "logs", FILE_NAME)).read()
    assert "alice-secret" not in file_text and "bob-secret" not in file_text

    broker.stop()
    broker.start()
    assert describe(broker) == expected
    shown = scram_cli(broker, "describe", "--user", "alice")
    assert (shown.returncode, shown.stdout) == (
        0, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n")

    done = scram_cli(broker, "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-256")
    assert (done.returncode, done.stdout) == (0, "Completed updating config for user alice.\n"), done.stderr
    assert describe(broker, ["alice"]) == {"alice": {
        "error": "Attempt to describe a user credential that does not exist: alice", "credential_infos": []}}
    shown = scram_cli(broker, "describe")
    assert (shown.returncode, shown.stdout) == (
        0, "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n")

    broker.kill()                    # no clean shutdown: the file was already durable
    broker.start()
    assert list(describe(broker)) == ["bob"]


def test_refusals_are_reported_with_kafkas_messages(broker):
    too_few = scram_cli(broker, "set", "--user", "carol", "--iterations", "1000", "--password", "pw")
    assert too_few.returncode == 1
    assert "Too few iterations" in too_few.stderr
    missing = scram_cli(broker, "delete", "--user", "nobody")
    assert missing.returncode == 1
    assert "Attempt to delete a user credential that does not exist" in missing.stderr
    unknown = scram_cli(broker, "describe", "--user", "nobody")
    assert unknown.returncode == 1
    assert unknown.stdout == ("Error retrieving SCRAM credential configs for user-principal 'nobody': "
                              "Attempt to describe a user credential that does not exist: nobody\n")
    assert describe(broker) == {}
