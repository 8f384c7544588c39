"""What a handler is given with each request (``RequestContext``) and the limits every
connection of a listener obeys (``ConnectionLimits``)."""
from __future__ import annotations

import dataclasses
import math
from typing import Awaitable, Callable

import trio

from kwire.server.broker import Broker
from kwire.security.listeners import ANONYMOUS
from kwire.security.sasl_session import SaslSession
from kwire.transport.budget import ByteBudget


async def _never() -> None:
    await trio.sleep_forever()


@dataclasses.dataclass
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    # Returns when the client has closed its end while this request is handled (a long poll
    # races it against its wait); never returns where that cannot be told.
    wait_peer_closed: Callable[[], Awaitable[None]] = _never
    listener: str = "PLAINTEXT"          # the name of the listener the request came through
    principal: str = ANONYMOUS           # who the connection proved to be (TLS, SASL)
    sasl: SaslSession | None = None      # the connection's SASL state on a SASL listener
    host: str = "127.0.0.1"              # the client's address as ACL hosts name it
    # client quotas (kwire.services.quotas): a handler's throttle in ms (a byte-rate or mutation
    # quota exceeded), and the time it spent parked (not counted as request time)
    throttle_ms: int = 0
    waited_s: float = 0.0
    # (client_software_name, client_software_version) the connection's ApiVersions v3+ gave
    client_software: tuple[str, str] | None = None

    def allowed(self, operation, resource_type, name: str) -> bool:
        """Whether the ACLs let this connection's principal do ``operation`` (an
        kwire.admin.acls.AclOperation) on the resource; always True with no authorizer."""
        return self.broker.acls.authorizer.authorize(self.principal, self.host, operation,
                                                     resource_type, name)

    def authorized(self, operation, resource_type, names) -> set[str]:
        """The ``names`` this connection may ``operation`` (all of them with no authorizer)."""
        return self.broker.acls.authorizer.filter_authorized(self.principal, self.host, operation,
                                                             resource_type, names)


def _seconds(ms: int) -> float:
    """A timeout setting in seconds; a negative setting means no limit."""
    return math.inf if ms < 0 else ms / 1000


@dataclasses.dataclass
class ConnectionLimits:
    """Settings and shared state every connection of one listener obeys."""
    max_frame_bytes: int
    idle_s: float                 # connections.max.idle.ms
    read_s: float                 # request.read.timeout.ms
    budget: ByteBudget            # queued.max.request.bytes, shared by all connections

    @classmethod
    def from_config(cls, config) -> "ConnectionLimits":
        return cls(config.socket_request_max_bytes, _seconds(config.value_of("connections.max.idle.ms")),
                   _seconds(config.value_of("request.read.timeout.ms")),
                   ByteBudget(config.value_of("queued.max.request.bytes")))
