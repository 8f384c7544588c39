#!/usr/bin/env python
"""The Schema Registry's request rate, and what broker-side schema validation costs a producer.

    .venv/bin/python bench/schema_registry.py [--quick] [--seconds 5] [--no-tansu]

One ``kwire serve`` process with ``schema.registry.listeners`` (bench/run.py's Broker: loopback,
fresh data dir, stopped by PID), and Tansu (memory engine) as the reference for the same
produce workloads without validation.

1. **Registry requests/s**: ``--clients`` threads, each on one keep-alive HTTP connection, for
   ``--seconds`` each: GET /schemas/ids/{id} (what a deserializer asks once per id), POST
   /subjects/{s} (the lookup a serializer makes with auto.register.schemas=false) and POST
   /subjects/{s}/versions of an already registered schema (auto.register.schemas=true, the
   default: answered without a write).  New registrations (each a write to _schemas) are
   measured separately with one client.
2. **Produce with validation**: bench/run.py's W1 (100 B records, acks=1, 1 partition) and W2
   (1 KiB, acks=all, 6 partitions) with a Confluent-framed Avro record (the same bytes each
   time, so the client's cost is the same in every mode), to topics with
   ``confluent.value.schema.validation`` off, on with ``kwire.schema.validation.decode=false``
   (Confluent's check: framing, a registered id under the subject) and on with decode (the
   record must decode against its schema).  Ratios against "off" are the cost; "off" against
   Tansu places the workload.  The modes run in turn, ``--rounds`` times, and the medians
   are reported with the broker's CPU per record, which a busy machine disturbs least.
   W1-mixed is W1 with 11 record sizes (60-130 B) in turn: a
   batch of one size is checked as a whole (kwire.schemas.record_reader.field_runs), a mixed
   one record by record, so it shows the per-record cost.

Reported as tables; ``--json PATH`` writes everything.
"""
from __future__ import annotations

import argparse
import http.client
import io
import json
import struct
import sys
import threading
import time
import types
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fastavro  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import run as bench_run  # noqa: E402
from kwire.testing.process import free_port, wait_port  # noqa: E402

SCHEMA = {"type": "record", "name": "Click", "namespace": "bench",
          "fields": [{"name": "user", "type": "long"}, {"name": "page", "type": "string"},
                     {"name": "ts", "type": "long"}]}
MODES = {"off": {}, "id": {"confluent.value.schema.validation": "true", "kwire.schema.validation.decode": "false"},
         "decode": {"confluent.value.schema.validation": "true", "kwire.schema.validation.decode": "true"}}


def framed(schema_id: int, size: int) -> bytes:
    """A Confluent-framed Avro Click of exactly ``size`` bytes."""
    parsed = fastavro.parse_schema(SCHEMA)
    for pad in range(size, 0, -1):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"user": 123456789, "page": "p" * pad, "ts": 1_700_000_000_000})
        data = b"\x00" + struct.pack(">I", schema_id) + out.getvalue()
        if len(data) <= size:
            return data
    raise ValueError(size)


def http_json(url: str, method: str, path: str, body=None):
    host, port = url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    response = conn.getresponse()
    data = json.loads(response.read() or b"null")
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: {response.status} {data}")
    return data


def request_rate(url: str, method: str, path: str, body, clients: int, seconds: float) -> dict:
    """Requests/s and latency of ``clients`` keep-alive connections repeating one request."""
    host, port = url.split("//", 1)[1].split(":")
    payload = None if body is None else json.dumps(body)
    stop = time.monotonic() + seconds
    counts, latencies, errors = [0] * clients, [[] for _ in range(clients)], [0] * clients

    def loop(i: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            conn.request(method, path, body=payload,
                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
            response = conn.getresponse()
            response.read()
            latencies[i].append(time.perf_counter() - t0)
            if response.status == 200:
                counts[i] += 1
            else:
                errors[i] += 1
        conn.close()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    every = sorted(x for lat in latencies for x in lat)
    pick = (lambda q: round(every[min(len(every) - 1, int(q * len(every)))] * 1000, 2)) if every else (lambda q: None)
    return {"requests_per_s": round(sum(counts) / elapsed, 1), "errors": sum(errors), "p50_ms": pick(0.5),
            "p99_ms": pick(0.99)}


def registrations(url: str, seconds: float) -> dict:
    """New subjects registered one after another (each one a write to _schemas)."""
    stop, done, t0 = time.monotonic() + seconds, 0, time.monotonic()
    while time.monotonic() < stop:
        http_json(url, "POST", f"/subjects/bench-new-{uuid.uuid4().hex[:8]}/versions",
                  {"schema": json.dumps(SCHEMA)})
        done += 1
    return {"registrations_per_s": round(done / (time.monotonic() - t0), 1)}


def produce(broker, topic: str, spec: dict, payload: bytes | None, timeout_s: float) -> dict:
    kwargs = dict(bootstrap=broker.bootstrap, topic=topic, count=spec["count"], size=spec["size"],
                  acks=spec["acks"], partitions=spec["partitions"], timeout_s=timeout_s,
                  create="existing" if payload is not None else "required", payload=payload,
                  log_path=str(broker.client_log))
    return bench_run._measure(broker, "1", ("produce_throughput", kwargs))


def create(bootstrap: str, name: str, partitions: int, configs: dict) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})      # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def run(args) -> dict:
    run_dir = Path(bench_run.__file__).parent / "results" / f"schema-registry-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    scale = 10 if args.quick else 1
    specs = {"W1": dict(count=1_000_000 // scale, size=100, acks=1, partitions=1),
             "W1-mixed": dict(count=1_000_000 // scale, size=100, acks=1, partitions=1, mixed=True),
             "W2": dict(count=200_000 // scale, size=1024, acks="all", partitions=6)}
    out: dict = {"params": vars(args), "registry": {}, "produce": {}}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    opts = types.SimpleNamespace(kwire_arg=["--override", f"schema.registry.listeners={url}"],
                                 tansu_bin=args.tansu_bin, start_timeout=60, keep_data=False)
    kwire, _ = bench_run.start_broker("kwire", opts, run_dir, [])
    wait_port("127.0.0.1", port, timeout=30)
    try:
        schema_id = http_json(url, "POST", "/subjects/clicks-value/versions", {"schema": json.dumps(SCHEMA)})["id"]
        body = {"schema": json.dumps(SCHEMA)}
        reg = out["registry"]
        reg["get_schema_by_id"] = request_rate(url, "GET", f"/schemas/ids/{schema_id}", None, args.clients, args.seconds)
        reg["lookup"] = request_rate(url, "POST", "/subjects/clicks-value", body, args.clients, args.seconds)
        reg["register_existing"] = request_rate(url, "POST", "/subjects/clicks-value/versions", body,
                                                args.clients, args.seconds)
        reg["register_new"] = registrations(url, args.seconds)
        for name, spec in specs.items():
            payload = framed(schema_id, spec["size"])
            if spec.pop("mixed", False):        # sizes size-40 .. size+40: records of varying layout
                payload = [framed(schema_id, spec["size"] - 40 + n) for n in range(0, 81, 7)]
            for mode, configs in MODES.items():
                topic = f"clicks-{name.lower()}-{mode}"
                http_json(url, "POST", f"/subjects/{topic}-value/versions", {"schema": json.dumps(SCHEMA)})
                create(kwire.bootstrap, topic, spec["partitions"], configs)
            for round_ in range(args.rounds):   # modes in turn: a busy machine slows them alike
                for mode in MODES:
                    res = produce(kwire, f"clicks-{name.lower()}-{mode}", spec, payload, args.timeout)
                    out["produce"].setdefault(f"kwire {name} {mode}", []).append(res)
                    print(f"kwire {name} validation={mode} round {round_ + 1}: "
                          f"{res['metrics'].get('records_per_s')} rec/s broker CPU "
                          f"{res['metrics'].get('broker_cpu_s')} s {'' if res['ok'] else res['error']}", flush=True)
    finally:
        kwire.stop()
    if not args.no_tansu:
        tansu, _ = bench_run.start_broker("tansu", opts, run_dir, [])
        try:
            for name, spec in specs.items():
                if name.endswith("-mixed"):
                    continue                    # Tansu does not validate: its W1 is the reference
                res = produce(tansu, f"clicks-{name.lower()}", spec, None, args.timeout)
                out["produce"][f"tansu {name}"] = [res]
                print(f"tansu {name}: {res['metrics'].get('records_per_s')} rec/s", flush=True)
        finally:
            tansu.stop()
    return out


def median_of(results: list, key: str) -> float | None:
    values = sorted(r["metrics"][key] for r in results if r.get("ok") and r["metrics"].get(key) is not None)
    return values[len(values) // 2] if values else None


def report(out: dict) -> str:
    lines = ["Schema Registry (kwire), keep-alive HTTP clients:"]
    for name, r in out["registry"].items():
        lines.append(f"  {name:20} {json.dumps(r)}")
    lines.append("Produce: median records/s over the rounds, the ratio to validation off, and the broker's "
                 "CPU per record (median):")
    produce = out["produce"]
    for w in ("W1", "W1-mixed", "W2"):
        count = None
        off = median_of(produce.get(f"kwire {w} off", []), "records_per_s")
        for mode in MODES:
            results = produce.get(f"kwire {w} {mode}", [])
            rate, cpu = median_of(results, "records_per_s"), median_of(results, "broker_cpu_s")
            count = next((r["metrics"].get("records") for r in results if r.get("ok")), count)
            ratio = f"x{rate / off:.2f}" if rate and off else "-"
            per_record = f"{cpu / count * 1e6:.2f} us/record" if cpu is not None and count else "-"
            lines.append(f"  kwire {w:8} validation={mode:6} {rate} rec/s  {ratio}  broker {per_record}")
        t = median_of(produce.get(f"tansu {w}", []), "records_per_s")
        if t and off:
            lines.append(f"  tansu {w:8} (no validation)  {t} rec/s; kwire off/tansu x{off / t:.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a tenth of the records (a smoke run)")
    p.add_argument("--seconds", type=float, default=5.0, help="per registry measurement")
    p.add_argument("--clients", type=int, default=4, help="concurrent registry clients")
    p.add_argument("--rounds", type=int, default=3, help="runs of each validation mode, in turn")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--no-tansu", action="store_true", help="skip the reference broker")
    p.add_argument("--tansu-bin", default=None)
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args(argv)
    out = run(args)
    text = report(out)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    ok = all(r.get("ok", True) for results in out["produce"].values() for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
