"""The operator commands are reached through the ``kwire`` entry point itself, as a user types them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kwire.testing

COMMANDS = ("topics", "groups", "configs", "produce", "consume", "perf", "acls", "users", "reassign", "quotas")


def kwire_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kwire", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command):
    run = kwire_cli(command, "--help")
    assert run.returncode == 0 and run.stdout.startswith("usage: kwire ")


@pytest.mark.clients
def test_topics_groups_and_configs_through_the_kwire_command():
    with kwire.testing.broker() as b:
        server = ["--bootstrap-server", b.bootstrap]
        assert kwire_cli("topics", "create", "--topic", "wired", "--partitions", "2", *server).returncode == 0
        listed = kwire_cli("topics", "list", *server, "--output", "json")
        assert listed.returncode == 0, listed.stderr
        assert "wired" in {t["name"] for t in json.loads(listed.stdout)["topics"]}
        configs = kwire_cli("configs", "describe", "--entity-type", "topics", "--entity-name", "wired", *server)
        assert configs.returncode == 0, configs.stderr
        missing = kwire_cli("groups", "describe", "--group", "nobody", *server)
        assert missing.returncode == 1 and "does not exist" in missing.stderr + missing.stdout
        produced = subprocess.run([sys.executable, "-m", "kwire", "produce", "--topic", "wired", *server],
                                  input="one\ntwo\n", capture_output=True, text=True, timeout=120)
        assert produced.returncode == 0, produced.stderr
        consumed = kwire_cli("consume", "--topic", "wired", "--from-beginning", "--max-messages", "2", *server)
        assert consumed.returncode == 0 and sorted(consumed.stdout.split()) == ["one", "two"], consumed.stderr
        perf = kwire_cli("perf", "produce", "--topic", "wired", "--num-records", "50", "--record-size", "10",
                         "--throughput", "-1", *server)
        assert perf.returncode == 0 and "50 records sent" in perf.stdout, perf.stderr
