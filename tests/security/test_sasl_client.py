"""The client side of PLAIN and SCRAM (kwire.security.sasl_client), sans-I/O: RFC 7677's exchange byte
for byte, logins against kwire's own SCRAM server, and every way a server answer is refused."""
from __future__ import annotations

import base64

import pytest

from kwire.security.sasl import PlainServer, SaslError
from kwire.security.sasl_client import PlainClient, SaslClientError, ScramClient, sasl_client
from kwire.security.scram import ScramCredentialStore, scram_credential

# RFC 7677 section 3: user "user", password "pencil"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_client() -> ScramClient:
    return ScramClient("SCRAM-SHA-256", "user", "pencil", nonce_factory=lambda: "rOprNGfwEbeRWgbNEkqO")


def test_scram_sha_256_is_rfc_7677_byte_for_byte():
    client = rfc_client()
    assert client.first() == RFC_CLIENT_FIRST
    assert client.step(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.step(RFC_SERVER_FINAL) is None


def login(client, server) -> str:
    """Run an exchange to the end; the principal the server authenticated."""
    token = client.first()
    while token is not None:
        answer, done = server.step(token)
        token = client.step(answer)
        assert (token is None) == done
    return server.principal


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logs_in_to_kwires_server(mechanism):
    store = ScramCredentialStore()
    store.set("broker,1=a", mechanism, scram_credential(mechanism, "s3cret"))   # "," and "=" escaped
    assert login(ScramClient(mechanism, "broker,1=a", "s3cret"), store.server(mechanism)) == "User:broker,1=a"


def test_scram_wrong_password_is_refused_by_the_server():
    store = ScramCredentialStore()
    store.set("admin", "SCRAM-SHA-512", scram_credential("SCRAM-SHA-512", "right"))
    with pytest.raises(SaslError):
        login(ScramClient("SCRAM-SHA-512", "admin", "wrong"), store.server("SCRAM-SHA-512"))


def test_plain_logs_in_to_kwires_server():
    assert login(PlainClient("admin", "admin-secret"), PlainServer({"admin": "admin-secret"})) == "User:admin"
    assert PlainClient("a", "p").first() == b"\0a\0p"


@pytest.mark.parametrize("server_first, reason", [
    (b"r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),   # not extended
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095", "iterations"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==", "iterations"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=not*base64,i=4096", "salt"),
])
def test_a_bad_server_first_message_is_refused(server_first, reason):
    with pytest.raises(SaslClientError, match=reason):
        rfc_client().step(server_first)


@pytest.mark.parametrize("server_final", [
    b"v=" + base64.b64encode(b"\0" * 32), b"", b"v=***", b"e=invalid-proof"])
def test_a_server_that_does_not_prove_the_password_is_refused(server_final):
    client = rfc_client()
    client.step(RFC_SERVER_FIRST)
    with pytest.raises(SaslClientError):
        client.step(server_final)


def test_only_plain_and_scram_are_offered():
    assert isinstance(sasl_client("PLAIN", "a", "b"), PlainClient)
    assert sasl_client("SCRAM-SHA-512", "a", "b").mechanism == "SCRAM-SHA-512"
    with pytest.raises(ValueError, match="GSSAPI"):
        sasl_client("GSSAPI", "a", "b")
