"""``kwire reassign``'s arguments and files, judged before any broker is reached (the cluster
behaviour is tests/cluster/test_reassign_cli.py's)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kwire.tools.reassign import main

NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]      # nothing listens: reaching it would fail differently


def call(capsys, *argv):
    capsys.readouterr()
    code = main([*argv, *NOWHERE])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_documents_the_kwire_options(capsys):
    code, out, _ = call(capsys, "--help")
    assert code == 0
    for option in ("--wait", "--timeout", "--drain-broker", "--dry-run", "--throttle", "--additional",
                   "--preserve-throttles", "--reassignment-json-file", "--topics-to-move-json-file"):
        assert option in out


@pytest.mark.parametrize("argv, message", [
    (["--verify", "--throttle", "10", "--reassignment-json-file", "f"], 'Option "--throttle" can\'t be used with action "--verify"'),
    (["--list", "--wait"], 'Option "--wait" can\'t be used with action "--list"'),
    (["--generate", "--broker-list", "1"], "--generate needs --topics-to-move-json-file"),
    (["--execute"], "--execute needs --reassignment-json-file"),
    (["--execute", "--reassignment-json-file", "f", "--timeout", "5"], "--timeout bounds --wait"),
    (["--drain-broker", "1", "--throttle", "-5"], "--throttle must be at least 0"),
])
def test_options_that_do_not_fit_the_action_are_usage_errors(capsys, argv, message):
    code, _, err = call(capsys, *argv)
    assert code == 2 and message in err, err


def test_exactly_one_action(capsys):
    assert call(capsys, "--list", "--verify")[0] == 2
    assert call(capsys)[0] == 2


def test_files_are_read_and_checked_before_connecting(capsys, tmp_path):
    code, _, err = call(capsys, "--execute", "--reassignment-json-file", str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json" in err, err
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}')
    code, out, err = call(capsys, "--execute", "--reassignment-json-file", str(bad))
    assert code == 1 and "t-0 contains multiple entries for 1" in err and "Traceback" not in err + out, err
    topics = tmp_path / "topics.json"
    topics.write_text("{oops")
    code, _, err = call(capsys, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2")
    assert code == 1 and "not valid JSON" in err, err


def test_the_kwire_command_reaches_it():
    run = subprocess.run([sys.executable, "-m", "kwire", "reassign", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("usage: kwire reassign"), run.stderr
