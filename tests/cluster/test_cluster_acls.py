"""ACLs in a cluster live in ZooKeeper, in Kafka's layout: what one broker is told, every broker
enforces and lists, and ACLs written by Kafka's own tools are picked up.

Three PLAINTEXT brokers run Kafka's AclAuthorizer with allow.everyone.if.no.acl.found, so
clients (User:ANONYMOUS) and the brokers' own replication work until an ACL says otherwise.
The AdminClient picks which broker handles a CreateAcls or DeleteAcls, so every check of "broker
i sees it" is made on each of the three, asking broker i alone: DescribeAcls over a socket of its
own, or a consumer reading a partition that only broker i hosts.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from kafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest
from kazoo.client import KazooClient

from kwire.cluster.acl_store import CHANGE_EXPIRATION_MS, AclZnodes
from kwire.testing.cluster import ClusterProcess, send_request
from tests.cluster.conftest import require_zookeeper
from tests.support.counting import wait_for
from tests.support.proxy import TcpProxy

ACL_PROPERTIES = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "allow.everyone.if.no.acl.found": "true"}
ANONYMOUS = "User:ANONYMOUS"
PROPAGATION_S = 2.0          # "within a second or two"


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the module (each test uses resources of its own): a start costs seconds."""
    require_zookeeper()
    with ClusterProcess(3, properties=ACL_PROPERTIES) as c:
        yield c


@pytest.fixture
def zk(cluster):
    client = KazooClient(cluster.zookeeper.connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def described(cluster, broker: int, resource_type: ResourceType = ResourceType.ANY,
              name: str | None = None) -> set[tuple]:
    """What broker ``broker`` alone answers to DescribeAcls: {(type, name, pattern, principal,
    operation, permission)} with Kafka's wire codes turned into confluent's enum names."""
    request = DescribeAclsRequest[1](resource_type_filter=resource_type.value, resource_name_filter=name,
                                     pattern_type_filter=ResourcePatternType.ANY.value, principal_filter=None,
                                     host_filter=None, operation=AclOperation.ANY.value,
                                     permission_type=AclPermissionType.ANY.value)
    response = send_request(cluster.broker(broker).bootstrap, request).to_dict()
    assert response["error_code"] == 0, response
    return {(ResourceType(r["resource_type"]).name, r["resource_name"], ResourcePatternType(r["pattern_type"]).name,
             a["principal"], AclOperation(a["operation"]).name, AclPermissionType(a["permission_type"]).name)
            for r in response["resources"] for a in r["acls"]}


def wait_everywhere(cluster, predicate, what: str, timeout: float = PROPAGATION_S) -> float:
    """Wait until ``predicate(broker)`` holds for brokers 1..3; the seconds it took."""
    started = time.monotonic()
    wait_for(lambda: all(predicate(i) for i in (1, 2, 3)), timeout, what)
    return time.monotonic() - started


def admin_on(cluster, broker: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.broker(broker).bootstrap})


def create_one_partition_per_broker(cluster, topic: str) -> None:
    """Partition p on broker p + 1 only, one record in each."""
    admin = admin_on(cluster, 1)
    admin.create_topics([NewTopic(topic, num_partitions=3, replica_assignment=[[1], [2], [3]])])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.timeout.ms": 15000})
    for p in range(3):
        producer.produce(topic, f"record-{p}".encode(), partition=p)
    assert producer.flush(20) == 0


def consume(cluster, broker: int, topic: str, settings: dict | None = None) -> list[bytes] | str:
    """Read partition ``broker - 1`` (hosted by that broker alone) from the start, bootstrapped
    on that broker (``settings``: another listener, a login): the first record, or the name of
    the error the consumer reports."""
    consumer = Consumer({"bootstrap.servers": cluster.broker(broker).bootstrap, **(settings or {}),
                         "group.id": "acl-readers", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, broker - 1, OFFSET_BEGINNING)])
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error().name() if msg.error() else [msg.value()]
        return []
    finally:
        consumer.close()


def read_denied(topic: str, pattern=ResourcePatternType.LITERAL) -> list[AclBinding]:
    """DENY READ for User:ANONYMOUS, and ALLOW DESCRIBE: once a topic has ACLs, the no-ACL default
    no longer applies to it, and a consumer denied DESCRIBE only sees the topic vanish."""
    return [AclBinding(ResourceType.TOPIC, topic, pattern, ANONYMOUS, "*", operation, permission)
            for operation, permission in ((AclOperation.READ, AclPermissionType.DENY),
                                          (AclOperation.DESCRIBE, AclPermissionType.ALLOW))]


def entries(topic: str, pattern: str = "LITERAL") -> set[tuple]:
    """What DescribeAcls lists for ``read_denied(topic)``."""
    return {("TOPIC", topic, pattern, ANONYMOUS, "READ", "DENY"),
            ("TOPIC", topic, pattern, ANONYMOUS, "DESCRIBE", "ALLOW")}


def create_acls(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings).values():
        future.result(15)


def test_an_acl_created_on_one_broker_is_enforced_listed_and_deleted_everywhere(cluster, zk):
    create_one_partition_per_broker(cluster, "guarded")
    assert all(consume(cluster, b, "guarded") == [f"record-{b - 1}".encode()] for b in (1, 2, 3))

    admin = admin_on(cluster, 1)        # kept: the futures die with their client
    create_acls(admin, read_denied("guarded"))
    took = wait_everywhere(cluster, lambda b: described(cluster, b, ResourceType.TOPIC, "guarded")
                           == entries("guarded"), "the ACLs listed by every broker")
    assert took < PROPAGATION_S
    assert [consume(cluster, b, "guarded") for b in (1, 2, 3)] == ["TOPIC_AUTHORIZATION_FAILED"] * 3

    # Kafka's layout, as kafka-acls.sh --authorizer-properties zookeeper.connect=... reads it
    data, _ = zk.get("/kafka-acl/Topic/guarded")
    assert json.loads(data)["version"] == 1
    assert sorted(json.loads(data)["acls"], key=lambda a: a["operation"]) == [
        {"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": ANONYMOUS, "permissionType": "Deny", "operation": "Read", "host": "*"}]
    children = zk.get_children("/kafka-acl-changes")
    assert all(re.fullmatch(r"acl_changes_\d{10}", n) for n in children)
    assert b"TOPIC:guarded" in {zk.get(f"/kafka-acl-changes/{n}")[0] for n in children}
    # no ACL file beside the logs: ZooKeeper only
    assert not any(name == "__kwire_acls.json" for b in cluster.brokers.values()
                   for _, _, files in os.walk(b.data_dir) for name in files)

    admin = admin_on(cluster, 3)
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL,
                                                  None, None, AclOperation.READ, AclPermissionType.ANY)])
    assert [(b.operation, b.permission_type) for f in deleted.values() for b in f.result(15)] == [
        (AclOperation.READ, AclPermissionType.DENY)]
    assert [a["operation"] for a in json.loads(zk.get("/kafka-acl/Topic/guarded")[0])["acls"]] == ["Describe"]
    took = wait_everywhere(cluster, lambda b: described(cluster, b, ResourceType.TOPIC, "guarded") == {
        ("TOPIC", "guarded", "LITERAL", ANONYMOUS, "DESCRIBE", "ALLOW")}, "the DENY gone from every broker")
    assert took < PROPAGATION_S
    assert consume(cluster, 1, "guarded") == "TOPIC_AUTHORIZATION_FAILED"      # no ALLOW READ either
    for f in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "guarded", ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)]).values():
        f.result(15)
    assert zk.exists("/kafka-acl/Topic/guarded") is None        # no ACLs left: no znode
    wait_everywhere(cluster, lambda b: not described(cluster, b, ResourceType.TOPIC, "guarded"),
                    "no ACLs left on any broker")
    assert consume(cluster, 1, "guarded") == [b"record-0"]        # the no-ACL default again


def test_prefixed_acls_use_the_extended_paths(cluster, zk):
    create_one_partition_per_broker(cluster, "pre-orders")
    admin = admin_on(cluster, 2)
    create_acls(admin, read_denied("pre-", ResourcePatternType.PREFIXED))
    wait_everywhere(cluster, lambda b: entries("pre-", "PREFIXED") <= described(cluster, b),
                    "the prefixed ACLs on every broker")
    assert [consume(cluster, b, "pre-orders") for b in (1, 2, 3)] == ["TOPIC_AUTHORIZATION_FAILED"] * 3

    assert len(json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/pre-")[0])["acls"]) == 2
    notices = [json.loads(zk.get(f"/kafka-acl-extended-changes/{n}")[0])
               for n in zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "pre-", "patternType": "PREFIXED"} in notices

    admin = admin_on(cluster, 1)
    for future in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "pre-", ResourcePatternType.PREFIXED, None,
                                                      None, AclOperation.ANY, AclPermissionType.ANY)]).values():
        future.result(15)
    wait_everywhere(cluster, lambda b: not entries("pre-", "PREFIXED") & described(cluster, b),
                    "the prefixed ACLs gone everywhere")
    assert zk.exists("/kafka-acl-extended/prefixed/Topic/pre-") is None


def test_acls_written_by_a_kafka_tool_are_picked_up(cluster, zk):
    # what kafka-acls.sh --authorizer-properties zookeeper.connect=... --add writes: the znode,
    # then a change notice (two separate writes, not one transaction)
    create_one_partition_per_broker(cluster, "from-kafka")
    zk.create("/kafka-acl/Topic/from-kafka", json.dumps({"version": 1, "acls": [
        {"principal": "User:ANONYMOUS", "permissionType": "Deny", "operation": "Read", "host": "*"},
        {"principal": "User:ANONYMOUS", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}).encode())
    zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:from-kafka", sequence=True)
    took = wait_everywhere(cluster, lambda b: described(cluster, b, ResourceType.TOPIC, "from-kafka")
                           == entries("from-kafka"), "the Kafka-written ACLs on every broker")
    assert took < PROPAGATION_S
    assert consume(cluster, 3, "from-kafka") == "TOPIC_AUTHORIZATION_FAILED"

    # --remove: the znode deleted, then a notice
    zk.delete("/kafka-acl/Topic/from-kafka")
    zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:from-kafka", sequence=True)
    wait_everywhere(cluster, lambda b: not described(cluster, b, ResourceType.TOPIC, "from-kafka"),
                    "the removed ACLs gone everywhere")
    assert consume(cluster, 2, "from-kafka") == [b"record-1"]


def test_concurrent_creations_on_every_broker_for_one_topic_lose_nothing(cluster, zk):
    # three brokers racing on one znode: the losers re-read and write again (version conflicts)
    R = CreateAclsRequest[1]

    def create_on(broker: int) -> list[int]:
        codes = []
        for k in range(10):
            creation = R.AclCreation(resource_type=ResourceType.TOPIC.value, resource_name="contended",
                                     resource_pattern_type=ResourcePatternType.LITERAL.value,
                                     principal=f"User:writer-{broker}-{k}", host="*",
                                     operation=AclOperation.READ.value, permission_type=AclPermissionType.ALLOW.value)
            response = send_request(cluster.broker(broker).bootstrap, R(creations=[creation]), timeout=30)
            codes += [r.error_code for r in response.results]
        return codes

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        codes = [c for result in pool.map(create_on, (1, 2, 3)) for c in result]
    assert codes == [0] * 30
    principals = {f"User:writer-{b}-{k}" for b in (1, 2, 3) for k in range(10)}
    assert {a["principal"] for a in json.loads(zk.get("/kafka-acl/Topic/contended")[0])["acls"]} == principals
    wait_everywhere(cluster, lambda b: {e[3] for e in described(cluster, b, ResourceType.TOPIC, "contended")}
                    == principals, "all 30 ACLs on every broker")


def test_change_notices_are_purged_by_age_oldest_first(cluster, zk):
    # Kafka keeps a notice 15 minutes (changeExpirationMs) by its ctime; a test cannot wait that
    # long, so the brokers' purge is called with a clock 15 minutes ahead: every notice goes
    # but those created within the last 15 minutes of that clock
    for name in ("purge-a", "purge-b"):
        zk.create("/kafka-acl-changes/acl_changes_", f"TOPIC:{name}".encode(), sequence=True)
        time.sleep(0.05)            # distinct ctimes
    names = sorted(zk.get_children("/kafka-acl-changes"))
    newest = zk.exists(f"/kafka-acl-changes/{names[-1]}").ctime
    znodes = AclZnodes(zk)
    assert znodes.purge("/kafka-acl-changes", names, newest + 1000, CHANGE_EXPIRATION_MS) == 0
    purged = znodes.purge("/kafka-acl-changes", names, newest + CHANGE_EXPIRATION_MS, CHANGE_EXPIRATION_MS)
    left = sorted(zk.get_children("/kafka-acl-changes"))
    assert purged == len(names) - len(left) and purged > 0
    assert left == names[len(names) - len(left):]             # the youngest ones, the newest kept
    assert all(newest + CHANGE_EXPIRATION_MS - zk.exists(f"/kafka-acl-changes/{n}").ctime <= CHANGE_EXPIRATION_MS
               for n in left)


def finalized_features(cluster, broker: int) -> tuple[dict[str, int], int]:
    """What broker ``broker`` alone advertises in ApiVersions: (finalized levels, epoch)."""
    from kafka.protocol.metadata import ApiVersionsRequest
    response = send_request(cluster.broker(broker).bootstrap, ApiVersionsRequest[3](
        client_software_name="t", client_software_version="1")).to_dict()
    return ({f["name"]: f["max_version_level"] for f in response["finalized_features"]},
            response["finalized_features_epoch"])


def update_features(cluster, broker: int, feature: str, level: int, upgrade_type: int) -> dict:
    from kafka.protocol.admin.cluster import UpdateFeaturesRequest as R
    return send_request(cluster.broker(broker).bootstrap, R[1](timeout_ms=10000, validate_only=False, feature_updates=[
        R.FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=upgrade_type)])).to_dict()


def test_feature_levels_updated_on_one_broker_reach_every_broker_and_the_feature_znode(cluster, zk):
    """Not ACLs, but ZooKeeper state in Kafka's layout too (sharing this module's cluster): the
    /feature znode holds Kafka's FeatureZNode JSON and its version is the epoch that every
    broker advertises after an UpdateFeatures taken by any one of them."""
    data, stat = zk.get("/feature")
    defaults = {"metadata.version": 27, "transaction.version": 1, "group.version": 1, "share.version": 1}
    assert json.loads(data) == {"version": 2, "status": 1,
                                "features": {n: {"max_version_level": v} for n, v in defaults.items()}}
    wait_everywhere(cluster, lambda i: finalized_features(cluster, i) == (defaults, stat.version), "the defaults")
    try:
        assert update_features(cluster, 3, "transaction.version", 2, 1)["error_code"] == 0
        upgraded = {**defaults, "transaction.version": 2}
        wait_everywhere(cluster, lambda i: finalized_features(cluster, i) == (upgraded, stat.version + 1), "TV2")
        data, after = zk.get("/feature")
        assert after.version == stat.version + 1
        assert json.loads(data)["features"]["transaction.version"] == {"max_version_level": 2}
        refused = update_features(cluster, 1, "transaction.version", 1, 1)     # a downgrade typed as upgrade
        assert refused["error_code"] == 95 and "Can't downgrade" in refused["error_message"]
    finally:
        assert update_features(cluster, 2, "transaction.version", 1, 2)["error_code"] == 0
    wait_everywhere(cluster, lambda i: finalized_features(cluster, i) == (defaults, stat.version + 2), "TV1 again")


def test_acls_survive_restarting_every_broker(cluster):
    admin = admin_on(cluster, 1)
    create_acls(admin, [*read_denied("kept"), AclBinding(
        ResourceType.GROUP, "kept-", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.READ,
        AclPermissionType.ALLOW)])
    wanted = entries("kept") | {("GROUP", "kept-", "PREFIXED", "User:bob", "READ", "ALLOW")}
    for i in (1, 2, 3):
        cluster.stop(i)
    cluster.start()
    cluster.wait_until_ready()
    assert all(wanted <= described(cluster, b) for b in (1, 2, 3))
    create_one_partition_per_broker(cluster, "kept")
    assert consume(cluster, 2, "kept") == "TOPIC_AUTHORIZATION_FAILED"


def test_zookeeper_down_fails_the_request_and_applies_nothing(cluster):
    bindings = read_denied("while-zk-down")
    cluster.zookeeper.stop()
    try:
        admin = admin_on(cluster, 1)
        started = time.monotonic()
        futures = admin.create_acls(bindings, request_timeout=30)
        for future in futures.values():
            with pytest.raises(KafkaException) as refused:
                future.result(40)
            error = refused.value.args[0]       # UNKNOWN_SERVER_ERROR (-1), librdkafka's "UNKNOWN"
            assert error.code() == KafkaError.UNKNOWN and "ZooKeeper" in error.str(), error
        took = time.monotonic() - started
        assert took < 15, f"CreateAcls answered after {took:.1f} s"
    finally:
        cluster.zookeeper.start()
    cluster.wait_until_ready()
    assert all(not entries("while-zk-down") & described(cluster, b) for b in (1, 2, 3))
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        assert zk.exists("/kafka-acl/Topic/while-zk-down") is None        # nothing reached ZooKeeper
        assert b"TOPIC:while-zk-down" not in {zk.get(f"/kafka-acl-changes/{n}")[0]
                                              for n in zk.get_children("/kafka-acl-changes")}
    finally:
        zk.stop()
        zk.close()

    # ZooKeeper back: the same request succeeds and reaches every broker
    wait_for(lambda: _created(admin, bindings), 20, "CreateAcls to succeed again")
    wait_everywhere(cluster, lambda b: entries("while-zk-down") <= described(cluster, b), "the ACLs on every broker")


def _created(admin: AdminClient, bindings: list[AclBinding]) -> bool:
    try:
        create_acls(admin, bindings)
        return True
    except KafkaException:
        return False


def test_a_broker_whose_zookeeper_session_expired_reads_every_acl_again(tmp_path):
    """Broker 3 is cut off from ZooKeeper until its session expires; meanwhile an ACL is written
    and its change notice purged (as the other brokers do after 15 minutes).  Following notices
    would miss it: only reading everything again after the session loss finds it."""
    require_zookeeper()
    cluster = ClusterProcess(3, properties=ACL_PROPERTIES, data_dir=tmp_path)
    proxy = TcpProxy("127.0.0.1", int(cluster.zookeeper.connect.rsplit(":", 1)[1]))
    cluster.broker(3).properties["zookeeper.connect"] = proxy.address
    try:
        cluster.start()
        cluster.wait_until_ready()
        zk = KazooClient(cluster.zookeeper.connect)
        zk.start(timeout=10)
        proxy.partition()
        zk.create("/kafka-acl/Topic/late", json.dumps({"version": 1, "acls": [
            {"principal": ANONYMOUS, "permissionType": "Deny", "operation": "Read", "host": "*"},
            {"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Describe", "host": "*"}]}).encode())
        zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:late", sequence=True)
        wait_for(lambda: all(described(cluster, b, ResourceType.TOPIC, "late") for b in (1, 2)), PROPAGATION_S,
                 "the ACLs on the brokers still connected")
        for name in zk.get_children("/kafka-acl-changes"):
            zk.delete(f"/kafka-acl-changes/{name}")
        wait_for(lambda: zk.exists("/brokers/ids/3") is None, 30, "broker 3's session to expire")
        assert not described(cluster, 3, ResourceType.TOPIC, "late")
        proxy.heal()
        wait_for(lambda: described(cluster, 3, ResourceType.TOPIC, "late") == entries("late"), 20,
                 "broker 3 to read every ACL again")
        zk.stop()
        zk.close()
    finally:
        cluster.close()
        proxy.close()


def test_a_sasl_users_acls_reach_every_broker(tmp_path):
    """Clients log in with SASL/PLAIN on CLIENT; the brokers replicate over a PLAINTEXT INTERNAL
    listener as User:ANONYMOUS, a super user there (as is ``admin``)."""
    require_zookeeper()
    properties = {**ACL_PROPERTIES, "allow.everyone.if.no.acl.found": "false",
                  "super.users": "User:admin;User:ANONYMOUS", "inter.broker.listener.name": "INTERNAL",
                  "sasl.enabled.mechanisms": "PLAIN",
                  "listener.name.client.plain.sasl.jaas.config": (
                      "org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'user_admin="admin-secret" user_alice="alice-secret";')}
    with ClusterProcess(3, properties=properties, listeners={"CLIENT": "SASL_PLAINTEXT", "INTERNAL": "PLAINTEXT"},
                        data_dir=tmp_path) as cluster:
        def login(user: str, broker: int) -> dict:
            return {"bootstrap.servers": cluster.broker(broker).address("CLIENT"),
                    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": user, "sasl.password": f"{user}-secret"}

        create_one_partition_per_broker(cluster, "alices")
        admin = AdminClient(login("admin", 1))

        def grant(resource_type: ResourceType, name: str, operation: AclOperation) -> None:
            create_acls(admin, [AclBinding(resource_type, name, ResourcePatternType.LITERAL, "User:alice", "*",
                                           operation, AclPermissionType.ALLOW)])
            entry = (resource_type.name, name, "LITERAL", "User:alice", operation.name, "ALLOW")
            wait_everywhere(cluster, lambda b: entry in described(cluster, b), f"{entry} on every broker")

        grant(ResourceType.GROUP, "acl-readers", AclOperation.READ)
        grant(ResourceType.TOPIC, "alices", AclOperation.WRITE)          # implies DESCRIBE, not READ
        assert [consume(cluster, b, "alices", login("alice", b)) for b in (1, 2, 3)] == \
            ["TOPIC_AUTHORIZATION_FAILED"] * 3
        grant(ResourceType.TOPIC, "alices", AclOperation.READ)
        assert [consume(cluster, b, "alices", login("alice", b)) for b in (1, 2, 3)] == \
            [[b"record-0"], [b"record-1"], [b"record-2"]]


def client_metrics_on(cluster, broker: int, name: str) -> dict[str, str]:
    """What broker ``broker`` alone answers to DescribeConfigs of client-metrics ``name``."""
    from kafka.protocol.admin import DescribeConfigsRequest as R
    response = send_request(cluster.broker(broker).bootstrap, R[4](resources=[R.DescribeConfigsResource(
        resource_type=16, resource_name=name, configuration_keys=None)], include_synonyms=False,
        include_documentation=False)).to_dict()
    result, = response["results"]
    return {c["name"]: c["value"] for c in result["configs"]} if result["error_code"] == 0 else {}


def test_client_metrics_subscriptions_set_on_one_broker_reach_every_broker_and_zookeeper(cluster, zk):
    """Client telemetry's subscriptions (KIP-714) in ZooKeeper-era Kafka's layout, sharing this
    module's cluster: /config/client-metrics/<name>, read by every broker."""
    from kafka.admin import AlterConfigOp, ConfigResource, KafkaAdminClient
    name = "slow-consumers"
    wanted = {"metrics": "org.apache.kafka.consumer.fetch", "interval.ms": "2000"}
    with KafkaAdminClient(bootstrap_servers=cluster.broker(3).bootstrap) as admin:
        result = admin.alter_configs([ConfigResource("CLIENT_METRICS", name, {
            k: (AlterConfigOp.SET, v) for k, v in wanted.items()})], incremental=True)
        assert result["client_metrics"][name] == "OK", result
        wait_everywhere(cluster, lambda i: {k: client_metrics_on(cluster, i, name).get(k) for k in wanted} == wanted,
                        "the subscription on every broker", timeout=10)
        data, _ = zk.get(f"/config/client-metrics/{name}")
        assert json.loads(data)["config"] == wanted
        result = admin.alter_configs([ConfigResource("CLIENT_METRICS", name, {
            k: (AlterConfigOp.DELETE, None) for k in wanted})], incremental=True)
        assert result["client_metrics"][name] == "OK", result
    wait_everywhere(cluster, lambda i: not client_metrics_on(cluster, i, name).get("metrics"), "its removal",
                    timeout=10)
