"""``kwire configs``: describe and alter topic, broker and client-metrics configs, as kafka-configs.sh does.

    kwire configs describe --entity-type topics|brokers|client-metrics [--entity-name X | --entity-default] [--all]
    kwire configs alter --entity-type topics|brokers|client-metrics --entity-name X | --entity-default
                        [--add-config k=v,k2=[v1,v2]] [--add-config-file F] [--delete-config k,k2]

Kafka's spelling works too (``--describe``, ``--alter``, ``--topic X`` for ``--entity-type
topics --entity-name X``, ``--broker N``).  Every command takes ``--bootstrap-server``,
``--command-config`` and ``--output table|json`` (kwire.tools.common).

``describe`` lists the dynamic configs of each entity (a topic's overrides; a broker's dynamic
configs) -- with ``--all`` every config, defaults included -- as a table of name, value,
source, sensitive and read-only; ``--output json`` adds each config's synonyms.  Without
``--entity-name`` it describes every topic, or every broker of the cluster and the brokers'
default.  Brokers take
``--entity-default`` (or ``--broker-defaults``) for the cluster-wide default every broker
falls back to.

``alter`` is one IncrementalAlterConfigs: SET for each ``--add-config`` entry and DELETE for
each ``--delete-config`` key.  ``--add-config`` follows kafka-configs.sh: entries separated by
commas, a list value in square brackets (``cleanup.policy=[compact,delete]``); deleting a
config that is not set is refused ("Invalid config(s): ..."), as Kafka's tool refuses it.
A broker applies its new dynamic configs at once; a key that cannot change at runtime is
refused by the broker ("Cannot update these configs dynamically", as Kafka).

``client-metrics`` entities are the KIP-714 telemetry subscriptions (kafka-client-metrics.sh's):
``metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.]``, ``interval.ms`` and
``match=[client_id=app.*]``; deleting all of a subscription's configs deletes it.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Sequence

from kwire.tools.common import (ToolError, UsageError, add_common_arguments, client_config, dispatch, emit, print_table,
                     read_properties_file)
from kwire.tools.topics import check

ACTIONS = {"--describe": "describe", "--alter": "alter"}
RESOURCE = {"topics": "TOPIC", "brokers": "BROKER", "client-metrics": "CLIENT_METRICS"}
SINGULAR = {"topics": "topic", "brokers": "broker", "client-metrics": "client-metrics"}
# kafka-configs.sh's ConfigCommand: a separator counts only outside square brackets
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_ENTRY_SEPARATOR = re.compile("," + _OUTSIDE_BRACKETS)
_KEY_VALUE = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS)


# -- arguments --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kwire configs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in (("describe", "show the configs of topics or brokers"),
                            ("alter", "set or delete configs of a topic or broker")):
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_common_arguments(p)
        p.add_argument("--entity-type", choices=sorted(RESOURCE), help="what the entity is")
        p.add_argument("--entity-name", help="the topic name or broker id")
        p.add_argument("--topic", help="same as --entity-type topics --entity-name TOPIC")
        p.add_argument("--broker", help="same as --entity-type brokers --entity-name ID")
        p.add_argument("--entity-default", "--broker-defaults", dest="entity_default", action="store_true",
                       help="brokers: the cluster-wide default (Kafka's <default> entity)")
        if name == "describe":
            p.add_argument("--all", action="store_true", help="every config, defaults included")
        else:
            p.add_argument("--add-config", action="append", default=[], metavar="K=V,K2=[V1,V2]",
                           help="configs to set (repeatable)")
            p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
            p.add_argument("--delete-config", action="append", default=[], metavar="K,K2",
                           help="configs to remove (repeatable)")
    return parser


def entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name or None) from --entity-type/--entity-name or --topic/--broker."""
    chosen = [(t, n) for t, n in (("topics", args.topic), ("brokers", args.broker)) if n is not None]
    if args.entity_type is not None:
        chosen.append((args.entity_type, args.entity_name))
    elif args.entity_name is not None:
        raise UsageError("--entity-name needs --entity-type topics|brokers")
    if len(chosen) != 1:
        raise UsageError("name one entity type: --entity-type topics|brokers, --topic or --broker")
    kind, name = chosen[0]
    if args.entity_default:
        if kind != "brokers" or name is not None:
            raise UsageError("--entity-default names the brokers' default: use it with --entity-type brokers "
                             "and without --entity-name")
        return kind, ""
    if kind == "client-metrics" and name == "":
        raise UsageError("--entity-name: a client-metrics subscription needs a name")
    if kind == "brokers" and name is not None and not name.isdigit():
        raise UsageError(f"--entity-name {name!r}: a broker is named by its id (an integer)")
    return kind, name


def parse_add_config(entries: Sequence[str], file: str | None) -> dict[str, str]:
    """kafka-configs.sh's --add-config (``k=v,k2=[v1,v2]``) and --add-config-file."""
    configs = read_properties_file(file, "--add-config-file")
    for text in entries:
        for item in _ENTRY_SEPARATOR.split(text):
            pair = _KEY_VALUE.split(item)
            if len(pair) != 2 or not pair[0].strip():
                raise UsageError('Invalid entity config: all configs to be added must be in the format '
                                 '"key=val" or "key=[val1,val2]".')
            configs[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return configs


def parse_delete_config(entries: Sequence[str]) -> list[str]:
    return [k.strip() for text in entries for k in text.split(",") if k.strip()]


# -- describe ---------------------------------------------------------------------------------
def open_admin(args: argparse.Namespace):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(**client_config(args, client_id="kwire-configs"))


def entity_names(admin, kind: str, name: str | None) -> list[str]:
    """The entities to describe; ToolError for a topic or broker the cluster does not have."""
    if kind == "brokers" and name == "":
        return [name]                 # the cluster default
    if kind == "brokers":
        live = sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
        if name is not None and int(name) not in live:
            raise ToolError(f"Broker {name} is not a live broker of the cluster "
                            f"(live: {','.join(map(str, live))})")
        return [name] if name is not None else [str(b) for b in live] + [""]    # and the default, as Kafka
    if kind == "client-metrics":        # ListConfigResources (API 74): the subscriptions
        return [name] if name is not None else sorted(admin.list_config_resources(["CLIENT_METRICS"])
                                                      .get("client_metrics", []))
    if name is None:
        return sorted(admin.list_topics())
    [topic] = admin.describe_topics([name])
    check(topic["error_code"], f"Topic '{name}' does not exist." if topic["error_code"] == 3 else None)
    return [name]


def dynamic_source(kind: str, name: str | None = None) -> str:
    """The config source kafka-configs.sh --describe shows without --all."""
    if kind == "topics":
        return "DYNAMIC_TOPIC_CONFIG"
    if kind == "client-metrics":
        return "DYNAMIC_CLIENT_METRICS_CONFIG"
    return "DYNAMIC_DEFAULT_BROKER_CONFIG" if name == "" else "DYNAMIC_BROKER_CONFIG"


def entity_title(kind: str, name: str) -> str:
    return "the brokers' default" if (kind, name) == ("brokers", "") else f"{SINGULAR[kind]} {name}"


def to_any_broker(admin, request):
    """The answer to ``request`` from any broker.  kafka-python's admin sends a BROKER
    resource to the broker its name numbers, so it refuses the cluster default's empty name,
    which every broker serves (Kafka's admin sends it to any node): the request goes out through
    the same admin client's connection manager, with its security settings and versions."""
    return admin._manager.run(admin._manager.send, request)


def describe_resources(admin, kind: str, names: list[str]) -> dict:
    """{resource type: {name: {config: entry}}} of the named resources (``""``: the brokers' default)."""
    from kafka.admin import ConfigResource
    named = [ConfigResource(RESOURCE[kind], n) for n in names if n != ""]
    found = admin.describe_configs(named, include_synonyms=True, config_filter="all") if named else {}
    if "" in names:
        request = admin._describe_configs_request([ConfigResource(RESOURCE[kind], "")], include_synonyms=True)
        default = admin._describe_configs_process_responses([to_any_broker(admin, request)], "all")
        for resource_type, by_name in default.items():
            found.setdefault(resource_type, {}).update(by_name)
    return found


def current_configs(admin, kind: str, names: list[str], everything: bool) -> dict[str, list[dict]]:
    """{name: [config entry]}, each entry name, value, source, sensitive, read_only, synonyms."""
    by_name = describe_resources(admin, kind, names).get(RESOURCE[kind].lower(), {})
    out = {}
    for n in names:
        out[n] = [{"name": key, "value": c["value"], "source": c["config_source"], "sensitive": c["is_sensitive"],
                   "read_only": c["read_only"], "synonyms": c.get("synonyms", [])}
                  for key, c in sorted(by_name.get(n, {}).items())
                  if everything or c["config_source"] == dynamic_source(kind, n)]
    return out


def describe(args: argparse.Namespace) -> None:
    kind, name = entity(args)
    with open_admin(args) as admin:
        configs = current_configs(admin, kind, entity_names(admin, kind, name), args.all)
    if args.output == "json":
        emit(args, {"entity_type": kind, "entities": [{"name": n, "configs": c} for n, c in configs.items()]},
             [], [])
        return
    which = "All" if args.all else "Dynamic"
    for n, entries in configs.items():
        if not entries:
            print(f"No dynamic configs for {entity_title(kind, n)} (--all lists every config).")
            continue
        print_table(["Name", "Value", "Source", "Sensitive", "ReadOnly"],
                    [[c["name"], "(sensitive)" if c["sensitive"] and c["value"] is None else c["value"],
                      c["source"], str(c["sensitive"]).lower(), str(c["read_only"]).lower()] for c in entries],
                    title=f"{which} configs for {entity_title(kind, n)}")


# -- alter ------------------------------------------------------------------------------------
def alter(args: argparse.Namespace) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource
    kind, name = entity(args)
    if name is None:
        raise UsageError(f"an entity name must be specified with alter of {kind}")
    to_set = parse_add_config(args.add_config, args.add_config_file)
    to_delete = parse_delete_config(args.delete_config)
    if not to_set and not to_delete:
        raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be "
                         "specified with alter")
    with open_admin(args) as admin:
        if to_delete:
            names = entity_names(admin, kind, name)
            present = {c["name"] for c in current_configs(admin, kind, names, False)[name]}
            missing = [k for k in to_delete if k not in present]
            if missing:
                raise ToolError(f"Invalid config(s): {','.join(missing)}")
        ops = {k: (AlterConfigOp.DELETE, None) for k in to_delete}
        ops.update({k: (AlterConfigOp.SET, v) for k, v in to_set.items()})
        resource = ConfigResource(RESOURCE[kind], name, ops)
        if name == "":
            request = admin._alter_configs_request([resource], incremental=True)
            result = admin._alter_configs_process_responses(to_any_broker(admin, request).responses)
        else:
            result = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    outcome = result.get(RESOURCE[kind].lower(), {}).get(name, "OK")
    if outcome != "OK":
        # kafka-python's "[Error 40] InvalidConfigurationError: <the broker's message>"
        message = re.sub(r"^\[Error \d+\] \w+: ", "", outcome)
        raise ToolError(outcome if message in ("", "None") else message)
    if args.output == "json":
        emit(args, {"entity_type": kind, "entity_name": name, "set": to_set, "deleted": to_delete}, [], [])
    else:
        print(f"Completed updating config for {entity_title(kind, name)}.")


COMMANDS = {"describe": describe, "alter": alter}


def main(argv: Sequence[str] | None = None) -> int:
    """``kwire configs ...``; returns the exit code (0, 1 refused/unreachable, 2 bad arguments)."""
    return dispatch(argv, build_parser(), ACTIONS, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
