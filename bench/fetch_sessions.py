#!/usr/bin/env python
"""Fetch sessions benchmark: broker CPU per fetched MB for a consumer of 200 partitions,
with incremental fetch sessions (KIP-227) disabled and enabled.

    python bench/fetch_sessions.py [--repeat N] [--quick] [--clients java,kafka-python,librdkafka]
                                   [--partitions 200] [--json out.json]

kwire only: the comparison is kwire against itself, once with
``max.incremental.fetch.session.cache.slots=0`` ("off": every fetch is a full fetch
with session id 0) and once with the default 1000 ("on").  Each mode starts its own
broker (run.py's Broker helper: free 127.0.0.1 port, fresh data dir, stopped by PID)
and runs, for each client, in a child process that reads every partition in assign mode:

  F1 backlog  PARTITIONS x BACKLOG records of 100 B already stored; read from the
              beginning to the end.
  F2 tail     a caught-up consumer of an empty topic; the benchmark then writes 100 B
              records in bursts of BURST to one partition at a time, the next burst to the
              next partition every BURST_INTERVAL s, for DURATION s: most partitions are
              idle on every fetch, the case KIP-227 is for.  The same producer run with no
              consumer is measured too, and its broker CPU subtracted ("net").

Reported per client and workload: broker CPU seconds (user+sys of the broker process,
from /proc) over the workload, fetched MB (10^6 bytes of record values), ms of broker CPU
per fetched MB, and the on/off ratio (< 1: sessions save broker CPU).  Clients:
  java          tests/java/FetchConsumer.java on ../shared/jars (Java 4.0: Fetch v17,
                incremental sessions); skipped when the jars or javac are absent
  kafka-python  KafkaConsumer (Fetch v12, incremental sessions)
  librdkafka    confluent_kafka.Consumer (no fetch sessions at all: a control, whose
                ratio should be about 1)

Results go to bench/results/<run-id>-fetch-sessions/ (results.json, report.txt, broker
logs).  See bench/README.md, "Fetch sessions benchmark".
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
for p in (str(BENCH_DIR), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

VALUE = b"x" * 100
SLOTS = {"off": 0, "on": 1000}


# -- consumer children: "count N" lines as they read, then "done N SECONDS" -------------

def child_main(client: str, bootstrap: str, topic: str, expected: int, timeout_s: float) -> int:
    start = time.monotonic()
    deadline = start + timeout_s
    count, last = 0, start
    if client == "librdkafka":
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fs", "enable.auto.commit": False,
                      "fetch.queue.backoff.ms": 10})
        n = len(c.list_topics(topic, timeout=30).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in range(n)])
        poll = lambda: sum(1 for m in c.consume(10000, timeout=0.2) if not m.error())  # noqa: E731
    else:
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        n = len(c.partitions_for_topic(topic) or ())
        while n == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            n = len(c.partitions_for_topic(topic) or ())
        c.assign([TopicPartition(topic, p) for p in range(n)])
        c.seek_to_beginning()
        poll = lambda: sum(len(v) for v in c.poll(timeout_ms=200, max_records=100000).values())  # noqa: E731
    try:
        while count < expected and time.monotonic() < deadline:
            got = poll()
            if got:
                count += got
                last = time.monotonic()
                print(f"count {count}", flush=True)
    finally:
        c.close()
    if count < expected:
        print(f"timeout {count}", flush=True)
        return 1
    print(f"done {count} {last - start:.3f}", flush=True)
    return 0


class ConsumerProcess:
    def __init__(self, client: str, bootstrap: str, topic: str, expected: int, timeout_s: float, log_path: Path):
        if client == "java":
            from tests.support.java import start_java
            self.proc = start_java("FetchConsumer", bootstrap, topic, expected, int(timeout_s),
                                   "fetch.max.wait.ms=500", stdout=subprocess.PIPE,
                                   stderr=open(log_path, "a"))
        else:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--child", client, bootstrap, topic, str(expected), str(timeout_s)],
                stdout=subprocess.PIPE, stderr=open(log_path, "a"), text=True, cwd=ROOT)
        self.count = 0

    def wait_count(self, at_least: int, timeout_s: float) -> str:
        """Read lines until "done", "timeout" or a count >= at_least; returns that line."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"consumer exited ({self.proc.poll()}) at count {self.count}")
            kind, *rest = line.split()
            if kind == "count":
                self.count = int(rest[0])
                if self.count >= at_least:
                    return line
            else:
                return line.strip()
        raise RuntimeError(f"consumer stuck at {self.count} of {at_least}")

    def close(self) -> None:
        from kwire.compat_tests.external import end_process
        end_process(self.proc, 10)


# -- workloads --------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def producer(bootstrap: str):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.size": 1000000,
                     "enable.idempotence": False, "acks": 1, "queue.buffering.max.messages": 1000000})


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = producer(bootstrap)
    for part in range(partitions):
        for _ in range(per_partition):
            p.produce(topic, VALUE, partition=part)
        p.poll(0)
    assert p.flush(60) == 0


def trickle(bootstrap: str, topic: str, partitions: int, burst: int, interval_s: float, duration_s: float) -> int:
    """duration/interval bursts of ``burst`` records, each to the next partition, one every
    ``interval_s`` (catching up without sleeping when behind); returns records sent."""
    p = producer(bootstrap)
    sent, i = 0, 0
    t0 = time.monotonic()
    for _burst in range(int(duration_s / interval_s)):
        for _ in range(burst):
            p.produce(topic, VALUE, partition=i % partitions)
        sent += burst
        i += 1
        p.poll(0)
        delay = t0 + i * interval_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    assert p.flush(60) == 0
    return sent


def measure(broker, fn):
    before = broker.cpu_seconds()
    t0 = time.monotonic()
    out = fn()
    return out, broker.cpu_seconds() - before, time.monotonic() - t0


def backlog(broker, client: str, params: dict, run_dir: Path, tag: str) -> dict:
    topic = f"fs-backlog-{tag}"
    parts, per = params["partitions"], params["backlog"]
    create_topic(broker.bootstrap, topic, parts)
    fill(broker.bootstrap, topic, parts, per)
    expected = parts * per
    consumer = ConsumerProcess(client, broker.bootstrap, topic, expected, params["timeout_s"],
                               run_dir / f"{client}-consumer.log")
    try:
        line, cpu, elapsed = measure(broker, lambda: consumer.wait_count(expected, params["timeout_s"]))
    finally:
        consumer.close()
    return result(line, expected, cpu, elapsed)


def tail(broker, client: str, params: dict, run_dir: Path, tag: str) -> dict:
    topic = f"fs-tail-{tag}"
    parts = params["partitions"]
    create_topic(broker.bootstrap, topic, parts)
    fill(broker.bootstrap, topic, parts, 1)            # one record each: the consumer is caught up
    total = parts + params["tail_records"]
    consumer = ConsumerProcess(client, broker.bootstrap, topic, total, params["timeout_s"],
                               run_dir / f"{client}-consumer.log")
    try:
        consumer.wait_count(parts, params["timeout_s"])
        time.sleep(1.0)

        def run():
            trickle(broker.bootstrap, topic, parts, params["burst"], params["interval_s"], params["duration_s"])
            return consumer.wait_count(total, params["timeout_s"])
        line, cpu, elapsed = measure(broker, run)
    finally:
        consumer.close()
    return result(line, total - parts, cpu, elapsed)


def producer_only(broker, params: dict, tag: str) -> float:
    topic = f"fs-prod-{tag}"
    create_topic(broker.bootstrap, topic, params["partitions"])
    _sent, cpu, _ = measure(broker, lambda: trickle(broker.bootstrap, topic, params["partitions"], params["burst"],
                                                    params["interval_s"], params["duration_s"]))
    return cpu


def result(line: str, records: int, cpu: float, elapsed: float) -> dict:
    ok = line.startswith("done") or line.startswith("count")
    mb = records * len(VALUE) / 1e6
    return {"ok": ok, "line": line, "records": records, "mb": mb, "broker_cpu_s": round(cpu, 3),
            "elapsed_s": round(elapsed, 3), "cpu_ms_per_mb": round(1000 * cpu / mb, 2) if mb else None}


# -- orchestration ----------------------------------------------------------------------

def run_mode(mode: str, clients: list[str], params: dict, run_dir: Path, args) -> dict:
    from run import Broker, log
    ns = types.SimpleNamespace(kwire_arg=["--override", f"max.incremental.fetch.session.cache.slots={SLOTS[mode]}",
                                          "--log-level", "WARNING"], tansu_bin=None,
                               keep_data=False)
    broker = Broker("kwire", ns, run_dir)
    broker.log_path = run_dir / f"kwire-{mode}-broker.log"
    out: dict = {"mode": mode, "slots": SLOTS[mode], "runs": []}
    try:
        broker.start()
        broker.wait_ready(60)
        for rep in range(params["repeat"]):
            run: dict = {"producer_only_cpu_s": round(producer_only(broker, params, f"{mode}-r{rep}"), 3)}
            for client in clients:
                for name, fn in (("F1", backlog), ("F2", tail)):
                    res = fn(broker, client, params, run_dir, f"{mode}-{client}-r{rep}")
                    if name == "F2":
                        net = res["broker_cpu_s"] - run["producer_only_cpu_s"]
                        res["net_cpu_ms_per_mb"] = round(1000 * net / res["mb"], 2)
                    run[f"{client} {name}"] = res
                    log(f"{mode} {client} {name} r{rep + 1}: {res['records']} records, broker CPU "
                        f"{res['broker_cpu_s']} s in {res['elapsed_s']} s = {res['cpu_ms_per_mb']} ms/MB"
                        + (f" (net of the producer {res['net_cpu_ms_per_mb']})" if name == "F2" else ""))
            out["runs"].append(run)
    finally:
        broker.stop()
    return out


def median_of(mode: dict, key: str, metric: str):
    values = [r[key][metric] for r in mode["runs"] if key in r and r[key].get(metric) is not None]
    return statistics.median(values) if values else None


def report(doc: dict, clients: list[str]) -> str:
    off, on = doc["modes"]["off"], doc["modes"]["on"]
    rows = [f"Fetch sessions, {doc['params']['partitions']} partitions, median of {doc['params']['repeat']} "
            f"run(s); broker CPU ms per fetched MB (10^6 B of values); ratio = on/off (< 1: sessions save CPU)",
            f"{'client / workload':28} {'off':>10} {'on':>10} {'on/off':>8}"]
    for client in clients:
        for name, metric in (("F1", "cpu_ms_per_mb"), ("F2", "cpu_ms_per_mb"), ("F2", "net_cpu_ms_per_mb")):
            key = f"{client} {name}"
            a, b = median_of(off, key, metric), median_of(on, key, metric)
            label = f"{key}{' net' if metric.startswith('net') else ''}"
            ratio = f"{b / a:.2f}" if a and b else "n/a"
            rows.append(f"{label:28} {a if a is not None else 'n/a':>10} {b if b is not None else 'n/a':>10} {ratio:>8}")
            if a and b:
                doc["ratios"][label] = round(b / a, 3)
    for mode in ("off", "on"):
        cpu = [r["producer_only_cpu_s"] for r in doc["modes"][mode]["runs"]]
        rows.append(f"producer alone (F2's writes), broker CPU s, {mode}: {statistics.median(cpu)}")
    return "\n".join(rows)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Broker CPU per fetched MB with and without fetch sessions.")
    ap.add_argument("--clients", default="java,kafka-python,librdkafka")
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=1, metavar="N")
    ap.add_argument("--quick", action="store_true", help="a tenth of the records and a 2 s trickle")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    return ap.parse_args(argv)


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        client, bootstrap, topic, expected, timeout_s = sys.argv[2:7]
        return child_main(client, bootstrap, topic, int(expected), float(timeout_s))
    from run import log
    args = parse_args(argv)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if "java" in clients:
        from tests.support.java import java_available
        ok, why = java_available()
        if not ok:
            log(f"java skipped: {why}")
            clients.remove("java")
    scale = 10 if args.quick else 1
    params = {"partitions": args.partitions, "backlog": 1000 // scale, "tail_records": None,
              "burst": 50, "interval_s": 0.01, "duration_s": 2.0 if args.quick else 10.0,
              "repeat": max(1, args.repeat), "timeout_s": args.timeout}
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(args.results_dir) / f"{run_id}-fetch-sessions"
    run_dir.mkdir(parents=True, exist_ok=True)
    # what trickle() sends is paced, so the count is known from the plan up to the last burst
    params["tail_records"] = count_trickle(params)
    log(f"fetch sessions run {run_id}: clients={clients} params={params}; output in {run_dir}")
    doc = {"run_id": run_id, "params": params, "clients": clients, "modes": {}, "ratios": {}}
    for mode in ("off", "on"):
        doc["modes"][mode] = run_mode(mode, clients, params, run_dir, args)
    text = report(doc, clients)
    print(text)
    (run_dir / "report.txt").write_text(text + "\n")
    (run_dir / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str))
    log(f"results: {run_dir / 'results.json'}")
    return 0


def count_trickle(params: dict) -> int:
    """Records trickle() sends: one burst per interval while the duration lasts."""
    bursts = int(params["duration_s"] / params["interval_s"])
    return bursts * params["burst"]


if __name__ == "__main__":
    sys.exit(main())
