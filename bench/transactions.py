#!/usr/bin/env python
"""Transactions benchmark: what a transaction costs producer and reader.

    python bench/transactions.py [--brokers kwire,tansu] [--repeat N] [--quick]
                                 [--json out.json]

One broker at a time is started with run.py's Broker helper (free 127.0.0.1
port, fresh data directory, stopped by PID).  A warm-up client makes it
create __transaction_state and __consumer_offsets; then every repeat runs,
each in a spawned confluent-kafka (librdkafka) client process:

  T1  idempotent produce of COUNT 1 KiB records (enable.idempotence, acks=all,
      workload 2's linger.ms=5 and batch.size=1 MB) to a 1-partition topic
  T2  the same records in transactions of PER_TXN records (begin, PER_TXN
      produce(), commit), same settings plus a transactional.id
  T3  read_uncommitted consume of T2's topic from the beginning (assign mode,
      run.py's workload-3 consumer)
  T4  read_committed consume of the same topic

and reports T2/T1 (target >= 0.70) and T4/T3 (target >= 0.90) from the
per-workload medians.  T3 and T4 swap order on every other repeat so neither
always reads first.  The producers' librdkafka statistics split a T2
transaction into broker round trips and client-side time; --py-spy records
the kwire broker during each workload.  See bench/README.md, "Transactions
benchmark".

Results go to bench/results/<run-id>-txn/.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from confluent_kafka import (  # noqa: E402
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)

import host_memory  # noqa: E402
import workloads as wl  # noqa: E402
from run import (  # noqa: E402
    _combine,
    _fmt,
    broker_heading,
    environment,
    failures_and_notes,
    log,
    run_in_child,
    start_broker,
    parse_brokers,
)

MODULE = "transactions"
COUNT = 200_000
SIZE = 1024
PER_TXN = 100
PARTITIONS = 1

WORKLOADS = {
    "T1": "idempotent produce 1 KiB, acks=all",
    "T2": "transactional produce 1 KiB, N/txn",  # N: --records-per-txn
    "T3": "consume T2 topic, read_uncommitted",
    "T4": "consume T2 topic, read_committed",
    "T5": "T1 from P producers at once",           # P: --producers
    "T6": "T2 from P producers at once",
}
# (label, numerator, denominator, target): ratios of records/s medians
RATIOS = [
    ("transactional / idempotent produce", "T2", "T1", 0.70),
    ("read_committed / read_uncommitted", "T4", "T3", 0.90),
    ("the same with P producers at once", "T6", "T5", 0.70),
]
PRODUCERS = 4
# MiB touched and freed before each workload: bench/host_memory.py (a lazily backed VM's
# slow first touch of new memory would otherwise slow whichever workload crosses ~1 GB)
WARM_MIB = 2048


# --------------------------------------------------------------------------
# client side: each function runs in a spawned child process (run_in_child)


class _ClientStats:
    """librdkafka's statistics (``stats_cb``) added up over their windows:
    mean round-trip time per connection kind ("leader": the partition
    leader's connection; "TxnCoordinator": the coordinator's), mean time
    records wait in the producer before they are sent, requests sent by API.
    ``reset()`` when the clock starts; the windows are librdkafka's own."""

    INTERVAL_MS = 500

    def __init__(self):
        self.windows = 0
        self._req: Counter = Counter()
        self.reset()

    def reset(self) -> None:
        self.rtt_us: Counter = Counter()
        self.rtt_n: Counter = Counter()
        self.rtt_p50: dict[str, list] = {}  # (window p50 us, requests)
        self.queue_us = self.queue_n = 0
        self.req_base = Counter(self._req)

    def __call__(self, raw: str) -> None:
        self.windows += 1
        req: Counter = Counter()
        for name, b in json.loads(raw).get("brokers", {}).items():
            if b.get("source") not in ("learned", "logical"):
                continue  # the bootstrap connection
            kind = name if b["source"] == "logical" else "leader"
            self.rtt_us[kind] += b["rtt"]["sum"]
            self.rtt_n[kind] += b["rtt"]["cnt"]
            if b["rtt"]["cnt"]:
                self.rtt_p50.setdefault(kind, []).append(
                    (b["rtt"]["p50"], b["rtt"]["cnt"]))
            self.queue_us += b["int_latency"]["sum"]
            self.queue_n += b["int_latency"]["cnt"]
            req.update(b.get("req") or {})
        self._req = req

    def wait_window(self, p: Producer) -> None:
        """Serve callbacks until one more statistics window has come in."""
        seen, end = self.windows, time.monotonic() + 3 * self.INTERVAL_MS / 1e3
        while self.windows == seen and time.monotonic() < end:
            p.poll(0.05)

    def metrics(self) -> dict:
        out = {}
        for k, n in self.rtt_n.items():
            if n:
                out[f"rtt_ms_{k}"] = round(self.rtt_us[k] / n / 1e3, 3)
                out[f"rtt_p50_ms_{k}"] = round(_weighted_median(
                    self.rtt_p50[k]) / 1e3, 3)
        if self.queue_n:
            out["queue_wait_ms"] = round(self.queue_us / self.queue_n / 1e3, 3)
        out["requests"] = {k: v - self.req_base.get(k, 0)
                           for k, v in self._req.items()
                           if v - self.req_base.get(k, 0) > 0}
        return out


def _weighted_median(pairs: list) -> float:
    """Median of (value, weight) pairs: of the windows' p50s, by requests."""
    pairs = sorted(pairs)
    half, run = sum(w for _, w in pairs) / 2, 0
    for v, w in pairs:
        run += w
        if run >= half:
            return v
    return float("nan")


def _producer(bootstrap: str, errs, log_path: str | None, dr,
              stats: _ClientStats, **extra) -> Producer:
    """Workload 2's producer (THROUGHPUT_PRODUCER, acks=all), idempotent."""
    conf = wl._base(bootstrap, errs, log_path)
    conf.update(wl.THROUGHPUT_PRODUCER)
    conf.update({"acks": "all", "enable.idempotence": True,
                 "on_delivery": dr.on_delivery,
                 "statistics.interval.ms": stats.INTERVAL_MS,
                 "stats_cb": stats, **extra})
    return Producer(conf)


def _wait_until(start_at: float | None) -> None:
    """Concurrent producers (T5, T6) start their clocks together, at ``start_at``
    (time.time()), once each has done its warm-up."""
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))


def idempotent_produce(bootstrap: str, topic: str, count: int, size: int,
                       partitions: int, timeout_s: float,
                       stall_s: float = 60.0,
                       log_path: str | None = None,
                       start_at: float | None = None) -> dict:
    """Workload 2's produce loop with enable.idempotence=true; the clock runs
    from the first produce() to the last delivery report, after a warm-up."""
    errs = wl._ClientErrors()
    try:
        wl.create_topic(bootstrap, topic, partitions, errs, log_path)
    except wl.WorkloadError as e:
        return wl._result(False, str(e))
    dr, stats = wl._Deliveries(), _ClientStats()
    p = _producer(bootstrap, errs, log_path, dr, stats)
    payload = os.urandom(size)
    # One acknowledged record before the clock, as init_transactions() is
    # for T2: librdkafka asks for the producer id before the broker's own
    # connection is up, finds no broker and retries 500 ms later, which
    # would be counted here and not in T2.
    p.produce(topic, payload)
    p.flush(30)
    if dr.ok != 1:
        return wl._result(False, f"warm-up record not acknowledged: "
                                 f"{dr.first_err}. {errs.summary()}")
    dr.ok = 0
    _wait_until(start_at)
    stats.reset()
    cpu0 = wl._cpu_s()
    t0 = time.perf_counter()
    wall0 = time.time()
    deadline = time.monotonic() + timeout_s
    watch = wl._StallWatch(stall_s)
    failure = None
    try:
        produced = wl._send_all(p, topic, payload, count, dr, watch, deadline,
                                timeout_s)
        wl._await_deliveries(p, produced, dr, watch, deadline, timeout_s)
    except wl.WorkloadError as e:
        failure = str(e)
    elapsed = time.perf_counter() - t0
    client_cpu = wl._cpu_s() - cpu0
    if len(p):
        p.purge()
        p.poll(0.5)
    stats.wait_window(p)
    metrics = wl._produce_metrics(count, size, "all", partitions, dr, elapsed,
                                  client_cpu)
    metrics.update(stats.metrics(), wall_start=wall0, wall_end=wall0 + elapsed)
    failure = wl._produce_failure(failure, dr, count, errs)
    return wl._result(failure is None, failure, metrics)


def warm_up(bootstrap: str, transactional_id: str, timeout_s: float,
            log_path: str | None = None) -> dict:
    """Make the broker create __transaction_state (InitProducerId with a
    transactional id) and __consumer_offsets (the consumers' group
    coordinator) before anything is timed: both are created on first use,
    with 50 partitions each by default, and T3/T4's consumers ask for the
    group coordinator in the background while they are timed."""
    errs = wl._ClientErrors()
    t0 = time.perf_counter()
    try:
        p = Producer({**wl._base(bootstrap, errs, log_path),
                      "transactional.id": transactional_id})
        p.init_transactions(timeout_s)
        c = Consumer({**wl._base(bootstrap, errs, log_path),
                      **wl.ASSIGN_CONSUMER})
        c.committed([TopicPartition("bench-warm-up", 0)], timeout=timeout_s)
        c.close()
    except KafkaException as e:
        return wl._result(False, f"warm-up failed: {e}. {errs.summary()}")
    return wl._result(True, metrics={"s": round(time.perf_counter() - t0, 3)})


def consume(isolation: str, **kwargs) -> dict:
    """Workload 3's consume_throughput with ``isolation.level`` set."""
    # librdkafka's default is read_committed, so both levels are set explicitly
    wl.ASSIGN_CONSUMER = {**wl.ASSIGN_CONSUMER, "isolation.level": isolation}
    return wl.consume_throughput(**kwargs)


def _pct(vals: list[float], p: float) -> float | None:
    """Nearest-rank percentile of a sorted list."""
    if not vals:
        return None
    return vals[max(0, min(len(vals) - 1, math.ceil(p / 100 * len(vals)) - 1))]


def _run_transactions(p: Producer, topic: str, payload: bytes, txns: int,
                      per_txn: int, deadline: float, timeout_s: float) -> list:
    """begin, ``per_txn`` produce(), commit, ``txns`` times; returns the
    seconds each commit_transaction() took.  Raises WorkloadError or
    KafkaException."""
    commit_s = []
    for t in range(txns):
        p.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    p.produce(topic, payload)
                    break
                except BufferError:  # local queue full: let it drain
                    p.poll(0.01)
                    if time.monotonic() > deadline:
                        raise wl.WorkloadError(
                            f"timed out after {timeout_s:.0f}s (queue full "
                            f"in transaction {t + 1})") from None
        c0 = time.perf_counter()
        # flushes the transaction's records, then EndTxn(commit)
        p.commit_transaction(max(1.0, deadline - time.monotonic()))
        commit_s.append(time.perf_counter() - c0)
        if time.monotonic() > deadline:
            raise wl.WorkloadError(f"timed out after {timeout_s:.0f}s "
                                   f"({t + 1}/{txns} transactions)")
    return commit_s


def _txn_metrics(commit_s: list, elapsed: float, per_txn: int,
                 client: dict) -> dict:
    """Per-transaction figures, and the time of one transaction split into
    the broker round trips librdkafka measured and the rest (client side)."""
    n = len(commit_s)
    commit_s = sorted(commit_s)
    out = {
        "records_per_txn": per_txn,
        "transactions": n,
        "txn_per_s": round(n / elapsed, 1) if elapsed else None,
        "ms_per_txn": round(elapsed / n * 1e3, 3) if n else None,
        # commit_transaction() alone: flush of the last records + EndTxn
        "commit_p50_ms": round(_pct(commit_s, 50) * 1e3, 3) if n else None,
        "commit_p99_ms": round(_pct(commit_s, 99) * 1e3, 3) if n else None,
        "commit_share": round(sum(commit_s) / elapsed, 3) if elapsed else None,
        **client,
    }
    per = {k: round(v / n, 2) for k, v in client.get("requests", {}).items()
           } if n else {}
    out["requests_per_txn"] = per
    # The three requests of a transaction go one after another, so their
    # round trips add up; with several Produce requests in flight they
    # overlap and the sum would overstate them: no split then.
    if ("rtt_ms_leader" in client and "rtt_ms_TxnCoordinator" in client
            and per.get("Produce", 0) <= 1.05):
        trips = (per.get("Produce", 0) * client["rtt_ms_leader"]
                 + (per.get("AddPartitionsToTxn", 0) + per.get("EndTxn", 0))
                 * client["rtt_ms_TxnCoordinator"])
        out["round_trips_ms_per_txn"] = round(trips, 3)
        out["client_side_ms_per_txn"] = round(out["ms_per_txn"] - trips, 3)
    return out


def transactional_produce(bootstrap: str, topic: str, count: int, size: int,
                          per_txn: int, partitions: int, transactional_id: str,
                          timeout_s: float,
                          log_path: str | None = None,
                          start_at: float | None = None) -> dict:
    """``count // per_txn`` committed transactions of ``per_txn`` records; the
    clock runs from the first begin_transaction() to the last commit's return
    (init_transactions() is done before it starts)."""
    errs = wl._ClientErrors()
    try:
        wl.create_topic(bootstrap, topic, partitions, errs, log_path)
    except wl.WorkloadError as e:
        return wl._result(False, str(e))
    dr, stats = wl._Deliveries(), _ClientStats()
    p = _producer(bootstrap, errs, log_path, dr, stats,
                  **{"transactional.id": transactional_id,
                     # librdkafka wants message.timeout.ms <=
                     # transaction.timeout.ms (default 60 s); raise the
                     # latter so T1's settings stay
                     "transaction.timeout.ms":
                         wl.THROUGHPUT_PRODUCER["message.timeout.ms"]})
    txns = count // per_txn
    failure, commit_s = None, []
    try:
        p.init_transactions(30)
        p.list_topics(topic, timeout=10)  # T1's warm-up learns it too
    except KafkaException as e:
        return wl._result(False, f"init_transactions failed: {e}. "
                                 f"{errs.summary()}")
    _wait_until(start_at)
    stats.reset()
    cpu0 = wl._cpu_s()
    t0 = time.perf_counter()
    wall0 = time.time()
    try:
        commit_s = _run_transactions(p, topic, os.urandom(size), txns,
                                     per_txn, time.monotonic() + timeout_s,
                                     timeout_s)
    except wl.WorkloadError as e:
        failure = str(e)
    except KafkaException as e:
        failure = f"transaction {len(commit_s) + 1} failed: {e}"
    elapsed = time.perf_counter() - t0
    client_cpu = wl._cpu_s() - cpu0
    stats.wait_window(p)  # also serves any delivery report still queued
    metrics = wl._produce_metrics(txns * per_txn, size, "all", partitions, dr,
                                  elapsed, client_cpu)
    metrics.update(_txn_metrics(commit_s, elapsed, per_txn, stats.metrics()),
                   wall_start=wall0, wall_end=wall0 + elapsed)
    if failure is None and dr.ok != txns * per_txn:
        failure = (f"{dr.ok} of {txns * per_txn} records acknowledged after "
                   f"the last commit")
    failure = wl._produce_failure(failure, dr, txns * per_txn, errs)
    return wl._result(failure is None, failure, metrics)


# --------------------------------------------------------------------------
# orchestration


def plan(args) -> dict:
    scale = 10 if args.quick else 1
    return {
        "scale": scale,
        "count": COUNT // scale,
        "record_bytes": SIZE,
        "records_per_txn": args.records_per_txn,
        "producers": max(1, args.producers),
        "partitions": PARTITIONS,
        "repeat": max(1, args.repeat),
        "timeout_s": args.timeout,
        "producer_config": {**wl.THROUGHPUT_PRODUCER, "acks": "all",
                            "enable.idempotence": True},
        "consumer_config": wl.ASSIGN_CONSUMER,
        "targets": {f"{n}/{d}": t for _, n, d, t in RATIOS},
    }


def _calls(b, params: dict, run_id: str, rep: int) -> list[tuple]:
    """(workload, function, kwargs) for one repeat, in running order."""
    sfx = f"{run_id}-r{rep + 1}"
    common = dict(bootstrap=b.bootstrap, timeout_s=params["timeout_s"],
                  log_path=str(b.client_log))
    produce = dict(count=params["count"], size=SIZE, partitions=PARTITIONS,
                   **common)
    txn_topic = f"bench-t2-{sfx}"
    reads = [(w, "consume", dict(isolation=level, topic=txn_topic,
                                 expected=params["count"],
                                 partitions=PARTITIONS, **common))
             for w, level in (("T3", "read_uncommitted"),
                              ("T4", "read_committed"))]
    if rep % 2:
        reads.reverse()
    n = params["producers"]
    each = dict(produce, count=params["count"] // n)
    return [("T1", "idempotent_produce", dict(topic=f"bench-t1-{sfx}",
                                              **produce)),
            ("T2", "transactional_produce", dict(
                topic=txn_topic, per_txn=params["records_per_txn"],
                transactional_id=f"bench-txn-{sfx}", **produce)),
            *reads,
            ("T5", "idempotent_produce", [dict(each, topic=f"bench-t5-{sfx}-{i}")
                                          for i in range(n)]),
            ("T6", "transactional_produce", [dict(
                each, topic=f"bench-t6-{sfx}-{i}", per_txn=params["records_per_txn"],
                transactional_id=f"bench-txn6-{sfx}-{i}") for i in range(n)])]


class _PySpy:
    """``py-spy record`` on the kwire broker for one workload, folded stacks
    to ``path``; summarised as the share of samples per function."""

    def __init__(self, pid: int, path: Path, rate: int = 200):
        exe = (shutil.which("py-spy", path=str(Path(sys.executable).parent))
               or shutil.which("py-spy"))
        if exe is None:
            raise RuntimeError("py-spy not found (pip install py-spy)")
        self.path = path
        self.log = open(path.with_suffix(".log"), "w")
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--rate", str(rate),
             "--format", "raw", "--nolineno", "--nonblocking",
             "--output", str(path)],
            stdout=subprocess.DEVNULL, stderr=self.log)
        time.sleep(0.5)  # attached before the workload starts

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its file on ^C
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()
        return summarise_folded(self.path)


# kwire's own packages as py-spy names their files; the entry points are on
# every stack, so they say nothing
KWIRE_FRAME = ("kwire/", "log/", "codecs/", "groups/", "admin/")
ENTRY_FRAME = ("(kwire/cli.py)", "(kwire/__main__.py)")


def summarise_folded(path: Path, top: int = 12) -> dict:
    """Samples of a py-spy raw (folded) file: total, the functions with the
    largest share as the innermost frame (self, any code), and kwire's own
    functions with the largest share anywhere on the stack (inclusive),
    each as a fraction of all samples."""
    self_c: Counter = Counter()
    incl: Counter = Counter()
    total = 0
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        return {"error": f"no py-spy output: {e}"}
    for line in lines:
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        total += int(n)
        self_c[frames[-1]] += int(n)
        for f in set(frames):
            where = f[f.rfind("(") + 1:]
            if where.startswith(KWIRE_FRAME) and not f.endswith(ENTRY_FRAME):
                incl[f] += int(n)
    def share(c: Counter) -> list:
        return [(f, round(k / total, 3)) for f, k in c.most_common(top)]

    return {"file": str(path), "samples": total,
            "self": share(self_c) if total else [],
            "inclusive": share(incl) if total else []}


def _measure_together(b, fn: str, kwargs_list: list[dict], profile: Path | None = None) -> dict:
    """``fn`` in one child process per kwargs, their clocks started together (after
    each one's warm-up); records/s = all records / (last end - common start)."""
    import threading
    host_memory.warm(WARM_MIB)            # before the children start: it takes both cores
    start_at = time.time() + 8.0          # time for every child's warm-up
    results: list = [None] * len(kwargs_list)
    cpu0 = b.cpu_seconds()

    def one(i: int) -> None:
        kw = dict(kwargs_list[i], start_at=start_at)
        results[i] = run_in_child(b, fn, kw, kw["timeout_s"] + 60, module=MODULE)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(kwargs_list))]
    for t in threads:
        t.start()
    spy = None
    if profile is not None:                 # from the common start on
        time.sleep(max(0.0, start_at - time.time() - 0.5))
        spy = _PySpy(b.proc.pid, profile)
    for t in threads:
        t.join()
    cpu1 = b.cpu_seconds()
    spied = spy.stop() if spy is not None else None
    bad = [r for r in results if not (r and r.get("ok"))]
    if bad:
        return {"ok": False, "metrics": {}, "notes": [],
                "error": f"{len(bad)} of {len(results)} producers failed: "
                         f"{(bad[0] or {}).get('error')}"}
    ms = [r["metrics"] for r in results]
    late = max(m["wall_start"] for m in ms) - start_at
    elapsed = max(m["wall_end"] for m in ms) - start_at
    records = sum(m["records"] for m in ms)
    size = records and sum(m.get("mb_per_s", 0) * m["elapsed_s"] for m in ms) / records
    metrics = {"records": records, "elapsed_s": round(elapsed, 3),
               "records_per_s": round(records / elapsed, 1),
               "mb_per_s": round(size * records / elapsed, 2),
               "producers": len(ms), "late_start_s": round(late, 3),
               "client_cpu_s": round(sum(m.get("client_cpu_s", 0) for m in ms), 2)}
    if cpu0 is not None and cpu1 is not None:
        metrics["broker_cpu_s"] = round(cpu1 - cpu0, 2)
    out = {"ok": True, "metrics": metrics, "notes": [], "error": None}
    if spied is not None:
        out["py_spy"] = spied
    return out


def _measure(b, fn: str, kwargs: dict, profile: Path | None = None) -> dict:
    if isinstance(kwargs, list):
        return _measure_together(b, fn, kwargs, profile)
    host_memory.warm(WARM_MIB)
    spy = _PySpy(b.proc.pid, profile) if profile is not None else None
    load = os.getloadavg()
    cpu0 = b.cpu_seconds()
    t0 = time.monotonic()
    res = run_in_child(b, fn, kwargs, kwargs["timeout_s"] + 60, module=MODULE)
    res["wall_s"] = round(time.monotonic() - t0, 2)
    res["loadavg_before"] = [round(x, 2) for x in load]  # shared machine
    cpu1 = b.cpu_seconds()
    if spy is not None:
        res["py_spy"] = spy.stop()
    m = res["metrics"]
    if cpu0 is not None and cpu1 is not None:
        m["broker_cpu_s"] = round(cpu1 - cpu0, 2)
    if res["ok"] and m.get("elapsed_s"):
        m["client_cpu_share"] = round(m.get("client_cpu_s", 0)
                                      / m["elapsed_s"], 2)
        if m.get("broker_cpu_s") is not None:
            # includes the client's set-up (topic, init), so a little high
            m["broker_cpu_share"] = round(m["broker_cpu_s"] / m["elapsed_s"],
                                          2)
    return res


def _one_line(w: str, res: dict) -> str:
    m = res.get("metrics", {})
    if not res["ok"]:
        return "FAILED: " + (res.get("error") or "?").splitlines()[0][:300]
    if w == "warm_up":
        return f"ok in {m.get('s')}s"
    line = (f"{_fmt(m.get('records_per_s'))} rec/s in {m.get('elapsed_s')}s"
            f" (broker CPU {m.get('broker_cpu_s')}s)")
    if w == "T2":
        line += (f", {m.get('txn_per_s')} txn/s, commit p50/p99 "
                 f"{m.get('commit_p50_ms')}/{m.get('commit_p99_ms')} ms")
    return line


def run_broker(name: str, args, run_dir: Path, params: dict,
               run_id: str) -> dict:
    b, out = start_broker(name, args, run_dir, list(WORKLOADS))
    if b is None:
        return out
    runs: dict[str, list] = {w: [] for w in WORKLOADS}
    try:
        out["warm_up"] = run_in_child(b, "warm_up", dict(
            bootstrap=b.bootstrap, transactional_id=f"bench-warm-up-{run_id}",
            timeout_s=60, log_path=str(b.client_log)), 120, module=MODULE)
        log(f"{name}: internal topics created: "
            f"{_one_line('warm_up', out['warm_up'])}")
        for rep in range(params["repeat"]):
            for w, fn, kwargs in _calls(b, params, run_id, rep):
                if not b.alive():
                    res = {"ok": False, "metrics": {}, "notes": [],
                           "error": "not run: " + b.died_reason()}
                elif w in ("T3", "T4") and not runs["T2"][-1]["ok"]:
                    res = {"ok": False, "metrics": {}, "notes": [],
                           "error": "not run: T2 failed"}
                else:
                    log(f"{name}: {w} ({WORKLOADS[w]}) run "
                        f"{rep + 1}/{params['repeat']} ...")
                    prof = (run_dir / f"{name}-{w}-r{rep + 1}.py-spy.txt"
                            if args.py_spy and name == "kwire" else None)
                    res = _measure(b, fn, kwargs, prof)
                    if "py_spy" in res:
                        out.setdefault("py_spy", {})[f"{w} run {rep + 1}"] = (
                            res.pop("py_spy"))
                    log(f"{name}: {w}: {_one_line(w, res)}")
                    time.sleep(1.0)  # let the broker settle
                runs[w].append(res)
            if not all(r[-1]["ok"] for r in runs.values()):
                break
    finally:
        out["stop"] = b.stop()
    out["workloads"] = {w: _combine(rs) for w, rs in runs.items() if rs}
    out["ratios"] = broker_ratios(out, runs)
    out["ok"] = all(r["ok"] for r in out["workloads"].values())
    return out


def _rate(bres: dict, w: str) -> float | None:
    r = bres["workloads"].get(w)
    return r["metrics"].get("records_per_s") if r and r["ok"] else None


def broker_ratios(bres: dict, runs: dict) -> dict:
    """num/den of the records/s medians, and the same ratio in each repeat."""
    out = {}
    for _, num, den, target in RATIOS:
        n, d = _rate(bres, num), _rate(bres, den)
        each = [round(a["metrics"]["records_per_s"]
                      / b["metrics"]["records_per_s"], 3)
                for a, b in zip(runs[num], runs[den])
                if a["ok"] and b["ok"] and b["metrics"].get("records_per_s")]
        out[f"{num}/{den}"] = {
            "ratio": round(n / d, 3) if n and d else None,
            "target": target,
            "met": (n / d >= target) if n and d else None,
            "each_repeat": each,
        }
    return out


# --------------------------------------------------------------------------
# reporting


def per_broker_table(bres: dict) -> str:
    lines = broker_heading(bres)
    lines.append(f"  {'workload':<48} {'status':<6} {'rec/s':>9} "
                 f"{'MB/s':>7} {'elapsed s':>9} {'brk CPU s':>9} "
                 f"{'cli CPU s':>9}")
    for w, r in bres["workloads"].items():
        m = r.get("metrics", {})
        lines.append(
            f"  {w + ' ' + WORKLOADS[w]:<48} {'ok' if r['ok'] else 'FAIL':<6} "
            f"{_fmt(m.get('records_per_s')):>9} {_fmt(m.get('mb_per_s')):>7} "
            f"{_fmt(m.get('elapsed_s')):>9} {_fmt(m.get('broker_cpu_s')):>9} "
            f"{_fmt(m.get('client_cpu_s')):>9}")
    t2 = bres["workloads"].get("T2")
    if t2 and t2["ok"]:
        m = t2["metrics"]
        lines.append(f"  T2: {_fmt(m.get('txn_per_s'))} txn/s, "
                     f"{m.get('ms_per_txn')} ms each; commit_transaction() "
                     f"p50 {m.get('commit_p50_ms')} ms, p99 "
                     f"{m.get('commit_p99_ms')} ms, "
                     f"{m.get('commit_share', 0):.0%} of the elapsed time")
        if m.get("round_trips_ms_per_txn") is not None:
            lines.append(f"  T2 per transaction: broker round trips "
                         f"{m.get('round_trips_ms_per_txn')} ms (mean RTT "
                         f"Produce {m.get('rtt_ms_leader')}, coordinator "
                         f"{m.get('rtt_ms_TxnCoordinator')} ms; requests/txn"
                         f" {_txn_requests(m)}), client side "
                         f"{m.get('client_side_ms_per_txn')} ms; records "
                         f"wait {m.get('queue_wait_ms')} ms in the producer")
        else:
            lines.append(f"  T2 requests/txn {_txn_requests(m)}: several "
                         f"Produce requests in flight, no round-trip split; "
                         f"records wait {m.get('queue_wait_ms')} ms in the "
                         f"producer")
    t1 = bres["workloads"].get("T1")
    if t1 and t1["ok"]:
        m = t1["metrics"]
        lines.append(f"  T1: Produce RTT mean {m.get('rtt_ms_leader')} ms "
                     f"({(m.get('requests') or {}).get('Produce')} requests),"
                     f" records wait {m.get('queue_wait_ms')} ms in the "
                     f"producer")
    st = bres.get("stop") or {}
    lines.append(f"  peak RSS (VmHWM) {st.get('peak_rss_mb')} MB; stopped by "
                 f"{st.get('stopped_by')} (exit {st.get('exit_code')})")
    lines += failures_and_notes(bres)
    for run, prof in (bres.get("py_spy") or {}).items():
        lines.append(f"  py-spy {run}: {prof.get('samples')} samples "
                     f"{prof.get('error') or ''}")
        for kind in ("self", "inclusive"):
            top = ", ".join(f"{f} {v:.0%}" for f, v in prof.get(kind, [])[:8])
            lines.append(f"    {kind}: {top}")
    return "\n".join(lines)


def _txn_requests(m: dict) -> str:
    per = m.get("requests_per_txn") or {}
    return ", ".join(f"{k} {per[k]:g}" for k in
                     ("AddPartitionsToTxn", "Produce", "EndTxn") if k in per)


def ratio_table(results: dict, order: list[str]) -> str:
    cols = [b for b in order if b in results]
    head = f"{'ratio (records/s medians)':<44}{'target':>8}" + "".join(
        f"{c:>10}{'met':>5}" for c in cols)
    lines = [head, "-" * len(head)]
    for label, num, den, target in RATIOS:
        row = f"{f'{num}/{den} {label}':<44}{f'>={target:.2f}':>8}"
        for c in cols:
            r = results[c].get("ratios", {}).get(f"{num}/{den}") or {}
            v = r.get("ratio")
            met = "-" if v is None else ("yes" if r["met"] else "NO")
            row += f"{'-' if v is None else f'{v:.3f}':>10}{met:>5}"
        lines.append(row)
    for c in cols:
        for key, r in (results[c].get("ratios") or {}).items():
            if len(r.get("each_repeat") or []) > 1:
                lines.append(f"{c} {key} in each repeat: {r['each_repeat']}")
    return "\n".join(lines)


def write_report(doc: dict, brokers: list[str], run_dir: Path,
                 json_path: str | None) -> None:
    """Print the tables; write results.json, report.txt and --json."""
    parts = [per_broker_table(doc["results"][b]) for b in brokers
             if b in doc["results"]]
    parts.append(ratio_table(doc["results"], brokers))
    report = "\n\n".join(parts)
    print(report)
    text = json.dumps(doc, indent=2, default=str)
    (run_dir / "results.json").write_text(text)
    (run_dir / "report.txt").write_text(report + "\n")
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(text)
    log(f"results: {run_dir / 'results.json'}"
        + (f" and {json_path}" if json_path else ""))


def parse_args(argv: list[str] | None):
    ap = argparse.ArgumentParser(
        description="Transactional produce and read_committed consume, "
                    "against idempotent produce and read_uncommitted.")
    ap.add_argument("--brokers", default="kwire,tansu",
                    help="comma-separated, run in this order (default: "
                         "kwire,tansu)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{COUNT // 10:,} records instead of {COUNT:,}")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run T1-T4 N times (interleaved) and report medians")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the JSON results here")
    ap.add_argument("--producers", type=int, default=PRODUCERS,
                    help=f"producers at once in T5 and T6 (default {PRODUCERS})")
    ap.add_argument("--records-per-txn", type=int, default=PER_TXN,
                    metavar="N", help=f"records per transaction in T2 "
                                      f"(default {PER_TXN})")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="per-workload client timeout in seconds")
    ap.add_argument("--start-timeout", type=float, default=60.0)
    ap.add_argument("--tansu-bin")
    ap.add_argument("--kwire-arg", action="append", default=[],
                    help="extra argument for 'python -m kwire serve' "
                         "(repeatable)")
    ap.add_argument("--py-spy", action="store_true",
                    help="record the kwire broker with py-spy during every "
                         "workload (folded stacks in the results directory, "
                         "a summary in the report); the sampler shares the "
                         "cores, so do not quote rates from such a run")
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    ap.add_argument("--protocol", action="store_true",
                    help="instead of T1-T4: transactions v1 against v2 (KIP-890) with a "
                         "protocol-level producer (bench/txn_protocol.py); uses --txns, "
                         "--records-per-txn, --repeat and --brokers (Tansu runs v1)")
    ap.add_argument("--txns", type=int, default=2000,
                    help="transactions per --protocol run (default 2000)")
    args = ap.parse_args(argv)
    brokers = parse_brokers(ap, args.brokers)
    if args.records_per_txn < 1:
        ap.error("--records-per-txn must be at least 1")
    WORKLOADS["T2"] = (f"transactional produce 1 KiB, "
                       f"{args.records_per_txn}/txn")
    return args, brokers


def _changed_files() -> list[str] | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(BENCH_DIR.parent), "status", "--porcelain",
             "--untracked-files=no"], capture_output=True, text=True,
            timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line[3:] for line in out.splitlines()]


def protocol_main(args, brokers: list[str], run_dir: Path) -> int:
    """--protocol: v1 and v2 transactions in turns on kwire (v2 after the upgrade), v1 on the
    others; medians over --repeat rounds, and the broker's CPU per transaction."""
    import txn_protocol
    results: dict = {}
    for name in brokers:
        b, out = start_broker(name, args, run_dir, [])
        if b is None:
            results[name] = out
            continue
        versions = (1, 2) if name == "kwire" else (1,)
        try:
            if 2 in versions:
                txn_protocol.upgrade_to_tv2(b.bootstrap)
            runs: dict[int, list] = {v: [] for v in versions}
            for rep in range(args.repeat):
                for v in versions:
                    topic = f"txn-proto-v{v}-r{rep}"
                    txn_protocol.create_topic(b.bootstrap, topic)
                    cpu0 = b.cpu_seconds()
                    res = txn_protocol.run(b.bootstrap, topic, v, args.txns, args.records_per_txn,
                                           timeout_s=args.timeout)
                    cpu1 = b.cpu_seconds()
                    if cpu0 is not None and cpu1 is not None:
                        res["broker_cpu_us_per_txn"] = round((cpu1 - cpu0) / args.txns * 1e6, 1)
                    log(f"{name}: transactions v{v} round {rep + 1}: {res}")
                    runs[v].append(res)
        finally:
            out["stop"] = b.stop()
        results[name] = {v: runs[v] for v in versions}
    print("Transactions at the protocol level (one producer, one request at a time): median of the rounds")
    base = None
    for name, by_version in results.items():
        if not isinstance(by_version, dict) or "ok" in by_version:
            print(f"  {name}: did not run ({by_version.get('error')})")
            continue
        for v, rs in by_version.items():
            med = lambda key: sorted(r[key] for r in rs if r.get(key) is not None)[len(rs) // 2] if rs else None  # noqa: E731
            rate = med("txns_per_s")
            if name == "kwire" and v == 1:
                base = rate
            ratio = f" (kwire v2/v1 x{rate / base:.2f})" if name == "kwire" and v == 2 and base else ""
            print(f"  {name:6} v{v}: {rate} txn/s{ratio}, p50 {med('p50_ms')} ms, p99 {med('p99_ms')} ms, "
                  f"{rs[0]['round_trips_per_txn']} round trips, broker CPU {med('broker_cpu_us_per_txn')} us/txn")
    (run_dir / "protocol.json").write_text(json.dumps(results, indent=2, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    args, brokers = parse_args(argv)
    if args.protocol:
        run_dir = Path(args.results_dir) / (_dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-txn-protocol")
        run_dir.mkdir(parents=True, exist_ok=True)
        return protocol_main(args, brokers, run_dir)
    run_id = (_dt.datetime.now().strftime("%Y%m%d-%H%M%S")
              + ("-quick" if args.quick else "") + "-txn")
    run_dir = Path(args.results_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    params = plan(args)
    doc = {"run_id": run_id,
           "started": _dt.datetime.now().isoformat(timespec="seconds"),
           "quick": args.quick, "brokers_order": brokers,
           "workloads": WORKLOADS, "params": params,
           "environment": environment(args), "results": {}}
    # other work may have the tree changed: the broker runs what is on disk
    doc["environment"]["kwire_uncommitted_files"] = _changed_files()
    log(f"transactions run {run_id}: brokers={brokers} "
        f"repeat={params['repeat']} records={params['count']}; output in "
        f"{run_dir}")
    interrupted = False
    try:
        for b in brokers:
            doc["results"][b] = run_broker(b, args, run_dir, params, run_id)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; writing partial results")
    doc["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    write_report(doc, brokers, run_dir, args.json)
    if interrupted:
        return 130
    return 0 if all(r["ok"] for r in doc["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
