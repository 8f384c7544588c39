#!/usr/bin/env python
"""Kafka's own perf tools against kwire and Tansu, in the same run.

    python bench/java_perf.py [--brokers kwire,tansu] [--repeat N] [--quick]
                              [--json out.json]

org.apache.kafka.tools.ProducerPerformance and ConsumerPerformance (Apache
Kafka 4.0 snapshot, ../shared/jars: see its README.md) run as JVM child
processes against one broker at a time, started with run.py's helpers (free
127.0.0.1 port, fresh data directory, Metadata check, stopped by PID):

  JP1  ProducerPerformance: COUNT1 x 100 B records, 1 partition
  JP2  ProducerPerformance: COUNT2 x 1 KiB records, 6 partitions
  JC1  ConsumerPerformance: JP1's topic from the beginning
  JC2  ConsumerPerformance: JP2's topic from the beginning

The producers use the Java client's defaults (idempotent, acks=all,
linger.ms=5, batch.size=16384) plus acks=all spelled out, as the jars' README
runs it; --throughput -1 (no throttle).  The consumers use the defaults except
session.timeout.ms=6000 (see bench/README.md: Tansu holds a JoinGroup for half
the session timeout) and report both the whole run (join included) and
fetch.nMsg.sec, the tool's rate after the group is joined.  Topics are created
with CreateTopics first (confluent-kafka's AdminClient).

Results go to bench/results/<run-id>-java-perf/: results.json, report.txt,
<broker>-broker.log and each tool's output as <broker>-<workload>-r<k>.out.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import workloads as wl  # noqa: E402
from run import (  # noqa: E402
    REPO_DIR,
    _combine,
    _fmt,
    broker_heading,
    environment,
    failures_and_notes,
    log,
    start_broker,
    parse_brokers,
)

MODULE = "java-perf"
JARS = REPO_DIR.parent / "shared" / "jars"
CLIENT_JAR = "kafka-clients-4.0.0-SNAPSHOT.jar"
TOOLS_JAR = "kafka-tools-perf-4.0.0-SNAPSHOT.jar"
COUNT1, SIZE1, PARTITIONS1 = 1_000_000, 100, 1
COUNT2, SIZE2, PARTITIONS2 = 200_000, 1024, 6
CONSUMER_CONFIG = {"session.timeout.ms": "6000"}

WORKLOADS = {
    "JP1": "ProducerPerformance 100 B, 1 partition",
    "JP2": "ProducerPerformance 1 KiB, 6 partitions",
    "JC1": "ConsumerPerformance, JP1's topic",
    "JC2": "ConsumerPerformance, JP2's topic",
}

# "200000 records sent, 126903.6 records/sec (12.10 MB/sec), 366.55 ms avg latency,
#  487.00 ms max latency, 358 ms 50th, 471 ms 95th, 485 ms 99th, 487 ms 99.9th."
PRODUCER_LINE = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_per_s>[\d.]+) records/sec "
    r"\((?P<mb_per_s>[\d.]+) MB/sec\), (?P<avg_latency_ms>[\d.]+) ms avg latency, "
    r"(?P<max_latency_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, "
    r"(?P<p95_ms>\d+) ms 95th, (?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th\.")
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


class ToolError(RuntimeError):
    """A perf tool did not finish cleanly; the message says why."""


def jars_available(jars: Path = JARS) -> tuple[bool, str]:
    for name in (CLIENT_JAR, TOOLS_JAR):
        if not (jars / name).is_file():
            return False, f"no {name} in {jars} (the shared jars folder next to the project)"
    return True, ""


def tool_command(tool: str, args: list[str], jars: Path = JARS) -> list[str]:
    """``java ... org.apache.kafka.tools.<tool> *args`` with the tools' classpath and native libs."""
    cp = os.pathsep.join([str(jars / TOOLS_JAR), str(jars / CLIENT_JAR), str(jars / "deps" / "*")])
    return ["java", f"-Djava.library.path={jars / 'deps' / 'native'}", "-cp", cp,
            f"org.apache.kafka.tools.{tool}", *args]


def parse_producer(stdout: str) -> dict:
    """The final summary line of ProducerPerformance as numbers; raises ToolError if absent."""
    matches = list(PRODUCER_LINE.finditer(stdout))
    if not matches:
        raise ToolError("no summary line in ProducerPerformance's output")
    return {k: float(v) if "." in v else int(v) for k, v in matches[-1].groupdict().items()}


def parse_consumer(stdout: str) -> dict:
    """ConsumerPerformance's result row (after its header) as numbers; raises ToolError."""
    lines = [line.strip() for line in stdout.splitlines()]
    if CONSUMER_HEADER not in lines:
        raise ToolError("no result header in ConsumerPerformance's output")
    row = lines[lines.index(CONSUMER_HEADER) + 1].split(", ")
    names = [n.replace(".", "_") for n in CONSUMER_HEADER.split(", ")]
    out = dict(zip(names, row))
    return {k: (v if k in ("start_time", "end_time") else float(v)) for k, v in out.items()}


def producer_args(bootstrap: str, topic: str, count: int, size: int) -> list[str]:
    return ["--topic", topic, "--num-records", str(count), "--record-size", str(size),
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"]


def consumer_args(bootstrap: str, topic: str, count: int, group: str, config: Path,
                  timeout_ms: int = 30000) -> list[str]:
    return ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
            "--group", group, "--timeout", str(timeout_ms), "--consumer.config", str(config)]


def run_tool(tool: str, args: list[str], out_path: Path, timeout_s: float) -> tuple[str, float, float]:
    """Run a perf tool to its end: (stdout, wall s, client CPU s).  Its stdout and stderr go to
    ``out_path``.  Raises ToolError on a non-zero exit, a timeout, or an exception in stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(tool_command(tool, args), capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:      # subprocess.run killed it
        out_path.write_text(f"{e.stdout or ''}\n--- stderr ---\n{e.stderr or ''}")
        raise ToolError(f"{tool} still running after {timeout_s:.0f} s") from None
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out_path.write_text(f"{' '.join(tool_command(tool, args))}\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")
    errors = [line for line in proc.stderr.splitlines()
              if "Exception" in line or line.startswith(("ERROR", "WARNING"))]
    if proc.returncode != 0 or errors:
        raise ToolError(f"{tool} exited {proc.returncode}; " + "; ".join(errors[:3] or
                        proc.stderr.strip().splitlines()[-3:]))
    return proc.stdout, wall, cpu


# --------------------------------------------------------------------------
# workloads


def plan(args) -> dict:
    scale = 10 if args.quick else 1
    return {"scale": scale, "repeat": max(1, args.repeat), "timeout_s": args.timeout,
            "JP1": dict(count=COUNT1 // scale, size=SIZE1, partitions=PARTITIONS1),
            "JP2": dict(count=COUNT2 // scale, size=SIZE2, partitions=PARTITIONS2),
            "consumer_config": CONSUMER_CONFIG}


def produce(b, params: dict, w: str, topic: str, out_path: Path) -> dict:
    p = params[w]
    wl.create_topic(b.bootstrap, topic, p["partitions"], wl._ClientErrors(), str(b.client_log))
    stdout, wall, cpu = run_tool("ProducerPerformance", producer_args(b.bootstrap, topic, p["count"], p["size"]),
                                 out_path, params["timeout_s"])
    m = parse_producer(stdout)
    if m["records"] != p["count"]:
        raise ToolError(f"{m['records']} of {p['count']} records sent")
    m.update(wall_s=round(wall, 2), client_cpu_s=round(cpu, 2))
    return m


def consume(b, params: dict, w: str, topic: str, group: str, config: Path, out_path: Path) -> dict:
    count = params[w]["count"]
    stdout, wall, cpu = run_tool("ConsumerPerformance",
                                 consumer_args(b.bootstrap, topic, count, group, config),
                                 out_path, params["timeout_s"])
    m = parse_consumer(stdout)
    if int(m["data_consumed_in_nMsg"]) != count:
        raise ToolError(f"consumed {int(m['data_consumed_in_nMsg'])} of {count} records")
    m.update(wall_s=round(wall, 2), client_cpu_s=round(cpu, 2))
    return m


def measure(b, fn, *fargs) -> dict:
    load = os.getloadavg()
    cpu0 = b.cpu_seconds()
    res = {"ok": True, "error": None, "notes": [], "loadavg_before": [round(x, 2) for x in load]}
    try:
        res["metrics"] = fn(b, *fargs)
    except (ToolError, wl.WorkloadError) as e:
        res.update(ok=False, error=str(e), metrics={})
    cpu1 = b.cpu_seconds()
    if res["ok"] and cpu0 is not None and cpu1 is not None:
        res["metrics"]["broker_cpu_s"] = round(cpu1 - cpu0, 2)
    return res


def run_broker(name: str, args, run_dir: Path, params: dict, run_id: str) -> dict:
    b, out = start_broker(name, args, run_dir, list(WORKLOADS))
    if b is None:
        return out
    config = run_dir / "consumer.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in CONSUMER_CONFIG.items()))
    runs: dict[str, list] = {w: [] for w in WORKLOADS}
    try:
        for rep in range(params["repeat"]):
            sfx = f"{run_id}-r{rep + 1}"
            topics = {"JP1": f"jperf-1-{sfx}", "JP2": f"jperf-2-{sfx}"}
            calls = [("JP1", produce, ("JP1", topics["JP1"])),
                     ("JP2", produce, ("JP2", topics["JP2"])),
                     ("JC1", consume, ("JP1", topics["JP1"], f"jperf-c1-{sfx}", config)),
                     ("JC2", consume, ("JP2", topics["JP2"], f"jperf-c2-{sfx}", config))]
            for w, fn, fargs in calls:
                if not b.alive():
                    runs[w].append({"ok": False, "metrics": {}, "notes": [],
                                    "error": "not run: " + b.died_reason()})
                    continue
                label = f"{w} ({WORKLOADS[w]}) run {rep + 1}/{params['repeat']}"
                log(f"{name}: {label} ...")
                res = measure(b, fn, params, *fargs, run_dir / f"{name}-{w}-r{rep + 1}.out")
                runs[w].append(res)
                log(f"{name}: {label}: {one_line(res)}")
                time.sleep(1.0)
        for w, rs in runs.items():
            out["workloads"][w] = _combine(rs)
    finally:
        out["stop"] = b.stop()
    out["ok"] = all(r["ok"] for r in out["workloads"].values())
    return out


# --------------------------------------------------------------------------
# report


def one_line(res: dict) -> str:
    if not res["ok"]:
        return "FAILED: " + (res.get("error") or "?").splitlines()[0][:300]
    m = res["metrics"]
    if "records_per_s" in m:
        return (f"{m['records_per_s']:,.0f} rec/s, {m['mb_per_s']} MB/s, latency avg {m['avg_latency_ms']} "
                f"/ p99 {m['p99_ms']} ms, broker CPU {m.get('broker_cpu_s')} s")
    return (f"{m['nMsg_sec']:,.0f} rec/s overall, {m['fetch_nMsg_sec']:,.0f} rec/s after the join "
            f"(rebalance {m['rebalance_time_ms']:.0f} ms), broker CPU {m.get('broker_cpu_s')} s")


ROWS = [  # (label, workload, metric, higher is better)
    ("JP1 produce 100 B, rec/s", "JP1", "records_per_s", True),
    ("JP1 produce 100 B, MB/s", "JP1", "mb_per_s", True),
    ("JP1 latency avg / p99, ms", "JP1", ("avg_latency_ms", "p99_ms"), False),
    ("JP2 produce 1 KiB, rec/s", "JP2", "records_per_s", True),
    ("JP2 produce 1 KiB, MB/s", "JP2", "mb_per_s", True),
    ("JP2 latency avg / p99, ms", "JP2", ("avg_latency_ms", "p99_ms"), False),
    ("JC1 consume 100 B, rec/s (whole run)", "JC1", "nMsg_sec", True),
    ("JC1 consume 100 B, rec/s (after join)", "JC1", "fetch_nMsg_sec", True),
    ("JC1 join (rebalance.time.ms)", "JC1", "rebalance_time_ms", False),
    ("JC2 consume 1 KiB, rec/s (whole run)", "JC2", "nMsg_sec", True),
    ("JC2 consume 1 KiB, rec/s (after join)", "JC2", "fetch_nMsg_sec", True),
    ("JC2 join (rebalance.time.ms)", "JC2", "rebalance_time_ms", False),
    ("broker CPU s JP1 / JP2 / JC1 / JC2", None, "broker_cpu_s", False),
    ("client CPU s JP1 / JP2 / JC1 / JC2", None, "client_cpu_s", False),
    ("broker peak RSS (VmHWM), MB", "stop", "peak_rss_mb", False),
]


def value(bres: dict | None, w: str, key: str):
    if not bres:
        return None
    if w == "stop":
        return (bres.get("stop") or {}).get(key)
    res = bres.get("workloads", {}).get(w)
    if not res or not res["ok"]:
        return None
    return res["metrics"].get(key)


def cell(bres: dict | None, w: str | None, key) -> str:
    if w is None:
        return " / ".join(_fmt(value(bres, x, key)) for x in WORKLOADS)
    if w == "stop":
        return _fmt(value(bres, w, key))
    if isinstance(key, tuple):
        return " / ".join(_fmt(value(bres, w, k)) for k in key)
    return _fmt(value(bres, w, key))


def ratio(results: dict, w: str | None, key) -> str:
    if w is None:
        return ""
    keys = key if isinstance(key, tuple) else (key,)
    parts = []
    for k in keys:
        a, b = value(results.get("kwire"), w, k), value(results.get("tansu"), w, k)
        parts.append(f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
                     else "-")
    return " / ".join(parts)


def ratios(results: dict) -> dict:
    return {f"{w}.{k}": ratio(results, w, k) for _, w, k, _ in ROWS if w is not None and isinstance(k, str)}


def table(results: dict, order: list[str]) -> str:
    lines = []
    for name in order:
        if name in results:
            lines += broker_heading(results[name])
    head = ["metric"] + order + (["kwire/Tansu"] if set(order) >= {"kwire", "tansu"} else [])
    rows = [head]
    for label, w, key, _ in ROWS:
        row = [label] + [cell(results.get(n), w, key) for n in order]
        if len(head) > len(order) + 1:
            row.append(ratio(results, w, key))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[j]) if j == 0 else c.rjust(widths[j]) for j, c in enumerate(r)))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name in order:
        if name in results:
            lines += failures_and_notes(results[name], name)
    lines.append("Ratio = kwire / Tansu: >1 is kwire faster for rates; <1 is kwire lower for "
                 "latency, join time and CPU.")
    return "\n".join(lines)


def parse_args(argv: list[str] | None):
    ap = argparse.ArgumentParser(description="Kafka's ProducerPerformance / ConsumerPerformance "
                                             "against kwire and Tansu.")
    ap.add_argument("--brokers", default="kwire,tansu")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every workload N times per broker; per-metric medians")
    ap.add_argument("--quick", action="store_true", help="a tenth of the records (smoke run)")
    ap.add_argument("--json", metavar="PATH", help="also write the JSON results here")
    ap.add_argument("--timeout", type=float, default=300.0, help="per tool run, seconds")
    ap.add_argument("--start-timeout", type=float, default=60.0)
    ap.add_argument("--tansu-bin")
    ap.add_argument("--kwire-arg", action="append", default=[])
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = ap.parse_args(argv)
    brokers = parse_brokers(ap, args.brokers)
    return args, brokers


def main(argv: list[str] | None = None) -> int:
    args, brokers = parse_args(argv)
    ok, why = jars_available()
    if not ok:
        print(f"cannot run Kafka's perf tools: {why}", file=sys.stderr)
        return 2
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if args.quick else "")
    run_dir = Path(args.results_dir) / f"{run_id}-{MODULE}"
    run_dir.mkdir(parents=True, exist_ok=True)
    params = plan(args)
    env = environment(args)
    env["java"] = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    env["kafka_tools"] = TOOLS_JAR
    doc = {"run_id": run_id, "started": _dt.datetime.now().isoformat(timespec="seconds"),
           "quick": args.quick, "brokers_order": brokers, "params": params, "environment": env,
           "results": {}}
    log(f"java perf run {run_id}: brokers={brokers} repeat={params['repeat']}; output in {run_dir}")
    interrupted = False
    try:
        for b in brokers:
            doc["results"][b] = run_broker(b, args, run_dir, params, run_id)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; writing partial results")
    doc["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    doc["ratios_kwire_over_tansu"] = ratios(doc["results"])
    report = table(doc["results"], brokers)
    print(report)
    (run_dir / "report.txt").write_text(report + "\n")
    text = json.dumps(doc, indent=2, default=str)
    (run_dir / "results.json").write_text(text)
    if args.json:
        Path(args.json).write_text(text)
    log(f"results: {run_dir / 'results.json'}")
    if interrupted:
        return 130
    return 0 if all(r["ok"] for r in doc["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
