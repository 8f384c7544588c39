"""``kwire scram`` is ``kwire users`` under its older name: one parser, one implementation, the
older options before the command, and kafka-configs.sh's describe lines (no broker needed)."""
from __future__ import annotations

import contextlib

from kwire.tools import scram, users
from kwire.tools.common import kafka_style


def parse(name: str, *argv: str):
    return users.build_parser(name).parse_args(kafka_style(argv, users.ACTIONS))


def test_the_older_options_come_before_the_command_in_either_name():
    for name in ("scram", "users"):
        args = parse(name, "--bootstrap-server", "h:1", "--client-config", "security_protocol=SASL_SSL",
                     "--timeout-ms", "10000", "set", "--user", "alice", "--password", "pw")
        assert (args.tool, args.command, args.bootstrap_before_command, args.timeout_ms) == (
            name, "set", "h:1", 10000)
    assert users.client_keywords(["a=1", "b=true", "c=x"]) == {"a": 1, "b": True, "c": "x"}


def test_scram_still_requires_the_bootstrap_server(capsys):
    assert scram.main(["set", "--user", "a", "--password", "x"]) == 2
    assert "--bootstrap-server" in capsys.readouterr().err
    assert scram.MECHANISMS is users.MECHANISMS and scram.read_password is users.read_password


class FakeAdmin:
    def __init__(self, described):
        self.described = described

    def describe_user_scram_credentials(self, wanted):
        return self.described


DESCRIBED = {
    "zed": {"error": None, "credential_infos": [{"mechanism": 2, "iterations": 4096}]},
    "ann": {"error": None, "credential_infos": [{"mechanism": 1, "iterations": 8192},
                                                {"mechanism": 2, "iterations": 4096}]},
    "bob": {"error": "Attempt to describe a user credential that does not exist: bob", "credential_infos": []},
}


def test_describe_prints_kafka_configs_lines_under_the_older_name(monkeypatch, capsys):
    monkeypatch.setattr(users, "open_admin", lambda args: contextlib.nullcontext(FakeAdmin(DESCRIBED)))
    assert scram.main(["--bootstrap-server", "h:1", "describe"]) == 1
    out, err = capsys.readouterr()
    assert out == ("SCRAM credential configs for user-principal 'zed' are SCRAM-SHA-512=iterations=4096\n"
                   "SCRAM credential configs for user-principal 'ann' are SCRAM-SHA-256=iterations=8192, "
                   "SCRAM-SHA-512=iterations=4096\n"
                   "Error retrieving SCRAM credential configs for user-principal 'bob': "
                   "Attempt to describe a user credential that does not exist: bob\n")
    assert err == ""

    assert users.main(["describe", "--output", "json"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith('{"users":[{"user":"ann","mechanism":"SCRAM-SHA-256","iterations":8192},')
    assert err.startswith("kwire: Error retrieving SCRAM credential configs for user-principal 'bob'")
