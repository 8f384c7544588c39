"""Corruption at rest: reported loudly, only its partition goes offline, and crash recovery
never cuts acknowledged data written after a batch that was already corrupt."""
import glob
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.support.broker import BrokerProcess
from tests.support.measure import produce_one_record_batches

pytestmark = pytest.mark.clients
HEADER_SIZE = 61


def produce(bootstrap, topic, items, **conf):
    """Produce (partition, value) one-record batches; returns ({(p, offset): value}, [errors])."""
    return produce_one_record_batches(bootstrap, topic, items, flush_s=30,
                                      **{"message.timeout.ms": 10000, **conf})


def consume(bootstrap, topic, partition, start, *, fetch_bytes=1 << 20, timeout=15):
    """(offset -> value) read from ``start`` until idle, and the errors seen."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "corrupt", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": fetch_bytes, "fetch.error.backoff.ms": 100})
    c.assign([TopicPartition(topic, partition, start)])
    got, errors, idle = {}, [], 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and idle < 6:
        m = c.poll(0.5)
        if m is None:
            idle += 1
        elif m.error():
            errors.append(m.error().code())
            idle += 1
        else:
            idle = 0
            got[m.offset()] = m.value()
    c.close()
    return got, errors


def batch_starts(path):
    """File positions of the batches of a segment file."""
    data, out, at = open(path, "rb").read(), [], 0
    while at + 12 <= len(data):
        out.append(at)
        at += int.from_bytes(data[at + 8:at + 12], "big") + 12
    return out


def flip_record_byte(path, batch_index):
    position = batch_starts(path)[batch_index] + HEADER_SIZE + 3
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x40]))
    return batch_starts(path)[batch_index]


def wait_for(predicate, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_corrupt_closed_segment_reported_and_only_that_partition_offline(tmp_path):
    b = BrokerProcess(str(tmp_path), **{"num.partitions": "3", "log.segment.bytes": "1500"})
    b.start()
    try:
        topic = f"rot-{uuid.uuid4().hex[:6]}"
        acked, errors = produce(b.bootstrap, topic,
                                [(p, b"v-%d-%03d" % (p, i)) for i in range(60) for p in range(3)])
        assert len(acked) == 180 and not errors
        b.stop()
        segments = sorted(glob.glob(os.path.join(b.data_dir, "logs", f"{topic}-0", "*.log")))
        assert len(segments) >= 3
        position = flip_record_byte(segments[1], 2)          # a closed segment
        b.start()
        assert wait_for(lambda: "corrupt data at rest" in b.log_text()), b.log_text()[-3000:]
        text = b.log_text()
        assert f"{segments[1]} at file position {position}: CRC mismatch" in text
        assert "ERROR" in text

        _, produce_errors = produce(b.bootstrap, topic, [(0, b"rejected")])
        assert produce_errors == [KafkaError.KAFKA_STORAGE_ERROR]
        got, _ = consume(b.bootstrap, topic, 0, 0, timeout=4)
        assert got == {}                # librdkafka retries fetch storage errors silently
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "meta"})
        with pytest.raises(KafkaException) as err:
            c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        assert err.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR
        meta = c.list_topics(topic, timeout=10).topics[topic].partitions
        assert meta[0].error.code() == KafkaError.KAFKA_STORAGE_ERROR
        assert meta[1].error is None and meta[2].error is None
        c.close()

        more, errors = produce(b.bootstrap, topic, [(1, b"new-1"), (2, b"new-2")])
        assert len(more) == 2 and not errors
        for p in (1, 2):
            got, errs = consume(b.bootstrap, topic, p, 0)
            assert not errs and len(got) == 61
            assert got[60] == b"new-%d" % p
    finally:
        b.close()


def test_kill_9_keeps_acknowledged_data_after_a_corrupt_batch(tmp_path):
    b = BrokerProcess(str(tmp_path))
    b.start()
    try:
        topic = f"rot9-{uuid.uuid4().hex[:6]}"
        acked, errors = produce(b.bootstrap, topic, [(0, b"old-%04d" % i) for i in range(300)])
        assert len(acked) == 300 and not errors
        b.stop()                                           # clean: checkpoints the recovery point
        [segment] = glob.glob(os.path.join(b.data_dir, "logs", f"{topic}-0", "*.log"))
        corrupt = 100
        flip_record_byte(segment, corrupt)                 # at rest, below the recovery point
        b.start()
        more, errors = produce(b.bootstrap, topic, [(0, b"new-%04d" % i) for i in range(700)])
        assert len(more) == 700 and not errors
        acked.update(more)
        b.kill()
        b.start()
        after, errs = consume(b.bootstrap, topic, 0, corrupt + 1)
        before, _ = consume(b.bootstrap, topic, 0, 0, fetch_bytes=1)   # one batch per fetch
        read = {**before, **after}
        expected = {o: v for (_, o), v in acked.items() if o != corrupt}
        lost = [o for o, v in expected.items() if read.get(o) != v]
        print(f"\nkill -9 after corruption: acknowledged={len(acked)} "
              f"(1 of them corrupted at rest) read={len(read)} lost={len(lost)}")
        assert not errs and not lost and len(read) == 999
        assert "CRC mismatch" in b.log_text()          # the damaged batch was reported
    finally:
        b.close()
