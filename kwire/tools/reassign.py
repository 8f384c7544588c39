"""``kwire reassign``: move partition replicas between brokers, as kafka-reassign-partitions.sh does.

    kwire reassign --generate --topics-to-move-json-file F --broker-list 1,2,3 [--disable-rack-aware]
    kwire reassign --execute --reassignment-json-file F [--throttle B/S] [--additional] [--wait [--timeout S]]
    kwire reassign --verify --reassignment-json-file F [--preserve-throttles]
    kwire reassign --cancel --reassignment-json-file F [--preserve-throttles]
    kwire reassign --list
    kwire reassign --drain-broker N [--dry-run] [--throttle B/S] [--additional] [--wait [--timeout S]]

Every action takes --bootstrap-server HOST:PORT and --command-config FILE (kwire.tools.common).
The JSON files are Kafka's (version 1), ``log_dirs`` included (a replica's absolute log dir
on its broker: --execute moves it there with AlterReplicaLogDirs, asking again while the
broker does not hold it yet, and --verify reports the move): --generate prints the current assignment and a
proposal (kwire's replica placement, rack-aware when every broker has a rack); --execute
prints the current assignment to keep for a rollback and starts the reassignments, refusing
while any reassignment is in progress unless --additional (Kafka's rule).  --throttle sets
leader/follower.replication.throttled.rate on every broker involved and the topics'
leader.replication.throttled.replicas (the moving partitions' existing replicas) and
follower.replication.throttled.replicas (the replicas being added), merged with what the
topics already have; --verify removes every reassignment throttle once nothing is moving
any more (--cancel at once), unless --preserve-throttles.

kwire's additions:
  --wait        after --execute or --drain-broker, wait until the reassignments complete,
                showing the bytes still to copy (the leader's size minus each adding replica's,
                from DescribeLogDirs): a progress bar on a terminal, a line every few seconds
                otherwise; then report and clear throttles as --verify does.
  --timeout S   give up waiting after S seconds (exit 1; the reassignments go on: --verify,
                --cancel); also how long --execute waits for the brokers to take the log dir
                moves the file asks for (10 s without it; Kafka's --timeout, in milliseconds).
  --drain-broker N   move every replica on broker N to other live brokers: the least-loaded
                broker that is not a replica yet (rack-aware when racks are set) takes N's place
                in the replica list.  Prints the plan as reassignment JSON, then starts it unless
                --dry-run.

Exit codes: 0 done, 1 refused (by the broker or by these rules) or timed out, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Mapping, Sequence

from kwire.admin import reassign_plan as plan
from kwire.admin.reassign_plan import PlanError, TopicPartition, names, tp_name
from kwire.admin.reassignment import ReplicaAssignment
from kwire.tools.common import ToolError, UsageError, client_config, read_command_config, run
from kwire.tools.reassign_dirs import move_log_dirs, replica_dirs

ACTIONS = ("generate", "execute", "verify", "cancel", "list", "drain_broker")
# the options each action accepts besides the connection ones (Kafka: "Option X can't be used with action Y")
OPTIONS = {
    "generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
    "execute": {"reassignment_json_file", "throttle", "additional", "wait", "timeout", "preserve_throttles"},
    "verify": {"reassignment_json_file", "preserve_throttles"},
    "cancel": {"reassignment_json_file", "preserve_throttles"},
    "list": set(),
    "drain_broker": {"throttle", "additional", "wait", "timeout", "dry_run", "disable_rack_aware",
                     "preserve_throttles"},
}
REQUIRED = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
            "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",)}
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use --additional to override "
            "this and create a new partition assignment in addition to the existing one. The --additional flag "
            "can also be used to change the throttle by resubmitting the current reassignment.")
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.")
POLL_S = 0.5                 # how often --wait looks
PLAIN_EVERY_S = 2.0          # a progress line this often when not on a terminal
SIZES_TIMEOUT_MS = 2000      # DescribeLogDirs while waiting: a silent broker must not stall --timeout
SKIP_S = 10.0                # ... and is not asked again for this long
READ_ATTEMPTS = 3
LOG_DIR_START_S = 10.0       # Kafka's --timeout default: how long --execute waits for log dir moves to start


# -- arguments --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kwire reassign", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose a reassignment (nothing is changed)")
    action.add_argument("--execute", action="store_true", help="start the reassignment of --reassignment-json-file")
    action.add_argument("--verify", action="store_true",
                        help="report each reassignment of --reassignment-json-file; clear throttles when done")
    action.add_argument("--cancel", action="store_true", help="cancel the reassignments of --reassignment-json-file")
    action.add_argument("--list", action="store_true", help="the reassignments in progress")
    action.add_argument("--drain-broker", type=int, metavar="N",
                        help="move every replica off broker N (kwire's own)")
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT",
                        help="the broker(s) to connect to (default 127.0.0.1:9092)")
    parser.add_argument("--command-config", metavar="FILE", help="admin client properties, as for Kafka's tools")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    parser.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version":1,"topics":[{"topic":"t"}]}')
    parser.add_argument("--broker-list", metavar="1,2,3", help="--generate: the brokers to spread the topics over")
    parser.add_argument("--disable-rack-aware", action="store_true", help="ignore the brokers' racks")
    parser.add_argument("--throttle", type=int, metavar="BYTES_PER_SEC",
                        help="throttle the copying between brokers to this rate (at least 1 KB/s advised)")
    parser.add_argument("--additional", action="store_true",
                        help="start even though reassignments are in progress (or change their throttle)")
    parser.add_argument("--preserve-throttles", action="store_true", help="leave broker and topic throttles alone")
    parser.add_argument("--wait", action="store_true",
                        help="kwire: wait for completion showing the bytes still to copy, then clear throttles")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="kwire: how long --wait waits (exit 1 after)")
    parser.add_argument("--dry-run", action="store_true", help="--drain-broker: print the plan only")
    return parser


def chosen_action(args: argparse.Namespace) -> str:
    """The action, after Kafka's checks of the options given with it.  Raises UsageError."""
    action = next(a for a in ACTIONS if getattr(args, a) not in (None, False))
    for option in set().union(*OPTIONS.values()) - OPTIONS[action]:
        if getattr(args, option) not in (None, False):
            raise UsageError(f'Option "--{option.replace("_", "-")}" can\'t be used with action '
                             f'"--{action.replace("_", "-")}"')
    for option in REQUIRED.get(action, ()):
        if getattr(args, option) is None:
            raise UsageError(f"--{action} needs --{option.replace('_', '-')}")
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout bounds --wait: give --wait too")
    if args.throttle is not None and args.throttle < 0:
        raise UsageError("--throttle must be at least 0 bytes/s")
    return action


def read_file(path: str, option: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"--{option} {path}: {exc.strerror or exc}") from None


# -- what the cluster says --------------------------------------------------------------------
def open_admin(args: argparse.Namespace):
    from kafka.admin import KafkaAdminClient
    admin = read(KafkaAdminClient, **client_config(args, client_id="kwire-reassign"))
    set_setup_timeout(admin, setup_timeout_ms(args))
    return admin


def setup_timeout_ms(args: argparse.Namespace) -> int | None:
    """``socket.connection.setup.timeout.ms`` of --command-config: how long a broker that accepts
    connections but does not answer (hung, paused) holds up a request.  Raises UsageError."""
    value = read_command_config(args.command_config).get("socket.connection.setup.timeout.ms")
    try:
        return None if value is None else int(value)
    except ValueError:
        raise UsageError(f"--command-config: socket.connection.setup.timeout.ms={value!r} is not valid") from None


def set_setup_timeout(admin, timeout_ms: int | None) -> None:
    # kafka-python's admin client takes no such keyword; its connection manager reads this
    # setting at each new connection (the bootstrap connection has been made by now)
    if timeout_ms is not None:
        admin._manager.config["socket_connection_setup_timeout_ms"] = timeout_ms


def read(call, *args, **kwargs):
    """``call(*args, **kwargs)``, a request that changes nothing, tried again after a retriable
    failure: kafka-python sends metadata requests to one broker of its choosing, and one that does
    not answer (hung, paused) fails the request after request.timeout.ms and is then avoided."""
    from kafka.errors import KafkaError
    for attempt in range(READ_ATTEMPTS):
        try:
            return call(*args, **kwargs)
        except KafkaError as exc:
            if not exc.retriable or attempt == READ_ATTEMPTS - 1:
                raise
            time.sleep(0.1)


def live_brokers(admin) -> dict[int, str | None]:
    """Live broker id -> rack (None without one)."""
    return {b["broker_id"]: b.get("rack") for b in read(admin.describe_cluster)["brokers"]}


def describe(admin, topics) -> dict[TopicPartition, dict]:
    """{tp: {"replicas", "leader"}} of every partition of ``topics``; ToolError for a topic
    the cluster does not have (Kafka's "Topic t not found.")."""
    out = {}
    for t in read(admin.describe_topics, sorted(set(topics))):
        if t["error_code"]:
            raise ToolError(f"Topic {t['name']} not found.")
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = {"replicas": tuple(p["replica_nodes"]), "leader": p["leader_id"]}
    return out


def current_replicas(admin, partitions) -> dict[TopicPartition, tuple[int, ...]]:
    """The replicas of each of ``partitions``; ToolError naming those not found."""
    found = describe(admin, {t for t, _ in partitions})
    missing = [tp for tp in partitions if tp not in found]
    if missing:
        raise ToolError(f"Unable to find partition: {', '.join(tp_name(tp) for tp in sorted(missing))}")
    return {tp: found[tp]["replicas"] for tp in partitions}


def in_progress(admin, partitions=None) -> dict[TopicPartition, ReplicaAssignment]:
    """ListPartitionReassignments (all, or only ``partitions``)."""
    from kafka import TopicPartition as KafkaTP
    wanted = None if partitions is None else [KafkaTP(t, p) for t, p in partitions]
    listed = read(admin.list_partition_reassignments, wanted)
    return {(tp.topic, tp.partition): ReplicaAssignment(tuple(r["replicas"]), tuple(r["adding_replicas"]),
                                                        tuple(r["removing_replicas"])) for tp, r in listed.items()}


def alter(admin, targets: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, str]:
    """AlterPartitionReassignments (None cancels); {tp: the broker's message} of those refused.
    kafka-python's helper keeps only the error class: the request is its own, the message the
    broker's."""
    from kafka import TopicPartition as KafkaTP
    from kafka.errors import for_code
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest
    request = AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=admin._process_alter_partition_reassignments_input(
        {KafkaTP(t, p): None if r is None else list(r) for (t, p), r in targets.items()}))
    response = admin._manager.run(admin._send_request_to_controller, request, lambda r: [for_code(r.error_code)])
    refused = {}
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code:
                error = for_code(p.error_code)
                refused[(topic.name, p.partition_index)] = p.error_message or f"{error.message}: {error.description}"
    return refused


def alter_configs(admin, resources) -> None:
    """IncrementalAlterConfigs; ToolError with the broker's message for a refusal."""
    if not resources:
        return
    result = admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
    failed = [f"{kind} {name}: {outcome}" for kind, by_name in result.items()
              for name, outcome in by_name.items() if outcome != "OK"]
    if failed:
        raise ToolError("Could not alter throttle configs: " + "; ".join(failed))


# -- throttles --------------------------------------------------------------------------------
def set_throttles(admin, rate: int, moves: Mapping[TopicPartition, plan.PartitionMove]) -> None:
    """Kafka's --throttle: the rate on every broker involved, the replicas on each topic."""
    from kafka.admin import AlterConfigOp, ConfigResource
    leader, follower = plan.throttled_replicas(moves)
    topics = sorted(set(leader) | set(follower))
    described = read(admin.describe_configs, [ConfigResource("TOPIC", t) for t in topics], config_filter="all") \
        .get("topic", {}) if topics else {}
    resources = []
    for t in topics:
        have = described.get(t, {})
        ops = {}
        for key, entries in ((LEADER_REPLICAS, leader.get(t)), (FOLLOWER_REPLICAS, follower.get(t))):
            if entries:
                ops[key] = (AlterConfigOp.SET, plan.merge_throttled(have.get(key, {}).get("value"), entries))
        if ops:
            resources.append(ConfigResource("TOPIC", t, ops))
    live = live_brokers(admin)
    for b in sorted(plan.involved_brokers(moves)):
        if b in live:          # a broker not in the cluster: the reassignment itself is refused below
            resources.append(ConfigResource("BROKER", str(b), {k: (AlterConfigOp.SET, str(rate))
                                                              for k in BROKER_THROTTLES}))
    alter_configs(admin, resources)
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def clear_throttles(admin, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
    """Kafka's clearAllThrottles: the rates of every broker of the cluster and of the targets,
    the replicas configs of every topic of the targets.  Each broker is asked on its own, so
    one that does not answer leaves the others cleared; ToolError names what is left."""
    from kafka.admin import AlterConfigOp, ConfigResource
    from kafka.errors import KafkaError
    live = live_brokers(admin)
    brokers = sorted(set(live) | {b for r in targets.values() for b in r})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(map(str, brokers))}")
    failed = []
    for b in brokers:
        if b not in live:
            continue
        try:
            alter_configs(admin, [ConfigResource("BROKER", str(b), {k: (AlterConfigOp.DELETE, None)
                                                                    for k in BROKER_THROTTLES})])
        except (ToolError, KafkaError) as exc:
            failed.append(f"broker {b}: {exc}")
    topics = sorted({t for t, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    alter_configs(admin, [ConfigResource("TOPIC", t, {k: (AlterConfigOp.DELETE, None)
                                                      for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)})
                          for t in topics])
    if failed:
        raise ToolError("Could not clear the throttles of " + "; ".join(failed) +
                        " (run --verify again, or kwire configs --delete-config, once it answers)")


# -- actions ----------------------------------------------------------------------------------
def generate(admin, args: argparse.Namespace, topics: list[str], wanted: list[int]) -> None:
    live = live_brokers(admin)
    unknown = [b for b in wanted if b not in live]
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]} (live brokers: {','.join(map(str, sorted(live)))})")
    current = {tp: d["replicas"] for tp, d in describe(admin, topics).items()}
    racks = plan.broker_racks({b: live[b] for b in wanted}, not args.disable_rack_aware)
    proposal = plan.propose(current, racks)
    print(f"Current partition replica assignment\n{plan.reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{plan.reassignment_json(proposal)}")


def execute(admin, args: argparse.Namespace, targets: Mapping[TopicPartition, tuple[int, ...]],
            dirs: Mapping[plan.Replica, str] | None = None) -> int:
    moving = in_progress(admin)
    if moving and not args.additional:
        raise ToolError(EXISTING)
    current = current_replicas(admin, list(targets))
    print("Current partition replica assignment\n\n" + plan.reassignment_json(current) +
          "\n\nSave this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None:
        if not args.wait:
            print(VERIFY_WARNING)
        set_throttles(admin, args.throttle, plan.move_map(moving, targets, current))
    refused = alter(admin, targets)
    if refused:
        raise ToolError("Error reassigning partition(s):\n" +
                        "\n".join(f"{tp_name(tp)}: {refused[tp]}" for tp in sorted(refused)))
    print(f"Successfully started partition reassignment{'' if len(targets) == 1 else 's'} for {names(targets)}")
    if dirs:
        move_log_dirs(admin, dirs, LOG_DIR_START_S if args.timeout is None else args.timeout)
    if args.wait:
        return wait(admin, args, targets)
    return 0


def verify(admin, args: argparse.Namespace, targets: Mapping[TopicPartition, tuple[int, ...]],
           dirs: Mapping[plan.Replica, str] | None = None) -> bool:
    """Kafka's --verify, the log dir moves of ``dirs`` included; True when nothing is moving
    any more (throttles then cleared)."""
    moving = in_progress(admin)
    settled = [tp for tp in targets if tp not in moving]
    current = current_replicas(admin, settled) if settled else {}
    print("Status of partition reassignment:")
    for tp in sorted(targets):
        if tp in moving:
            print(f"Reassignment of partition {tp_name(tp)} is still in progress.")
        elif tuple(current[tp]) == tuple(targets[tp]):
            print(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            print(f"There is no active reassignment of partition {tp_name(tp)}, but replica set is "
                  f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, targets[tp]))}.")
    dirs_moving = False
    if dirs:
        states = plan.log_dir_move_states(dirs, replica_dirs(admin, dirs))
        print("\nStatus of replica log directory moves:")
        for active, line in states.values():
            print(line)
            dirs_moving |= active
    if not moving and not dirs_moving and not args.preserve_throttles:
        clear_throttles(admin, targets)
    return not moving and not dirs_moving


def cancel(admin, args: argparse.Namespace, targets: Mapping[TopicPartition, tuple[int, ...]]) -> None:
    active = sorted(in_progress(admin, list(targets)))
    if active:
        refused = alter(admin, {tp: None for tp in active})
        if refused:
            raise ToolError(f"Error cancelling partition reassignment{'' if len(refused) == 1 else 's'} for:\n" +
                            "\n".join(f"{tp_name(tp)}: {refused[tp]}" for tp in sorted(refused)))
        print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: {names(active)}")
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        clear_throttles(admin, targets)


def list_reassignments(admin) -> None:
    moving = in_progress(admin)
    if not moving:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for tp in sorted(moving):
        a = moving[tp]
        print(f"{tp_name(tp)}: replicas: {','.join(map(str, a.replicas))}."
              + (f" adding: {','.join(map(str, a.adding))}." if a.adding else "")
              + (f" removing: {','.join(map(str, a.removing))}." if a.removing else ""))


def drain(admin, args: argparse.Namespace) -> int:
    live = live_brokers(admin)
    racks = plan.broker_racks({b: r for b, r in live.items() if b != args.drain_broker}, not args.disable_rack_aware)
    topics = list(read(admin.list_topics))
    assignment = {tp: d["replicas"] for tp, d in describe(admin, topics).items()} if topics else {}
    moving = in_progress(admin)
    if moving and not args.additional and not args.dry_run:
        raise ToolError(EXISTING)
    assignment.update({tp: a.target for tp, a in moving.items() if tp in assignment})
    targets = plan.drain_plan(assignment, args.drain_broker, racks)
    if not targets:
        print(f"Broker {args.drain_broker} holds no partition replica: nothing to move.")
        return 0
    print(f"Proposed partition reassignment configuration\n{plan.reassignment_json(targets)}\n")
    if args.dry_run:
        return 0
    return execute(admin, args, targets)


# -- --wait -----------------------------------------------------------------------------------
class LogDirSizes:
    """Replica sizes from DescribeLogDirs for --wait, through an admin client of its own with a
    short request timeout: a broker that does not answer (paused, overloaded) costs at most
    SIZES_TIMEOUT_MS and is then left out for SKIP_S, so --timeout stays honoured; its copy
    counts as empty meanwhile."""

    def __init__(self, args: argparse.Namespace):
        from kafka.admin import KafkaAdminClient
        self.admin = read(KafkaAdminClient, **client_config(args, client_id="kwire-reassign-sizes",
                                                            request_timeout_ms=SIZES_TIMEOUT_MS))
        set_setup_timeout(self.admin, SIZES_TIMEOUT_MS)
        self.skip_until: dict[int, float] = {}

    def close(self) -> None:
        self.admin.close()

    def sizes(self, partitions: Mapping[str, list[int]], brokers) -> dict[TopicPartition, dict[int, int]]:
        from kafka.errors import KafkaError
        found: dict[TopicPartition, dict[int, int]] = {}
        for b in sorted(brokers):
            if time.monotonic() < self.skip_until.get(b, 0.0):
                continue
            try:
                [answer] = self.admin.describe_log_dirs(topic_partitions=dict(partitions), brokers=[b])
            except KafkaError:
                self.skip_until[b] = time.monotonic() + SKIP_S
                continue
            for d in answer["log_dirs"]:
                for t in d["topics"] if d["error_code"] == 0 else ():
                    for p in t["partitions"]:
                        if not p["is_future_key"]:
                            found.setdefault((t["name"], p["partition_index"]), {})[b] = p["partition_size"]
        return found

    def remaining(self, admin, moving: Mapping[TopicPartition, ReplicaAssignment]) -> int:
        """Bytes the adding replicas of ``moving`` still miss (leaders and adding replicas asked)."""
        by_topic: dict[str, list[int]] = {}
        for t, p in moving:
            by_topic.setdefault(t, []).append(p)
        leaders = {tp: d["leader"] for tp, d in describe(admin, by_topic).items()}
        brokers = {leaders.get(tp, -1) for tp in moving} | {b for a in moving.values() for b in a.adding}
        sizes = self.sizes(by_topic, brokers - {-1})
        return sum(plan.bytes_remaining(moving, leaders, sizes).values())


def wait(admin, args: argparse.Namespace, targets: Mapping[TopicPartition, tuple[int, ...]]) -> int:
    """Until none of ``targets`` is moving (then --verify's report and throttle clearing), or
    ``--timeout`` (ToolError)."""
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    sizes = LogDirSizes(args)
    try:
        with progress_display() as show:
            while True:
                moving = in_progress(admin, list(targets))
                if not moving:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise ToolError(f"Timed out after {args.timeout:g} s: still moving {names(moving)} "
                                    "(they go on: --verify reports them, --cancel stops them)")
                show(len(moving), len(targets), sizes.remaining(admin, moving))
                time.sleep(POLL_S)
    finally:
        sizes.close()
    # the last partition's completion can leave other reassignments (not ours) in progress
    if not verify(admin, args, targets) and not args.preserve_throttles:
        print("Other reassignments are still in progress: throttles kept (run --verify later).")
    return 0


class progress_display:
    """``show(moving, total, bytes_left)``: a rich bar on a terminal's stderr, else a line on
    stderr every PLAIN_EVERY_S seconds."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = self.task = None
        self.first = self.last = None
        self.shown_at = 0.0

    def __enter__(self):
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                TimeRemainingColumn(), console=Console(file=self.stream), transient=True)
            self.bar.__enter__()
        return self.show

    def __exit__(self, *exc_info):
        if self.bar is not None:
            self.bar.__exit__(*exc_info)

    def show(self, moving: int, total: int, left: int | None) -> None:
        text = f"{moving} of {total} partition(s) moving"
        if self.bar is not None:
            if self.task is None:
                self.task = self.bar.add_task(text, total=None)
            if left is None:                  # sizes unknown this time: the bar stays where it was
                self.bar.update(self.task, description=text)
                return
            self.first = max(self.first or 0, left)
            self.bar.update(self.task, description=text, total=self.first, completed=self.first - left)
            return
        now = time.monotonic()
        if now - self.shown_at >= PLAIN_EVERY_S:
            self.shown_at = now
            from kwire.tools.topics import human_bytes
            print(f"{text}, {'? bytes' if left is None else human_bytes(left)} still to copy",
                  file=self.stream, flush=True)


# -- main -------------------------------------------------------------------------------------
def command(args: argparse.Namespace) -> int:
    action = chosen_action(args)
    read_command_config(args.command_config)          # an unreadable file is a usage error
    try:                                              # the files are read before connecting
        targets = dirs = None
        if args.reassignment_json_file is not None:
            targets, dirs = plan.parse_reassignment_and_dirs(
                read_file(args.reassignment_json_file, "reassignment-json-file"))
        if action == "generate":
            topics = plan.parse_topics_to_move(read_file(args.topics_to_move_json_file, "topics-to-move-json-file"))
            brokers = plan.parse_broker_list(args.broker_list)
        with open_admin(args) as admin:
            if action == "generate":
                generate(admin, args, topics, brokers)
            elif action == "execute":
                return execute(admin, args, targets, dirs)
            elif action == "verify":
                verify(admin, args, targets, dirs)
            elif action == "cancel":
                cancel(admin, args, targets)
            elif action == "list":
                list_reassignments(admin)
            else:
                return drain(admin, args)
    except PlanError as exc:
        raise ToolError(str(exc)) from None
    except KeyboardInterrupt:        # Ctrl-C while waiting: the moves go on without the tool
        print("kwire: interrupted; reassignments in progress go on (--verify, --list, --cancel)", file=sys.stderr)
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kwire reassign ...``; returns the exit code (0, 1 refused/unreachable/timed out, 2 bad arguments)."""
    import logging
    # kafka-python logs each timed-out request; the tool reports what fails itself, and --wait's
    # size requests to a silent broker would otherwise print a warning every few seconds
    logging.getLogger("kafka").addHandler(logging.NullHandler())
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return run(command, args)


if __name__ == "__main__":
    sys.exit(main())
