"""``kwire users`` (alias ``kwire scram``): set, delete and describe SCRAM credentials, as
``kafka-configs.sh --entity-type users`` does (AlterUserScramCredentials,
DescribeUserScramCredentials).

    kwire users set --user U [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]
                    (--password P | --password-file F)
    kwire users delete --user U [--mechanism M]
    kwire users describe [--user U ...]

Kafka's spelling works too::

    kwire users --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]' \\
        --entity-type users --entity-name alice
    kwire users --alter --delete-config SCRAM-SHA-256 --entity-type users --entity-name alice
    kwire users --describe --entity-type users [--entity-name alice]

Every command takes ``--bootstrap-server``, ``--command-config`` and ``--output table|json``
(kwire.tools.common).  The password never reaches the broker: the client salts it (a random
salt, PBKDF2 of ``--iterations`` rounds, 4096..16384) and sends the salted password.
``--password-file F`` reads the first line of F (``-``: standard input), keeping the password
out of the process list.

``kwire scram`` (``python -m kwire.tools.scram``) is this command under its older name, with its
older options before the command, which every spelling accepts::

    kwire scram --bootstrap-server HOST:PORT [--client-config KEY=VALUE ...] [--timeout-ms N] \\
        set|delete|describe ...

``--client-config`` passes a kafka-python KafkaAdminClient keyword (e.g.
``security_protocol=SASL_SSL``); ``--timeout-ms`` bounds the wait for the broker and for each
answer (kafka-python's default: 30000).  Under that name ``--bootstrap-server`` is required
before the command, as it always was, and ``describe`` prints kafka-configs.sh's lines
("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192")
instead of a table.  Exit codes: 0 done, 1 the broker refused (or is unreachable), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Sequence

from kwire.security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS

from kwire.tools.common import (
    DEFAULT_BOOTSTRAP, ToolError, UsageError, client_config, dispatch, emit, tool_parser,
)

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ACTIONS = {"--alter": "alter", "--describe": "describe"}
_SCRAM_CONFIG = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*", re.IGNORECASE)
_NAME_OF = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}      # Kafka's ScramMechanism types


# -- arguments --------------------------------------------------------------------------------
def build_parser(name: str = "users") -> argparse.ArgumentParser:
    """The one parser of ``kwire users`` and of its alias ``kwire scram`` (``name``)."""
    parser, command = tool_parser(f"kwire {name}", __doc__)
    parser.set_defaults(tool=name)
    parser.add_argument("--bootstrap-server", dest="bootstrap_before_command", metavar="HOST:PORT",
                        required=name == "scram",     # as kwire scram always required it
                        help="kwire scram's place for it: before the command")
    parser.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a kafka-python KafkaAdminClient keyword argument (repeatable)")
    parser.add_argument("--timeout-ms", type=int,
                        help="how long to wait for the broker and for each answer (default 30000)")

    p = command("set", "add or replace a user's SCRAM credential for one mechanism")
    p.add_argument("--user", required=True)
    p.add_argument("--mechanism", choices=MECHANISMS, type=str.upper, default="SCRAM-SHA-256")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"PBKDF2 rounds, {MIN_ITERATIONS}..{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})")
    secret = p.add_mutually_exclusive_group(required=True)
    secret.add_argument("--password")
    secret.add_argument("--password-file", metavar="FILE", help="its first line is the password; - for stdin")
    p = command("delete", "remove a user's SCRAM credential for one mechanism")
    p.add_argument("--user", required=True)
    p.add_argument("--mechanism", choices=MECHANISMS, type=str.upper, default="SCRAM-SHA-256")
    p = command("describe", "list users' mechanisms and iterations (every user by default)")
    p.add_argument("--user", "--entity-name", action="append", dest="users", metavar="USER",
                   help="a user to describe (repeatable)")
    p.add_argument("--entity-type", choices=["users"], help="kafka-configs.sh's spelling; only users")
    p = command("alter", "kafka-configs.sh's spelling of set and delete")
    p.add_argument("--entity-type", choices=["users"], required=True)
    p.add_argument("--entity-name", required=True, dest="user")
    p.add_argument("--add-config", metavar="'SCRAM-SHA-256=[iterations=N,password=P]'")
    p.add_argument("--delete-config", metavar="SCRAM-SHA-256")
    return parser


def parse_add_config(text: str) -> tuple[str, int, str]:
    """kafka-configs.sh's ``SCRAM-SHA-256=[iterations=8192,password=secret]`` as (mechanism,
    iterations, password); iterations default to 4096.  Raises UsageError."""
    match = _SCRAM_CONFIG.fullmatch(text)
    if not match:
        raise UsageError(f"--add-config {text!r}: expected SCRAM-SHA-256=[iterations=N,password=P] "
                         "or SCRAM-SHA-512=[...]")
    fields = {}
    for item in match.group(2).split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in ("iterations", "password"):
            raise UsageError(f"--add-config: {item!r} is not iterations=N or password=P")
        fields[key.strip()] = value
    if not fields.get("password"):
        raise UsageError("--add-config: a password is needed")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UsageError(f"--add-config: iterations={fields['iterations']!r} is not a number") from None
    return match.group(1).upper(), iterations, fields["password"]


def client_keywords(pairs: Sequence[str]) -> dict:
    """``--client-config KEY=VALUE`` strings -> keyword arguments (integers and true/false
    converted).  Raises UsageError for a pair without ``=``."""
    out: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--client-config {pair!r}: expected KEY=VALUE")
        if value.lstrip("-").isdigit():
            out[key] = int(value)
        elif value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"
        else:
            out[key] = value
    return out


def read_password(args) -> str:
    """The password from ``--password`` or the first line of ``--password-file``.
    Raises OSError for an unreadable file, ValueError for an empty password."""
    if args.password is not None:
        password = args.password
    elif args.password_file == "-":
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        with open(args.password_file, encoding="utf-8") as f:
            password = f.readline().rstrip("\r\n")
    if not password:
        raise ValueError("the password is empty")
    return password


# -- set, delete, describe --------------------------------------------------------------------
def open_admin(args: argparse.Namespace):
    """The admin client of ``--bootstrap-server`` (either place), ``--command-config``,
    ``--client-config`` and ``--timeout-ms``.  Raises UsageError."""
    from kafka.admin import KafkaAdminClient
    if args.bootstrap_before_command and args.bootstrap_server == DEFAULT_BOOTSTRAP:
        args.bootstrap_server = args.bootstrap_before_command
    extra = client_keywords(args.client_config)
    if args.timeout_ms is not None:
        extra = {"request_timeout_ms": args.timeout_ms, "bootstrap_timeout_ms": args.timeout_ms, **extra}
    return KafkaAdminClient(**client_config(args, client_id=f"kwire-{args.tool}", **extra))


def alter_one(args: argparse.Namespace, alteration, done: str) -> None:
    with open_admin(args) as admin:
        errors = admin.alter_user_scram_credentials([alteration])
    if args.user not in errors:
        raise ToolError(f"Error while updating config for user {args.user}: no result for the user")
    if errors[args.user] is not None:
        raise ToolError(f"Error while updating config for user {args.user}: {errors[args.user]}")
    document = {"user": args.user, "mechanism": str(args.mechanism), done: True}
    if args.output == "json":
        emit(args, document, [], [])
    else:
        print(f"Completed updating config for user {args.user}.")


def set_credential(args: argparse.Namespace) -> None:
    from kafka.admin import UserScramCredentialUpsertion
    try:
        password = read_password(args)
    except (OSError, ValueError) as exc:
        raise UsageError(f"the password: {exc}") from None
    alter_one(args, UserScramCredentialUpsertion(args.user, args.mechanism, password, iterations=args.iterations),
              "set")


def delete_credential(args: argparse.Namespace) -> None:
    from kafka.admin import UserScramCredentialDeletion
    alter_one(args, UserScramCredentialDeletion(args.user, args.mechanism), "deleted")


def alter(args: argparse.Namespace) -> None:
    """kafka-configs.sh ``--alter``: one of ``--add-config`` and ``--delete-config``."""
    if bool(args.add_config) == bool(args.delete_config):
        raise UsageError("--alter needs one of --add-config and --delete-config")
    if args.delete_config:
        args.mechanism = args.delete_config.strip().upper()
        if args.mechanism not in MECHANISMS:
            raise UsageError(f"--delete-config {args.delete_config!r}: expected one of {', '.join(MECHANISMS)}")
        return delete_credential(args)
    args.mechanism, args.iterations, args.password = parse_add_config(args.add_config)
    args.password_file = None
    return set_credential(args)


def describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        described = admin.describe_user_scram_credentials(args.users)
    if args.tool == "scram" and args.output == "table":
        return _print_kafka_configs_lines(described)
    rows, errors = [], []
    for user, d in sorted(described.items()):
        if d["error"] is not None:
            errors.append(_describe_error(user, d["error"]))
        rows += [{"user": user, "mechanism": mechanism, "iterations": iterations}
                 for mechanism, iterations in credentials(d)]
    emit(args, {"users": rows, "errors": errors}, ["USER", "MECHANISM", "ITERATIONS"],
         [[r["user"], r["mechanism"], r["iterations"]] for r in rows])
    for line in errors:
        print(f"kwire: {line}", file=sys.stderr)
    return 1 if errors else 0


def _print_kafka_configs_lines(described: dict) -> int:
    """kafka-configs.sh's describe output on stdout, one line per user in the broker's order
    (an error in place of a user's line); the exit code."""
    code = 0
    for user, d in described.items():
        if d["error"] is not None:
            print(_describe_error(user, d["error"]))
            code = 1
            continue
        text = ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in credentials(d))
        print(f"SCRAM credential configs for user-principal '{user}' are {text}")
    return code


def _describe_error(user: str, error: str) -> str:
    return f"Error retrieving SCRAM credential configs for user-principal '{user}': {error}"


def credentials(described_user: dict) -> list[tuple[str, int]]:
    """(mechanism name, iterations) of one user's DescribeUserScramCredentials result."""
    return [(_NAME_OF.get(int(i["mechanism"]), i["mechanism"]), i["iterations"])
            for i in described_user["credential_infos"]]


COMMANDS = {"set": set_credential, "delete": delete_credential, "describe": describe, "alter": alter}


def main(argv: Sequence[str] | None = None, *, name: str = "users") -> int:
    """``kwire users ...`` (``name="scram"``: ``kwire scram ...``); returns the exit code
    (0, 1 refused/unreachable, 2 bad arguments)."""
    return dispatch(argv, build_parser(name), ACTIONS, COMMANDS)


def scram_main(argv: Sequence[str] | None = None) -> int:
    """``kwire scram ...``: the same command under its older name."""
    return main(argv, name="scram")


if __name__ == "__main__":
    sys.exit(main())
