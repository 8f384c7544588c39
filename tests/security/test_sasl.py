"""kwire.security.sasl: the JAAS syntax, PLAIN and OAUTHBEARER against kafka-python's own SASL
clients, the token limit and the mechanism table."""
import base64
import json

import pytest
from hypothesis import given, settings, strategies as st
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain

from kwire.codecs.errors import ErrorCode
from kwire.security.sasl import (AUTHZID_MISMATCH, INVALID_USER_OR_PASSWORD, MAX_SASL_TOKEN_BYTES,
                        OAUTHBEARER_LOGIN_MODULE, PLAIN_LOGIN_MODULE, JaasEntry, OAuthBearerServer,
                        PlainServer, SaslError, UnsecuredJwsOptions, check_token_size,
                        parse_enabled_mechanisms, parse_jaas_config, parse_jaas_entries,
                        plain_users, server_factories)
from kwire.security.scram import ScramCredentialStore, ScramServer

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism "


def failure(server, token, code=ErrorCode.SASL_AUTHENTICATION_FAILED) -> SaslError:
    with pytest.raises(SaslError) as info:
        server.step(token)
    assert info.value.code == code
    return info.value


# --- JAAS -----------------------------------------------------------------------------------

def test_jaas_plain_example():
    entry = parse_jaas_config(PLAIN_JAAS)
    assert entry == JaasEntry(PLAIN_LOGIN_MODULE, "required", {
        "username": "admin", "password": "admin-secret",
        "user_admin": "admin-secret", "user_alice": "alice-secret"})
    assert plain_users(entry.options) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_jaas_scram_and_oauthbearer_forms():
    scram = parse_jaas_config('org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n'
                              '  username="admin"\n  password="admin-secret" ;')
    assert (scram.control_flag, scram.options) == ("required", {"username": "admin",
                                                                "password": "admin-secret"})
    oauth = parse_jaas_config('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule '
                              'required unsecuredLoginStringClaim_sub="admin" '
                              'unsecuredValidatorRequiredScope="read,write";')
    assert oauth.login_module == OAUTHBEARER_LOGIN_MODULE
    assert oauth.options["unsecuredLoginStringClaim_sub"] == "admin"
    assert parse_jaas_config("a.B optional;") == JaasEntry("a.B", "optional", {})


def test_jaas_quoting_escapes_comments_and_bare_words():
    entry = parse_jaas_config(
        "// a comment\n x.Y sufficient /* another */ a=\"q\\\"uote\\\\back\" b='single \"x\"' "
        "c=\"tab\\there\\nnl\\101\" d=bare-word_1.2 e=\"semi;colon=eq\" f=\"\";")
    assert entry.options == {"a": 'q"uote\\back', "b": 'single "x"', "c": "tab\there\nnlA",
                             "d": "bare-word_1.2", "e": "semi;colon=eq", "f": ""}
    assert entry.control_flag == "sufficient"


@pytest.mark.parametrize("text, words", [
    ('x.Y required a="b"', "semi-colon"),
    ("x.Y", "control flag"),
    ("x.Y mandatory;", "control flag"),
    ('x.Y required a=;', "value not specified"),
    ('x.Y required a;', "value not specified"),
    ('x.Y required a="b', "unterminated"),
    ('x.Y required a="b\nc";', "unterminated"),
    ('x.Y required a="b" a="c";', "twice"),
    ('x.Y required a="b" {};', "unexpected"),
    ('"x.Y" required;', "class name"),
    ('x.Y required "a"="b";', "option name"),
    ("", "does not contain any login modules"),
    ("  // only a comment", "does not contain any login modules"),
    ("a.B required; c.D optional;", "contains 2 login modules"),
])
def test_jaas_malformed(text, words):
    with pytest.raises(ValueError, match=words):
        parse_jaas_config(text)


def test_jaas_entries_may_hold_several_modules():
    assert [e.login_module for e in parse_jaas_entries("a.B required; c.D optional x=y;")] == [
        "a.B", "c.D"]


# --- PLAIN ----------------------------------------------------------------------------------

def plain_server(**kwargs):
    return PlainServer(plain_users(parse_jaas_config(PLAIN_JAAS).options), **kwargs)


def test_plain_kafka_python_client():
    c, server = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret"), plain_server()
    out, done = server.step(c.auth_bytes())
    c.receive(out)
    assert (out, done, server.principal) == (b"", True, "User:alice") and c.is_authenticated()


@pytest.mark.parametrize("token", [b"\0alice\0alice-secret", b"alice\0alice\0alice-secret"])
def test_plain_authzid_empty_or_same(token):
    server = plain_server()
    assert server.step(token) == (b"", True) and server.principal == "User:alice"


def test_plain_wrong_password_and_unknown_user_fail_alike():
    wrong = failure(plain_server(), b"\0alice\0admin-secret")
    unknown = failure(plain_server(), b"\0mallory\0alice-secret")
    assert wrong.message == unknown.message == INVALID_USER_OR_PASSWORD
    assert "wrong password" in wrong.detail and "unknown user" in unknown.detail
    assert "alice-secret" not in wrong.detail + unknown.detail + wrong.message


def test_plain_authzid_other_than_username():
    assert failure(plain_server(), b"admin\0alice\0alice-secret").message == AUTHZID_MISMATCH


@pytest.mark.parametrize("token", [b"alice\0alice-secret", b"\0alice\0alice-secret\0x", b"",
                                   b"\0\0alice-secret", b"\0alice\0", b"\0al\xffice\0pw"])
def test_plain_malformed(token):
    assert failure(plain_server(), token).message == GENERIC + "PLAIN"


def test_plain_after_end_and_oversize():
    server = plain_server()
    server.step(b"\0alice\0alice-secret")
    failure(server, b"\0alice\0alice-secret", ErrorCode.ILLEGAL_SASL_STATE)
    big = b"\0alice\0" + b"x" * MAX_SASL_TOKEN_BYTES
    assert "max.receive.size" in failure(plain_server(), big).detail
    failure(plain_server(max_token_bytes=10), b"\0alice\0alice-secret")


def test_reauthentication_message():
    e = failure(plain_server(reauthentication=True), b"\0\0\0")
    assert e.message.startswith("Authentication failed during re-authentication")


# --- OAUTHBEARER ----------------------------------------------------------------------------

NOW_MS = 1_700_000_000_000


def b64url(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def jws(claims, header=None) -> str:
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}."


class Provider(AbstractTokenProvider):
    def __init__(self, token, extensions=None):
        self._token, self._extensions = token, extensions or {}

    def token(self):
        return self._token

    def extensions(self):
        return self._extensions


def oauth_exchange(token, options=UnsecuredJwsOptions(), extensions=None):
    c = SaslMechanismOAuth(sasl_oauth_token_provider=Provider(token, extensions))
    server = OAuthBearerServer(NOW_MS, options)
    out, done = server.step(c.auth_bytes())
    c.receive(out)
    return c, server, out, done


def test_oauthbearer_kafka_python_client():
    token = jws({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000})
    c, server, out, done = oauth_exchange(token, extensions={"traceId": "abc"})
    assert (out, done, server.principal) == (b"", True, "User:alice") and c.is_authenticated()


@pytest.mark.parametrize("claims, header, why", [
    ({"sub": "alice", "exp": NOW_MS / 1000}, None, "exp"),                 # expired (exp == now)
    ({"sub": "alice"}, None, "exp"),
    ({"sub": "alice", "exp": "soon"}, None, "exp"),
    ({"exp": NOW_MS / 1000 + 60}, None, "sub"),
    ({"sub": "alice", "exp": NOW_MS / 1000 + 60}, {"alg": "RS256"}, "alg"),
    ({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 5}, None, "iat"),
])
def test_oauthbearer_rejected_token(claims, header, why):
    c, server, out, done = oauth_exchange(jws(claims, header))
    assert json.loads(out) == {"status": "invalid_token"} and not done
    assert c.auth_bytes() == b"\x01"   # kafka-python acknowledges the error challenge
    e = failure(server, c.auth_bytes())
    assert e.message == '{"status":"invalid_token"}' and why in e.detail


def test_oauthbearer_clock_skew_and_scope():
    claims = {"sub": "alice", "exp": NOW_MS / 1000, "scope": "read write"}
    opts = UnsecuredJwsOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": "1000",
                                          "unsecuredValidatorRequiredScope": "read"})
    assert oauth_exchange(jws(claims), opts)[1].principal == "User:alice"
    opts = UnsecuredJwsOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": "1000",
                                          "unsecuredValidatorRequiredScope": "read,admin"})
    out = oauth_exchange(jws(claims), opts)[2]
    assert json.loads(out) == {"status": "insufficient_scope", "scope": "read admin"}
    with pytest.raises(ValueError):
        UnsecuredJwsOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def test_oauthbearer_token_not_a_jws():
    for token in ("abc", "a.b.c", f"{b64url([1])}.{b64url({})}."):
        assert json.loads(oauth_exchange(token)[2]) == {"status": "invalid_token"}


def test_oauthbearer_only_ctrl_a_after_an_error():
    server = OAuthBearerServer(NOW_MS)
    server.step(b"n,,\x01auth=Bearer " + jws({"sub": "a"}).encode() + b"\x01\x01")
    good = jws({"sub": "a", "exp": NOW_MS / 1000 + 60}).encode()
    failure(server, b"n,,\x01auth=Bearer " + good + b"\x01\x01")


def test_oauthbearer_authzid():
    good = jws({"sub": "alice", "exp": NOW_MS / 1000 + 60}).encode()
    server = OAuthBearerServer(NOW_MS)
    assert server.step(b"n,a=alice,\x01auth=Bearer " + good + b"\x01\x01") == (b"", True)
    e = failure(OAuthBearerServer(NOW_MS), b"n,a=bob,\x01auth=Bearer " + good + b"\x01\x01")
    assert "authorization id (bob)" in e.message


@pytest.mark.parametrize("token", [
    b"n,,auth=Bearer abc\x01\x01", b"n,,\x01auth=Bearer abc\x01", b"n,,\x01\x01",
    b"n,,\x01auth=Basic abc\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01", b"p=x,,\x01auth=Bearer abc\x01\x01",
    b"n,,\x01auth=Bearer abc\x01auth=Bearer abc\x01\x01", b"n,,\x011x=y\x01auth=Bearer abc\x01\x01",
    b"n,,\x01\x01\x01",
])
def test_oauthbearer_malformed(token):
    assert failure(OAuthBearerServer(NOW_MS), token).message == GENERIC + "OAUTHBEARER"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_sasl_error(token):
    for server in (plain_server(), OAuthBearerServer(NOW_MS)):
        try:
            server.step(token)
        except SaslError:
            pass


# --- limits and the mechanism table ---------------------------------------------------------

def test_check_token_size():
    check_token_size(MAX_SASL_TOKEN_BYTES)
    assert MAX_SASL_TOKEN_BYTES == 512 * 1024
    with pytest.raises(SaslError) as info:
        check_token_size(MAX_SASL_TOKEN_BYTES + 1)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_parse_enabled_mechanisms():
    assert parse_enabled_mechanisms(" PLAIN, SCRAM-SHA-512 ,,PLAIN") == ["PLAIN", "SCRAM-SHA-512"]
    assert parse_enabled_mechanisms("") == []
    with pytest.raises(ValueError, match="GSSAPI"):
        parse_enabled_mechanisms("GSSAPI")   # Kafka's default


def test_server_factories():
    jaas = [parse_jaas_config(PLAIN_JAAS),
            parse_jaas_config(f'{OAUTHBEARER_LOGIN_MODULE} required;')]
    table = server_factories("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER", jaas=jaas,
                             scram=ScramCredentialStore(), max_token_bytes=100)
    assert list(table) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    plain = table["PLAIN"](NOW_MS)
    assert isinstance(plain, PlainServer) and plain.step(b"\0alice\0alice-secret")[1]
    assert table["PLAIN"](NOW_MS) is not plain
    scram = table["SCRAM-SHA-512"](NOW_MS, reauthentication=True)
    assert isinstance(scram, ScramServer) and scram.mechanism == "SCRAM-SHA-512"
    assert "limit of 100 bytes" in failure(scram, b"n,,n=alice,r=" + b"a" * 100).message
    scram = table["SCRAM-SHA-512"](NOW_MS, reauthentication=True)
    assert "re-authentication" in failure(scram, b"n,,n=alice").message
    oauth = table["OAUTHBEARER"](NOW_MS)
    token = jws({"sub": "a", "exp": NOW_MS / 1000 + 1}).encode()
    assert oauth.step(b"n,,\x01auth=Bearer " + token + b"\x01\x01") == (b"", True)


@pytest.mark.parametrize("enabled, kwargs, words", [
    ("PLAIN", {}, "PlainLoginModule"),
    ("OAUTHBEARER", {"jaas": [parse_jaas_config(PLAIN_JAAS)]}, "OAuthBearerLoginModule"),
    ("SCRAM-SHA-256", {}, "credential store"),
    ("GSSAPI", {}, "not supported"),
])
def test_server_factories_refuse_what_cannot_authenticate(enabled, kwargs, words):
    with pytest.raises(ValueError, match=words):
        server_factories(enabled, **kwargs)
