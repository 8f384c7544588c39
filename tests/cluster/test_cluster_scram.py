"""SCRAM users in a cluster live in ZooKeeper (/config/users), as in a ZooKeeper-era Kafka:
set through any broker, every broker knows them; written by Kafka's own tools straight into
ZooKeeper, every broker picks them up; nothing half-written is acknowledged when ZooKeeper
is gone.  Users are managed with ``kwire scram`` and confluent-kafka's AdminClient, read back
per broker with DescribeUserScramCredentials sent to that broker, and in ZooKeeper with kazoo.
The last test logs in: a user created through broker 1 produces and consumes through broker 3's
SASL_PLAINTEXT listener (confluent-kafka with SCRAM-SHA-512, kafka-python with SCRAM-SHA-256),
and once deleted is refused."""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from kwire.security.scram import format_kafka_credential, scram_credential
from kwire.security.scram_store import FILE_NAME
from kwire.testing.cluster import send_request
from tests.support.counting import create_topic, wait_for
from tests.support.roundtrip import produce_and_consume

SHA256, SHA512 = 1, 2
RESOURCE_NOT_FOUND, REQUEST_TIMED_OUT = 91, 7
CREDENTIAL = re.compile(r"salt=[A-Za-z0-9+/]+=*,stored_key=[A-Za-z0-9+/]+=*,server_key=[A-Za-z0-9+/]+=*,"
                        r"iterations=\d+")


def kwire_scram(bootstrap: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kwire", "scram", "--bootstrap-server", bootstrap,
                           "--timeout-ms", "15000", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def described(address: str) -> dict[str, dict[int, int]]:
    """{user: {mechanism: iterations}} as the broker at ``address`` itself answers."""
    response = send_request(address, DescribeUserScramCredentialsRequest[0](users=None)).to_dict()
    assert response["error_code"] == 0, response
    return {r["user"]: {c["mechanism"]: c["iterations"] for c in r["credential_infos"]}
            for r in response["results"]}


def every_broker_describes(cluster, expected: dict, timeout: float = 5.0) -> float:
    """Wait until every live broker describes exactly ``expected``; the seconds it took.
    AssertionError naming what each broker described last."""
    start = time.monotonic()
    while True:
        seen = {i: described(b.bootstrap) for i, b in cluster.brokers.items() if b.alive()}
        if all(users == expected for users in seen.values()):
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, f"after {timeout} s, brokers describe {seen}, not {expected}"
        time.sleep(0.05)


@contextlib.contextmanager
def zookeeper(cluster):
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def user_znode(zk, node: str) -> dict:
    return json.loads(zk.get(f"/config/users/{node}")[0])


def notifications(zk) -> list[dict]:
    return [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]


def alter(bootstrap: str, changes) -> dict:
    """confluent-kafka's AdminClient.alter_user_scram_credentials; {user: None or the error}."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = {}
    for user, future in admin.alter_user_scram_credentials(changes, request_timeout=30).items():
        try:
            out[user] = future.result(40)
        except Exception as exc:        # KafkaException carrying the broker's error
            out[user] = exc
    return out


def test_users_set_through_one_broker_reach_every_broker_and_zookeeper(cluster):
    kwire_scram(cluster.broker(1).bootstrap, "set", "--user", "alice", "--iterations", "8192",
                "--password", "alice-secret")
    assert alter(cluster.broker(1).bootstrap, [UserScramCredentialUpsertion(
        "bob smith", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")]) == {"bob smith": None}
    took = every_broker_describes(cluster, {"alice": {SHA256: 8192}, "bob smith": {SHA512: 4096}})
    assert took < 2.0, f"the users reached every broker after {took:.2f} s"

    with zookeeper(cluster) as zk:
        assert sorted(zk.get_children("/config/users")) == ["alice", "bob%20smith"]
        alice = user_znode(zk, "alice")
        assert alice["version"] == 1 and list(alice["config"]) == ["SCRAM-SHA-256"]
        assert CREDENTIAL.fullmatch(alice["config"]["SCRAM-SHA-256"])
        assert alice["config"]["SCRAM-SHA-256"].endswith(",iterations=8192")
        raw = b"".join(zk.get(f"/config/users/{n}")[0] for n in ("alice", "bob%20smith"))
        assert b"alice-secret" not in raw and b"bob-secret" not in raw
        assert {"version": 2, "entity_path": "users/bob%20smith"} in notifications(zk)

    kwire_scram(cluster.broker(2).bootstrap, "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-256")
    every_broker_describes(cluster, {"bob smith": {SHA512: 4096}})
    with zookeeper(cluster) as zk:
        assert user_znode(zk, "alice") == {"version": 1, "config": {}}     # kept, as Kafka keeps it
        assert notifications(zk)[-1] == {"version": 2, "entity_path": "users/alice"}
    # a deletion of what is not there is refused by whichever broker is asked
    R = AlterUserScramCredentialsRequest[0]
    response = send_request(cluster.broker(3).bootstrap, R(
        deletions=[R.ScramCredentialDeletion(name="alice", mechanism=SHA256)], upsertions=[])).to_dict()
    assert [(r["user"], r["error_code"]) for r in response["results"]] == [("alice", RESOURCE_NOT_FOUND)]


def test_credentials_written_by_kafka_tools_are_picked_up_and_quotas_kept(cluster):
    """What ``kafka-configs.sh --zookeeper ... --alter --entity-type users`` writes: the user
    znode (with a quota beside the credential), then a change notification."""
    credential = format_kafka_credential(scram_credential("SCRAM-SHA-256", "carol-secret", iterations=4096))
    with zookeeper(cluster) as zk:
        zk.create("/config/users/carol%40example.com", json.dumps(
            {"version": 1, "config": {"producer_byte_rate": "1024", "SCRAM-SHA-256": credential}}).encode())
        zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol%40example.com"}',
                  sequence=True)
    every_broker_describes(cluster, {"carol@example.com": {SHA256: 4096}})

    assert alter(cluster.broker(3).bootstrap, [UserScramCredentialUpsertion(
        "carol@example.com", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-512")]) == {
        "carol@example.com": None}
    every_broker_describes(cluster, {"carol@example.com": {SHA256: 4096, SHA512: 8192}})
    assert alter(cluster.broker(2).bootstrap, [UserScramCredentialDeletion(
        "carol@example.com", ScramMechanism.SCRAM_SHA_256)]) == {"carol@example.com": None}
    every_broker_describes(cluster, {"carol@example.com": {SHA512: 8192}})
    with zookeeper(cluster) as zk:
        config = user_znode(zk, "carol%40example.com")["config"]
        assert sorted(config) == ["SCRAM-SHA-512", "producer_byte_rate"] and config["producer_byte_rate"] == "1024"
        # kafka-configs.sh --delete-config SCRAM-SHA-512: the broker forgets the user
        zk.set("/config/users/carol%40example.com", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
        zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol%40example.com"}',
                  sequence=True)
    every_broker_describes(cluster, {})


def test_users_survive_restarts_and_a_broker_that_was_down_loads_them(cluster):
    kwire_scram(cluster.broker(1).bootstrap, "set", "--user", "dave", "--password", "dave-secret")
    cluster.stop(3)
    kwire_scram(cluster.broker(2).bootstrap, "set", "--user", "erin", "--mechanism", "SCRAM-SHA-512",
                "--password", "erin-secret")
    # a single-node credential file (say, from before the broker joined a cluster) is not read
    stale = scram_credential("SCRAM-SHA-256", "mallory-secret")
    leftover = os.path.join(cluster.broker(3).properties["log.dirs"], FILE_NAME)
    with open(leftover, "w") as f:
        json.dump({"version": 1, "users": {"mallory": {"SCRAM-SHA-256": {
            "salt": base64.b64encode(stale.salt).decode(), "stored_key": base64.b64encode(stale.stored_key).decode(),
            "server_key": base64.b64encode(stale.server_key).decode(), "iterations": 4096}}}}, f)
    cluster.start_broker(3)
    # loaded before it answers anything: no waiting
    assert described(cluster.broker(3).bootstrap) == {"dave": {SHA256: 4096}, "erin": {SHA512: 4096}}
    assert f"{leftover} is ignored in cluster mode" in cluster.broker(3).log_text()
    for i in (1, 2, 3):
        cluster.stop(i)
    cluster.start()
    for b in cluster.brokers.values():
        assert described(b.bootstrap) == {"dave": {SHA256: 4096}, "erin": {SHA512: 4096}}
    assert [f for b in cluster.brokers.values() for _r, _d, files in os.walk(b.data_dir)
            for f in files if f.startswith(FILE_NAME)] == [FILE_NAME]             # only the planted one


def test_without_zookeeper_an_alteration_fails_per_user_and_changes_nothing(cluster):
    kwire_scram(cluster.broker(1).bootstrap, "set", "--user", "frank", "--password", "frank-secret")
    every_broker_describes(cluster, {"frank": {SHA256: 4096}})
    cluster.zookeeper.stop()
    try:
        start = time.monotonic()
        results = alter(cluster.broker(1).bootstrap, [
            UserScramCredentialUpsertion("grace", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"g"),
            UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_256)])
        assert time.monotonic() - start < 10
        assert set(results) == {"grace", "frank"}
        assert all(r is not None and "REQUEST_TIMED_OUT" in str(r) for r in results.values()), results
        # nothing applied anywhere: logins go on with what ZooKeeper last held
        for b in cluster.brokers.values():
            assert described(b.bootstrap) == {"frank": {SHA256: 4096}}
    finally:
        cluster.zookeeper.start()
    with zookeeper(cluster) as zk:          # nothing of the refused request reached ZooKeeper
        assert zk.get_children("/config/users") == ["frank"]
        assert list(user_znode(zk, "frank")["config"]) == ["SCRAM-SHA-256"]
    wait_for(lambda: alter(cluster.broker(1).bootstrap, [UserScramCredentialUpsertion(
        "grace", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"g")]) == {"grace": None},
        30, "an alteration accepted once ZooKeeper is back")
    # a broker whose first connection attempt met the restarting ZooKeeper waits out kazoo's
    # connect timeout (about the session timeout, 6 s) before it reconnects and reloads
    every_broker_describes(cluster, {"frank": {SHA256: 4096}, "grace": {SHA256: 4096}}, timeout=20)


def alter_directly(address: str, upsert: dict[str, bytes] | None = None, delete: tuple[str, ...] = (),
                   timeout: float = 20, mechanism: int = SHA256) -> tuple[list, float]:
    """AlterUserScramCredentials sent to the broker at ``address`` itself (upsertions of
    {user: password}, salted as a client salts them, and deletions, all for ``mechanism``):
    ([(user, error_code)], seconds to the answer).  A client's admin API would send it to
    any broker of the cluster, the isolated one included."""
    R = AlterUserScramCredentialsRequest[0]
    digest = {SHA256: "sha256", SHA512: "sha512"}[mechanism]
    upsertions = []
    for user, password in (upsert or {}).items():
        salt = os.urandom(32)
        upsertions.append(R.ScramCredentialUpsertion(name=user, mechanism=mechanism, iterations=4096, salt=salt,
                                                     salted_password=hashlib.pbkdf2_hmac(digest, password,
                                                                                         salt, 4096)))
    request = R(deletions=[R.ScramCredentialDeletion(name=u, mechanism=mechanism) for u in delete],
                upsertions=upsertions)
    start = time.monotonic()
    response = send_request(address, request, timeout).to_dict()
    return [(r["user"], r["error_code"]) for r in response["results"]], time.monotonic() - start


def test_a_broker_cut_off_from_zookeeper_catches_up_after_the_heal(isolatable_cluster):
    cluster = isolatable_cluster
    address = {i: b.bootstrap for i, b in cluster.brokers.items()}      # not behind the proxies
    assert alter_directly(address[1], {"ivy": b"ivy-secret"})[0] == [("ivy", 0)]
    every_broker_describes(cluster, {"ivy": {SHA256: 4096}})
    cluster.isolate(3)
    cut_at = time.monotonic()
    try:
        # broker 3 cannot reach ZooKeeper: an answer within zookeeper.session.timeout.ms (6 s), not a hang
        results, took = alter_directly(address[3], {"judy": b"judy-secret"})
        assert results == [("judy", REQUEST_TIMED_OUT)] and took < 10
        assert alter_directly(address[1], {"henry": b"henry-secret"})[0] == [("henry", 0)]
        assert alter_directly(address[2], delete=("ivy",))[0] == [("ivy", 0)]
        time.sleep(max(0.0, cut_at + 10 - time.monotonic()))       # broker 3's session expires
    finally:
        cluster.heal()
    every_broker_describes(cluster, {"henry": {SHA256: 4096}}, timeout=30)


def test_concurrent_writers_of_the_same_user_znodes_lose_nothing(cluster):
    """Brokers 1 and 2 write the same user znodes at once, one mechanism each, while a quota
    tool (kazoo, read-modify-write on the znode version) keeps changing a quota in them: the
    writes that lose a race read again, so every user ends with both credentials and the
    tool's last quota."""
    users = [f"user-{i}" for i in range(8)]
    with zookeeper(cluster) as zk:
        for u in users:
            zk.create(f"/config/users/{u}", b'{"version":1,"config":{"producer_byte_rate":"0"}}')
    outcomes: list = []
    last_quota: dict[str, int] = {}
    stop = threading.Event()

    def alter_through(broker: int, mechanism: int) -> None:
        for _ in range(3):
            outcomes.append(alter_directly(cluster.broker(broker).bootstrap, dict.fromkeys(users, b"pw"),
                                           mechanism=mechanism)[0])

    def quota_tool() -> None:
        with zookeeper(cluster) as zk:
            n = 0
            while not stop.is_set():
                n += 1
                for u in users:
                    while True:
                        data, stat = zk.get(f"/config/users/{u}")
                        znode = json.loads(data)
                        znode["config"]["producer_byte_rate"] = str(n)
                        try:
                            zk.set(f"/config/users/{u}", json.dumps(znode).encode(), version=stat.version)
                            last_quota[u] = n
                            break
                        except BadVersionError:
                            continue
    tool = threading.Thread(target=quota_tool)
    tool.start()
    writers = [threading.Thread(target=alter_through, args=args) for args in ((1, SHA256), (2, SHA512))]
    for t in writers:
        t.start()
    for t in writers:
        t.join(60)
    stop.set()
    tool.join(30)
    assert len(outcomes) == 6 and all(result == [(u, 0) for u in users] for result in outcomes), outcomes
    every_broker_describes(cluster, {u: {SHA256: 4096, SHA512: 4096} for u in users})
    with zookeeper(cluster) as zk:
        for u in users:
            config = user_znode(zk, u)["config"]
            assert sorted(config) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"], config
            assert config["producer_byte_rate"] == str(last_quota[u])
        assert sum(n["entity_path"] == "users/user-0" for n in notifications(zk)) == 6

# -- end to end: SASL/SCRAM logins on every broker ---------------------------------------------
SASL_LISTENERS = {"PLAINTEXT": "PLAINTEXT", "CLIENT": "SASL_PLAINTEXT"}


def scram_login(bootstrap: str, user: str, password: str, mechanism: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def login_error(config: dict, timeout: float = 10) -> KafkaError | None:
    """None once a confluent-kafka client with ``config`` has logged in and read Metadata,
    else the error librdkafka reports (an _AUTHENTICATION error for a refused login)."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    try:
        producer.list_topics(timeout=timeout)
        return None
    except KafkaException as exc:
        producer.poll(0.5)                  # error_cb is served by poll
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        return (refused or errors or [exc.args[0]])[0]


def test_a_user_created_through_broker_1_logs_in_on_broker_3_until_deleted(cluster_factory):
    cluster = cluster_factory(3, listeners=SASL_LISTENERS, properties={
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": "50"})
    create_topic(cluster.bootstrap, "scram-e2e", partitions=3, rf=3)
    broker3 = cluster.broker(3).address("CLIENT")
    alice = scram_login(broker3, "alice", "alice-secret", "SCRAM-SHA-512")
    assert login_error(alice, timeout=5).code() == KafkaError._AUTHENTICATION      # no such user yet

    kwire_scram(cluster.broker(1).bootstrap, "set", "--user", "alice", "--mechanism", "SCRAM-SHA-512",
                "--password", "alice-secret")
    assert alter(cluster.broker(1).bootstrap, [UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")]) == {"bob": None}
    wait_for(lambda: login_error(alice, timeout=2) is None, 2, "alice's first login on broker 3")
    read = produce_and_consume(alice, "scram-e2e", 20, b"alice-")      # three partitions: any order
    assert sorted(read) == sorted(b"alice-%d" % i for i in range(20))

    producer = KafkaProducer(bootstrap_servers=broker3, security_protocol="SASL_PLAINTEXT", acks="all",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
                             sasl_plain_password="bob-secret")
    sent = [producer.send("scram-e2e", b"bob-%d" % i, partition=0) for i in range(10)]
    producer.flush(30)
    assert all(f.get(timeout=10).topic == "scram-e2e" for f in sent)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker3, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
                             sasl_plain_password="bob-secret", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    consumer.assign([TopicPartition("scram-e2e", 0)])
    read = []
    for record in consumer:             # partition 0 also holds some of alice's records
        if record.value.startswith(b"bob-"):
            read.append(record.value)
        if len(read) == 10:
            break
    consumer.close()
    assert read == [b"bob-%d" % i for i in range(10)]

    kwire_scram(cluster.broker(1).bootstrap, "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-512")
    took = every_broker_describes(cluster, {"bob": {SHA256: 4096}})
    assert took < 2.0, f"the deletion reached every broker after {took:.2f} s"
    refused = login_error(alice, timeout=2)
    assert refused is not None and refused.code() == KafkaError._AUTHENTICATION, refused
    assert "SASL authentication error" in refused.str(), refused
    assert "SASL authentication failed" in cluster.broker(3).log_text()
    assert "alice-secret" not in cluster.broker(3).log_text()
