"""Planning for ``kwire reassign`` (kafka-reassign-partitions.sh), sans-I/O: data in, data out.

The two JSON documents of Kafka's tool, read and written here:

    reassignment (--reassignment-json-file, what --generate proposes and --execute prints):
        {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}
    topics to move (--topics-to-move-json-file):
        {"version":1,"topics":[{"topic":"t"}]}

Kafka's rules, followed here:

* A reassignment file names each partition once, with a non-empty replica list without
  duplicates; ``log_dirs`` is optional and, when present, as long as ``replicas``: ``"any"``
  or the absolute log dir the replica on that broker goes to (AlterReplicaLogDirs; a
  replica the broker does not hold yet is created there).  --verify reports each such
  replica's move (``log_dir_move_states``, Kafka's messages).
* --generate proposes, per topic, a fresh assignment over the given brokers with the
  topic's partition count and replication factor (Kafka's assignReplicasToBrokers, here
  kwire.admin.assignment).  Racks count only when every broker has one; some with and some
  without is refused unless rack awareness is disabled.
* --throttle: each partition's move has sources (its replicas before any reassignment in
  progress) and destinations (the target's other replicas).  The leader throttle names
  ``partition:source`` and the follower throttle ``partition:destination``, per topic;
  the brokers involved are every source and destination.

kwire's own additions: --drain-broker (``drain_plan``) and the bytes still to copy while
waiting (``bytes_remaining``).  Topic partitions are ``(topic, partition)`` tuples.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Iterable, Mapping

from kwire.codecs.errors import KafkaApiError

from .assignment import RandomSource, assign_replicas
from .reassignment import ReplicaAssignment, bytes_to_copy

TopicPartition = tuple[str, int]
Assignment = dict[TopicPartition, tuple[int, ...]]
Replica = tuple[str, int, int]              # (topic, partition, broker): Kafka's TopicPartitionReplica
ANY_LOG_DIR = "any"


class PlanError(Exception):
    """A reassignment that cannot be planned or a JSON document that cannot be read."""


def tp_name(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString: ``topic-partition``."""
    return f"{tp[0]}-{tp[1]}"


def names(tps: Iterable[TopicPartition]) -> str:
    return ",".join(tp_name(tp) for tp in sorted(tps))


# -- JSON -----------------------------------------------------------------------------------
def _load(text: str, what: str) -> dict:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise PlanError(f"The {what} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PlanError(f"The {what} must be a JSON object")
    version = document.get("version", 1)
    if version != 1:
        raise PlanError(f"Not supported version field value {version}")
    return document


def _entries(document: dict, key: str, what: str) -> list[dict]:
    entries = document.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise PlanError(f'The {what}\'s "{key}" must be a list of objects')
    return entries


def _int(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f'"{field}" must be an integer, not {json.dumps(value)}')
    return value


def parse_topics_to_move(text: str) -> list[str]:
    """The topics of a topics-to-move document, in order.  Raises PlanError (bad JSON,
    no topics, a duplicate)."""
    topics = []
    for entry in _entries(_load(text, "topics-to-move JSON"), "topics", "topics-to-move JSON"):
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise PlanError('Each entry of "topics" needs a "topic" name')
        topics.append(topic)
    if not topics:
        raise PlanError("The topics-to-move JSON names no topic")
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise PlanError(f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list 1,2,3``.  Raises PlanError."""
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise PlanError(f"--broker-list {text!r}: expected broker ids separated by commas") from None
    if not brokers:
        raise PlanError("--broker-list names no broker")
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise PlanError(f"Broker list contains duplicate entries: {', '.join(map(str, duplicates))}")
    return brokers


def parse_reassignment(text: str) -> Assignment:
    """The target replicas of each partition of a reassignment document, in file order.
    Raises PlanError with Kafka's messages (empty, duplicate partitions or replicas, log_dirs
    of the wrong length or not absolute)."""
    return parse_reassignment_and_dirs(text)[0]


def parse_reassignment_and_dirs(text: str) -> tuple[Assignment, dict[Replica, str]]:
    """``parse_reassignment`` and the log dir of each replica whose ``log_dirs`` entry is not
    "any".  Raises PlanError."""
    out: Assignment = {}
    dirs: dict[Replica, str] = {}
    duplicates = []
    for entry in _entries(_load(text, "reassignment JSON"), "partitions", "reassignment JSON"):
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise PlanError('Each entry of "partitions" needs a "topic" name')
        tp = (topic, _int(entry.get("partition"), "partition"))
        replicas = entry.get("replicas")
        if not isinstance(replicas, list):
            raise PlanError(f'{tp_name(tp)}: "replicas" must be a list of broker ids')
        replicas = tuple(_int(r, "replicas") for r in replicas)
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise PlanError(f"Size of replicas list {list(replicas)} is different from size of log dirs "
                            f"list {log_dirs} for partition {tp_name(tp)}")
        for broker, d in zip(replicas, log_dirs):
            if d == ANY_LOG_DIR:
                continue
            if not isinstance(d, str) or not d.startswith("/"):
                raise PlanError(f'{tp_name(tp)}: log dir {d!r} must be "any" or an absolute path')
            dirs[(tp[0], tp[1], broker)] = d
        if tp in out:
            duplicates.append(tp)
        out[tp] = replicas
    if not out:
        raise PlanError("Partition reassignment list cannot be empty")
    if duplicates:
        raise PlanError(f"Partition reassignment contains duplicate topic partitions: {names(duplicates)}")
    if any(not r for r in out.values()):
        raise PlanError("Partition replica list cannot be empty")
    repeated = [f"{tp_name(tp)} contains multiple entries for "
                f"{','.join(str(b) for b in sorted(set(r)) if r.count(b) > 1)}"
                for tp, r in out.items() if len(set(r)) != len(r)]
    if repeated:
        raise PlanError(f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}")
    return out, dirs


def replica_name(replica: Replica) -> str:
    """Kafka's TopicPartitionReplica.toString: ``topic-partition-broker``."""
    return f"{replica[0]}-{replica[1]}-{replica[2]}"


def log_dir_move_states(wanted: Mapping[Replica, str],
                        found: Mapping[int, Mapping[TopicPartition, tuple[str | None, str | None]] | None]
                        ) -> dict[Replica, tuple[bool, str]]:
    """--verify for the replicas whose log dir the file names: {replica: (still moving, Kafka's
    line)}; as Kafka, only a move under way counts as moving (a missing replica does not).  ``found[broker]`` maps each partition the broker holds to (its log dir, the dir
    of its future replica or None); None for a broker that did not answer."""
    out = {}
    for replica in sorted(wanted):
        topic, partition, broker = replica
        target, where = wanted[replica], f"{topic}-{partition}"
        dirs = found.get(broker)
        if dirs is None:
            out[replica] = (False, f"Partition {where} is not found in any live log dir on broker {broker}. "
                                  "There is likely an offline log directory on the broker.")
        elif (topic, partition) not in dirs:
            out[replica] = (False, f"Partition {where} cannot be found in any live log directory on broker "
                                  f"{broker}.")
        else:
            current, future = dirs[(topic, partition)]
            if future == target:
                out[replica] = (True, f"Reassignment of replica {replica_name(replica)} is still in progress.")
            elif future is not None:
                out[replica] = (True, f"Partition {where} on broker {broker} is being moved to log dir {future} "
                                      f"instead of {target}.")
            elif current == target:
                out[replica] = (False, f"Reassignment of replica {replica_name(replica)} completed successfully.")
            else:
                out[replica] = (False, f"Partition {where} on broker {broker} is not being moved from log dir "
                                       f"{current} to {target}.")
    return out


def reassignment_json(assignment: Mapping[TopicPartition, Iterable[int]]) -> str:
    """Kafka's reassignment document (compact, partitions sorted by topic then partition)."""
    partitions = [{"topic": t, "partition": p, "replicas": list(assignment[(t, p)]),
                   "log_dirs": [ANY_LOG_DIR] * len(tuple(assignment[(t, p)]))} for t, p in sorted(assignment)]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


# -- --generate -----------------------------------------------------------------------------
def broker_racks(brokers: Mapping[int, str | None], rack_aware: bool) -> dict[int, str | None]:
    """The racks to plan with: none without rack awareness.  Raises PlanError when only some
    brokers have one (Kafka's message)."""
    if not rack_aware:
        return {b: None for b in brokers}
    racked = [b for b, rack in brokers.items() if rack is not None]
    if racked and len(racked) < len(brokers):
        raise PlanError("Not all brokers have rack information. Add --disable-rack-aware in command line "
                        "to make replica assignment without rack information.")
    return dict(brokers)


def propose(current: Mapping[TopicPartition, tuple[int, ...]], brokers: Mapping[int, str | None], *,
            rng: RandomSource | None = None) -> Assignment:
    """--generate: each topic of ``current`` spread afresh over ``brokers`` (id -> rack, see
    broker_racks), keeping its partition count and its first partition's replication factor.
    Raises PlanError (more replicas than brokers)."""
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for (topic, p), replicas in current.items():
        by_topic.setdefault(topic, {})[p] = replicas
    proposal: Assignment = {}
    for topic, parts in sorted(by_topic.items()):
        rf = len(parts[min(parts)])
        try:
            placed = assign_replicas(brokers, len(parts), rf, rng=rng)
        except KafkaApiError as exc:
            raise PlanError(f"Topic {topic}: {exc.message}") from None
        proposal.update({(topic, p): replicas for p, replicas in placed.items()})
    return proposal


# -- --throttle -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PartitionMove:
    sources: frozenset[int]
    destinations: frozenset[int]


def move_map(in_progress: Mapping[TopicPartition, ReplicaAssignment], proposed: Mapping[TopicPartition, Iterable[int]],
             current: Mapping[TopicPartition, Iterable[int]]) -> dict[TopicPartition, PartitionMove]:
    """Every partition moving once ``proposed`` starts: those in progress, and the proposed
    ones, whose sources are their origin when already moving, else their current replicas."""
    moves = {tp: PartitionMove(frozenset(a.origin), frozenset(a.adding)) for tp, a in in_progress.items()}
    for tp, target in proposed.items():
        sources = moves[tp].sources if tp in moves else frozenset(current.get(tp, ()))
        if not sources:
            raise PlanError(f"Unable to find partition: {tp_name(tp)}")
        moves[tp] = PartitionMove(sources, frozenset(target) - sources)
    return moves


def throttled_replicas(moves: Mapping[TopicPartition, PartitionMove]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """({topic: leader throttle entries}, {topic: follower throttle entries}), ``"p:b"`` each."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, p), move in moves.items():
        leader.setdefault(topic, set()).update(f"{p}:{b}" for b in move.sources)
        follower.setdefault(topic, set()).update(f"{p}:{b}" for b in move.destinations)
    return leader, {t: e for t, e in follower.items() if e}


def involved_brokers(moves: Mapping[TopicPartition, PartitionMove]) -> set[int]:
    return {b for m in moves.values() for b in m.sources | m.destinations}


def merge_throttled(existing: str | None, entries: Iterable[str]) -> str:
    """A topic's ``*.replication.throttled.replicas`` with ``entries`` added: ``*`` (every
    replica) stays; otherwise the union, sorted by partition then broker."""
    have = {e.strip() for e in (existing or "").split(",") if e.strip()}
    if "*" in have:
        return "*"

    def order(entry: str):
        p, _, b = entry.partition(":")
        return (int(p), int(b)) if p.isdigit() and b.isdigit() else (1 << 62, 0, entry)
    return ",".join(sorted(have | set(entries), key=order))


# -- --drain-broker -------------------------------------------------------------------------
def drain_plan(assignment: Mapping[TopicPartition, tuple[int, ...]], broker: int,
               live: Mapping[int, str | None]) -> Assignment:
    """Targets moving every replica on ``broker`` elsewhere: each partition keeps its replication
    factor and order, the broker that replaces ``broker`` taking its position.  The replacement
    is a live broker other than ``broker`` that is not a replica yet, on a rack the other
    replicas do not use when racks are set (``live``: id -> rack, see broker_racks) and some
    such broker exists, then the one holding the fewest replicas (``assignment`` counted, plus
    this plan's moves so far), then the lowest id.  ``assignment`` is the whole cluster's, so
    load counts every topic.  Raises PlanError when a partition has no broker to move to."""
    load = {b: 0 for b in live if b != broker}
    for replicas in assignment.values():
        for b in replicas:
            if b in load:
                load[b] += 1
    plan: Assignment = {}
    for tp in sorted(tp for tp, replicas in assignment.items() if broker in replicas):
        replicas = assignment[tp]
        candidates = [b for b in load if b not in replicas]
        if not candidates:
            raise PlanError(f"Cannot drain broker {broker}: partition {tp_name(tp)} (replicas "
                            f"{','.join(map(str, replicas))}) has a replica on every other live broker "
                            f"({','.join(map(str, sorted(load))) or 'none'})")
        racks_used = {live.get(b) for b in replicas if b != broker} - {None}
        spread = [b for b in candidates if live[b] is not None and live[b] not in racks_used]
        chosen = min(spread or candidates, key=lambda b: (load[b], b))
        load[chosen] += 1
        plan[tp] = tuple(chosen if b == broker else b for b in replicas)
    return plan


# -- --wait ---------------------------------------------------------------------------------
def bytes_remaining(in_progress: Mapping[TopicPartition, ReplicaAssignment], leaders: Mapping[TopicPartition, int],
                    sizes: Mapping[TopicPartition, Mapping[int, int]]) -> dict[TopicPartition, int]:
    """Bytes the adding replicas of each moving partition still miss: the leader's size minus
    each adding replica's (DescribeLogDirs sizes by broker).  Without the leader's size the
    largest copy stands in for it."""
    out = {}
    for tp, a in in_progress.items():
        on_disk = sizes.get(tp, {})
        leader = leaders.get(tp)
        leader_size = on_disk[leader] if leader in on_disk else max(on_disk.values(), default=0)
        out[tp] = bytes_to_copy(leader_size, dict(on_disk), a.adding)
    return out
