"""The handler registry: which API versions kwire serves, and by which function.

ApiVersions is derived from this table, so nothing is advertised that has
no handler.  A handler is ``async def handler(ctx, request) -> dict | None``
returning the response fields as plain dicts (None = no response, as for
Produce with acks=0), or a ``Deferred`` whose fields come later.
"""
from __future__ import annotations

import dataclasses
from typing import Awaitable, Callable


@dataclasses.dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    func: Callable[..., Awaitable[dict | None]]
    # Versions inside the advertised window that are rejected anyway
    # (librdkafka <2.11 needs Produce 0 advertised to enable compression).
    reject_below: int = 0
    # Whether a broker of this config serves the API (None: always); one that does not
    # neither advertises it nor accepts it (e.g. the KIP-848 APIs without ``consumer`` in
    # group.coordinator.rebalance.protocols).
    enabled: Callable[..., bool] | None = None
    # The finalized feature that turns the API on (level >= 1), as Kafka 4.x gates the
    # KIP-848 APIs on group.version and the share-group APIs on share.version.
    feature: str | None = None

    def serves(self, config, features=None) -> bool:
        """Whether a broker of this ``config`` and finalized ``features`` serves the API."""
        if self.feature is not None and features is not None and features.level(self.feature) < 1:
            return False
        return self.enabled is None or config is None or self.enabled(config)


HANDLERS: dict[int, Handler] = {}


class Deferred:
    """A handler's answer whose fields are known only later: an acks=all Produce in a
    cluster, waiting for the ISR after its append.  The connection goes on reading and
    handling the requests behind it meanwhile and sends every response in request order
    (kwire.server.connection), so the wait for the followers overlaps the next appends instead of
    stalling the connection.  ``complete()`` returns the fields (dict, or None for no
    response); it must not append, so the appends stay in request order."""

    __slots__ = ("complete",)

    def __init__(self, complete: Callable[[], Awaitable[dict | None]]):
        self.complete = complete


def handles(api_key: int, min_version: int, max_version: int, *, reject_below: int = 0,
            enabled: Callable[..., bool] | None = None, feature: str | None = None):
    def register(func):
        HANDLERS[api_key] = Handler(api_key, min_version, max_version, func, reject_below, enabled, feature)
        return func
    return register
