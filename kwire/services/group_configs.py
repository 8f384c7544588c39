"""Group configs (config resource type GROUP, 32): the minimum share groups need.

Kafka keeps dynamic group configs (KIP-848/KIP-932) in its metadata log and clients set
them with IncrementalAlterConfigs on resource type GROUP (``kafka-configs --entity-type
groups``, librdkafka's ``RD_KAFKA_RESOURCE_GROUP``).  kwire serves three of them so far:
``share.auto.offset.reset`` (``latest``, the default, or ``earliest``: where a share-partition
starts when the group first reads it), ``share.isolation.level`` (``read_uncommitted``, the
default, or ``read_committed``) and ``share.record.lock.duration.ms`` (within the broker's
``group.share.min/max.record.lock.duration.ms``).  Any other group config is INVALID_CONFIG.

Where they are kept is a ``GroupConfigStore`` chosen when the broker is built: on a single
node ``FileGroupConfigStore``, ``<first log dir>/share-group-configs.json`` ({group: {name:
value}}), replaced whole (``write_atomically``) off the Trio thread; in a cluster
``kwire.cluster.group_configs.ZkGroupConfigStore``, a group's znode ``/config/groups/<group>``,
and every broker applies what ZooKeeper holds (``apply_all``), so the share-partition leaders
all see them.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Protocol, runtime_checkable

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.checkpoints import write_atomically

from kwire.runtime.blocking import run_blocking

logger = logging.getLogger("kwire.share")

FILE_NAME = "share-group-configs.json"
GROUP_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE, STRING_TYPE = 8, 5, 2
# name -> (default, allowed values, documentation)
GROUP_CONFIGS = {
    "share.auto.offset.reset": ("latest", ("latest", "earliest"),
                                "Where a share group starts reading a partition it has no state for: "
                                "latest (the log end) or earliest (the log start)."),
    "share.isolation.level": ("read_uncommitted", ("read_uncommitted", "read_committed"),
                              "read_committed: deliver only committed transactional records (up to the last "
                              "stable offset; aborted ones are archived); read_uncommitted: every record."),
}


INT_TYPE = 3
LOCK_DURATION = "share.record.lock.duration.ms"
REFRESH_S = 2.0          # how long a share-partition waits for its group's configs before it starts


@runtime_checkable
class GroupConfigStore(Protocol):
    """Where the groups' configs are kept: a file on one node, ZooKeeper in a cluster."""

    def load(self) -> dict[str, dict[str, str]]:
        """Every group's configs at start-up.  Blocking (the broker opens before serving)."""

    async def save(self, group_id: str, group: dict[str, str], every: dict[str, dict[str, str]]) -> None:
        """Make ``group`` the configs of ``group_id`` (empty: none); ``every``: all groups'
        configs with it.  Raises what the store raises (OSError, ZooKeeper's errors)."""

    async def read_group(self, group_id: str) -> dict[str, str]:
        """The configs of ``group_id`` as the store holds them now.  Raises what the store
        raises; cancel-safe."""


class FileGroupConfigStore:
    """One node: ``<log dir>/share-group-configs.json`` (or ``file_name``: the client-metrics
    subscriptions are kept the same way), replaced whole."""

    def __init__(self, log_dir: str, file_name: str = FILE_NAME):
        self.path = os.path.join(log_dir, file_name)

    def load(self) -> dict[str, dict[str, str]]:
        try:
            with open(self.path) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    async def save(self, group_id: str, group: dict[str, str], every: dict[str, dict[str, str]]) -> None:
        await run_blocking(write_atomically, self.path, json.dumps(every))

    async def read_group(self, group_id: str) -> dict[str, str]:
        return (await run_blocking(self.load)).get(group_id, {})


class GroupConfigs:
    """``broker_config``: the broker's config, for the lock duration's default and bounds
    (``group.share.record.lock.duration.ms`` and its min/max keys)."""

    def __init__(self, log_dir: str, on_change, broker_config=None, store: GroupConfigStore | None = None):
        self.store = store if store is not None else FileGroupConfigStore(log_dir)   # the broker chooses it
        self.on_change = on_change             # (group_id, name, value | None)
        self.configs: dict[str, dict[str, str]] = {}
        self.specs = dict(GROUP_CONFIGS)
        if broker_config is not None:
            v = broker_config.value_of
            low, high = v("group.share.min.record.lock.duration.ms"), v("group.share.max.record.lock.duration.ms")
            self.specs[LOCK_DURATION] = (
                str(v("group.share.record.lock.duration.ms")), _int_between(low, high),
                f"How long a member holds the records it acquired, from {low} to {high} ms "
                "(group.share.min/max.record.lock.duration.ms).")

    def load(self) -> None:
        self.configs = self.store.load()
        for group_id, values in self.configs.items():
            for name, value in values.items():
                self.on_change(group_id, name, value)

    def describe(self, group_id: str, keys) -> list[dict]:
        """DescribeConfigs entries of ``group_id`` (``keys`` None: all)."""
        current = self.configs.get(group_id, {})
        out = []
        for name, (default, allowed, doc) in self.specs.items():
            if keys and name not in keys:
                continue
            set_ = name in current
            out.append({"name": name, "value": current.get(name, default), "read_only": False,
                        "is_default": not set_, "config_source": GROUP_CONFIG_SOURCE if set_ else DEFAULT_CONFIG_SOURCE,
                        "is_sensitive": False, "synonyms": [], "documentation": doc,
                        "config_type": INT_TYPE if isinstance(allowed, _int_between) else STRING_TYPE})
        return out

    async def alter(self, group_id: str, ops, incremental: bool, validate_only: bool) -> None:
        """``ops``: (name, operation, value) (IncrementalAlterConfigs) or (name, value) pairs
        (AlterConfigs, which replaces all).  Raises KafkaApiError(INVALID_CONFIG | INVALID_GROUP_ID)."""
        if not group_id:
            raise KafkaApiError(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        new = dict(self.configs.get(group_id, {})) if incremental else {}
        for name, *rest in ops:
            op, value = rest if incremental else (0, rest[0])
            if op == 1:                                   # DELETE
                new.pop(name, None)
            elif op == 0 and value is not None:           # SET
                new[name] = value
            elif op == 0 and not incremental:
                continue
            else:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Operation {op} is not supported for {name}")
        for name, value in new.items():
            spec = self.specs.get(name)
            if spec is None:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
            if value not in spec[1]:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    f"Invalid value {value} for configuration {name}: must be one of {spec[1]}")
        if validate_only:
            return
        configs = dict(self.configs)
        if new:
            configs[group_id] = new
        else:
            configs.pop(group_id, None)
        await self.store.save(group_id, new, configs)
        self.configs = configs
        for name in self.specs:
            self.on_change(group_id, name, new.get(name))

    def apply_all(self, configs: dict[str, dict[str, str]]) -> None:
        """Cluster mode: make ``configs`` (every group's, from ZooKeeper) the current ones,
        telling ``on_change`` of each value that changed."""
        old, self.configs = self.configs, {g: dict(c) for g, c in configs.items()}
        for group_id in set(old) | set(configs):
            self._changed(group_id, old.get(group_id, {}), configs.get(group_id, {}))

    async def refresh(self, group_id: str) -> None:
        """Before a share-partition starts from share.auto.offset.reset: the group's configs as
        the store holds them, not as this broker's watch last delivered them, so a config
        another broker acknowledged a moment ago applies (``kafka-configs`` then a consumer).
        The last known ones stay when the store does not answer within REFRESH_S."""
        configs, why = None, f"no answer within {REFRESH_S:g} s"
        with trio.move_on_after(REFRESH_S):
            try:
                configs = await self.store.read_group(group_id)
            except Exception as exc:          # the store away: the configs the watch delivered
                why = repr(exc)
        if configs is None:
            logger.warning("group %s: configs not read from their store (%s); using the last known", group_id, why)
            return
        self.apply_group(group_id, configs)

    def apply_group(self, group_id: str, configs: dict[str, str]) -> None:
        """Make ``configs`` (one group's, just read from the store) its current ones."""
        before = self.configs.get(group_id, {})
        self.configs = dict(self.configs)
        if configs:
            self.configs[group_id] = dict(configs)
        else:
            self.configs.pop(group_id, None)
        self._changed(group_id, before, configs)

    def _changed(self, group_id: str, before: dict, after: dict) -> None:
        for name in self.specs:
            if before.get(name) != after.get(name):
                self.on_change(group_id, name, after.get(name))


class _int_between:
    """Allowed values of an INT group config: ``value in _int_between(lo, hi)``."""

    def __init__(self, low: int, high: int):
        self.low, self.high = low, high

    def __contains__(self, value) -> bool:
        try:
            return self.low <= int(value) <= self.high
        except (TypeError, ValueError):
            return False

    def __repr__(self) -> str:
        return f"[{self.low}, {self.high}]"
