"""``kwire scram``: set, delete and describe SCRAM credentials on a running broker, as
``kafka-configs.sh --entity-type users`` does, through AlterUserScramCredentials and
DescribeUserScramCredentials (kafka-python's admin client)::

    python -m kwire.tools.scram --bootstrap-server localhost:9092 set --user alice \\
        --mechanism SCRAM-SHA-256 --iterations 8192 --password alice-secret
    python -m kwire.tools.scram --bootstrap-server localhost:9092 describe [--user alice ...]
    python -m kwire.tools.scram --bootstrap-server localhost:9092 delete --user alice --mechanism SCRAM-SHA-256

In a cluster any broker will do: the users are kept in ZooKeeper (/config/users) and every
broker follows them within a second or so.

The password never reaches the broker: the client salts it (random salt, PBKDF2 of
``--iterations`` rounds) and sends the salted password.  ``--password-file F`` reads the
first line of F (``-``: standard input) so the password stays out of the process list.
``--client-config KEY=VALUE`` passes a kafka-python KafkaAdminClient keyword (e.g.
``security_protocol=SASL_SSL``) for brokers that require authentication.

Output follows kafka-configs.sh: "Completed updating config for user alice." and
"SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192".
Exit codes: 0 done, 1 the broker refused (or is unreachable), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys

from kwire.security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_NAME_OF = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}      # Kafka's ScramMechanism types


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="kwire scram", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a kafka-python KafkaAdminClient keyword argument (repeatable)")
    parser.add_argument("--timeout-ms", type=int, default=30000,
                        help="how long to wait for the broker and for each answer (default 30000)")
    sub = parser.add_subparsers(dest="command", required=True)
    set_ = sub.add_parser("set", help="add or replace a user's credential for one mechanism")
    set_.add_argument("--user", required=True)
    set_.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-256")
    set_.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                      help=f"PBKDF2 rounds, {MIN_ITERATIONS}..{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})")
    secret = set_.add_mutually_exclusive_group(required=True)
    secret.add_argument("--password")
    secret.add_argument("--password-file", metavar="FILE", help="its first line is the password; - for stdin")
    delete = sub.add_parser("delete", help="remove a user's credential for one mechanism")
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-256")
    describe = sub.add_parser("describe", help="list users' mechanisms and iterations (all users by default)")
    describe.add_argument("--user", action="append", dest="users", metavar="USER",
                          help="a user to describe (repeatable)")
    return parser.parse_args(argv)


def client_config(pairs) -> dict:
    """``KEY=VALUE`` strings -> keyword arguments (integers and true/false converted).
    Raises ValueError for a pair without ``=``."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--client-config {pair!r}: expected KEY=VALUE")
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


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        extra = client_config(args.client_config)
        password = read_password(args) if args.command == "set" else None
    except (OSError, ValueError) as exc:
        print(f"kwire scram: {exc}", file=sys.stderr)
        return 2
    # imported here: `kwire scram --help` works without touching the client library
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError
    try:
        admin = KafkaAdminClient(**{"bootstrap_servers": args.bootstrap_server, "client_id": "kwire-scram",
                                    "request_timeout_ms": args.timeout_ms,
                                    "bootstrap_timeout_ms": args.timeout_ms, **extra})
    except (KafkaError, OSError) as exc:
        print(f"kwire scram: cannot reach {args.bootstrap_server}: {exc!r}", file=sys.stderr)
        return 1
    try:
        if args.command == "describe":
            return _describe(admin, args.users)
        return _alter(admin, args, password)
    except (KafkaError, OSError) as exc:
        print(f"kwire scram: {args.command} failed: {exc!r}", file=sys.stderr)
        return 1
    finally:
        admin.close()


def _alter(admin, args, password: str | None) -> int:
    from kafka.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion
    if args.command == "set":
        alteration = UserScramCredentialUpsertion(args.user, args.mechanism, password,
                                                  iterations=args.iterations)
    else:
        alteration = UserScramCredentialDeletion(args.user, args.mechanism)
    errors = admin.alter_user_scram_credentials([alteration])
    failed = {user: message for user, message in errors.items() if message is not None}
    if failed or args.user not in errors:
        message = failed.get(args.user, "no result for the user")
        print(f"Error while updating config for user {args.user}: {message}", file=sys.stderr)
        return 1
    print(f"Completed updating config for user {args.user}.")
    return 0


def _describe(admin, users) -> int:
    code = 0
    for user, d in admin.describe_user_scram_credentials(users).items():
        if d["error"] is not None:
            print(f"Error retrieving SCRAM credential configs for user-principal '{user}': {d['error']}")
            code = 1
            continue
        text = ", ".join(f"{_NAME_OF.get(int(i['mechanism']), i['mechanism'])}=iterations={i['iterations']}"
                         for i in d["credential_infos"])
        print(f"SCRAM credential configs for user-principal '{user}' are {text}")
    return code


if __name__ == "__main__":
    sys.exit(main())
