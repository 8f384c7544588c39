"""The nemesis's plan: which faults, against whom, for how long, drawn from one seed.

    schedule = generate(seed=7, budget_s=20)
    for step in schedule.steps:     # quiet (fault-free) time, then one fault and its heal
        ...

Pure: nothing here starts a process, opens a socket or reads a clock, so a
seed always gives the same schedule (``tests/faults/test_schedule.py``) and
``--fault-seed S`` replays it.  What a fault's target *is* (which broker leads
partition ``pick % partitions`` when the fault starts) is resolved against the
running cluster by ``tests/faults/injector.py``, as Jepsen's nemeses do.

Faults run one at a time, each followed by its heal and a recovery wait; the
quiet time before each fault is a fault-free window in which the ISR must not
shrink.  Kinds and their variants:

=========  ===================================================================
kill       kill -9 of a broker, restarted after ``duration_s``
term-kill  SIGTERM (a controlled shutdown begins), SIGKILL ``kill_delay_s``
           later (0-300 ms), restarted after ``duration_s``
pause      SIGSTOP for ``duration_s``, then SIGCONT; variant ``short`` stays
           under replica.lag.time.max.ms, ``mid`` lies between it and
           zookeeper.session.timeout.ms, ``long`` exceeds both
partition  the broker cut off from some of ``LINKS`` (ZooKeeper, its peers,
           the clients) for ``duration_s``; ``drop`` is silent (frozen TCP),
           ``reset`` answers RST
zookeeper  ZooKeeper stopped (SIGTERM) or killed (-9), restarted after
           ``duration_s``
disk-full  the broker's log.dirs filesystem filled for ``duration_s``
move       a partition reassigned without the broker, then back to it (its copy
           starts empty and is copied again), and while that copy runs, kill -9 of
           the variant's victim: the partition's ``leader``, the ``joining``
           replica or the ``controller``; restarted after ``duration_s``
=========  ===================================================================
"""
from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import Iterable

__all__ = ["BUDGET_S", "CI_SEEDS", "KINDS", "LINKS", "MODES", "ROLES", "Fault", "Schedule", "Step", "Timeouts",
           "coverage", "generate", "random_seeds", "required_coverage"]

# One budget for every mode, so that a seed printed by --long replays as the same schedule.
BUDGET_S = 20.0
# The CI set: together these cover every kind, both pause extremes, both partition modes, every
# link and every role (tests/faults/test_schedule.py checks it) in two schedules.
CI_SEEDS = (1210, 2222)

KINDS = ("kill", "term-kill", "pause", "partition", "zookeeper", "disk-full", "move")
ROLES = ("leader", "follower", "controller", "any")       # which broker a fault hits
LINKS = ("zookeeper", "peers", "clients")                  # what a partition cuts
MODES = ("drop", "reset")
MOVE_VICTIMS = ("leader", "joining", "controller")     # whom a move's kill hits
PAUSE_BANDS = ("short", "mid", "long")
QUIET_S = (1.0, 3.0)                  # fault-free time before each fault
PARTITION_S = (1.0, 7.0)
ZOOKEEPER_S = (1.0, 6.0)
DISK_FULL_S = (2.0, 6.0)
DOWN_S = (0.3, 4.0)                   # a killed broker's time down before its restart
KILL_DELAY_S = (0.0, 0.3)             # term-kill: SIGTERM to SIGKILL


@dataclasses.dataclass(frozen=True)
class Timeouts:
    """The cluster's timeouts a schedule is drawn against (the suite's broker properties)."""
    session_ms: int = 4000            # zookeeper.session.timeout.ms
    lag_ms: int = 3000                # replica.lag.time.max.ms


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault.  ``role`` is "zookeeper" for a ZooKeeper fault, else one of ``ROLES``;
    ``pick`` chooses among candidates (a partition, then one of its followers)."""
    kind: str
    role: str
    pick: int
    duration_s: float
    variant: str = ""
    links: tuple[str, ...] = ()
    kill_delay_s: float = 0.0

    @property
    def label(self) -> str:
        """``kind`` plus its variant, e.g. "pause-long", "partition-drop"."""
        return f"{self.kind}-{self.variant}" if self.variant else self.kind

    def describe(self) -> str:
        """One line for logs and failure messages."""
        extra = f" links={'+'.join(self.links)}" if self.links else ""
        if self.kind == "term-kill":
            extra += f" kill_delay={self.kill_delay_s * 1000:.0f}ms"
        return f"{self.label} of {self.role}#{self.pick} for {self.duration_s:.1f}s{extra}"


@dataclasses.dataclass(frozen=True)
class Step:
    quiet_s: float                    # fault-free time before the fault
    fault: Fault


@dataclasses.dataclass(frozen=True)
class Schedule:
    seed: int
    budget_s: float
    steps: tuple[Step, ...]

    @property
    def planned_s(self) -> float:
        """Quiet time plus fault durations: the schedule's length without restarts and recoveries."""
        return sum(s.quiet_s + s.fault.duration_s for s in self.steps)

    def kinds(self) -> Counter:
        return Counter(s.fault.kind for s in self.steps)

    def describe(self) -> str:
        lines = [f"seed {self.seed}: {len(self.steps)} faults, {self.planned_s:.1f} s planned"]
        lines += [f"  +{s.quiet_s:.1f}s quiet, then {s.fault.describe()}" for s in self.steps]
        return "\n".join(lines)


def generate(seed: int, budget_s: float = BUDGET_S, timeouts: Timeouts = Timeouts()) -> Schedule:
    """The schedule of ``seed``: faults drawn until the next would overrun ``budget_s`` of
    planned time (at least one fault).  Deterministic; raises nothing."""
    rng = random.Random(seed)
    steps: list[Step] = []
    planned = 0.0
    while True:
        quiet = _uniform(rng, QUIET_S)
        fault = _draw_fault(rng, timeouts)
        if steps and planned + quiet + fault.duration_s > budget_s:
            return Schedule(seed, budget_s, tuple(steps))
        steps.append(Step(quiet, fault))
        planned += quiet + fault.duration_s


def _draw_fault(rng: random.Random, timeouts: Timeouts) -> Fault:
    kind = rng.choice(KINDS)
    role = rng.choice(ROLES)
    pick = rng.randrange(1 << 16)
    if kind in ("kill", "term-kill"):
        delay = _uniform(rng, KILL_DELAY_S) if kind == "term-kill" else 0.0
        return Fault(kind, role, pick, _uniform(rng, DOWN_S), kill_delay_s=delay)
    if kind == "pause":
        band = rng.choice(PAUSE_BANDS)
        return Fault(kind, role, pick, _uniform(rng, pause_range(band, timeouts)), variant=band)
    if kind == "partition":
        links = tuple(sorted(rng.sample(LINKS, rng.randint(1, len(LINKS))), key=LINKS.index))
        return Fault(kind, role, pick, _uniform(rng, PARTITION_S), variant=rng.choice(MODES), links=links)
    if kind == "zookeeper":
        return Fault(kind, "zookeeper", pick, _uniform(rng, ZOOKEEPER_S), variant=rng.choice(("stop", "kill")))
    if kind == "move":
        return Fault(kind, role, pick, _uniform(rng, DOWN_S), variant=rng.choice(MOVE_VICTIMS))
    return Fault(kind, role, pick, _uniform(rng, DISK_FULL_S))


def pause_range(band: str, timeouts: Timeouts) -> tuple[float, float]:
    """Seconds of a pause in ``band``: short < lag < mid < session < long (300 ms margins)."""
    lag, session = timeouts.lag_ms / 1000, timeouts.session_ms / 1000
    low = min(lag, session)
    return {"short": (0.2, low - 0.3),
            "mid": (low + 0.3, max(lag, session) - 0.3),
            "long": (max(lag, session) + 0.5, max(lag, session) + 3.5)}[band]


def _uniform(rng: random.Random, bounds: tuple[float, float]) -> float:
    return round(rng.uniform(*bounds), 2)


def coverage(schedules: Iterable[Schedule]) -> set[str]:
    """What a set of schedules exercises: "kind:K", "label:L", "role:R", "link:L" entries, so a
    test can say which fixed seeds cover every fault."""
    seen: set[str] = set()
    for schedule in schedules:
        for step in schedule.steps:
            f = step.fault
            seen |= {f"kind:{f.kind}", f"label:{f.label}", f"role:{f.role}"}
            seen |= {f"link:{link}" for link in f.links}
    return seen


def required_coverage() -> set[str]:
    """Every kind, both ends of the pause bands, both partition modes, each link, each role."""
    return ({f"kind:{k}" for k in KINDS} | {"label:pause-short", "label:pause-long",
                                              "label:partition-drop", "label:partition-reset"}
            | {f"link:{link}" for link in LINKS} | {f"role:{r}" for r in ("leader", "follower", "controller")})


def random_seeds(count: int, rng: random.Random | None = None) -> list[int]:
    """``count`` distinct seeds (from the OS's entropy unless ``rng`` is given), for ``--long``."""
    rng = rng or random.SystemRandom()
    seeds: list[int] = []
    while len(seeds) < count:
        seed = rng.randrange(1, 1 << 31)
        if seed not in seeds:
            seeds.append(seed)
    return seeds
