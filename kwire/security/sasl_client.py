"""Client side of SASL PLAIN and SCRAM-SHA-256/512: how one broker logs in to another.

Sans-I/O, the mirror of kwire.security.sasl / kwire.security.scram's servers: a client object
gives the token to send first (``first()``), then takes each server answer
(``step(server_bytes)``) and returns the next token to send, or None once the
exchange is complete and the server proved itself.  Tokens (one SaslAuthenticate
``auth_bytes`` each):

    PLAIN (RFC 4616)   NUL username NUL password                      (no authzid, as Kafka's)
    SCRAM (RFC 5802)   client-first  "n,,n=" saslname ",r=" c-nonce
                       server-first  "r=" c-nonce s-nonce ",s=" salt ",i=" iterations
                       client-final  "c=biws,r=" nonce ",p=" base64(ClientProof)
                       server-final  "v=" base64(ServerSignature)

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    ClientKey = HMAC(SaltedPassword, "Client Key");  StoredKey = H(ClientKey)
    AuthMessage = client-first-bare "," server-first "," client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)

Kafka's ScramSaslClient rules kept: the server nonce must extend the client's,
fewer than 4096 iterations are refused, and a server signature that does not
verify fails the login.  Every failure is one ``SaslClientError``.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Callable

from kwire.security.scram import MECHANISMS as SCRAM_MECHANISMS, MIN_ITERATIONS

__all__ = ["CLIENT_MECHANISMS", "SaslClientError", "PlainClient", "ScramClient", "sasl_client"]

CLIENT_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslClientError(Exception):
    """The server's answer breaks the mechanism (or does not prove the server knows the password)."""


class PlainClient:
    """PLAIN: one token, an empty answer."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str):
        self._token = b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")

    def first(self) -> bytes:
        return self._token

    def step(self, server_bytes: bytes) -> bytes | None:
        return None


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """SCRAM-SHA-256 / SCRAM-SHA-512 without channel binding (gs2 header ``n,,``)."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 nonce_factory: Callable[[], str] | None = None):
        """Raises ValueError for a mechanism other than SCRAM-SHA-256/512.  ``nonce_factory``
        is injectable for golden tests."""
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism]
        self._password = password.encode("utf-8")
        self._nonce = (nonce_factory or (lambda: secrets.token_urlsafe(24)))()
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode("utf-8")

    def step(self, server_bytes: bytes) -> bytes | None:
        """server-first -> client-final; server-final -> None.  Raises SaslClientError."""
        if self._server_signature is None:
            return self._client_final(bytes(server_bytes).decode("utf-8", "replace"))
        self._verify(bytes(server_bytes).decode("utf-8", "replace"))
        return None

    def _client_final(self, server_first: str) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.split(",") if "=" in a)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError("the server nonce does not extend the client nonce")
        if not iterations.isdigit() or int(iterations) < MIN_ITERATIONS:
            raise SaslClientError(f"iterations {iterations!r} below the minimum of {MIN_ITERATIONS}")
        try:
            salt_bytes = base64.b64decode(salt or "", validate=True)
        except (binascii.Error, ValueError):
            raise SaslClientError("the salt is not base64") from None
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt_bytes, int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode("utf-8")
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self._hash), auth_message,
                                             self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode("ascii")

    def _verify(self, server_final: str) -> None:
        if server_final.startswith("e="):
            raise SaslClientError(f"the server refused the login: {server_final[2:]}")
        try:
            got = base64.b64decode(server_final[2:] if server_final.startswith("v=") else "", validate=True)
        except (binascii.Error, ValueError):
            got = b""
        if not hmac.compare_digest(got, self._server_signature):
            raise SaslClientError("the server's signature is invalid: it does not know the password")


def sasl_client(mechanism: str, username: str, password: str) -> PlainClient | ScramClient:
    """A new exchange for ``mechanism``; raises ValueError for one kwire cannot log in with."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, username, password)
    raise ValueError(f"kwire cannot log in with {mechanism}; it can with {', '.join(CLIENT_MECHANISMS)}")
