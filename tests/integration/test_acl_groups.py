"""Consumer groups, offsets, idempotent and transactional producers under Kafka's ACL authorizer,
through stock clients (confluent-kafka, kafka-python, aiokafka) logged in as alice or bob.

The broker runs Kafka's ACL authorizer with SASL/PLAIN users (tests/support/acl_broker.py):
``admin`` is a super user, ``alice`` and ``bob`` start with no ACLs.  The exact answers of each
check are compared with Kafka's in tests/server/test_acl_groups_inprocess.py; here the clients
show what a user sees: the error a client raises, and that the same client works once granted.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import GroupAuthorizationFailedError as AioGroupAuthorizationFailed
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, NewTopic, ResourcePatternType, ResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import GroupAuthorizationFailedError, KafkaError as KpKafkaError, TopicAuthorizationFailedError

from tests.support.acl_broker import AclBroker

pytestmark = pytest.mark.clients

READ, WRITE, DESCRIBE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DELETE
TOPIC, GROUP, TXN_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
CLUSTER = ResourceType.BROKER          # confluent-kafka's name for Kafka's CLUSTER resource type


def create_topics(b: AclBroker, *names: str) -> None:
    admin = b.admin()
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=10).values():
        future.result()


def produce(b: AclBroker, user: str, topic: str, n: int = 3) -> None:
    producer = Producer(b.client(user))
    failed = []
    for i in range(n):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, _msg: err and failed.append(err))
    assert producer.flush(15) == 0 and not failed, failed


def consume(b: AclBroker, user: str, group: str, topic: str, n: int = 3, timeout: float = 20) -> tuple:
    """(values read in ``group``, the first consumer error), committing what was read."""
    consumer = Consumer({**b.client(user), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values, error, deadline = [], None, time.monotonic() + timeout
    try:
        while len(values) < n and error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                error = msg.error()
            else:
                values.append(msg.value())
        if values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values, error


def committed(b: AclBroker, user: str, group: str, *partitions: tuple[str, int]) -> list:
    consumer = Consumer({**b.client(user), "group.id": group})
    try:
        return consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
    finally:
        consumer.close()


def test_a_consumer_group_needs_read_on_the_group_and_its_topic(tmp_path):
    with AclBroker(tmp_path) as b:
        create_topics(b, "t")
        b.allow("alice", TOPIC, "t", WRITE)
        produce(b, "alice", "t")
        values, error = consume(b, "alice", "g1", "t", timeout=10)
        assert values == [] and error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        assert "User:alice denied DESCRIBE on GROUP g1" in b.process.log_text()

        b.allow("alice", GROUP, "g1", READ)
        b.allow("alice", TOPIC, "t", READ)
        values, error = consume(b, "alice", "g1", "t")
        assert (values, error) == ([b"v0", b"v1", b"v2"], None)
        tp, = committed(b, "alice", "g1", ("t", 0))
        assert (tp.offset, tp.error) == (3, None)
        values, error = consume(b, "bob", "g1", "t", timeout=10)        # alice's grants are hers only
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        assert consume(b, "admin", "any-group", "t") == ([b"v0", b"v1", b"v2"], None), "a super user"


def test_kafka_python_and_aiokafka_consumers_need_read_on_the_group(tmp_path):
    with AclBroker(tmp_path) as b:
        create_topics(b, "t")
        produce(b, "admin", "t")
        b.allow("bob", TOPIC, "t", READ)
        consumer = KafkaConsumer("t", **b.kafka_python("bob"), group_id="kp", auto_offset_reset="earliest",
                                 enable_auto_commit=False)
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=10_000)
        consumer.close()

        b.allow("bob", GROUP, "kp", READ)
        consumer = KafkaConsumer("t", **b.kafka_python("bob"), group_id="kp", auto_offset_reset="earliest",
                                 enable_auto_commit=False)
        values, deadline = [], time.monotonic() + 20
        while len(values) < 3 and time.monotonic() < deadline:
            values += [m.value for msgs in consumer.poll(timeout_ms=500).values() for m in msgs]
        consumer.commit()
        assert values == [b"v0", b"v1", b"v2"]
        assert consumer.committed(KpTopicPartition("t", 0)) == 3
        consumer.close()

        async def aiokafka_consumer(group: str):
            consumer = AIOKafkaConsumer("t", **b.kafka_python("bob"), group_id=group, auto_offset_reset="earliest")
            try:
                await consumer.start()
                return (await asyncio.wait_for(consumer.getone(), 15)).value
            finally:
                await consumer.stop()
        with pytest.raises(AioGroupAuthorizationFailed):
            asyncio.run(aiokafka_consumer("aio"))
        b.allow("bob", GROUP, "aio", READ)
        assert asyncio.run(aiokafka_consumer("aio")) == b"v0"


def test_offsets_of_a_topic_without_access_are_refused_or_hidden(tmp_path):
    with AclBroker(tmp_path) as b:
        create_topics(b, "t", "secret")
        b.allow("alice", GROUP, "g", READ)
        b.allow("alice", TOPIC, "t", READ)
        consumer = Consumer({**b.client("alice"), "group.id": "g"})
        with pytest.raises(KafkaException) as refused:
            consumer.commit(offsets=[TopicPartition("t", 0, 2), TopicPartition("secret", 0, 1)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        consumer.close()
        admin_consumer = Consumer({**b.client("admin"), "group.id": "g"})
        admin_consumer.commit(offsets=[TopicPartition("secret", 0, 7)], asynchronous=False)
        admin_consumer.close()

        t, secret = committed(b, "alice", "g", ("t", 0), ("secret", 0))
        assert (t.offset, t.error) == (2, None), "the allowed topic's offset was committed"
        assert secret.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        def all_offsets(user: str) -> dict:
            admin = b.admin(user)              # referenced until the answer: a dropped client cancels it
            future, = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")],
                                                        request_timeout=10).values()
            return {(tp.topic, tp.partition): tp.offset for tp in future.result(timeout=20).topic_partitions}
        assert all_offsets("alice") == {("t", 0): 2}, "secret's offsets are left out"
        assert all_offsets("admin") == {("t", 0): 2, ("secret", 0): 7}
        with pytest.raises(KafkaException) as denied:              # DESCRIBE on the group is needed first
            all_offsets("bob")
        assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_groups_are_described_listed_and_deleted_as_allowed(tmp_path):
    with AclBroker(tmp_path) as b:
        create_topics(b, "t")
        for group in ("mine", "theirs"):
            consumer = Consumer({**b.client("admin"), "group.id": group})
            consumer.commit(offsets=[TopicPartition("t", 0, 1)], asynchronous=False)
            consumer.close()
        b.allow("alice", GROUP, "mine", DESCRIBE)
        alice = b.admin("alice")
        assert [g.group_id for g in alice.list_consumer_groups(request_timeout=10).result().valid] == ["mine"]
        described = alice.describe_consumer_groups(["mine", "theirs"], include_authorized_operations=True,
                                                   request_timeout=10)
        assert described["mine"].result().authorized_operations == [AclOperation.DESCRIBE]
        with pytest.raises(KafkaException) as denied:
            described["theirs"].result()
        assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED

        with pytest.raises(KafkaException) as denied:             # DESCRIBE does not imply DELETE
            alice.delete_consumer_groups(["mine"], request_timeout=10)["mine"].result()
        assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        b.allow("alice", GROUP, "mine", DELETE)
        alice.delete_consumer_groups(["mine"], request_timeout=10)["mine"].result()
        assert alice.list_consumer_groups(request_timeout=10).result().valid == []

        b.allow("alice", CLUSTER, "kafka-cluster", DESCRIBE)       # DESCRIBE on the cluster lists every group
        assert [g.group_id for g in alice.list_consumer_groups(request_timeout=10).result().valid] == ["theirs"]
        admin = b.admin()
        assert [g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid] == ["theirs"]


def test_an_idempotent_producer_needs_idempotent_write_on_the_cluster_or_write_on_a_topic(tmp_path):
    with AclBroker(tmp_path) as b:
        create_topics(b, "t", "logs-app")
        b.allow("bob", TOPIC, "t", DESCRIBE)

        def kafka_python_send() -> object:
            producer = KafkaProducer(**b.kafka_python("bob"), enable_idempotence=True, max_block_ms=10_000)
            try:
                return producer.send("t", b"x").get(timeout=15)
            except KpKafkaError as exc:
                return exc
            finally:
                producer.close(timeout=5)
        outcome = kafka_python_send()
        assert isinstance(outcome, KpKafkaError) and "ClusterAuthorizationFailedError" in str(outcome), outcome

        b.allow("bob", CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
        outcome = kafka_python_send()
        # its producer id is granted now; whether the record lands is Produce's own WRITE check
        assert not isinstance(outcome, KpKafkaError) or isinstance(outcome, TopicAuthorizationFailedError), outcome

        # KIP-679: WRITE on some topic (here a prefix) is enough for a producer id
        def confluent_send() -> tuple:
            """(the producer's fatal error code or None, the delivery error)"""
            errors, delivered = [], []
            producer = Producer({**b.client("alice"), "enable.idempotence": True, "error_cb": errors.append})
            producer.produce("logs-app", b"x", on_delivery=lambda err, msg: delivered.append(err))
            try:
                producer.flush(15)
                producer.poll(0.5)
            except KafkaException as exc:           # librdkafka's fatal error, raised by poll/flush
                errors.append(exc.args[0])
            fatal = [e.code() for e in errors if e.fatal()]
            return (fatal[0] if fatal else None), (delivered[0] if delivered else "not delivered")
        assert confluent_send()[0] == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        b.allow("alice", TOPIC, "logs-", WRITE, ResourcePatternType.PREFIXED)
        assert confluent_send() == (None, None)


def test_a_transactional_producer_needs_write_on_its_transactional_id(tmp_path):
    with AclBroker(tmp_path) as b:
        create_topics(b, "in", "out")
        produce(b, "admin", "in")
        with pytest.raises(KafkaException) as denied:
            Producer({**b.client("alice"), "transactional.id": "tx1"}).init_transactions(10)
        assert denied.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # librdkafka is refused at FindCoordinator already: WRITE would imply the DESCRIBE it needs there
        assert "User:alice denied DESCRIBE on TRANSACTIONAL_ID tx1" in b.process.log_text()
        b.allow("alice", TXN_ID, "tx1", DESCRIBE)                 # found, but InitProducerId needs WRITE
        with pytest.raises(KafkaException) as denied:
            Producer({**b.client("alice"), "transactional.id": "tx1"}).init_transactions(10)
        assert denied.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert "User:alice denied WRITE on TRANSACTIONAL_ID tx1" in b.process.log_text()

        b.allow("alice", TXN_ID, "tx1", WRITE)
        b.allow("alice", TOPIC, "out", WRITE)
        producer = Producer({**b.client("alice"), "transactional.id": "tx1"})
        producer.init_transactions(10)
        group = Consumer({**b.client("admin"), "group.id": "copy"})

        def send_offsets() -> KafkaError | None:
            producer.begin_transaction()
            producer.produce("out", b"copied")
            try:
                producer.send_offsets_to_transaction([TopicPartition("in", 0, 3)], group.consumer_group_metadata(), 10)
            except KafkaException as exc:
                producer.abort_transaction(10)
                return exc.args[0]
            return None
        error = send_offsets()
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED and error.txn_requires_abort()   # AddOffsetsToTxn
        b.allow("alice", GROUP, "copy", READ)
        error = send_offsets()
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED       # TxnOffsetCommit: READ on "in"
        b.allow("alice", TOPIC, "in", READ)
        assert send_offsets() is None
        producer.commit_transaction(10)
        tp, = group.committed([TopicPartition("in", 0)], timeout=10)
        assert tp.offset == 3
        group.close()
        values, error = consume(b, "admin", "check", "out", n=1)
        assert (values, error) == ([b"copied"], None)

        admin_producer = Producer({**b.client("admin"), "transactional.id": "any-id"})
        admin_producer.init_transactions(10)                     # a super user needs no ACL
        admin_producer.begin_transaction()
        admin_producer.produce("out", b"by-admin")
        admin_producer.commit_transaction(10)
