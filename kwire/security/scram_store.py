"""SCRAM credentials of a single-node broker: the store the SASL listeners read, its file,
and what AlterUserScramCredentials (51) and DescribeUserScramCredentials (50) do to it.
A cluster broker keeps them in ZooKeeper instead (kwire.cluster.scram_store.ZkScramService, the same
rules, no file).

File: ``<first log dir>/__kwire_scram_credentials.json``, ``ScramCredentialStore.to_json``'s
layout (kwire.security.scram)::

    {"version": 1, "users": {user: {mechanism: {"salt": b64, "stored_key": b64,
                                                "server_key": b64, "iterations": n}}}}

It is replaced whole on every change (``write_atomically``: ``<file>.tmp``, fsync, rename,
fsync of the directory), off the Trio thread, so a crash leaves the old or the new file and
never a mix; a ``.tmp`` left by a crash is ignored and overwritten by the next write.  A
missing file is an empty store; one that cannot be read or parsed stops the start
(``ScramFileError``) rather than silently dropping every credential.

Rules, as Kafka 4's controller (ScramControlManager) and metadata image (ScramImage.describe):

* Alter: a user is the unit.  A user named a second time in one request (deletion or
  upsertion, even for another mechanism) gets DUPLICATE_RESOURCE and none of its
  alterations apply; later mentions of a user that already failed are ignored.  Checked in
  order: empty name -> UNACCEPTABLE_CREDENTIAL, mechanism other than 1 (SCRAM-SHA-256) or 2
  (SCRAM-SHA-512) -> UNSUPPORTED_SASL_MECHANISM, then for an upsertion iterations below 4096
  or above 16384 -> UNACCEPTABLE_CREDENTIAL, for a deletion no such credential ->
  RESOURCE_NOT_FOUND.  Results: successful deletions, successful upsertions, then failures.
  The accepted alterations are applied together (one file write) or not at all.
* Describe: no users (null or empty) -> every user with a credential, sorted; otherwise one
  result per distinct name in request order: DUPLICATE_RESOURCE for a name asked twice,
  RESOURCE_NOT_FOUND for a name without credentials (the empty name included).

One deliberate difference: an upsertion with an empty salt is UNACCEPTABLE_CREDENTIAL (Kafka
stores it; kwire.security.scram refuses a credential without a salt).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Iterable, NamedTuple, Sequence

import trio

from kwire.codecs.errors import ErrorCode
from kwire.log.checkpoints import write_atomically

from kwire.runtime.blocking import run_blocking
from kwire.security.scram import (MAX_ITERATIONS, MIN_ITERATIONS, ScramCredentialStore,
                    scram_credential_from_salted_password)

__all__ = ["FILE_NAME", "MECHANISM_TYPES", "UNACCEPTABLE_CREDENTIAL", "ScramFileError", "ScramUpsertion",
           "ScramDeletion", "AlterResult", "DescribeResult", "ScramService"]

logger = logging.getLogger("kwire.security.scram")

FILE_NAME = "__kwire_scram_credentials.json"
# Kafka's ScramMechanism.type() -> mechanism name (0 is UNKNOWN)
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_TYPE_OF = {name: code for code, name in MECHANISM_TYPES.items()}
# Kafka's Errors.UNACCEPTABLE_CREDENTIAL, not (yet) in kwire.codecs.errors.ErrorCode
UNACCEPTABLE_CREDENTIAL = 93

ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "


class ScramFileError(Exception):
    """The credential file exists but cannot be read or parsed (the message names it)."""


class ScramUpsertion(NamedTuple):
    user: str
    mechanism: int             # Kafka's mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes
    salted_password: bytes     # PBKDF2(password, salt, iterations), computed by the client


class ScramDeletion(NamedTuple):
    user: str
    mechanism: int


@dataclasses.dataclass(frozen=True)
class AlterResult:
    user: str
    error_code: int = 0
    error_message: str | None = None


@dataclasses.dataclass(frozen=True)
class DescribeResult:
    user: str
    error_code: int = 0
    error_message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()    # (mechanism type, iterations), by type


class _Plan(NamedTuple):
    deletions: dict[str, ScramDeletion]
    upsertions: dict[str, tuple[str, object]]        # user -> (mechanism name, ScramCredential)
    errors: dict[str, tuple[int, str]]


class ScramService:
    """The broker's SCRAM credentials, kept in ``store`` (the same object for the broker's
    life: SASL exchanges may hold it) and persisted in ``<log_dir>/__kwire_scram_credentials.json``.

    ``store_kwargs`` go to ``ScramCredentialStore`` (``fake_salt_key``, ``nonce_factory``).
    All methods run on the Trio thread; only the file write goes to a worker thread.
    """

    def __init__(self, log_dir: str | os.PathLike, **store_kwargs):
        self.path = os.path.join(os.path.abspath(os.fspath(log_dir)), FILE_NAME)
        self.store = ScramCredentialStore(**store_kwargs)
        self._lock = trio.Lock()       # one alteration at a time: each validates what it writes

    # -- start-up ----------------------------------------------------------------
    def load(self) -> None:
        """Read the file into ``store`` (a missing file: no credentials).  Blocking; run at
        start-up, before the listeners open.  Raises ScramFileError and then changes nothing."""
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            text = None
        except (OSError, UnicodeDecodeError) as exc:
            raise ScramFileError(f"{self.path}: unreadable: {exc}") from None
        loaded = {}
        if text is not None:
            try:
                parsed = ScramCredentialStore.from_json(text)
            except ValueError as exc:     # JSONDecodeError is a ValueError
                raise ScramFileError(f"{self.path}: not a SCRAM credential file: {exc}") from None
            loaded = {user: parsed.credentials(user) for user in parsed.users()}
        for user in self.store.users():
            for mechanism in self.store.credentials(user):
                self.store.delete(user, mechanism)
        for user, creds in loaded.items():
            for mechanism, credential in creds.items():
                self.store.set(user, mechanism, credential)

    # -- AlterUserScramCredentials -------------------------------------------------
    async def alter(self, upsertions: Iterable[ScramUpsertion],
                    deletions: Iterable[ScramDeletion]) -> list[AlterResult]:
        """Apply a request's alterations; one result per user named.  Never raises for a bad
        alteration (results carry the errors); a failed file write answers every user that
        would have changed KAFKA_STORAGE_ERROR and changes nothing.  Cancel-safe: a write
        that started completes and is applied."""
        async with self._lock:
            plan = self._plan(list(upsertions), list(deletions))
            changed = list(plan.deletions) + list(plan.upsertions)
            if changed:
                try:
                    await run_blocking(write_atomically, self.path, self._after(plan).to_json())
                except OSError as exc:
                    logger.error("could not write SCRAM credentials to %s: %s", self.path, exc)
                    message = f"could not write {self.path}: {exc.strerror or exc}"
                    return ([AlterResult(u, int(ErrorCode.KAFKA_STORAGE_ERROR), message) for u in changed]
                            + [AlterResult(u, code, msg) for u, (code, msg) in plan.errors.items()])
                self._apply(self.store, plan)
            return ([AlterResult(u) for u in changed]
                    + [AlterResult(u, code, msg) for u, (code, msg) in plan.errors.items()])

    def _plan(self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[ScramDeletion]) -> _Plan:
        to_delete: dict[str, ScramDeletion] = {}
        to_upsert: dict[str, ScramUpsertion] = {}
        errors: dict[str, tuple[int, str]] = {}
        for d in deletions:
            if d.user in errors:
                continue
            if to_delete.pop(d.user, None) is not None:
                errors[d.user] = (int(ErrorCode.DUPLICATE_RESOURCE), ALTERED_TWICE)
            elif (error := self._check_deletion(d)) is not None:
                errors[d.user] = error
            else:
                to_delete[d.user] = d
        for u in upsertions:
            if u.user in errors:
                continue
            if to_delete.pop(u.user, None) is not None or to_upsert.pop(u.user, None) is not None:
                errors[u.user] = (int(ErrorCode.DUPLICATE_RESOURCE), ALTERED_TWICE)
            elif (error := _check_upsertion(u)) is not None:
                errors[u.user] = error
            else:
                to_upsert[u.user] = u
        built = {}
        for user, u in to_upsert.items():
            mechanism = MECHANISM_TYPES[u.mechanism]
            try:
                built[user] = (mechanism, scram_credential_from_salted_password(
                    mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations))
            except ValueError as exc:           # an empty salt
                errors[user] = (UNACCEPTABLE_CREDENTIAL, str(exc))
        return _Plan(to_delete, built, errors)

    def _check_deletion(self, d: ScramDeletion) -> tuple[int, str] | None:
        error = check_name_and_mechanism(d.user, d.mechanism)
        if error is None and self.store.get(d.user, MECHANISM_TYPES[d.mechanism]) is None:
            error = (int(ErrorCode.RESOURCE_NOT_FOUND), DELETE_MISSING)
        return error

    def _after(self, plan: _Plan) -> ScramCredentialStore:
        """A copy of ``store`` with ``plan`` applied (what the file will hold)."""
        copy = ScramCredentialStore.from_json(self.store.to_json())
        self._apply(copy, plan)
        return copy

    @staticmethod
    def _apply(store: ScramCredentialStore, plan: _Plan) -> None:
        for user, d in plan.deletions.items():
            store.delete(user, MECHANISM_TYPES[d.mechanism])
        for user, (mechanism, credential) in plan.upsertions.items():
            store.set(user, mechanism, credential)

    # -- DescribeUserScramCredentials ----------------------------------------------
    def describe(self, users: Sequence[str] | None) -> list[DescribeResult]:
        """One result per user asked for (every user with a credential when ``users`` is
        None or empty).  Never raises."""
        if not users:
            return [self._describe_one(user) for user in self.store.users()]
        counts: dict[str, int] = {}
        for user in users:
            counts[user] = counts.get(user, 0) + 1
        return [self._describe_one(user) if n == 1 else
                DescribeResult(user, int(ErrorCode.DUPLICATE_RESOURCE), DESCRIBE_TWICE + user)
                for user, n in counts.items()]

    def _describe_one(self, user: str) -> DescribeResult:
        creds = self.store.credentials(user)
        if not creds:
            return DescribeResult(user, int(ErrorCode.RESOURCE_NOT_FOUND), DESCRIBE_MISSING + user)
        return DescribeResult(user, credentials=tuple(sorted(
            (_TYPE_OF[mechanism], c.iterations) for mechanism, c in creds.items())))


def check_name_and_mechanism(user: str, mechanism: int) -> tuple[int, str] | None:
    if not user:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_TYPES:
        return int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "Unknown SCRAM mechanism"
    return None


def _check_upsertion(u: ScramUpsertion) -> tuple[int, str] | None:
    error = check_name_and_mechanism(u.user, u.mechanism)
    if error is None and u.iterations < MIN_ITERATIONS:
        error = UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    elif error is None and u.iterations > MAX_ITERATIONS:
        error = UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return error
