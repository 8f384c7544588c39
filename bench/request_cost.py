#!/usr/bin/env python
"""Request cost: broker CPU per minimal request round trip, kwire against Tansu.

    python bench/request_cost.py [--brokers kwire,tansu] [--requests 20000] [--connections 8]

Each broker is started with run.py's helpers (free 127.0.0.1 port, fresh data
directory, stopped by PID).  Client threads, one connection each, send
Metadata v1 with an empty topic list (the smallest request every broker
answers: a broker list and no topics) one after another, each waiting for its
answer, and the broker's CPU time (from /proc) is divided by the request count.

This is the floor under every request a client sends: reading and framing,
decoding the header and body, dispatching, encoding and sending the answer.
A workload that needs several round trips per unit of work (a transaction:
AddPartitionsToTxn, Produce, EndTxn) cannot cost the broker less than that
many floors; bench/README.md ("Request cost") uses it to bound what the
transactions benchmark's T6 can reach.  Prints a table; no pass/fail.
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from kafka.protocol.metadata import MetadataRequest  # noqa: E402

from kwire.testing.cluster import recv_exactly  # noqa: E402

from run import log, parse_brokers, start_broker  # noqa: E402


def _request_bytes() -> bytes:
    request = MetadataRequest[1](topics=[])
    request.with_header(correlation_id=1, client_id="kwire-bench")
    return bytes(request.encode(header=True, framed=True))


def _round_trips(address: tuple[str, int], count: int, frame: bytes) -> None:
    with socket.create_connection(address, timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            sock.sendall(frame)
            recv_exactly(sock, struct.unpack(">i", recv_exactly(sock, 4))[0])


def measure(broker, requests: int, connections: int) -> dict:
    host, port = broker.bootstrap.rsplit(":", 1)
    address, frame = (host, int(port)), _request_bytes()
    _round_trips(address, 200, frame)                 # warm-up: connection set-up, first-call costs
    per_thread = requests // connections
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _round_trips(address, per_thread, frame)
        except BaseException as exc:                  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(connections)]
    cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, cpu = time.perf_counter() - t0, broker.cpu_seconds() - cpu0
    if errors:
        raise RuntimeError(f"{broker.name}: {errors[0]!r}")
    done = per_thread * connections
    return {"requests": done, "elapsed_s": elapsed, "broker_cpu_s": cpu,
            "wall_us": elapsed / done * 1e6, "cpu_us": cpu / done * 1e6, "per_s": done / elapsed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="kwire,tansu")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--start-timeout", type=float, default=60.0)
    ap.add_argument("--tansu-bin")
    ap.add_argument("--kwire-arg", action="append", default=[])
    ap.add_argument("--keep-data", action="store_true")
    args = ap.parse_args(argv)
    brokers = parse_brokers(ap, args.brokers)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kwire-bench-requests-") as tmp:
        for name in brokers:
            broker, out = start_broker(name, args, Path(tmp), ["requests"])
            if broker is None:
                log(f"{name}: not measured: {out['error']}")
                continue
            try:
                results[name] = measure(broker, args.requests, args.connections)
            finally:
                broker.stop()
            r = results[name]
            log(f"{name}: {r['requests']} requests in {r['elapsed_s']:.2f} s, broker CPU {r['broker_cpu_s']:.2f} s")
    print(f"\nMetadata v1 (no topics), {args.connections} connections, one request in flight on each")
    print(f"{'broker':<8} {'requests/s':>11} {'wall us/request':>16} {'broker CPU us/request':>22}")
    for name, r in results.items():
        print(f"{name:<8} {r['per_s']:>11,.0f} {r['wall_us']:>16.1f} {r['cpu_us']:>22.1f}")
    if len(results) == 2:
        (a, ra), (b, rb) = results.items()
        print(f"broker CPU per request {a}/{b}: {ra['cpu_us'] / rb['cpu_us']:.2f}; "
              f"requests/s {a}/{b}: {ra['per_s'] / rb['per_s']:.2f}")
    return 0 if len(results) == len(brokers) else 1


if __name__ == "__main__":
    sys.exit(main())
