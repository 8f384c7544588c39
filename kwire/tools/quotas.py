"""``kwire quotas``: describe and alter client quotas, as ``kafka-configs.sh --entity-type
users|clients`` does (DescribeClientQuotas, AlterClientQuotas)::

    kwire quotas describe [--entity-type users|clients (--entity-name N | --entity-default)] ...
    kwire quotas alter --entity-type users --entity-name alice [--entity-type clients --entity-default] \\
        --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048' [--delete-config request_percentage]

``--entity-type`` pairs with the ``--entity-name``/``--entity-default`` after it; users and
clients together name a user's quota for one client id.  ``describe`` without an entity lists
every quota.  Kafka's action flags (``--describe``, ``--alter``) work too, and
``--bootstrap-server`` may come before or after the command.  Values are kafka-configs.sh's:
``producer_byte_rate``/``consumer_byte_rate`` (bytes/s), ``request_percentage`` (percent of one
request thread), ``controller_mutation_rate`` (partitions/s).

Exit codes: 0 done, 1 the broker refused (or is unreachable), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from kwire.tools.common import ToolError, UsageError, client_config, dispatch, emit, tool_parser

ACTIONS = {"--alter": "alter", "--describe": "describe"}
TYPES = {"users": "user", "clients": "client-id", "user": "user", "client-id": "client-id", "client": "client-id"}


class _EntityToken(argparse.Action):
    """Keeps ``--entity-type``/``--entity-name``/``--entity-default`` in their order."""

    def __call__(self, parser, namespace, values, option_string=None):
        tokens = list(getattr(namespace, "entity_tokens", None) or [])
        tokens.append((self.dest, values))
        namespace.entity_tokens = tokens


def build_parser() -> argparse.ArgumentParser:
    parser, command = tool_parser("kwire quotas", __doc__)
    for name, help_text in (("describe", "show client quotas (all, or those of the entities named)"),
                            ("alter", "add, change or delete client quotas of one entity")):
        p = command(name, help_text)
        p.add_argument("--entity-type", dest="type", action=_EntityToken, help="users or clients")
        p.add_argument("--entity-name", dest="name", action=_EntityToken, help="the user or client id")
        p.add_argument("--entity-default", dest="default", action=_EntityToken, nargs=0,
                       help="the default user or client id")
        p.add_argument("--user", dest="user_alias", metavar="USER", help="shorthand for --entity-type users --entity-name USER")
        p.add_argument("--client-id", dest="client_alias", metavar="ID",
                       help="shorthand for --entity-type clients --entity-name ID")
        p.set_defaults(entity_tokens=[])
        if name == "alter":
            p.add_argument("--add-config", metavar="'k1=v1,k2=v2'", help="quotas to set")
            p.add_argument("--delete-config", metavar="'k1,k2'", help="quotas to remove")
            p.add_argument("--validate-only", action="store_true", help="check with the broker, change nothing")
    return parser


def parse_entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """[(entity type, name or None for the default)] in the order given.  Raises UsageError."""
    tokens = list(args.entity_tokens)
    if args.user_alias is not None:
        tokens += [("type", "users"), ("name", args.user_alias)]
    if args.client_alias is not None:
        tokens += [("type", "clients"), ("name", args.client_alias)]
    out, pending = [], None
    for kind, value in tokens:
        if kind == "type":
            if pending is not None:
                raise UsageError(f"--entity-type {pending} needs --entity-name or --entity-default")
            if value not in TYPES:
                raise UsageError(f"--entity-type {value!r}: expected users or clients")
            pending = value
        else:
            if pending is None:
                raise UsageError("--entity-name/--entity-default must follow an --entity-type")
            out.append((TYPES[pending], None if kind == "default" else value))
            pending = None
    if pending is not None:
        raise UsageError(f"--entity-type {pending} needs --entity-name or --entity-default")
    if len({t for t, _ in out}) != len(out):
        raise UsageError("each entity type may be named once")
    return out


def parse_add_config(text: str | None) -> dict[str, float]:
    out = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--add-config {item!r}: expected key=value")
        try:
            out[key.strip()] = float(value.strip())
        except ValueError:
            raise UsageError(f"--add-config {item!r}: {value.strip()!r} is not a number") from None
    return out


def describe_entity(entity: Sequence[tuple[str, str | None]]) -> str:
    words = {"user": "user-principal", "client-id": "client-id"}
    ordered = sorted(entity, key=lambda c: c[0] != "user")
    return ", ".join(f"the default {words.get(t, t)}" if n is None else f"{words.get(t, t)} '{n}'"
                     for t, n in ordered)


Entity = Sequence[tuple[str, "str | None"]]      # (entity type, name or None for the default)


def open_admin(args: argparse.Namespace):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(**client_config(args, client_id="kwire-quotas"))


def send(admin, request):
    """One request through kafka-python's admin client (it has no client-quota methods)."""
    async def call():
        return await admin._manager.send(request)
    return admin._manager.run(call)


def describe_quotas(admin, entity: Entity = ()) -> tuple[int, str | None, list[tuple[list, dict[str, float]]]]:
    """DescribeClientQuotas of exactly ``entity``, or of every entity when it is empty:
    (error code, error message, [(entity as [(type, name)], {key: value})])."""
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R
    components = [R.ComponentData(entity_type=t, match_type=1 if n is None else 0, match=n) for t, n in entity]
    response = send(admin, R(components=components, strict=bool(entity)))
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
               for entry in response.entries or ()]
    return response.error_code, response.error_message, entries


def alter_quotas(admin, entity: Entity, add: dict[str, float], delete: Sequence[str],
                 validate_only: bool = False) -> tuple[int, str | None]:
    """AlterClientQuotas of one entity: set ``add``, remove the keys ``delete``.  Returns the
    entity's (error code, error message); (0, None) when done."""
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R
    ops = [R.EntryData.OpData(key=k, value=v, remove=False) for k, v in add.items()]
    ops += [R.EntryData.OpData(key=k, value=0.0, remove=True) for k in delete]
    request = R(entries=[R.EntryData(entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                                     ops=ops)], validate_only=validate_only)
    for entry in send(admin, request).entries:
        if entry.error_code:
            return entry.error_code, entry.error_message
    return 0, None


def describe(args: argparse.Namespace) -> None:
    entity = parse_entity(args)
    with open_admin(args) as admin:
        code, message, entries = describe_quotas(admin, entity)
    if code:
        raise ToolError(f"describing quotas failed: error {code}: {message}")
    rows, document = [], []
    for ent, values in entries:
        document.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in ent], "values": values})
        rows.append((describe_entity(ent), ",".join(f"{k}={v}" for k, v in sorted(values.items()))))
    if args.output == "json":
        emit(args, document, [], [])
        return
    for who, configs in rows:
        print(f"Quota configs for {who} are {configs}")


def alter(args: argparse.Namespace) -> None:
    entity = parse_entity(args)
    if not entity:
        raise UsageError("--alter needs an entity (--entity-type users|clients with --entity-name or --entity-default)")
    add = parse_add_config(args.add_config)
    delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not add and not delete:
        raise UsageError("--alter needs --add-config or --delete-config")
    with open_admin(args) as admin:
        code, message = alter_quotas(admin, entity, add, delete, args.validate_only)
    who = describe_entity(entity)
    if code:
        raise ToolError(f"Error while updating config for {who}: error {code}: {message}")
    if args.output == "json":
        emit(args, {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "set": add,
                    "deleted": delete, "validate_only": args.validate_only}, [], [])
    else:
        print(f"Completed updating config for {who}.")


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(argv, build_parser(), ACTIONS, {"describe": describe, "alter": alter})


if __name__ == "__main__":
    sys.exit(main())
