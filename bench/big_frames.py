"""Peak broker memory with many concurrent large Produce requests.

Starts ``kwire serve`` in a process of its own, sends N valid Produce
requests of about SIZE MB each at the same time (one raw socket per request,
acks=1, one record batch holding one large record), waits for every
response and reports the broker's peak resident set size (VmHWM from
/proc/PID/status) before and after the burst::

    python bench/big_frames.py                      # 20 frames of 100 MB
    python bench/big_frames.py --frames 4 --size-mb 20 --property queued.max.request.bytes=-1

The topic is created with ``max.message.bytes`` raised and the broker with
``socket.request.max.bytes`` and ``message.max.bytes`` raised so the frames
are accepted.  Every request must be answered with error 0, else exit 1.
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.protocol.producer import ProduceRequest, ProduceResponse  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.measure import process_memory  # noqa: E402

TOPIC = "big-frames"


def produce_frame(size: int, correlation_id: int = 1) -> bytes:
    """A framed Produce v7 request (acks=1) carrying one batch with one ``size``-byte record."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=size + 1024)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v" * size, headers=[])
    batch = bytes(builder.build())
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
    req = ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=60000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[part])])
    req.with_header(correlation_id=correlation_id, client_id="big-frames")
    return bytes(req.encode(header=True, framed=True))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def send_one(bootstrap: str, frame: bytes, results: list, index: int) -> None:
    host, port = bootstrap.split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=600) as s:
            s.sendall(frame)
            (size,) = struct.unpack(">i", recv_exact(s, 4))
            body = recv_exact(s, size)
            resp = ProduceResponse[7].decode(body[4:])
            results[index] = resp.responses[0].partition_responses[0].error_code
    except Exception as exc:  # reported in the summary
        results[index] = repr(exc)


def create_topic(bootstrap: str, max_message_bytes: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={
            "max.message.bytes": str(max_message_bytes)})])
    finally:
        admin.close()


def run(frames: int, size: int, properties: dict[str, str]) -> dict:
    limit = size + 1024 * 1024
    overrides = {"socket.request.max.bytes": str(max(limit, 104857600)), "message.max.bytes": str(limit)}
    overrides.update(properties)
    broker = BrokerProcess(**{k.replace(".", "_"): v for k, v in overrides.items()}).start()
    try:
        create_topic(broker.bootstrap, limit)
        frame = produce_frame(size)
        idle = process_memory(broker.proc.pid)
        results: list = [None] * frames
        threads = [threading.Thread(target=send_one, args=(broker.bootstrap, frame, results, i))
                   for i in range(frames)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        after = process_memory(broker.proc.pid)
    finally:
        broker.close()
    return {"frames": frames, "frame_bytes": len(frame), "idle_rss": idle["VmRSS"],
            "peak_rss": after["VmHWM"], "seconds": elapsed, "results": results}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="extra broker property (repeatable)")
    args = parser.parse_args(argv)
    props = dict(p.split("=", 1) for p in args.property)
    size = int(args.size_mb * 1_000_000) - 200    # the whole frame stays under size-mb MB
    out = run(args.frames, size, props)
    mb = 1024 * 1024
    print(f"{out['frames']} concurrent Produce frames of {out['frame_bytes'] / mb:.1f} MiB "
          f"({', '.join(f'{k}={v}' for k, v in props.items()) or 'default settings'})")
    print(f"broker RSS idle {out['idle_rss'] / mb:.0f} MiB, peak (VmHWM) {out['peak_rss'] / mb:.0f} MiB "
          f"(+{(out['peak_rss'] - out['idle_rss']) / out['frame_bytes']:.2f} x one frame); "
          f"all answered in {out['seconds']:.1f} s")
    failed = [r for r in out["results"] if r != 0]
    if failed:
        print(f"FAILED: {len(failed)} requests: {failed[:5]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
