"""Client side of the consumer-group benchmark (bench/groups.py).

The functions below run in a spawned child process (``run.py:run_in_child``
with ``module="group_workloads"``) and return the same kind of dict as
``workloads.py``::

    {"ok": bool, "error": str | None, "metrics": {...}, "notes": [...]}

The kill workload additionally starts its group members as separate
subprocesses (``python bench/group_workloads.py member ...``) so one of them
can be killed with SIGKILL, by PID.  Members print one JSON line per event on
stdout; timestamps are ``time.monotonic()`` (CLOCK_MONOTONIC, the same clock
in every process on the machine).

Every loop is bounded by a wall-clock deadline; members also exit when their
stdin closes (i.e. when the process that started them goes away).
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer

from workloads import (  # bench/ is on sys.path (run.py puts it there)
    WorkloadError,
    _base,
    _ClientErrors,
    _cpu_s,
    _result,
    create_topic,
)

HERE = Path(__file__).resolve().parent
PARTITIONS = 6

# Only what the workload definitions ask for; everything else is the
# librdkafka default (so partition.assignment.strategy = "range,roundrobin",
# session.timeout.ms = 45000, heartbeat.interval.ms = 3000, auto commit on,
# every 5 s).
GROUP_CONSUMER = {
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
}
# The kill (W3) and join (W4/W5) workloads: heartbeat.interval.ms=500 lets a
# member notice a rebalance within 0.5 s instead of up to 3 s.
FAST_MEMBER = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
}
SEQ = struct.Struct(">qd")  # sequence number, send time (monotonic s)


# strategy value for the KIP-848 protocol (group.protocol=consumer): the broker
# assigns, and times the heartbeats, so librdkafka refuses the classic keys.
CONSUMER_PROTOCOL = "consumer-protocol"
CLASSIC_ONLY_KEYS = ("partition.assignment.strategy", "session.timeout.ms",
                     "heartbeat.interval.ms")


def _consumer_conf(bootstrap, group, errs, log_path, strategy=None,
                   extra=None, client_id="kwire-bench-group"):
    conf = _base(bootstrap, errs, log_path)
    conf["client.id"] = client_id
    conf["group.id"] = group
    conf.update(GROUP_CONSUMER)
    conf.update(extra or {})
    if strategy == CONSUMER_PROTOCOL:
        conf["group.protocol"] = "consumer"
        for key in CLASSIC_ONLY_KEYS:
            conf.pop(key, None)
    elif strategy:
        conf["partition.assignment.strategy"] = strategy
    return conf


def _close(consumer, timeout_s: float = 10.0) -> str | None:
    """consumer.close() in a thread so a hung LeaveGroup can't hang us."""
    out: dict = {}

    def run():
        try:
            consumer.close()
        except Exception as e:  # noqa: BLE001
            out["err"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return f"consumer.close() did not return within {timeout_s:.0f}s"
    return out.get("err")


# --------------------------------------------------------------------------
# setup: a 6-partition topic with records in every partition


def prepare_topic(bootstrap: str, topic: str, partitions: int, records: int,
                  timeout_s: float, log_path: str | None = None) -> dict:
    errs = _ClientErrors()
    try:
        create_topic(bootstrap, topic, partitions, errs, log_path)
    except WorkloadError as e:
        return _result(False, str(e))
    state = {"ok": 0, "err": 0, "first": None}

    def dr(err, _msg):
        if err is None:
            state["ok"] += 1
        else:
            state["err"] += 1
            state["first"] = state["first"] or f"{err.name()}: {err.str()}"

    conf = _base(bootstrap, errs, log_path)
    conf.update({"acks": "all", "linger.ms": 5, "on_delivery": dr})
    p = Producer(conf)
    payload = os.urandom(100)
    for i in range(records):
        p.produce(topic, payload, partition=i % partitions)
    deadline = time.monotonic() + timeout_s
    while state["ok"] + state["err"] < records and time.monotonic() < deadline:
        p.poll(0.05)
    if state["ok"] != records:
        return _result(False, f"produced {state['ok']}/{records} records "
                              f"({state['err']} errors, first: {state['first']}"
                              f"). {errs.summary()}")
    return _result(True, metrics={"topic": topic, "partitions": partitions,
                                  "records": records})


# --------------------------------------------------------------------------
# W1 / W2: a fresh group's first record


def join_first_record(bootstrap: str, topic: str, group: str,
                      strategy: str | None, timeout_s: float,
                      log_path: str | None = None) -> dict:
    """A new consumer in a new group subscribes to a topic that already has
    records; the clock runs from subscribe() until poll() returns the first
    record.  Also reports when the assignment arrived (on_assign)."""
    errs = _ClientErrors()
    ev: dict = {"assigns": []}

    def on_assign(_c, parts):
        ev["assigns"].append((time.perf_counter(), len(parts)))

    def on_revoke(_c, parts):
        ev.setdefault("revokes", []).append((time.perf_counter(), len(parts)))

    c = Consumer(_consumer_conf(bootstrap, group, errs, log_path, strategy))
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    deadline = time.monotonic() + timeout_s
    first = None
    msg_err = None
    while time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            msg_err = f"{m.error().name()}: {m.error().str()}"
            continue
        first = time.perf_counter()
        break
    client_cpu = _cpu_s() - cpu0
    assignment = []
    try:
        assignment = c.assignment()
    except KafkaException:
        pass
    close_err = _close(c)
    notes = [close_err] if close_err else []
    metrics = {
        "strategy": strategy or "default (range,roundrobin)",
        "assign_s": (round(ev["assigns"][0][0] - t0, 4)
                     if ev["assigns"] else None),
        "assign_callbacks": len(ev["assigns"]),
        "partitions_assigned": len(assignment),
        "client_cpu_s": round(client_cpu, 3),
    }
    if first is None:
        why = (f"no record within {timeout_s:.0f}s of subscribe() "
               f"(assign callbacks: {ev['assigns'] or 'none'}; last message "
               f"error: {msg_err}). {errs.summary()}")
        return _result(False, why, metrics, notes)
    metrics["first_record_s"] = round(first - t0, 4)
    return _result(True, None, metrics, notes)


# --------------------------------------------------------------------------
# W4 / W5: a second member joins a stable 1-member group


class _ThreadMember:
    """One consumer polled by its own thread; records assignment events."""

    def __init__(self, name, conf, topic, deadline):
        self.name = name
        # cooperative and KIP-848 members get deltas in their callbacks
        self.incremental = (conf.get("partition.assignment.strategy")
                            == "cooperative-sticky"
                            or conf.get("group.protocol") == "consumer")
        self.topic = topic
        self.deadline = deadline
        self.c = Consumer(conf)
        self.events: list[tuple] = []  # (t, kind, [partitions])
        self.owned: set[int] = set()
        self.records = 0
        self.last_record_t = None
        self.msg_errors: list[str] = []
        self.stop = threading.Event()
        self.t_subscribe = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, c, parts):
        now = time.monotonic()
        ps = sorted(p.partition for p in parts)
        if self.incremental:  # cooperative: the callback lists the delta
            self.owned |= set(ps)
        else:
            self.owned = set(ps)
        self.events.append((now, "assign", ps))

    def _on_revoke(self, c, parts):
        now = time.monotonic()
        ps = sorted(p.partition for p in parts)
        self.owned -= set(ps)
        self.events.append((now, "revoke", ps))

    def _on_lost(self, c, parts):
        now = time.monotonic()
        ps = sorted(p.partition for p in parts)
        self.owned -= set(ps)
        self.events.append((now, "lost", ps))

    def start(self):
        self.t_subscribe = time.monotonic()
        self.c.subscribe([self.topic], on_assign=self._on_assign,
                         on_revoke=self._on_revoke, on_lost=self._on_lost)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            m = self.c.poll(0.05)
            if m is None:
                continue
            if m.error():
                if len(self.msg_errors) < 5:
                    self.msg_errors.append(f"{m.error().name()}: "
                                           f"{m.error().str()}")
                continue
            self.records += 1
            self.last_record_t = time.monotonic()

    def finish(self) -> str | None:
        self.stop.set()
        self.thread.join(5)
        return _close(self.c)


def _wait_settled(a: _ThreadMember, deadline: float, stable_s: float) -> bool:
    """Until A owns every partition, has consumed, and no rebalance for stable_s."""
    while time.monotonic() < deadline:
        last_ev = a.events[-1][0] if a.events else None
        if (len(a.owned) == PARTITIONS and a.records > 0 and last_ev
                and time.monotonic() - last_ev >= stable_s):
            return True
        time.sleep(0.02)
    return False


def _wait_split(a: _ThreadMember, b: _ThreadMember, t0: float,
                deadline: float) -> float | None:
    """When A (re-assigned since t0) and B own non-empty, disjoint shares
    covering every partition; None at the deadline."""
    while time.monotonic() < deadline:
        ao, bo = set(a.owned), set(b.owned)
        a_moved = any(t > t0 and k == "assign" for t, k, _ in a.events)
        if (ao and bo and not ao & bo and len(ao | bo) == PARTITIONS
                and a_moved):
            return time.monotonic()
        time.sleep(0.005)
    return None


def _join_metrics(a: _ThreadMember, b: _ThreadMember, t0: float,
                  done: float) -> dict:
    a_after = [(round(t - t0, 4), k, ps) for t, k, ps in a.events if t > t0]
    b_ev = [(round(t - t0, 4), k, ps) for t, k, ps in b.events]
    return {
        "both_assigned_s": round(done - t0, 4),
        "b_first_assign_s": next((t for t, k, ps in b_ev
                                  if k == "assign" and ps), None),
        "a_first_revoke_s": next((t for t, k, _ in a_after
                                  if k == "revoke"), None),
        "a_partitions": sorted(a.owned),
        "b_partitions": sorted(b.owned),
        "a_events_after_join": a_after,
        "b_events": b_ev,
        "b_assign_callbacks": sum(1 for _, k, _ in b_ev if k == "assign"),
    }


def second_member_join(bootstrap: str, topic: str, group: str,
                       strategy: str | None, timeout_s: float,
                       stable_s: float = 1.0,
                       log_path: str | None = None) -> dict:
    """Member A subscribes alone and settles (owns all partitions, has
    consumed, no rebalance for stable_s).  Then member B (its Consumer already
    created) subscribes; the clock runs from B's subscribe() until A and B
    both own a non-empty, disjoint share of the partitions that covers all
    of them."""
    errs = _ClientErrors()
    deadline = time.monotonic() + timeout_s
    mk = lambda cid: _consumer_conf(bootstrap, group, errs, log_path,  # noqa: E731
                                    strategy, FAST_MEMBER, client_id=cid)
    a = _ThreadMember("A", mk("kwire-bench-A"), topic, deadline)
    b = None
    notes: list[str] = []
    metrics: dict = {"strategy": strategy or "default (range,roundrobin)"}
    try:
        a.start()
        if not _wait_settled(a, deadline, stable_s):
            return _result(False, f"member A never settled: owns "
                                  f"{sorted(a.owned)}, {a.records} records, "
                                  f"events {a.events[-5:]}; "
                                  f"{errs.summary()}", metrics)
        metrics["a_settle_s"] = round(a.events[0][0] - a.t_subscribe, 4)
        b = _ThreadMember("B", mk("kwire-bench-B"), topic, deadline)
        t0 = time.monotonic()
        b.start()
        done = _wait_split(a, b, t0, deadline)
        if done is None:
            return _result(False, f"no stable 2-member assignment within "
                                  f"{timeout_s:.0f}s: A owns {sorted(a.owned)}"
                                  f", B owns {sorted(b.owned)}; A events after "
                                  f"B joined: {[e for e in a.events if e[0] > t0]}"
                                  f"; B events: {b.events}. {errs.summary()}",
                           metrics)
        # let the callbacks that might still follow (cooperative round 2)
        # show up in the event lists
        time.sleep(0.3)
        metrics.update(_join_metrics(a, b, t0, done))
        return _result(True, None, metrics, notes)
    finally:
        for m in (b, a):
            if m is not None:
                err = m.finish()
                if err:
                    notes.append(f"member {m.name}: {err}")


# --------------------------------------------------------------------------
# W3: kill -9 one of three members


def _member_args(argv: list[str]):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--deadline-s", type=float, required=True)
    ap.add_argument("--log-path")
    ap.add_argument("--strategy")
    return ap.parse_args(argv)


class _Emitter:
    """One JSON line per event on stdout, whole lines even from callbacks."""

    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()

    def __call__(self, obj) -> None:
        line = json.dumps(obj, separators=(",", ":"))
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def callback(self, kind):
        def f(_c, parts):
            self({"ev": kind, "t": time.monotonic(),
                  "p": sorted(p.partition for p in parts)})
        return f


def _member_loop(c: Consumer, emit: _Emitter, errs: _ClientErrors,
                 end: float) -> None:
    """consume() and report batches until a "stop" line, EOF on stdin or ``end``."""
    stdin_fd = sys.stdin.fileno()
    reported = 0
    while time.monotonic() < end:
        msgs = c.consume(num_messages=500, timeout=0.05)
        now = time.monotonic()
        recs = []
        for m in msgs:
            if m.error():
                emit({"ev": "error", "t": now,
                      "e": f"{m.error().name()}: {m.error().str()}"})
                continue
            v = m.value()
            seq = SEQ.unpack(v)[0] if v and len(v) == SEQ.size else -1
            recs.append([m.partition(), m.offset(), seq])
        if recs:
            emit({"ev": "recs", "t": now, "r": recs})
        if errs.count > reported:
            emit({"ev": "error", "t": now, "e": errs.items[-1]
                  if errs.items else "?"})
            reported = errs.count
        r, _, _ = select.select([stdin_fd], [], [], 0)
        if r:
            data = os.read(stdin_fd, 4096)
            if not data or b"stop" in data:
                break


def _member_main(argv: list[str]) -> int:
    """A group member subprocess.  Prints JSON lines:
    {"ev": "ready"|"assign"|"revoke"|"lost"|"recs"|"error"|"bye", "t": ...}
    "recs" carries [[partition, offset, seq], ...] for one consume() batch.
    Exits on a "stop" line or EOF on stdin, or at its deadline."""
    a = _member_args(argv)
    emit = _Emitter(sys.stdout)
    errs = _ClientErrors()
    conf = _consumer_conf(a.bootstrap, a.group, errs, a.log_path, a.strategy,
                          FAST_MEMBER, client_id=f"kwire-bench-{a.name}")
    c = Consumer(conf)
    c.subscribe([a.topic], on_assign=emit.callback("assign"),
                on_revoke=emit.callback("revoke"),
                on_lost=emit.callback("lost"))
    emit({"ev": "ready", "t": time.monotonic(), "pid": os.getpid()})
    _member_loop(c, emit, errs, time.monotonic() + a.deadline_s)
    err = _close(c)
    emit({"ev": "bye", "t": time.monotonic(), "close_error": err})
    return 0


class _MemberProc:
    def __init__(self, name, cmd, sink, lock):
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0)
        self.pid = self.proc.pid
        self.sink = sink
        self.lock = lock
        self.stderr_tail: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._read_err, daemon=True)
        self.err_reader.start()

    def _read(self):
        for line in self.proc.stdout:  # ends at EOF (process exit)
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            obj["m"] = self.name
            with self.lock:
                self.sink.append(obj)

    def _read_err(self):
        for line in self.proc.stderr:
            self.stderr_tail = (self.stderr_tail + [line.decode(
                "utf-8", "replace").rstrip()])[-10:]

    def stop(self, timeout_s=15.0):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"stop\n")
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)  # our own child, by PID
                self.proc.wait(5)
        self.reader.join(2)
        self.err_reader.join(2)


class _RateProducer:
    """Writes ``rate`` records/s round-robin over the partitions on a thread
    (value = sequence number + send time) until stopped or the deadline."""

    def __init__(self, bootstrap, topic, rate, deadline, errs, log_path):
        self.topic = topic
        self.rate = rate
        self.deadline = deadline
        self.sent = 0
        self.ok = 0
        self.err = 0
        self.first_err: str | None = None
        self._stop = threading.Event()
        conf = _base(bootstrap, errs, log_path)
        conf.update({"acks": 1, "linger.ms": 0, "on_delivery": self._dr,
                     "message.timeout.ms": 30_000})
        self.producer = Producer(conf)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _dr(self, err, _m):
        if err is None:
            self.ok += 1
        else:
            self.err += 1
            self.first_err = self.first_err or f"{err.name()}: {err.str()}"

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        producer, topic, rate = self.producer, self.topic, self.rate
        t0 = time.monotonic()
        seq = 0
        while not self._stop.is_set() and time.monotonic() < self.deadline:
            due = t0 + seq / rate
            now = time.monotonic()
            if due > now:
                producer.poll(min(due - now, 0.05))
                continue
            try:
                producer.produce(topic, SEQ.pack(seq, now),
                                 partition=seq % PARTITIONS)
            except BufferError:
                producer.poll(0.05)
                continue
            self.sent = seq = seq + 1
            producer.poll(0)
        producer.flush(10)

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            self._thread.join(15)


class _GroupEvents:
    """The JSON events of every member process, in arrival order."""

    def __init__(self, names: list[str]):
        self.names = names
        self.items: list[dict] = []
        self.lock = threading.Lock()

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.items)

    def owners(self, evs: list[dict] | None = None):
        """(member -> partitions it owns, time of the last ownership change)."""
        own = {n: set() for n in self.names}
        last_change = None
        for e in self.snapshot() if evs is None else evs:
            if e["ev"] == "assign":
                own[e["m"]] = set(e["p"])  # eager: the full assignment
                last_change = e["t"]
            elif e["ev"] in ("revoke", "lost"):
                own[e["m"]] -= set(e["p"])
                last_change = e["t"]
        return own, last_change

    def ownership(self) -> dict:
        return {k: sorted(v) for k, v in self.owners()[0].items()}


def _start_members(n, bootstrap, topic, group, deadline, log_path,
                   events: _GroupEvents) -> list[_MemberProc]:
    procs = []
    left = max(10.0, deadline - time.monotonic())
    for i in range(n):
        cmd = [sys.executable, str(HERE / "group_workloads.py"), "member",
               "--bootstrap", bootstrap, "--topic", topic, "--group", group,
               "--name", f"m{i}", "--deadline-s", f"{left:.0f}"]
        if log_path:
            cmd += ["--log-path", log_path]
        procs.append(_MemberProc(f"m{i}", cmd, events.items, events.lock))
    return procs


def _wait_stable(events: _GroupEvents, procs, deadline: float,
                 settle_s: float, timeout_s: float) -> float:
    """Until every member owns partitions, they cover the topic without
    overlap, each partition delivered a record after the last assignment
    change, and nothing changed for settle_s.  Returns that time; raises
    WorkloadError."""
    while time.monotonic() < deadline:
        evs = events.snapshot()
        own, last = events.owners(evs)
        allp = [p for s in own.values() for p in s]
        if (last is not None and all(own.values())
                and sorted(allp) == list(range(PARTITIONS))):
            seen = {r[0] for e in evs if e["ev"] == "recs"
                    and e["t"] > last for r in e["r"]}
            if len(seen) == PARTITIONS and \
                    time.monotonic() - last >= settle_s:
                return time.monotonic()
        dead = [p.name for p in procs if p.proc.poll() is not None]
        if dead:
            raise WorkloadError(f"member(s) {dead} exited before the group "
                                f"was stable: {[p.stderr_tail for p in procs]}")
        time.sleep(0.05)
    raise WorkloadError(f"group never became stable with {len(procs)} members"
                        f" within {timeout_s:.0f}s; ownership "
                        f"{events.ownership()}")


def _kill(victim: _MemberProc) -> float:
    """kill -9 the victim (our own child, by PID); returns when it was sent."""
    t_kill = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    victim.proc.wait(5)
    return t_kill


def _wait_resumed(events: _GroupEvents, victim: str, victim_parts,
                  t_kill: float, deadline: float) -> dict[int, float]:
    """partition -> when a survivor first consumed from it after the kill,
    for every partition of the victim; raises WorkloadError."""
    limit = min(deadline, t_kill + FAST_MEMBER["session.timeout.ms"] / 1000 + 60)
    resumed: dict[int, float] = {}
    while time.monotonic() < limit:
        for e in events.snapshot():
            if e["ev"] == "recs" and e["m"] != victim and e["t"] > t_kill:
                for r in e["r"]:
                    if r[0] in victim_parts and r[0] not in resumed:
                        resumed[r[0]] = e["t"]
        if len(resumed) == len(victim_parts):
            return resumed
        time.sleep(0.02)
    since = [(e["m"], e["ev"], round(e["t"] - t_kill, 2), e.get("p"))
             for e in events.snapshot() if e["t"] > t_kill and e["ev"] != "recs"]
    raise WorkloadError(f"no survivor consumed partitions "
                        f"{sorted(set(victim_parts) - set(resumed))} of the "
                        f"killed member within {limit - t_kill:.0f}s of the "
                        f"kill; ownership now {events.ownership()}, survivor"
                        f" events since the kill: {since[:12]}")


def _drain(events: _GroupEvents, sent: int, deadline: float) -> set[int]:
    """Wait (15 s at most) until every produced sequence number was consumed
    by someone; returns the ones that were."""
    drain_end = min(deadline, time.monotonic() + 15)
    seen_seq: set[int] = set()
    while time.monotonic() < drain_end:
        seen_seq = {r[2] for e in events.snapshot() if e["ev"] == "recs"
                    for r in e["r"]}
        if all(s in seen_seq for s in range(sent)):
            break
        time.sleep(0.1)
    return seen_seq


def _partition_stalls(evs: list[dict], t_kill: float) -> dict[int, float]:
    """Per partition, the longest silence in [t_kill, end of measurement],
    counting from the last record consumed before the kill."""
    by_part: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
    for e in evs:
        if e["ev"] == "recs":
            for r in e["r"]:
                by_part[r[0]].append(e["t"])
    stalls = {}
    for p, ts in by_part.items():
        ts = sorted(ts)
        before = [t for t in ts if t <= t_kill]
        prev = before[-1] if before else t_kill
        worst = 0.0
        for t in (t for t in ts if t > t_kill):
            worst = max(worst, t - prev)
            prev = t
        stalls[p] = round(worst, 3)
    return stalls


def _kill_metrics(evs, victim: str, victim_parts, t_kill, resumed,
                  seen_seq, prod: _RateProducer, sent: int) -> dict:
    surv_ev = [(e["m"], e["ev"], round(e["t"] - t_kill, 3), e["p"])
               for e in evs if e["t"] > t_kill and e["m"] != victim
               and e["ev"] in ("assign", "revoke", "lost")]
    stalls = _partition_stalls(evs, t_kill)
    victim_last = max((e["t"] for e in evs if e["m"] == victim
                       and e["ev"] == "recs"), default=None)
    total_recs = sum(len(e["r"]) for e in evs if e["ev"] == "recs")
    return {
        "gap_s": round(max(resumed.values()) - t_kill, 3),
        "gap_first_partition_s": round(min(resumed.values()) - t_kill, 3),
        "survivor_revoke_s": next((t for _, k, t, _ in surv_ev
                                   if k in ("revoke", "lost")), None),
        "survivor_assign_s": next((t for _, k, t, p in surv_ev
                                   if k == "assign"), None),
        "victim_last_record_before_kill_s": (
            round(t_kill - victim_last, 3) if victim_last else None),
        "max_stall_victim_partitions_s": max(stalls[p] for p in victim_parts),
        "max_stall_survivor_partitions_s": max(
            (stalls[p] for p in range(PARTITIONS) if p not in victim_parts),
            default=None),
        "survivor_events_after_kill": surv_ev,
        "produced": sent,
        "produce_errors": prod.err,
        "records_consumed": total_recs,
        "redelivered": total_recs - len(seen_seq),
        "missing_after_drain": sum(1 for s in range(sent) if s not in seen_seq),
    }


def _kill_and_measure(events: _GroupEvents, procs, prod: _RateProducer,
                      metrics: dict, notes: list, deadline: float,
                      settle_s: float, after_s: float,
                      timeout_s: float) -> None:
    """Steps 1-4 of kill_rebalance; fills ``metrics``; raises WorkloadError."""
    t_stable = _wait_stable(events, procs, deadline, settle_s, timeout_s)
    evs = events.snapshot()
    own, _ = events.owners(evs)
    metrics["stable_after_s"] = round(t_stable - min(
        e["t"] for e in evs if e["ev"] == "ready"), 3)
    victim = procs[0]
    victim_parts = sorted(own[victim.name])
    metrics["victim_partitions"] = victim_parts
    metrics["ownership_before"] = {k: sorted(v) for k, v in own.items()}

    t_kill = _kill(victim)
    resumed = _wait_resumed(events, victim.name, victim_parts, t_kill, deadline)
    time.sleep(after_s)
    prod.stop()

    sent = prod.sent
    seen_seq = _drain(events, sent, deadline)
    metrics.update(_kill_metrics(events.snapshot(), victim.name, victim_parts,
                                 t_kill, resumed, seen_seq, prod, sent))
    missing = [s for s in range(sent) if s not in seen_seq]
    if missing:
        notes.append(f"{len(missing)} produced records were never "
                     f"consumed (first: {missing[:5]})")
    if prod.err:
        notes.append(f"{prod.err} produce errors (first: {prod.first_err})")


def kill_rebalance(bootstrap: str, topic: str, group: str, members: int,
                   rate: int, timeout_s: float, settle_s: float = 2.0,
                   after_s: float = 1.0, log_path: str | None = None) -> dict:
    """`members` member subprocesses share `topic` while a producer writes
    `rate` records/s round-robin over the partitions (value = sequence
    number + send time).  Once the group is stable, one member is killed with
    SIGKILL; the gap is the time from the kill until a survivor has consumed
    a record from each of the dead member's partitions."""
    errs = _ClientErrors()
    deadline = time.monotonic() + timeout_s
    try:
        create_topic(bootstrap, topic, PARTITIONS, errs, log_path)
    except WorkloadError as e:
        return _result(False, str(e))
    notes: list[str] = []
    metrics: dict = {"members": members, "rate_per_s": rate,
                     "session_timeout_ms": FAST_MEMBER["session.timeout.ms"],
                     "heartbeat_interval_ms":
                         FAST_MEMBER["heartbeat.interval.ms"]}
    prod = _RateProducer(bootstrap, topic, rate, deadline, errs, log_path)
    prod.start()
    events = _GroupEvents([f"m{i}" for i in range(members)])
    procs = _start_members(members, bootstrap, topic, group, deadline,
                           log_path, events)
    try:
        _kill_and_measure(events, procs, prod, metrics, notes, deadline,
                          settle_s, after_s, timeout_s)
        return _result(True, None, metrics, notes)
    except WorkloadError as e:
        return _result(False, f"{e}. {errs.summary()}", metrics, notes)
    finally:
        prod.stop(wait=False)
        for p in procs:
            p.stop()
        prod.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "member":
        sys.exit(_member_main(sys.argv[2:]))
    print("usage: group_workloads.py member --bootstrap ... (used by "
          "bench/groups.py)", file=sys.stderr)
    sys.exit(2)
