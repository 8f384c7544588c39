"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

An assignor maps each member to the partitions it should own (the group's
*target assignment*), from the members' subscriptions, the subscribed topics'
metadata and the previous target assignment.  Pure functions of their input.

* ``uniform`` (Kafka's UniformAssignor): every partition of a subscribed topic is
  assigned; the counts per member differ by at most one among members with the
  same subscription; it is sticky: a partition stays with its previous owner
  unless balance requires a move.  kwire's algorithm is a simple one (keep, fill the
  emptiest subscriber, then move from the fullest to the emptiest until no move
  lowers the spread), not Kafka's two optimized builders: the balance goals are the
  same, the exact choice of which partition moves may differ.
* ``range`` (Kafka's RangeAssignor): per topic, the subscribers in member-id order
  take contiguous ranges, the first ``partitions % members`` one partition more, so
  topics with equal partition counts are co-partitioned.  Not sticky (Kafka's keeps
  previous ranges where it can).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class MemberSubscription:
    topics: frozenset[str]                        # subscribed topic names, resolved (regex included)
    current: dict[uuid.UUID, frozenset[int]]      # its previous target assignment


def _result(owned: dict[str, set[TopicPartition]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member_id, tps in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for tid, p in tps:
            by_topic.setdefault(tid, set()).add(p)
        out[member_id] = {tid: frozenset(ps) for tid, ps in by_topic.items()}
    return out


def _subscribers(members: dict[str, MemberSubscription], topics: dict[str, tuple[uuid.UUID, int]]
                 ) -> dict[uuid.UUID, list[str]]:
    return {tid: sorted(m for m, s in members.items() if name in s.topics) for name, (tid, _) in topics.items()}


def uniform(members: dict[str, MemberSubscription], topics: dict[str, tuple[uuid.UUID, int]]
            ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The uniform (balanced, sticky) assignment; ``topics`` maps name -> (topic id, partitions)."""
    subscribers = _subscribers(members, topics)
    sizes = {tid: n for tid, n in topics.values()}
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    for member_id in sorted(members):            # keep: still subscribed, partition still exists
        for tid, partitions in members[member_id].current.items():
            if member_id in subscribers.get(tid, ()):
                for p in partitions:
                    if p < sizes[tid] and (tid, p) not in owner:
                        owner[(tid, p)] = member_id
                        owned[member_id].add((tid, p))
    for name in sorted(topics):                  # fill: each free partition to its emptiest subscriber
        tid, n = topics[name]
        for p in range(n):
            if (tid, p) not in owner and subscribers[tid]:
                m = min(subscribers[tid], key=lambda s: (len(owned[s]), s))
                owner[(tid, p)] = m
                owned[m].add((tid, p))
    _balance(owned, subscribers)
    return _result(owned)


def _balance(owned: dict[str, set[TopicPartition]], subscribers: dict[uuid.UUID, list[str]]) -> None:
    """Move partitions from fuller to emptier subscribers while one is 2+ partitions behind;
    each move lowers the sum of squared counts, so this ends."""
    moved = True
    while moved:
        moved = False
        for a in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tid, p in sorted(owned[a], key=lambda tp: (str(tp[0]), -tp[1])):
                candidates = [b for b in subscribers[tid] if len(owned[a]) - len(owned[b]) > 1]
                if candidates:
                    b = min(candidates, key=lambda s: (len(owned[s]), s))
                    owned[a].remove((tid, p))
                    owned[b].add((tid, p))
                    moved = True
                    break
            if moved:
                break


def range_(members: dict[str, MemberSubscription], topics: dict[str, tuple[uuid.UUID, int]]
           ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The range assignment: contiguous ranges per topic, subscribers in member-id order."""
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for tid, subs in _subscribers(members, topics).items():
        n = next(size for t, size in topics.values() if t == tid)
        if not subs:
            continue
        quota, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = quota + (1 if i < extra else 0)
            owned[m].update((tid, p) for p in range(start, start + count))
            start += count
    return _result(owned)


ASSIGNORS = {"uniform": uniform, "range": range_}
# Kafka's class names for group.consumer.assignors
CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
               "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range"}


def assignor_names(configured) -> list[str]:
    """The short names of ``group.consumer.assignors`` (class names mapped); unknown names are kept,
    and refused by the caller."""
    return [CLASS_NAMES.get(name, name) for name in configured]
