"""Cluster benchmark: replicated produce throughput and failover time.

    .venv/bin/python bench/cluster.py [--records 300000] [--repeat 5] [--warm-mib 2048]

In one run, on one ZooKeeper-coordinated three-broker kwire cluster (loopback):

1. Produce throughput of 1 KiB records with librdkafka (confluent-kafka), to a
   topic with replication factor 1 and to one with replication factor 3 and
   acks=all, with the same producer (idempotent or not; with one replica
   acks=all waits for nothing more than acks=1); the ratio RF=3/RF=1 is the
   cost of replication (target: >= 0.5 on 2 cores).
2. Failover after kill -9 of a partition leader: time from the kill to the first
   successful acks=all produce to that partition (target: <= session timeout + 2 s).
3. Failover after a controlled shutdown (SIGTERM) of the leader: the same time
   (target: <= 1 s).

    .venv/bin/python bench/cluster.py --sustained [--seconds 60] [--producers 40] [--repeat 1]

instead runs only the sustained load (issue 28), on a cluster of its own whose brokers have
replica.lag.time.max.ms=3000: 40 confluent-kafka producers, each its own Producer instance
(own connections), spread over 4-8 processes, send acks=all, linger.ms=0, 1 KiB records as
fast as they can to a 1-partition RF=3 topic with min.insync.replicas=2, then the same load
to an RF=1 topic (the order alternates over --repeat).  Reports records/s acknowledged, ISR
shrinks (the state znode sampled every 0.1 s with kazoo, and the brokers' "ISR [..] -> [..]"
log lines; target 0), NOT_ENOUGH_REPLICAS / _AFTER_APPEND errors in the delivery callbacks
(target 0) and the RF=3/RF=1 ratio.  Every process it starts is ended by PID on exit.

Prints a table and the ratios; no pass/fail (this is not a timed test).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import host_memory  # noqa: E402
from kwire.testing.cluster import ClusterProcess  # noqa: E402

VALUE = b"x" * 1024
# (name, topic, acks, enable.idempotence): the same producer on RF=1 and RF=3 is the cost of
# replication; idempotence (the Java client's default) also caps in-flight requests at 5.
PRODUCERS = [("RF=1 acks=1", "rf1", "1", False),
             ("RF=3 acks=all", "rf3", "all", False),
             ("RF=1 acks=all idempotent", "rf1", "all", True),
             ("RF=3 acks=all idempotent", "rf3", "all", True)]
SESSION_MS = 6000


def create(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(30)


def leader_of(cluster, topic: str, partition: int) -> int:
    return cluster.metadata()["topics"][topic][partition]["leader"]


def wait_full_isr(cluster, topic: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parts = cluster.metadata()["topics"].get(topic, {})
        if parts and all(len(p["isr"]) == len(p["replicas"]) for p in parts.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: ISR not full after {timeout} s")


def throughput(bootstrap: str, topic: str, records: int, acks: str, idempotent: bool) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                         "enable.idempotence": idempotent})
    done = [0]

    def report(err, _msg):
        if err is None:
            done[0] += 1
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if done[0] != records:
        raise RuntimeError(f"{topic}: only {done[0]} of {records} acknowledged")
    return records / elapsed


def failover_seconds(cluster, topic: str, graceful: bool) -> float:
    """Kill (or SIGTERM) partition 0's leader; time until an acks=all produce to it succeeds."""
    victim = leader_of(cluster, topic, 0)
    others = ",".join(cluster.broker(b).bootstrap for b in (1, 2, 3) if b != victim)
    producer = Producer({"bootstrap.servers": others, "acks": "all", "message.timeout.ms": 60000,
                         "retry.backoff.ms": 20, "retry.backoff.max.ms": 50,
                         "topic.metadata.refresh.interval.ms": 100})
    producer.produce(topic, b"warm", partition=0)
    producer.flush(30)
    started = time.monotonic()
    if graceful:
        cluster.stop(victim)
    else:
        cluster.kill(victim)
    result = []
    producer.produce(topic, b"after", partition=0, on_delivery=lambda err, msg: result.append(err))
    producer.flush(60)
    elapsed = time.monotonic() - started
    if not result or result[0] is not None:
        raise RuntimeError(f"produce after failover failed: {result}")
    cluster.start_broker(victim)
    wait_full_isr(cluster, topic)
    return elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 20,000 records made a 40 ms run whose ratio swung from 0.49 to 0.86; 300,000 take about 1 s
    parser.add_argument("--records", type=int, default=300000)
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs of each kind (default 5; 1 with --sustained, where RF=3 and RF=1 alternate)")
    parser.add_argument("--no-failover", action="store_true", help="throughput only")
    # an RF=3 run puts about 1.2 GB of new pages in use (three copies, the client's buffers)
    parser.add_argument("--warm-mib", type=int, default=2048,
                        help="MiB of memory touched and freed before each run (bench/host_memory.py; 0: none)")
    sus = parser.add_argument_group("sustained load (--sustained: only this, on a cluster of its own)")
    sus.add_argument("--sustained", action="store_true",
                     help="acks=all load from many producers on an RF=3 (min.insync.replicas=2) and an RF=1 "
                          "partition: records/s, ISR shrinks, NOT_ENOUGH_REPLICAS errors")
    sus.add_argument("--seconds", type=float, default=60, help="seconds of load per run (default 60)")
    sus.add_argument("--producers", type=int, default=40, help="Producer instances, one connection each (default 40)")
    sus.add_argument("--workers", type=int, default=None,
                     help="processes the producers are spread over (default: 10 producers each, 4 to 8)")
    sus.add_argument("--queue-messages", type=int, default=1000,
                     help="queue.buffering.max.messages of each producer (default 1000, 1 MiB)")
    sus.add_argument("--retries", type=int, default=0,
                     help="producer retries (default 0: every failed produce reaches the delivery callback)")
    sus.add_argument("--message-timeout-ms", type=int, default=30000)
    sus.add_argument("--drain", type=float, default=30,
                     help="seconds the producers may take to flush after the load (then purged)")
    parser.add_argument("--sustained-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from bench import cluster_sustained      # here: it imports this module's helpers
    if args.sustained_worker:
        return cluster_sustained.sustained_worker(json.loads(args.sustained_worker))
    if args.sustained:
        if args.seconds < 1 or args.producers < 1:
            parser.error("--seconds must be at least 1 and --producers at least 1")
        args.repeat = args.repeat or 1
        args.workers = args.workers or min(8, max(4, -(-args.producers // 10)))
        args.workers = max(1, min(args.workers, args.producers))
        return cluster_sustained.sustained(args)
    args.repeat = args.repeat or 5
    with ClusterProcess(3, properties={"zookeeper.session.timeout.ms": SESSION_MS,
                                "auto.leader.rebalance.enable": "false"}) as cluster:
        create(cluster.bootstrap, "rf1", 3, 1)
        create(cluster.bootstrap, "rf3", 3, 3)
        wait_full_isr(cluster, "rf3")
        runs: dict[str, list[float]] = {name: [] for name, *_ in PRODUCERS}
        for _ in range(args.repeat):
            for name, topic, acks, idempotent in PRODUCERS:
                os.sync()       # no write-back of the runs before this one during it
                host_memory.warm(args.warm_mib)
                runs[name].append(throughput(cluster.bootstrap, topic, args.records, acks, idempotent))
        kill = [] if args.no_failover else [failover_seconds(cluster, "rf3", graceful=False) for _ in range(2)]
        term = [] if args.no_failover else [failover_seconds(cluster, "rf3", graceful=True) for _ in range(2)]
    m = {name: statistics.median(v) for name, v in runs.items()}
    print(f"{'workload, 1 KiB records (records/s)':<52} {'median':>12}")
    for name, *_ in PRODUCERS:
        print(f"{name:<52} {m[name]:>12,.0f}")
    print(f"{'ratio RF=3/RF=1, idempotent acks=all both (>= 0.50)':<52} "
          f"{m['RF=3 acks=all idempotent'] / m['RF=1 acks=all idempotent']:>12.2f}")
    print(f"{'ratio RF=3/RF=1, not idempotent (>= 0.50)':<52} "
          f"{m['RF=3 acks=all'] / m['RF=1 acks=1']:>12.2f}")
    print(f"{'ratio RF=3 acks=all idempotent / RF=1 acks=1':<52} "
          f"{m['RF=3 acks=all idempotent'] / m['RF=1 acks=1']:>12.2f}")
    # each RF=3 run against the RF=1 run of the same repeat: the spread the medians hide
    for label, rf3, rf1 in (("idempotent", "RF=3 acks=all idempotent", "RF=1 acks=all idempotent"),
                            ("not idempotent", "RF=3 acks=all", "RF=1 acks=1")):
        paired = sorted(a / b for a, b in zip(runs[rf3], runs[rf1]))
        print(f"ratio per repeat, {label}: median {statistics.median(paired):.2f}, "
              f"range {paired[0]:.2f}-{paired[-1]:.2f} ({', '.join(f'{r:.2f}' for r in paired)})")
    if args.no_failover:
        return 0
    print(f"{'failover after kill -9 (s, target <= %.1f)' % (SESSION_MS / 1000 + 2):<44} "
          f"{max(kill):>12.2f}   runs: {', '.join(f'{k:.2f}' for k in kill)}")
    print(f"{'failover after SIGTERM (s, target <= 1.0)':<44} "
          f"{max(term):>12.2f}   runs: {', '.join(f'{t:.2f}' for t in term)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
