"""What the clients and observers saw during a schedule, and the checks run on it afterwards.

Every record's value is the decimal integer ``writer * WRITER_BASE + seq``
(``encode``): a value read back names its writer and its place in that
writer's stream, so loss, duplication and reordering are set arithmetic, as
with ``tests/support/counting.py``'s integers.  Writers are numbered per
schedule and each has a kind:

``idempotent``     enable.idempotence: no duplicate, per-partition order
``plain``          acks=all without idempotence: may duplicate on retry
                   (at-least-once, counted apart and not a failure)
``transactional``  committed records visible once, aborted never, an
                   unknown outcome all or nothing

An idempotent writer's duplicate is classified by the batch headers that hold
its copies (tests/faults/duplicates.py) when ``check_records`` is given them:
a retry appended twice under one producer id and epoch is a violation, a copy
re-sent under a bumped epoch or a new producer id is counted and explained.

Times are ``time.monotonic()`` seconds.  A log read back is
``{partition: [(offset, value), ...]}`` in offset order.  Every check is a
pure function that adds counts and violations (one line each) to a
``Findings``; nothing here does I/O.
"""
from __future__ import annotations

import dataclasses
import collections
from collections import Counter, defaultdict
from typing import Iterable, Mapping, Sequence

from .duplicates import DUPLICATED, PidEvent, Sources, classify_duplicate

__all__ = ["IDEMPOTENT", "PLAIN", "TRANSACTIONAL", "Ack", "Commit", "Findings", "History", "IsrSample",
           "Observed", "PidEvent", "Recovery", "Sources", "check_group_offsets", "check_isr", "check_order",
           "check_records", "check_incidents", "check_recoveries", "check_transactions", "decode", "encode"]

WRITER_BASE = 10 ** 9
IDEMPOTENT, PLAIN, TRANSACTIONAL = "idempotent", "plain", "transactional"
MAY_DUPLICATE = frozenset({PLAIN})
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
CLIENT_LOG_LINES = 20000
EXAMPLES = 5                          # violations quoted per kind; the rest are counted

Log = Mapping[int, Sequence[tuple[int, int]]]


def encode(writer: int, seq: int) -> bytes:
    return str(writer * WRITER_BASE + seq).encode()


def decode(value: int) -> tuple[int, int]:
    """``(writer, seq)`` of a value."""
    return divmod(value, WRITER_BASE)


@dataclasses.dataclass(frozen=True)
class Ack:
    """A record its producer saw acknowledged at (partition, offset); ``offset`` -1 when the
    client reported none."""
    writer: int
    kind: str
    seq: int
    partition: int
    offset: int
    txn: int | None = None

    @property
    def value(self) -> int:
        return self.writer * WRITER_BASE + self.seq


@dataclasses.dataclass(frozen=True)
class Commit:
    """An offset commit the group's consumer saw succeed; ``at`` is when the call returned."""
    at: float
    partition: int
    offset: int


@dataclasses.dataclass(frozen=True)
class Observed:
    """The group's committed offset as a describe (OffsetFetch) returned it; ``at`` is when the
    request was sent, so every commit that returned before ``at`` must be reflected."""
    at: float
    partition: int
    offset: int


@dataclasses.dataclass(frozen=True)
class IsrSample:
    """Partition state znodes read at ``at``: {"topic-p": (leader, isr)}."""
    at: float
    states: Mapping[str, tuple[int, tuple[int, ...]]]


@dataclasses.dataclass(frozen=True)
class Recovery:
    """After the heal of ``fault`` at ``healed_at``: when every partition had a live leader and
    when every ISR was full again (None: not within the bound)."""
    fault: str
    healed_at: float
    leader_at: float | None
    isr_at: float | None


@dataclasses.dataclass
class History:
    """Everything recorded during one schedule; lists are appended to by client threads."""
    t0: float
    writers: dict[int, str] = dataclasses.field(default_factory=dict)
    acks: list[Ack] = dataclasses.field(default_factory=list)
    txn_members: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    txn_outcomes: dict[int, str] = dataclasses.field(default_factory=dict)
    commits: list[Commit] = dataclasses.field(default_factory=list)
    observed: list[Observed] = dataclasses.field(default_factory=list)
    isr_samples: list[IsrSample] = dataclasses.field(default_factory=list)
    windows: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    recoveries: list[Recovery] = dataclasses.field(default_factory=list)
    incidents: list[tuple[str, str]] = dataclasses.field(default_factory=list)   # (kind, what), seen live
    notes: list[str] = dataclasses.field(default_factory=list)
    # the idempotent producer's own log (librdkafka's "eos" debug context): its epoch bumps and
    # sequence errors, kept for a failing schedule's artifacts; the newest CLIENT_LOG_LINES only
    client_log: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=CLIENT_LOG_LINES))
    # every producer id and epoch each idempotent writer's client took on, from that log (kept whole)
    producer_ids: dict[int, list[PidEvent]] = dataclasses.field(default_factory=dict)

    def committed_acks(self) -> list[Ack]:
        """Acks of non-transactional writers and of transactions known committed."""
        return [a for a in self.acks if a.txn is None or self.txn_outcomes.get(a.txn) == COMMITTED]


@dataclasses.dataclass
class Findings:
    """Counts (``acknowledged``, ``lost``, ...) and violation lines; ``t0`` makes times relative.
    ``explained``: lines on what was found and is allowed (an idempotent duplicate across producer
    epochs); ``evidence``: text blocks (batch headers, client log) for the artifacts."""
    t0: float = 0.0
    counts: Counter = dataclasses.field(default_factory=Counter)
    violations: list[str] = dataclasses.field(default_factory=list)
    explained: list[str] = dataclasses.field(default_factory=list)
    evidence: list[str] = dataclasses.field(default_factory=list)
    _quoted: Counter = dataclasses.field(default_factory=Counter)

    def violation(self, kind: str, message: str) -> None:
        """Count one violation of ``kind``; quote the first ``EXAMPLES`` of each kind."""
        self.counts[kind] += 1
        self._quoted[kind] += 1
        if self._quoted[kind] <= EXAMPLES:
            self.violations.append(f"{kind}: {message}")
        elif self._quoted[kind] == EXAMPLES + 1:
            self.violations.append(f"{kind}: (further {kind} violations counted, not quoted)")

    def explain(self, kind: str, message: str) -> None:
        """Count one allowed finding of ``kind``; quote the first ``EXAMPLES`` of each kind."""
        self.counts[kind] += 1
        self._quoted[kind] += 1
        if self._quoted[kind] <= EXAMPLES:
            self.explained.append(f"{kind}: {message}")

    def at(self, t: float) -> str:
        return f"t={t - self.t0:.2f}s"


def _locations(log: Log) -> dict[int, list[tuple[int, int]]]:
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in log.items():
        for offset, value in records:
            where[value].append((partition, offset))
    return where


def check_records(acks: Iterable[Ack], log: Log, writers: Mapping[int, str], findings: Findings,
                  sources: Sources | None = None) -> None:
    """Every acknowledged record exactly once at its acknowledged (partition, offset).

    Counts ``acknowledged``; violations ``lost`` (absent), ``misplaced`` (present, not at the
    acknowledged offset), ``duplicated`` (any value of an idempotent or transactional writer
    present more than once); ``duplicated-plain`` counts a plain writer's duplicates, which
    at-least-once delivery allows, and is not a violation.  Given ``sources`` (the log's batch
    headers and the clients' logs) a duplicate is classified by the batches holding its copies
    (tests/faults/duplicates.py): ``duplicated_across_epochs`` and ``duplicated_new_producer``
    are counted and explained, not violations; the batches go to ``findings.evidence``."""
    where = _locations(log)
    for ack in acks:
        findings.counts["acknowledged"] += 1
        places = where.get(ack.value, [])
        if not places:
            findings.violation("lost", f"{ack.kind} writer {ack.writer} seq {ack.seq}, acknowledged at "
                                       f"{ack.partition}@{ack.offset}, is not in the log")
        elif ack.offset >= 0 and (ack.partition, ack.offset) not in places:
            findings.violation("misplaced", f"{ack.kind} writer {ack.writer} seq {ack.seq} acknowledged at "
                                            f"{ack.partition}@{ack.offset} but found at {places}")
    for value, places in where.items():
        if len(places) < 2:
            continue
        writer, seq = decode(value)
        kind = writers.get(writer, "unknown")
        if kind in MAY_DUPLICATE:
            findings.counts["duplicated-plain"] += len(places) - 1
            continue
        message = f"{kind} writer {writer} seq {seq} appears {len(places)} times, at {sorted(places)}"
        if sources is None:
            findings.violation(DUPLICATED, message)
            continue
        found = classify_duplicate(writer, kind, seq, places, sources)
        findings.evidence.append(found.evidence)
        if found.violation:
            findings.violation(DUPLICATED, f"{message}: {found.reason}")
        else:
            findings.explain(found.kind, f"{message}: {found.reason}")


def check_order(acks: Iterable[Ack], log: Log, writers: Mapping[int, str], findings: Findings) -> None:
    """Per producer and partition, order is kept: acknowledged offsets increase with the
    sequence (``reordered``), and in the log an idempotent or transactional writer's records
    appear in sequence order (``reordered-log``; a plain writer's first occurrences)."""
    acked: dict[tuple[int, int], list[Ack]] = defaultdict(list)
    for ack in acks:
        if ack.offset >= 0:
            acked[(ack.writer, ack.partition)].append(ack)
    for (writer, partition), items in sorted(acked.items()):
        items.sort(key=lambda a: a.seq)
        for before, after in zip(items, items[1:]):
            if after.offset <= before.offset:
                findings.violation("reordered", f"writer {writer} partition {partition}: seq {before.seq} "
                                                f"acknowledged at offset {before.offset}, later seq {after.seq} "
                                                f"at {after.offset}")
    for partition, records in sorted(log.items()):
        last: dict[int, tuple[int, int]] = {}
        seen: set[int] = set()
        for offset, value in records:
            writer, seq = decode(value)
            if value in seen:
                continue                # a plain writer's retry: its first copy holds the place
            seen.add(value)
            if writer in last and seq <= last[writer][0]:
                findings.violation("reordered-log", f"writer {writer} ({writers.get(writer)}) partition "
                                                    f"{partition}: seq {seq} at offset {offset} after seq "
                                                    f"{last[writer][0]} at offset {last[writer][1]}")
            last[writer] = (seq, offset)


def check_transactions(members: Mapping[int, Sequence[int]], outcomes: Mapping[int, str],
                       committed_log: Log, findings: Findings) -> None:
    """What a read_committed consumer sees: every record of a committed transaction
    (``lost-committed``), none of an aborted one (``aborted-visible``), and of a transaction
    whose outcome the producer never learnt all or nothing (``partial-transaction``)."""
    visible = set(_locations(committed_log))
    for txn, values in sorted(members.items()):
        outcome = outcomes.get(txn, UNKNOWN)
        shown = [v for v in values if v in visible]
        findings.counts[f"txn-{outcome}"] += 1
        if outcome == COMMITTED and len(shown) < len(values):
            findings.violation("lost-committed", f"transaction {txn} committed {len(values)} records, "
                                                 f"read_committed shows {len(shown)}")
        elif outcome == ABORTED and shown:
            findings.violation("aborted-visible", f"transaction {txn} aborted, read_committed shows "
                                                  f"{len(shown)} of its {len(values)} records")
        elif outcome == UNKNOWN and 0 < len(shown) < len(values):
            findings.violation("partial-transaction", f"transaction {txn} (outcome unknown to its producer) "
                                                      f"shows {len(shown)} of {len(values)} records")


def check_group_offsets(commits: Iterable[Commit], observed: Iterable[Observed], findings: Findings) -> None:
    """Committed group offsets never go backwards: the consumer's successive commits per
    partition (``commit-regression``), successive describes (``offset-regression``), and a
    describe sent after a commit returned shows at least that commit (``stale-offset``: the
    commit was lost, or a deposed coordinator answered from its cache)."""
    by_partition: dict[int, list[tuple[float, int, str, int]]] = defaultdict(list)
    for c in commits:
        by_partition[c.partition].append((c.at, 0, "commit", c.offset))
    for o in observed:
        by_partition[o.partition].append((o.at, 1, "observed", o.offset))
    for partition, events in sorted(by_partition.items()):
        events.sort()
        committed, described = -1, -1
        for at, _, what, offset in events:
            if what == "commit":
                if offset < committed:
                    findings.violation("commit-regression", f"partition {partition} {findings.at(at)}: "
                                                            f"committed {offset} after {committed}")
                committed = max(committed, offset)
                continue
            if offset < described:
                findings.violation("offset-regression", f"partition {partition} {findings.at(at)}: described "
                                                        f"{offset} after {described}")
            if offset < committed:
                findings.violation("stale-offset", f"partition {partition} {findings.at(at)}: described {offset} "
                                                   f"after a commit of {committed} had returned")
            described = max(described, offset)


def check_isr(samples: Iterable[IsrSample], windows: Iterable[tuple[float, float]],
              replication: Mapping[str, int], findings: Findings) -> None:
    """In a fault-free window (every replica alive and connected, every ISR full when it
    opened) no ISR shrinks: one ``isr-shrink`` per partition and window."""
    ordered = sorted(samples, key=lambda s: s.at)
    for start, end in windows:
        reported: set[str] = set()
        for sample in ordered:
            if not start <= sample.at <= end:
                continue
            for tp, (leader, isr) in sorted(sample.states.items()):
                if tp in reported or len(isr) >= replication.get(tp, 0):
                    continue
                reported.add(tp)
                findings.violation("isr-shrink", f"{tp} ISR {list(isr)} (leader {leader}) at {findings.at(sample.at)}, "
                                                 f"in the fault-free window {findings.at(start)}..{findings.at(end)}")


def check_recoveries(recoveries: Iterable[Recovery], leader_limit_s: float, findings: Findings) -> None:
    """After each heal every partition has a live leader within ``leader_limit_s``
    (``leaderless``) and every ISR fills again (``isr-not-restored``); counts the slowest
    recovery in ``max_recovery_ms``."""
    for r in recoveries:
        if r.leader_at is None or r.leader_at - r.healed_at > leader_limit_s:
            took = "never" if r.leader_at is None else f"after {r.leader_at - r.healed_at:.1f}s"
            findings.violation("leaderless", f"after the heal of {r.fault} at {findings.at(r.healed_at)} some "
                                             f"partition had no live leader {took} (limit {leader_limit_s:.0f}s)")
        if r.isr_at is None:
            findings.violation("isr-not-restored", f"after the heal of {r.fault} at {findings.at(r.healed_at)} "
                                                   f"some ISR never became full again")
        else:
            took_ms = int((r.isr_at - r.healed_at) * 1000)
            findings.counts["max_recovery_ms"] = max(findings.counts["max_recovery_ms"], took_ms)


def check_incidents(incidents: Iterable[tuple[str, str]], findings: Findings) -> None:
    """Violations seen while the schedule ran (a broker that crashed on restart), as recorded."""
    for kind, what in incidents:
        findings.violation(kind, what)
