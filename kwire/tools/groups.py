"""``kwire groups``: Kafka's kafka-consumer-groups.sh, with readable tables and ``--output json``.

    kwire groups list [--state stable,empty]
    kwire groups describe --group G [--members [--verbose] | --offsets [--verbose] | --state]
    kwire groups reset-offsets --group G --topic T[:P,P] | --all-topics
                               --to-earliest | --to-latest | --to-current | --to-offset N
                               | --shift-by N | --to-datetime ISO | --by-duration PnDTnHnMnS
                               [--dry-run | --execute]
    kwire groups delete --group G [--group H]
    kwire groups delete-offsets --group G --topic T[:P,P]

Kafka's spelling works too (``--describe --group G``).  A Kafka client built on kafka-python's
admin client, so it works against any Kafka-compatible broker.  Kafka's rules and messages:
offsets are reset only while a group is inactive (Empty, or unknown), targets are clamped
into the log, ``reset-offsets`` without ``--execute`` is a dry run.  Notes such as "has no
active members" and errors go to stderr, so stdout holds just the table or the JSON document.
A share group's start offsets are reset and deleted as kafka-share-groups.sh does it, only
while it is empty (AlterShareGroupOffsets; DeleteShareGroupOffsets of whole topics:
kwire.tools.share_offsets).  Exit codes as in kwire.tools.common; 1 also when a named group
does not exist, a reset is refused or a deletion failed.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from kafka.structs import OffsetAndMetadata, TopicPartition

from kwire.tools.common import (ToolError, UsageError, add_common_arguments, client_config, emit, kafka_style,
                     options_first, print_table, progress, run)
from kwire.tools.group_offsets import Scenario, parse_datetime, parse_duration, parse_topic_arg, plan_offsets, tp_name
from kwire.tools.group_types import consumer_group_members, describe_share_offsets, group_types
from kwire.tools.share_offsets import (alter_share_offsets, cmd_delete_share_offsets, share_reset_refusal,
                                       share_start_offsets)

COMMANDS = ("list", "describe", "reset-offsets", "delete", "delete-offsets")
KAFKA_ACTIONS = {f"--{c}": c for c in COMMANDS}      # kafka-consumer-groups.sh --describe ...
# Kafka's GroupState.groupStatesForType(CONSUMER), the states --state accepts
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
INACTIVE = ("Empty", "Dead")
COMMIT_CHUNK = 500            # partitions per OffsetCommit, so a progress bar can move
DEFAULT_TIMEOUT_MS = 5000     # Kafka's --timeout default


# -- what the broker says about a group -------------------------------------------------
@dataclass
class Member:
    consumer_id: str
    group_instance_id: str | None
    host: str
    client_id: str
    assignment: list[TopicPartition]


@dataclass
class Group:
    group: str
    state: str
    protocol_type: str
    assignment_strategy: str
    members: list[Member] = field(default_factory=list)

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


def describe_groups(admin, group_ids: Sequence[str]) -> dict[str, Group]:
    """DescribeGroups; an unknown group is Dead (old brokers) or GROUP_ID_NOT_FOUND (v6+):
    both become state "Dead".  Raises ToolError for any other group error."""
    out = {}
    for group_id, d in admin.describe_groups(list(group_ids)).items():
        error = d.get("error")
        if error and "GroupIdNotFound" not in error:
            raise ToolError(f"group '{group_id}': {error}")
        members = [Member(m["member_id"], m.get("group_instance_id"), m["client_host"], m["client_id"],
                          _assignment(m.get("member_assignment")))
                   for m in d.get("members", [])]
        out[group_id] = Group(group_id, "Dead" if error else d["group_state"], d.get("protocol_type", ""),
                              d.get("protocol_data", ""), members)
    return out


def group_states(admin, group_ids: Sequence[str], types: dict[str, str] | None = None) -> dict[str, str]:
    """Each group's state, from the describe call of its type (``types``: group_types' answer;
    DescribeGroups answers only classic groups, and an active KIP-848 group must not look Dead)."""
    types = group_types(admin) if types is None else types
    states = {g: d.state for g, d in describe_groups(
        admin, [g for g in group_ids if types.get(g) not in ("consumer", "share")]).items()}
    for group_id in group_ids:
        if types.get(group_id) in ("consumer", "share"):
            states[group_id] = consumer_group_members(admin, group_id, share=types[group_id] == "share")[0]
    return states


def _assignment(decoded: Any) -> list[TopicPartition]:
    if not isinstance(decoded, dict):     # not the consumer protocol (e.g. Kafka Connect): unreadable
        return []
    return sorted(TopicPartition(a["topic"], p) for a in decoded.get("assigned_partitions", [])
                  for p in a["partitions"])


def committed_offsets(admin, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
    return dict(admin.list_group_offsets({group_id: None}).get(group_id, {}))


def _partition_leaders(admin, topics: Iterable[str]) -> dict[str, dict[int, int]]:
    """topic -> {partition: leader id} for the topics that exist (Metadata)."""
    topics = sorted(set(topics))
    if not topics:
        return {}
    return {t["name"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            for t in admin.describe_topics(topics) if t["error_code"] == 0}


def log_offsets(admin, partitions: Iterable[TopicPartition], spec) -> dict[TopicPartition, int]:
    """ListOffsets ``spec`` (-1 latest, -2 earliest, or a timestamp) for the partitions that
    exist and have a leader; the others are left out (shown as "-", as Kafka does)."""
    partitions = set(partitions)
    leaders = _partition_leaders(admin, (tp.topic for tp in partitions))
    known = [tp for tp in partitions if leaders.get(tp.topic, {}).get(tp.partition, -1) >= 0]
    if not known:
        return {}
    return {tp: r.offset for tp, r in admin.list_partition_offsets({tp: spec for tp in known}).items()}


def find_coordinator(admin, group_id: str, brokers: dict[int, dict]) -> dict[str, Any]:
    """The group's coordinator (FindCoordinator).  kafka-python 3.0 has no public call for it,
    so this goes through the admin client's own lookup."""
    node_id = admin._manager.run(admin._find_coordinator_id, group_id)
    broker = brokers.get(node_id, {})
    return {"id": node_id, "host": broker.get("host"), "port": broker.get("port")}


# -- shared bits ---------------------------------------------------------------------------
def _error(message: str) -> None:
    print(f"Error: {message}", file=sys.stderr)


def _group_ids(admin, args) -> list[str]:
    if args.all_groups:
        return sorted(g["group_id"] for g in admin.list_groups())
    return list(dict.fromkeys(args.group))


def _state_note(group: Group) -> bool:
    """Kafka's note on a group's state (stderr); False when there is nothing to show."""
    if not group.exists:
        _error(f"Consumer group '{group.group}' does not exist.")
        return False
    if group.state == "Empty":
        print(f"Consumer group '{group.group}' has no active members.", file=sys.stderr)
    elif group.state != "Stable":
        print(f"Warning: Consumer group '{group.group}' is rebalancing.", file=sys.stderr)
    return True


def _open_admin(args):
    from kafka.admin import KafkaAdminClient
    config = client_config(args)
    config.setdefault("client_id", "kwire-groups")
    if args.timeout is not None or "request_timeout_ms" not in config:
        config["request_timeout_ms"] = args.timeout or DEFAULT_TIMEOUT_MS
    config["bootstrap_timeout_ms"] = config["request_timeout_ms"]
    return KafkaAdminClient(**config)


def _execute(args) -> int:
    """Check what can be checked without a broker (UsageError), then run the command."""
    if args.command == "list":
        args.states = _states_filter(args.state)
    if args.command == "reset-offsets":
        args.scenario = _scenario(args)
    if args.command == "delete-offsets" and len(args.group) != 1:
        raise UsageError("delete-offsets takes one --group")
    if args.command in ("reset-offsets", "delete-offsets"):
        try:
            args.topic_specs = [parse_topic_arg(t) for t in args.topic or ()]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    admin = _open_admin(args)
    try:
        return args.handler(admin, args)
    finally:
        admin.close()


# -- list ----------------------------------------------------------------------------------
def _states_filter(text: str | None) -> set[str] | None:
    if not text:
        return None
    by_name = {s.lower(): s for s in STATES}
    wanted = {by_name.get(s.strip().lower().replace("_", "")) for s in text.split(",")}
    if None in wanted:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return wanted


def cmd_list(admin, args) -> int:
    wanted = args.states
    groups = sorted((g for g in admin.list_groups() if wanted is None or g["group_state"] in wanted),
                    key=lambda g: g["group_id"])
    document = [{"group": g["group_id"], "type": g.get("group_type") or "classic", "state": g["group_state"],
                 "protocol_type": g["protocol_type"]} for g in groups]
    emit(args, document, ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
         [[d["group"], d["type"], d["state"], d["protocol_type"] or None] for d in document])
    return 0


# -- describe ------------------------------------------------------------------------------
OFFSET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID"]
_OFFSET_KEYS = ["group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                "consumer_id", "host", "client_id"]


def cmd_describe(admin, args) -> int:
    group_ids = _group_ids(admin, args)
    types = group_types(admin)
    groups = describe_groups(admin, [g for g in group_ids if types.get(g) not in ("consumer", "share")])
    for group_id in group_ids:         # KIP-848 and share groups: DescribeGroups v6 does not describe them
        if types.get(group_id) in ("consumer", "share"):
            state, members = consumer_group_members(admin, group_id, share=types[group_id] == "share")
            groups[group_id] = Group(group_id, state, types[group_id], "", [
                Member(m["consumer_id"], m["group_instance_id"], m["host"], m["client_id"], m["assignment"])
                for m in members])
    brokers = {b["broker_id"]: b for b in admin.describe_cluster()["brokers"]} if args.state else {}
    document, missing = [], False
    for group_id in sorted(group_ids):
        group = groups[group_id]
        shown = _state_note(group)
        missing |= not shown
        if not shown:
            document.append({"group": group_id, "state": group.state,
                             "error": f"Consumer group '{group_id}' does not exist."})
        elif types.get(group_id) == "share" and not (args.members or args.state):
            document.append(describe_share_offsets(admin, group_id, args))
        elif args.members:
            document.append(_describe_members(group, args))
        elif args.state:
            document.append(_describe_state(admin, group, brokers, args))
        else:
            document.append(_describe_offsets(admin, group, args))
    if args.output == "json":
        emit(args, document, [], [])
    return 1 if missing and not args.all_groups else 0


def _describe_offsets(admin, group: Group, args) -> dict:
    committed = committed_offsets(admin, group.group)
    rows, assigned = [], set()
    for member in sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment)):
        assigned.update(member.assignment)
        rows += [(tp, member) for tp in member.assignment]
    rows += [(tp, None) for tp in sorted(set(committed) - assigned)]
    log_end = log_offsets(admin, (tp for tp, _ in rows), -1)
    partitions = []
    for tp, member in rows:
        current = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        end = log_end.get(tp)
        epoch = committed[tp].leader_epoch if tp in committed else None
        partitions.append({
            "group": group.group, "topic": tp.topic, "partition": tp.partition, "current_offset": current,
            "log_end_offset": end, "lag": end - current if None not in (current, end) else None,
            "leader_epoch": epoch if epoch is not None and epoch >= 0 else None,
            "consumer_id": member.consumer_id if member else None, "host": member.host if member else None,
            "client_id": member.client_id if member else None})
    if args.output == "table" and partitions:
        columns, keys = list(OFFSET_COLUMNS), list(_OFFSET_KEYS)
        if args.verbose:
            columns.insert(3, "LEADER-EPOCH")
            keys.insert(3, "leader_epoch")
        print_table(columns, [[p[k] for k in keys] for p in partitions])
    return {"group": group.group, "state": group.state, "partitions": partitions}


def _assignment_text(assignment: Sequence[TopicPartition]) -> str | None:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or None


def _describe_members(group: Group, args) -> dict:
    members = [{"group": group.group, "consumer_id": m.consumer_id, "group_instance_id": m.group_instance_id,
                "host": m.host, "client_id": m.client_id, "partitions": len(m.assignment),
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment]}
               for m in group.members]
    if args.output == "table" and members:
        static = any(m.group_instance_id for m in group.members)
        columns = ["GROUP", "CONSUMER-ID"] + ["GROUP-INSTANCE-ID"] * static + ["HOST", "CLIENT-ID", "#PARTITIONS"]
        columns += ["ASSIGNMENT"] * bool(args.verbose)
        rows = []
        for m, d in zip(group.members, members):
            row = [d["group"], d["consumer_id"]] + [d["group_instance_id"]] * static
            row += [d["host"], d["client_id"], d["partitions"]]
            rows.append(row + [_assignment_text(m.assignment)] * bool(args.verbose))
        print_table(columns, rows)
    return {"group": group.group, "state": group.state, "members": members}


def _describe_state(admin, group: Group, brokers: dict[int, dict], args) -> dict:
    coordinator = find_coordinator(admin, group.group, brokers)
    d = {"group": group.group, "coordinator": coordinator,
         "assignment_strategy": group.assignment_strategy or None, "state": group.state,
         "members": len(group.members)}
    if args.output == "table":
        where = f"{coordinator['host']}:{coordinator['port']} ({coordinator['id']})"
        print_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                    [[group.group, where, d["assignment_strategy"], group.state, d["members"]]])
    return d


# -- reset-offsets -------------------------------------------------------------------------
def _scenario(args) -> Scenario:
    try:
        if args.to_datetime is not None:
            return Scenario("to_datetime", parse_datetime(args.to_datetime))
        if args.by_duration is not None:
            return Scenario("by_duration", _now_ms() - parse_duration(args.by_duration))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for kind in ("to_offset", "shift_by"):
        if getattr(args, kind) is not None:
            return Scenario(kind, getattr(args, kind))
    return Scenario(next(k for k in ("to_earliest", "to_latest", "to_current") if getattr(args, k)))


def _now_ms() -> int:
    import time
    return int(time.time() * 1000)


def reset_refusal(group_id: str, state: str) -> str | None:
    """Kafka's refusal to reset the offsets of a group in ``state``, or None when it may be reset."""
    if state in INACTIVE:
        return None
    return (f"Assignments can only be reset if the group '{group_id}' is inactive, "
            f"but the current state is {state}.")


def partitions_to_reset(admin, all_topics: bool, specs: Sequence[tuple[str, list[int] | None]],
                        committed) -> list[TopicPartition]:
    """The partitions a reset moves: every partition with a committed offset (``all_topics``),
    or those of ``specs`` (``parse_topic_arg``'s answers).  Raises ToolError, with Kafka's
    messages, for a topic or partition that does not exist or has no leader."""
    if all_topics:
        return sorted(committed)
    leaders = _partition_leaders(admin, (t for t, _ in specs))
    wanted: list[TopicPartition] = []
    for topic, partitions in specs:
        if partitions is None and topic not in leaders:
            raise ToolError(f"The topic '{topic}' does not exist")
        wanted += [TopicPartition(topic, p) for p in (partitions if partitions is not None else leaders[topic])]
    wanted = sorted(set(wanted))
    absent = [tp for tp in wanted if tp.partition not in leaders.get(tp.topic, {})]
    if absent:
        raise ToolError(f'The partitions "{",".join(map(tp_name, absent))}" do not exist')
    leaderless = [tp for tp in wanted if leaders[tp.topic][tp.partition] < 0]
    if leaderless:
        raise ToolError(f'The partitions "{",".join(map(tp_name, leaderless))}" have no leader')
    return wanted


def plan_reset(admin, scenario: Scenario, partitions, committed):
    """The new offsets (a Plan) of ``partitions`` under ``scenario``, from the log's offsets
    (ListOffsets).  Raises ToolError where Kafka's tool refuses (shift-by with no offset)."""
    from kafka.protocol.consumer import OffsetTimestamp
    by_timestamp = None
    if scenario.timestamp_lookup and partitions:
        by_timestamp = {tp: r.offset for tp, r in admin.list_partition_offsets(
            {tp: OffsetTimestamp(max(scenario.value, 0)) for tp in partitions}).items()}
    try:
        return plan_offsets(scenario, partitions, committed={tp: o.offset for tp, o in committed.items()},
                            log_start=log_offsets(admin, partitions, -2) if partitions else {},
                            log_end=log_offsets(admin, partitions, -1) if partitions else {},
                            by_timestamp=by_timestamp)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def commit_offsets(admin, group_id: str, offsets: dict[TopicPartition, int],
                   advance: Callable[[int], None] = lambda n: None) -> None:
    """OffsetCommit in chunks, calling ``advance(n)`` after each (a progress bar).  Raises
    ToolError naming the partitions the broker refused."""
    items = sorted(offsets.items())
    refused = []
    for start in range(0, len(items), COMMIT_CHUNK):
        chunk = dict((tp, OffsetAndMetadata(o, "", None)) for tp, o in items[start:start + COMMIT_CHUNK])
        for tp, error in admin.alter_group_offsets(group_id, chunk).items():
            if error.errno != 0:
                refused.append(f"{tp_name(tp)}: {error.__name__}")
        advance(len(chunk))
    if refused:
        raise ToolError(f"the broker refused offsets of group '{group_id}': {', '.join(refused)}")


def cmd_reset_offsets(admin, args) -> int:
    scenario = args.scenario
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. Add --dry-run "
              "to say so, or --execute to reset.", file=sys.stderr)
    group_ids, types = _group_ids(admin, args), group_types(admin)
    states = group_states(admin, group_ids, types)
    document, rows, refused = [], [], False
    for group_id in sorted(group_ids):
        state, share = states[group_id], types.get(group_id) == "share"     # share: start offsets
        message = (share_reset_refusal if share else reset_refusal)(group_id, state)
        if message is not None:
            _error(message)
            document.append({"group": group_id, "state": state, "error": message})
            refused = True
            continue
        committed = (share_start_offsets if share else committed_offsets)(admin, group_id)
        partitions = partitions_to_reset(admin, args.all_topics, args.topic_specs, committed)
        plan = plan_reset(admin, scenario, partitions, committed)
        for warning in plan.warnings:
            print(warning, file=sys.stderr)
        if args.execute:
            with progress(args, f"resetting {group_id}", len(plan.offsets)) as advance:
                (alter_share_offsets if share else commit_offsets)(admin, group_id, plan.offsets, advance)
        offsets = [{"topic": tp.topic, "partition": tp.partition,
                    "current_offset": committed[tp].offset if tp in committed else None, "new_offset": new}
                   for tp, new in sorted(plan.offsets.items())]
        rows += [[group_id, o["topic"], o["partition"], o["new_offset"]] for o in offsets]
        document.append({"group": group_id, "state": state, "offsets": offsets, "warnings": plan.warnings})
    if rows or args.output == "json":
        emit(args, {"executed": bool(args.execute), "groups": document},
             ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
    return 1 if refused else 0


# -- delete, delete-offsets ----------------------------------------------------------------
# Kafka's exception names for the DeleteGroups errors an operator meets, as its tool prints them
_KAFKA_EXCEPTIONS = {"NonEmptyGroupError": "GroupNotEmptyException",
                     "GroupIdNotFoundError": "GroupIdNotFoundException",
                     "InvalidGroupIdError": "InvalidGroupIdException",
                     "GroupAuthorizationFailedError": "GroupAuthorizationException"}


def _error_text(name: str) -> str:
    import kafka.errors
    description = getattr(getattr(kafka.errors, name, None), "description", "")
    return f"{_KAFKA_EXCEPTIONS.get(name, name)}: {description}".rstrip(": ")


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def cmd_delete(admin, args) -> int:
    group_ids = _group_ids(admin, args)
    results = admin.delete_groups(group_ids) if group_ids else {}
    deleted = [g for g in group_ids if results.get(g) == "OK"]
    failed = {g: _error_text(results.get(g, "UnknownError")) for g in group_ids if g not in deleted}
    if args.output == "json":
        emit(args, {"deleted": deleted, "failed": [{"group": g, "error": e} for g, e in failed.items()]}, [], [])
    elif not failed:
        print(f"Deletion of requested consumer groups ({_quoted(deleted)}) was successful.")
    else:
        _error("Deletion of some consumer groups failed:")
        for group_id, text in failed.items():
            print(f"* Group '{group_id}' could not be deleted due to: {text}", file=sys.stderr)
        if deleted:
            print(f"\nThese consumer groups were deleted successfully: {_quoted(deleted)}")
    return 1 if failed else 0


def cmd_delete_offsets(admin, args) -> int:
    from kafka.errors import KafkaError
    group_id, specs = args.group[0], args.topic_specs
    if group_types(admin).get(group_id) == "share":            # DeleteShareGroupOffsets, by topic
        return cmd_delete_share_offsets(admin, args)
    leaders = _partition_leaders(admin, (t for t, ps in specs if ps is None))
    statuses: dict[tuple[str, int | None], str | None] = {}
    partitions: set[TopicPartition] = set()
    for topic, ps in specs:
        if ps is None and topic not in leaders:
            statuses[(topic, None)] = "This server does not host this topic-partition."
        partitions.update(TopicPartition(topic, p) for p in (ps if ps is not None else leaders.get(topic, [])))
    top = None
    try:
        results = admin.delete_group_offsets(group_id, sorted(partitions)) if partitions else {}
    except KafkaError as exc:
        top, results = exc.description, {tp: type(exc) for tp in partitions}
    for tp, error in results.items():
        statuses[(tp.topic, tp.partition)] = None if error.errno == 0 else error.description
    if top:
        _error(top)
    elif any(statuses.values()):
        _error("Encountered some partition-level error, see the follow-up details.")
    elif args.output == "table":
        print(f"Request succeeded for deleting offsets from group {group_id}.")
    keyed = sorted(statuses.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))
    emit(args, {"group": group_id, "error": top or (None if not any(statuses.values()) else "partition errors"),
                "partitions": [{"topic": t, "partition": p, "error": e} for (t, p), e in keyed]},
         ["TOPIC", "PARTITION", "STATUS"],
         [[t, p, f"Error: {e}" if e else "Successful"] for (t, p), e in keyed])
    return 1 if top or any(statuses.values()) else 0


# -- arguments -----------------------------------------------------------------------------
def _group_scope(parser: argparse.ArgumentParser, *, all_groups: bool = True) -> None:
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--group", action="append", metavar="GROUP", help="the consumer group (repeatable)")
    if all_groups:
        scope.add_argument("--all-groups", action="store_true", help="every group")


def _common(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--timeout", type=int, metavar="MS",
                        help=f"how long to wait for the broker (default {DEFAULT_TIMEOUT_MS}, as Kafka's)")


def _flags(parser, *flags: tuple[str, str]) -> None:
    for flag, text in flags:
        parser.add_argument(flag, action="store_true", help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kwire groups", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser("list", help="list the groups with their state and protocol type")
    _common(p)
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="only groups in these states (comma-separated, e.g. stable,empty)")
    p.set_defaults(handler=cmd_list)

    p = commands.add_parser("describe", help="offsets and lag, members or state of groups")
    _common(p)
    _group_scope(p)
    _flags(p.add_mutually_exclusive_group(), ("--offsets", "partitions with offsets and lag (the default)"),
           ("--members", "the members and how many partitions each has"),
           ("--state", "coordinator, assignor, state, member count"))
    _flags(p, ("--verbose", "--members: each assignment; --offsets: leader epoch"))
    p.set_defaults(handler=cmd_describe)

    p = commands.add_parser("reset-offsets", help="move a group's committed offsets (group must be inactive)")
    _common(p)
    _group_scope(p)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P]", help="a topic, or some of its partitions")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = p.add_mutually_exclusive_group(required=True)
    _flags(to, ("--to-earliest", "the log start"), ("--to-latest", "the log end"),
           ("--to-current", "the committed offset (the log end if none)"))
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N, clamped into the log")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[ZONE]",
                    help="the first record at or after this time (UTC without a zone)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first record at or after now minus this")
    _flags(p.add_mutually_exclusive_group(), ("--dry-run", "show the new offsets only (the default)"),
           ("--execute", "commit the new offsets"))
    p.set_defaults(handler=cmd_reset_offsets)

    p = commands.add_parser("delete", help="delete inactive groups (DeleteGroups)")
    _common(p)
    _group_scope(p)
    p.set_defaults(handler=cmd_delete)

    p = commands.add_parser("delete-offsets", help="delete a group's offsets of some topics (OffsetDelete; "
                          "a share group's: DeleteShareGroupOffsets)")
    _common(p)
    _group_scope(p, all_groups=False)
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P]")
    p.set_defaults(handler=cmd_delete_offsets)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``kwire groups ...``; returns the exit code."""
    parser = build_parser()
    try:
        argv = kafka_style(sys.argv[1:] if argv is None else argv, KAFKA_ACTIONS)
        args = parser.parse_args(options_first(argv, parser, COMMANDS))
    except SystemExit as exc:                 # --help (0) or bad arguments (2)
        return int(exc.code or 0)
    return run(_execute, args)


if __name__ == "__main__":
    sys.exit(main())
