"""Idempotent producers idle while others fill many segments are still recognised after a
restart (issue 28, item 3): a retry gets its original offsets, a skipped sequence gets
OUT_OF_ORDER_SEQUENCE_NUMBER, and every record is read back exactly once.

Produce requests go over a raw socket with kafka-python's protocol classes so the producer
id, epoch and base sequence of every batch are ours to choose (a stock client would never
resend a batch after a restart on purpose)."""
from __future__ import annotations

import collections
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.integration.test_transactions_protocol import Conn as TxnConn

pytestmark = pytest.mark.clients

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
SEGMENT_BYTES = 1 << 20
FILL_BYTES = 9 << 19                     # 4.5 MiB
FILL_RECORD = 16 << 10
FILL_PER_BATCH = 16                      # 256 KiB batches


class Conn(TxnConn):
    """The transaction protocol tests' connection, plus what this test sends."""

    def close(self):
        self.sock.close()

    def producer_id(self) -> tuple[int, int]:
        r = self.call(InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=-1))
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    def produce(self, topic: str, records: bytes):
        R = ProduceRequest[8]
        r = self.call(R(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
            R.TopicProduceData(name=topic, partition_data=[
                R.TopicProduceData.PartitionProduceData(index=0, records=records)])]))
        return r.responses[0].partition_responses[0]


def batch(pid: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=pid, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 24)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def small(pid: int, epoch: int, sequence: int) -> bytes:
    return batch(pid, epoch, sequence, [b"old-%d-%d" % (pid, sequence + i) for i in range(3)])


def read_values(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values, deadline = [], time.monotonic() + 15
    try:
        while len(values) < expect and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                values.append(m.value())
        for m in c.consume(100, 0.3):        # nothing after what was expected
            values.append(m.value())
    finally:
        c.close()
    return values


def assert_retries_recognised(bootstrap: str, topic: str, sent: dict, end: int) -> None:
    """Every batch in ``sent`` ({(pid, epoch, base sequence): base offset}) resent: answered
    with its base offset; then the first producer skips a sequence (refused) and sends its
    next batch, which must land at ``end`` (nothing was appended meanwhile)."""
    conn = Conn(bootstrap)
    try:
        for (pid, epoch, seq), base in sent.items():
            r = conn.produce(topic, small(pid, epoch, seq))
            assert (r.error_code, r.base_offset) == (0, base), (pid, seq)
        pid, epoch, _ = next(iter(sent))
        following = max(seq for p, _, seq in sent if p == pid) + 3
        skipped = conn.produce(topic, small(pid, epoch, following + 3))
        assert skipped.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        r = conn.produce(topic, small(pid, epoch, following))
        assert (r.error_code, r.base_offset) == (0, end)
        sent[pid, epoch, following] = end
    finally:
        conn.close()


def test_idempotent_retries_after_restart_and_kill(fresh_broker):
    b = fresh_broker(properties={"log.segment.bytes": SEGMENT_BYTES})
    topic = f"idem-restart-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10)[topic].result(15)
    conn = Conn(b.bootstrap)
    producers = [conn.producer_id() for _ in range(3)]
    sent = {}
    for seq in (0, 3):
        for pid, epoch in producers:
            r = conn.produce(topic, small(pid, epoch, seq))
            assert r.error_code == 0
            sent[pid, epoch, seq] = r.base_offset
    filler_pid, filler_epoch = conn.producer_id()
    pad = b"f" * FILL_RECORD
    fill_records = 0
    for i in range(FILL_BYTES // (FILL_RECORD * FILL_PER_BATCH)):
        r = conn.produce(topic, batch(filler_pid, filler_epoch, fill_records, [pad] * FILL_PER_BATCH))
        assert r.error_code == 0, r
        fill_records += FILL_PER_BATCH
    conn.close()
    end = 18 + fill_records

    b.stop()                                    # a clean restart
    b.start()
    assert_retries_recognised(b.bootstrap, topic, sent, end)
    end += 3

    b.kill()                                    # kill -9: recovery, then the rebuild
    b.start()
    assert_retries_recognised(b.bootstrap, topic, sent, end)
    end += 3

    values = read_values(b.bootstrap, topic, end)
    assert len(values) == end
    counts = collections.Counter(v for v in values if v.startswith(b"old-"))
    assert set(counts.values()) == {1} and len(counts) == 18 + 6
    assert sum(1 for v in values if v == pad) == fill_records
