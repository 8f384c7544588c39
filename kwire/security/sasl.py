"""Server side of SASL on a Kafka listener: PLAIN, OAUTHBEARER, the JAAS option
syntax, and what every mechanism shares (the token limit, the one error, the
factory table).  SCRAM lives in :mod:`kwire.security.scram`, which builds on this module.

Sans-I/O: a mechanism object is fed the client's token bytes (one SaslAuthenticate
``auth_bytes``, or one raw v0 token) by ``step`` and returns the bytes to answer
with and whether the exchange is complete; it reads no clock (OAUTHBEARER is given
``now_ms``) and touches no socket.  Every failure is one ``SaslError`` carrying
Kafka's code, the message the client may see, and a ``detail`` for the log line.

Tokens (client -> server):

    PLAIN (RFC 4616)        [authzid] NUL authcid NUL passwd             -> b""
    OAUTHBEARER (RFC 7628)  gs2-header 0x01 "auth=Bearer " token
                            *(0x01 key "=" value) 0x01 0x01               -> b"" or an error JSON
                            after an error JSON, the client's 0x01         -> SaslError(JSON)
    gs2-header              ("n" | "y") "," ["a=" saslname] ","   saslname escapes "," "=" as =2C =3D
    unsecured JWS token     base64url(header) "." base64url(claims) "."   header {"alg": "none"}

Kafka's rules kept: the authzid, when sent, must equal the authenticated name; a
PLAIN failure says "Invalid username or password" whether the user exists or not;
other failures tell the client only Kafka's generic sentence and the mechanism.
The JAAS syntax is Kafka's ``sasl.jaas.config``: ``<LoginModule> <flag> key=value ... ;``.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import re
from typing import Iterable, Mapping, NoReturn, Protocol

from kwire.codecs.errors import ErrorCode, KafkaApiError

__all__ = [
    "MAX_SASL_TOKEN_BYTES", "SUPPORTED_MECHANISMS", "SaslError", "SaslServer", "PlainServer",
    "OAuthBearerServer", "UnsecuredJwsOptions", "JaasEntry", "parse_jaas_config",
    "parse_jaas_entries", "plain_users", "check_token_size", "parse_gs2_header",
    "decode_saslname", "parse_enabled_mechanisms", "server_factories", "ServerFactory",
    "ScramServerSource",
]

# Kafka's sasl.server.max.receive.size default: the largest frame read before authentication.
MAX_SASL_TOKEN_BYTES = 524288
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

# the messages Kafka's PlainSaslServer / SaslServerAuthenticator send to clients
INVALID_USER_OR_PASSWORD = "Authentication failed: Invalid username or password"
AUTHZID_MISMATCH = ("Authentication failed: Client requested an authorization id that is "
                    "different from username")


class SaslError(KafkaApiError):
    """A failed SASL exchange: ``code`` (SASL_AUTHENTICATION_FAILED, or ILLEGAL_SASL_STATE
    for a token after the exchange ended), ``message`` for the client's error_message,
    ``detail`` for the broker's log only (it may name the user)."""

    def __init__(self, message: str, detail: str,
                 code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED):
        super().__init__(code, message)
        self.detail = detail


def check_token_size(size: int, limit: int = MAX_SASL_TOKEN_BYTES) -> None:
    """Refuse a token (or an unauthenticated frame) longer than ``limit`` bytes.

    Call it on the length prefix before reading the frame; ``step`` calls it too.
    Raises SaslError (Kafka closes the connection on this, InvalidReceiveException).
    """
    if size > limit:
        raise SaslError(f"SASL token of {size} bytes exceeds the limit of {limit} bytes",
                        f"token of {size} bytes > sasl.server.max.receive.size {limit}")


class SaslServer:
    """One server-side exchange.  ``step(token) -> (server_bytes, done)``; once done,
    ``principal`` is ``User:<name>`` (None until then) and ``credential_expiry_ms`` when the
    credential ends (ms since the epoch: an OAUTHBEARER token's exp; None for passwords),
    which caps the session (Kafka's CREDENTIAL.LIFETIME.MS negotiated property).  A failed
    or finished exchange takes no more tokens.  Subclasses implement ``_step`` and fail
    through ``_fail``."""

    mechanism = ""

    def __init__(self, *, max_token_bytes: int = MAX_SASL_TOKEN_BYTES,
                 reauthentication: bool = False):
        self.principal: str | None = None
        self.credential_expiry_ms: int | None = None
        self._max_token_bytes = max_token_bytes
        self._reauthentication = reauthentication
        self._complete = False
        self._failed = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def generic_message(self) -> str:
        phase = "re-authentication" if self._reauthentication else "authentication"
        return (f"Authentication failed during {phase} due to invalid credentials with "
                f"SASL mechanism {self.mechanism}")

    def step(self, client_bytes: bytes) -> tuple[bytes, bool]:
        """Feed one client token; return the server's token and whether the exchange is done.

        Raises SaslError, and only SaslError, whatever the bytes (oversize, malformed,
        wrong credentials, a token after the end).  Not re-entrant; no I/O.
        """
        if self._complete or self._failed:
            raise SaslError("SASL token received after the exchange ended",
                            f"{self.mechanism}: token after the exchange ended",
                            ErrorCode.ILLEGAL_SASL_STATE)
        try:
            check_token_size(len(client_bytes), self._max_token_bytes)
            try:
                server_bytes, done = self._step(bytes(client_bytes))
            except (ValueError, IndexError, KeyError) as e:  # UnicodeError, binascii.Error, JSON
                self._fail(f"malformed token: {e!r}")
        except SaslError:
            self._failed = True
            self._forget()
            raise
        if done:
            self._complete = True
            self._forget()
        return server_bytes, done

    def _step(self, token: bytes) -> tuple[bytes, bool]:
        raise NotImplementedError

    def _forget(self) -> None:
        """Drop secrets held for the exchange (called once it ends either way)."""

    def _fail(self, detail: str, message: str | None = None) -> NoReturn:
        raise SaslError(message or self.generic_message, f"{self.mechanism}: {detail}")


def decode_saslname(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` or a
    ``,`` is malformed.  Raises ValueError."""
    if "," in name or "\0" in name or re.search(r"=(?!2C|3D)", name):
        raise ValueError(f"invalid saslname {name!r}")
    return name.replace("=2C", ",").replace("=3D", "=")


def parse_gs2_header(text: str) -> tuple[str, str, str]:
    """Split ``gs2-header rest`` into (header, authzid, rest); authzid is "" when absent.

    ``p=`` (channel binding requested) is refused: kwire offers no -PLUS mechanism.
    Raises ValueError.
    """
    flag, sep1, after = text.partition(",")
    authz, sep2, rest = after.partition(",")
    if not (sep1 and sep2):
        raise ValueError("no gs2 header")
    if flag.startswith("p="):
        raise ValueError("channel binding requested (p=), not supported")
    if flag not in ("n", "y"):
        raise ValueError(f"invalid gs2 channel binding flag {flag!r}")
    if authz and not authz.startswith("a="):
        raise ValueError(f"invalid gs2 authzid {authz!r}")
    authzid = decode_saslname(authz[2:]) if authz else ""
    return text[:len(flag) + len(authz) + 2], authzid, rest


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class PlainServer(SaslServer):
    """SASL/PLAIN against ``users`` ({name: password}, the JAAS ``user_<name>`` options).

    Passwords are compared as SHA-256 digests with ``hmac.compare_digest``, so the time
    taken does not depend on where they differ, on their lengths, or on the user existing.
    """

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str], **kwargs):
        super().__init__(**kwargs)
        self._users = users

    def _step(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            self._fail(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = (p.decode("utf-8") for p in parts)
        if not username:
            self._fail("username not specified")
        if not password:
            self._fail("password not specified")
        expected = self._users.get(username)
        same = hmac.compare_digest(_digest(password), _digest(expected or "\0unknown"))
        if expected is None or not same:
            why = "unknown user" if expected is None else "wrong password"
            self._fail(f"{why} for {username!r}", INVALID_USER_OR_PASSWORD)
        if authzid and authzid != username:
            self._fail(f"authzid {authzid!r} is not {username!r}", AUTHZID_MISMATCH)
        self.principal = f"User:{username}"
        return b"", True


@dataclasses.dataclass(frozen=True)
class UnsecuredJwsOptions:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler options (JAAS, OAUTHBEARER)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> "UnsecuredJwsOptions":
        """Raises ValueError for a skew that is not a non-negative integer."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        if not skew.isdigit():
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs must be an integer >= 0: {skew!r}")
        scope = options.get("unsecuredValidatorRequiredScope", "")
        return cls(options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub",
                   options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope",
                   tuple(s.strip() for s in scope.split(",") if s.strip()), int(skew))


def _b64url_json(part: str) -> dict:
    value = json.loads(base64.b64decode(part + "=" * (-len(part) % 4), b"-_", validate=True))
    if not isinstance(value, dict):
        raise ValueError("JWS part is not a JSON object")
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class OAuthBearerServer(SaslServer):
    """SASL/OAUTHBEARER with unsecured JWS tokens (``alg: none``), Kafka's default
    validator: the principal claim names the user, ``exp`` is required and checked
    against ``now_ms``, ``iat`` must not be in the future.  A rejected token is
    answered with RFC 7628's error JSON; the client's 0x01 then fails the exchange."""

    mechanism = "OAUTHBEARER"
    _KEY = re.compile(r"[A-Za-z]+")
    _VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
    _TOKEN = re.compile(r"[-_.a-zA-Z0-9]+")

    def __init__(self, now_ms: int, options: UnsecuredJwsOptions = UnsecuredJwsOptions(),
                 **kwargs):
        super().__init__(**kwargs)
        self._now_ms = now_ms
        self._options = options
        self._error: str | None = None
        self._why = ""

    def _step(self, token: bytes) -> tuple[bytes, bool]:
        if self._error is not None:
            got = "" if token == b"\x01" else f" instead of %x01 ({len(token)} bytes)"
            self._fail(f"token refused ({self._why}); client ended{got}", self._error)
        _, authzid, rest = parse_gs2_header(token.decode("utf-8"))
        if not (rest.startswith("\x01") and rest.endswith("\x01\x01")) or len(rest) < 3:
            self._fail("Invalid OAUTHBEARER client first message")
        pairs: dict[str, str] = {}
        for pair in rest[1:-2].split("\x01"):
            key, sep, value = pair.partition("=")
            if not (sep and self._KEY.fullmatch(key) and self._VALUE.fullmatch(value)) or key in pairs:
                self._fail(f"invalid key/value pair {pair!r}")
            pairs[key] = value
        scheme, _, jws = pairs.get("auth", "").partition(" ")
        jws = jws.lstrip(" ")
        if scheme.lower() != "bearer" or not self._TOKEN.fullmatch(jws):
            self._fail("Invalid OAUTHBEARER client first message: no 'auth=Bearer <token>'")
        claims, status, why = self._validate(jws)
        if claims is None:
            self._error = json.dumps(status, separators=(",", ":"))
            self._why = why
            return self._error.encode("utf-8"), False
        principal = claims[self._options.principal_claim]
        if authzid and authzid != principal:
            self._fail(f"authzid {authzid!r} is not {principal!r}",
                       f"Authentication failed: Client requested an authorization id ({authzid}) "
                       f"that is different from the token's principal name ({principal})")
        self.principal = f"User:{principal}"
        self.credential_expiry_ms = round(claims["exp"] * 1000)
        return b"", True

    def _validate(self, jws: str) -> tuple[dict | None, dict, str]:
        """(the token's claims, {}, "") for a good token, else (None, error JSON fields, why)."""
        invalid = {"status": "invalid_token"}
        parts = jws.split(".")
        if len(parts) != 3 or parts[2]:
            return None, invalid, "not an unsecured JWS (3 parts, empty signature)"
        try:
            header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        except (ValueError, RecursionError) as e:
            return None, invalid, f"undecodable JWS: {e!r}"
        opts, now = self._options, self._now_ms
        principal = claims.get(opts.principal_claim)
        exp, iat = claims.get("exp"), claims.get("iat")
        if header.get("alg") != "none":
            return None, invalid, f"alg {header.get('alg')!r} is not 'none'"
        if not isinstance(principal, str) or not principal.strip():
            return None, invalid, f"no string claim {opts.principal_claim!r}"
        if not _number(exp) or now - opts.clock_skew_ms >= exp * 1000:
            return None, invalid, f"exp {exp!r} missing or not after now_ms {now}"
        if iat is not None and (not _number(iat) or iat * 1000 > now + opts.clock_skew_ms):
            return None, invalid, f"iat {iat!r} invalid or in the future (now_ms {now})"
        scope = claims.get(opts.scope_claim, [])
        listed = scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
        granted = {s for s in listed if isinstance(s, str)}
        if not granted.issuperset(opts.required_scope):
            return (None, {"status": "insufficient_scope", "scope": " ".join(opts.required_scope)},
                    f"scope {sorted(granted)} lacks {list(opts.required_scope)}")
        return claims, {}, ""


@dataclasses.dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str  # lower case: required, requisite, sufficient or optional
    options: dict[str, str]


_JAAS_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|(?P<word>[A-Za-z0-9_$.\-\x80-\U0010FFFF]+)
                             |(?P<punct>[=;])|(?P<quote>["'])""", re.S | re.X)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


def _jaas_tokens(text: str) -> Iterable[tuple[str, str]]:
    """(kind, value) with kind "word", "string", "=" or ";"; Java StreamTokenizer's
    escapes in quotes (\\n \\t ... octal, any other \\x is x).  Raises ValueError."""
    pos = 0
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"JAAS config: unexpected {text[pos]!r} at offset {pos}")
        pos = m.end()
        if m["word"]:
            yield "word", m["word"]
        elif m["punct"]:
            yield m["punct"], m["punct"]
        elif m["quote"]:
            out = []
            while True:
                if pos >= len(text) or text[pos] == "\n":
                    raise ValueError(f"JAAS config: unterminated quoted value at offset {m.start()}")
                c, pos = text[pos], pos + 1
                if c == m["quote"]:
                    break
                if c == "\\" and pos < len(text):
                    octal = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", text[pos:])
                    if octal:
                        c, pos = chr(int(octal[0], 8)), pos + len(octal[0])
                    else:
                        c, pos = _ESCAPES.get(text[pos], text[pos]), pos + 1
                out.append(c)
            yield "string", "".join(out)


def parse_jaas_entries(text: str) -> list[JaasEntry]:
    """Every ``<LoginModule> <flag> [key=value ...];`` entry in ``text``; values are
    words or quoted strings.  Raises ValueError, naming what is wrong."""
    entries, tokens = [], iter(_jaas_tokens(text))
    for kind, module in tokens:
        if kind != "word":
            raise ValueError(f"JAAS config: expected a login module class name, got {module!r}")
        kind, flag = next(tokens, (None, None))
        if kind != "word" or flag.lower() not in CONTROL_FLAGS:
            raise ValueError(f"JAAS config: invalid login module control flag {flag!r} after "
                             f"{module}; expected one of {', '.join(CONTROL_FLAGS)}")
        options: dict[str, str] = {}
        while True:
            kind, key = next(tokens, (None, None))
            if kind == ";":
                break
            if kind is None:
                raise ValueError(f"JAAS config: entry {module} not terminated by semi-colon")
            if kind != "word":
                raise ValueError(f"JAAS config: expected an option name in {module}, got {key!r}")
            eq, value = next(tokens, (None, None)), next(tokens, (None, None))
            if eq[0] != "=" or value[0] not in ("word", "string"):
                raise ValueError(f"JAAS config: value not specified for key {key!r} in {module}")
            if key in options:
                raise ValueError(f"JAAS config: option {key!r} given twice in {module}")
            options[key] = value[1]
        entries.append(JaasEntry(module, flag.lower(), options))
    return entries


def parse_jaas_config(text: str) -> JaasEntry:
    """A ``sasl.jaas.config`` value: exactly one login module, as Kafka requires.

    Raises ValueError.  The value holds passwords: never log it.
    """
    entries = parse_jaas_entries(text)
    if len(entries) != 1:
        raise ValueError("JAAS config property does not contain any login modules" if not entries
                         else f"JAAS config property contains {len(entries)} login modules, "
                              "should be 1 module")
    return entries[0]


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """{name: password} from a PlainLoginModule's ``user_<name>="<password>"`` options."""
    return {k[5:]: v for k, v in options.items() if k.startswith("user_") and len(k) > 5}


def parse_enabled_mechanisms(value: str | Iterable[str]) -> list[str]:
    """``sasl.enabled.mechanisms`` (a comma-separated list, or a list) -> names, in order.

    Raises ValueError naming any mechanism kwire does not implement (e.g. Kafka's default GSSAPI).
    """
    names = [n.strip() for n in (value.split(",") if isinstance(value, str) else value)]
    names = list(dict.fromkeys(n for n in names if n))
    unknown = [n for n in names if n not in SUPPORTED_MECHANISMS]
    if unknown:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported; "
                         f"kwire supports {', '.join(SUPPORTED_MECHANISMS)}")
    return names


class ServerFactory(Protocol):
    def __call__(self, now_ms: int, *, reauthentication: bool = False) -> SaslServer: ...


class ScramServerSource(Protocol):
    """What ``server_factories`` needs of kwire.security.scram's ScramCredentialStore."""

    def server(self, mechanism: str, **kwargs) -> SaslServer: ...


def server_factories(enabled: str | Iterable[str], *, jaas: Iterable[JaasEntry] = (),
                     scram: ScramServerSource | None = None,
                     max_token_bytes: int = MAX_SASL_TOKEN_BYTES) -> dict[str, ServerFactory]:
    """{mechanism: factory} for the listener; ``factory(now_ms)`` starts one exchange.

    PLAIN's users come from the PlainLoginModule entry in ``jaas``, OAUTHBEARER's options
    from the OAuthBearerLoginModule entry (Kafka's rule: a module's options serve its own
    mechanism); SCRAM mechanisms use ``scram`` (a ScramCredentialStore).  Raises ValueError
    for an unsupported mechanism or an enabled one with nothing to authenticate against.
    """
    modules = {e.login_module: e.options for e in jaas}
    out: dict[str, ServerFactory] = {}
    for name in parse_enabled_mechanisms(enabled):
        if name == "PLAIN":
            if PLAIN_LOGIN_MODULE not in modules:
                raise ValueError(f"PLAIN enabled but no {PLAIN_LOGIN_MODULE} JAAS entry")
            users = plain_users(modules[PLAIN_LOGIN_MODULE])
            out[name] = lambda now_ms, *, reauthentication=False, _u=users: PlainServer(
                _u, max_token_bytes=max_token_bytes, reauthentication=reauthentication)
        elif name == "OAUTHBEARER":
            if OAUTHBEARER_LOGIN_MODULE not in modules:
                raise ValueError(f"OAUTHBEARER enabled but no {OAUTHBEARER_LOGIN_MODULE} JAAS entry")
            opts = UnsecuredJwsOptions.from_jaas(modules[OAUTHBEARER_LOGIN_MODULE])
            out[name] = lambda now_ms, *, reauthentication=False, _o=opts: OAuthBearerServer(
                now_ms, _o, max_token_bytes=max_token_bytes, reauthentication=reauthentication)
        else:
            if scram is None:
                raise ValueError(f"{name} enabled but no SCRAM credential store given")
            out[name] = lambda now_ms, *, reauthentication=False, _m=name: scram.server(
                _m, max_token_bytes=max_token_bytes, reauthentication=reauthentication)
    return out
