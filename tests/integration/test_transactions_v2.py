"""Transactions v2 (KIP-890 part 2) against a broker process whose finalized
``transaction.version`` is 2, driven with kafka-python's protocol classes: no stock client
here speaks it (librdkafka has no KIP-890, issue #5423; the Java 4.0 client in
../shared/jars only reads the feature level; kafka-python and aiokafka stop at v1).

A v2 producer sends Produce v12 and TxnOffsetCommit v5 without AddPartitionsToTxn or
AddOffsetsToTxn (the leader and the group coordinator add the partitions), and EndTxn v5
answers with the bumped epoch of its next transaction.  What a user checks: read_committed
consumers (confluent-kafka) see the committed records and offsets only, a late write of the
old epoch is refused instead of hanging the partition, and a v1 producer (librdkafka) keeps
working beside it."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.codecs.errors import ErrorCode as E
from kwire.testing.process import BrokerProcess
from tests.integration.test_transactions import create, name, read, send_all, txn_producer, values
from tests.integration.test_transactions_protocol import (
    Conn, commit_offsets, committed_offsets, end_v5, produce_v12, txn_batch, upgrade_to_tv2,
)

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def tv2_broker():
    b = BrokerProcess().start()
    with Conn(b.bootstrap) as conn:
        upgrade_to_tv2(conn)
    yield b
    b.close()


def test_the_broker_advertises_transactions_v2_once_finalized(tv2_broker):
    with Conn(tv2_broker.bootstrap) as conn:
        r = conn.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    versions = {k.api_key: k.max_version for k in r.api_keys}
    assert finalized["transaction.version"] == 2
    assert (versions[0], versions[24], versions[26], versions[28]) == (13, 5, 5, 5)


def test_a_v2_producer_commits_aborts_and_commits_offsets_without_add_requests(tv2_broker):
    bootstrap = tv2_broker.bootstrap
    topic, tid, group = name("tv2"), name("tid"), name("g")
    create(bootstrap, topic, partitions=2)
    with Conn(bootstrap) as conn:
        r = conn.init(tid, version=4)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        for p in (0, 1):        # no AddPartitionsToTxn: the leader adds the partition
            part = produce_v12(conn, tid, topic, p, txn_batch(pid, epoch, 0, label=f"c{p}"))
            assert part.error_code == 0, part
        assert commit_offsets(conn, tid, pid, epoch, group, topic, {0: 3, 1: 3, 2: 0}, version=5) == \
            {0: 0, 1: 0, 2: 0}  # no AddOffsetsToTxn: the group's partition joins the same way
        d, = conn.describe(tid)
        assert d.transaction_state == "Ongoing" and {t.topic for t in d.topics} == {topic, "__consumer_offsets"}
        assert end_v5(conn, tid, pid, epoch, True) == (0, pid, epoch + 1)

        epoch += 1              # the next transaction: the bumped epoch, sequences from 0
        part = produce_v12(conn, tid, topic, 0, txn_batch(pid, epoch, 0, label="aborted"))
        assert part.error_code == 0, part
        assert end_v5(conn, tid, pid, epoch, False) == (0, pid, epoch + 1)
        assert end_v5(conn, tid, pid, epoch, False) == (0, pid, epoch + 1)    # a retry: the same answer
        assert committed_offsets(conn, group, topic, require_stable=True) == {0: 3, 1: 3, 2: 0}
        states = conn.producers(topic, [0])[0].active_producers
        assert [(s.producer_id, s.producer_epoch, s.current_txn_start_offset) for s in states] == \
            [(pid, epoch + 1, -1)]
    assert sorted(read(bootstrap, topic, committed=True, expect=6, partitions=(0, 1))) == \
        [f"c{p}-{i}".encode() for p in (0, 1) for i in range(3)]


def test_a_late_write_of_the_old_epoch_is_fenced_and_hangs_nothing(tv2_broker):
    # KIP-890's hanging transaction: a produce of a committed transaction arriving late
    bootstrap = tv2_broker.bootstrap
    topic, tid = name("late"), name("tid")
    create(bootstrap, topic)
    with Conn(bootstrap) as conn:
        r = conn.init(tid, version=4)
        pid, epoch = r.producer_id, r.producer_epoch
        assert produce_v12(conn, tid, topic, 0, txn_batch(pid, epoch, 0)).error_code == 0
        assert end_v5(conn, tid, pid, epoch, True)[0] == 0
        late = produce_v12(conn, tid, topic, 0, txn_batch(pid, epoch, 3, label="late"))
        assert late.error_code == E.INVALID_PRODUCER_EPOCH
        assert conn.last_stable_offset(topic, 0) == 4         # 3 records and the marker: nothing open
        assert conn.describe(tid)[0].transaction_state == "CompleteCommit"
    assert read(bootstrap, topic, committed=True, expect=3) == values("raw", 3)


def test_a_v1_producer_keeps_working_beside_v2(tv2_broker):
    bootstrap = tv2_broker.bootstrap
    topic = name("v1")
    create(bootstrap, topic)
    producer = txn_producer(bootstrap, name("tid"))
    for commit in (True, False, True):
        producer.begin_transaction()
        send_all(producer, topic, values(f"t{commit}", 4))
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    assert read(bootstrap, topic, committed=True, expect=8) == values("tTrue", 4) * 2


def test_without_transaction_version_2_the_v2_versions_are_held_back_and_served_as_v1(broker):
    topic, tid = name("tv1"), name("tid")
    create(broker.bootstrap, topic)
    with Conn(broker.bootstrap) as conn:
        r = conn.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        assert {f.name: f.max_version_level for f in r.finalized_features}.get("transaction.version", 0) < 2
        versions = {k.api_key: k.max_version for k in r.api_keys}
        assert (versions[0], versions[26], versions[28]) == (11, 4, 4)
        init = conn.init(tid, version=4)
        pid, epoch = init.producer_id, init.producer_epoch
        # a client that sends v12 anyway gets v1's verification: the partition was never added
        refused = produce_v12(conn, tid, topic, 0, txn_batch(pid, epoch, 0))
        assert refused.error_code == E.INVALID_TXN_STATE
        assert conn.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert produce_v12(conn, tid, topic, 0, txn_batch(pid, epoch, 0)).error_code == 0
        assert end_v5(conn, tid, pid, epoch, True) == (0, pid, epoch)          # no bump
        assert conn.add_partitions(tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}


def test_produce_v13_names_topics_by_id(tv2_broker):
    topic = name("by-id")
    create(tv2_broker.bootstrap, topic)
    with Conn(tv2_broker.bootstrap) as conn:
        M = MetadataRequest[12]
        meta = conn.call(M(topics=[M.MetadataRequestTopic(topic_id=None, name=topic)], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False))
        topic_id = meta.topics[0].topic_id
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        builder.append(0, timestamp=None, key=None, value=b"by-id", headers=[])
        P = ProduceRequest[13]

        def produce(tid) -> list:
            r = conn.call(P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                P.TopicProduceData(topic_id=tid, partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))])]))
            return [(t.topic_id, p.error_code) for t in r.responses for p in t.partition_responses]
        assert produce(topic_id) == [(topic_id, 0)]
        assert produce(uuid.uuid4())[0][1] == E.UNKNOWN_TOPIC_ID
    assert read(tv2_broker.bootstrap, topic, committed=False, expect=1) == [b"by-id"]
