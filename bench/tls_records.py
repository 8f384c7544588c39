#!/usr/bin/env python
"""Which TLS records librdkafka writes when it produces over an SSL listener.

    python bench/tls_records.py [--records 50000] [--size 1024] [--config key=value ...]

One ``kwire serve`` with an SSL listener (a CA made for the run) whose advertised
address is a relay in this process: the relay passes bytes both ways unchanged and
reads the 5-byte header of every TLS record the client sends (type, version,
length).  A confluent-kafka producer with tls.py's settings (acks=1, linger.ms=5,
batch.size 1 MiB; ``--config`` adds or overrides librdkafka properties) produces
``--records`` values of ``--size`` bytes.  Prints how many application-data records
there were, their mean size, and the most common sizes.

Why it matters: the broker decrypts record by record, and OpenSSL's cost per record
is nearly the same for 10 bytes as for 1 KiB (bench/README.md, "TLS benchmark"), so
the ratio TLS/PLAINTEXT depends on how the client cuts its stream into records,
which the broker cannot choose.
"""
from __future__ import annotations

import argparse
import collections
import socket
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kwire.testing.process import BrokerProcess, free_port  # noqa: E402
from tests.support.certs import CertificateAuthority  # noqa: E402

APPLICATION_DATA = 23


class RecordCounter:
    """Counts the TLS records of the client-to-broker direction, by content type and length."""

    def __init__(self):
        self.sizes: collections.Counter = collections.Counter()
        self._pending = bytearray()
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            pending = self._pending
            pending += data
            position = 0
            while len(pending) - position >= 5:
                length = int.from_bytes(pending[position + 3:position + 5], "big")
                if len(pending) - position < 5 + length:
                    break
                self.sizes[(pending[position], 5 + length)] += 1
                position += 5 + length
            del pending[:position]


def _pump(source: socket.socket, sink: socket.socket, counter: RecordCounter | None) -> None:
    try:
        while data := source.recv(1 << 20):
            sink.sendall(data)
            if counter is not None:
                counter.feed(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _relay(listener: socket.socket, target: int, counter: RecordCounter) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return                                  # closed: the run is over
        try:
            upstream = socket.create_connection(("127.0.0.1", target))
        except OSError:                             # the broker is gone: the run is over
            client.close()
            continue
        threading.Thread(target=_pump, args=(client, upstream, counter), daemon=True).start()
        threading.Thread(target=_pump, args=(upstream, client, None), daemon=True).start()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka producer property (repeatable)")
    args = ap.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.config)
    counter = RecordCounter()
    with tempfile.TemporaryDirectory(prefix="kwire-bench-tls-records-") as tmp, \
            socket.create_server(("127.0.0.1", 0)) as listener:
        relay_port = listener.getsockname()[1]
        plain_port, ssl_port = free_port(), free_port()
        server = CertificateAuthority().server_files(Path(tmp))
        broker = BrokerProcess(Path(tmp) / "data", port=plain_port, properties={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{relay_port}",
            **server.kafka_properties("PEM")}, args=["--log-level", "WARNING"])
        with broker:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
            admin.create_topics([NewTopic("tls-records", 1, 1)])["tls-records"].result(30)
            threading.Thread(target=_relay, args=(listener, ssl_port, counter), daemon=True).start()
            producer = Producer({"bootstrap.servers": f"127.0.0.1:{relay_port}", "security.protocol": "SSL",
                                 "ssl.ca.location": str(server.truststore), "acks": "1", "linger.ms": 5,
                                 "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000, **extra})
            value = b"x" * args.size
            for _ in range(args.records):
                while True:
                    try:
                        producer.produce("tls-records", value)
                        break
                    except BufferError:
                        producer.poll(0.01)
            if producer.flush(120):
                raise SystemExit("records left unacknowledged")
    data = {size: n for (kind, size), n in counter.sizes.items() if kind == APPLICATION_DATA}
    count, total = sum(data.values()), sum(size * n for size, n in data.items())
    print(f"{args.records:,} values of {args.size} bytes: {count:,} application-data TLS records, "
          f"{total:,} bytes, mean {total / max(count, 1):,.0f} bytes per record "
          f"({count / args.records:.2f} records per value)")
    print("most common record sizes (bytes on the wire, 5-byte header included: count):")
    for size, n in sorted(data.items(), key=lambda item: -item[1])[:8]:
        print(f"  {size:>6}: {n:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
