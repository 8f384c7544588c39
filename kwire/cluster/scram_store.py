"""SCRAM credentials of a cluster broker, kept in ZooKeeper as ZooKeeper-era Kafka keeps
them, so every broker of the cluster knows the same users.

Layout (Kafka's ConfigEntityZNode and ConfigEntityChangeNotificationSequenceZNode)::

    /config/users/<sanitized user>
        {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>",
                               "SCRAM-SHA-512":"...", "producer_byte_rate":"1024", ...}}
    /config/changes/config_change_<10-digit seq>   (persistent sequential)
        {"version":2,"entity_path":"users/<sanitized user>"}
        (version 1, from older tools: {"version":1,"entity_type":"users","entity_name":"<sanitized user>"})

<sanitized user> is Kafka's Sanitizer: the UTF-8 name URL-encoded as java.net.URLEncoder does
(letters, digits and ``.-_*`` kept, everything else ``%XX``), then ``*`` -> ``%2A`` and the
encoder's ``+`` (a space) -> ``%20``.  ``/config/users/<default>`` holds default quotas, never
credentials: a user really named ``<default>`` is ``%3Cdefault%3E``.  A user znode can hold
other configs (quotas) and children (``clients/<id>``, per-client quotas): a change of
credentials rewrites only the SCRAM keys, and a user without credentials keeps its znode
(``{"version":1,"config":{}}`` at worst), as Kafka's AdminZkClient.changeConfigs does.

Writes (AlterUserScramCredentials on any broker): per user, read the znode, check a deletion
names an existing credential, then one ZooKeeper transaction that sets the znode conditional
on the version read (or creates it) and creates the change notification, so no broker sees
the one without the other.  A lost race (the znode changed meanwhile) reads again.  Only once
ZooKeeper accepted is the user's result a success; ZooKeeper unreachable (or no answer
within zookeeper.session.timeout.ms) answers REQUEST_TIMED_OUT for that user and every user
after it in the request, whose writes are not tried.  Kafka's users are independent here
too: one user's failure does not undo another's success.

Reads: at start, before the broker serves, every user is loaded (the watch on
/config/changes set first, so a change made meanwhile is seen).  Each new notification
naming ``users/<user>`` makes the broker read that user again and replace its credentials
in the store the SASL servers read (a missing znode: no credentials).  After a ZooKeeper
session loss, or a failed read, everything is read again.  Notifications older than
15 minutes are deleted (Kafka's changeExpirationMs), by whichever broker sees them first.

Every read and update of the store happens on the Trio thread under one lock, so a broker's
own write and the notification it causes cannot be applied out of order.  DescribeUser-
ScramCredentials answers from the store (Kafka's ZooKeeper-mode broker reads ZooKeeper).
"""
from __future__ import annotations

import json
import logging
import os
import time
import urllib.parse
from typing import Callable, Mapping

import trio
from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kwire.admin import zk_layout as layout
from kwire.admin.zk_layout import ZnodeFormatError
from kwire.codecs.errors import ErrorCode

from kwire.runtime import blocking
from kwire.security.scram import ScramCredentialStore, format_kafka_credential, kafka_config_credentials
from kwire.security.scram_store import (DELETE_MISSING, FILE_NAME, MECHANISM_TYPES, UNACCEPTABLE_CREDENTIAL, AlterResult,
                            ScramDeletion, ScramService, ScramUpsertion, check_name_and_mechanism)
from kwire.cluster.zk import ZooKeeperUnavailable, post_to_trio

__all__ = ["CONFIG_USERS", "DEFAULT_ENTITY", "sanitize", "desanitize", "user_path", "updated_config",
           "changed_user", "UserConfigZnodes", "ZkScramService"]

logger = logging.getLogger("kwire.security.scram")

CONFIG_USERS = "/config/users"
DEFAULT_ENTITY = "<default>"                 # Kafka's ConfigEntityName.Default
CHANGE_NAME_PREFIX = layout.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]     # "config_change_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000        # Kafka's ZkNodeChangeNotificationListener default
MAX_WRITE_ATTEMPTS = 20
# a user znode is a config entity znode: the same JSON as /config/topics/<t>
encode_entity_config = layout.encode_topic_config
decode_entity_config = layout.decode_topic_config


# -- formats (pure) ------------------------------------------------------------------------
def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: a user name as a ZooKeeper node name."""
    # quote keeps "~" (RFC 3986), URLEncoder does not; it writes a space as "%20" where
    # URLEncoder writes "+" (which Kafka then turns into "%20"); "*" is encoded by both paths
    return urllib.parse.quote(name, safe="", encoding="utf-8").replace("~", "%7E")


def desanitize(node: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (URLDecoder: ``+`` is a space)."""
    return urllib.parse.unquote_plus(node, encoding="utf-8", errors="replace")


def user_path(user: str) -> str:
    """``/config/users/<sanitized user>``."""
    return f"{CONFIG_USERS}/{sanitize(user)}"


def updated_config(current: Mapping[str, str], delete: set[str] | frozenset[str],
                   upsert: Mapping[str, str]) -> dict[str, str]:
    """A user znode's config map with the SCRAM keys in ``delete`` removed and those in
    ``upsert`` ({mechanism: Kafka credential string}) set; every other key kept."""
    config = {k: v for k, v in current.items() if k not in delete}
    config.update(upsert)
    return config


def changed_user(data: bytes) -> str | None:
    """The (desanitized) user a change notification names, or None when it names something
    else: a topic, a client, ``<default>``, a user's per-client quotas
    (``users/<u>/clients/<c>``), or bytes that are not a notification."""
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("version") == 2 and isinstance(obj.get("entity_path"), str):
        entity_type, _, name = obj["entity_path"].partition("/")
    elif obj.get("version") == 1 and isinstance(obj.get("entity_name"), str):
        entity_type, name = obj.get("entity_type"), obj["entity_name"]
    else:
        return None
    if entity_type != "users" or not name or "/" in name or name == DEFAULT_ENTITY:
        return None
    return desanitize(name)


def _sequence(child: str) -> int:
    """The sequence number of ``config_change_0000000012``; -1 for another name."""
    digits = child[len(CHANGE_NAME_PREFIX):]
    return int(digits) if child.startswith(CHANGE_NAME_PREFIX) and digits.isdigit() else -1


class CredentialNotFound(Exception):
    """A deletion names a credential the user's znode does not hold."""


# -- ZooKeeper (blocking; called in worker threads) -----------------------------------------------
class UserConfigZnodes:
    """The kazoo calls behind ``ZkScramService``.  Every method blocks (run it with
    ``kwire.runtime.blocking.run_detached``), waits at most ``timeout_s`` for each answer and raises
    ZooKeeperUnavailable when ZooKeeper does not answer, or the session is gone."""

    def __init__(self, client, timeout_s: float):
        self.client = client            # a started kazoo KazooClient (kwire.cluster.zk.ZooKeeperClient's)
        self.timeout_s = timeout_s

    def _require_connection(self, what: str) -> None:
        """Fail at once, nothing sent, while there is no connection: kazoo would queue the
        request and send it on reconnection, long after its caller gave up."""
        if not self.client.connected:
            raise ZooKeeperUnavailable(f"{what}: not connected to ZooKeeper; nothing written")

    def _wait(self, async_result, what: str):
        try:
            return async_result.get(timeout=self.timeout_s)
        except (KazooTimeoutError, KazooException) as exc:
            if isinstance(exc, (NoNodeError, NodeExistsError, BadVersionError)):
                raise
            raise ZooKeeperUnavailable(f"{what}: {type(exc).__name__} {exc}".rstrip()) from None

    def _config(self, path: str) -> tuple[dict[str, str] | None, object]:
        """(config, stat) of a user znode; (None, None) when there is none.  A znode that is
        not Kafka's JSON raises ZnodeFormatError."""
        try:
            data, stat = self._wait(self.client.get_async(path), f"reading {path}")
        except NoNodeError:
            return None, None
        return decode_entity_config(data), stat

    def read_all(self, watch: Callable) -> tuple[int, dict[str, dict[str, str]]]:
        """(the newest change notification's sequence, {user: config}) with a watch on
        /config/changes set first.  A user znode that is not JSON is logged and read as empty."""
        self._require_connection("reading users")
        changes = self._wait(self.client.get_children_async(layout.CONFIG_CHANGES, watch=watch),
                             "listing config changes")
        last = max((_sequence(c) for c in changes), default=-1)
        nodes = self._wait(self.client.get_children_async(CONFIG_USERS), "listing users")
        pending = [(n, self.client.get_async(f"{CONFIG_USERS}/{n}")) for n in nodes if n != DEFAULT_ENTITY]
        users = {}
        for node, result in pending:
            try:
                data, _ = self._wait(result, f"reading user {node}")
            except NoNodeError:
                continue
            users[desanitize(node)] = _decode_or_empty(node, data)
        return last, users

    def read_changes(self, after: int, watch: Callable, now_ms: int) -> tuple[int, dict[str, dict | None]]:
        """Follow the notifications newer than sequence ``after`` (watch set again): (the
        newest sequence, {user named: its config now, None when its znode is gone}).  Deletes
        notifications older than CHANGE_EXPIRATION_MS."""
        self._require_connection("reading config changes")
        children = self._wait(self.client.get_children_async(layout.CONFIG_CHANGES, watch=watch),
                              "listing config changes")
        numbered = sorted((_sequence(c), c) for c in children if _sequence(c) >= 0)
        reads = [(seq, c, self.client.get_async(f"{layout.CONFIG_CHANGES}/{c}")) for seq, c in numbered]
        last, named, expired = after, [], []
        for seq, child, result in reads:
            try:
                data, stat = self._wait(result, f"reading {child}")
            except NoNodeError:         # purged meanwhile
                continue
            if seq > after:
                last = seq
                user = changed_user(data)
                if user is not None and user not in named:
                    named.append(user)
            if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                expired.append(child)
        for child in expired:
            try:
                self._wait(self.client.delete_async(f"{layout.CONFIG_CHANGES}/{child}"), f"purging {child}")
            except NoNodeError:         # another broker purged it first
                pass
        users = {}
        for user in named:
            try:
                config, _ = self._config(user_path(user))
            except ZnodeFormatError as exc:
                logger.warning("SCRAM: %s is not a config znode (%s): its user has no credentials",
                               user_path(user), exc)
                config = {}
            users[user] = config
        return last, users

    def alter_user(self, user: str, delete: frozenset[str], upsert: Mapping[str, str]) -> dict[str, str]:
        """Remove the SCRAM keys ``delete`` and set ``upsert`` in ``user``'s znode, together
        with a change notification, conditional on the znode's version; returns the config
        written.  Raises CredentialNotFound (nothing written), ZnodeFormatError (the znode is
        not Kafka's JSON), ZooKeeperUnavailable (written or not: unknown)."""
        path = user_path(user)
        notification = layout.encode_config_change(f"users/{sanitize(user)}")
        for _ in range(MAX_WRITE_ATTEMPTS):
            self._require_connection(f"writing {path}")
            current, stat = self._config(path)
            missing = sorted(m for m in delete if m not in (current or {}))
            if missing:
                raise CredentialNotFound(", ".join(missing))
            config = updated_config(current or {}, delete, upsert)
            tx = self.client.transaction()
            if stat is None:
                tx.create(path, encode_entity_config(config))
            else:
                tx.set_data(path, encode_entity_config(config), version=stat.version)
            tx.create(layout.CONFIG_CHANGE_PREFIX, notification, sequence=True)
            results = self._wait(tx.commit_async(), f"writing {path} (written or not: unknown)")
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return config
            if any(isinstance(r, NoNodeError) for r in failures):      # /config/users or /config/changes gone
                for parent in (CONFIG_USERS, layout.CONFIG_CHANGES):
                    self._wait(self.client.ensure_path_async(parent), f"creating {parent}")
            elif not any(isinstance(r, (BadVersionError, NodeExistsError)) for r in failures):
                raise ZooKeeperUnavailable(f"writing {path}: {failures}")
            logger.debug("SCRAM: %s changed while being written; reading it again", path)
        raise ZooKeeperUnavailable(f"{path} kept changing: {MAX_WRITE_ATTEMPTS} writes lost the race")


def _decode_or_empty(node: str, data: bytes) -> dict[str, str]:
    try:
        return decode_entity_config(data)
    except ZnodeFormatError as exc:
        logger.warning("SCRAM: %s/%s is not a config znode (%s): its user has no credentials",
                       CONFIG_USERS, node, exc)
        return {}


# -- the broker's service (Trio) ----------------------------------------------------------
class ZkScramService(ScramService):
    """ScramService for a cluster broker: the same ``store`` object for the broker's life
    (SASL servers hold it), filled from and written to ZooKeeper instead of a file.

    ``zk`` is the broker's kwire.cluster.zk.ZooKeeperClient (its session is shared); ``run`` must be
    started (``nursery.start``) once the session is up and before the listeners serve.
    """

    def __init__(self, zk, timeout_s: float, *, log_dir: str | os.PathLike | None = None,
                 **store_kwargs):    # no super().__init__: no file
        self.path = None
        self._single_node_file = os.path.join(os.fspath(log_dir), FILE_NAME) if log_dir else None
        self.store = ScramCredentialStore(**store_kwargs)
        self._lock = trio.Lock()
        self.znodes = UserConfigZnodes(zk.client, timeout_s)
        self._token = None
        self._dirty = trio.Event()
        self._reload = True
        self._last_change = -1
        self.changed = trio.Event()         # set after each read of ZooKeeper applied

    def load(self) -> None:
        """Nothing to read at open (``run`` loads the users from ZooKeeper), but a credential
        file left by this broker's single-node past is named in a warning: it is not read."""
        if self._single_node_file and os.path.exists(self._single_node_file):
            logger.warning("SCRAM: %s is ignored in cluster mode, where users are kept in ZooKeeper "
                           "(/config/users); set them again with kwire scram", self._single_node_file)

    # -- from kazoo's thread ---------------------------------------------------------------
    def _post(self, fn) -> None:
        post_to_trio(self._token, fn)

    def _watch_threadsafe(self, _event=None) -> None:
        self._post(self._wake)

    def _session_threadsafe(self, state) -> None:
        if state == KazooState.LOST:            # a new session has none of our watches
            self._post(self._session_lost)
        elif state == KazooState.CONNECTED:
            self._post(self._wake)

    def _wake(self) -> None:        # the event current when this runs, not when it was posted
        self._dirty.set()

    def _session_lost(self) -> None:
        self._reload = True

    # -- following ZooKeeper -----------------------------------------------------------------
    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load every user (retrying while ZooKeeper does not answer), report started, then
        follow the change notifications until cancelled.  Never raises for ZooKeeper trouble."""
        self._token = trio.lowlevel.current_trio_token()
        self.znodes.client.add_listener(self._session_threadsafe)
        try:
            self._dirty.set()
            await self._refresh()
            task_status.started()
            while True:
                await self._refresh()
        finally:
            self.znodes.client.remove_listener(self._session_threadsafe)

    async def _refresh(self) -> None:
        """Wait for a change and apply it; after a failure, read everything again until that
        succeeds: at once when the connection comes back, else after a growing pause."""
        pause = 0.5
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            try:
                async with self._lock:
                    if self._reload:
                        await self._read_all()
                    else:
                        await self._follow_changes()
                break
            except (ZooKeeperUnavailable, KazooException, KazooTimeoutError) as exc:
                self._reload = True
                if not self.znodes.client.connected:     # the session listener wakes us
                    logger.warning("SCRAM credentials not refreshed: %s; reading them again once "
                                   "ZooKeeper is back", exc)
                    continue
                logger.warning("SCRAM credentials not refreshed from ZooKeeper: %s; retrying in %.1f s",
                               exc, pause)
                await trio.sleep(pause)
                pause = min(pause * 2, 5.0)
                self._dirty.set()
        event, self.changed = self.changed, trio.Event()
        event.set()

    async def _read_all(self) -> None:
        self._reload = False        # a loss during the read sets it again
        last, users = await blocking.run_detached(self.znodes.read_all, self._watch_threadsafe)
        for user in self.store.users():
            if user not in users:
                self.store.replace(user, {})
        for user, config in users.items():
            self._apply(user, config)
        self._last_change = last
        logger.info("SCRAM: %d users with credentials loaded from ZooKeeper", len(self.store.users()))

    async def _follow_changes(self) -> None:
        last, users = await blocking.run_detached(self.znodes.read_changes, self._last_change,
                                                  self._watch_threadsafe, _now_ms())
        for user, config in users.items():
            self._apply(user, config or {})
            logger.info("SCRAM: credentials of user %r changed in ZooKeeper", user)
        self._last_change = last

    def _apply(self, user: str, config: Mapping[str, str]) -> None:
        credentials, problems = kafka_config_credentials(config)
        for problem in problems:
            logger.warning("SCRAM: %s of user %r in ZooKeeper ignored: %s", user_path(user), user, problem)
        self.store.replace(user, credentials)

    # -- AlterUserScramCredentials ---------------------------------------------------------
    def _check_deletion(self, d: ScramDeletion) -> tuple[int, str] | None:
        return check_name_and_mechanism(d.user, d.mechanism)     # existence: checked in ZooKeeper

    async def alter(self, upsertions: list[ScramUpsertion] | tuple,
                    deletions: list[ScramDeletion] | tuple) -> list[AlterResult]:
        """Apply a request's alterations user by user in ZooKeeper; one result per user named.
        Never raises: a user whose write ZooKeeper did not accept answers REQUEST_TIMED_OUT
        (or RESOURCE_NOT_FOUND for a deletion of a missing credential).  Not cancel-safe for
        the answer: a cancelled write may still land, and then reaches the store through its
        notification."""
        async with self._lock:
            plan = self._plan(list(upsertions), list(deletions))
            for user in [u for u in [*plan.deletions, *plan.upsertions] if sanitize(u) in (".", "..")]:
                plan.deletions.pop(user, None)
                plan.upsertions.pop(user, None)
                plan.errors[user] = (UNACCEPTABLE_CREDENTIAL, f"{user!r} cannot be a ZooKeeper node name")
            changes = [(u, frozenset({MECHANISM_TYPES[d.mechanism]}), {}) for u, d in plan.deletions.items()]
            changes += [(u, frozenset(), {m: format_kafka_credential(c)})
                        for u, (m, c) in plan.upsertions.items()]
            done, errors, unavailable = [], {}, None
            for user, delete, upsert in changes:
                if unavailable is not None:
                    errors[user] = (int(ErrorCode.REQUEST_TIMED_OUT), unavailable)
                    continue
                try:
                    config = await blocking.run_detached(self.znodes.alter_user, user, delete, upsert)
                except CredentialNotFound:
                    errors[user] = (int(ErrorCode.RESOURCE_NOT_FOUND), DELETE_MISSING)
                    continue
                except ZnodeFormatError as exc:
                    errors[user] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{user_path(user)}: {exc}")
                    continue
                except ZooKeeperUnavailable as exc:
                    logger.error("SCRAM: credentials of %r not written to ZooKeeper: %s", user, exc)
                    unavailable = f"ZooKeeper did not accept the change: {exc}"
                    errors[user] = (int(ErrorCode.REQUEST_TIMED_OUT), unavailable)
                    self._reload = True      # the write may have landed: read everything again
                    self._dirty.set()
                    continue
                self._apply(user, config)
                done.append(user)
            errors.update(plan.errors)
            return [AlterResult(u) for u in done] + [AlterResult(u, c, m) for u, (c, m) in errors.items()]


def _now_ms() -> int:
    return int(time.time() * 1000)       # compared with ZooKeeper's ctime, a wall-clock time
