"""Client quotas of a cluster broker, kept in ZooKeeper as ZooKeeper-era Kafka keeps them, so a
quota altered through any broker is enforced by every broker.

Layout (Kafka's ConfigEntityZNode; names sanitized as kwire.admin.quotas.sanitize, the default
entity ``<default>``)::

    /config/users/<user>                        {"version":1,"config":{"producer_byte_rate":"1024", ...}}
    /config/users/<user>/clients/<client-id>    (same format)
    /config/clients/<client-id>                 (same format)
    /config/changes/config_change_<seq>         {"version":2,"entity_path":"users/alice"}
                                                ("users/alice/clients/app", "clients/<default>", ...)

``/config/users/<user>`` also holds the user's SCRAM credentials (``SCRAM-SHA-256``/``-512``,
written by kwire.cluster.scram_store): a quota write changes only the quota keys of the znode it
read, and sets it conditionally on the version read (together with the change notification,
in one ZooKeeper transaction), so neither store ever clobbers the other's keys; a lost race
reads again.  A znode left without keys stays (``{"version":1,"config":{}}``), as Kafka's
AdminZkClient leaves it.

Reads: at start, before the broker serves, every quota entity is loaded (the watch on
/config/changes set first).  Each new notification naming a quota entity makes every broker
read that znode again; a ZooKeeper session loss or a failed read makes it read everything
again.  Notifications are purged by kwire.cluster.scram_store (the same 15-minute rule).
"""
from __future__ import annotations

import logging
from typing import Callable, Mapping

import trio
from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kwire.admin import zk_layout as layout
from kwire.admin.quotas import (QUOTA_KEYS, Entity, Op, apply_ops, describe_entity, entity_of_path, entity_path,
                                format_value, parse_values, validate_entity)
from kwire.admin.zk_layout import ZnodeFormatError
from kwire.codecs.errors import ErrorCode
from kwire.runtime import blocking
from kwire.cluster.scram_store import UserConfigZnodes, decode_entity_config, encode_entity_config
from kwire.cluster.zk import ZooKeeperUnavailable, post_to_trio
from kwire.services.quotas import QuotaService

logger = logging.getLogger("kwire.quotas")

CHANGE_NAME_PREFIX = layout.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]
MAX_WRITE_ATTEMPTS = 20


def _sequence(child: str) -> int:
    digits = child[len(CHANGE_NAME_PREFIX):]
    return int(digits) if child.startswith(CHANGE_NAME_PREFIX) and digits.isdigit() else -1


def changed_entity(data: bytes) -> Entity | None:
    """The quota entity a change notification names (None: something else)."""
    import json
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("version") == 2 and isinstance(obj.get("entity_path"), str):
        return entity_of_path(obj["entity_path"])
    if obj.get("version") == 1 and isinstance(obj.get("entity_name"), str) and \
            obj.get("entity_type") in ("users", "clients"):
        return entity_of_path(f"{obj['entity_type']}/{obj['entity_name']}")
    return None


def quota_config(current: Mapping[str, str], values: Mapping[str, float]) -> dict[str, str]:
    """A znode's config with its quota keys replaced by ``values``; every other key (SCRAM
    credentials) kept."""
    config = {k: v for k, v in current.items() if k not in QUOTA_KEYS}
    config.update({k: format_value(k, v) for k, v in values.items()})
    return config


class QuotaZnodes(UserConfigZnodes):
    """The kazoo calls behind ZkQuotaService (blocking; run with run_detached)."""

    def _values(self, path: str) -> dict[str, float]:
        try:
            config, _ = self._config(path)
        except ZnodeFormatError as exc:
            logger.warning("quotas: %s is not a config znode (%s): no quotas read from it", path, exc)
            return {}
        values, problems = parse_values(config or {})
        for problem in problems:
            logger.warning("quotas: %s: %s ignored", path, problem)
        return values

    def _children(self, path: str) -> list[str]:
        try:
            return self._wait(self.client.get_children_async(path), f"listing {path}")
        except NoNodeError:
            return []

    def read_all(self, watch: Callable) -> tuple[int, dict[Entity, dict[str, float]]]:
        self._require_connection("reading quotas")
        changes = self._wait(self.client.get_children_async(layout.CONFIG_CHANGES, watch=watch),
                             "listing config changes")
        last = max((_sequence(c) for c in changes), default=-1)
        paths = []
        for user in self._children("/config/users"):
            paths.append(f"users/{user}")
            paths += [f"users/{user}/clients/{c}" for c in self._children(f"/config/users/{user}/clients")]
        paths += [f"clients/{c}" for c in self._children("/config/clients")]
        out = {}
        for path in paths:
            e = entity_of_path(path)
            if e is None:
                continue
            values = self._values(f"{layout.CONFIG}/{path}")
            if values:
                out[e] = values
        return last, out

    def read_quota_changes(self, after: int, watch: Callable) -> tuple[int, dict[Entity, dict[str, float]]]:
        self._require_connection("reading config changes")
        children = self._wait(self.client.get_children_async(layout.CONFIG_CHANGES, watch=watch),
                              "listing config changes")
        numbered = sorted((_sequence(c), c) for c in children if _sequence(c) > after)
        last, named = after, []
        for seq, child in numbered:
            try:
                data, _ = self._wait(self.client.get_async(f"{layout.CONFIG_CHANGES}/{child}"), f"reading {child}")
            except NoNodeError:
                continue
            last = seq
            e = changed_entity(data)
            if e is not None and e not in named:
                named.append(e)
        return last, {e: self._values(f"{layout.CONFIG}/{entity_path(e)}") for e in named}

    def write_entity(self, e: Entity, ops: list[Op]) -> dict[str, float]:
        """Apply ``ops`` (validated) to the quotas ``e``'s znode holds now (other keys kept), with
        a change notification, conditional on the version read; the quotas written.  Raises
        ZooKeeperUnavailable (written or not: unknown)."""
        relative = entity_path(e)
        path = f"{layout.CONFIG}/{relative}"
        notification = layout.encode_config_change(relative)
        for _ in range(MAX_WRITE_ATTEMPTS):
            self._require_connection(f"writing {path}")
            try:
                data, stat = self._wait(self.client.get_async(path), f"reading {path}")
                current = decode_entity_config(data)
            except NoNodeError:
                current, stat = {}, None
            values = apply_ops(parse_values(current)[0], ops)
            config = quota_config(current, values)
            if config == current and (stat is not None or not values):
                return values
            tx = self.client.transaction()
            if stat is None:
                tx.create(path, encode_entity_config(config))
            else:
                tx.set_data(path, encode_entity_config(config), version=stat.version)
            tx.create(layout.CONFIG_CHANGE_PREFIX, notification, sequence=True)
            results = self._wait(tx.commit_async(), f"writing {path} (written or not: unknown)")
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return values
            if any(isinstance(r, NoNodeError) for r in failures):     # a parent is missing
                parent = path.rsplit("/", 1)[0]
                self._wait(self.client.ensure_path_async(parent), f"creating {parent}")
                self._wait(self.client.ensure_path_async(layout.CONFIG_CHANGES), "creating config changes")
            elif not any(isinstance(r, (BadVersionError, NodeExistsError)) for r in failures):
                raise ZooKeeperUnavailable(f"writing {path}: {failures}")
        raise ZooKeeperUnavailable(f"{path} kept changing: {MAX_WRITE_ATTEMPTS} writes lost the race")


class ZkQuotaService(QuotaService):
    """QuotaService for a cluster broker: filled from and written to ZooKeeper; ``run`` must be
    started (``nursery.start``) once the session is up, before the listeners serve."""

    def __init__(self, config, zk, timeout_s: float):
        super().__init__(config, None)
        self.znodes = QuotaZnodes(zk.client, timeout_s)
        self._token = None
        self._dirty = trio.Event()
        self._reload = True
        self._last_change = -1
        self.changed = trio.Event()         # set after each read of ZooKeeper applied

    def _post(self, fn) -> None:
        post_to_trio(self._token, fn)

    def _watch_threadsafe(self, _event=None) -> None:
        self._post(self._wake)

    def _session_threadsafe(self, state) -> None:
        if state == KazooState.LOST:
            self._post(self._session_lost)
        elif state == KazooState.CONNECTED:
            self._post(self._wake)

    def _wake(self) -> None:
        self._dirty.set()

    def _session_lost(self) -> None:
        self._reload = True

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
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
        pause = 0.5
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            try:
                async with self._lock:
                    if self._reload:
                        self._reload = False
                        last, entities = await blocking.run_detached(self.znodes.read_all, self._watch_threadsafe)
                        self.configs.replace_all(entities)
                        logger.info("quotas: %d quota entities loaded from ZooKeeper", len(entities))
                    else:
                        last, entities = await blocking.run_detached(
                            self.znodes.read_quota_changes, self._last_change, self._watch_threadsafe)
                        for e, values in entities.items():
                            if values != self.configs.get(e):
                                self.configs.set(e, values)
                                logger.info("quotas: %s now %s (from ZooKeeper)", describe_entity(e),
                                            values or "none")
                    self._last_change = last
                break
            except (ZooKeeperUnavailable, KazooException, KazooTimeoutError) as exc:
                self._reload = True
                if not self.znodes.client.connected:
                    logger.warning("quotas not refreshed: %s; reading them again once ZooKeeper is back", exc)
                    continue
                logger.warning("quotas not refreshed from ZooKeeper: %s; retrying in %.1f s", exc, pause)
                await trio.sleep(pause)
                pause = min(pause * 2, 5.0)
                self._dirty.set()
        event, self.changed = self.changed, trio.Event()
        event.set()

    async def alter(self, alterations, validate_only: bool) -> list:
        """Validate every entry, then (unless ``validate_only``) apply each entity's ops to what
        ZooKeeper holds for it now (not to this broker's view, which may lag another broker's
        write), entity by entity.  An entity ZooKeeper did not accept answers
        REQUEST_TIMED_OUT, and so does every entity after it (not tried)."""
        async with self._lock:
            results, _ = self.plan(alterations)
            if validate_only:
                return results
            ops: dict[Entity, list[Op]] = {}
            for alteration, (_, code, _) in zip(alterations, results):
                if code == 0:
                    ops.setdefault(validate_entity(alteration.components), []).extend(alteration.ops)
            failed: dict[Entity, tuple[int, str]] = {}
            unavailable = None
            for e, entity_ops in ops.items():
                if unavailable is not None:
                    failed[e] = unavailable
                    continue
                try:
                    values = await blocking.run_detached(self.znodes.write_entity, e, entity_ops)
                except ZnodeFormatError as exc:     # not Kafka's JSON: left as it is
                    failed[e] = int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{entity_path(e)}: {exc}"
                    continue
                except ZooKeeperUnavailable as exc:
                    logger.error("quotas of %s not written to ZooKeeper: %s", describe_entity(e), exc)
                    unavailable = failed[e] = (int(ErrorCode.REQUEST_TIMED_OUT),
                                               f"ZooKeeper did not accept the change: {exc}")
                    self._reload = True         # it may have landed: read everything again
                    self._dirty.set()
                    continue
                if values != self.configs.get(e):
                    self.configs.set(e, values)
                    logger.info("client quotas of %s set to %s", describe_entity(e), values or "none")
            out = []
            for (components, code, message) in results:
                if code == 0:
                    e = validate_entity(components)
                    if e in failed:
                        code, message = failed[e]
                out.append((components, code, message))
            return out
