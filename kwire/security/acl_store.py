"""The broker's ACLs: Kafka's authorizer (kwire.admin.acls) over a durable store.

Single node: the bindings live in ``__kwire_acls.json`` in the first log
dir (kwire.admin.acl_formats), replaced atomically (temp file, fsync,
rename, directory fsync) in a worker thread before a CreateAcls or
DeleteAcls is answered, so an acknowledged change survives a crash and a
failed write changes nothing.  A cluster broker (``zookeeper.connect``) keeps
no file: its ACLs are in ZooKeeper, in Kafka's layout (kwire.cluster.acl_store).

Authorization is on with ``authorizer.class.name`` set to one of Kafka's ACL
authorizers; off, every request is allowed and the ACL APIs answer
SECURITY_DISABLED, as in Kafka.
"""
from __future__ import annotations

import logging
import os

from kwire.admin import acl_formats
from kwire.admin.acls import AclBinding, AclBindingFilter, AclStore, Authorizer, AuthorizerConfig
from kwire.log import checkpoints

from kwire.runtime.blocking import run_blocking

logger = logging.getLogger("kwire.acls")


class AclService:
    def __init__(self, config, log_dir: str):
        self.path = os.path.join(log_dir, acl_formats.ACL_FILE)
        self.store = AclStore()
        self.authorizer = Authorizer(AuthorizerConfig.from_values(config.values), self.store)

    @property
    def enabled(self) -> bool:
        return self.authorizer.enabled

    def load(self) -> None:
        """Read the ACL file (none: no ACLs).  Raises ValueError for a damaged file: a broker
        must not start with its ACLs silently gone."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        try:
            bindings = acl_formats.decode_file(data)
        except Exception as exc:
            raise ValueError(f"{self.path}: the ACL file cannot be read ({exc}); restore it or remove "
                             "it to start with no ACLs") from None
        change = self.store.prepare_create(bindings)[1]
        self.store.apply(change)
        logger.info("loaded %d ACL(s) from %s", len(self.store), self.path)

    async def create(self, bindings: list[AclBinding]):
        """CreateAcls: per-binding AclErrors; the new bindings are durable before it returns.
        Raises OSError when the file cannot be written (nothing changed)."""
        errors, change = self.store.prepare_create(bindings)
        await self._commit(change)
        return errors

    async def delete(self, filters: list[AclBindingFilter]):
        """DeleteAcls: per-filter DeleteResults, durable before it returns.  Raises OSError."""
        results, change = self.store.prepare_delete(filters)
        await self._commit(change)
        return results

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.store.describe(acl_filter)

    async def _commit(self, change) -> None:
        if change.is_empty:
            return
        after = AclStore(list(self.store))
        after.apply(change)
        await run_blocking(checkpoints.write_atomically, self.path, acl_formats.encode_file(list(after)))
        self.store.apply(change)
