"""Transactions at the protocol level, against a real broker process.

Admin reads: DescribeTransactions (65), ListTransactions (66) and DescribeProducers (61)
are read with kafka-python's protocol classes over a socket while confluent-kafka's
transactional Producer drives real transactions.  confluent-kafka's AdminClient (2.16) has
no list/describe transactions call (librdkafka implements neither); Apache Kafka's Java
Admin has them all and reads kwire's answers in one test (skipped without java), and a
three-broker ZooKeeper cluster checks who answers what (skipped without ZooKeeper).

Bad input: requests a well-behaved client never sends (an EndTxn with nothing open, stale
epochs, foreign producer ids, unknown partitions, out-of-order sequences...), each
answered with Kafka's error code, after which the broker goes on serving: every such test
ends with ``assert_still_serving`` (the same connection answers, and a stock producer and
a read_committed consumer round-trip records on a new topic).
"""
from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka.protocol.admin import (
    DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest, UpdateFeaturesRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest,
    TxnOffsetCommitRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.codecs.errors import ErrorCode as E
from tests.integration.test_transactions import create, name, read, send_all, txn_producer, values

pytestmark = pytest.mark.clients


class Conn:
    """One socket, kafka-python's protocol classes, request then response (header-aware, so
    flexible versions decode too)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation_id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return buf

    def call(self, request):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="txn-protocol-test")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        size, = struct.unpack(">i", self._recv(4))
        response = request.header.get_response_class().decode(self._recv(size), header=True)
        assert response.header.correlation_id == self.correlation_id
        return response

    # -- the transactional APIs, v3 unless asked ----------------------------------------
    def init(self, transactional_id: str, timeout_ms: int = 60_000, version: int = 1):
        extra = {"producer_id": -1, "producer_epoch": -1} if version >= 3 else {}
        return self.call(InitProducerIdRequest[version](transactional_id=transactional_id,
                                                       transaction_timeout_ms=timeout_ms, **extra))

    def add_partitions(self, transactional_id: str, pid: int, epoch: int, topics: dict, version: int = 3):
        """{(topic, partition): error code} of one AddPartitionsToTxn."""
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        r = self.call(AddPartitionsToTxnRequest[version](
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[Topic(name=t, partitions=ps) for t, ps in topics.items()]))
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    def add_offsets(self, transactional_id: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        return self.call(AddOffsetsToTxnRequest[version](transactional_id=transactional_id, producer_id=pid,
                                                         producer_epoch=epoch, group_id=group)).error_code

    def end_txn(self, transactional_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
        return self.call(EndTxnRequest[version](transactional_id=transactional_id, producer_id=pid,
                                                producer_epoch=epoch, committed=commit)).error_code

    def produce(self, topic: str, partition: int, records: bytes, transactional_id: str | None = None):
        R = ProduceRequest[8]
        r = self.call(R(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
            R.TopicProduceData(name=topic, partition_data=[
                R.TopicProduceData.PartitionProduceData(index=partition, records=records)])]))
        return r.responses[0].partition_responses[0]

    # -- the admin reads ----------------------------------------------------------------
    def describe(self, *transactional_ids: str) -> list:
        return self.call(DescribeTransactionsRequest[0](transactional_ids=list(transactional_ids))).transaction_states

    def listed(self, states=(), pids=(), duration: int | None = None):
        if duration is None:
            return self.call(ListTransactionsRequest[0](state_filters=list(states), producer_id_filters=list(pids)))
        return self.call(ListTransactionsRequest[1](state_filters=list(states), producer_id_filters=list(pids),
                                                    duration_filter=duration))

    def producers(self, topic: str, partitions) -> dict[int, object]:
        r = self.call(DescribeProducersRequest[0](topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=list(partitions))]))
        return {p.partition_index: p for p in r.topics[0].partitions}

    def last_stable_offset(self, topic: str, partition: int) -> int:
        R = ListOffsetsRequest[2]
        r = self.call(R(replica_id=-1, isolation_level=1, topics=[R.ListOffsetsTopic(name=topic, partitions=[
            R.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
        part = r.topics[0].partitions[0]
        assert part.error_code == 0, part
        return part.offset


def txn_batch(pid: int, epoch: int, sequence: int, n: int = 3, *, transactional: bool = True,
              label: str = "raw") -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                        batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i in range(n):
        builder.append(i, timestamp=now, key=None, value=f"{label}-{sequence + i}".encode(), headers=[])
    return bytes(builder.build())


def produce_v12(conn: Conn, tid: str, topic: str, partition: int, records: bytes):
    """Transactions v2's Produce: no AddPartitionsToTxn before it."""
    R = ProduceRequest[12]
    r = conn.call(R(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[
            R.TopicProduceData.PartitionProduceData(index=partition, records=records)])]))
    return r.responses[0].partition_responses[0]


def end_v5(conn: Conn, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    """(error code, producer id, producer epoch) of an EndTxn v5."""
    r = conn.call(EndTxnRequest[5](transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit))
    return r.error_code, r.producer_id, r.producer_epoch


def upgrade_to_tv2(conn: Conn) -> None:
    U = UpdateFeaturesRequest[1]
    r = conn.call(U(timeout_ms=10_000, validate_only=False, feature_updates=[
        U.FeatureUpdateKey(feature="transaction.version", max_version_level=2, upgrade_type=1)]))
    assert r.error_code == 0, r


def finalized_tv(conn: Conn) -> int:
    r = conn.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    return {f.name: f.max_version_level for f in r.finalized_features}.get("transaction.version", 0)


def assert_still_serving(bootstrap: str, conn: Conn | None = None) -> None:
    """The connection that sent bad input still answers, and stock clients still round-trip."""
    if conn is not None:
        assert conn.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1")).error_code == 0
    topic = name("after")
    create(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    send_all(producer, topic, values("ok", 5))
    assert read(bootstrap, topic, committed=True, expect=5) == values("ok", 5)


def rows(listing) -> set[tuple[str, int, str]]:
    assert listing.error_code == 0, listing
    return {(s.transactional_id, s.producer_id, s.transaction_state) for s in listing.transaction_states}


# -- DescribeTransactions, ListTransactions, DescribeProducers ---------------------------------

def test_describe_and_list_transactions_follow_a_confluent_producer(broker):
    topic, tid = name("desc"), name("tid")
    create(broker.bootstrap, topic, partitions=2)
    with Conn(broker.bootstrap) as conn:
        producer = txn_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 45_000})
        d, = conn.describe(tid)
        assert (d.error_code, d.transaction_state, d.transaction_timeout_ms, d.topics) == (0, "Empty", 45_000, [])
        pid, epoch = d.producer_id, d.producer_epoch
        assert rows(conn.listed(pids=[pid])) == {(tid, pid, "Empty")}

        before = int(time.time() * 1000)
        producer.begin_transaction()
        for p in (0, 1):
            send_all(producer, topic, values(f"p{p}", 10), partition=p)
        d, = conn.describe(tid)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(topic, [0, 1])]
        assert before <= d.transaction_start_time_ms <= int(time.time() * 1000)
        time.sleep(0.05)
        assert rows(conn.listed(states=["Ongoing"], pids=[pid], duration=0)) == {(tid, pid, "Ongoing")}
        assert rows(conn.listed(states=["Ongoing"], pids=[pid], duration=3_600_000)) == set()
        listing = conn.listed(states=["Ongoing", "NoSuchState"], pids=[pid])
        assert list(listing.unknown_state_filters) == ["NoSuchState"]

        # the partitions' view of the same transaction: it starts at the first record of each
        for p, state in conn.producers(topic, [0, 1]).items():
            assert state.error_code == 0
            assert [(s.producer_id, s.producer_epoch, s.current_txn_start_offset, s.last_sequence)
                    for s in state.active_producers] == [(pid, epoch, 0, 9)]

        producer.commit_transaction(30)
        d, = conn.describe(tid)
        assert (d.transaction_state, d.topics) == ("CompleteCommit", [])
        for p, state in conn.producers(topic, [0, 1]).items():
            s, = state.active_producers
            assert (s.current_txn_start_offset, s.coordinator_epoch >= 0) == (-1, True)

        producer.begin_transaction()
        send_all(producer, topic, values("aborted", 3))
        producer.abort_transaction(30)
        assert conn.describe(tid)[0].transaction_state == "CompleteAbort"

        txn_producer(broker.bootstrap, tid)                # fences the first producer
        d, = conn.describe(tid)
        assert (d.producer_id, d.producer_epoch, d.transaction_state) == (pid, epoch + 1, "Empty")

        unknown, empty = conn.describe(name("never-used"), "")
        assert (unknown.error_code, empty.error_code) == (E.TRANSACTIONAL_ID_NOT_FOUND, E.INVALID_REQUEST)
    assert sorted(read(broker.bootstrap, topic, committed=True, expect=20, partitions=(0, 1))) == sorted(
        values("p0", 10) + values("p1", 10))


def test_describe_producers_reports_an_idempotent_producers_last_batch(broker):
    topic = name("idem")
    create(broker.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 20})
    send_all(producer, topic, values("idem", 30))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("r"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    last = None
    while last is None or last.offset() < 29:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None
        last = msg
    consumer.close()
    with Conn(broker.bootstrap) as conn:
        state = conn.producers(topic, [0, 1, 2])
        assert [p.error_code for p in state.values()] == [0, 0, E.UNKNOWN_TOPIC_OR_PARTITION]
        assert state[1].active_producers == []
        s, = state[0].active_producers
        assert (s.last_sequence, s.last_timestamp, s.coordinator_epoch, s.current_txn_start_offset) == (
            29, last.timestamp()[1], -1, -1)


def test_a_write_to_a_partition_never_added_is_refused_and_hangs_nothing(broker):
    """As Kafka 3.6+ (transaction.partition.verification.enable, KIP-890 part 1): the first
    transactional batch of a producer in a partition is checked with the coordinator, and a
    partition the transaction never added answers INVALID_TXN_STATE.  Taking it would open a
    transaction there that no marker ends (the coordinator does not know the partition),
    holding the last stable offset for good."""
    topic, tid = name("hang"), name("tid")
    create(broker.bootstrap, topic, partitions=2)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        assert conn.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 0), tid).error_code == 0
        assert conn.produce(topic, 1, txn_batch(pid, epoch, 0, label="hung"), tid).error_code == \
            E.INVALID_TXN_STATE                         # never added
        assert conn.produce(topic, 1, txn_batch(pid, epoch + 1, 0, label="hung"), tid).error_code == \
            E.INVALID_PRODUCER_EPOCH                    # an epoch the coordinator never gave
        assert conn.end_txn(tid, pid, epoch, commit=True) == 0
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        send_all(plain, topic, values("later", 4), partition=1)
        assert conn.producers(topic, [1])[1].active_producers == []
        assert conn.last_stable_offset(topic, 1) == 4
    assert read(broker.bootstrap, topic, committed=True, expect=4, partitions=(1,)) == values("later", 4)
    assert [v.decode() for v in read(broker.bootstrap, topic, committed=True, expect=3)] == [
        "raw-0", "raw-1", "raw-2"]



JAVA_ADMIN = """
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;

/** kafka-transactions.sh's calls through the Java Admin: describe, list, describe-producers, abort. */
public class TxnAdminProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            if (args[0].equals("describe")) {
                String tid = args[2], topic = args[3];
                for (TransactionListing l : admin.listTransactions().all().get())
                    System.out.println("LIST " + l.transactionalId() + " " + l.producerId() + " " + l.state());
                ListTransactionsOptions ongoing = new ListTransactionsOptions()
                    .filterStates(List.of(TransactionState.ONGOING)).filterOnDuration(0);
                for (TransactionListing l : admin.listTransactions(ongoing).all().get())
                    System.out.println("ONGOING " + l.transactionalId());
                TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
                System.out.println("DESC " + d.state() + " " + d.producerId() + " " + d.producerEpoch() + " "
                    + d.transactionTimeoutMs() + " " + d.topicPartitions().size());
                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < Integer.parseInt(args[4]); p++) tps.add(new TopicPartition(topic, p));
                for (Map.Entry<TopicPartition, DescribeProducersResult.PartitionProducerState> e
                        : admin.describeProducers(tps).all().get().entrySet())
                    for (ProducerState s : e.getValue().activeProducers())
                        System.out.println("PROD " + e.getKey().partition() + " " + s.producerId() + " "
                            + s.producerEpoch() + " " + s.lastSequence() + " " + s.coordinatorEpoch().orElse(-1)
                            + " " + s.currentTransactionStartOffset().orElse(-1));
            } else {
                TopicPartition tp = new TopicPartition(args[2], Integer.parseInt(args[3]));
                admin.abortTransaction(new AbortTransactionSpec(tp, Long.parseLong(args[4]),
                    Short.parseShort(args[5]), Integer.parseInt(args[6]))).all().get();
            }
            System.out.println("DONE");
        }
    }
}
"""


def run_java_admin(tmp_path, *args) -> list[str]:
    """Compile and run ``TxnAdminProbe *args``; its stdout lines (the last one is DONE)."""
    import subprocess

    from tests.support.java import java_available, start_java, stop
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    sources = tmp_path / "java"
    sources.mkdir(exist_ok=True)
    (sources / "TxnAdminProbe.java").write_text(JAVA_ADMIN)
    proc = start_java("TxnAdminProbe", *args, sources=sources, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        stop(proc)
    lines = out.splitlines()
    assert proc.returncode == 0 and lines[-1:] == ["DONE"], f"TxnAdminProbe {args[0]}: {lines[-5:]}\n{err[-3000:]}"
    return lines


def test_the_java_admin_client_describes_lists_and_aborts_transactions(broker, tmp_path):
    """Apache Kafka's own Admin (4.0) reads kwire's answers: listTransactions (every broker),
    describeTransactions (through FindCoordinator), describeProducers (the leader), and
    abortTransaction (WriteTxnMarkers to the leader) ends a hanging transaction."""
    topic, tid = name("jadmin"), name("tid")
    create(broker.bootstrap, topic, partitions=2)
    producer = txn_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 45_000})
    producer.begin_transaction()
    for p in (0, 1):
        send_all(producer, topic, values(f"p{p}", 4), partition=p)
    with Conn(broker.bootstrap) as conn:
        d, = conn.describe(tid)
    pid, epoch = d.producer_id, d.producer_epoch
    time.sleep(0.05)
    lines = run_java_admin(tmp_path, "describe", broker.bootstrap, tid, topic, 2)
    assert f"LIST {tid} {pid} Ongoing" in lines and f"ONGOING {tid}" in lines
    assert f"DESC Ongoing {pid} {epoch} 45000 2" in lines
    assert sorted(line for line in lines if line.startswith("PROD")) == [
        f"PROD {p} {pid} {epoch} 3 -1 0" for p in (0, 1)]
    producer.commit_transaction(30)

    # an open transaction's partition aborted the way kafka-transactions.sh abort does it
    # (WriteTxnMarkers to the partition's leader), as for a transaction left hanging
    hang, htid = name("jhang"), name("tid")
    create(broker.bootstrap, hang)
    hanging = txn_producer(broker.bootstrap, htid, **{"transaction.timeout.ms": 45_000})
    hanging.begin_transaction()
    send_all(hanging, hang, values("h", 3))
    with Conn(broker.bootstrap) as conn:
        d, = conn.describe(htid)
        hpid, hepoch = d.producer_id, d.producer_epoch
        lines = run_java_admin(tmp_path, "describe", broker.bootstrap, htid, hang, 1)
        assert any(line.startswith(f"PROD 0 {hpid} {hepoch} ") and line.endswith(" 0") for line in lines), lines
        run_java_admin(tmp_path, "abort", broker.bootstrap, hang, 0, hpid, hepoch, 0)
        assert [s.current_txn_start_offset for s in conn.producers(hang, [0])[0].active_producers] == [-1]
        assert conn.last_stable_offset(hang, 0) == 4              # 3 records and the marker
    hanging.abort_transaction(30)


# -- bad input ----------------------------------------------------------------------------------

def test_end_txn_with_no_transaction_open_is_invalid_txn_state(broker):
    topic, tid = name("noop"), name("tid")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        for version in range(4):
            for commit in (True, False):
                assert conn.end_txn(tid, pid, epoch, commit, version) == E.INVALID_TXN_STATE, (version, commit)
        assert conn.describe(tid)[0].transaction_state == "Empty"
        # a decided transaction: a retry of the same decision is fine, the other one is not
        assert conn.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 0), tid).error_code == 0
        assert conn.end_txn(tid, pid, epoch, commit=True) == 0
        assert conn.end_txn(tid, pid, epoch, commit=True) == 0
        assert conn.end_txn(tid, pid, epoch, commit=False) == E.INVALID_TXN_STATE
        assert_still_serving(broker.bootstrap, conn)
    assert [v.decode() for v in read(broker.bootstrap, topic, committed=True, expect=3)] == ["raw-0", "raw-1", "raw-2"]


def test_a_wrong_producer_epoch_is_producer_fenced_or_invalid_producer_epoch_by_version(broker):
    topic, tid = name("epoch"), name("tid")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        r = conn.init(tid)                                 # a second producer: epoch + 1
        assert (r.producer_id, r.producer_epoch) == (pid, epoch + 1)
        assert conn.add_partitions(tid, pid, epoch + 1, {topic: [0]}) == {(topic, 0): 0}
        for stale in (epoch, epoch + 5):                   # older, and one the coordinator never gave
            for version in range(4):
                # KIP-588: PRODUCER_FENCED from v2 on; older clients know only INVALID_PRODUCER_EPOCH
                want = E.PRODUCER_FENCED if version >= 2 else E.INVALID_PRODUCER_EPOCH
                assert conn.end_txn(tid, pid, stale, True, version) == want, (stale, version)
                assert conn.add_partitions(tid, pid, stale, {topic: [0]}, version) == {(topic, 0): want}
                assert conn.add_offsets(tid, pid, stale, "g", version) == want
        # the fenced epoch's batches are refused by the partition too
        assert conn.produce(topic, 0, txn_batch(pid, epoch + 1, 0), tid).error_code == 0
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 3), tid).error_code == E.INVALID_PRODUCER_EPOCH
        d, = conn.describe(tid)
        assert (d.transaction_state, d.producer_epoch) == ("Ongoing", epoch + 1)
        assert conn.end_txn(tid, pid, epoch + 1, commit=True) == 0
        assert_still_serving(broker.bootstrap, conn)


def test_a_wrong_producer_id_is_invalid_producer_id_mapping(broker):
    topic, tid = name("pid"), name("tid")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        for who, p in ((tid, pid + 1000), (name("unknown"), pid)):   # another id, an id never initialised
            for version in range(4):
                assert conn.end_txn(who, p, epoch, True, version) == E.INVALID_PRODUCER_ID_MAPPING
                assert conn.add_partitions(who, p, epoch, {topic: [0]}, version) == {
                    (topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
                assert conn.add_offsets(who, p, epoch, "g", version) == E.INVALID_PRODUCER_ID_MAPPING
        assert conn.describe(tid)[0].transaction_state == "Empty"
        assert_still_serving(broker.bootstrap, conn)


def test_add_partitions_naming_an_unknown_partition_adds_nothing(broker):
    topic, tid = name("apt"), name("tid")
    create(broker.bootstrap, topic, partitions=2)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        missing = name("missing")
        assert conn.add_partitions(tid, pid, epoch, {topic: [0, 1, 7], missing: [0]}) == {
            (topic, 0): E.OPERATION_NOT_ATTEMPTED, (topic, 1): E.OPERATION_NOT_ATTEMPTED,
            (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION, (missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        d, = conn.describe(tid)
        assert (d.transaction_state, d.topics) == ("Empty", [])      # as Kafka: all or nothing
        assert conn.add_partitions(tid, pid, epoch, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
        assert conn.end_txn(tid, pid, epoch, commit=False) == 0
        assert_still_serving(broker.bootstrap, conn)


def test_a_transaction_timeout_above_transaction_max_timeout_ms_is_refused(broker):
    """The shared broker runs with Kafka's default transaction.max.timeout.ms, 900000."""
    with Conn(broker.bootstrap) as conn:
        for version in (0, 1, 3, 4):
            for timeout_ms in (900_001, 0, -1, 2**31 - 1):
                r = conn.init(name("tid"), timeout_ms, version)
                assert (r.error_code, r.producer_id) == (E.INVALID_TRANSACTION_TIMEOUT, -1), (version, timeout_ms)
        assert conn.init(name("tid"), 900_000).error_code == 0
        assert_still_serving(broker.bootstrap, conn)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name("tid"),
                         "transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_an_empty_transactional_id_is_invalid_request(broker):
    """Kafka's coordinator answers INVALID_REQUEST for "" (its Java producer refuses it in its
    config, librdkafka takes it as no transactional id at all)."""
    topic = name("empty")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        for version in (0, 1, 3, 4):
            r = conn.init("", 1000, version)
            assert (r.error_code, r.producer_id) == (E.INVALID_REQUEST, -1), version
        assert conn.add_partitions("", 0, 0, {topic: [0]}) == {(topic, 0): E.INVALID_REQUEST}
        assert conn.add_offsets("", 0, 0, "g") == E.INVALID_REQUEST
        assert conn.end_txn("", 0, 0, commit=True) == E.INVALID_REQUEST
        assert conn.describe("")[0].error_code == E.INVALID_REQUEST
        assert "" not in {t for t, _, _ in rows(conn.listed())}
        assert_still_serving(broker.bootstrap, conn)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": ""})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(10)
    assert refused.value.args[0].code() == KafkaError._NOT_CONFIGURED


def test_a_transactional_id_of_the_longest_protocol_string_works_end_to_end(broker):
    topic, tid = name("long"), "L" * 32767                # Short.MaxValue bytes: the longest a string can be
    create(broker.bootstrap, topic)
    producer = txn_producer(broker.bootstrap, tid)
    producer.begin_transaction()
    send_all(producer, topic, values("long", 5))
    producer.commit_transaction(30)
    with Conn(broker.bootstrap) as conn:
        d, = conn.describe(tid)
        assert (d.error_code, d.transactional_id, d.transaction_state) == (0, tid, "CompleteCommit")
    assert read(broker.bootstrap, topic, committed=True, expect=5) == values("long", 5)


def test_a_transactional_id_longer_than_a_protocol_string_gets_no_producer_id(broker):
    """Kafka's parser rejects any string over 32767 bytes (it closes the connection); flexible
    versions can carry one.  kwire answers without a producer id, and goes on serving."""
    with Conn(broker.bootstrap) as conn:
        r = conn.init("M" * 40_000, 1000, version=4)
        assert r.error_code != 0 and r.producer_id == -1
        assert_still_serving(broker.bootstrap, conn)


def test_a_transactional_id_longer_than_a_protocol_string_leaves_nothing_behind(fresh_broker):
    b = fresh_broker()
    with Conn(b.bootstrap) as conn:
        assert conn.init("M" * 40_000, 1000, version=4).error_code == E.INVALID_REQUEST
        assert rows(conn.listed()) == set()


def test_a_non_transactional_batch_while_a_transaction_is_open_is_invalid_txn_state(broker):
    topic, tid = name("mixed"), name("tid")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        assert conn.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 0), tid).error_code == 0
        plain = conn.produce(topic, 0, txn_batch(pid, epoch, 3, transactional=False, label="plain"))
        assert (plain.error_code, plain.base_offset) == (E.INVALID_TXN_STATE, -1)
        assert plain.error_message
        # the transaction goes on: the refused batch took no sequence numbers
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 3), tid).error_code == 0
        assert conn.end_txn(tid, pid, epoch, commit=True) == 0
        assert_still_serving(broker.bootstrap, conn)
    assert [v.decode() for v in read(broker.bootstrap, topic, committed=True, expect=6)] == [
        f"raw-{i}" for i in range(6)]


def test_out_of_order_and_duplicate_transactional_batches(broker):
    topic, tid = name("seq"), name("tid")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, epoch = r.producer_id, r.producer_epoch
        assert conn.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        first = conn.produce(topic, 0, txn_batch(pid, epoch, 0), tid)
        assert (first.error_code, first.base_offset) == (0, 0)
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 7), tid).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        again = conn.produce(topic, 0, txn_batch(pid, epoch, 0), tid)      # a retry: the original offsets
        assert (again.error_code, again.base_offset) == (0, 0)
        assert conn.produce(topic, 0, txn_batch(pid, epoch, 3), tid).base_offset == 3
        assert conn.end_txn(tid, pid, epoch, commit=True) == 0
        assert_still_serving(broker.bootstrap, conn)
    assert len(read(broker.bootstrap, topic, committed=True, expect=6)) == 6



def test_txn_offset_commit_from_a_fenced_producer_never_counts(broker):
    """A zombie's offsets must not ride on its successor's commit: both have the same producer
    id (the successor's epoch is bumped), so the group coordinator must not hold the zombie's
    offsets pending under it.  As Kafka 3.6+, TxnOffsetCommit is verified with the transaction
    coordinator first: a stale epoch is INVALID_PRODUCER_EPOCH, a producer id the id does not
    have INVALID_PRODUCER_ID_MAPPING, no AddOffsetsToTxn INVALID_TXN_STATE."""
    src, tid, group = name("src"), name("tid"), name("eos")
    create(broker.bootstrap, src, partitions=3)
    with Conn(broker.bootstrap) as conn:
        r = conn.init(tid)
        pid, zombie = r.producer_id, r.producer_epoch
        assert conn.add_offsets(tid, pid, zombie, group) == 0
        assert commit_offsets(conn, tid, pid, zombie, group, src, {0: 5}) == {0: 0}
        assert conn.init(tid).error_code == E.CONCURRENT_TRANSACTIONS      # the successor fences the zombie
        r = conn.init(tid)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, zombie + 2)
        successor = r.producer_epoch
        for version in range(4):
            assert commit_offsets(conn, tid, pid, zombie, group, src, {1: 99, 2: 99}, version) == {
                1: E.INVALID_PRODUCER_EPOCH, 2: E.INVALID_PRODUCER_EPOCH}, version
        # no AddOffsetsToTxn yet: the group's partition is not in the transaction
        assert commit_offsets(conn, tid, pid, successor, group, src, {0: 7}) == {0: E.INVALID_TXN_STATE}
        assert conn.add_offsets(tid, pid, successor, group) == 0
        assert commit_offsets(conn, tid, pid, zombie, group, src, {1: 99}) == {1: E.INVALID_PRODUCER_EPOCH}
        assert commit_offsets(conn, tid, pid + 1, successor, group, src, {1: 99}) == {
            1: E.INVALID_PRODUCER_ID_MAPPING}
        assert commit_offsets(conn, tid, pid, successor, group, src, {0: 7}) == {0: 0}
        assert conn.end_txn(tid, pid, successor, commit=True) == 0
        assert committed_offsets(conn, group, src) == {0: 7, 1: -1, 2: -1}

        # a producer id nobody initialised, an empty id: nothing is held pending for them
        stranger = name("stranger")
        assert commit_offsets(conn, name("nobody"), 424_242, 0, stranger, src, {0: 3}) == {
            0: E.INVALID_PRODUCER_ID_MAPPING}
        assert commit_offsets(conn, "", pid, successor, stranger, src, {0: 3}) == {0: E.INVALID_REQUEST}
        assert committed_offsets(conn, stranger, src, require_stable=True) == {0: -1, 1: -1, 2: -1}
        assert_still_serving(broker.bootstrap, conn)


def commit_offsets(conn: Conn, tid: str, pid: int, epoch: int, group: str, topic: str, offsets: dict,
                   version: int = 3) -> dict[int, int]:
    """{partition: error code} of one TxnOffsetCommit of ``topic``'s ``offsets`` {partition: offset}."""
    Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    member = {"generation_id": -1, "member_id": "", "group_instance_id": None} if version >= 3 else {}
    r = conn.call(TxnOffsetCommitRequest[version](
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, **member,
        topics=[Topic(name=topic, partitions=[Topic.TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
            for p, o in offsets.items()])]))
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def committed_offsets(conn: Conn, group: str, topic: str, require_stable: bool = False) -> dict[int, int]:
    """{partition: committed offset} of partitions 0-2; every error must be NONE (with
    ``require_stable``, no offset of the group may be waiting for a transaction)."""
    R = OffsetFetchRequest[7]
    r = conn.call(R(group_id=group, require_stable=require_stable,
                    topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1, 2])]))
    assert r.error_code == 0
    assert [p.error_code for t in r.topics for p in t.partitions] == [0, 0, 0]
    return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


# -- a ZooKeeper cluster ------------------------------------------------------------------------

def test_on_a_cluster_each_broker_answers_for_what_it_coordinates_and_replicates():
    """Three brokers, a topic of three partitions with two replicas each (so every broker
    holds no replica of one of them): DescribeTransactions is answered by the id's
    coordinator and NOT_COORDINATOR elsewhere, ListTransactions lists the id on its
    coordinator only, DescribeProducers is answered by the leader and the follower and is
    NOT_LEADER_OR_FOLLOWER on the third broker.  A TxnOffsetCommit reaching a group
    coordinator that is not the id's transaction coordinator is verified there with
    DescribeTransactions: the fenced zombie's offsets do not count."""
    from kwire.groups.coordinator import partition_for
    from kwire.testing.cluster import ClusterProcess
    from kwire.testing.zookeeper import zookeeper_available
    from tests.support.counting import create_topic as create_replicated
    from tests.support.counting import partition_states, wait_for, wait_full_isrs
    available, why = zookeeper_available()
    if not available:
        pytest.skip(f"ZooKeeper cannot run here: {why}")
    cluster = ClusterProcess(3)
    try:
        cluster.start()
        cluster.wait_until_ready()
        zk = cluster.zookeeper.connect
        topic, tid = name("spread"), name("tid")
        create_replicated(cluster.bootstrap, topic, partitions=3, rf=2)
        states = wait_full_isrs(zk, topic, replicas=2)
        producer = txn_producer(cluster.bootstrap, tid)
        txn_states = partition_states(zk, "__transaction_state")
        coordinator = txn_states[partition_for(tid, len(txn_states))]["leader"]
        producer.begin_transaction()
        for p in range(3):
            send_all(producer, topic, values(f"p{p}", 5), partition=p)
        conns = {i: Conn(b.bootstrap) for i, b in cluster.brokers.items()}
        d, = conns[coordinator].describe(tid)
        assert (d.error_code, d.transaction_state) == (0, "Ongoing")
        pid = d.producer_id
        for i, conn in conns.items():
            here = i == coordinator
            assert conn.describe(tid)[0].error_code == (0 if here else E.NOT_COORDINATOR), i
            assert rows(conn.listed(pids=[pid])) == ({(tid, pid, "Ongoing")} if here else set()), i

            def producers_here(i=i, conn=conn):
                got = conn.producers(topic, range(3))
                want = {p: 0 if i in states[p]["isr"] else E.NOT_LEADER_OR_FOLLOWER for p in range(3)}
                replicated = all(got[p].active_producers for p in range(3) if want[p] == 0)
                return {p: r.error_code for p, r in got.items()} == want and replicated and got
            got = wait_for(producers_here, 30, f"broker {i}'s replicas to hold the producer")
            for p, r in got.items():
                assert [(s.producer_id, s.current_txn_start_offset) for s in r.active_producers] == (
                    [(pid, 0)] if i in states[p]["isr"] else []), (i, p)
        producer.commit_transaction(60)

        # a group coordinated away from the id's transaction coordinator
        conns[coordinator].call(FindCoordinatorRequest[1](key="probe", key_type=0))
        offsets_states = wait_for(lambda: partition_states(zk, "__consumer_offsets"), 30, "__consumer_offsets")
        group = next(g for g in (f"g{n}" for n in range(1000))
                     if offsets_states[partition_for(g, len(offsets_states))]["leader"] != coordinator)
        group_conn = conns[offsets_states[partition_for(group, len(offsets_states))]["leader"]]
        txn_conn = conns[coordinator]
        # the confluent producer's id, now initialised again with raw requests: a zombie and its successor
        zid = tid
        r = txn_conn.init(zid)
        assert r.error_code == 0
        zpid, zombie = r.producer_id, r.producer_epoch
        assert txn_conn.add_offsets(zid, zpid, zombie, group) == 0
        assert commit_offsets(group_conn, zid, zpid, zombie, group, topic, {0: 5}) == {0: 0}
        fenced = wait_for(lambda: (r := txn_conn.init(zid)).error_code == 0 and r, 30, "the successor")
        successor = fenced.producer_epoch
        assert successor > zombie
        assert commit_offsets(group_conn, zid, zpid, zombie, group, topic, {1: 99}) == {1: E.INVALID_PRODUCER_EPOCH}
        assert commit_offsets(group_conn, zid, zpid + 1, successor, group, topic, {1: 99}) == {
            1: E.INVALID_PRODUCER_ID_MAPPING}
        assert txn_conn.add_offsets(zid, zpid, successor, group) == 0
        assert commit_offsets(group_conn, zid, zpid, successor, group, topic, {0: 7}) == {0: 0}
        assert txn_conn.end_txn(zid, zpid, successor, commit=True) == 0
        assert wait_for(lambda: committed_offsets(group_conn, group, topic, require_stable=True) == {
            0: 7, 1: -1, 2: -1}, 30, "the successor's offsets, and only them")

        transactions_v2_across_brokers(cluster, conns, topic, states, txn_states)
        for conn in conns.values():
            conn.sock.close()
    finally:
        cluster.close()


def transactions_v2_across_brokers(cluster, conns: dict, topic: str, states: dict, txn_states: dict) -> None:
    """Transactions v2 on the cluster: each leader adds its partition at the id's coordinator on
    another broker (AddPartitionsToTxn v5 between brokers); the bumped epoch fences a late write."""
    from kwire.groups.coordinator import partition_for
    from tests.support.counting import wait_for
    upgrade_to_tv2(conns[1])
    wait_for(lambda: all(finalized_tv(c) == 2 for c in conns.values()), 30, "transaction.version 2 everywhere")
    vid = next(t for t in (name("v2") for _ in range(1000))
               if any(states[p]["leader"] != txn_states[partition_for(t, len(txn_states))]["leader"]
                      for p in range(3)))
    v2_coordinator = conns[txn_states[partition_for(vid, len(txn_states))]["leader"]]
    r = v2_coordinator.init(vid, version=4)
    assert r.error_code == 0
    vpid, vepoch = r.producer_id, r.producer_epoch
    for p in range(3):
        part = produce_v12(conns[states[p]["leader"]], vid, topic, p, txn_batch(vpid, vepoch, 0, label=f"v2p{p}"))
        assert part.error_code == 0, (p, part)
    assert end_v5(v2_coordinator, vid, vpid, vepoch, True) == (0, vpid, vepoch + 1)
    for p in range(3):
        late = produce_v12(conns[states[p]["leader"]], vid, topic, p, txn_batch(vpid, vepoch, 3))
        assert late.error_code == E.INVALID_PRODUCER_EPOCH, (p, late)
    got = read(cluster.bootstrap, topic, committed=True, expect=24, partitions=(0, 1, 2))
    assert sorted(v for v in got if v.startswith(b"v2p")) == sorted(
        f"v2p{p}-{i}".encode() for p in range(3) for i in range(3))
