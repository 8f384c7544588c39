"""Finalized feature levels (``kwire.admin.features``): where they are kept and how an
UpdateFeatures changes them.

``broker.features.level("transaction.version")`` is the one question the rest of the broker
asks (0 when the feature is not finalized); ``broker.features.finalized`` holds every level and
the epoch that ApiVersions advertises.

Where the levels are kept is a ``FeatureStore`` chosen when the broker is built: on a single
node ``FileFeatureStore``, ``<first log dir>/finalized-features.json`` (the ``/feature`` znode's
JSON with an ``"epoch"``), replaced whole off the Trio thread, the defaults with epoch 0 until
the first update; in a cluster ``kwire.cluster.features.ZkFeatureStore``, Kafka's ``/feature``
znode, whose version is the epoch and which every broker applies from each ZooKeeper snapshot
(``apply``).
"""
from __future__ import annotations

import logging
import os
from typing import Iterable, Protocol

import trio

from kwire.admin import features as rules
from kwire.admin.features import FeatureUpdate, FinalizedFeatures
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.checkpoints import write_atomically
from kwire.runtime.blocking import run_blocking

logger = logging.getLogger("kwire.features")

FILE_NAME = "finalized-features.json"
UPDATE_FAILED = "Unable to update finalized features due to an unexpected server error."


class FeatureConflict(Exception):
    """The stored levels changed since they were read (another broker's update): read again."""


class FeatureStore(Protocol):
    """Where the finalized levels are kept: a file on one node, ZooKeeper in a cluster."""

    def load(self) -> FinalizedFeatures | None:
        """The levels at start-up (None: they come later, from ZooKeeper).  Blocking."""

    async def read(self) -> FinalizedFeatures:
        """The levels as the store holds them now.  Raises what the store raises."""

    async def save(self, levels: dict[str, int], expected_epoch: int) -> int:
        """Store ``levels`` if the epoch is still ``expected_epoch``; returns the new epoch.
        Raises FeatureConflict, or what the store raises."""


class FileFeatureStore:
    """One node: ``<log dir>/finalized-features.json``, replaced whole."""

    def __init__(self, log_dir: str):
        self.path = os.path.join(log_dir, FILE_NAME)
        self._current = FinalizedFeatures(rules.default_levels(), 0)

    def load(self) -> FinalizedFeatures:
        try:
            with open(self.path, "rb") as f:
                levels, epoch = rules.decode(f.read())
        except FileNotFoundError:
            return self._current
        self._current = FinalizedFeatures(levels, epoch or 0)
        return self._current

    async def read(self) -> FinalizedFeatures:
        return self._current

    async def save(self, levels: dict[str, int], expected_epoch: int) -> int:
        if expected_epoch != self._current.epoch:
            raise FeatureConflict(f"epoch {self._current.epoch}, not {expected_epoch}")
        epoch = expected_epoch + 1
        await run_blocking(write_atomically, self.path, rules.encode(levels, epoch))
        self._current = FinalizedFeatures(dict(levels), epoch)
        return epoch


class FeatureService:
    """The finalized levels this broker advertises and goes by."""

    def __init__(self, node_id: int, store: FeatureStore):
        self.node_id = node_id
        self.store = store
        self.finalized = FinalizedFeatures(rules.default_levels(), -1)
        self._lock = trio.Lock()          # one update at a time on this broker

    def level(self, name: str) -> int:
        """The finalized level of feature ``name`` (0 when not finalized).  Never raises."""
        return self.finalized.level(name)

    def load(self) -> None:
        loaded = self.store.load()
        if loaded is not None:
            self.apply(loaded)

    def apply(self, finalized: FinalizedFeatures) -> None:
        """Go by ``finalized`` (a ZooKeeper snapshot's or this broker's own update); an older
        epoch than the one in force is ignored."""
        if finalized.epoch < self.finalized.epoch or finalized == self.finalized:
            return
        if dict(finalized.levels) != dict(self.finalized.levels):
            logger.info("finalized features (epoch %d): %s", finalized.epoch,
                        ", ".join(f"{n}={v}" for n, v in sorted(finalized.levels.items())) or "none")
        self.finalized = finalized

    async def alter(self, updates: Iterable[FeatureUpdate], validate_only: bool) -> None:
        """UpdateFeatures: check ``updates`` against the stored levels (Kafka's rules,
        ``kwire.admin.features.apply_updates``) and, unless ``validate_only``, store and apply
        them.  Raises KafkaApiError: INVALID_UPDATE_VERSION for a refused update,
        FEATURE_UPDATE_FAILED when the store cannot be written."""
        updates = list(updates)
        async with self._lock:
            for _attempt in range(5):        # another broker may update between our read and write
                try:
                    current = await self.store.read()
                except Exception as exc:
                    logger.warning("finalized features could not be read: %r", exc)
                    raise KafkaApiError(ErrorCode.FEATURE_UPDATE_FAILED, UPDATE_FAILED) from None
                levels = rules.apply_updates(current.levels, updates, self.node_id)
                if validate_only or levels == dict(current.levels):
                    return
                try:
                    epoch = await self.store.save(levels, current.epoch)
                except FeatureConflict:
                    continue
                except Exception as exc:
                    logger.warning("finalized features not stored: %r", exc)
                    raise KafkaApiError(ErrorCode.FEATURE_UPDATE_FAILED, UPDATE_FAILED) from None
                self.apply(FinalizedFeatures(levels, epoch))
                return
            raise KafkaApiError(ErrorCode.FEATURE_UPDATE_FAILED, UPDATE_FAILED)
