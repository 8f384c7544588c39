"""Acknowledged data survives kill -9; recovery truncates torn tails and keeps the valid prefix."""
import glob
import os
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.support.broker import BrokerProcess


def produce_acked(bootstrap, topic, n, **conf):
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, **conf})
    for i in range(n):
        p.produce(topic, value=f"rec-{i}".encode(),
                  on_delivery=lambda err, msg: err is None and acked.append(msg.offset()))
        if i % 500 == 0:
            p.poll(0)
    p.flush(30)
    return acked


def read_all(bootstrap, topic, timeout=20):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout
    idle = 0
    while time.monotonic() < deadline and idle < 4:
        m = c.poll(0.5)
        if m is None:
            idle += 1
            continue
        idle = 0
        assert m.error() is None, m.error()
        out.append((m.offset(), m.value()))
    c.close()
    return out


@pytest.mark.parametrize("flush", ["9223372036854775807", "1"], ids=["os-flush", "fsync-each"])
def test_kill_9_loses_nothing_acknowledged(tmp_path, flush):
    b = BrokerProcess(str(tmp_path), **{"log.flush.interval.messages": flush, "log.segment.bytes": "200000"})
    b.start()
    try:
        topic = f"dur-{uuid.uuid4().hex[:6]}"
        acked = produce_acked(b.bootstrap, topic, 5000)
        assert len(acked) == 5000
        b.kill()
        b.start()
        got = read_all(b.bootstrap, topic)
        assert [o for o, _ in got] == list(range(5000))
        assert [v for _, v in got] == [f"rec-{i}".encode() for i in range(5000)]
        assert "recovered" in b.log_text()
    finally:
        b.close()


def test_torn_tail_truncated_valid_prefix_kept(tmp_path):
    b = BrokerProcess(str(tmp_path))
    b.start()
    try:
        topic = f"torn-{uuid.uuid4().hex[:6]}"
        produce_acked(b.bootstrap, topic, 1000, **{"batch.num.messages": 100})
        b.kill()
        [log] = glob.glob(os.path.join(b.data_dir, "logs", f"{topic}-0", "*.log"))
        size = os.path.getsize(log)
        with open(log, "r+b") as f:   # tear the last batch and add junk
            f.truncate(size - 7)
            f.seek(0, 2)
            f.write(b"\x00garbage\xff" * 3)
        b.start()
        got = read_all(b.bootstrap, topic)
        offsets = [o for o, _ in got]
        assert offsets == list(range(len(offsets))) and 800 <= len(offsets) < 1000
        assert glob.glob(os.path.join(b.data_dir, "logs", f"{topic}-0", "*.corrupt*")), "cut bytes kept aside"
        # the log accepts new records right after the valid prefix
        produce_acked(b.bootstrap, topic, 10)
        got = read_all(b.bootstrap, topic)
        assert [o for o, _ in got] == list(range(len(offsets) + 10))
    finally:
        b.close()


def test_clean_restart_keeps_everything(tmp_path):
    b = BrokerProcess(str(tmp_path))
    b.start()
    try:
        topic = f"clean-{uuid.uuid4().hex[:6]}"
        produce_acked(b.bootstrap, topic, 300)
        assert b.stop() == 0
        assert os.path.exists(os.path.join(b.data_dir, "logs", ".kwire_cleanshutdown"))
        b.start()
        assert len(read_all(b.bootstrap, topic)) == 300
        assert "recovered" not in b.log_text().split("kwire stopped cleanly")[-1]
    finally:
        b.close()
