"""CreateAcls / DescribeAcls / DeleteAcls through confluent-kafka's AdminClient, and the
cluster checks every request passes first.

The broker runs Kafka's ACL authorizer with SASL/PLAIN users (tests/support/acl_broker.py):
``admin`` is a super user, ``alice`` and ``bob`` are not."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePatternFilter)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import ClusterAuthorizationFailedError

from kwire.testing.process import BrokerProcess
from tests.support.acl_broker import AclBroker

pytestmark = pytest.mark.clients


def binding(principal: str, name: str, operation=AclOperation.READ, pattern=ResourcePatternType.LITERAL,
            permission=AclPermissionType.ALLOW, resource=ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


ANY_TOPIC = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)


KP_ANY_TOPIC = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                         permission_type=ACLPermissionType.ANY,
                         resource_pattern=ResourcePatternFilter(KpResourceType.TOPIC, None, ACLResourcePatternType.ANY))


def created(admin: AdminClient, bindings: list) -> None:
    for future in admin.create_acls(bindings, request_timeout=10).values():
        future.result()


def test_acls_are_created_described_deleted_and_survive_a_restart(tmp_path):
    with AclBroker(tmp_path) as b:
        admin = b.admin()
        created(admin, [binding("User:alice", "orders"), binding("User:bob", "logs-", pattern=ResourcePatternType.PREFIXED,
                                                                 operation=AclOperation.WRITE),
                        binding("User:bob", "orders", permission=AclPermissionType.DENY)])
        found = admin.describe_acls(ANY_TOPIC, request_timeout=10).result()
        assert sorted((a.name, a.principal, a.operation, a.permission_type, a.resource_pattern_type)
                      for a in found) == sorted([
            ("orders", "User:alice", AclOperation.READ, AclPermissionType.ALLOW, ResourcePatternType.LITERAL),
            ("logs-", "User:bob", AclOperation.WRITE, AclPermissionType.ALLOW, ResourcePatternType.PREFIXED),
            ("orders", "User:bob", AclOperation.READ, AclPermissionType.DENY, ResourcePatternType.LITERAL)])
        b.process.stop()
        b.process.start()
        admin = b.admin()
        assert len(admin.describe_acls(ANY_TOPIC, request_timeout=10).result()) == 3
        bob_only = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
        deleted = [f.result() for f in admin.delete_acls([bob_only], request_timeout=10).values()]
        assert sorted(a.name for a in deleted[0]) == ["logs-", "orders"]
        left = admin.describe_acls(ANY_TOPIC, request_timeout=10).result()
        assert [(a.name, a.principal) for a in left] == [("orders", "User:alice")]


def test_only_principals_allowed_on_the_cluster_may_change_acls(tmp_path):
    with AclBroker(tmp_path) as b:
        alice = b.admin("alice")
        with pytest.raises(KafkaException) as denied:
            created(alice, [binding("User:alice", "*", operation=AclOperation.ALL)])
        assert denied.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
        # librdkafka drops DescribeAcls' top-level error (an empty list comes back, against Kafka
        # too); kafka-python raises it
        kp_alice = KafkaAdminClient(**b.kafka_python("alice"))
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_alice.describe_acls(KP_ANY_TOPIC)
        b.allow("alice", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
        assert kp_alice.describe_acls(KP_ANY_TOPIC)[0] == []
        kp_alice.close()
        with pytest.raises(KafkaException) as denied:        # DESCRIBE does not imply ALTER
            created(alice, [binding("User:alice", "t")])
        assert denied.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
        assert "User:alice denied CreateAcls" in b.process.log_text()


def test_invalid_acls_are_refused_one_by_one(tmp_path):
    with AclBroker(tmp_path) as b:
        admin = b.admin()
        results = admin.create_acls([binding("User:alice", "ok"), binding("alice-without-type", "bad")],
                                        request_timeout=10)
        outcomes = {}
        for acl, future in results.items():
            try:
                future.result()
                outcomes[acl.principal] = "ok"
            except KafkaException as exc:
                outcomes[acl.principal] = exc.args[0].name()
        assert outcomes == {"User:alice": "ok", "alice-without-type": "INVALID_REQUEST"}


def test_without_an_authorizer_the_acl_apis_say_security_is_disabled(tmp_path):
    with BrokerProcess(tmp_path) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        with pytest.raises(KafkaException) as disabled:
            created(admin, [binding("User:alice", "t")])
        assert disabled.value.args[0].name() == "SECURITY_DISABLED"
