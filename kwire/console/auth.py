"""Who uses the console, and what they may do.

**Users file** (``--users-file``): one user per line, ``name:scrypt$N$r$p$salt$hash`` (salt and
hash in base64; ``kwire console hash-password`` prints such a line).  Blank lines and ``#``
comments are skipped.  With a users file every page needs a login; without one the console
serves everyone, for local use.

**Sessions** are a signed cookie (HMAC-SHA256 with a secret made at start, so a restart logs
everyone out): ``user|expiry|nonce|signature``, HttpOnly, SameSite=Strict.  Logging out revokes
the session on the server too, so a copy of the cookie stops working.

**Writes** (any POST) need the form's ``csrf`` field (or htmx's ``X-CSRF-Token`` header) to
match the session's token, so another site cannot post forms to a console on localhost.  In
``--read-only`` mode pages hide every write control and the server refuses writes (403).
Every write is logged on ``kwire.console.audit`` with the console user.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Mapping

audit_log = logging.getLogger("kwire.console.audit")

SESSION_COOKIE = "kwire_console"
SESSION_TTL_S = 12 * 3600
ANONYMOUS = "anonymous"
_SCRYPT = dict(n=2 ** 14, r=8, p=1)


class UsersFileError(ValueError):
    """An unreadable users file or a malformed line (the message names the line)."""


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$hash`` for ``password`` (a users file line is ``name:`` and this)."""
    salt = salt or os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    return "$".join(["scrypt", str(_SCRYPT["n"]), str(_SCRYPT["r"]), str(_SCRYPT["p"]),
                     base64.b64encode(salt).decode(), base64.b64encode(digest).decode()])


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p),
                             dklen=len(expected), maxmem=128 * 1024 * 1024)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def read_users_file(path: str) -> dict[str, str]:
    """{user: stored hash}.  Raises UsersFileError."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise UsersFileError(f"cannot read the users file {path}: {exc.strerror}") from None
    users: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, stored = line.partition(":")
        if not sep or not name or not stored.startswith("scrypt$") or stored.count("$") != 5:
            raise UsersFileError(f"{path}:{number}: expected name:scrypt$N$r$p$salt$hash "
                                 "(kwire console hash-password prints one)")
        users[name] = stored
    return users


@dataclass
class Auth:
    """The console's users (None: no login) and session signing."""
    users: Mapping[str, str] | None
    read_only: bool = False
    secret: bytes = b""

    def __post_init__(self):
        self.secret = self.secret or secrets.token_bytes(32)
        self._revoked: dict[str, int] = {}          # signature -> expiry of logged-out sessions

    @property
    def login_required(self) -> bool:
        return self.users is not None

    def check_password(self, user: str, password: str) -> bool:
        stored = (self.users or {}).get(user)
        if stored is None:
            hash_password(password)         # the same time for an unknown user
            return False
        return verify_password(password, stored)

    def session_cookie(self, user: str, now: float | None = None) -> str:
        expiry = int((now or time.time()) + SESSION_TTL_S)
        payload = f"{base64.urlsafe_b64encode(user.encode()).decode()}|{expiry}|{secrets.token_hex(8)}"
        return f"{payload}|{self._sign(payload)}"

    def revoke(self, cookie: str | None, now: float | None = None) -> None:
        """Log a session out for good: a copy of its cookie is refused from now on (kept until
        the cookie would have expired anyway)."""
        if not cookie or self.session_user(cookie, now) is None:
            return
        now = now or time.time()
        self._revoked = {sig: exp for sig, exp in self._revoked.items() if exp >= now}
        payload, _, signature = cookie.rpartition("|")
        self._revoked[signature] = int(payload.split("|")[1])

    def session_user(self, cookie: str | None, now: float | None = None) -> str | None:
        """The user of a valid, unexpired session cookie; else None."""
        if not cookie:
            return None
        payload, _, signature = cookie.rpartition("|")
        if not payload or not _same(signature, self._sign(payload)) or signature in self._revoked:
            return None
        encoded, _, rest = payload.partition("|")
        expiry = rest.partition("|")[0]
        try:
            if int(expiry) < (now or time.time()):
                return None
            user = base64.urlsafe_b64decode(encoded.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        return user if self.users is None or user in self.users else None

    def csrf_token(self, user: str) -> str:
        return self._sign(f"csrf|{user}")

    def check_csrf(self, user: str, token: str | None) -> bool:
        return bool(token) and _same(str(token), self.csrf_token(user))

    def _sign(self, text: str) -> str:
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    """A constant-time comparison that refuses (rather than raises on) non-ASCII input."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def audit(user: str, action: str, target: str, **details: object) -> None:
    """One line per console write: who, what, on what, and the outcome or details."""
    extra = " ".join(f"{k}={v!r}" for k, v in details.items())
    audit_log.info("console write: user=%s action=%s target=%s %s", user, action, target, extra)
