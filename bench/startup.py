#!/usr/bin/env python
"""Start-up time of kwire, embedded and as a process: from "start" to a TCP connect succeeding.

    python bench/startup.py [--runs 20] [--json out.json] [--no-tansu]

Rows (median, min and max of --runs starts, each with a fresh data directory):
- embedded: ``kwire.testing.EmbeddedBroker().start()`` in this process (kwire
  already imported), then a connect; stopped between runs.
- embedded, cold: a fresh interpreter that imports kwire.testing and starts
  one broker; the time from the interpreter's first line to the connect,
  i.e. the import cost a test session pays once.
- subprocess: ``python -m kwire serve`` started by ``kwire.testing.BrokerProcess``,
  polled with connects every 5 ms; stopped with SIGTERM by PID.
- tansu subprocess (memory engine), the same way, for reference.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kwire.testing import BrokerProcess

BENCH_DIR = Path(__file__).resolve().parent


def connect_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def embedded(runs: int) -> list[float]:
    import kwire.testing

    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        b = kwire.testing.EmbeddedBroker().start()
        assert connect_ok(b.port)
        out.append(time.perf_counter() - t0)
        b.stop()
    return out


COLD = r"""
import time; t0 = time.perf_counter()
import socket, kwire.testing
b = kwire.testing.EmbeddedBroker().start()
socket.create_connection(("127.0.0.1", b.port), timeout=2).close()
print(time.perf_counter() - t0)
b.stop()
"""


def embedded_cold(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, timeout=60)
        out.append(float(res.stdout.strip().splitlines()[-1]))
    return out


def process(make_broker, runs: int, prefix: str) -> list[float]:
    """Seconds from spawning ``make_broker(data_dir)`` (a ``BrokerProcess``) to a connect."""
    out = []
    for _ in range(runs):
        data = tempfile.mkdtemp(prefix=prefix)
        broker = make_broker(data)
        t0 = time.perf_counter()
        broker.spawn()
        try:
            broker.wait_ready(timeout=30, interval=0.005)
            out.append(time.perf_counter() - t0)
        finally:
            broker.stop()
            shutil.rmtree(data, ignore_errors=True)
    return out


def kwire_process(data: str) -> BrokerProcess:
    return BrokerProcess(data, properties={"log.dirs": data}, args=["--log-level", "WARNING"],
                         log_path=os.devnull, new_session=True, test_defaults=False)


def tansu_process_factory():
    sys.path.insert(0, str(BENCH_DIR))
    from run import TansuProcess, find_tansu  # bench/run.py: the same broker as the throughput bench

    tansu_bin = find_tansu(None)
    return lambda data: TansuProcess(tansu_bin, data, log_path=os.devnull, new_session=True)


def summary(name: str, times: list[float]) -> dict:
    ms = sorted(t * 1000 for t in times)
    return {"name": name, "runs": len(ms), "median_ms": round(statistics.median(ms), 1),
            "min_ms": round(ms[0], 1), "max_ms": round(ms[-1], 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--no-tansu", action="store_true")
    args = ap.parse_args(argv)
    rows = [summary("embedded (kwire.testing, warm)", embedded(args.runs)),
            summary("embedded, cold interpreter incl. imports", embedded_cold(args.runs)),
            summary("subprocess: python -m kwire serve", process(kwire_process, args.runs, "kwire-startup-"))]
    if not args.no_tansu:
        try:
            rows.append(summary("subprocess: tansu (memory engine)",
                                process(tansu_process_factory(), args.runs, "tansu-startup-")))
        except Exception as exc:  # the reference is optional
            print(f"tansu skipped: {exc}", file=sys.stderr)
    width = max(len(r["name"]) for r in rows)
    print(f"{'start-up to accepting connections':{width}}  median     min      max   (runs)")
    for r in rows:
        print(f"{r['name']:{width}}  {r['median_ms']:6.1f}ms {r['min_ms']:6.1f}ms {r['max_ms']:7.1f}ms ({r['runs']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
