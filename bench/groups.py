#!/usr/bin/env python
"""Consumer-group benchmark: kwire vs the Tansu reference broker.

    python bench/groups.py [--brokers kwire,tansu] [--repeat N] [--json F]

Starts each broker with run.py's Broker helper (free 127.0.0.1 port, fresh
data directory, stopped by PID), then runs the group workloads from
group_workloads.py in spawned client processes (see bench/README.md,
"Consumer-group benchmark").  kwire runs with
group.initial.rebalance.delay.ms=0; Tansu 0.6.0 has no such setting.

Results go to bench/results/<run-id>-groups/.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import group_workloads as gw  # noqa: E402
from run import (  # noqa: E402
    Broker,
    _combine,
    _fmt,
    broker_heading,
    environment,
    log,
    run_in_child,
    start_broker,
    parse_brokers,
)

KWIRE_GROUP_ARGS = ["--override", "group.initial.rebalance.delay.ms=0"]
MODULE = "group_workloads"

WORKLOADS = {
    "1": "join-to-first-record, eager (default assignor)",
    "2": "join-to-first-record, cooperative-sticky",
    "3": "kill -9 1 of 3 members, gap until resumed",
    "4": "2nd member joins, eager, until both own",
    "5": "2nd member joins, cooperative-sticky",
    "6": "join-to-first-record, KIP-848 (group.protocol=consumer)",
    "7": "2nd member joins, KIP-848 (group.protocol=consumer)",
}
DEFAULT_WORKLOADS = "1,2,3,4,5,6,7"
# KIP-848 workloads: brokers without the protocol skip them
CONSUMER_PROTOCOL_WORKLOADS = {"6", "7"}
# KIP-848 members heartbeat at the broker's interval: 500 ms, as FAST_MEMBER's
# classic members do (the kwire-side minimum is lowered to allow it)
KWIRE_CONSUMER_PROTOCOL_ARGS = [
    "--override", "group.consumer.min.heartbeat.interval.ms=500",
    "--override", "group.consumer.heartbeat.interval.ms=500"]

# (workload, metric, label); every one is a time, lower is better
COMPARE = [
    ("1", "first_record_s", "G1 subscribe->first record (eager)  s"),
    ("1", "assign_s", "G1 subscribe->assigned (eager)      s"),
    ("2", "first_record_s", "G2 subscribe->first record (coop)   s"),
    ("2", "assign_s", "G2 subscribe->assigned (coop)       s"),
    ("3", "gap_s", "G3 kill->all victim parts resumed   s"),
    ("3", "gap_first_partition_s", "G3 kill->first victim part resumed  s"),
    ("3", "survivor_revoke_s", "G3 kill->survivors revoked          s"),
    ("3", "max_stall_survivor_partitions_s",
     "G3 survivor-partition stall         s"),
    ("4", "both_assigned_s", "G4 2nd join->both own (eager)       s"),
    ("4", "b_first_assign_s", "G4 2nd join->2nd assigned (eager)   s"),
    ("5", "both_assigned_s", "G5 2nd join->both own (coop)        s"),
    ("6", "first_record_s", "G6 subscribe->first record (848)    s"),
    ("7", "both_assigned_s", "G7 2nd join->both own (848)         s"),
    ("1", "broker_cpu_s", "G1 broker CPU                       s"),
    ("3", "broker_cpu_s", "G3 broker CPU                       s"),
]


def plan(args) -> dict:
    return {
        "partitions": gw.PARTITIONS,
        "preloaded_records": 1000,
        "kill_members": 3,
        "kill_rate_per_s": 200,
        "repeat": max(1, args.repeat),
        "timeout_s": args.timeout,
        "group_consumer_config": gw.GROUP_CONSUMER,
        "member_config_w3_w4_w5": gw.FAST_MEMBER,
        "kwire_args": (KWIRE_GROUP_ARGS + KWIRE_CONSUMER_PROTOCOL_ARGS
                       + list(args.kwire_arg)),
        "tansu_note": "tansu 0.6.0 has no group.initial.rebalance.delay.ms "
                      "equivalent (no such flag or environment variable in "
                      "'tansu broker --help'); it runs with its defaults",
    }


def _call_for(w: str, b: Broker, run_id: str, rep: int, params: dict,
              topic: str) -> tuple[str, dict]:
    cl = str(b.client_log)
    t = params["timeout_s"]
    group = f"bench-g{w}-{run_id}-r{rep + 1}"
    if w in ("1", "2", "6"):
        return "join_first_record", dict(
            bootstrap=b.bootstrap, topic=topic, group=group,
            strategy={"1": None, "2": "cooperative-sticky",
                      "6": gw.CONSUMER_PROTOCOL}[w],
            timeout_s=t, log_path=cl)
    if w == "3":
        return "kill_rebalance", dict(
            bootstrap=b.bootstrap, topic=f"bench-g3-{run_id}-r{rep + 1}",
            group=group, members=params["kill_members"],
            rate=params["kill_rate_per_s"], timeout_s=max(t, 90),
            log_path=cl)
    return "second_member_join", dict(
        bootstrap=b.bootstrap, topic=topic, group=group,
        strategy={"4": None, "5": "cooperative-sticky",
                  "7": gw.CONSUMER_PROTOCOL}[w],
        timeout_s=t, log_path=cl)


def _measure(b: Broker, call) -> dict:
    cpu0 = b.cpu_seconds()
    load = os.getloadavg()
    t0 = time.monotonic()
    res = run_in_child(b, call[0], call[1], call[1]["timeout_s"] + 60,
                       module=MODULE)
    res["wall_s"] = round(time.monotonic() - t0, 2)
    res["loadavg_before"] = [round(x, 2) for x in load]
    cpu1 = b.cpu_seconds()
    if cpu0 is not None and cpu1 is not None:
        res["metrics"]["broker_cpu_s"] = round(cpu1 - cpu0, 2)
    return res


def _one_line(w: str, r: dict) -> str:
    m = r.get("metrics", {})
    if not r["ok"]:
        return "FAILED: " + (r.get("error") or "?").splitlines()[0][:300]
    if w in ("1", "2", "6"):
        return (f"first record {m.get('first_record_s')} s "
                f"(assigned {m.get('assign_s')} s)")
    if w == "3":
        return (f"gap {m.get('gap_s')} s (first partition "
                f"{m.get('gap_first_partition_s')} s, survivors revoked at "
                f"{m.get('survivor_revoke_s')} s), missing "
                f"{m.get('missing_after_drain')}")
    return (f"both own {m.get('both_assigned_s')} s (2nd assigned "
            f"{m.get('b_first_assign_s')} s)")


def run_broker(name: str, args, run_dir: Path, params: dict, run_id: str,
               selected: list[str]) -> dict:
    bargs = argparse.Namespace(**vars(args))
    if name == "kwire":
        bargs.kwire_arg = (KWIRE_GROUP_ARGS + KWIRE_CONSUMER_PROTOCOL_ARGS
                           + list(args.kwire_arg))
    else:
        skipped = [w for w in selected if w in CONSUMER_PROTOCOL_WORKLOADS]
        if skipped:
            log(f"{name}: skipping G{', G'.join(skipped)}: no KIP-848 "
                f"consumer protocol (ConsumerGroupHeartbeat) in {name}")
            selected = [w for w in selected if w not in skipped]
    b, out = start_broker(name, bargs, run_dir, selected)
    if b is None:
        return out
    try:
        topic = f"bench-groups-{run_id}"
        prep = None
        if any(w != "3" for w in selected):
            log(f"{name}: creating {topic} ({params['partitions']} partitions,"
                f" {params['preloaded_records']} records)")
            prep = run_in_child(b, "prepare_topic", dict(
                bootstrap=b.bootstrap, topic=topic,
                partitions=params["partitions"],
                records=params["preloaded_records"], timeout_s=60,
                log_path=str(b.client_log)), 120, module=MODULE)
            out["prepare"] = prep
            if not prep["ok"]:
                log(f"{name}: topic setup failed: {prep['error']}")
        repeat = params["repeat"]
        for w in selected:
            label = f"G{w} ({WORKLOADS[w]})"
            runs: list[dict] = []
            for rep in range(repeat):
                if not b.alive():
                    runs.append({"ok": False, "metrics": {}, "notes": [],
                                 "error": "not run: " + b.died_reason()})
                    break
                if w != "3" and not prep["ok"]:
                    runs.append({"ok": False, "metrics": {}, "notes": [],
                                 "error": "not run: topic setup failed: "
                                          + str(prep["error"])})
                    break
                rl = label + (f" run {rep + 1}/{repeat}" if repeat > 1
                              else "")
                log(f"{name}: {rl} ...")
                res = _measure(b, _call_for(w, b, run_id, rep, params, topic))
                runs.append(res)
                log(f"{name}: {rl}: {_one_line(w, res)}")
                time.sleep(0.5)
                if not res["ok"]:
                    break
            out["workloads"][w] = _combine(runs)
    finally:
        out["stop"] = b.stop()
    if not all(r["ok"] for r in out["workloads"].values()):
        out["ok"] = False
    return out


def _value(bres: dict, w: str, key: str):
    r = bres["workloads"].get(w)
    if r is None or not r["ok"]:
        return None
    return r["metrics"].get(key)


def ratios(results: dict) -> dict:
    if "kwire" not in results or "tansu" not in results:
        return {}
    out = {}
    for w, key, _ in COMPARE:
        k, t = _value(results["kwire"], w, key), _value(results["tansu"], w,
                                                        key)
        out[f"g{w}.{key}"] = (float(f"{k / t:.3g}") if k is not None and t
                              else None)
    return out


def per_broker_table(bres: dict) -> str:
    lines = broker_heading(bres, "median")
    lines.append(f"  {'workload':<50} {'status':<6} {'result'}")
    for w, r in bres["workloads"].items():
        lines.append(f"  {'G' + w + ' ' + WORKLOADS[w]:<50} "
                     f"{'ok' if r['ok'] else 'FAIL':<6} "
                     f"{_one_line(w, r) if r['ok'] else '(see below)'}"
                     + (f"  [brk CPU {r['metrics'].get('broker_cpu_s')} s]"
                        if r["ok"] else ""))
    for w, r in bres["workloads"].items():
        if r["ok"] and len(r.get("runs") or []) > 1:
            key = {"1": "first_record_s", "2": "first_record_s",
                   "3": "gap_s"}.get(w, "both_assigned_s")
            lines.append(f"  G{w} {key} per run: "
                         f"{[x.get(key) for x in r['runs']]}")
    st = bres.get("stop") or {}
    lines.append(f"  peak RSS {st.get('peak_rss_mb')} MB; stopped by "
                 f"{st.get('stopped_by')} (exit {st.get('exit_code')})")
    for w, r in bres["workloads"].items():
        if not r["ok"]:
            lines.append(f"  G{w} FAILED: {r.get('error')}")
        for n in r.get("notes", []):
            lines.append(f"  G{w} note: {n}")
    return "\n".join(lines)


def comparison_table(results: dict, order: list[str]) -> str:
    rat = ratios(results)
    cols = [b for b in order if b in results]
    head = f"{'metric (median)':<40}" + "".join(f"{c:>10}" for c in cols)
    if rat:
        head += f"{'kwire/tansu':>13}"
    lines = [head, "-" * len(head)]
    for w, key, label in COMPARE:
        if all(results[c]["workloads"].get(w) is None for c in cols):
            continue
        row = f"{label:<40}"
        for c in cols:
            v = _value(results[c], w, key)
            r = results[c]["workloads"].get(w)
            row += f"{(_fmt(v) if v is not None else ('FAILED' if r is not None and not r['ok'] else '-')):>10}"
        if rat:
            rv = rat.get(f"g{w}.{key}")
            txt = "-" if rv is None else (f"{rv:.3f}" if rv >= 0.01
                                           else f"{rv:.2g}")
            row += f"{txt:>13}"
        lines.append(row)
    if rat:
        lines.append("all figures are times: ratio < 1 means kwire is faster")
    return "\n".join(lines)


def parse_args(argv: list[str] | None):
    ap = argparse.ArgumentParser(
        description="Consumer-group benchmark: kwire vs Tansu.")
    ap.add_argument("--brokers", default="kwire,tansu")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="runs per workload; medians are reported")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the JSON results here")
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                    help=f"subset, e.g. 1,3 (default {DEFAULT_WORKLOADS})")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="per-run client timeout in seconds (default 60; "
                         "W3 gets at least 90)")
    ap.add_argument("--start-timeout", type=float, default=60.0)
    ap.add_argument("--tansu-bin")
    ap.add_argument("--kwire-arg", action="append", default=[],
                    help="extra argument for 'python -m kwire serve' "
                         "(repeatable)")
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = ap.parse_args(argv)

    brokers = parse_brokers(ap, args.brokers)
    selected = sorted({w.strip() for w in args.workloads.split(",")
                       if w.strip()})
    for w in selected:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}; choose from "
                     f"{','.join(WORKLOADS)}")
    return args, brokers, selected


def write_report(doc: dict, brokers: list[str], run_dir: Path,
                 json_path: str | None) -> None:
    """Print the tables; write results.json, report.txt and --json."""
    parts = [per_broker_table(doc["results"][b]) for b in brokers
             if b in doc["results"]]
    parts.append(comparison_table(doc["results"], brokers))
    report = "\n\n".join(parts)
    print(report)
    (run_dir / "results.json").write_text(json.dumps(doc, indent=2,
                                                     default=str))
    (run_dir / "report.txt").write_text(report + "\n")
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=2, default=str))
    log(f"results: {run_dir / 'results.json'}"
        + (f" and {json_path}" if json_path else ""))


def main(argv: list[str] | None = None) -> int:
    args, brokers, selected = parse_args(argv)
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-groups"
    run_dir = Path(args.results_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    params = plan(args)
    doc = {"run_id": run_id,
           "started": _dt.datetime.now().isoformat(timespec="seconds"),
           "brokers_order": brokers, "workloads_selected": selected,
           "workloads": {w: WORKLOADS[w] for w in selected},
           "params": params, "environment": environment(args),
           "results": {}}
    log(f"groups run {run_id}: brokers={brokers} workloads={selected} "
        f"repeat={params['repeat']}; output in {run_dir}")
    interrupted = False
    try:
        for b in brokers:
            doc["results"][b] = run_broker(b, args, run_dir, params, run_id,
                                           selected)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; writing partial results")
    doc["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    doc["ratios_kwire_over_tansu"] = ratios(doc["results"])
    write_report(doc, brokers, run_dir, args.json)
    if interrupted:
        return 130
    return 0 if all(r["ok"] for r in doc["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
