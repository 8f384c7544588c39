"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) for Kafka listeners: the
server-side exchange, salted credentials, and their two stored forms.

Only salted credentials are kept, never passwords.  Messages, one SaslAuthenticate
token each (client-first and client-final from the client):

    client-first   gs2-header "n=" saslname ",r=" c-nonce *("," key "=" value)
                   gs2-header = ("n" | "y") "," ["a=" saslname] ","   ("p=": refused)
    server-first   "r=" c-nonce s-nonce ",s=" base64(salt) ",i=" iterations
    client-final   "c=" base64(gs2-header) ",r=" c-nonce s-nonce *("," key "=" value)
                   ",p=" base64(ClientProof)
    server-final   "v=" base64(ServerSignature)

Keys (RFC 5802 section 3), H = SHA-256 or SHA-512:

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    StoredKey = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey = HMAC(SaltedPassword, "Server Key")
    AuthMessage = client-first-bare "," server-first "," client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)   (the server checks
                  H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey)
    ServerSignature = HMAC(ServerKey, AuthMessage)

Stored forms:

    Kafka's string (ZooKeeper /config/users/<user>, config key = the mechanism name):
        salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>
    kwire's JSON file:
        {"version": 1, "users": {user: {mechanism: {"salt": b64, "stored_key": b64,
                                                    "server_key": b64, "iterations": n}}}}

Rules: iterations are 4096..16384 (Kafka's ScramMechanism bounds) for every stored
credential.  The Kafka ``tokenauth=true`` extension (delegation tokens) and ``m=``
mandatory extensions are refused; other extensions are ignored.  An unknown user is
answered with a salt derived from the name and a per-store secret, so the exchange
looks the same as for a real user until the proof fails with the same message.  No
SASLprep: names and passwords are compared as UTF-8, as Kafka does.  Kafka sends no
``e=`` server-final: a failure is the SaslAuthenticate error, and so it is here.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import re
import secrets
from typing import Callable, Mapping

from kwire.security.sasl import AUTHZID_MISMATCH, SaslServer, decode_saslname, parse_gs2_header

__all__ = [
    "MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "DEFAULT_ITERATIONS", "ScramCredential",
    "scram_credential", "scram_credential_from_salted_password", "format_kafka_credential",
    "parse_kafka_credential", "kafka_config_credentials", "ScramCredentialStore", "ScramServer",
]

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
JSON_VERSION = 1
_PRINTABLE = re.compile(r"[\x21-\x2B\x2D-\x7E]+")  # RFC 5802 printable: no ","
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64.  Raises ValueError (binascii.Error)."""
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclasses.dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def check(self, mechanism: str) -> None:
        """Raises ValueError unless this is a storable credential for ``mechanism``:
        iterations within 4096..16384, keys the hash's size, a salt present."""
        size = hashlib.new(_hash_name(mechanism)).digest_size
        if not MIN_ITERATIONS <= self.iterations <= MAX_ITERATIONS:
            raise ValueError(f"{mechanism} iterations {self.iterations} outside "
                             f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
        if len(self.stored_key) != size or len(self.server_key) != size or not self.salt:
            raise ValueError(f"{mechanism} credential has keys of the wrong size or no salt")


def scram_credential_from_salted_password(mechanism: str, salted_password: bytes, salt: bytes,
                                          iterations: int) -> ScramCredential:
    """The credential AlterUserScramCredentials carries (salt and salted password).

    Raises ValueError for an unknown mechanism or iterations outside 4096..16384.
    """
    name = _hash_name(mechanism)
    client_key = hmac.digest(salted_password, b"Client Key", name)
    credential = ScramCredential(bytes(salt), hashlib.new(name, client_key).digest(),
                                 hmac.digest(salted_password, b"Server Key", name), iterations)
    credential.check(mechanism)
    return credential


def scram_credential(mechanism: str, password: str, salt: bytes | None = None,
                     iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """Salt (32 random bytes unless given) and derive a credential from ``password``.

    Raises ValueError for an unknown mechanism or iterations outside 4096..16384.
    Costs one PBKDF2 of ``iterations`` rounds: run it off the event loop.
    """
    _hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations {iterations} outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)
    return scram_credential_from_salted_password(mechanism, salted, salt, iterations)


def format_kafka_credential(credential: ScramCredential) -> str:
    """Kafka's ScramCredentialUtils string: ``salt=..,stored_key=..,server_key=..,iterations=n``."""
    return (f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
            f"server_key={_b64(credential.server_key)},iterations={credential.iterations}")


def parse_kafka_credential(text: str) -> ScramCredential:
    """Parse Kafka's credential string (exactly the four keys, any order).

    Raises ValueError ("Credentials not valid") for anything else; the range of the
    iterations is checked where the credential is stored, not here.
    """
    fields = {}
    for token in text.split(","):
        key, sep, value = token.partition("=")
        if not key or not sep or key in fields:
            raise ValueError("Credentials not valid")
        fields[key] = value
    if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError("Credentials not valid")
    if not _JAVA_INT.fullmatch(fields["iterations"]):       # Integer.parseInt: no spaces, no "_"
        raise ValueError("Credentials not valid")
    try:
        return ScramCredential(_unb64_java(fields["salt"]), _unb64_java(fields["stored_key"]),
                               _unb64_java(fields["server_key"]), int(fields["iterations"]))
    except ValueError:
        raise ValueError("Credentials not valid") from None


def _unb64_java(text: str) -> bytes:
    """java.util.Base64's basic decoder, which Kafka reads these strings with: the "="
    padding may be left out.  Raises ValueError."""
    return _unb64(text + "=" * (-len(text) % 4) if "=" not in text else text)


def kafka_config_credentials(config: Mapping[str, str]) -> tuple[dict[str, ScramCredential], list[str]]:
    """The SCRAM credentials of a ``/config/users/<user>`` config map, and a message for each
    SCRAM key that does not hold a storable credential (left out).  Keys that are not SCRAM
    mechanisms (quotas such as ``producer_byte_rate``) are ignored.  Never raises."""
    credentials, problems = {}, []
    for mechanism, text in config.items():
        if mechanism not in MECHANISMS:
            continue
        try:
            credential = parse_kafka_credential(text)
            credential.check(mechanism)
        except ValueError as exc:
            problems.append(f"{mechanism}: {exc}")
            continue
        credentials[mechanism] = credential
    return credentials, problems


class ScramCredentialStore:
    """{user: {mechanism: ScramCredential}}, every credential checked on the way in.

    ``fake_salt_key`` (random unless given) derives the salts shown for unknown users;
    keep it per broker so a repeated probe sees the same salt.
    """

    def __init__(self, *, fake_salt_key: bytes | None = None,
                 nonce_factory: Callable[[], str] | None = None):
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._fake_salt_key = fake_salt_key or secrets.token_bytes(32)
        self._nonce_factory = nonce_factory

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def set(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Store (or replace) a credential.  Raises ValueError for a bad one."""
        credential.check(mechanism)
        self._users.setdefault(user, {})[mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        """Remove one credential; False when there was none."""
        found = self._users.get(user, {}).pop(mechanism, None) is not None
        if user in self._users and not self._users[user]:
            del self._users[user]
        return found

    def users(self) -> list[str]:
        return sorted(self._users)

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        """{mechanism: credential} for ``user`` (a copy; empty when unknown)."""
        return dict(self._users.get(user, {}))

    def fake_credential(self, user: str, mechanism: str) -> ScramCredential:
        """What an unknown user is shown: a salt stable per (user, mechanism), default
        iterations, and random keys no proof can match."""
        size = hashlib.new(_hash_name(mechanism)).digest_size
        salt = hmac.digest(self._fake_salt_key, f"{mechanism}\0{user}".encode(), "sha256")
        return ScramCredential(salt[:SALT_BYTES], secrets.token_bytes(size),
                               secrets.token_bytes(size), DEFAULT_ITERATIONS)

    def to_kafka_config(self, user: str) -> dict[str, str]:
        """The SCRAM part of ``/config/users/<user>``'s "config" map: {mechanism: string}."""
        return {m: format_kafka_credential(c) for m, c in sorted(self._users.get(user, {}).items())}

    def load_kafka_config(self, user: str, config: Mapping[str, str]) -> None:
        """Replace ``user``'s credentials with the SCRAM keys of a ``/config/users/<user>``
        config map (other keys, such as quotas, are ignored).  Raises ValueError and then
        changes nothing."""
        loaded, problems = kafka_config_credentials(config)
        if problems:
            raise ValueError("; ".join(problems))
        self.replace(user, loaded)

    def replace(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        """Make ``credentials`` ({mechanism: credential}, possibly empty) all of ``user``'s,
        in one step (no await: a login sees the old set or the new one).  Raises ValueError
        for a bad credential and then changes nothing."""
        for mechanism, credential in credentials.items():
            credential.check(mechanism)
        self._users.pop(user, None)
        if credentials:
            self._users[user] = dict(credentials)

    def to_json(self) -> str:
        users = {u: {m: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                         "server_key": _b64(c.server_key), "iterations": c.iterations}
                     for m, c in sorted(creds.items())}
                 for u, creds in sorted(self._users.items())}
        return json.dumps({"version": JSON_VERSION, "users": users}, indent=1)

    @classmethod
    def from_json(cls, text: str, **kwargs) -> "ScramCredentialStore":
        """Rebuild a store written by ``to_json``; kwargs go to the constructor.

        Raises ValueError for malformed JSON, an unknown version or a bad credential.
        """
        store = cls(**kwargs)
        try:
            doc = json.loads(text)
            if doc.get("version") != JSON_VERSION:
                raise ValueError(f"unknown credential file version {doc.get('version')!r}")
            for user, creds in doc["users"].items():
                for mechanism, c in creds.items():
                    store.set(user, mechanism, ScramCredential(
                        _unb64(c["salt"]), _unb64(c["stored_key"]), _unb64(c["server_key"]),
                        c["iterations"]))
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"malformed SCRAM credential file: {e!r}") from None
        return store

    def server(self, mechanism: str, **kwargs) -> "ScramServer":
        """A new exchange against this store (kwargs: max_token_bytes, reauthentication)."""
        return ScramServer(mechanism, self, nonce_factory=self._nonce_factory, **kwargs)


def _random_nonce() -> str:
    return secrets.token_urlsafe(24)


def _extensions(attrs: list[str]) -> dict[str, str]:
    out = {}
    for attr in attrs:
        key, sep, value = attr.partition("=")
        if not sep or not key.isalpha() or not key.isascii():
            raise ValueError(f"invalid SCRAM attribute {attr!r}")
        out[key] = value
    return out


class ScramServer(SaslServer):
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, store: ScramCredentialStore, *,
                 nonce_factory: Callable[[], str] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._store = store
        # the server nonce: printable ASCII without "," (RFC 5802); injectable for golden tests
        self._nonce_factory = nonce_factory or _random_nonce
        self._credential: ScramCredential | None = None
        self._known = False

    def _step(self, token: bytes) -> tuple[bytes, bool]:
        text = token.decode("utf-8")
        if self._credential is None:
            return self._client_first(text), False
        return self._client_final(text), True

    def _forget(self) -> None:
        self._credential = None

    def _client_first(self, text: str) -> bytes:
        self._gs2_header, authzid, self._first_bare = parse_gs2_header(text)
        attrs = self._first_bare.split(",")
        if attrs[0].startswith("m="):
            self._fail("mandatory extension (m=) not supported")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
            self._fail(f"invalid client-first message {text[:200]!r}")
        username, client_nonce = decode_saslname(attrs[0][2:]), attrs[1][2:]
        if not username or not _PRINTABLE.fullmatch(client_nonce):
            self._fail("empty username or invalid client nonce")
        if _extensions(attrs[2:]).get("tokenauth", "").lower() == "true":
            self._fail("delegation token authentication (tokenauth) not supported")
        if authzid and authzid != username:
            self._fail(f"authzid {authzid!r} is not {username!r}", AUTHZID_MISMATCH)
        self._username = username
        credential = self._store.get(username, self.mechanism)
        self._known = credential is not None
        self._credential = credential or self._store.fake_credential(username, self.mechanism)
        self._nonce = client_nonce + self._nonce_factory()
        self._server_first = (f"r={self._nonce},s={_b64(self._credential.salt)},"
                              f"i={self._credential.iterations}")
        return self._server_first.encode("ascii")

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = without_proof.split(",")
        if not sep or len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            self._fail(f"invalid client-final message {text[:200]!r}")
        _extensions(attrs[2:])
        if attrs[0][2:] != _b64(self._gs2_header.encode("utf-8")):
            self._fail(f"channel binding {attrs[0][2:]!r} does not match the gs2 header")
        if not hmac.compare_digest(attrs[1][2:].encode("utf-8"), self._nonce.encode("ascii")):
            self._fail("Invalid client nonce in the final client message")
        try:
            proof = _unb64(proof_b64)
        except (ValueError, binascii.Error):
            self._fail("client proof is not base64")
        credential = self._credential
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode("utf-8")
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(proof) != len(signature):
            self._fail(f"client proof of {len(proof)} bytes, expected {len(signature)}")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        same = hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key)
        if not (same and self._known):
            self._fail(f"{'invalid client proof' if self._known else 'unknown user'} "
                       f"for {self._username!r}")
        self.principal = f"User:{self._username}"
        return b"v=" + base64.b64encode(hmac.digest(credential.server_key, auth_message, self._hash))
