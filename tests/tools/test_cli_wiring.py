"""The operator commands are reached through the ``kwire`` entry point itself, as a user types them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kwire.testing

COMMANDS = ("topics", "groups", "configs", "produce", "consume", "perf", "acls", "users", "reassign", "quotas", "schemas")


def kwire_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kwire", *args], capture_output=True, text=True, timeout=120)


def test_the_entry_point_dispatches_a_command():
    run = kwire_cli("topics", "--help")
    assert run.returncode == 0 and run.stdout.startswith("usage: kwire topics")


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command, capsys):
    # through the same dispatch as the entry point, in this process (a subprocess each cost ~0.8 s)
    from kwire.cli import main
    try:
        code = main([command, "--help"])
    except SystemExit as done:          # argparse's own exit after printing the help
        code = done.code
    assert code in (0, None) and capsys.readouterr().out.startswith(f"usage: kwire {command}")


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
