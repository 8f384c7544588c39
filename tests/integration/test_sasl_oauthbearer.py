"""SASL/OAUTHBEARER end to end: unsecured JWS tokens (Kafka's default validator) through stock clients.

A ``kwire serve`` process with two SASL_PLAINTEXT listeners offering only OAUTHBEARER, configured
as for Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (tokens must carry the scope
``kafka``), with Kafka's ACL authorizer on (``User:admin`` is a super user).  On the first,
``connections.max.reauth.ms`` is Kafka's default 0; on the second, named REAUTH,
``listener.name.reauth.oauthbearer.connections.max.reauth.ms=2000``.

confluent-kafka logs in with librdkafka's built-in unsecured JWT
(``enable.sasl.oauthbearer.unsecure.jwt``), kafka-python and aiokafka with a token provider;
the token's principal is what the ACLs see.  An expired token or one without the required
scope is refused.  A session lasts until the token's exp, or the listener's
``connections.max.reauth.ms`` when that comes first; librdkafka re-authenticates before then.
(Tokens of a few seconds would not do for librdkafka: it renews them at 80 % of their life,
checked once a second, and Kafka refuses a second re-authentication within a second.)"""
from __future__ import annotations

import base64
import json
import re
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)
from kafka.net.sasl.oauth import AbstractTokenProvider

from kwire.testing.process import BrokerProcess, free_port
from tests.support.raw_client import RawClient, sleep_until
from tests.support.roundtrip import (aiokafka_produce_and_consume, check_each_once, kafka_python_produce_and_consume,
                                     produce_and_consume, produce_while_consuming)

pytestmark = pytest.mark.clients

JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";')
MAX_REAUTH_MS = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """(broker process, SASL_PLAINTEXT bootstrap, REAUTH port); alice may use topics named oauth-*
    and groups named oauth-* or g-oauth-*."""
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port(), "REAUTH": free_port()}
    process = BrokerProcess(tmp_path_factory.mktemp("oauth"), port=ports["PLAINTEXT"],
                            args=["--log-level", "DEBUG"], properties={
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.jaas.config": JAAS,
        "listener.name.reauth.oauthbearer.connections.max.reauth.ms": str(MAX_REAUTH_MS),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "connection.failed.authentication.delay.ms": "0",
    }).start()
    bootstrap = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    admin = AdminClient(builtin(bootstrap, "admin"))
    bindings = [AclBinding(resource, prefix, ResourcePatternType.PREFIXED, "User:alice", "*", operation,
                           AclPermissionType.ALLOW)
                for resource, prefix, operation in [(ResourceType.TOPIC, "oauth-", AclOperation.ALL),
                                                    (ResourceType.GROUP, "oauth-", AclOperation.READ),
                                                    (ResourceType.GROUP, "g-oauth-", AclOperation.READ)]]
    for future in admin.create_acls(bindings, request_timeout=10).values():
        future.result()
    yield process, bootstrap, ports["REAUTH"]
    process.close()


def builtin(bootstrap: str, principal: str, scope: str = "kafka", life_s: int = 3600) -> dict:
    """confluent-kafka settings for librdkafka's built-in unsecured JWT."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope={scope} lifeSeconds={life_s}"}


def unsecured_jws(claims: dict) -> str:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none'})}.{part(claims)}."


def token(sub: str = "alice", life_s: float = 3600, scope: str = "kafka") -> str:
    now = time.time()
    return unsecured_jws({"sub": sub, "iat": int(now), "exp": now + life_s, "scope": scope})


class TokenProvider(AbstractTokenProvider):
    """kafka-python's token provider: a fresh unsecured token for ``sub`` at each call."""

    def __init__(self, sub: str = "alice"):
        self.sub = sub

    def token(self):
        return token(self.sub)


def authentication_error(config: dict, timeout: float = 15) -> str:
    """The first authentication error confluent-kafka reports when producing with ``config``."""
    errors: list = []
    producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": int(timeout * 1000)})
    producer.produce("oauth-refused", b"x")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.1)
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            producer.purge()
            return refused[0].str()
    raise AssertionError(f"no authentication error within {timeout} s: {errors}")


def test_confluent_kafka_with_librdkafkas_unsecured_jwt_produces_and_consumes(broker):
    process, bootstrap, _reauth_port = broker
    got = produce_and_consume(builtin(bootstrap, "alice"), "oauth-confluent", 50, b"ob-")
    assert got == [b"ob-%d" % i for i in range(50)]
    assert "authenticated as User:alice with OAUTHBEARER" in process.log_text()


def test_the_tokens_principal_is_what_the_acls_see(broker):
    process, bootstrap, _reauth_port = broker
    outcome: list = []
    producer = Producer({**builtin(bootstrap, "bob"), "message.timeout.ms": 10000})
    producer.produce("oauth-acl", b"bob", on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(15)
    assert outcome and outcome[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "User:bob denied" in process.log_text()
    assert produce_and_consume(builtin(bootstrap, "alice"), "oauth-acl", 1, b"alice-") == [b"alice-0"]


def test_an_expired_token_is_refused(broker):
    process, bootstrap, _reauth_port = broker
    expired = unsecured_jws({"sub": "alice", "exp": time.time() - 60, "scope": "kafka"})
    config = {**builtin(bootstrap, "alice"), "enable.sasl.oauthbearer.unsecure.jwt": False,
              "oauth_cb": lambda _config: (expired, time.time() + 3600)}
    config.pop("sasl.oauthbearer.config")
    assert "invalid_token" in authentication_error(config)
    assert re.search(r"SASL authentication failed: OAUTHBEARER: token refused \(exp [0-9.]+ missing or not "
                     r"after now_ms", process.log_text())


def test_a_token_without_the_required_scope_is_refused(broker):
    _process, bootstrap, _reauth_port = broker
    message = authentication_error(builtin(bootstrap, "alice", scope="other"))
    assert "insufficient_scope" in message and "kafka" in message


def python_client_options(bootstrap: str, provider) -> dict:
    """kafka-python / aiokafka keyword arguments logging in with ``provider``'s tokens."""
    return dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                sasl_oauth_token_provider=provider)


def test_kafka_python_with_a_token_provider(broker):
    _process, bootstrap, _reauth_port = broker
    got = kafka_python_produce_and_consume(python_client_options(bootstrap, TokenProvider()), "oauth-kafka-python",
                                           20, b"kp-")
    assert got == [b"kp-%d" % i for i in range(20)]


def test_aiokafka_with_a_token_provider(broker):
    from aiokafka.abc import AbstractTokenProvider as AsyncTokenProvider

    class Provider(AsyncTokenProvider):
        async def token(self):
            return token("alice")
    _process, bootstrap, _reauth_port = broker
    got = aiokafka_produce_and_consume(python_client_options(bootstrap, Provider()), "oauth-aiokafka", 20, b"aio-")
    assert got == [b"aio-%d" % i for i in range(20)]


# --- the session ends with the token -------------------------------------------------------------

def test_a_session_ends_with_the_token_or_at_connections_max_reauth_ms(broker):
    process, bootstrap, reauth_port = broker
    default = RawClient(int(bootstrap.rpartition(":")[2]))        # Kafka's default 0: the token's exp
    assert 3_590_000 < default.oauth_login(token(life_s=3600)).session_lifetime_ms <= 3_600_000
    default.close()
    capped = RawClient(reauth_port)                                # the setting, before the exp
    assert capped.oauth_login(token(life_s=3600)).session_lifetime_ms == MAX_REAUTH_MS
    capped.close()
    client = RawClient(reauth_port)                                # the exp, before the setting
    started = time.monotonic()
    response = client.oauth_login(token(life_s=1.5))
    assert response.error_code == 0 and 1000 < response.session_lifetime_ms < 1600
    assert client.metadata() is not None
    sleep_until(started, 1.8)
    assert client.metadata() is None and client.closed()          # the token expired: closed
    client.close()
    assert "the SASL session of User:alice (OAUTHBEARER) ended" in process.log_text()


def test_librdkafka_reauthenticates_over_oauthbearer(broker):
    process, _bootstrap, reauth_port = broker
    start = len(process.log_text())
    errors: list = []
    config = {**builtin(f"127.0.0.1:{reauth_port}", "alice"), "error_cb": errors.append}
    sent, got, failed = produce_while_consuming(config, "oauth-reauth", 3.5 * MAX_REAUTH_MS / 1000, "oauth-reauth")
    log = process.log_text()[start:]
    time.sleep(0.3)                # the closed clients' last requests land before the next test
    assert failed == [] and errors == []
    check_each_once(got, sent)
    assert log.count(f"re-authenticated as User:alice with OAUTHBEARER; session lifetime {MAX_REAUTH_MS} ms") >= 3
    assert "without re-authentication" not in log
