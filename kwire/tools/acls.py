"""``kwire acls``: list, add and remove ACLs, as kafka-acls.sh does (through the broker's
DescribeAcls, CreateAcls and DeleteAcls; the broker needs an authorizer).

    kwire acls list [RESOURCE ...] [--resource-pattern-type any|match|literal|prefixed]
                    [--principal P ...]
    kwire acls add (--allow-principal P ... | --deny-principal P ...) [--allow-host H ...]
                   [--deny-host H ...] (--operation OP ... RESOURCE ... | --producer | --consumer)
                   [--idempotent] [--resource-pattern-type literal|prefixed]
    kwire acls remove [the options of add] [--force]

RESOURCE is any of ``--topic T``, ``--group G``, ``--cluster``, ``--transactional-id X`` and
``--delegation-token D``, each repeatable.  Kafka's spelling works too: ``kwire acls --add
--allow-principal User:alice --operation Read --topic orders``.  Every command takes
``--bootstrap-server``, ``--command-config`` (an admin's SASL settings, usually) and ``--output
table|json`` (kwire.tools.common).

As in kafka-acls.sh: a principal is ``Type:name`` (``User:alice``, ``User:*`` for everyone);
``--allow-host``/``--deny-host`` default to ``*``; ``--operation`` defaults to ``All`` when
adding; names match Kafka's (``Read``, ``IdempotentWrite``; case and ``_`` do not matter).
``--producer`` grants Write, Describe and Create on each ``--topic``, Write and Describe on each
``--transactional-id``, and with ``--idempotent`` IdempotentWrite on the cluster; ``--consumer``
grants Read and Describe on each ``--topic`` and Read on each ``--group`` (it needs both).
``list`` without a resource lists every ACL; with one, the pattern type defaults to literal.

``remove`` deletes the ACLs matching its filters; a filter leaves out what is not given (no
principal: every principal; no ``--operation``: every operation; no host: every host).  It asks
for confirmation on a terminal; with standard input not a terminal it needs ``--force``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Iterable, NamedTuple, Sequence

from kwire.tools.common import ToolError, UsageError, client_config, dispatch, emit, tool_parser

ACTIONS = {"--list": "list", "--add": "add", "--remove": "remove"}
CLUSTER_NAME = "kafka-cluster"
COLUMNS = ["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "NAME", "PATTERN"]
# option dest -> Kafka's ResourceType name
RESOURCE_OPTIONS = {"topic": "TOPIC", "group": "GROUP", "transactional_id": "TRANSACTIONAL_ID",
                    "delegation_token": "DELEGATION_TOKEN"}
# Kafka's AclEntry.supportedOperations (ALL goes everywhere)
VALID_OPERATIONS = {
    "TOPIC": {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    "GROUP": {"READ", "DESCRIBE", "DELETE"},
    "CLUSTER": {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"},
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE"},
    "DELEGATION_TOKEN": {"DESCRIBE"},
}


class Acl(NamedTuple):
    """One ACL (or, with ``None`` for "any", one filter), in Kafka's enum names."""
    principal: str | None
    host: str | None
    operation: str
    permission: str
    resource_type: str
    name: str | None
    pattern: str

    def document(self) -> dict:
        return {"principal": self.principal, "host": self.host, "operation": self.operation,
                "permission": self.permission, "resource_type": self.resource_type, "name": self.name,
                "pattern": self.pattern}


# -- arguments --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser, command = tool_parser("kwire acls", __doc__)
    for name, help_text in (("list", "list ACLs (all, or those of the resources given)"),
                            ("add", "add ACLs"), ("remove", "remove the ACLs matching the options")):
        p = command(name, help_text)
        add_resource_arguments(p, patterns=("literal", "prefixed") if name == "add"
                               else ("any", "match", "literal", "prefixed"))
        if name == "list":
            p.add_argument("--principal", action="append", default=[], help="only this principal's ACLs")
            continue
        for kind in ("allow", "deny"):
            p.add_argument(f"--{kind}-principal", action="append", default=[], metavar="TYPE:NAME",
                           help=f"the principal to {kind} (repeatable; User:* is every user)")
            p.add_argument(f"--{kind}-host", action="append", default=[], metavar="HOST",
                           help=f"the host {kind}ed from (repeatable; default *)")
        p.add_argument("--operation", action="append", default=[], metavar="OP",
                       help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                            "AlterConfigs, IdempotentWrite, All (repeatable)")
        p.add_argument("--producer", action="store_true", help="what a producer of --topic needs")
        p.add_argument("--consumer", action="store_true", help="what a consumer of --topic in --group needs")
        p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
        if name == "remove":
            p.add_argument("--force", action="store_true", help="do not ask for confirmation")
    return parser


def add_resource_arguments(p: argparse.ArgumentParser, patterns: Sequence[str]) -> None:
    p.add_argument("--topic", action="append", default=[], help="a topic (* is every topic)")
    p.add_argument("--group", action="append", default=[], help="a consumer group (* is every group)")
    p.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument("--transactional-id", action="append", default=[], help="a transactional id")
    p.add_argument("--delegation-token", action="append", default=[], help="a delegation token id")
    p.add_argument("--resource-pattern-type", choices=patterns, type=str.lower, default=None,
                   help="how NAME matches: literal (default), prefixed" +
                        (", or any / match (a name's literal, prefixed and * ACLs)" if "any" in patterns else ""))


def operation_name(text: str) -> str:
    """Kafka's operation name (``READ``, ``IDEMPOTENT_WRITE``) for ``Read``, ``idempotent-write``,
    ``IdempotentWrite``...  Raises UsageError."""
    from kafka.admin import ACLOperation
    wanted = text.strip().replace("_", "").replace("-", "").upper()
    for op in ACLOperation:
        if op.name not in ("UNKNOWN", "ANY") and op.name.replace("_", "") == wanted:
            return op.name
    raise UsageError(f"--operation {text!r} is not an operation (Read, Write, Create, Delete, Alter, Describe, "
                     "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, "
                     "DescribeTokens, All)")


def principals(values: Iterable[str]) -> list[str]:
    out = []
    for value in values:
        kind, sep, name = value.strip().partition(":")
        if not sep or not kind or not name:
            raise UsageError(f"principal {value!r} is not in principalType:name format (User:alice)")
        out.append(value.strip())
    return out


def resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(resource type, name) of every resource option, in the order Kafka's tool takes them."""
    found = [(kind, value.strip()) for dest, kind in RESOURCE_OPTIONS.items() for value in getattr(args, dest)]
    if args.cluster:
        found.append(("CLUSTER", CLUSTER_NAME))
    return found


def check_arguments(args: argparse.Namespace) -> None:
    """kafka-acls.sh's checks of add and remove.  Raises UsageError."""
    if args.producer or args.consumer:
        if args.operation or args.deny_principal or args.deny_host:
            raise UsageError("--producer and --consumer take no --operation, --deny-principal or --deny-host")
        if args.producer and not args.topic:
            raise UsageError("With --producer you must specify a --topic")
        if args.consumer and (not args.topic or not args.group or (not args.producer and args.cluster)):
            raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster option")
    elif not resources(args):
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --transactional-id <id> or --delegation-token <id>")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.command == "add" and not (args.allow_principal or args.deny_principal):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")


# -- the ACLs the options mean ----------------------------------------------------------------
def role_operations(args: argparse.Namespace) -> list[tuple[str, str, list[str]]]:
    """(resource type, name, operations) of ``--producer``/``--consumer`` (kafka-acls.sh's sets),
    or of the resources given with ``--operation`` (``None``: the command's default)."""
    if not (args.producer or args.consumer):
        ops = [operation_name(o) for o in args.operation] or None
        return [(kind, name, ops) for kind, name in resources(args)]
    out = []
    if args.producer:
        out += [("TOPIC", t.strip(), ["WRITE", "DESCRIBE", "CREATE"]) for t in args.topic]
        out += [("TRANSACTIONAL_ID", x.strip(), ["WRITE", "DESCRIBE"]) for x in args.transactional_id]
        if args.idempotent:
            out.append(("CLUSTER", CLUSTER_NAME, ["IDEMPOTENT_WRITE"]))
    if args.consumer:
        out += [("TOPIC", t.strip(), ["READ", "DESCRIBE"]) for t in args.topic]
        out += [("GROUP", g.strip(), ["READ"]) for g in args.group]
    return out


def check_operations(kind: str, ops: Iterable[str]) -> None:
    """Kafka's operation names ``ops`` (``ANY`` for a filter) on resource type ``kind``.
    Raises UsageError for an operation the resource type does not have."""
    if set(ops) - VALID_OPERATIONS[kind] - {"ALL", "ANY"}:
        raise UsageError(f"ResourceType {kind} only supports operations "
                         f"{','.join(sorted(VALID_OPERATIONS[kind] | {'ALL'}))}")


def wanted_acls(args: argparse.Namespace) -> list[Acl]:
    """The ACLs ``add`` creates, or the filters ``remove`` deletes with (``None`` fields: any).
    Raises UsageError for an operation the resource type does not have."""
    adding = args.command == "add"
    pattern = (args.resource_pattern_type or "literal").upper()
    grants = [(p, "ALLOW", args.allow_host or ["*" if adding else None]) for p in principals(args.allow_principal)]
    grants += [(p, "DENY", args.deny_host or ["*" if adding else None]) for p in principals(args.deny_principal)]
    if not grants:                  # remove without a principal: everyone's
        grants = [(None, "ANY", [None])]
    out: list[Acl] = []
    for kind, name, ops in role_operations(args):
        ops = ops or (["ALL"] if adding else ["ANY"])
        check_operations(kind, ops)
        for principal, permission, hosts in grants:
            out += [Acl(principal, host, op, permission, kind, name, pattern) for op in ops for host in hosts]
    return list(dict.fromkeys(out))          # Kafka's tool builds a set


def to_kafka_python(acl: Acl, *, concrete: bool):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourcePatternFilter, ResourceType)
    kind = ResourceType[acl.resource_type]
    pattern = ACLResourcePatternType[acl.pattern]
    make, resource = (ACL, ResourcePattern) if concrete else (ACLFilter, ResourcePatternFilter)
    return make(principal=acl.principal, host=acl.host, operation=ACLOperation[acl.operation],
                permission_type=ACLPermissionType[acl.permission],
                resource_pattern=resource(kind, acl.name, pattern))


def from_kafka_python(acl) -> Acl:
    r = acl.resource_pattern
    return Acl(acl.principal, acl.host, acl.operation.name, acl.permission_type.name, r.resource_type.name,
               r.resource_name, r.pattern_type.name)


def show(args: argparse.Namespace, key: str, acls: Iterable[Acl]) -> None:
    acls = sorted(set(acls), key=lambda a: (a.resource_type, a.name or "", a.pattern, a.principal or "",
                                             a.host or "", a.operation, a.permission))
    emit(args, {key: [a.document() for a in acls]}, COLUMNS,
         [[a.principal, a.host, a.operation, a.permission, a.resource_type, a.name, a.pattern] for a in acls])


def open_admin(args: argparse.Namespace):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(**client_config(args, client_id="kwire-acls"))


# -- list, add, remove ------------------------------------------------------------------------
def list_acls(args: argparse.Namespace) -> None:
    pattern = (args.resource_pattern_type or ("literal" if resources(args) else "any")).upper()
    targets = resources(args) or [("ANY", None)]
    filters = [Acl(p, None, "ANY", "ANY", kind, name, pattern)
               for kind, name in targets for p in principals(args.principal) or [None]]
    found = []
    with open_admin(args) as admin:
        for f in filters:
            acls, _ = admin.describe_acls(to_kafka_python(f, concrete=False))
            found += [from_kafka_python(a) for a in acls]
    show(args, "acls", found)


def add(args: argparse.Namespace) -> None:
    check_arguments(args)
    acls = wanted_acls(args)
    with open_admin(args) as admin:
        result = admin.create_acls([to_kafka_python(a, concrete=True) for a in acls])
    if result["failed"]:
        error = result["failed"][0]
        raise ToolError(f"{len(result['failed'])} of {len(acls)} ACLs not added: "
                        f"{error.__name__}: {error.description}")
    show(args, "added", acls)


def remove(args: argparse.Namespace) -> None:
    check_arguments(args)
    filters = wanted_acls(args)
    if not args.force and not confirmed(filters):
        print("Nothing removed.", file=sys.stderr)
        return
    with open_admin(args) as admin:
        results = admin.delete_acls([to_kafka_python(f, concrete=False) for f in filters])
    removed = [from_kafka_python(a) for _, matched, _ in results for a in matched]
    failed = [error for _, _, error in results if error.errno]
    if failed:
        raise ToolError(f"{failed[0].__name__}: {failed[0].description}")
    show(args, "removed", removed)


def confirmed(filters: list[Acl]) -> bool:
    """Ask on the terminal, as kafka-acls.sh does without --force.  Raises UsageError when
    standard input is not a terminal (a script must say --force)."""
    if not sys.stdin.isatty():
        raise UsageError("remove asks for confirmation and standard input is not a terminal: add --force")
    print("Are you sure you want to remove the ACLs matching:", file=sys.stderr)
    for f in filters:
        print(f"  principal={f.principal or 'any'} host={f.host or 'any'} operation={f.operation} "
              f"permission={f.permission} on {f.resource_type} {f.name} ({f.pattern})", file=sys.stderr)
    print("(y/n) ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


COMMANDS = {"list": list_acls, "add": add, "remove": remove}


def main(argv: Sequence[str] | None = None) -> int:
    """``kwire acls ...``; returns the exit code (0, 1 refused/unreachable, 2 bad arguments)."""
    return dispatch(argv, build_parser(), ACTIONS, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
