"""``kwire topics``: list, describe, create, delete and alter topics, as kafka-topics.sh does.

    kwire topics list [--exclude-internal]
    kwire topics describe [--topic T] [--under-replicated-partitions] [--unavailable-partitions]
    kwire topics create --topic T [--partitions N] [--replication-factor R] [--config k=v ...]
                        [--if-not-exists]
    kwire topics delete --topic T [--if-exists]
    kwire topics alter --topic T --partitions N [--if-exists]

Kafka's spelling works too: ``kwire topics --describe --topic T`` is ``kwire topics describe
--topic T``.  Every command takes ``--bootstrap-server``, ``--command-config`` and
``--output table|json`` (kwire.tools.common).

As in kafka-topics.sh, ``--topic`` of describe, delete and alter is a regular expression that
must match the whole name (``"orders\\.v2"`` for a literal dot; commas separate
alternatives), internal topics match unless ``--exclude-internal`` is given, and nothing
matching is an error unless ``--if-exists``.  ``describe`` shows, beyond kafka-topics.sh, each
partition's log start and end offsets (ListOffsets earliest/latest) and its size on the
leader's disk (DescribeLogDirs); ``--output json`` gives all of it, every replica's size too,
in one document.  Errors print the broker's message and exit 1.
"""
from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from typing import Any, Sequence

from kwire.tools.common import (ToolError, UsageError, client_config, dispatch, emit,
                     key_value_args, print_table, progress, tool_parser)

ACTIONS = {f"--{name}": name for name in ("list", "describe", "create", "delete", "alter")}
BATCH = 100                 # topics described per round of requests
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


# -- arguments --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser, command = tool_parser("kwire topics", __doc__)

    p = command("list", "the names of the topics, one a line")
    p.add_argument("--topic", metavar="REGEX", help="only topics whose whole name matches")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p = command("describe", "partitions, leaders, replicas, offsets and sizes of topics")
    p.add_argument("--topic", metavar="REGEX", help="the topics to describe (default: all)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than their replica set")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader")
    p = command("create", "create a topic")
    p.add_argument("--topic", required=True, help="the topic's name")
    p.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="default: the broker's default.replication.factor")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="no error if the topic exists")
    p = command("delete", "delete topics")
    p.add_argument("--topic", required=True, metavar="REGEX", help="the topics to delete")
    p.add_argument("--if-exists", action="store_true", help="no error if no topic matches")
    p.add_argument("--exclude-internal", action="store_true", help="never match internal topics")
    p = command("alter", "add partitions to topics")
    p.add_argument("--topic", required=True, metavar="REGEX", help="the topics to alter")
    p.add_argument("--partitions", type=int, required=True, help="the new partition count")
    p.add_argument("--if-exists", action="store_true", help="no error if no topic matches")
    p.add_argument("--exclude-internal", action="store_true", help="never match internal topics")
    return parser


def topic_filter(pattern: str | None, exclude_internal: bool):
    """kafka-topics.sh's IncludeList: a whole-name regular expression, commas as ``|``."""
    regex = None
    if pattern is not None:
        text = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise UsageError(f"--topic {pattern!r} is not a valid regular expression: {exc}") from None

    def allowed(name: str, internal: bool) -> bool:
        if internal and exclude_internal:
            return False
        return regex is None or regex.fullmatch(name) is not None
    return allowed


# -- helpers ----------------------------------------------------------------------------------
def kafka_topic_id(topic_id: Any) -> str | None:
    """Kafka's spelling of a topic id (Uuid.toString: URL-safe base64, no padding)."""
    if topic_id is None:
        return None
    raw = uuid.UUID(str(topic_id)).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def human_bytes(n: int | None) -> str | None:
    if n is None:
        return None
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return None


def check(error_code: int, message: str | None) -> None:
    """Raise ToolError with the broker's message for a non-zero error code."""
    if error_code:
        from kafka.errors import for_code
        error = for_code(error_code)
        raise ToolError(message or f"{error.message}: {error.description}")


def warn(text: str) -> None:
    print(f"kwire: warning: {text}", file=sys.stderr)


def open_admin(args: argparse.Namespace):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(**client_config(args, client_id="kwire-topics"))


def matching_topics(admin, args: argparse.Namespace, *, required: bool) -> list[dict]:
    """The Metadata of every topic ``--topic`` matches, by name; ToolError if none matches and
    ``required`` (kafka-topics.sh's "Topic 'T' does not exist as expected")."""
    allowed = topic_filter(args.topic, args.exclude_internal)
    topics = sorted((t for t in admin.describe_topics() if t["error_code"] == 0
                     and allowed(t["name"], t["is_internal"])), key=lambda t: t["name"])
    if not topics and required and args.topic is not None:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return topics


# -- list -------------------------------------------------------------------------------------
def list_topics(args: argparse.Namespace) -> None:
    with open_admin(args) as admin:
        topics = matching_topics(admin, args, required=False)
    if args.output == "json":
        emit(args, {"topics": [{"name": t["name"], "topic_id": kafka_topic_id(t["topic_id"]),
                                "partitions": len(t["partitions"]), "internal": t["is_internal"]}
                               for t in topics]}, [], [])
        return
    for t in topics:          # one a line, as kafka-topics.sh --list: scripts read it
        print(t["name"])


# -- describe ---------------------------------------------------------------------------------
def describe(args: argparse.Namespace) -> None:
    with open_admin(args) as admin:
        topics = matching_topics(admin, args, required=True)
        described = []
        with progress(args, "describing topics", len(topics), at_least=BATCH) as advance:
            for i in range(0, len(topics), BATCH):
                batch = topics[i:i + BATCH]
                described.extend(describe_batch(admin, batch))
                advance(len(batch))
    described = [keep_partitions(t, args) for t in described]
    if args.under_replicated_partitions or args.unavailable_partitions:
        described = [t for t in described if t["partitions"]]
    if args.output == "json":
        emit(args, {"topics": described}, [], [])
        return
    if not described:            # kafka-topics.sh prints nothing either, not empty tables
        return
    print_table(["Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs"],
                [[t["name"], t["topic_id"], t["partition_count"], t["replication_factor"],
                  ",".join(f"{k}={v}" for k, v in t["configs"].items())] for t in described])
    print_table(["Topic", "Partition", "Leader", "Replicas", "Isr", "LogStartOffset", "LogEndOffset", "Size"],
                [[t["name"], p["partition"], "none" if p["leader"] < 0 else p["leader"],
                  ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
                  p["log_start_offset"], p["log_end_offset"], human_bytes(p["size_bytes"])]
                 for t in described for p in t["partitions"]])


def keep_partitions(topic: dict, args: argparse.Namespace) -> dict:
    parts = topic["partitions"]
    if args.under_replicated_partitions:
        parts = [p for p in parts if len(p["isr"]) < len(p["replicas"])]
    if args.unavailable_partitions:
        parts = [p for p in parts if p["leader"] < 0]
    return {**topic, "partitions": parts}


def describe_batch(admin, topics: list[dict]) -> list[dict]:
    """One document per topic: Metadata, non-default configs, offsets and sizes."""
    names = [t["name"] for t in topics]
    configs = overridden_configs(admin, names)
    led = [(t["name"], p["partition_index"]) for t in topics for p in t["partitions"] if p["leader_id"] >= 0]
    starts, ends = log_offsets(admin, led)
    sizes = replica_sizes(admin, {t["name"]: [p["partition_index"] for p in t["partitions"]] for t in topics})
    out = []
    for t in topics:
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        entries = []
        for p in parts:
            key = (t["name"], p["partition_index"])
            on_disk = sizes.get(key, {}) if sizes is not None else {}
            entries.append({
                "partition": p["partition_index"], "leader": p["leader_id"], "leader_epoch": p["leader_epoch"],
                "replicas": p["replica_nodes"], "isr": p["isr_nodes"], "offline_replicas": p["offline_replicas"],
                "log_start_offset": starts.get(key), "log_end_offset": ends.get(key),
                "size_bytes": on_disk.get(p["leader_id"]),
                "replica_sizes": {str(b): n for b, n in sorted(on_disk.items())}})
        out.append({"name": t["name"], "topic_id": kafka_topic_id(t["topic_id"]), "internal": t["is_internal"],
                    "partition_count": len(parts), "replication_factor": len(parts[0]["replica_nodes"]) if parts else 0,
                    "configs": configs.get(t["name"], {}), "partitions": entries})
    return out


def overridden_configs(admin, names: list[str]) -> dict[str, dict[str, str]]:
    """Each topic's configs that are not Kafka's defaults (as kafka-topics.sh's "Configs:")."""
    from kafka.admin import ConfigResource
    described = admin.describe_configs([ConfigResource("TOPIC", n) for n in names], config_filter="all")
    return {name: {k: ("(sensitive)" if c["is_sensitive"] else c["value"])
                   for k, c in sorted(entries.items()) if c["config_source"] != "DEFAULT_CONFIG"}
            for name, entries in described.get("topic", {}).items()}


OFFSETS_RETRY_S = 5.0      # a new leader answers OFFSET_NOT_AVAILABLE until its followers catch up


def log_offsets(admin, partitions: list[tuple[str, int]]) -> tuple[dict, dict]:
    """(log start offsets, log end offsets) by (topic, partition); empty when unknown.
    Retriable errors (a leader just elected) are retried for up to OFFSETS_RETRY_S."""
    import time
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec
    from kafka.errors import KafkaError
    if not partitions:
        return {}, {}
    tps = [TopicPartition(t, p) for t, p in partitions]
    deadline = time.monotonic() + OFFSETS_RETRY_S
    while True:
        try:
            found = [admin.list_partition_offsets({tp: spec for tp in tps})
                     for spec in (OffsetSpec.EARLIEST, OffsetSpec.LATEST)]
            break
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                warn(f"log offsets unknown ({exc})")
                return {}, {}
            time.sleep(0.2)
    return tuple({(tp.topic, tp.partition): o.offset for tp, o in f.items()} for f in found)


def replica_sizes(admin, partitions: dict[str, list[int]]) -> dict | None:
    """{(topic, partition): {broker id: bytes}} from every broker's DescribeLogDirs; None when
    the brokers do not answer it (a broker without the API, or no DESCRIBE on the cluster)."""
    from kafka.errors import KafkaError
    try:
        answers = admin.describe_log_dirs(topic_partitions=partitions)
    except KafkaError as exc:
        warn(f"sizes unknown ({exc})")
        return None
    sizes: dict = {}
    for answer in answers:
        if not answer["log_dirs"]:
            warn(f"sizes unknown: broker {answer['broker']} described no log dir (DESCRIBE on the cluster?)")
        for d in answer["log_dirs"]:
            for t in d["topics"] if d["error_code"] == 0 else ():
                for p in t["partitions"]:
                    if not p["is_future_key"]:
                        sizes.setdefault((t["name"], p["partition_index"]), {})[answer["broker"]] = p["partition_size"]
    return sizes


# -- create, delete, alter --------------------------------------------------------------------
def create(args: argparse.Namespace) -> None:
    name = args.topic
    if not _TOPIC_CHARS.fullmatch(name):
        raise UsageError(f"Topic name '{name}' is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")
    configs = {k: v.strip() for k, v in key_value_args(args.config, "--config").items()}
    if "." in name or "_" in name:
        warn("due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
             "collide. To avoid issues it is best to use either, but not both.")
    with open_admin(args) as admin:
        result = admin.create_topics({name: {"num_partitions": args.partitions,
                                             "replication_factor": args.replication_factor,
                                             "configs": configs}}, raise_errors=False)
    [topic] = result["topics"]
    from kafka.errors import TopicAlreadyExistsError
    if topic["error_code"] == TopicAlreadyExistsError.errno and args.if_not_exists:
        if args.output == "json":          # kafka-topics.sh says nothing
            emit(args, {"created": None, "exists": name}, [], [])
        return
    check(topic["error_code"], topic["error_message"])
    document = {"created": name, "topic_id": kafka_topic_id(topic["topic_id"]),
                "partitions": topic["num_partitions"], "replication_factor": topic["replication_factor"],
                "configs": configs}
    if args.output == "json":
        emit(args, document, [], [])
    else:
        print(f"Created topic {name}.")


def delete(args: argparse.Namespace) -> None:
    with open_admin(args) as admin:
        names = [t["name"] for t in matching_topics(admin, args, required=not args.if_exists)]
        result = admin.delete_topics(names, raise_errors=False) if names else {"topics": []}
    failed = [t for t in result["topics"] if t["error_code"]]
    deleted = [t["name"] for t in result["topics"] if not t["error_code"]]
    if args.output == "json":
        emit(args, {"deleted": deleted}, [], [])
    else:
        for name in deleted:
            print(f"Deleted topic {name}.")
    for t in failed[:-1]:
        print(f"kwire: {t['name']}: {t.get('error_message') or t['error_code']}", file=sys.stderr)
    if failed:
        check(failed[-1]["error_code"], failed[-1].get("error_message"))


def alter(args: argparse.Namespace) -> None:
    with open_admin(args) as admin:
        names = [t["name"] for t in matching_topics(admin, args, required=not args.if_exists)]
        results = admin.create_partitions({n: args.partitions for n in names}, raise_errors=False).results \
            if names else []
    altered = [r.name for r in results if not r.error_code]
    if args.output == "json":
        emit(args, {"altered": [{"topic": n, "partitions": args.partitions} for n in altered]}, [], [])
    else:
        for name in altered:
            print(f"Topic {name} now has {args.partitions} partitions.")
    failed = [r for r in results if r.error_code]
    for r in failed[:-1]:
        print(f"kwire: {r.name}: {r.error_message}", file=sys.stderr)
    if failed:
        check(failed[-1].error_code, failed[-1].error_message)


COMMANDS = {"list": list_topics, "describe": describe, "create": create, "delete": delete, "alter": alter}


def main(argv: Sequence[str] | None = None) -> int:
    """``kwire topics ...``; returns the exit code (0, 1 refused/unreachable, 2 bad arguments)."""
    return dispatch(argv, build_parser(), ACTIONS, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
