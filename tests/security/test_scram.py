"""SCRAM-SHA-256/512 server (kwire.security.scram) against kafka-python's own SCRAM client,
RFC 7677's published exchange, and the stored credential forms."""
import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings, strategies as st
from kafka.admin._users import ScramMechanism, UserScramCredentialUpsertion
from kafka.net.sasl.scram import SaslMechanismScram

from kwire.codecs.errors import ErrorCode
from kwire.security.sasl import AUTHZID_MISMATCH, MAX_SASL_TOKEN_BYTES, SaslError
from kwire.security.scram import (MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramCredentialStore,
                         format_kafka_credential, parse_kafka_credential, scram_credential,
                         scram_credential_from_salted_password)

MECHS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_CREDS = {m: scram_credential(m, "alice-secret") for m in MECHS}


def store_with_alice() -> ScramCredentialStore:
    store = ScramCredentialStore(fake_salt_key=b"k" * 32)
    for m, c in _CREDS.items():
        store.set("alice", m, c)
    return store


def client(mechanism, user="alice", password="alice-secret"):
    return SaslMechanismScram(sasl_plain_username=user, sasl_plain_password=password,
                              sasl_mechanism=mechanism)


def generic(mechanism):
    return ("Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}")


def failure(server, token) -> SaslError:
    with pytest.raises(SaslError) as info:
        server.step(token)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    return info.value


# --- exchanges ------------------------------------------------------------------------------

def test_rfc7677_golden_exchange():
    """RFC 7677 section 3: user "user", password "pencil", byte for byte."""
    store = ScramCredentialStore(nonce_factory=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    store.set("user", "SCRAM-SHA-256", scram_credential(
        "SCRAM-SHA-256", "pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096))
    server = store.server("SCRAM-SHA-256")
    assert server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        False)
    assert server.principal is None and not server.complete
    assert server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=") == (
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", True)
    assert server.principal == "User:user" and server.complete


@pytest.mark.parametrize("mechanism", MECHS)
def test_kafka_python_client_authenticates(mechanism):
    c, server = client(mechanism), store_with_alice().server(mechanism)
    first, done = server.step(c.auth_bytes())
    assert not done and first.startswith(b"r=") and b",i=4096" in first
    c.receive(first)
    final, done = server.step(c.auth_bytes())
    c.receive(final)  # kafka-python raises if the server signature is wrong
    assert done and c.is_done() and c.is_authenticated()
    assert server.principal == "User:alice"


@pytest.mark.parametrize("mechanism", MECHS)
def test_credential_from_alter_user_scram_credentials_payload(mechanism):
    """What kafka-python's admin client sends (salt + salted password) authenticates."""
    up = UserScramCredentialUpsertion("bob", ScramMechanism[mechanism.replace("-", "_")],
                                      "bob-pw", iterations=8192)
    store = ScramCredentialStore()
    store.set("bob", mechanism, scram_credential_from_salted_password(
        mechanism, up.salted_password, up.salt, up.iterations))
    c, server = client(mechanism, "bob", "bob-pw"), store.server(mechanism)
    c.receive(server.step(c.auth_bytes())[0])
    c.receive(server.step(c.auth_bytes())[0])
    assert c.is_authenticated() and server.principal == "User:bob"


def wrong_password_failure(mechanism):
    c, server = client(mechanism, password="nope"), store_with_alice().server(mechanism)
    c.receive(server.step(c.auth_bytes())[0])
    return failure(server, c.auth_bytes())


def unknown_user_failure(mechanism, user="mallory"):
    c, server = client(mechanism, user=user), store_with_alice().server(mechanism)
    first = server.step(c.auth_bytes())[0]
    c.receive(first)
    return first, failure(server, c.auth_bytes())


@pytest.mark.parametrize("mechanism", MECHS)
def test_wrong_password_and_unknown_user_fail_alike(mechanism):
    wrong = wrong_password_failure(mechanism)
    first, unknown = unknown_user_failure(mechanism)
    assert wrong.message == unknown.message == generic(mechanism)
    assert "invalid client proof" in wrong.detail and "unknown user" in unknown.detail
    # the server-first for an unknown user has the shape of a real one
    real = store_with_alice().server(mechanism).step(client(mechanism).auth_bytes())[0]
    fields = [dict(f.split("=", 1) for f in m.decode().split(",")) for m in (first, real)]
    assert len(fields[0]["s"]) == len(fields[1]["s"]) and fields[0]["i"] == fields[1]["i"]


def test_unknown_user_salt_is_stable_per_name():
    salts = [unknown_user_failure("SCRAM-SHA-256", u)[0].split(b",")[1]
             for u in ("mallory", "mallory", "trent")]
    assert salts[0] == salts[1] != salts[2]


def test_bad_proof():
    c, server = client("SCRAM-SHA-256"), store_with_alice().server("SCRAM-SHA-256")
    c.receive(server.step(c.auth_bytes())[0])
    final = c.auth_bytes()
    head, proof = final.rsplit(b",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[0] ^= 1
    e = failure(server, head + b",p=" + base64.b64encode(bytes(raw)))
    assert e.message == generic("SCRAM-SHA-256") and "invalid client proof" in e.detail


@pytest.mark.parametrize("proof", [b"!!!", b"AAAA"])
def test_proof_not_base64_or_wrong_length(proof):
    c, server = client("SCRAM-SHA-256"), store_with_alice().server("SCRAM-SHA-256")
    c.receive(server.step(c.auth_bytes())[0])
    failure(server, c.auth_bytes().rsplit(b",p=", 1)[0] + b",p=" + proof)


def test_nonce_mismatch():
    c, server = client("SCRAM-SHA-256"), store_with_alice().server("SCRAM-SHA-256")
    c.receive(server.step(c.auth_bytes())[0])
    final = c.auth_bytes().replace(b",r=", b",r=x", 1)
    assert "nonce" in failure(server, final).detail


def test_channel_binding_requested_is_refused():
    server = store_with_alice().server("SCRAM-SHA-256")
    assert "channel binding" in failure(server, b"p=tls-unique,,n=alice,r=abc").detail


def test_channel_binding_must_match_gs2_header():
    """The client says a=alice in its header but c=biws (the binding of "n,,")."""
    c, server = client("SCRAM-SHA-256"), store_with_alice().server("SCRAM-SHA-256")
    c.receive(server.step(b"n,a=alice," + c.auth_bytes()[3:])[0])
    assert "channel binding" in failure(server, c.auth_bytes()).detail


def test_authzid_other_than_username():
    server = store_with_alice().server("SCRAM-SHA-256")
    assert failure(server, b"n,a=bob,n=alice,r=abc").message == AUTHZID_MISMATCH


@pytest.mark.parametrize("first", [
    b"n,,n=alice,r=abc,tokenauth=true",   # delegation tokens
    b"n,,m=ext,n=alice,r=abc",            # a mandatory extension
    b"n,,n=al=3Fice,r=abc",               # a bad saslname escape
    b"n,,n=alice,r=a,bc",                 # not key=value
    b"n,,n=,r=abc",
    b"x,,n=alice,r=abc",
    b"n,,n=alice",
    b"\xff\xfe",
])
def test_malformed_client_first(first):
    e = failure(store_with_alice().server("SCRAM-SHA-256"), first)
    assert e.message == generic("SCRAM-SHA-256")


def test_out_of_order_messages():
    c = client("SCRAM-SHA-256")
    first = c.auth_bytes()
    # client-final first
    server = store_with_alice().server("SCRAM-SHA-256")
    failure(server, b"c=biws,r=abc,p=AAAA")
    # client-first twice
    server = store_with_alice().server("SCRAM-SHA-256")
    server.step(first)
    failure(server, first)
    # anything after a failure or after the end is an illegal state
    with pytest.raises(SaslError) as info:
        server.step(first)
    assert info.value.code == ErrorCode.ILLEGAL_SASL_STATE
    server = store_with_alice().server("SCRAM-SHA-256")
    c.receive(server.step(first)[0])
    server.step(c.auth_bytes())
    with pytest.raises(SaslError) as info:
        server.step(first)
    assert info.value.code == ErrorCode.ILLEGAL_SASL_STATE


def test_oversize_token_is_refused_before_parsing():
    server = store_with_alice().server("SCRAM-SHA-256")
    e = failure(server, b"n,,n=alice,r=" + b"a" * MAX_SASL_TOKEN_BYTES)
    assert "sasl.server.max.receive.size" in e.detail
    small = store_with_alice().server("SCRAM-SHA-256", max_token_bytes=16)
    failure(small, b"n,,n=alice,r=abcdefgh")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_random_bytes_raise_only_sasl_error(first, second):
    for tokens in ([first], [client("SCRAM-SHA-256").auth_bytes(), second]):
        server = store_with_alice().server("SCRAM-SHA-256")
        try:
            for token in tokens:
                server.step(token)
        except SaslError:
            pass
        assert server.principal is None


# --- credentials ----------------------------------------------------------------------------

@pytest.mark.parametrize("iterations", [MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 0])
def test_iteration_bounds(iterations):
    with pytest.raises(ValueError):
        scram_credential("SCRAM-SHA-256", "pw", iterations=iterations)
    weak = ScramCredential(b"s", b"k" * 32, b"k" * 32, iterations)
    with pytest.raises(ValueError):
        ScramCredentialStore().set("alice", "SCRAM-SHA-256", weak)


def test_iteration_upper_bound_is_allowed_and_unknown_mechanism_is_not():
    assert scram_credential("SCRAM-SHA-512", "pw", iterations=MAX_ITERATIONS).iterations == 16384
    with pytest.raises(ValueError):
        scram_credential("SCRAM-SHA-1", "pw")


def test_kafka_credential_string_round_trip():
    cred = scram_credential("SCRAM-SHA-256", "pw", b"salt", 8192)
    text = format_kafka_credential(cred)
    assert text.startswith("salt=c2FsdA==,stored_key=") and text.endswith(",iterations=8192")
    assert parse_kafka_credential(text) == cred
    # any order, as Kafka's Properties-based parser allows
    reordered = ",".join(reversed(text.split(",")))
    assert parse_kafka_credential(reordered) == cred
    # RFC 5802's StoredKey = H(HMAC(PBKDF2(password), "Client Key")), computed here by hand
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", b"salt", 8192)
    assert cred.stored_key == hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()


@pytest.mark.parametrize("text", [
    "", "salt=c2FsdA==", "salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=4096,x=1",
    "salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=many",
    "salt=!!,stored_key=AA==,server_key=AA==,iterations=4096",
    "salt=c2FsdA==,salt=c2FsdA==,server_key=AA==,iterations=4096",
    "=x,stored_key=AA==,server_key=AA==,iterations=4096",
])
def test_kafka_credential_string_malformed(text):
    with pytest.raises(ValueError, match="Credentials not valid"):
        parse_kafka_credential(text)


def test_store_json_round_trip_holds_no_password():
    store = store_with_alice()
    store.set("bob", "SCRAM-SHA-512", scram_credential("SCRAM-SHA-512", "bob-secret"))
    text = store.to_json()
    assert "alice-secret" not in text and "bob-secret" not in text
    again = ScramCredentialStore.from_json(text)
    assert again.users() == ["alice", "bob"]
    for user in again.users():
        assert again.credentials(user) == store.credentials(user)
    c, server = client("SCRAM-SHA-512"), again.server("SCRAM-SHA-512")
    c.receive(server.step(c.auth_bytes())[0])
    server.step(c.auth_bytes())
    assert server.principal == "User:alice"


@pytest.mark.parametrize("text", [
    "not json", "[]", '{"version": 2, "users": {}}', '{"version": 1}',
    '{"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "AA=="}}}}',
    '{"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "AA==", "stored_key": "AA==",'
    ' "server_key": "AA==", "iterations": 4096}}}}',    # keys of the wrong size
])
def test_store_json_malformed(text):
    with pytest.raises(ValueError):
        ScramCredentialStore.from_json(text)


def test_store_kafka_config_round_trip_ignores_quotas():
    store = store_with_alice()
    config = store.to_kafka_config("alice")
    assert sorted(config) == list(MECHS)
    assert config["SCRAM-SHA-256"] == format_kafka_credential(_CREDS["SCRAM-SHA-256"])
    other = ScramCredentialStore()
    other.load_kafka_config("alice", {**config, "producer_byte_rate": "1024"})
    assert other.credentials("alice") == store.credentials("alice")
    bad = {"SCRAM-SHA-256": config["SCRAM-SHA-256"].replace("iterations=4096", "iterations=10")}
    with pytest.raises(ValueError):
        other.load_kafka_config("alice", bad)
    assert other.credentials("alice") == store.credentials("alice")  # nothing changed
    other.load_kafka_config("alice", {"producer_byte_rate": "1024"})
    assert other.users() == []


def test_store_delete():
    store = store_with_alice()
    assert store.delete("alice", "SCRAM-SHA-256") and not store.delete("alice", "SCRAM-SHA-256")
    assert store.users() == ["alice"]
    assert store.delete("alice", "SCRAM-SHA-512") and store.users() == []
    c, server = client("SCRAM-SHA-512"), store.server("SCRAM-SHA-512")
    c.receive(server.step(c.auth_bytes())[0])
    assert "unknown user" in failure(server, c.auth_bytes()).detail
