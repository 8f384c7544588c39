#!/usr/bin/env python
"""Noisy neighbour: what a producer_byte_rate quota on a flooding producer buys the other
clients of the broker.

    .venv/bin/python bench/quotas.py [--seconds 10] [--quota-mb 4] [--window-num 11]

One ``kwire serve`` process (kwire.testing.BrokerProcess, loopback, fresh data dir, stopped by
PID).  A *probe* client (librdkafka, acks=1, linger 0) sends 100-byte records at 1,000/s and
measures each record's produce-to-ack latency; a *flooder* (librdkafka, 1 KiB records, acks=1,
as fast as it can) writes another topic.  Each runs in a process of its own.  Three phases:

A. the probe alone;
B. the probe with the flooder unthrottled;
C. the probe with the flooder under ``producer_byte_rate=--quota-mb`` MB/s (set with
   AlterClientQuotas on the flooder's client id).  The broker keeps Kafka's default quota
   window (11 samples of 1 s): a new client may burst about 10 windows' worth before the
   quota bites, so phase C lets the flooder run --warmup seconds before measuring.

Phase C is measured over three quota windows by default: Kafka's windowed rate lets a client
whose window emptied send a window's worth at once, so a flooder under quota moves in bursts
of about ``(quota.window.num - 1) x quota`` bytes, one per window, and shorter measurements see
either a burst or none.  ``--window-num 2`` shows the same flooder with short windows.

Reported: the probe's p50/p99/max latency per phase, the flooder's acknowledged rate (record
bytes; the broker counts whole request bytes, ~1-2 % more) against its quota, and the
throttle-time responses it got.  Targets: probe p99 in C within 2x of A; flooder rate in C
within 10 % of the quota.

``--overhead`` also measures what the quota hook costs a broker that has no quota at all:
broker CPU per acks=1 Produce request (raw socket, one small batch each) with no quota
configured and with a quota configured for some other client (which switches the hook on).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE_RATE = 1000


def flooder(bootstrap: str, topic: str, seconds: float, measure_from: float, out) -> None:
    from confluent_kafka import Producer
    acked, throttles = [], []

    def delivered(err, msg):
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "flooder", "linger.ms": 5, "batch.size": 65536,
                  "queue.buffering.max.kbytes": 4096, "acks": 1,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    value = b"f" * 1024
    start = time.monotonic()
    end = start + seconds
    sent = 0
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=delivered)
            sent += 1
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    stopped = time.monotonic()
    p.flush(60)
    t0 = start + measure_from
    window = sum(size for at, size in acked if t0 <= at <= stopped)
    out.put({"rate": window / (stopped - t0), "sent": sent, "acked": len(acked),
             "throttles": sum(1 for t in throttles if t > 0)})


def probe(bootstrap: str, topic: str, seconds: float, measure_from: float, out) -> None:
    from confluent_kafka import Producer
    latencies = []
    start = time.monotonic()
    t0 = start + measure_from

    def delivered(err, msg, sent_at):
        if err is None and sent_at >= t0:
            latencies.append(time.monotonic() - sent_at)

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "probe", "linger.ms": 0, "acks": 1})
    value = b"p" * 100
    n = 0
    while True:
        due = start + n / PROBE_RATE
        now = time.monotonic()
        if due >= start + seconds:
            break
        if due > now:
            p.poll(due - now)
            continue
        sent_at = time.monotonic()
        p.produce(topic, value, on_delivery=lambda err, msg, s=sent_at: delivered(err, msg, s))
        p.poll(0)
        n += 1
    p.flush(30)
    latencies.sort()
    out.put({"n": len(latencies), "p50": latencies[len(latencies) // 2] * 1000,
             "p99": latencies[int(len(latencies) * 0.99)] * 1000, "max": latencies[-1] * 1000})


def run_phase(bootstrap: str, flood: bool, seconds: float, warmup: float) -> dict:
    # the previous phase's flood (about 1 GB) is written back first: otherwise the kernel's
    # dirty-page throttling stalls the broker's appends during this phase
    os.sync()
    ctx = mp.get_context("spawn")
    out_probe, out_flood = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=probe, args=(bootstrap, "probe", seconds + warmup, warmup, out_probe))]
    if flood:
        procs.append(ctx.Process(target=flooder, args=(bootstrap, "flood", seconds + warmup, warmup, out_flood)))
    for p in procs:
        p.start()
    result = {"probe": out_probe.get(timeout=seconds + warmup + 120)}
    if flood:
        result["flooder"] = out_flood.get(timeout=seconds + warmup + 120)
    for p in procs:
        p.join(30)
    return result


def set_quota(bootstrap: str, client_id: str, rate: float | None) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        request = R(entries=[R.EntryData(entity=[R.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
                                         ops=[R.EntryData.OpData(key="producer_byte_rate", value=float(rate or 0),
                                                                 remove=rate is None)])], validate_only=False)

        async def call():
            return await admin._manager.send(request)
        response = admin._manager.run(call)
        assert response.entries[0].error_code == 0, response
    finally:
        admin.close()


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


def hook_cost_ns() -> float:
    """ns per request of what the quota hook adds to a request when no quota exists: the
    ``quotas.active`` test in the connection and in the fetch path, and the mute test."""
    import timeit
    from kwire.services.quotas import QuotaService
    svc = QuotaService(None, None)
    holder = type("Conn", (), {})()
    holder.mute_ms = 0
    n = 1_000_000
    t = timeit.timeit("svc.active; svc.active; holder.mute_ms", globals={"svc": svc, "holder": holder}, number=n)
    return t / n * 1e9


def broker_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_cost_us(broker, requests: int) -> float:
    """Broker CPU per acks=1 Produce v9 request of one 100-byte record (raw socket)."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kwire.testing.cluster import recv_exactly
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"x" * 100, headers=[])
    batch = bytes(builder.build())
    P = ProduceRequest[9]
    request = P(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[P.TopicProduceData(
        name="overhead", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    request.with_header(correlation_id=1, client_id="overhead")
    frame = bytes(request.encode(framed=True, header=True))
    host, port = broker.bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    try:
        for _ in range(200):          # warm up, and create the topic
            s.sendall(frame)
            size = struct.unpack(">i", recv_exactly(s, 4))[0]
            recv_exactly(s, size)
        before = broker_cpu_s(broker.pid)
        for _ in range(requests):
            s.sendall(frame)
            size = struct.unpack(">i", recv_exactly(s, 4))[0]
            recv_exactly(s, size)
        return (broker_cpu_s(broker.pid) - before) / requests * 1e6
    finally:
        s.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds of phases A and B")
    parser.add_argument("--c-seconds", type=float, default=None,
                        help="measured seconds of phase C (default: three quota windows, at least --seconds)")
    parser.add_argument("--warmup", type=float, default=None,
                        help="seconds before measuring in phase C (default: two quota windows, so the "
                             "burst a new client is allowed has left the window)")
    parser.add_argument("--quota-mb", type=float, default=4.0, help="the flooder's producer_byte_rate, MB/s")
    parser.add_argument("--window-num", type=int, default=11, help="quota.window.num (Kafka's default 11)")
    parser.add_argument("--overhead", action="store_true", help="also measure the hook's cost with no quota")
    parser.add_argument("--requests", type=int, default=20000, help="Produce requests per overhead run")
    args = parser.parse_args(argv)
    from kwire.testing import BrokerProcess
    quota = args.quota_mb * 1_000_000
    broker = BrokerProcess(properties={"quota.window.num": args.window_num, "num.partitions": 1}).start()
    try:
        create_topics(broker.bootstrap, ["probe", "flood", "overhead"])
        if args.warmup is None:
            args.warmup = 2.0 * args.window_num + 3
        a = run_phase(broker.bootstrap, False, args.seconds, 3.0)
        b = run_phase(broker.bootstrap, True, args.seconds, 3.0)
        set_quota(broker.bootstrap, "flooder", quota)
        c_seconds = args.c_seconds or max(args.seconds, 3.0 * args.window_num)
        c = run_phase(broker.bootstrap, True, c_seconds, args.warmup)
        print(f"probe at {PROBE_RATE} msg/s, {args.seconds:.0f} s measured in A and B, {c_seconds:.0f} s in C "
              f"(after {args.warmup:.0f} s); quota.window.num={args.window_num}, quota.window.size.seconds=1")
        print(f"{'phase':<34}{'probe p50 ms':>13}{'p99 ms':>9}{'max ms':>9}{'flooder MB/s':>14}{'throttled':>10}")
        for name, r in (("A probe alone", a), ("B + flooder, no quota", b),
                        (f"C + flooder, quota {args.quota_mb:g} MB/s", c)):
            f = r.get("flooder")
            print(f"{name:<34}{r['probe']['p50']:>13.2f}{r['probe']['p99']:>9.2f}{r['probe']['max']:>9.1f}"
                  f"{'' if f is None else format(f['rate'] / 1e6, '.2f'):>14}{'' if f is None else f['throttles']:>10}")
        ratio = c["probe"]["p99"] / a["probe"]["p99"]
        off = c["flooder"]["rate"] / quota - 1
        print(f"probe p99 with the quota / alone: {ratio:.2f}x (target <= 2x); "
              f"flooder rate vs quota: {off:+.1%} (target within 10%)")
        for r in (b, c):
            assert r["flooder"]["acked"] == r["flooder"]["sent"], "flooder records lost"
        if args.overhead:
            set_quota(broker.bootstrap, "flooder", None)
            costs = []
            for label, other in (("no quota", False), ("a quota for another client", True),
                                 ("no quota", False), ("a quota for another client", True)):
                set_quota(broker.bootstrap, "someone-else", 1e9 if other else None)
                costs.append((label, produce_cost_us(broker, args.requests)))
            for label, us in costs:
                print(f"broker CPU per Produce request, {label}: {us:.1f} us")
            print(f"the hook's own work per request with no quota (timeit): {hook_cost_ns():.0f} ns")
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
