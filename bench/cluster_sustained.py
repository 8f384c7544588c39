"""The sustained-load section of bench/cluster.py (``--sustained``, issue 28); see its docstring.

Run through ``bench/cluster.py --sustained``; the load processes are that script again
with ``--sustained-worker``.
"""
from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from bench import host_memory
from bench.cluster import SESSION_MS, VALUE, wait_full_isr
from kwire.testing.cluster import ClusterProcess

CLUSTER_SCRIPT = str(pathlib.Path(__file__).resolve().parent / "cluster.py")

# Issue 28: many producers, each on its own connection, keep a replicated partition busy for a
# minute; the ISR must not shrink and no produce may fail for want of replicas.
SUSTAINED_LAG_MS = 3000                 # replica.lag.time.max.ms of the brokers in this mode
ISR_LINE = re.compile(r"(\S+)-(\d+): ISR \[([0-9, ]*)\] -> \[([0-9, ]*)\]")
NOT_ENOUGH = {19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}
LATENCY_SAMPLE = 64                     # one delivery in 64 gives its produce -> ack latency


def sustained_worker(config: dict) -> int:
    """One load process (``--sustained-worker JSON``): ``config["producers"]`` Producer
    instances, each with its own connections.  Protocol on stdin/stdout, one line each:
    the worker prints ``{"ready": ...}`` once every producer has delivered a warm-up record,
    reads the start time (``time.monotonic()``, the same clock in every process on Linux),
    produces until start + seconds, drains for at most ``drain`` seconds, prints its counts
    as one JSON line and exits.  It never outlives start + seconds + drain by much, and
    it gives up if no start time arrives within ``ready_timeout`` seconds."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent ends us by PID, also on Ctrl-C
    topic, seconds = config["topic"], config["seconds"]
    conf = {"bootstrap.servers": config["bootstrap"], "acks": "all", "linger.ms": 0,
            "enable.idempotence": False, "retries": config["retries"],
            "queue.buffering.max.messages": config["queue_messages"],
            "message.timeout.ms": config["message_timeout_ms"]}
    producers = [Producer({**conf, "client.id": f"sustained-{config['worker']}-{i}"})
                 for i in range(config["producers"])]
    warm_errors = []
    for p in producers:
        p.produce(topic, b"warm-up", partition=0,
                  on_delivery=lambda err, _m: err is not None and warm_errors.append(err.name()))
    for p in producers:
        p.flush(30)
    print(json.dumps({"ready": True, "warm_errors": warm_errors,
                      "unflushed": sum(len(p) for p in producers)}), flush=True)
    if not select.select([sys.stdin], [], [], config["ready_timeout"])[0]:
        os._exit(3)
    line = sys.stdin.readline()
    if not line.strip():
        os._exit(3)
    start = float(line)
    deadline = start + seconds
    buckets = [0] * (int(seconds) + 1)
    errors: collections.Counter = collections.Counter()
    latencies: list[float] = []
    counts = {"late": 0, "n": 0}

    def report(err, msg):
        if err is not None:
            errors[f"{err.name()} ({err.code()})"] += 1
            return
        t = time.monotonic() - start
        if t < seconds:
            buckets[int(t)] += 1
        else:
            counts["late"] += 1
        counts["n"] += 1
        if counts["n"] % LATENCY_SAMPLE == 0 and msg.latency() is not None:
            latencies.append(round(msg.latency() * 1000, 2))

    while time.monotonic() < start:
        time.sleep(min(0.01, max(0.0, start - time.monotonic())))
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    produced = 0
    burst = 64
    while time.monotonic() < deadline:
        accepted = 0
        for p in producers:
            p.poll(0)
            for _ in range(burst):
                try:
                    p.produce(topic, VALUE, partition=0, on_delivery=report)
                except BufferError:
                    break
                accepted += 1
        produced += accepted
        if not accepted:                  # every queue full: leave the CPU to the brokers
            time.sleep(0.0005)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    drain_end = deadline + config["drain"]
    for p in producers:
        p.flush(max(0.0, drain_end - time.monotonic()))
    unfinished = sum(len(p) for p in producers)
    if unfinished:
        for p in producers:
            p.purge(in_queue=True, in_flight=True, blocking=False)
        for p in producers:
            p.flush(2)
    result = {"worker": config["worker"], "produced": produced, "acked_per_second": buckets[:int(seconds)],
              "acked_in_window": sum(buckets), "acked_late": counts["late"], "errors": dict(errors),
              "unfinished": unfinished, "latency_ms": latencies,
              "cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)}
    print(json.dumps(result), flush=True)
    os._exit(0)                           # no librdkafka destructors to wait on


class _Lines:
    """Line reader over a child's stdout pipe with a deadline (select on the raw descriptor)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.buffer = proc, b""

    def readline(self, deadline: float) -> str:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"load process {self.proc.pid} said nothing in time")
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"load process {self.proc.pid} exited (code {self.proc.wait(5)})")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


class IsrSampler(threading.Thread):
    """Reads a partition's state znode every ``interval`` s with kazoo and counts each time
    the ISR got smaller than at the sample before.  Also keeps the znode's version, which
    counts every ISR write, those between two samples included."""

    def __init__(self, zk_connect: str, topic: str, partition: int = 0, interval: float = 0.1):
        super().__init__(daemon=True, name="isr-sampler")
        self.path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        self.zk_connect, self.interval = zk_connect, interval
        self.halt = threading.Event()
        self.samples = self.failed = self.shrinks = self.below_full = 0
        self.events: list[tuple[float, list, list]] = []
        self.first_version = self.last_version = None
        self.min_isr: int | None = None
        self.t0 = time.monotonic()
        self.client = KazooClient(hosts=zk_connect, timeout=5)
        self.client.start(timeout=15)

    def run(self) -> None:
        previous, replicas = None, None
        next_at = time.monotonic()
        while not self.halt.is_set():
            try:
                data, stat = self.client.get(self.path)
                isr = json.loads(data)["isr"]
            except Exception:                           # noqa: BLE001 (a lost sample is counted)
                self.failed += 1
            else:
                self.samples += 1
                if self.first_version is None:
                    self.first_version, replicas = stat.version, len(isr)
                self.last_version = stat.version
                self.min_isr = len(isr) if self.min_isr is None else min(self.min_isr, len(isr))
                if len(isr) < (replicas or 0):
                    self.below_full += 1
                if previous is not None and len(isr) < len(previous):
                    self.shrinks += 1
                if previous is not None and isr != previous:
                    self.events.append((time.monotonic() - self.t0, previous, isr))
                previous = isr
            next_at += self.interval
            self.halt.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self.halt.set()
        self.join(5)
        try:
            self.client.stop()
            self.client.close()
        except Exception:                               # noqa: BLE001
            pass


def log_isr_changes(text: str, topic: str) -> tuple[int, int, list[str]]:
    """(shrinks, expansions, the lines) among the brokers' ``ISR [..] -> [..]`` lines for
    partition 0 of ``topic``."""
    shrinks = expands = 0
    lines = []
    for line in text.splitlines():
        m = ISR_LINE.search(line)
        if not m or m.group(1) != topic or m.group(2) != "0":
            continue
        old, new = (len([x for x in g.split(",") if x.strip()]) for g in (m.group(3), m.group(4)))
        shrinks += new < old
        expands += new > old
        lines.append(line.strip())
    return shrinks, expands, lines


def proc_cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc; 0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0


def sync_bounded(timeout: float = 60) -> None:
    """``os.sync()`` in a thread, waited for at most ``timeout`` s (write-back is not ours to wait out)."""
    t = threading.Thread(target=os.sync, daemon=True)
    t.start()
    t.join(timeout)


def split_producers(producers: int, workers: int) -> list[int]:
    return [producers // workers + (w < producers % workers) for w in range(workers)]


def sustained_run(cluster, topic: str, args, log_dir: str, sample_isr: bool) -> dict:
    """One run of ``args.seconds`` of load on partition 0 of ``topic``; counts and timings."""
    procs: list[subprocess.Popen] = []
    sampler = None
    try:
        for w, n in enumerate(split_producers(args.producers, args.workers)):
            config = {"worker": w, "producers": n, "topic": topic, "bootstrap": cluster.bootstrap,
                      "seconds": args.seconds, "drain": args.drain, "retries": args.retries,
                      "queue_messages": args.queue_messages, "ready_timeout": 120,
                      "message_timeout_ms": args.message_timeout_ms}
            with open(os.path.join(log_dir, f"load-{w}.log"), "ab") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, CLUSTER_SCRIPT, "--sustained-worker", json.dumps(config)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log))
        readers = [_Lines(p) for p in procs]
        ready_by = time.monotonic() + 90
        warm_errors = []
        for r in readers:
            ready = json.loads(r.readline(ready_by))
            warm_errors += ready["warm_errors"]
        if warm_errors:
            raise RuntimeError(f"{topic}: warm-up records failed: {collections.Counter(warm_errors)}")
        offsets = {i: len(b.log_text()) for i, b in cluster.brokers.items()}
        if sample_isr:
            sampler = IsrSampler(cluster.zookeeper.connect, topic)
            sampler.start()
        broker_cpu0 = sum(proc_cpu_seconds(b.pid) for b in cluster.brokers.values())
        start = time.monotonic() + 0.3
        for p in procs:
            p.stdin.write(f"{start!r}\n".encode())
            p.stdin.flush()
        time.sleep(max(0.0, start + args.seconds - time.monotonic()))
        broker_cpu = sum(proc_cpu_seconds(b.pid) for b in cluster.brokers.values()) - broker_cpu0
        results_by = start + args.seconds + args.drain + 30
        results = [json.loads(r.readline(results_by)) for r in readers]
        for p in procs:
            p.wait(10)
        time.sleep(0.5)                   # a log line written just now
        if sampler is not None:
            sampler.stop()
        log_text = "".join(b.log_text()[offsets[i]:] for i, b in cluster.brokers.items())
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (p.stdin, p.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if sampler is not None and sampler.is_alive():
            sampler.stop()
    errors: collections.Counter = collections.Counter()
    per_second = [0] * int(args.seconds)
    latencies: list[float] = []
    for res in results:
        errors.update(res["errors"])
        for s, n in enumerate(res["acked_per_second"]):
            per_second[s] += n
        latencies += res["latency_ms"]
    log_shrinks, log_expands, log_lines = log_isr_changes(log_text, topic)
    latencies.sort()
    pct = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan"))
    return {
        "topic": topic,
        "acked": sum(r["acked_in_window"] for r in results),
        "records_per_s": sum(r["acked_in_window"] for r in results) / args.seconds,
        "produced": sum(r["produced"] for r in results),
        "acked_late": sum(r["acked_late"] for r in results),
        "unfinished": sum(r["unfinished"] for r in results),
        "per_second": per_second,
        "errors": dict(errors),
        "not_enough": {code: sum(n for k, n in errors.items() if k.endswith(f"({code})")) for code in NOT_ENOUGH},
        "latency_ms": (pct(0.5), pct(0.99), latencies[-1] if latencies else float("nan")),
        "client_cpu_s": sum(r["cpu_s"] for r in results),
        "broker_cpu_s": broker_cpu,
        "zk_shrinks": sampler.shrinks if sampler else None,
        "zk_samples": (sampler.samples, sampler.failed) if sampler else None,
        "zk_below_full_s": sampler.below_full * sampler.interval if sampler else None,
        "zk_min_isr": sampler.min_isr if sampler else None,
        "zk_isr_writes": (sampler.last_version - sampler.first_version
                          if sampler and sampler.first_version is not None else None),
        "zk_events": sampler.events if sampler else [],
        "log_shrinks": log_shrinks, "log_expands": log_expands, "log_lines": log_lines,
    }


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


def sustained(args) -> int:
    """The --sustained mode: its own three-broker cluster, RF=3 and RF=1 runs alternated."""
    signal.signal(signal.SIGTERM, _raise_exit)     # a kill of this script still ends what it started
    log_dir = tempfile.mkdtemp(prefix="kwire-sustained-")     # the load processes' stderr
    try:
        runs = sustained_runs(args, log_dir)
    except Exception:
        print(f"load processes' logs: {log_dir}", file=sys.stderr)
        raise
    shutil.rmtree(log_dir, ignore_errors=True)
    print_sustained(runs, args)
    return 0


def sustained_runs(args, log_dir: str) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {"RF=3": [], "RF=1": []}
    with ClusterProcess(3, properties={"zookeeper.session.timeout.ms": SESSION_MS,
                                       "auto.leader.rebalance.enable": "false",
                                       "replica.lag.time.max.ms": SUSTAINED_LAG_MS}) as cluster:
        for k in range(args.repeat):
            order = ["RF=3", "RF=1"] if k % 2 == 0 else ["RF=1", "RF=3"]
            for kind in order:
                rf = 3 if kind == "RF=3" else 1
                topic = f"sustained-rf{rf}-r{k}"
                config = {"min.insync.replicas": "2"} if rf == 3 else {}
                admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 4})
                admin.create_topics([NewTopic(topic, 1, rf, config=config)])[topic].result(30)
                del admin           # its connections would complain when the brokers stop
                wait_full_isr(cluster, topic)
                sync_bounded()
                host_memory.warm(args.warm_mib)
                print(f"repeat {k + 1}/{args.repeat}: {kind} ({topic}), {args.seconds:g} s of load ...",
                      file=sys.stderr, flush=True)
                load = os.getloadavg()[0]
                try:
                    run = sustained_run(cluster, topic, args, log_dir, sample_isr=rf == 3)
                except Exception as exc:
                    print(f"  failed: {exc!r}; the brokers' errors:", file=sys.stderr)
                    print(cluster.error_lines(10), file=sys.stderr)
                    raise
                run["load_before"] = load
                runs[kind].append(run)
                print(f"  {run['records_per_s']:,.0f} records/s, errors {run['errors'] or 'none'}"
                      + (f", ISR shrinks {run['zk_shrinks']} (ZooKeeper) / {run['log_shrinks']} (logs)"
                         if rf == 3 else ""), file=sys.stderr, flush=True)
                admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 4})
                try:        # keeps the disk and the page cache from filling over the repeats
                    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
                except Exception as exc:                  # noqa: BLE001
                    print(f"  (could not delete {topic}: {exc})", file=sys.stderr)
                del admin
    return runs


def print_sustained(runs: dict[str, list[dict]], args) -> None:
    rf3, rf1 = runs["RF=3"], runs["RF=1"]
    med = lambda rs, f: statistics.median(f(r) for r in rs)     # noqa: E731
    print(f"\nsustained load: {args.producers} producers (one connection each, {args.workers} processes), "
          f"acks=all, linger.ms=0, retries={args.retries}, 1 KiB values, 1 partition, "
          f"{args.seconds:g} s per run, {args.repeat} run(s) each (medians; sums for counts)")
    loads = ", ".join(f"{r['load_before']:.1f}" for k in range(len(rf3)) for r in (rf3[k], rf1[k]))
    print(f"brokers: replica.lag.time.max.ms={SUSTAINED_LAG_MS}; RF=3 topic min.insync.replicas=2; "
          f"1-min load average before each run: {loads}")
    w = 46
    print(f"{'':<{w}} {'RF=3':>14} {'RF=1':>14}   target")
    print(f"{'records/s acknowledged':<{w}} {med(rf3, lambda r: r['records_per_s']):>14,.0f} "
          f"{med(rf1, lambda r: r['records_per_s']):>14,.0f}")
    for label, f in (("  per second, min", min), ("  per second, median", statistics.median)):
        print(f"{label:<{w}} {med(rf3, lambda r: f(r['per_second'])):>14,.0f} "
              f"{med(rf1, lambda r: f(r['per_second'])):>14,.0f}")
    print(f"{'ack latency p50 / p99 ms (1 in 64 sampled)':<{w}} "
          f"{'%.0f / %.0f' % (med(rf3, lambda r: r['latency_ms'][0]), med(rf3, lambda r: r['latency_ms'][1])):>14} "
          f"{'%.0f / %.0f' % (med(rf1, lambda r: r['latency_ms'][0]), med(rf1, lambda r: r['latency_ms'][1])):>14}")
    print(f"{'ISR shrinks, ZooKeeper (sampled every 0.1 s)':<{w}} {sum(r['zk_shrinks'] for r in rf3):>14} "
          f"{'':>14}   0")
    print(f"{'ISR shrinks, broker logs':<{w}} {sum(r['log_shrinks'] for r in rf3):>14} {'':>14}   0")
    print(f"{'  ISR expansions, broker logs':<{w}} {sum(r['log_expands'] for r in rf3):>14}")
    print(f"{'  ISR writes (state znode version)':<{w}} {sum(r['zk_isr_writes'] or 0 for r in rf3):>14}")
    print(f"{'  time ISR below 3 replicas (s), min ISR':<{w}} "
          f"{'%.1f, %s' % (sum(r['zk_below_full_s'] for r in rf3), min(r['zk_min_isr'] for r in rf3)):>14}")
    for code, name in NOT_ENOUGH.items():
        label = f"{name} ({code}), records"
        print(f"{label:<{w}} {sum(r['not_enough'][code] for r in rf3):>14} "
              f"{sum(r['not_enough'][code] for r in rf1):>14}   0")
    for kind, rs in (("RF=3", rf3), ("RF=1", rf1)):
        other: collections.Counter = collections.Counter()
        for r in rs:
            other.update({k: n for k, n in r["errors"].items()
                          if not any(k.endswith(f"({c})") for c in NOT_ENOUGH)})
        print(f"{'other delivery errors, ' + kind:<{w}} {dict(other) or 'none'}")
    print(f"{'unacknowledged at the end (purged)':<{w}} {sum(r['unfinished'] for r in rf3):>14} "
          f"{sum(r['unfinished'] for r in rf1):>14}")
    print(f"{'CPU-s in the window: brokers / clients':<{w}} "
          f"{'%.0f / %.0f' % (med(rf3, lambda r: r['broker_cpu_s']), med(rf3, lambda r: r['client_cpu_s'])):>14} "
          f"{'%.0f / %.0f' % (med(rf1, lambda r: r['broker_cpu_s']), med(rf1, lambda r: r['client_cpu_s'])):>14}")
    ratio = med(rf3, lambda r: r["records_per_s"]) / med(rf1, lambda r: r["records_per_s"])
    print(f"{'ratio RF=3/RF=1, records/s':<{w}} {ratio:>14.2f}")
    if len(rf3) > 1:
        paired = [a["records_per_s"] / b["records_per_s"] for a, b in zip(rf3, rf1)]
        print(f"ratio per repeat: {', '.join(f'{p:.2f}' for p in paired)}")
    print("records acknowledged in each second, thousands:")
    for kind, rs in (("RF=3", rf3), ("RF=1", rf1)):
        for k, r in enumerate(rs):
            print(f"  {kind} run {k + 1}: {' '.join(f'{n / 1000:.0f}' for n in r['per_second'])}")
    events = [(k, e) for k, r in enumerate(rf3) for e in r["zk_events"]]
    if events:
        print("ISR changes seen in ZooKeeper (run, seconds after sampling began, before -> after):")
        for k, (t, before, after) in events[:12]:
            print(f"  run {k + 1}  {t:6.1f} s  {before} -> {after}")
        if len(events) > 12:
            print(f"  ... {len(events) - 12} more")
    lines = [line for r in rf3 for line in r["log_lines"]]
    if lines:
        print("ISR lines in the brokers' logs:")
        for line in lines[:12]:
            print(f"  {line}")
        if len(lines) > 12:
            print(f"  ... {len(lines) - 12} more")


