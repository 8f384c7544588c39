#!/usr/bin/env python
"""Cluster request cost: broker CPU per produce request on a three-broker kwire cluster.

    python bench/cluster_request_cost.py [--repeat 3] [--requests 10000] [--connections 4]

Starts ZooKeeper and three brokers (``kwire.testing.cluster``), creates one RF=1 topic led
by broker 1 and one RF=3 topic led by broker 1, and sends the same Produce v7 request (10
records of 100 B) over raw connections, one after another on each: acks=1 to the RF=1 topic,
acks=all to the RF=3 one.  Before each measurement it warms memory (``host_memory.warm``,
this VM backs free memory lazily).  Prints, per measurement, the leader's and each
follower's CPU (from /proc) per request and the request rate; no pass/fail.

Its use: comparing two versions of kwire on the replicated produce path, where throughput
benchmarks are too noisy on two cores.  Run it from the tree to measure; for an older tree
(one with ``kwire.testing.cluster``), put that tree's packages first on the path of this
interpreter and of the brokers it starts (they inherit the environment).  Alternate which version goes first and compare medians:
on this VM the same code varies by ±20 % between runs.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka.protocol.producer import ProduceRequest  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from host_memory import warm  # noqa: E402
from request_cost import _round_trips as round_trips  # noqa: E402  (one connection's request loop)

from kwire.testing.cluster import ClusterProcess  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_frame(topic: str, acks: int, records: int = 10, size: int = 100) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(records):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=b"x" * size, headers=[])
    R = ProduceRequest[7]
    request = R(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))])])
    request.with_header(correlation_id=1, client_id="kwire-bench")
    return bytes(request.encode(header=True, framed=True))


def measure(cluster, topic: str, acks: int, requests: int, connections: int) -> tuple[list[float], float]:
    """(µs of CPU per request for brokers 1, 2, 3; requests per second)."""
    host, port = cluster.broker(1).bootstrap.rsplit(":", 1)
    address, frame = (host, int(port)), produce_frame(topic, acks)
    round_trips(address, 300, frame)                   # connection set-up, first-call costs
    pids = [cluster.broker(i).pid for i in (1, 2, 3)]
    before, started = [cpu_seconds(p) for p in pids], time.monotonic()
    threads = [threading.Thread(target=round_trips, args=(address, requests // connections, frame))
               for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    return [(cpu_seconds(p) - b) / requests * 1e6 for p, b in zip(pids, before)], requests / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--warm-mib", type=int, default=1024)
    args = parser.parse_args(argv)
    with ClusterProcess(3) as cluster:
        cluster.wait_until_ready()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic("rf1", 1, replica_assignment=[[1]]),
                                           NewTopic("rf3", 1, replica_assignment=[[1, 2, 3]])]).values():
            future.result(30)
        time.sleep(3)                                  # the followers join the ISR
        for _ in range(args.repeat):
            for topic, acks in (("rf1", 1), ("rf3", -1)):
                warm(args.warm_mib)
                per, rate = measure(cluster, topic, acks, args.requests, args.connections)
                print(f"{topic} acks={acks}: leader {per[0]:.0f} µs/request, followers {per[1]:.0f}+{per[2]:.0f}, "
                      f"{rate:.0f} requests/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
