"""One schedule end to end: cluster, load, nemesis, heal, read back, check; a ``Report``.

    report = run_schedule(generate(seed))
    assert not report.violations, report.failure_message()

The order is Jepsen's: start a fresh cluster (tests/faults/environment.py),
create the topics, start the load and wait until every client has done
something, then for each step stay quiet for ``quiet_s`` (a fault-free
window) and run the fault (tests/faults/injector.py).  Afterwards heal
everything, wait for full ISRs, stop the load, then read every topic back,
compare the replicas' bytes, check the producer sequences of every replica's
batch headers (tests/faults/duplicates.py) and run the checks of
tests/faults/history.py, an idempotent duplicate classified by the headers of
the batches holding its copies.
Replicas are compared for the two data topics only: the internal topics are
compacted, and each replica cleans its own segments when it likes.

On a violation, or a duplicate explained (not a violation), the brokers' and
ZooKeeper's logs, the history, the idempotent producer's eos log and the batch
headers around each duplicate or sequence breach (``batch-headers.txt``) are
copied to ``artifacts`` (under ``$KWIRE_FAULTS_ARTIFACTS``, default the
system's temporary directory) before the cluster's directory is removed.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter

from confluent_kafka.admin import AdminClient, NewTopic

from . import history as h
from .duplicates import Sources, check_sequences
from .environment import FaultCluster
from .injector import Injector, ScheduleAborted
from .load import Load
from .nemesis import Schedule, Timeouts
from .observe import IsrSampler, last_stable_offsets, read_log, watermarks
from .replicas import compare_replicas, replica_batches

__all__ = ["PARTITIONS", "Report", "run_schedule"]

PARTITIONS = 3
TOPIC, TXN_TOPIC = "nemesis-data", "nemesis-txn"
INTERNAL = ("__consumer_offsets", "__transaction_state")
REPLAY = "python -m pytest tests/faults/test_cluster_under_nemesis.py --fault-seed {seed}"
WARM_S = 45.0
LSO_WAIT_S = 20.0                     # transaction.timeout.ms (10 s) plus the abort's own time


@dataclasses.dataclass
class Report:
    seed: int
    schedule: Schedule
    injected: list[str] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)
    targets: list[str] = dataclasses.field(default_factory=list)
    counts: Counter = dataclasses.field(default_factory=Counter)
    violations: list[str] = dataclasses.field(default_factory=list)
    explained: list[str] = dataclasses.field(default_factory=list)     # found and allowed
    notes: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    artifacts: str | None = None

    def failure_message(self, notes: int | None = 20) -> str:
        """Seed, replay command, violations, the faults as injected, the last ``notes`` notes."""
        lines = [f"seed {self.seed}: {len(self.violations)} invariant violation(s) "
                 f"after faults {self.injected}",
                 f"replay: {REPLAY.format(seed=self.seed)}", *self.violations]
        if self.explained:
            lines += ["found, not violations:", *self.explained]
        lines += ["schedule:", *self.targets]
        if self.artifacts:
            lines.append(f"logs and history: {self.artifacts}")
        if self.notes:
            lines += ["notes:", *self.notes[-notes if notes else 0:]]
        return "\n".join(lines)


def run_schedule(schedule: Schedule, timeouts: Timeouts = Timeouts()) -> Report:
    """Run ``schedule`` on a fresh cluster and check its history.  Raises what the cluster's
    start raises (``ZooKeeperStartError``, ``BrokerStartError``); violations are returned."""
    with _quiet_client_logs():
        return _run_schedule(schedule, timeouts)


@contextlib.contextmanager
def _quiet_client_logs():
    """kafka-python logs every reset connection at ERROR: the faults make thousands."""
    logger = logging.getLogger("kafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _run_schedule(schedule: Schedule, timeouts: Timeouts) -> Report:
    started = time.monotonic()
    report = Report(schedule.seed, schedule)
    properties = {"zookeeper.session.timeout.ms": timeouts.session_ms, "replica.lag.time.max.ms": timeouts.lag_ms}
    with _started_cluster(properties) as env:
        history = h.History(t0=time.monotonic())
        history.notes.append(f"t=0 is {time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} "
                             f"in the brokers' logs")
        sampler = IsrSampler(env.cluster.zookeeper.connect, history)
        sampler.watch([TOPIC, TXN_TOPIC])
        sampler.start()
        load = Load(env.bootstrap, topic=TOPIC, txn_topic=TXN_TOPIC, partitions=PARTITIONS, history=history,
                    seed=schedule.seed)
        injector = Injector(env, sampler, history, topic=TOPIC, partitions=PARTITIONS, timeouts=timeouts)
        try:
            _create_topics(env.bootstrap)
            load.start()
            load.wait_warm(WARM_S)
            sampler.watch([TOPIC, TXN_TOPIC, *INTERNAL])
            injector.recover("start", time.monotonic(), settle=False)
            findings = _run_and_check(schedule, env, injector, load, history, sampler, timeouts, started)
        finally:
            load.stopping.set()
            sampler.stop()
        report.injected, report.skipped, report.targets = injector.injected, injector.skipped, injector.targets
        report.counts, report.violations = findings.counts, findings.violations
        report.explained = findings.explained
        report.notes += history.notes
        if report.violations or findings.evidence:
            report.artifacts = _keep_artifacts(env, report, history, findings.evidence)
    report.wall_s = time.monotonic() - started
    return report


@contextlib.contextmanager
def _started_cluster(properties: dict):
    """A started ``FaultCluster``, closed afterwards.  A start that lost a port to another socket
    between its choice and the broker's bind (EADDRINUSE) is tried once more on fresh ports."""
    for attempt in (1, 2):
        env = FaultCluster(properties)
        try:
            env.start()
            break
        except BaseException as exc:
            env.close()
            if attempt == 2 or "Address already in use" not in str(exc):
                raise
    try:
        yield env
    finally:
        env.close()


def _create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2", "segment.bytes": str(1 << 20)}
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 3, config=config) for t in (TOPIC, TXN_TOPIC)])
    for f in futures.values():
        f.result(30)


def _run_and_check(schedule: Schedule, env: FaultCluster, injector: Injector, load: Load, history: h.History,
                   sampler: IsrSampler, timeouts: Timeouts, started: float) -> h.Findings:
    """The steps, the heal, the checks.  A cluster that cannot be healed is itself a violation
    (``unrecoverable``); the read-back checks are then skipped, the history's are not."""
    findings = h.Findings(t0=history.t0)
    try:
        _run_steps(schedule, injector, history, started)
    except ScheduleAborted as exc:
        findings.violation("unrecoverable", str(exc))
    undone: list[str] = []
    try:
        undone = injector.heal_all()
    except ScheduleAborted as exc:
        findings.violation("unrecoverable", f"final heal: {exc}")
        undone = ["a broker"]
    if undone:
        history.notes.append(f"the final heal undid: {undone}")
    injector.recover("final heal", time.monotonic(), settle=bool(undone))
    time.sleep(1.0)                     # a last fault-free stretch under load
    for problem in load.stop():
        findings.violation("client-failure", problem)
    injector.close_window()
    if not findings.counts["unrecoverable"]:
        try:
            check_logs(env, history, findings)
        except Exception as exc:        # KafkaException, a timeout: the cluster did not answer
            findings.violation("unreadable", f"reading back failed: {exc!r}")
    check_history(history, sampler, timeouts, findings)
    return findings


def _run_steps(schedule: Schedule, injector: Injector, history: h.History, started: float) -> None:
    """Quiet time then one fault, per step; stops early past three times the planned length.
    Raises ``ScheduleAborted``."""
    limit = started + 3 * schedule.planned_s + 60
    for n, step in enumerate(schedule.steps):
        if time.monotonic() > limit:
            history.notes.append(f"schedule cut after {n} of {len(schedule.steps)} faults: past its time limit")
            return
        injector.quiet(step.quiet_s)
        injector.run(step.fault)


def check_history(history: h.History, sampler: IsrSampler, timeouts: Timeouts, findings: h.Findings) -> None:
    """The checks that need no cluster: offsets, ISR windows, recoveries."""
    h.check_incidents(history.incidents, findings)
    h.check_group_offsets(history.commits, history.observed, findings)
    h.check_isr(history.isr_samples, history.windows, sampler.replication_of(), findings)
    h.check_recoveries(history.recoveries, timeouts.session_ms / 1000 + 5, findings)


def check_logs(env: FaultCluster, history: h.History, findings: h.Findings) -> None:
    """Read every topic back, compare replicas, check the producer sequences of their batch
    headers, check records (a duplicate classified by those headers), order and transactions.
    Raises ``KafkaException`` when the cluster does not answer."""
    bootstrap = env.bootstrap
    _check_lso(bootstrap, findings)
    data, notes = read_log(bootstrap, TOPIC, PARTITIONS)
    committed, more = read_log(bootstrap, TXN_TOPIC, PARTITIONS, isolation="read_committed")
    for note in notes + more:
        findings.violation("unreadable", note)
    sources = {}
    for topic in (TOPIC, TXN_TOPIC):
        high_watermarks = watermarks(bootstrap, topic, PARTITIONS)
        for problem in compare_replicas(env.log_dirs(), topic, high_watermarks):
            findings.violation("replica-divergence", problem)
        replicas = replica_batches(env.log_dirs(), topic, high_watermarks)
        check_sequences(topic, replicas, findings)
        sources[topic] = Sources(topic, replicas, history.producer_ids, list(history.client_log))
    acks = history.committed_acks()
    h.check_records([a for a in acks if a.txn is None], data, history.writers, findings, sources[TOPIC])
    h.check_records([a for a in acks if a.txn is not None], committed, history.writers, findings, sources[TXN_TOPIC])
    h.check_order([a for a in acks if a.txn is None], data, history.writers, findings)
    h.check_order([a for a in acks if a.txn is not None], committed, history.writers, findings)
    h.check_transactions(history.txn_members, history.txn_outcomes, committed, findings)
    findings.counts["read"] = sum(len(v) for v in data.values()) + sum(len(v) for v in committed.values())


def _check_lso(bootstrap: str, findings: h.Findings) -> None:
    """Every transaction ends: the txn topic's last stable offset reaches its high watermark."""
    deadline = time.monotonic() + LSO_WAIT_S
    while True:
        hw = watermarks(bootstrap, TXN_TOPIC, PARTITIONS)
        lso = last_stable_offsets(bootstrap, TXN_TOPIC, PARTITIONS)
        if lso == hw:
            return
        if time.monotonic() > deadline:
            findings.violation("hanging-transaction", f"{TXN_TOPIC}: last stable offsets {lso} stay below the "
                                                      f"high watermarks {hw} {LSO_WAIT_S:.0f}s after the load")
            return
        time.sleep(0.5)


def _keep_artifacts(env: FaultCluster, report: Report, history: h.History, evidence: list[str]) -> str:
    base = os.environ.get("KWIRE_FAULTS_ARTIFACTS") or tempfile.gettempdir()
    target = os.path.join(base, f"kwire-faults-seed{report.seed}-{int(time.time())}")
    os.makedirs(target, exist_ok=True)
    for i, b in env.cluster.brokers.items():
        if os.path.exists(b.log_path):
            shutil.copy(b.log_path, os.path.join(target, f"broker-{i}.log"))
    if os.path.exists(env.cluster.zookeeper.log_path):
        shutil.copy(env.cluster.zookeeper.log_path, os.path.join(target, "zookeeper.log"))
    with open(os.path.join(target, "report.txt"), "w") as f:
        f.write(report.failure_message(notes=None) + "\n")
    with open(os.path.join(target, "history.json"), "w") as f:
        json.dump(_history_as_json(history), f)
    with open(os.path.join(target, "idempotent-producer.log"), "w") as f:
        f.writelines(line + "\n" for line in list(history.client_log))
    if evidence:
        with open(os.path.join(target, "batch-headers.txt"), "w") as f:
            f.write("\n\n".join(evidence) + "\n")
    return target


def _history_as_json(history: h.History) -> dict:
    """The history with times relative to t0, for reading a failure after the fact."""
    def rel(t: float) -> float:
        return round(t - history.t0, 3)
    return {
        "writers": history.writers,
        "acks": [dataclasses.astuple(a) for a in history.acks],
        "txns": {t: [history.txn_outcomes.get(t, h.UNKNOWN), m] for t, m in history.txn_members.items()},
        "commits": [(rel(c.at), c.partition, c.offset) for c in history.commits],
        "observed": [(rel(o.at), o.partition, o.offset) for o in history.observed],
        "windows": [(rel(a), rel(b)) for a, b in history.windows],
        "recoveries": [(r.fault, rel(r.healed_at), r.leader_at and rel(r.leader_at), r.isr_at and rel(r.isr_at))
                       for r in history.recoveries],
        "isr_samples": [(rel(s.at), {tp: [ld, list(isr)] for tp, (ld, isr) in s.states.items()})
                        for s in history.isr_samples],
        "producer_ids": {w: [dataclasses.astuple(e) for e in events] for w, events in history.producer_ids.items()},
        "notes": history.notes,
    }
