"""Transactions v1 against v2 at the protocol level: what KIP-890 part 2 saves a producer.

    python bench/transactions.py --protocol [--txns 2000] [--records-per-txn 10] [--no-tansu]

No stock client here speaks transactions v2 (librdkafka has no KIP-890; the Java 4.0 client
in ../shared/jars only reads the feature level), so the producer is a minimal synchronous
one written with kafka-python's protocol classes, one request at a time on one connection,
as a transactional client does at each transaction boundary:

  v1  AddPartitionsToTxn v3, Produce v11 (acks=all), EndTxn v4          3 round trips
  v2  Produce v12 (the leader adds the partition), EndTxn v5            2 round trips
      (the next transaction's epoch comes back in EndTxn's answer)

Each transaction carries ``--records-per-txn`` records of 1 KiB to a 1-partition topic.  kwire
runs v1, then v2 after ``transaction.version`` is upgraded to 2 (UpdateFeatures), in turns
over ``--rounds``; Tansu (the reference) runs v1.  Reported: transactions/s, the median and
p99 of one transaction's wall time, and the broker's CPU per transaction.
"""
from __future__ import annotations

import socket
import struct
import time

from kafka.protocol.admin import CreateTopicsRequest, UpdateFeaturesRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder


class Conn:
    """One socket; kafka-python's request classes; one request at a time."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def call(self, request):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="bench-txn-protocol")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        size, = struct.unpack(">i", self._recv(4))
        return request.header.get_response_class().decode(self._recv(size), header=True)


def batch(pid: int, epoch: int, sequence: int, n: int, value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 24)
    now = int(time.time() * 1000)
    for i in range(n):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def create_topic(bootstrap: str, topic: str) -> None:
    conn = Conn(bootstrap)
    try:
        R = CreateTopicsRequest[4]
        r = conn.call(R(topics=[R.CreatableTopic(name=topic, num_partitions=1, replication_factor=1,
                                                 assignments=[], configs=[])], timeout_ms=30_000, validate_only=False))
        if r.topics[0].error_code not in (0, 36):
            raise RuntimeError(f"CreateTopics {topic}: error {r.topics[0].error_code}")
    finally:
        conn.close()


def upgrade_to_tv2(bootstrap: str) -> None:
    conn = Conn(bootstrap)
    try:
        U = UpdateFeaturesRequest[1]
        r = conn.call(U(timeout_ms=10_000, validate_only=False, feature_updates=[
            U.FeatureUpdateKey(feature="transaction.version", max_version_level=2, upgrade_type=1)]))
        if r.error_code:
            raise RuntimeError(f"UpdateFeatures: error {r.error_code} {r.error_message}")
    finally:
        conn.close()


def _coordinator(conn: Conn, transactional_id: str, deadline: float) -> None:
    """Wait until the transaction coordinator answers (its topic is created on first use)."""
    while True:
        r = conn.call(FindCoordinatorRequest[1](key=transactional_id, key_type=1))
        if r.error_code == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"FindCoordinator: error {r.error_code}")
        time.sleep(0.2)


def run(bootstrap: str, topic: str, version: int, txns: int, per_txn: int, size: int = 1024,
        timeout_s: float = 300.0) -> dict:
    """``txns`` transactions of ``per_txn`` records, transactions v``version``'s requests."""
    tid = f"bench-v{version}-{topic}"
    conn = Conn(bootstrap)
    deadline = time.monotonic() + timeout_s
    try:
        _coordinator(conn, tid, deadline)
        while True:
            init = conn.call(InitProducerIdRequest[4](transactional_id=tid, transaction_timeout_ms=60_000,
                                                      producer_id=-1, producer_epoch=-1))
            if init.error_code == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"InitProducerId: error {init.error_code}")
            time.sleep(0.1)
        pid, epoch, sequence = init.producer_id, init.producer_epoch, 0
        value = b"x" * size
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        P = ProduceRequest[12 if version == 2 else 11]
        took = []
        started = time.perf_counter()
        for _ in range(txns):
            t0 = time.perf_counter()
            if version == 1:
                r = conn.call(AddPartitionsToTxnRequest[3](
                    v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch, v3_and_below_topics=[Topic(name=topic, partitions=[0])]))
                code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                if code:
                    raise RuntimeError(f"AddPartitionsToTxn: error {code}")
            r = conn.call(P(transactional_id=tid, acks=-1, timeout_ms=30_000, topic_data=[
                P.TopicProduceData(name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(
                    index=0, records=batch(pid, epoch, sequence, per_txn, value))])]))
            code = r.responses[0].partition_responses[0].error_code
            if code:
                raise RuntimeError(f"Produce v{P.API_VERSION}: error {code}")
            sequence += per_txn
            end = conn.call(EndTxnRequest[5 if version == 2 else 4](
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True))
            if end.error_code:
                raise RuntimeError(f"EndTxn: error {end.error_code}")
            if version == 2:            # the bumped epoch: the next transaction's, sequences from 0
                pid, epoch, sequence = end.producer_id, end.producer_epoch, 0
            took.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    took.sort()
    return {"version": version, "txns": txns, "records_per_txn": per_txn, "elapsed_s": round(elapsed, 3),
            "txns_per_s": round(txns / elapsed, 1), "p50_ms": round(took[len(took) // 2] * 1000, 3),
            "p99_ms": round(took[min(len(took) - 1, int(len(took) * 0.99))] * 1000, 3),
            "round_trips_per_txn": 2 if version == 2 else 3}
