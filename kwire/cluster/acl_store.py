"""ACLs in ZooKeeper (cluster mode), as Kafka's ZooKeeper-era ``AclAuthorizer`` keeps them.

Layout (``kwire.admin.acl_formats``, Kafka's ``kafka.zk.ZkData``): one znode per resource
pattern, ``/kafka-acl/<ResourceType>/<name>`` (LITERAL) or
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` (PREFIXED), holding
``{"version":1,"acls":[{"principal","permissionType","operation","host"}]}``; after each
change a persistent sequential notice ``/kafka-acl-changes/acl_changes_<seq>`` (``TOPIC:name``)
or ``/kafka-acl-extended-changes/acl_changes_<seq>`` (JSON) naming the pattern.  No file.

Writes (CreateAcls, DeleteAcls on any broker): per pattern, read the znode and its version,
compute the new ACL set, then write the znode conditionally on that version *and* create the
notice in one ZooKeeper transaction (``multi``), so no broker ever sees a changed znode
without its notice or the reverse.  A version conflict (another broker wrote meanwhile)
re-reads and retries, at most ``MAX_UPDATE_RETRIES`` times, as ``updateResourceAcls`` does.
A pattern's ACLs leave the local cache only once ZooKeeper accepted them; a write is not even
started while the session is disconnected, and the whole request gives up after
``zookeeper.connection.timeout.ms`` (at most ``MAX_WRITE_WAIT_S``): that pattern's bindings
then answer UNKNOWN_SERVER_ERROR (Kafka wraps ZooKeeper failures the same way) and the
others keep their own result.  A write cut off mid-flight has an unknown outcome; it is
answered as an error, and its notice (if it landed) tells every broker, this one included.

Reads: ``run`` lists both notice paths (setting child watches), then reads every resource
znode, before ``started``: the broker serves nothing before its ACLs are loaded.  Each watch
or reconnection re-lists the notices and re-reads the pattern of every notice newer than the
last one processed, in sequence order (``ZkNodeChangeNotificationListener``).  kazoo drops
its watches when the connection drops, so every reconnection re-lists; after the session
was lost everything is read again.  Notices older than ``CHANGE_EXPIRATION_MS`` (Kafka's 15
minutes, by the znode's ctime) are deleted by whichever broker processes changes first.

Decisions are made from the local cache (``kwire.admin.acls.AclStore``), as in Kafka;
DescribeAcls answers from it too.  One Trio lock orders writes and notice processing.
"""
from __future__ import annotations

import logging
import random
import time
from typing import Callable, Iterable

import trio
from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError

from kwire.admin import acl_formats as fmt
from kwire.admin.acls import (
    OK, AccessControlEntry, AclBinding, AclBindingFilter, AclChange, AclError, AclStore, Authorizer,
    AuthorizerConfig, DeleteResult, PatternType, ResourcePattern, check_filter,
)
from kwire.codecs.errors import ErrorCode

from kwire.runtime.blocking import run_detached
from kwire.runtime.clock import now_ms
from kwire.cluster.zk import ZooKeeperClient, post_to_trio

logger = logging.getLogger("kwire.acls")

MAX_UPDATE_RETRIES = 10                 # AclAuthorizer's maxUpdateRetries
RETRY_BACKOFF_S = (0.1, 0.15)          # retryBackoffMs 100 + up to 50 ms of jitter
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs
MAX_WRITE_WAIT_S = 25.0                # under the Java client's default request.timeout.ms (30 s)
CHANGE_ROOTS = (fmt.LITERAL_CHANGES, fmt.EXTENDED_CHANGES)
_ZK_ERRORS = (KazooException, KazooTimeoutError)


class VersionConflict(Exception):
    """The znode changed (or appeared, or went) since it was read."""


class AclWriteFailed(Exception):
    """ZooKeeper did not accept a pattern's new ACLs; the message says why."""


# -- the blocking calls (worker threads) -------------------------------------------------------
class AclZnodes:
    """The ACL store's ZooKeeper calls over the cluster's kazoo client.  Every method blocks;
    none touches broker state.  ZooKeeper failures raise kazoo's exceptions."""

    def __init__(self, client):
        self.client = client

    def ensure_paths(self) -> None:
        for path in fmt.ACL_ZK_PATHS:
            self.client.ensure_path(path)

    def read(self, path: str, timeout: float) -> tuple[bytes | None, int]:
        """A znode's data and version; (None, -1) when it does not exist."""
        try:
            data, stat = self.client.get_async(path).get(timeout=timeout)
        except NoNodeError:
            return None, -1
        return data, stat.version

    def read_all(self) -> dict[str, bytes]:
        """Every resource znode of the resource types kwire knows (others are ignored, as
        Kafka's loadCache ignores them): path -> data."""
        c, pending = self.client, []
        for root in (fmt.LITERAL_ROOT, fmt.PREFIXED_ROOT):
            for rtype in fmt.CONCRETE_RESOURCE_TYPES:
                parent = f"{root}/{rtype.pascal_name}"
                try:
                    names = c.get_children(parent)
                except NoNodeError:
                    continue
                pending += [(f"{parent}/{n}", c.get_async(f"{parent}/{n}")) for n in names]
        found = {}
        for path, result in pending:
            try:
                found[path] = result.get()[0]
            except NoNodeError:     # deleted since listed: no ACLs
                continue
        return found

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        """Several znodes' data, pipelined; None for a missing one."""
        pending = [(p, self.client.get_async(p)) for p in paths]
        found = {}
        for path, result in pending:
            try:
                found[path] = result.get()[0]
            except NoNodeError:
                found[path] = None
        return found

    def notices(self, root: str, watch: Callable) -> list[tuple[int, str]]:
        """The change notices under ``root`` as (sequence number, name), oldest first, with a
        child watch set.  Names without the ``acl_changes_`` prefix are skipped."""
        found = []
        for name in self.client.get_children(root, watch=watch):
            if name.startswith(fmt.CHANGE_PREFIX) and name[len(fmt.CHANGE_PREFIX):].isdigit():
                found.append((int(name[len(fmt.CHANGE_PREFIX):]), name))
        return sorted(found)

    def purge(self, root: str, names: list[str], now: int, max_age_ms: int) -> int:
        """Delete the notices (oldest first) created more than ``max_age_ms`` before ``now``
        (epoch ms, ZooKeeper's ctime clock); stops at the first younger one.  Returns how many."""
        deleted = 0
        for name in names:
            path = f"{root}/{name}"
            stat = self.client.exists(path)
            if stat is None:
                continue
            if now - stat.ctime <= max_age_ms:
                break
            try:
                self.client.delete(path)
                deleted += 1
            except NoNodeError:     # another broker purged it first
                pass
        return deleted

    def write(self, path: str, data: bytes | None, version: int, notice: tuple[str, bytes],
              timeout: float) -> None:
        """Create (``version`` -1), replace (conditional on ``version``) or delete (``data``
        None, conditional) a resource znode and create its sequential change notice, in one
        transaction.  Raises VersionConflict, or kazoo's exception (nothing was written, or,
        for a connection loss, the outcome is unknown)."""
        tx = self.client.transaction()
        if data is None:
            tx.delete(path, version)
        elif version < 0:
            tx.create(path, data)
        else:
            tx.set_data(path, data, version)
        tx.create(notice[0], notice[1], sequence=True)
        results = tx.commit_async().get(timeout=timeout)
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if failed:
            if isinstance(failed[0], (BadVersionError, NodeExistsError, NoNodeError)):
                raise VersionConflict(f"{path}: {type(failed[0]).__name__}")
            raise failed[0]

    def update(self, pattern: ResourcePattern, change: Callable[[AclStore], AclChange], timeout: float):
        """Kafka's ``updateResourceAcls``: read the pattern's ACLs, write them back changed,
        conditionally (with the notice), retrying on a version conflict.  ``change(store)``
        gets a store of the pattern's ACLs as ZooKeeper holds them and returns the prepared
        change of that pattern (``AclStore.prepare_create``/``prepare_delete``); the bytes are
        ``kwire.admin.acl_formats.zk_writes``'.  Returns (ACLs before, ACLs after); nothing
        is written when the change is empty.

        Raises AclWriteFailed (conflicts kept coming, out of time, a damaged znode) or kazoo's
        exception."""
        deadline = time.monotonic() + timeout
        path, notice = fmt.znode_path(pattern), fmt.change_notification(pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            data, version = self.read(path, _left(deadline))
            try:
                before = fmt.decode_znode(data)
            except fmt.AclFormatError as exc:
                raise AclWriteFailed(f"{path} cannot be read: {exc}") from None
            store = AclStore(AclBinding.of(pattern, entry) for entry in before)
            prepared = change(store)
            if prepared.is_empty:
                return before, before
            try:
                self.write(path, fmt.zk_writes(store, prepared)[path], version, notice, _left(deadline))
                store.apply(prepared)
                return before, list(store.entries(pattern))
            except VersionConflict:
                logger.debug("%s changed meanwhile (attempt %d); reading it again", path, attempt + 1)
                time.sleep(min(random.uniform(*RETRY_BACKOFF_S), _left(deadline)))
        raise AclWriteFailed(f"{path} kept changing: gave up after {MAX_UPDATE_RETRIES} retries")


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise AclWriteFailed("ZooKeeper did not answer in time")
    return left


# -- the Trio side --------------------------------------------------------------------------------
class ZkAclService:
    """``kwire.security.acl_store.AclService``'s interface (enabled, authorizer, create, delete,
    describe) over ZooKeeper; ``run`` loads the ACLs and follows changes."""

    def __init__(self, config, zk: ZooKeeperClient):
        self.store = AclStore()
        self.authorizer = Authorizer(AuthorizerConfig.from_values(config.values), self.store)
        self.zk = zk
        self.znodes = AclZnodes(zk.client)
        wait_ms = config.value_of("zookeeper.connection.timeout.ms") or config.value_of("zookeeper.session.timeout.ms")
        self.write_wait_s = min(wait_ms / 1000, MAX_WRITE_WAIT_S)
        self._lock = trio.Lock()
        self._wake = trio.Event()
        self._reload = True                  # read everything at the next wake-up (start, session lost)
        self._last_seq = {root: -1 for root in CHANGE_ROOTS}
        self._token = None

    @property
    def enabled(self) -> bool:
        return self.authorizer.enabled

    def load(self) -> None:
        """Nothing: the ACLs are read from ZooKeeper by ``run`` (the broker's ``open`` calls this
        for the single-node file)."""

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.store.describe(acl_filter)

    # - following ZooKeeper -
    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load every ACL, then ``started``, then follow the change notices until cancelled.
        Without an authorizer it only reports ``started``.  Raises ValueError when a resource
        znode cannot be read at start (a broker must not serve with ACLs silently missing)."""
        if not self.enabled:
            task_status.started()
            return
        self._token = trio.lowlevel.current_trio_token()
        self.zk.client.add_listener(self._session_threadsafe)
        try:
            await run_detached(self.znodes.ensure_paths)
            while self._reload:
                try:
                    await self._refresh(strict=True)
                except _ZK_ERRORS as exc:
                    logger.warning("ACLs not loaded from ZooKeeper yet: %r; retrying", exc)
                    await trio.sleep(0.5)
            task_status.started()
            await self._follow()
        finally:
            self.zk.client.remove_listener(self._session_threadsafe)

    async def _follow(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if not self.zk.client.connected:
                continue                      # the reconnection wakes us again
            try:
                await self._refresh(strict=False)
            except _ZK_ERRORS as exc:
                logger.warning("ACL changes not read from ZooKeeper: %r; retrying", exc)
                await trio.sleep(0.5)
                self._wake.set()

    async def _refresh(self, *, strict: bool) -> None:
        async with self._lock:
            if self._reload:
                await self._load_all(strict)
                self._reload = False
            else:
                await self._process_notices()

    async def _load_all(self, strict: bool) -> None:
        """Notices first (their watch set), then every znode: a change made after the listing
        has a newer notice, one made before it is in what is read."""
        last = {}
        for root in CHANGE_ROOTS:
            seen = await run_detached(self.znodes.notices, root, self._changed_threadsafe)
            last[root] = seen[-1][0] if seen else -1
        found = await run_detached(self.znodes.read_all)     # known resource types only

        def unreadable(path: str, pattern: ResourcePattern, exc: fmt.AclFormatError):
            if strict:
                raise ValueError(f"the ACLs in ZooKeeper cannot be read: {exc}; repair or remove "
                                 f"{path}") from None
            logger.error("ACL znode %s cannot be read (%s); keeping its previous ACLs", path, exc)
            return self.store.entries(pattern)
        store = fmt.from_znodes(found, on_error=unreadable)
        self.store = self.authorizer.store = store
        self._last_seq = last
        logger.info("loaded %d ACL(s) from ZooKeeper", len(store))

    async def _process_notices(self) -> None:
        for root in CHANGE_ROOTS:
            seen = await run_detached(self.znodes.notices, root, self._changed_threadsafe)
            fresh = [name for seq, name in seen if seq > self._last_seq[root]]
            if fresh:
                data = await run_detached(self.znodes.read_many, [f"{root}/{n}" for n in fresh])
                patterns = {}
                for path, notice in data.items():
                    if notice is None:      # purged meanwhile: its pattern was read by then
                        continue
                    try:
                        patterns.setdefault(fmt.decode_change_notification(path, notice), None)
                    except fmt.AclFormatError as exc:
                        logger.error("ACL change notice %s ignored: %s", path, exc)
                await self._reread(list(patterns))
                self._last_seq[root] = seen[-1][0]
            if seen:
                purged = await run_detached(self.znodes.purge, root, [n for _, n in seen], now_ms(),
                                            CHANGE_EXPIRATION_MS)
                if purged:
                    logger.info("purged %d ACL change notice(s) older than %d min under %s", purged,
                                CHANGE_EXPIRATION_MS // 60000, root)

    async def _reread(self, patterns: list[ResourcePattern]) -> None:
        paths = {fmt.znode_path(p): p for p in patterns
                 if p.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)}
        data = await run_detached(self.znodes.read_many, list(paths))
        for path, pattern in paths.items():
            try:
                entries = fmt.decode_znode(data[path])
            except fmt.AclFormatError as exc:
                logger.error("ACL znode %s cannot be read (%s); keeping its previous ACLs", path, exc)
                continue
            self.store.set_entries(pattern, entries)
            logger.info("ACLs of %s %s (%s) reloaded: %d", pattern.resource_type.name, pattern.name,
                        pattern.pattern_type.name, len(entries))

    # callbacks from kazoo's threads: into Trio through the token, nothing else
    def _changed_threadsafe(self, _event=None) -> None:
        self._post(lambda: self._wake.set())

    def _session_threadsafe(self, state) -> None:
        if state == KazooState.LOST:
            self._post(self._session_lost)
        elif state == KazooState.CONNECTED:
            self._post(lambda: self._wake.set())

    def _session_lost(self) -> None:
        self._reload = True

    def _post(self, fn) -> None:
        post_to_trio(self._token, fn)

    # - writes -
    async def create(self, bindings: list[AclBinding]) -> list[AclError]:
        """CreateAcls: one AclError per binding, in order.  A valid binding answers OK once
        ZooKeeper holds it, UNKNOWN_SERVER_ERROR when its pattern could not be written (see
        the module docstring); never raises for ZooKeeper trouble."""
        errors = self.store.prepare_create(bindings, zookeeper=True)[0]
        wanted: dict[ResourcePattern, dict[AccessControlEntry, None]] = {}
        for binding, error in zip(bindings, errors):
            if error is OK:
                wanted.setdefault(binding.pattern, {})[binding.entry] = None
        failures = await self._update_all({
            pattern: (lambda store, new=tuple(AclBinding.of(pattern, e) for e in entries):
                      store.prepare_create(new, zookeeper=True)[1])
            for pattern, entries in wanted.items()})
        return [AclError(ErrorCode.UNKNOWN_SERVER_ERROR, failures[b.pattern])
                if error is OK and b.pattern in failures else error for b, error in zip(bindings, errors)]

    async def delete(self, filters: list[AclBindingFilter]) -> list[DeleteResult]:
        """DeleteAcls: per filter its error and the bindings it deleted.  The filters are applied
        to what ZooKeeper holds (re-read), on every pattern in the cache they match and the one
        an exact filter names.  A filter matching a pattern that could not be written answers
        UNKNOWN_SERVER_ERROR (the message says how many of its ACLs were deleted elsewhere)."""
        checks = [check_filter(f) for f in filters]
        valid = [f for f, check in zip(filters, checks) if check is OK]
        candidates = dict.fromkeys(p for p in self.store.patterns() if any(f.matches_pattern(p) for f in valid))
        candidates.update(dict.fromkeys(p for p in map(_exact_pattern, valid) if p is not None))
        updates = {}
        for pattern in candidates:
            matching = [f for f in valid if f.matches_pattern(pattern)]
            updates[pattern] = lambda store, fs=matching: store.prepare_delete(fs)[1]
        removed: dict[ResourcePattern, list[AccessControlEntry]] = {}
        failures = await self._update_all(updates, removed)
        results = []
        for acl_filter, check in zip(filters, checks):
            if check is not OK:
                results.append(DeleteResult(check, ()))
                continue
            deleted = tuple(sorted(AclBinding.of(p, e) for p, entries in removed.items() for e in entries
                                   if acl_filter.matches(AclBinding.of(p, e))))
            failed = [failures[p] for p in failures if acl_filter.matches_pattern(p)]
            if failed:
                results.append(DeleteResult(AclError(ErrorCode.UNKNOWN_SERVER_ERROR, (
                    f"{failed[0]} ({len(deleted)} other matching ACL(s) were deleted)")), ()))
            else:
                results.append(DeleteResult(OK, deleted))
        return results

    async def _update_all(self, updates: dict, removed: dict | None = None) -> dict[ResourcePattern, str]:
        """Apply each pattern's change in ZooKeeper, then to the cache; {pattern: why} for the
        patterns not written.  ``removed`` collects each pattern's deleted entries."""
        failures = {}
        deadline = trio.current_time() + self.write_wait_s
        async with self._lock:
            for pattern, change in updates.items():
                try:
                    before, after = await self._update(pattern, change, deadline)
                except (AclWriteFailed, *_ZK_ERRORS) as exc:
                    reason = str(exc) if isinstance(exc, AclWriteFailed) else f"{type(exc).__name__} {exc}".strip()
                    failures[pattern] = f"the ACLs of {pattern.resource_type.name} {pattern.name!r} could not " \
                                        f"be written to ZooKeeper: {reason}"
                    logger.error("%s", failures[pattern])
                    continue
                self.store.set_entries(pattern, after)
                if removed is not None:
                    removed[pattern] = [e for e in before if e not in set(after)]
        return failures

    async def _update(self, pattern: ResourcePattern, change, deadline: float):
        with trio.move_on_at(deadline):
            while not self.zk.client.connected:
                await trio.sleep(0.05)
            return await run_detached(self.znodes.update, pattern, change, deadline - trio.current_time())
        raise AclWriteFailed(f"ZooKeeper is not reachable (waited {self.write_wait_s:.0f} s)")


def _exact_pattern(acl_filter: AclBindingFilter) -> ResourcePattern | None:
    """The one pattern a filter can match, if it names one (Kafka's ``matchesAtMostOne``)."""
    rtype, name, ptype = acl_filter.resource_type, acl_filter.resource_name, acl_filter.pattern_type
    if name in (None, "", ".", "..") or "/" in name or rtype not in fmt.CONCRETE_RESOURCE_TYPES \
            or ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        return None     # no znode could hold it
    return ResourcePattern(rtype, name, ptype)
