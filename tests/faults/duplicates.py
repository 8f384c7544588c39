"""Duplicates of an idempotent producer told apart by the batches that hold them, and the
sequence invariant of every replica's log.  Pure: the batch headers come from
tests/faults/replicas.py, read while the cluster still runs.

A value read back twice says nothing of who is to blame.  The v2 headers of
the two batches that hold the copies do (Kafka's idempotence is per producer
id, epoch and sequence, per partition):

``duplicated``                the same producer id and epoch, overlapping
                              sequences: a retry the broker appended twice.
                              A violation (also: copies in different
                              partitions, a later copy under a lower epoch,
                              a producer id the writer never held, a copy
                              whose batch is not in the replica logs).
``duplicated_across_epochs``  the same producer id, the later copy under a
                              higher epoch (typically at sequence 0): the
                              client gave up on the first copy's fate, bumped
                              its epoch and renumbered its queue (librdkafka
                              does so after OUT_OF_ORDER_SEQUENCE_NUMBER or a
                              timed-out batch, librdkafka issue #4953).
                              Idempotence holds within an epoch only: counted
                              and reported, not a violation.
``duplicated_new_producer``   another producer id: the client reset its
                              producer and re-sent.  Not a violation, unless
                              the writer's own log shows it never held that id.

A transactional writer never sends a value twice: its duplicates are always
violations, classified only for the evidence.

The sequence invariant needs no values.  Per partition and producer id, in
offset order over the data batches (control batches carry no sequence), as
Kafka's ProducerAppendInfo and kwire's log/producer_state.py accept them:

* within an epoch each batch continues at the last sequence + 1 (INT32_MAX
  wraps to 0): a batch at or below the highest sequence seen is
  ``sequence-repeat``, one beyond the next is ``sequence-gap``;
* a higher epoch starts at sequence 0, else ``epoch-start``;
* a lower epoch than one already in the log is ``epoch-regression``;
* the first batch of a producer id in a partition may start anywhere (a
  broker accepts an unknown producer at any sequence, KIP-360): counted in
  ``sequence-first-nonzero`` when it does not start at 0, not a violation.
"""
from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Iterable, Mapping, Sequence

from .replicas import INT32_MAX, Batch

__all__ = ["ACROSS_EPOCHS", "DUPLICATED", "EXPLAINED", "NEW_PRODUCER", "Classification", "PidEvent", "Sources",
           "check_sequences", "classify_duplicate", "describe_batches", "pid_event", "pick_replica",
           "sequence_problems"]

DUPLICATED = "duplicated"
ACROSS_EPOCHS = "duplicated_across_epochs"
NEW_PRODUCER = "duplicated_new_producer"
EXPLAINED = (ACROSS_EPOCHS, NEW_PRODUCER)
CONTEXT = 5                           # batches shown on each side of one of interest
EOS_LINES = 40                        # librdkafka eos log lines quoted per duplicate
EVIDENCE_PER_KIND = 5
IDEMPOTENT_KIND = "idempotent"        # history.IDEMPOTENT (history imports this module)

# librdkafka's eos debug lines that change a producer's id or epoch (rdkafka_idempotence.c):
#   GETPID ... Acquired PID{Id:1000,Epoch:0} [(previous PID{...})]
#   DRAIN ... All partitions drained, bumped epoch to PID{Id:1000,Epoch:1}
_PID_CHANGE = re.compile(r"(Acquired|bumped epoch to) PID\{Id:(-?\d+),Epoch:(-?\d+)\}")
EOS_PATTERNS = ("bumped epoch", "epoch bump", "Acquired PID", "OUT_OF_ORDER", "Out of order", "UNKNOWN_PRODUCER")


@dataclasses.dataclass(frozen=True)
class PidEvent:
    """A producer id or epoch a writer's client took on, from its eos log; ``at`` relative to t0."""
    at: float
    what: str                         # "acquired" (InitProducerId) or "bumped" (its own epoch bump)
    producer_id: int
    epoch: int

    def describe(self) -> str:
        verb = "acquired" if self.what == "acquired" else "bumped epoch to"
        return f"t={self.at:.2f}s {verb} PID{{Id:{self.producer_id},Epoch:{self.epoch}}}"


def pid_event(message: str) -> tuple[str, int, int] | None:
    """``(what, producer_id, epoch)`` when a librdkafka log message changes the producer id or epoch."""
    m = _PID_CHANGE.search(message)
    if m is None:
        return None
    return ("acquired" if m.group(1) == "Acquired" else "bumped"), int(m.group(2)), int(m.group(3))


@dataclasses.dataclass
class Sources:
    """What a duplicate is classified from: one topic's replicas as read below the high watermark
    (``{partition: {broker: [Batch]}}``), and the writers' client logs (``pids``: {writer:
    [PidEvent]}, ``client_log``: the eos lines, each "t=...s writer N: ...")."""
    topic: str
    replicas: Mapping[int, Mapping[int, Sequence[Batch]]]
    pids: Mapping[int, Sequence[PidEvent]] = dataclasses.field(default_factory=dict)
    client_log: Sequence[str] = ()


@dataclasses.dataclass(frozen=True)
class Classification:
    kind: str                         # DUPLICATED or one of EXPLAINED
    reason: str                       # one line
    evidence: str                     # the batches around each copy and the client's log, for artifacts

    @property
    def violation(self) -> bool:
        return self.kind not in EXPLAINED


def pick_replica(per_broker: Mapping[int, Sequence[Batch]]) -> tuple[int | None, Sequence[Batch]]:
    """The broker holding the most batches of a partition (below the high watermark replicas are
    byte-identical, tests/faults/replicas.py checks that) and its batches."""
    if not per_broker:
        return None, []
    broker = max(sorted(per_broker), key=lambda b: len(per_broker[b]))
    return broker, per_broker[broker]


def _locate(items: Sequence[Batch], offset: int) -> int | None:
    """Index of the batch holding ``offset`` (batches in offset order), None when none does."""
    i = bisect.bisect_right([b.base_offset for b in items], offset) - 1
    if i >= 0 and items[i].base_offset <= offset <= items[i].last_offset:
        return i
    return None


def describe_batches(items: Sequence[Batch], marks: Mapping[int, str], context: int = CONTEXT) -> list[str]:
    """The headers of the batches at the indexes of ``marks`` and ``context`` on each side, one a
    line, each marked one prefixed ``>>`` and followed by its mark."""
    shown = sorted({j for i in marks for j in range(max(0, i - context), min(len(items), i + context + 1))})
    lines, previous = [], None
    for j in shown:
        if previous is not None and j != previous + 1:
            lines.append("   ...")
        lead = ">>" if j in marks else "  "
        lines.append(f"{lead} #{j} {items[j].describe()}" + (f"   <- {marks[j]}" if j in marks else ""))
        previous = j
    return lines


def _overlap(a: Batch, b: Batch) -> bool:
    return a.base_sequence <= b.last_sequence and b.base_sequence <= a.last_sequence


def _pair(first: Batch, later: Batch, events: Sequence[PidEvent]) -> tuple[str, str]:
    """The kind and reason of a later copy against the first, by their batches' headers."""
    if first == later:
        return DUPLICATED, (f"both in one batch of pid {first.producer_id} epoch {first.producer_epoch}: "
                            f"sent twice within one epoch")
    if first.producer_id == later.producer_id:
        if later.producer_epoch == first.producer_epoch:
            if _overlap(first, later):
                return DUPLICATED, (f"both in batches of pid {first.producer_id} epoch {first.producer_epoch} with "
                                    f"overlapping sequences: a retry appended twice")
            return DUPLICATED, (f"both under pid {first.producer_id} epoch {first.producer_epoch}, at different "
                                f"sequences: sent twice within one epoch")
        if later.producer_epoch < first.producer_epoch:
            return DUPLICATED, (f"the later copy's batch has pid {later.producer_id} epoch {later.producer_epoch}, "
                                f"below the first copy's epoch {first.producer_epoch}")
        bump = [e for e in events if e.what == "bumped" and e.producer_id == later.producer_id
                and e.epoch == later.producer_epoch]
        seen = (f"the client logged it: {bump[0].describe()}" if bump else
                "the client's log shows no bump to that epoch" if events else "the client's pid log is empty")
        return ACROSS_EPOCHS, (f"pid {first.producer_id} epoch {first.producer_epoch} seq {first.base_sequence}.."
                               f"{first.last_sequence}, then epoch {later.producer_epoch} seq {later.base_sequence}.."
                               f"{later.last_sequence}: renumbered after an epoch bump ({seen})")
    held = {e.producer_id for e in events if e.what == "acquired"}
    if held and not {first.producer_id, later.producer_id} <= held:
        return DUPLICATED, (f"pids {first.producer_id} and {later.producer_id}, but the writer only ever held "
                            f"{sorted(held)}")
    known = "both held by the writer" if held else "the writer's pids are not recorded"
    return NEW_PRODUCER, (f"pid {first.producer_id} epoch {first.producer_epoch}, then pid {later.producer_id} epoch "
                          f"{later.producer_epoch} ({known}): the client reset its producer id and re-sent")


def _eos_lines(sources: Sources, writer: int, partition: int) -> list[str]:
    """The writer's eos log lines about epochs, producer ids and sequence errors, and its
    renumbering of ``partition`` (librdkafka's "<topic> [p] changed PID{...} -> PID{...}")."""
    tag = f" writer {writer}: "
    renumbered = f"{sources.topic} [{partition}] changed PID"
    picked = [line for line in sources.client_log if tag in line
              and (renumbered in line or any(p in line for p in EOS_PATTERNS))]
    return picked[-EOS_LINES:]


def classify_duplicate(writer: int, kind: str, seq: int, places: Iterable[tuple[int, int]],
                       sources: Sources) -> Classification:
    """Classify a value of ``writer`` read back at every (partition, offset) of ``places``."""
    places = sorted(places)
    head = f"{kind} writer {writer} seq {seq} appears {len(places)} times, at {places}"
    events = list(sources.pids.get(writer, ()))
    partitions = sorted({p for p, _ in places})
    if len(partitions) > 1:
        return Classification(DUPLICATED, f"copies in partitions {partitions}", head)
    partition = partitions[0]
    broker, items = pick_replica(sources.replicas.get(partition, {}))
    found = [(offset, _locate(items, offset)) for _, offset in places]
    missing = [offset for offset, i in found if i is None]
    if missing:
        return Classification(DUPLICATED, f"no batch holds offsets {missing} in the replica logs: not classified",
                              head)
    first = items[found[0][1]]
    verdicts = [_pair(first, items[i], events) for _, i in found[1:]]
    if kind != IDEMPOTENT_KIND:
        verdicts = [(DUPLICATED, f"a {kind} writer sends no value twice; {why}") for _, why in verdicts]
    ranked = [k for k in (DUPLICATED, NEW_PRODUCER, ACROSS_EPOCHS) if any(v == k for v, _ in verdicts)]
    worst = ranked[0]
    reason = "; ".join(why for v, why in verdicts if v == worst)
    marks: dict[int, str] = {}
    for n, (offset, i) in enumerate(found, 1):
        mark = f"copy {n}: offset {offset}, record seq {items[i].sequence_at(offset)}"
        marks[i] = f"{marks[i]}; {mark}" if i in marks else mark
    lines = [f"{worst}: {head}: {reason}",
             f"{sources.topic}-{partition} as broker {broker} holds it (batches below the high watermark):",
             *describe_batches(items, marks)]
    if kind == IDEMPOTENT_KIND:
        lines.append(f"writer {writer}'s producer ids and epochs (its eos log): "
                     + ("; ".join(e.describe() for e in events) or "none recorded"))
        eos = _eos_lines(sources, writer, partition)
        lines.append(f"writer {writer}'s eos log on epochs, pids and sequence errors ({len(eos)} line(s)):")
        lines += [f"  {line}" for line in eos]
    return Classification(worst, reason, "\n".join(lines))


def sequence_problems(items: Sequence[Batch]) -> list[tuple[str, int, str]]:
    """``(kind, batch index, what)`` for each breach of the sequence invariant in one replica's
    batches of a partition (offset order), and ``("sequence-first-nonzero", i, what)`` for a
    producer first seen at a sequence other than 0 (allowed)."""
    problems: list[tuple[str, int, str]] = []
    state: dict[int, tuple[int, int]] = {}                 # producer id -> (epoch, highest last seq in it)
    ranges: dict[tuple[int, int], list[Batch]] = {}       # (producer id, epoch) -> its batches so far
    for i, b in enumerate(items):
        if not b.idempotent:
            continue
        pid, epoch = b.producer_id, b.producer_epoch
        where = f"pid {pid} epoch {epoch} seq {b.base_sequence}..{b.last_sequence} at offset {b.base_offset}"
        if pid not in state:
            if b.base_sequence != 0:
                problems.append(("sequence-first-nonzero", i, f"{where}: the producer's first batch here"))
            state[pid] = (epoch, b.last_sequence)
            ranges[(pid, epoch)] = [b]
            continue
        current, high = state[pid]
        if epoch < current:
            problems.append(("epoch-regression", i, f"{where}, after epoch {current} of that producer"))
            continue
        if epoch > current:
            if b.base_sequence != 0:
                problems.append(("epoch-start", i, f"{where}: a bumped epoch (after {current}) starts at 0"))
            state[pid] = (epoch, b.last_sequence)
            ranges[(pid, epoch)] = [b]
            continue
        expected = 0 if high == INT32_MAX else high + 1
        earlier = ranges[(pid, epoch)]
        if b.base_sequence != expected:
            if b.base_sequence < expected:
                clash = next((e for e in reversed(earlier) if _overlap(e, b)), earlier[-1])
                problems.append(("sequence-repeat", i, f"{where} repeats seq {clash.base_sequence}.."
                                                       f"{clash.last_sequence} at offset {clash.base_offset}"))
            else:
                problems.append(("sequence-gap", i, f"{where}, expected seq {expected} after the batch at "
                                                    f"offset {earlier[-1].base_offset}"))
        earlier.append(b)
        if b.last_sequence > high or (high == INT32_MAX and b.base_sequence == 0):
            state[pid] = (epoch, b.last_sequence)
    return problems


def check_sequences(topic: str, replicas: Mapping[int, Mapping[int, Sequence[Batch]]], findings) -> None:
    """The sequence invariant on every replica of every partition of ``topic``: one violation per
    breach (reported once for all the replicas holding it), a counted note per producer first seen
    mid-sequence; the batches around each of the first breaches go to ``findings.evidence``."""
    for partition, per_broker in sorted(replicas.items()):
        holders: dict[tuple[str, int, str], list[int]] = {}
        shown: dict[tuple[str, int, str], Sequence[Batch]] = {}
        for broker, items in sorted(per_broker.items()):
            for problem in sequence_problems(items):
                holders.setdefault(problem, []).append(broker)
                shown.setdefault(problem, items)
        quoted: dict[str, int] = {}
        for (kind, i, what), brokers in holders.items():
            if kind == "sequence-first-nonzero":
                findings.counts[kind] += 1
                continue
            message = f"{topic}-{partition} (replica of broker(s) {brokers}): {what}"
            findings.violation(kind, message)
            quoted[kind] = quoted.get(kind, 0) + 1
            if quoted[kind] <= EVIDENCE_PER_KIND:
                findings.evidence.append("\n".join([f"{kind}: {message}",
                                                    *describe_batches(shown[(kind, i, what)], {i: kind})]))
