"""The topic, config and cluster ACL checks (kwire.handlers.authz) through stock clients.

The broker runs Kafka's ACL authorizer with SASL/PLAIN users (tests/support/acl_broker.py):
``admin`` is a super user, ``alice`` and ``bob`` are not, and a PLAINTEXT listener serves
``User:ANONYMOUS``.  Each check is seen denied, then allowed once the super user grants the ACL."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewPartitions, NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import ScramMechanism as KpScramMechanism
from kafka.admin import UserScramCredentialDeletion as KpScramDeletion
from kafka.errors import ClusterAuthorizationFailedError, KafkaError, TopicAuthorizationFailedError

from tests.support.acl_broker import AclBroker

pytestmark = pytest.mark.clients


def produce(settings: dict, topic: str, value: bytes = b"v") -> str | None:
    """Produce one record with confluent-kafka; the delivery error's name, or None."""
    producer = Producer({**settings, "message.timeout.ms": 10000})
    errors = []
    producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    assert len(errors) == 1, "no delivery report"
    return None if errors[0] is None else errors[0].name()


def consume(settings: dict, topic: str, group: str = "readers") -> list[bytes] | str:
    """Read partition 0 from the start (assign mode) with confluent-kafka: the first records, or
    the name of the error the consumer reports."""
    consumer = Consumer({**settings, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return msg.error().name()
            return [msg.value()]
        return []
    finally:
        consumer.close()


def kp_produce(b: AclBroker, user: str, topic: str):
    producer = KafkaProducer(**b.kafka_python(user), max_block_ms=10000)
    try:
        return producer.send(topic, b"kp").get(timeout=15).offset
    finally:
        producer.close()


def kp_consume(b: AclBroker, user: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(**b.kafka_python(user), auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([KpTopicPartition(topic, 0)])
    try:
        for _ in range(30):
            batches = consumer.poll(timeout_ms=500)
            if batches:
                return [r.value for records in batches.values() for r in records]
        return []
    finally:
        consumer.close()


def done(futures: dict) -> dict:
    """{key: None or the error's name} of an AdminClient call's futures."""
    out = {}
    for key, future in futures.items():
        try:
            future.result()
            out[key] = None
        except KafkaException as exc:
            out[key] = exc.args[0].name()
    return out


def create(admin, *names: str, partitions: int = 1) -> dict:
    return done(admin.create_topics([NewTopic(n, partitions) for n in names], request_timeout=10))


def grant(b: AclBroker, principal: str, resource_type, name: str, operation, *,
          pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW) -> None:
    admin = b.admin()
    done(admin.create_acls([AclBinding(resource_type, name, pattern, principal, "*", operation, permission)],
                           request_timeout=10))


def test_produce_and_consume_need_write_and_read(tmp_path):
    with AclBroker(tmp_path) as b:
        assert create(b.admin(), "orders") == {"orders": None}
        alice = b.client("alice")
        assert produce(alice, "orders") == "TOPIC_AUTHORIZATION_FAILED"
        b.allow("alice", ResourceType.TOPIC, "orders", AclOperation.WRITE)
        assert produce(alice, "orders", b"first") is None
        b.allow("alice", ResourceType.GROUP, "readers", AclOperation.READ)
        assert consume(alice, "orders") == "TOPIC_AUTHORIZATION_FAILED"   # WRITE does not imply READ
        b.allow("alice", ResourceType.TOPIC, "orders", AclOperation.READ)
        assert consume(alice, "orders") == [b"first"]
        # kafka-python (bob), denied then allowed
        with pytest.raises(TopicAuthorizationFailedError):
            kp_produce(b, "bob", "orders")
        b.allow("bob", ResourceType.TOPIC, "orders", AclOperation.WRITE)
        assert kp_produce(b, "bob", "orders") == 1
        with pytest.raises(TopicAuthorizationFailedError):
            kp_consume(b, "bob", "orders")
        b.allow("bob", ResourceType.TOPIC, "orders", AclOperation.READ)
        assert kp_consume(b, "bob", "orders") == [b"first", b"kp"]
        assert "User:bob denied READ on TOPIC orders" in b.process.log_text()


def test_prefixed_acls_and_deny_before_allow(tmp_path):
    with AclBroker(tmp_path) as b:
        assert create(b.admin(), "logs-app", "logs-db", "other", "secret") == dict.fromkeys(
            ["logs-app", "logs-db", "other", "secret"])
        b.allow("bob", ResourceType.TOPIC, "logs-", AclOperation.WRITE, ResourcePatternType.PREFIXED)
        bob = b.client("bob")
        assert [produce(bob, t) for t in ("logs-app", "logs-db", "other")] == [
            None, None, "TOPIC_AUTHORIZATION_FAILED"]
        assert kp_produce(b, "bob", "logs-app") == 1
        grant(b, "User:alice", ResourceType.TOPIC, "*", AclOperation.ALL)
        grant(b, "User:alice", ResourceType.TOPIC, "secret", AclOperation.WRITE,
              permission=AclPermissionType.DENY)
        alice = b.client("alice")
        assert [produce(alice, t) for t in ("other", "secret")] == [None, "TOPIC_AUTHORIZATION_FAILED"]
        assert produce(b.client("admin"), "secret", b"s") is None
        b.allow("alice", ResourceType.GROUP, "readers", AclOperation.READ)
        assert consume(alice, "secret") == [b"s"]      # DENY WRITE denies neither READ nor DESCRIBE


def test_metadata_hides_topics_refuses_listed_ones_and_auto_creation_needs_create(tmp_path):
    with AclBroker(tmp_path) as b:
        assert create(b.admin(), "visible", "hidden") == {"visible": None, "hidden": None}
        b.allow("alice", ResourceType.TOPIC, "visible", AclOperation.DESCRIBE)
        alice_admin = b.admin("alice")
        assert set(alice_admin.list_topics(timeout=10).topics) == {"visible"}
        listed = alice_admin.list_topics(topic="hidden", timeout=10).topics["hidden"]
        assert listed.error.name() == "TOPIC_AUTHORIZATION_FAILED" and not listed.partitions
        described = alice_admin.describe_topics(TopicCollection(["visible"]), request_timeout=10,
                                                include_authorized_operations=True)["visible"].result()
        assert described.authorized_operations == [AclOperation.DESCRIBE]
        # auto-creation (a producer's metadata request asks for it): DESCRIBE is not enough
        b.allow("alice", ResourceType.TOPIC, "auto-", AclOperation.WRITE, ResourcePatternType.PREFIXED)
        alice = b.client("alice")
        assert produce(alice, "auto-one") == "TOPIC_AUTHORIZATION_FAILED"
        assert "auto-one" not in b.admin().list_topics(timeout=10).topics
        b.allow("alice", ResourceType.TOPIC, "auto-one", AclOperation.CREATE)
        assert produce(alice, "auto-one") is None
        b.allow("alice", ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE)   # any topic
        assert produce(alice, "auto-two") is None
        assert {"auto-one", "auto-two"} <= set(b.admin().list_topics(timeout=10).topics)
        cluster = alice_admin.describe_cluster(request_timeout=10, include_authorized_operations=True).result()
        assert not cluster.authorized_operations        # 0: CREATE does not imply DESCRIBE on the cluster


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_topic_admin_apis_are_denied_then_allowed(tmp_path):
    with AclBroker(tmp_path) as b:
        alice = b.admin("alice")
        assert create(alice, "t1") == {"t1": "TOPIC_AUTHORIZATION_FAILED"}
        b.allow("alice", ResourceType.TOPIC, "t1", AclOperation.CREATE)
        assert create(alice, "t1") == {"t1": None}

        assert done(alice.create_partitions([NewPartitions("t1", 2)], request_timeout=10)) == {
            "t1": "TOPIC_AUTHORIZATION_FAILED"}
        b.allow("alice", ResourceType.TOPIC, "t1", AclOperation.ALTER)
        assert done(alice.create_partitions([NewPartitions("t1", 2)], request_timeout=10)) == {"t1": None}

        topic, broker = ConfigResource(ConfigResource.Type.TOPIC, "t1"), ConfigResource(ConfigResource.Type.BROKER, "1")
        assert set(done(alice.describe_configs([topic, broker], request_timeout=10)).values()) == {
            "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}
        retention = ConfigResource(ConfigResource.Type.TOPIC, "t1", set_config={"retention.ms": "60000"})
        assert list(done(alice.alter_configs([retention], request_timeout=10)).values()) == [
            "TOPIC_AUTHORIZATION_FAILED"]
        incremental = ConfigResource(ConfigResource.Type.TOPIC, "t1", incremental_configs=[
            ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET)])
        assert list(done(alice.incremental_alter_configs([incremental], request_timeout=10)).values()) == [
            "TOPIC_AUTHORIZATION_FAILED"]
        b.allow("alice", ResourceType.TOPIC, "t1", AclOperation.ALTER_CONFIGS)   # implies DESCRIBE_CONFIGS
        assert list(done(alice.alter_configs([retention], request_timeout=10)).values()) == [None]
        assert list(done(alice.incremental_alter_configs([incremental], request_timeout=10)).values()) == [None]
        configs = alice.describe_configs([topic], request_timeout=10)[topic].result()
        assert configs["retention.ms"].value == "120000"

        assert done(alice.delete_topics(["t1"], request_timeout=10)) == {"t1": "TOPIC_AUTHORIZATION_FAILED"}
        b.allow("alice", ResourceType.TOPIC, "t1", AclOperation.DELETE)
        assert done(alice.delete_topics(["t1"], request_timeout=10)) == {"t1": None}
        assert "t1" not in b.admin().list_topics(timeout=10).topics


def test_the_super_user_may_do_everything(tmp_path):
    with AclBroker(tmp_path) as b:
        admin = b.admin()
        settings = b.client("admin")
        assert create(admin, "root") == {"root": None}
        assert produce(settings, "root", b"r") is None and produce(settings, "auto-root") is None
        assert consume(settings, "root") == [b"r"]
        assert kp_produce(b, "admin", "root") == 1
        assert done(admin.create_partitions([NewPartitions("root", 3)], request_timeout=10)) == {"root": None}
        assert done(admin.delete_topics(["root"], request_timeout=10)) == {"root": None}
        cluster = admin.describe_cluster(request_timeout=10, include_authorized_operations=True).result()
        assert AclOperation.ALTER in cluster.authorized_operations


def test_allow_everyone_if_no_acl_found(tmp_path):
    with AclBroker(tmp_path, **{"allow.everyone.if.no.acl.found": "true"}) as b:
        assert create(b.admin(), "open", "guarded") == {"open": None, "guarded": None}
        alice = b.client("alice")
        assert produce(alice, "open", b"o") is None        # no ACL on the topic: anyone
        assert consume(alice, "open") == [b"o"]
        assert kp_produce(b, "bob", "open") == 1
        b.allow("bob", ResourceType.TOPIC, "guarded", AclOperation.WRITE)   # now an ACL applies
        assert produce(b.client("bob"), "guarded") is None
        assert produce(alice, "guarded") == "TOPIC_AUTHORIZATION_FAILED"


def test_an_anonymous_plaintext_client_is_denied_until_allowed(tmp_path):
    with AclBroker(tmp_path) as b:
        assert create(b.admin(), "public") == {"public": None}
        anonymous = {"bootstrap.servers": b.plaintext_bootstrap}
        assert produce(anonymous, "public") == "TOPIC_AUTHORIZATION_FAILED"
        b.allow("ANONYMOUS", ResourceType.TOPIC, "public", AclOperation.WRITE)
        assert produce(anonymous, "public") is None
        assert "User:ANONYMOUS denied DESCRIBE on TOPIC public" in b.process.log_text()


def test_scram_credentials_need_describe_and_alter_on_the_cluster(tmp_path):
    """Checked before dispatch (the server's cluster gate).  Asked with kafka-python: confluent-kafka
    2.16 crashes the process on a refused DescribeUserScramCredentials (Kafka's answer too)."""
    with AclBroker(tmp_path) as b:
        kp_alice = KafkaAdminClient(**b.kafka_python("alice"))
        try:
            for users in (None, ["bob"]):
                with pytest.raises(ClusterAuthorizationFailedError):
                    kp_alice.describe_user_scram_credentials(users)
            deletion = KpScramDeletion("bob", KpScramMechanism.SCRAM_SHA_256)
            assert kp_alice.alter_user_scram_credentials([deletion]) == {"bob": "Cluster authorization failed."}
            b.allow("alice", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)   # implies DESCRIBE
            assert kp_alice.describe_user_scram_credentials(None) == {}
            assert kp_alice.alter_user_scram_credentials([deletion])["bob"] != "Cluster authorization failed."
        finally:
            kp_alice.close()


def test_kafka_python_errors_name_the_topic(tmp_path):
    with AclBroker(tmp_path) as b:
        assert create(b.admin(), "named") == {"named": None}
        with pytest.raises(KafkaError) as denied:
            kp_produce(b, "alice", "named")
        assert isinstance(denied.value, TopicAuthorizationFailedError) and "named" in str(denied.value)
