"""Checking a user name and password against the broker's SASL users, for HTTP Basic auth on
the broker's other listeners (the Schema Registry, kwire.schemas).

A password is right when it derives one of the user's SCRAM credentials (any mechanism, as
the SCRAM exchange itself would prove it: PBKDF2 with the stored salt and iterations, then
Kafka's StoredKey) or equals the user's PLAIN password from the JAAS ``user_<name>``
options of ``sasl.jaas.config``.  The comparison is constant-time.  A PBKDF2 costs 4096+
rounds: callers run ``check_password`` off the event loop and cache good answers.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Mapping

from kwire.security.scram import MECHANISMS, ScramCredentialStore

__all__ = ["check_password", "plain_users_of"]


def check_password(user: str, password: str, scram: ScramCredentialStore | None,
                   plain_users: Mapping[str, str]) -> bool:
    """Whether ``password`` is ``user``'s SCRAM or PLAIN password.  Blocking (PBKDF2)."""
    expected = plain_users.get(user)
    if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
        return True
    credentials = scram.credentials(user) if scram is not None else {}
    for mechanism, credential in credentials.items():
        name = MECHANISMS[mechanism]
        salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), credential.salt, credential.iterations)
        client_key = hmac.digest(salted, b"Client Key", name)
        if hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key):
            return True
    return False


def plain_users_of(originals: Mapping[str, str]) -> dict[str, str]:
    """{name: password} of every PlainLoginModule entry in the broker's ``sasl.jaas.config``
    settings (broker-wide and per listener and mechanism).  Unparseable entries are skipped:
    the listeners that use them refuse to start with the reason."""
    from kwire.security.sasl import PLAIN_LOGIN_MODULE, parse_jaas_entries, plain_users
    users: dict[str, str] = {}
    for key, text in originals.items():
        if not key.endswith("sasl.jaas.config") or not isinstance(text, str):
            continue
        try:
            entries = parse_jaas_entries(text)
        except ValueError:
            continue
        for entry in entries:
            if entry.login_module == PLAIN_LOGIN_MODULE:
                users.update(plain_users(entry.options))
    return users
