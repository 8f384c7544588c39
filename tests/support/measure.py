"""Counting helpers shared by fault tests and benchmarks: what was acknowledged, what memory a process holds."""
from __future__ import annotations

from confluent_kafka import Producer


def produce_one_record_batches(bootstrap: str, topic: str, items, *, flush_s: float = 60,
                               **conf) -> tuple[dict, list]:
    """Produce each (partition, value) as its own batch with acks=all and no retries.

    Returns ({(partition, offset): value} of what was acknowledged, [error codes of what was not]),
    so a fault test can count acknowledged, read back and lost records exactly.
    """
    acked, errors = {}, []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0,
                  "batch.num.messages": 1, "enable.idempotence": False,
                  "message.timeout.ms": 15000, **conf})

    def done(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            errors.append(err.code())
    for partition, value in items:
        p.produce(topic, value=value, partition=partition, on_delivery=done)
        p.poll(0)
    p.flush(flush_s)
    return acked, errors


def process_memory(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of process ``pid``, in bytes, from /proc."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out
