"""SASL re-authentication (KIP-368) with ``connections.max.reauth.ms=2000``, through stock clients.

A ``kwire serve`` process with a SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256) whose
sessions last 2 s.  confluent-kafka (librdkafka) and kafka-python re-authenticate on their
connections and keep producing and consuming, with nothing lost or repeated; aiokafka does not
re-authenticate, has its connections closed at their next request after 2 s and reconnects.
A raw client built from kafka-python's protocol classes shows the rules: the lifetime it is
told, the close after it, a second login on the same connection, another user refused.  The
broker logs each (re-)authentication at DEBUG and each close at INFO; the tests count those.

The consumers long-poll for at most 100 ms: clients re-authenticate at 85-95 % of the
lifetime, 100-300 ms before it ends here, and a request queued behind a parked fetch is only
read once the fetch is answered (as in Kafka, which reads one request at a time), possibly
after the session's end.  With lifetimes of minutes or hours, as in production, that margin
is large."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from kwire.testing.process import BrokerProcess, free_port
from tests.support.raw_client import RawClient, sleep_until
from tests.support.roundtrip import check_each_once, produce_while_consuming

pytestmark = pytest.mark.clients

REAUTH_MS = 2000
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
EXPIRED = "without re-authentication"
SETTLE_S = 0.3     # for the last requests of closed clients to reach the broker's log


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """(broker process, SASL_PLAINTEXT port); alice has a PLAIN password and a SCRAM-SHA-256 one."""
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    process = BrokerProcess(tmp_path_factory.mktemp("reauth"), port=ports["PLAINTEXT"],
                            args=["--log-level", "DEBUG"], properties={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
        "connection.failed.authentication.delay.ms": "0",
    }).start()
    done = subprocess.run([sys.executable, "-m", "kwire", "scram", "--bootstrap-server", process.bootstrap, "set",
                           "--user", "alice", "--mechanism", "SCRAM-SHA-256", "--password", "alice-secret"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    yield process, ports["SASL_PLAINTEXT"]
    process.close()


class LogWatch:
    """What the broker logged since it was made."""

    def __init__(self, process):
        self.process, self.start = process, len(process.log_text())

    def text(self) -> str:
        return self.process.log_text()[self.start:]

    def reauthentications(self, mechanism: str) -> int:
        return self.text().count(f"re-authenticated as User:alice with {mechanism};")


def python_client_options(port: int) -> dict:
    """kafka-python / aiokafka keyword arguments logging in as alice with PLAIN."""
    return dict(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")


# --- stock clients ------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_confluent_kafka_keeps_producing_and_consuming_across_reauthentications(broker, mechanism):
    process, port = broker
    watch = LogWatch(process)
    topic = f"reauth-{mechanism.lower()}"
    errors: list = []
    config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret",
              "error_cb": errors.append}
    sent, got, failed = produce_while_consuming(config, topic, 3.5 * REAUTH_MS / 1000, f"g-{topic}")
    log = watch.text()
    time.sleep(SETTLE_S)
    assert failed == [] and errors == []           # no delivery failure, no broker disconnection
    check_each_once(got, sent)
    assert watch.reauthentications(mechanism) >= 3, log[-3000:]
    assert EXPIRED not in log


def test_kafka_python_reauthenticates_too(broker):
    from kafka import KafkaConsumer, KafkaProducer
    process, port = broker
    watch = LogWatch(process)
    options = python_client_options(port)
    producer = KafkaProducer(acks="all", **options)
    consumer = KafkaConsumer("reauth-kafka-python", group_id="g-kp", auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, **options)
    sent, got = 0, []
    deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.send("reauth-kafka-python", b"%d" % sent).get(timeout=10)
        sent += 1
        got += [m.value for batch in consumer.poll(timeout_ms=20).values() for m in batch]
    end = time.monotonic() + 20
    while len(got) < sent and time.monotonic() < end:
        got += [m.value for batch in consumer.poll(timeout_ms=200).values() for m in batch]
    log = watch.text()
    producer.close()
    consumer.close()
    time.sleep(SETTLE_S)
    check_each_once(got, sent)
    assert watch.reauthentications("PLAIN") >= 2, log[-3000:]
    assert EXPIRED not in log


def test_aiokafka_does_not_reauthenticate_but_reconnects_transparently(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    process, port = broker
    watch = LogWatch(process)
    options = python_client_options(port)

    async def scenario() -> tuple[int, list[bytes]]:
        producer = AIOKafkaProducer(acks="all", **options)
        consumer = AIOKafkaConsumer("reauth-aiokafka", group_id="g-aio", auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100, **options)
        await producer.start()
        await consumer.start()
        sent, got = 0, []
        try:
            deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
            while time.monotonic() < deadline:
                await producer.send_and_wait("reauth-aiokafka", b"%d" % sent)
                sent += 1
                batch = await consumer.getmany(timeout_ms=20)
                got += [m.value for msgs in batch.values() for m in msgs]
            end = time.monotonic() + 20
            while len(got) < sent and time.monotonic() < end:
                batch = await consumer.getmany(timeout_ms=200)
                got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await producer.stop()
            await consumer.stop()
        return sent, got
    sent, got = asyncio.run(scenario())
    check_each_once(got, sent)
    assert watch.reauthentications("PLAIN") == 0
    assert EXPIRED in watch.text()              # its sessions ran out, and it logged in again


# --- the rules, on a raw connection --------------------------------------------------------------

def test_a_client_that_does_not_reauthenticate_is_closed_after_the_lifetime(broker):
    process, port = broker
    watch = LogWatch(process)
    client = RawClient(port)
    started = time.monotonic()
    response = client.login("alice")
    assert (response.error_code, response.session_lifetime_ms) == (0, REAUTH_MS)
    assert client.metadata().brokers
    sleep_until(started, REAUTH_MS / 1000 + 0.3)
    assert client.metadata() is None and client.closed()        # closed, unanswered
    client.close()
    assert "the SASL session of User:alice (PLAIN) ended" in watch.text()


def test_a_v0_client_is_not_told_the_lifetime_and_is_closed_all_the_same(broker):
    _process, port = broker
    client = RawClient(port)
    started = time.monotonic()
    response = client.login("alice", version=0)
    assert response.to_dict() == {"error_code": 0, "error_message": None, "auth_bytes": ""}   # v0: no lifetime
    assert client.metadata().brokers
    sleep_until(started, REAUTH_MS / 1000 + 0.3)
    assert client.metadata() is None
    client.close()


def test_reauthenticating_on_the_same_connection_renews_the_session(broker):
    process, port = broker
    watch = LogWatch(process)
    client = RawClient(port)
    started = time.monotonic()
    assert client.login("alice").session_lifetime_ms == REAUTH_MS
    sleep_until(started, 1.2)
    renewed = client.login("alice")
    assert (renewed.error_code, renewed.session_lifetime_ms) == (0, REAUTH_MS)
    # a second re-authentication within a second is an ordinary SaslHandshake: refused, not fatal
    early = client.handshake("PLAIN")
    assert early.error_code == 34                          # ILLEGAL_SASL_STATE
    sleep_until(started, 2.6)                              # past the first session's end
    assert client.metadata().brokers
    client.close()
    assert watch.reauthentications("PLAIN") == 1


def test_reauthenticating_as_another_user_closes_the_connection(broker):
    _process, port = broker
    client = RawClient(port)
    client.login("alice")
    time.sleep(0.1)
    refused = client.login("bob")
    assert refused.error_code == 58                        # SASL_AUTHENTICATION_FAILED
    assert refused.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
    assert client.closed()
    client.close()


def test_reauthenticating_with_another_mechanism_closes_the_connection(broker):
    _process, port = broker
    client = RawClient(port)
    client.login("alice")
    assert client.handshake("SCRAM-SHA-256").error_code == 0          # Kafka accepts the handshake ...
    assert client.authenticate(b"n,,n=alice,r=abc") is None          # ... and closes at the next frame
    client.close()
