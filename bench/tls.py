"""TLS benchmark: produce and consume over an SSL listener against a PLAINTEXT one, and handshakes.

    .venv/bin/python bench/tls.py [--records 200000] [--repeat 3] [--warm-mib 1024] [--data-dir-on DIR]

One ``kwire serve`` process with a PLAINTEXT and an SSL listener (a CA and
certificate made for the run, tests/support/certs.py), on loopback, started
through bench/tls_broker.py, which counts the CPU time the broker spends
decrypting:

1. Produce 1 KiB records with librdkafka (confluent-kafka, acks=1) through each
   listener; the ratio SSL/PLAINTEXT is the cost of TLS (target: >= 0.60).
2. Consume them back from the beginning (assign mode) through each listener.
3. Full TLS handshakes per second (new connection, handshake, close) with the
   stdlib client, sequentially.

Plaintext fetches go out with sendfile(2); TLS cannot, so an SSL fetch reads
each slice with pread and encrypts it in the broker.  Prints a table and the
ratios; no pass/fail (this is not a timed test).

Where the time goes: for each produce run, the CPU seconds of the client (this
process: the Python loop and librdkafka's threads), of the broker, and of the
broker's decryption.  Client and broker share the machine's cores, so when both
are busy the throughput ratio follows the ratio of their CPU seconds per record;
the last lines give that ratio, and what it would be if the broker's TLS cost
were nothing but decryption, or nothing at all.
"""
from __future__ import annotations

import argparse
import os
import resource
import socket
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import host_memory  # noqa: E402
from bench.tls_broker import read_counters  # noqa: E402
from kwire.testing.process import BrokerProcess, free_port  # noqa: E402
from tests.support.certs import CertificateAuthority  # noqa: E402

VALUE = b"x" * 1024


def produce(config: dict, topic: str, records: int) -> float:
    producer = Producer({**config, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000})
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: records left unacknowledged")
    return records / (time.perf_counter() - started)


def consume(config: dict, topic: str, records: int) -> float:
    consumer = Consumer({**config, "group.id": f"bench-{topic}-{time.monotonic_ns()}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition(topic, 0, 0)])
    started, got = time.perf_counter(), 0
    while got < records:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                got += 1
    rate = records / (time.perf_counter() - started)
    consumer.close()
    return rate


class CountingBroker(BrokerProcess):
    """kwire serve through bench/tls_broker.py: its decryption time goes to ``counters``."""

    def __init__(self, *args, counters: Path, **kwargs):
        super().__init__(*args, **kwargs)
        self.counters = counters

    def command(self) -> list[str]:
        python, _, _, *rest = super().command()            # python -m kwire serve ...
        return [python, str(Path(__file__).with_name("tls_broker.py")), str(self.counters), *rest]


def own_cpu_seconds() -> float:
    """User + system CPU time of this process, all its threads (librdkafka's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def handshakes_per_second(port: int, truststore: str, seconds: float = 3.0) -> float:
    context = ssl.create_default_context(cafile=truststore)
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        with socket.create_connection(("127.0.0.1", port)) as raw:
            with context.wrap_socket(raw, server_hostname="localhost"):
                count += 1
    return count / (time.perf_counter() - started)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir-on", metavar="DIR", default=None,
                        help="make the broker's temporary directory under DIR, e.g. /dev/shm (tmpfs) to take "
                             "the disk out of the comparison")
    parser.add_argument("--warm-mib", type=int, default=1024,
                        help="MiB of memory touched and freed before each timed run (bench/host_memory.py; 0: none)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kwire-bench-tls-", dir=args.data_dir_on) as tmp:
        server = CertificateAuthority().server_files(Path(tmp))
        ports = {"PLAINTEXT": free_port(), "SSL": free_port()}
        counters = Path(tmp) / "decrypt-counters"
        broker = CountingBroker(Path(tmp) / "data", port=ports["PLAINTEXT"], properties={
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
            **server.kafka_properties("PEM")}, args=["--log-level", "WARNING"], counters=counters)
        with broker:
            configs = {"PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
                       "SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
                               "ssl.ca.location": str(server.truststore)}}
            runs: dict[str, list[float]] = {}
            cpu: dict[str, list[float]] = {}      # "broker|client|decrypt NAME": CPU seconds per produce run
            admin = AdminClient(configs["PLAINTEXT"])
            for i in range(args.repeat):
                # PLAINTEXT first on even repeats, SSL first on odd ones: neither side always
                # runs second, into the write-back of the first one's 200 MB
                for name in (list(configs) if i % 2 == 0 else list(configs)[::-1]):
                    config = configs[name]
                    topic = f"tls-{name.lower()}-{i}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    os.sync()   # every run starts with no dirty pages from the runs before it
                    host_memory.warm(args.warm_mib)
                    before = cpu_seconds(broker.pid), own_cpu_seconds(), read_counters(counters)[0]
                    runs.setdefault(f"produce {name}", []).append(produce(config, topic, args.records))
                    after = cpu_seconds(broker.pid), own_cpu_seconds(), read_counters(counters)[0]
                    for part, spent in zip(("broker", "client", "decrypt"), (a - b for a, b in zip(after, before))):
                        cpu.setdefault(f"{part} {name}", []).append(spent)
                    host_memory.warm(args.warm_mib)
                    runs.setdefault(f"consume {name}", []).append(consume(config, topic, args.records))
            handshakes = handshakes_per_second(ports["SSL"], str(server.truststore))
    m = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{'workload, 1 KiB records (records/s, median of %d)' % args.repeat:<52} {'PLAINTEXT':>12} {'SSL':>12} {'ratio':>7}")
    for op in ("produce", "consume"):
        print(f"{op:<52} {m[f'{op} PLAINTEXT']:>12,.0f} {m[f'{op} SSL']:>12,.0f} "
              f"{m[f'{op} SSL'] / m[f'{op} PLAINTEXT']:>7.2f}")
    c = {k: statistics.median(v) for k, v in cpu.items()}
    for part, label in (("client", "client CPU-s per produce run (median)"),
                        ("broker", "broker CPU-s per produce run (median)"),
                        ("decrypt", "  of which decrypting TLS records")):
        print(f"{label:<52} {c[f'{part} PLAINTEXT']:>12.2f} {c[f'{part} SSL']:>12.2f}")
    print("runs: " + "; ".join(f"{k} " + ", ".join(f"{v:,.0f}" for v in vs) for k, vs in runs.items()))
    # each SSL run against the PLAINTEXT run of the same repeat: the spread the medians hide
    for op in ("produce", "consume"):
        paired = sorted(t / p for t, p in zip(runs[f"{op} SSL"], runs[f"{op} PLAINTEXT"]))
        print(f"{op} ratio per repeat: median {statistics.median(paired):.2f}, "
              f"range {paired[0]:.2f}-{paired[-1]:.2f} ({', '.join(f'{r:.2f}' for r in paired)})")
    # both processes busy on the same cores: throughput follows CPU seconds per record
    plain = c["client PLAINTEXT"] + c["broker PLAINTEXT"]
    print(f"CPU ratio (client + broker, PLAINTEXT / SSL): {plain / (c['client SSL'] + c['broker SSL']):.2f}; "
          f"if the broker's TLS cost were only decryption: "
          f"{plain / (c['client SSL'] + c['broker PLAINTEXT'] + c['decrypt SSL']):.2f}; "
          f"if it were nothing: {plain / (c['client SSL'] + c['broker PLAINTEXT']):.2f}")
    print(f"{'TLS handshakes per second (one client, sequential)':<52} {handshakes:>12,.0f}")
    print("target: TLS produce >= 0.60 of plaintext")
    return 0


if __name__ == "__main__":
    sys.exit(main())
