"""What the groups pages ask the cluster.  Not a page (``app.PAGES`` does not list it): the
blocking half of ``pages/groups.py``, each function taking kafka-python's admin client first so
a page runs it with ``await console.access.admin_call(fn, ...)``.

Built on ``kwire groups``' own functions (kwire.tools.groups, group_types, group_offsets), so
the console and the CLI describe, plan and refuse alike:

- classic groups are described with DescribeGroups, KIP-848 consumer groups with
  ConsumerGroupDescribe, share groups (KIP-932) with ShareGroupDescribe; their share-partitions
  (start offset, lag) come from DescribeShareGroupOffsets;
- a reset is planned as kafka-consumer-groups.sh plans it (clamped into the log) and refused,
  with its message, unless the group is inactive (Empty or Dead); a share group's start offsets
  as kafka-share-groups.sh resets them (AlterShareGroupOffsets, only while it is empty);
- a deletion the broker refuses is reported with Kafka's error name (NON_EMPTY_GROUP);
- a share-partition's in-flight and archived record counts, which no admin API reports, are
  read from kwire brokers' /metrics (``--metrics-url``): each share-partition leader exposes
  ``kwire_share_partition_records{group,topic,partition,state}`` (kwire.metrics.collector).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from kafka.structs import TopicPartition

from kwire.tools.group_offsets import Scenario, parse_datetime, parse_duration
from kwire.tools.group_types import (describe_consumer_groups, describe_share_groups, group_types,
                                     share_group_offsets)
from kwire.tools.groups import (commit_offsets, committed_offsets, describe_groups, find_coordinator,
                                partitions_to_reset, plan_reset, reset_refusal)
from kwire.tools.share_offsets import alter_share_offsets, share_reset_refusal, share_start_offsets

GROUP_TYPES = ("classic", "consumer", "share")
# the reset choices the page offers: kwire.tools.group_offsets.SCENARIOS, in words
SCENARIO_LABELS = {"to_earliest": "Earliest offset", "to_latest": "Latest offset",
                   "to_datetime": "Date and time", "by_duration": "Duration back from now",
                   "to_offset": "Specific offset", "shift_by": "Shift by"}
VALUE_NEEDED = {"to_datetime", "by_duration", "to_offset", "shift_by"}


@dataclass
class GroupView:
    """One group as its type's describe call tells it; ``members`` are dicts with consumer_id,
    group_instance_id, client_id, host, assignment ([TopicPartition]) and, in a share group,
    subscribed (topic names)."""
    group_id: str
    group_type: str
    state: str
    protocol_type: str
    assignor: str | None
    members: list[dict[str, Any]] = field(default_factory=list)
    coordinator: dict[str, Any] | None = None
    offset_topics: list[str] = field(default_factory=list)     # topics it has offsets (start offsets) on

    @property
    def exists(self) -> bool:
        return self.state != "Dead"

    def topics(self) -> list[str]:
        """The topics its members are assigned and those it has committed offsets on."""
        return sorted({tp.topic for m in self.members for tp in m["assignment"]} | set(self.offset_topics))


@dataclass
class ResetPlan:
    """A reset's rows (topic, partition, current offset or None, new offset) and Kafka's warnings."""
    group_id: str
    state: str
    rows: list[tuple[str, int, int | None, int]]
    warnings: list[str]
    executed: bool


class ResetRefused(Exception):
    """The group may not be reset now; the message is Kafka's tool's."""


def type_of(group_type: str | None, protocol_type: str) -> str:
    """A group's type (ListGroups v5's group_type); before v5 a share group says so by its
    protocol type, and every other group is classic."""
    if group_type:
        return group_type.lower()
    return "share" if protocol_type == "share" else "classic"


def lookup_type(admin, group_id: str) -> str | None:
    """The type of a group the latest sample did not list yet (ListGroups), None when unknown."""
    return group_types(admin).get(group_id)


def describe(admin, group_id: str, group_type: str, brokers: dict[int, dict]) -> GroupView:
    """The group's state, members, coordinator and the topics it has offsets on.  Raises
    ToolError or KafkaError when the broker refuses; a group that does not exist is returned
    with state Dead."""
    if group_type in ("consumer", "share"):
        call = describe_consumer_groups if group_type == "consumer" else describe_share_groups
        d = call(admin, [group_id])[group_id]
        view = GroupView(group_id, group_type, d["state"], group_type, d["assignor"], d["members"])
    else:
        g = describe_groups(admin, [group_id])[group_id]
        members = [{"consumer_id": m.consumer_id, "group_instance_id": m.group_instance_id, "host": m.host,
                    "client_id": m.client_id, "assignment": m.assignment} for m in g.members]
        view = GroupView(group_id, "classic", g.state, g.protocol_type, g.assignment_strategy or None, members)
    for m in view.members:
        m["assignment_text"] = assignment_text(m["assignment"])
    if view.exists:
        view.coordinator = find_coordinator(admin, group_id, brokers)
    if group_type != "share" or view.exists:
        offsets = (share_start_offsets if group_type == "share" else committed_offsets)(admin, group_id)
        view.offset_topics = sorted({tp.topic for tp in offsets})
    return view


def assignment_text(assignment: Iterable[TopicPartition]) -> str:
    """``orders (0, 1); payments (2)``: a member's partitions by topic."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return "; ".join(f"{t} ({', '.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def member_counts(admin, groups: Iterable[tuple[str, str]]) -> dict[str, int]:
    """group id -> members, for ``(group id, type)`` pairs: one describe request per type and
    coordinator.  Groups the broker would not describe are left out."""
    by_type: dict[str, list[str]] = {}
    for group_id, group_type in groups:
        by_type.setdefault(group_type, []).append(group_id)
    counts = {}
    if by_type.get("classic"):
        counts.update({gid: len(g.members) for gid, g in describe_groups(admin, by_type["classic"]).items()})
    for group_type, call in (("consumer", describe_consumer_groups), ("share", describe_share_groups)):
        if by_type.get(group_type):
            counts.update({gid: len(d["members"]) for gid, d in call(admin, by_type[group_type]).items()
                           if d["error"] is None})
    return counts


def share_partitions(admin, group_id: str) -> list[dict[str, Any]]:
    """A share group's share-partitions: topic, partition, start_offset, lag (None: unknown)."""
    return share_group_offsets(admin, group_id)


SHARE_RECORDS = "kwire_share_partition_records"
METRICS_TIMEOUT_S = 2.0
METRICS_MAX_BYTES = 64 * 1024 * 1024


def share_record_counts(urls: Iterable[str], group_id: str) -> tuple[dict[tuple[str, int], dict[str, int]],
                                                                      str | None]:
    """{(topic, partition): {state: records}} of the group's share-partitions as the brokers'
    /metrics at ``urls`` report them (each by its share-partition leader; states available,
    acquired, acknowledged, archived), and what went wrong reading them (None: nothing).  A
    broker that does not answer is left out and named in the error."""
    import urllib.request
    from kwire.metrics.scrape import labelled_samples
    counts: dict[tuple[str, int], dict[str, int]] = {}
    failed = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=METRICS_TIMEOUT_S) as response:
                text = response.read(METRICS_MAX_BYTES).decode("utf-8", "replace")
            samples = labelled_samples(text, SHARE_RECORDS)
        except (OSError, ValueError) as exc:
            failed.append(f"{url}: {exc}")
            continue
        for labels, value in samples:
            if labels.get("group") != group_id:
                continue
            try:
                key = (labels["topic"], int(labels["partition"]))
            except (KeyError, ValueError):
                continue
            counts.setdefault(key, {})[labels.get("state", "")] = int(value)
    return counts, ("; ".join(failed) or None)


def with_record_counts(rows: list[dict[str, Any]], counts: dict[tuple[str, int], dict[str, int]]) -> None:
    """Add to each share-partition row its available, acquired, acknowledged, in_flight (their
    sum) and archived record counts; None where no broker reported the share-partition (its
    leader has not served it since it started, in a cluster let it go while no session read
    it, or did not answer)."""
    for r in rows:
        c = counts.get((r["topic"], r["partition"]))
        for state in ("available", "acquired", "acknowledged", "archived"):
            r[state] = None if c is None else c.get(state, 0)
        r["in_flight"] = None if c is None else r["available"] + r["acquired"] + r["acknowledged"]


# -- reset-offsets -------------------------------------------------------------------------
def scenario_from(kind: str, value: str, now_ms: int) -> Scenario:
    """A reset scenario from the form.  Raises ValueError with a message for the page."""
    if kind not in SCENARIO_LABELS:
        raise ValueError("Choose where to reset the offsets to.")
    value = value.strip()
    if kind not in VALUE_NEEDED:
        return Scenario(kind)
    if not value:
        raise ValueError(f"{SCENARIO_LABELS[kind]} needs a value.")
    if kind == "to_datetime":
        return Scenario(kind, parse_datetime(value))
    if kind == "by_duration":
        return Scenario(kind, now_ms - parse_duration(value))
    try:
        return Scenario(kind, int(value))
    except ValueError:
        raise ValueError(f"{SCENARIO_LABELS[kind]} needs a whole number, not {value!r}.") from None


def group_state(admin, group_id: str, group_type: str) -> str:
    """The group's state as its type's describe call says it (Dead: it does not exist)."""
    if group_type in ("consumer", "share"):
        call = describe_consumer_groups if group_type == "consumer" else describe_share_groups
        return call(admin, [group_id])[group_id]["state"]
    return describe_groups(admin, [group_id])[group_id].state


def reset(admin, group_id: str, group_type: str, topic: str | None, scenario: Scenario,
          execute: bool) -> ResetPlan:
    """Plan (and with ``execute`` commit) new offsets for the group's partitions of ``topic``,
    or of every topic it has offsets for; a share group's start offsets (AlterShareGroupOffsets).
    Raises ResetRefused while the group is active (a share group: has members), ToolError for an
    unknown topic or a refused commit, KafkaError."""
    share = group_type == "share"
    state = group_state(admin, group_id, group_type)
    refusal = (share_reset_refusal if share else reset_refusal)(group_id, state)
    if refusal is not None:
        raise ResetRefused(refusal)
    committed = (share_start_offsets if share else committed_offsets)(admin, group_id)
    partitions = partitions_to_reset(admin, topic is None, [(topic, None)] if topic else [], committed)
    plan = plan_reset(admin, scenario, partitions, committed)
    if execute:
        (alter_share_offsets if share else commit_offsets)(admin, group_id, plan.offsets)
    rows = [(tp.topic, tp.partition, _current(committed, tp), new) for tp, new in sorted(plan.offsets.items())]
    return ResetPlan(group_id, state, rows, plan.warnings, execute)


def _current(committed, tp: TopicPartition) -> int | None:
    om = committed.get(tp)
    return om.offset if om is not None and om.offset >= 0 else None


# -- delete --------------------------------------------------------------------------------
def delete(admin, group_id: str) -> str | None:
    """DeleteGroups; None when deleted, else the broker's refusal as Kafka's error name and its
    description (``NON_EMPTY_GROUP: The group is not empty.``)."""
    import kafka.errors
    result = admin.delete_groups([group_id]).get(group_id, "UnknownError")
    if result == "OK":
        return None
    error = getattr(kafka.errors, result, None)
    if error is None or not hasattr(error, "message"):
        return result
    return f"{error.message}: {error.description}" if error.description else error.message
