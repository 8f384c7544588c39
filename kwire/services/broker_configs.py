"""Dynamic broker configs (``kwire.admin.dynamic_config``): where they are kept, how an
alter is applied and how the broker takes them on without a restart.

Where they are kept is a ``BrokerConfigStore`` chosen when the broker is built: on a
single node ``FileBrokerConfigStore``, ``<first log dir>/dynamic-broker-configs.json``
({entity: {name: value}}, entity ``""`` the cluster default, else a broker id), replaced
whole off the Trio thread; in a cluster ``kwire.cluster.broker_configs.ZkBrokerConfigStore``,
Kafka's ``/config/brokers/<id>`` and ``/config/brokers/<default>`` znodes, which every broker
applies from each ZooKeeper snapshot (``apply``).

Applying swaps ``broker.config`` for one with the dynamic layers in force
(``dynamic_config.with_dynamic``) and re-resolves every partition's topic config, whose
broker defaults may have changed; ``max.connections`` is read as each connection opens.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Callable, Mapping, Protocol, runtime_checkable

import trio

from kwire.admin.broker_config import ConfigError
from kwire.admin.dynamic_config import validate_update, with_dynamic
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.checkpoints import write_atomically
from kwire.runtime.blocking import run_blocking

logger = logging.getLogger("kwire.config")

FILE_NAME = "dynamic-broker-configs.json"


@runtime_checkable
class BrokerConfigStore(Protocol):
    """Where the dynamic broker configs are kept: a file on one node, ZooKeeper in a cluster."""

    def load(self) -> dict[str, dict[str, str]]:
        """Every entity's configs at start-up.  Blocking (the broker opens before serving)."""

    async def read(self, entity: str) -> dict[str, str]:
        """The entity's configs as the store holds them now (another broker may have written
        them).  Raises what the store raises."""

    async def save(self, entity: str, configs: dict[str, str]) -> None:
        """Make ``configs`` the dynamic configs of ``entity``.  Raises what the store raises."""


class FileBrokerConfigStore:
    """One node: ``<log dir>/dynamic-broker-configs.json``, replaced whole."""

    def __init__(self, log_dir: str):
        self.path = os.path.join(log_dir, FILE_NAME)
        self._every: dict[str, dict[str, str]] = {}

    def load(self) -> dict[str, dict[str, str]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                self._every = json.load(f)
        except FileNotFoundError:
            self._every = {}
        return self._every

    async def read(self, entity: str) -> dict[str, str]:
        return dict(self._every.get(entity, {}))

    async def save(self, entity: str, configs: dict[str, str]) -> None:
        every = {e: c for e, c in {**self._every, entity: configs}.items() if c}
        await run_blocking(write_atomically, self.path, json.dumps(every, indent=1, sort_keys=True).encode())
        self._every = every


class BrokerConfigService:
    """The dynamic configs this broker knows and applies."""

    def __init__(self, broker, store: BrokerConfigStore):
        self.broker = broker
        self.store = store
        self._applied: tuple[dict, dict] = ({}, {})      # (cluster default, this broker) in force
        self._lock = trio.Lock()       # one alter at a time: each reads, changes and writes an entity

    def load(self) -> None:
        self.apply(self.store.load())

    async def alter(self, entity: str, change: Callable[[dict[str, str]], Mapping[str, str | None]],
                    validate_only: bool) -> None:
        """Make ``change(current configs)`` the dynamic configs of ``entity`` (``""`` or this
        broker's id) and apply them here; raises KafkaApiError for a key that cannot change or
        a bad value (``change`` may raise it too)."""
        async with self._lock:
            checked = validate_update(change(await self.store.read(entity)), per_broker=entity != "")
            own = str(self.broker.node_id)
            layers = {"": await self.store.read(""), own: await self.store.read(own), entity: checked}
            try:        # a listener's new stores must load before they are kept (Kafka's SslFactory check)
                self.broker.check_listeners(with_dynamic(self.broker.config, layers[""], layers[own]))
            except ConfigError as exc:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if validate_only:
                return
            await self.store.save(entity, checked)
            self.apply(layers, reload=True)

    def apply(self, entities: Mapping[str, Mapping[str, str]], reload: bool = False) -> None:
        """Put the cluster default's and this broker's configs of ``entities`` in force (a
        no-op when they have not changed, unless ``reload``: an alter reads the listeners'
        store files again even when their names are the same)."""
        layers = (dict(entities.get("", {})), dict(entities.get(str(self.broker.node_id), {})))
        if layers == self._applied and not reload:
            return
        try:
            config = with_dynamic(self.broker.config, *layers)
        except ConfigError as exc:      # together with server.properties they do not make a config
            logger.error("dynamic broker configs not applied (cluster default %s, broker %d %s): %s",
                         layers[0], self.broker.node_id, layers[1], exc)
            return
        self._applied = layers
        self.broker.reconfigure(config)
        logger.info("dynamic broker configs in force: cluster default %s, broker %d %s",
                    layers[0] or "{}", self.broker.node_id, layers[1] or "{}")
