"""Client quotas of a broker (kwire.admin.quotas has the model): where they are kept, what
DescribeClientQuotas (48) and AlterClientQuotas (49) do to them, and what the request path
asks (``enforcer``).  A cluster broker keeps them in ZooKeeper instead
(kwire.cluster.quota_store.ZkQuotaService: the same rules, no file).

File (single node): ``<first log dir>/__kwire_client_quotas.json``::

    {"version": 1, "entities": [{"entity": [{"entity_type": "user", "entity_name": "alice"}],
                                 "values": {"producer_byte_rate": 1048576.0}}, ...]}

(``entity_name`` null: the default entity.)  It is replaced whole on every change
(``write_atomically``, off the Trio thread); a missing file is no quotas; one that cannot be
read or parsed stops the start (``QuotaFileError``) rather than silently lifting every quota.

Alter (Kafka's ClientQuotaControlManager): entities are independent; each is validated
(entity types, keys, values), then the valid ones are written together; ``validate_only``
answers the same without writing.  Describe: a filter (kwire.admin.quotas.parse_filter); a bad
filter is a top-level error.

Enforcement settings are Kafka's broker configs ``quota.window.num`` (11) and
``quota.window.size.seconds`` (1).
"""
from __future__ import annotations

import json
import logging
import os
from typing import Mapping, Sequence

import trio

from kwire.admin.quotas import (Entity, Op, QuotaConfigs, QuotaEnforcer, QuotaError, QuotaFilter, apply_ops,
                                describe_entity, parse_values, validate_entity, format_value)
from kwire.codecs.errors import ErrorCode
from kwire.log.checkpoints import write_atomically
from kwire.runtime.blocking import run_blocking

logger = logging.getLogger("kwire.quotas")

FILE_NAME = "__kwire_client_quotas.json"


class QuotaFileError(Exception):
    """The quota file exists but cannot be read or parsed."""


class Alteration:
    """One entry of an AlterClientQuotas request, as given (entity unvalidated)."""
    __slots__ = ("components", "ops")

    def __init__(self, components: Sequence[tuple[str, str | None]], ops: Sequence[Op]):
        self.components = list(components)
        self.ops = list(ops)


def window_settings(config) -> tuple[int, int]:
    """(quota.window.num, quota.window.size.seconds) of a broker config (Kafka's defaults
    where the config does not know them)."""
    try:
        return int(config.value_of("quota.window.num")), int(config.value_of("quota.window.size.seconds"))
    except (KeyError, AttributeError, TypeError):
        return 11, 1


class QuotaService:
    """The broker's quotas: ``configs`` (what is configured), ``enforcer`` (the rates)."""

    def __init__(self, config, log_dir: str | os.PathLike | None):
        self.path = os.path.join(os.path.abspath(os.fspath(log_dir)), FILE_NAME) if log_dir else None
        self.configs = QuotaConfigs()
        num, size = window_settings(config)
        self.enforcer = QuotaEnforcer(self.configs, num, size)
        self._lock = trio.Lock()

    @property
    def active(self) -> bool:
        """Whether any quota is configured (the request path does nothing otherwise)."""
        return bool(self.configs.entities)

    # -- start-up ----------------------------------------------------------------------------
    def load(self) -> None:
        if self.path is None:
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise QuotaFileError(f"{self.path}: unreadable: {exc}") from None
        try:
            entities = decode_file(text)
        except (ValueError, TypeError, KeyError, AttributeError, QuotaError) as exc:
            raise QuotaFileError(f"{self.path}: not a client quota file: {exc}") from None
        self.configs.replace_all(entities)

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Nothing to follow on a single node (the cluster's service follows ZooKeeper)."""
        task_status.started()

    # -- DescribeClientQuotas ------------------------------------------------------------------
    def describe(self, flt: QuotaFilter) -> list[tuple[Entity, dict[str, float]]]:
        return self.configs.describe(flt)

    # -- AlterClientQuotas ---------------------------------------------------------------------
    def plan(self, alterations: Sequence[Alteration]) -> tuple[list, dict[Entity, dict[str, float]]]:
        """(results in request order: (components, code, message), {entity: its values after})."""
        results, after = [], {}
        for alteration in alterations:
            try:
                e = validate_entity(alteration.components)
                current = after.get(e, self.configs.get(e))
                after[e] = apply_ops(current, alteration.ops)
            except QuotaError as exc:
                results.append((alteration.components, int(exc.code), exc.message))
                continue
            results.append((alteration.components, 0, None))
        return results, after

    async def alter(self, alterations: Sequence[Alteration], validate_only: bool) -> list:
        """Apply the valid alterations (unless ``validate_only``); one result per entry."""
        async with self._lock:
            results, after = self.plan(alterations)
            if validate_only or not after:
                return results
            changed = {e: v for e, v in after.items() if v != self.configs.get(e)}
            if not changed:
                return results
            written = await self._write(changed)
            if written is not None:
                return [(c, code, msg) if code else (c, written[0], written[1]) for c, code, msg in results]
            for e, values in changed.items():
                self.configs.set(e, values)
                logger.info("client quotas of %s set to %s", describe_entity(e), values or "none")
            return results

    async def _write(self, changed: Mapping[Entity, Mapping[str, float]]) -> tuple[int, str] | None:
        """Persist ``changed``; None when done, else (error code, message) for every entity."""
        entities = {e: dict(v) for e, v in self.configs.entities.items()}
        for e, values in changed.items():
            if values:
                entities[e] = dict(values)
            else:
                entities.pop(e, None)
        try:
            await run_blocking(write_atomically, self.path, encode_file(entities))
        except OSError as exc:
            logger.error("could not write client quotas to %s: %s", self.path, exc)
            return int(ErrorCode.KAFKA_STORAGE_ERROR), f"could not write {self.path}: {exc.strerror or exc}"
        return None


def encode_file(entities: Mapping[Entity, Mapping[str, float]]) -> str:
    return json.dumps({"version": 1, "entities": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in e], "values": dict(v)}
        for e, v in entities.items()]}, sort_keys=True)


def decode_file(text: str) -> dict[Entity, dict[str, float]]:
    doc = json.loads(text)
    if doc.get("version") != 1:
        raise ValueError(f"unknown version {doc.get('version')!r}")
    out = {}
    for item in doc["entities"]:
        e = validate_entity([(c["entity_type"], c["entity_name"]) for c in item["entity"]])
        values, problems = parse_values({k: format_value(k, float(v)) for k, v in item["values"].items()})
        for problem in problems:
            logger.warning("client quota of %s ignored: %s", describe_entity(e), problem)
        if values:
            out[e] = values
    return out
