"""kwire.security.sasl_session: a connection's SASL states and KIP-368 re-authentication, driven by
kafka-python's own SASL clients, with the listener contexts built from Kafka's keys."""
import base64
import json

import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain

from kwire.admin.broker_config import ConfigError, broker_config_from_properties
from kwire.codecs.errors import ErrorCode
from kwire.security.sasl import SaslError
from kwire.security.sasl_session import SaslSession, State
from kwire.security.listeners import listener_context

NOW_MS = 1_700_000_000_000
USERS = 'user_alice="alice-secret" user_bob="bob-secret"'
PLAIN_JAAS = f"org.apache.kafka.common.security.plain.PlainLoginModule required {USERS};"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def context(**properties):
    config = broker_config_from_properties({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        **properties})
    assert not config.warnings, config.warnings
    return listener_context(config, config.listeners[0])


def plain(user, password=None) -> bytes:
    return SaslMechanismPlain(sasl_plain_username=user, sasl_plain_password=password or f"{user}-secret"
                              ).auth_bytes()


class Provider(AbstractTokenProvider):
    def __init__(self, token):
        self._token = token

    def token(self):
        return self._token


def bearer(sub: str, exp_ms: int) -> bytes:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    token = f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': exp_ms / 1000})}."
    return SaslMechanismOAuth(sasl_oauth_token_provider=Provider(token)).auth_bytes()


def login(session, mechanism, token, now_ms=NOW_MS, version=1):
    assert session.handshake(mechanism, version, now_ms) == ErrorCode.NONE
    assert session.authenticate(token, now_ms) == b""
    return session


def test_connections_max_reauth_ms_resolution_per_listener_and_mechanism():
    assert context().max_reauth_ms == {"PLAIN": 0, "OAUTHBEARER": 0, "SCRAM-SHA-256": 0}
    got = context(**{"connections.max.reauth.ms": "5000",
                     "listener.name.sasl_plaintext.connections.max.reauth.ms": "4000",
                     "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "3000"})
    assert got.max_reauth_ms == {"PLAIN": 4000, "OAUTHBEARER": 3000, "SCRAM-SHA-256": 4000}
    other = context(**{"connections.max.reauth.ms": "5000",
                       "listener.name.other.connections.max.reauth.ms": "1"}).max_reauth_ms
    assert other["PLAIN"] == 5000
    with pytest.raises(ConfigError, match="listener.name.sasl_plaintext.plain.connections.max.reauth.ms"):
        context(**{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "soon"})
    with pytest.raises(ConfigError, match="connections.max.reauth.ms"):
        context(**{"connections.max.reauth.ms": "-1"})


def test_without_a_limit_a_password_session_never_ends():
    session = login(SaslSession(context()), "PLAIN", plain("alice"))
    assert (session.authenticated, session.principal, session.session_lifetime_ms) == (True, "User:alice", 0)
    assert not session.gated and not session.expired(NOW_MS + 10**12)
    assert not session.begin_reauthentication(NOW_MS + 5000)      # an ordinary request then
    assert session.handshake("PLAIN", 1, NOW_MS) == ErrorCode.ILLEGAL_SASL_STATE
    assert session.authenticated                                   # and the connection stays


def test_the_session_lasts_connections_max_reauth_ms_then_expires():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"))
    assert (session.session_lifetime_ms, session.expires_ms, session.gated) == (2000, NOW_MS + 2000, True)
    assert not session.expired(NOW_MS + 2000) and session.expired(NOW_MS + 2001)


def test_an_oauthbearer_session_ends_with_its_token_even_without_the_setting():
    session = login(SaslSession(context()), "OAUTHBEARER", bearer("alice", NOW_MS + 60_000))
    assert (session.principal, session.session_lifetime_ms) == ("User:alice", 60_000)
    capped = SaslSession(context(**{"connections.max.reauth.ms": "300000"}))
    assert login(capped, "OAUTHBEARER", bearer("alice", NOW_MS + 60_000)).session_lifetime_ms == 60_000
    shorter = SaslSession(context(**{"connections.max.reauth.ms": "2000"}))
    assert login(shorter, "OAUTHBEARER", bearer("alice", NOW_MS + 60_000)).session_lifetime_ms == 2000


def test_reauthentication_keeps_the_connection_and_renews_the_session():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"))
    later = NOW_MS + 1800
    assert session.begin_reauthentication(later)
    assert not session.authenticated and session.reauthenticating and session.principal == "User:alice"
    login(session, "PLAIN", plain("alice"), later)
    assert session.authenticated and session.reauthentications == 1
    assert session.expires_ms == later + 2000
    assert not session.begin_reauthentication(later + 999)        # at most one a second
    assert session.begin_reauthentication(later + 5000)            # expired sessions may re-authenticate
    login(session, "PLAIN", plain("alice"), later + 5000)
    assert session.reauthentications == 2 and not session.expired(later + 6000)


def test_reauthentication_as_another_user_fails():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"))
    assert session.begin_reauthentication(NOW_MS + 1500)
    assert session.handshake("PLAIN", 1, NOW_MS + 1500) == ErrorCode.NONE
    with pytest.raises(SaslError) as info:
        session.authenticate(plain("bob"), NOW_MS + 1500)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert info.value.message == "Cannot change principals during re-authentication from User.alice: User.bob"
    assert session.failed and session.principal == "User:alice"


def test_reauthentication_with_a_wrong_password_says_re_authentication():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"))
    session.begin_reauthentication(NOW_MS + 1500)
    session.handshake("PLAIN", 1, NOW_MS + 1500)
    with pytest.raises(SaslError, match="Invalid username or password"):
        session.authenticate(plain("alice", "wrong"), NOW_MS + 1500)
    assert session.failed


def test_reauthentication_with_another_mechanism_closes_at_the_next_frame():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"))
    session.begin_reauthentication(NOW_MS + 1500)
    assert session.handshake("OAUTHBEARER", 1, NOW_MS + 1500) == ErrorCode.NONE    # as Kafka answers
    assert session.state is State.REAUTH_BAD_MECHANISM
    assert session.refusal == ("SASL mechanism 'OAUTHBEARER' requested by client is not supported for "
                               "re-authentication of mechanism 'PLAIN'")
    other = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"))
    other.begin_reauthentication(NOW_MS + 1500)
    assert other.handshake("GSSAPI", 1, NOW_MS + 1500) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert other.failed


def test_a_v0_handshake_reauthenticates_with_bare_tokens_and_is_not_told_the_lifetime():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "2000"})), "PLAIN", plain("alice"),
                    version=0)
    assert not session.raw_tokens and session.expires_ms == NOW_MS + 2000   # it ends all the same
    session.begin_reauthentication(NOW_MS + 1500)
    assert session.handshake("PLAIN", 0, NOW_MS + 1500) == ErrorCode.NONE and session.raw_tokens
    session.authenticate(plain("alice"), NOW_MS + 1500)
    assert session.authenticated and not session.raw_tokens


def test_an_oauthbearer_reauthentication_takes_the_new_tokens_expiry():
    session = login(SaslSession(context(**{"connections.max.reauth.ms": "10000"})), "OAUTHBEARER",
                    bearer("alice", NOW_MS + 3000))
    assert session.session_lifetime_ms == 3000
    session.begin_reauthentication(NOW_MS + 2500)
    login(session, "OAUTHBEARER", bearer("alice", NOW_MS + 60_000), NOW_MS + 2500)
    assert session.session_lifetime_ms == 10_000


def test_out_of_turn_messages():
    session = SaslSession(context())
    with pytest.raises(SaslError) as info:
        session.authenticate(plain("alice"), NOW_MS)
    assert info.value.code == ErrorCode.ILLEGAL_SASL_STATE and session.failed
    session = login(SaslSession(context()), "PLAIN", plain("alice"))
    with pytest.raises(SaslError):                          # after authentication: answered, not fatal
        session.authenticate(plain("alice"), NOW_MS)
    assert session.authenticated
    exchange = SaslSession(context())
    exchange.handshake("PLAIN", 1, NOW_MS)
    assert exchange.handshake("PLAIN", 1, NOW_MS) == ErrorCode.ILLEGAL_SASL_STATE and exchange.failed
