"""What a connection knows of the listener it arrived on, and TLS on SSL listeners.

Every listener of ``listeners`` is bound (kwire.server.serve); a connection
carries its ``ListenerContext``: the listener's name (Metadata and
FindCoordinator answer with the endpoints of that same listener, as Kafka
does), its security protocol and, on an SSL listener, the server TLS context
built once at start-up from Kafka's ``ssl.*`` keys (kwire.tls, with the
``listener.name.<name>.ssl.*`` overrides).

TLS runs under ``trio.SSLStream``: records cannot go out with sendfile(2), so
an SSL connection reads each fetched slice with pread and encrypts it (the
README's TLS section gives the cost).  The handshake must finish within
``HANDSHAKE_TIMEOUT_S``; garbage, a plaintext client or a refused client
certificate ends in a closed connection and one INFO line, never more.
"""
from __future__ import annotations

import dataclasses
import logging
import ssl

import trio

from kwire.admin.broker_config import BrokerConfig, Listener

logger = logging.getLogger("kwire.server")

HANDSHAKE_TIMEOUT_S = 10.0
ANONYMOUS = "User:ANONYMOUS"          # the principal of a connection that proved nothing


@dataclasses.dataclass(frozen=True)
class ListenerContext:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: object | None = None     # kwire.tls.PrincipalMapper on TLS listeners

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None


PLAINTEXT = ListenerContext("PLAINTEXT", "PLAINTEXT")


def listener_context(config: BrokerConfig, listener: Listener) -> ListenerContext:
    """Build a listener's context; raises ConfigError (kwire.admin.config_def) for a bad
    ``ssl.*`` setting, naming the key.  Reads the key and trust stores."""
    if listener.protocol not in ("SSL", "SASL_SSL"):
        return ListenerContext(listener.name, listener.protocol)
    from . import tls
    props = dict(config.originals)
    return ListenerContext(listener.name, listener.protocol,
                           tls.server_context(props, listener.name, security_protocol=listener.protocol),
                           tls.principal_mapper(props, listener.name))


async def secure(stream: trio.SocketStream, context: ListenerContext, peer: str
                 ) -> tuple[trio.abc.Stream, str] | None:
    """The stream to serve and the TLS principal (``User:ANONYMOUS`` without a client
    certificate); None when the handshake failed (logged at INFO; the caller closes)."""
    if context.ssl_context is None:
        return stream, ANONYMOUS
    tls_stream = trio.SSLStream(stream, context.ssl_context, server_side=True)
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await tls_stream.do_handshake()
    except trio.TooSlowError:
        logger.info("%s: TLS handshake on listener %s not done after %.0f s; closing", peer,
                    context.name, HANDSHAKE_TIMEOUT_S)
        return None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        cause = exc.__cause__ or exc
        logger.info("%s: TLS handshake on listener %s failed: %s; closing", peer, context.name, cause)
        return None
    from . import tls
    try:
        return tls_stream, tls.principal_of(tls_stream, context.principal_mapper)
    except tls.NoMatchingRule as exc:
        logger.info("%s: no ssl.principal.mapping.rules rule maps the client certificate of "
                    "listener %s: %s; closing", peer, context.name, exc)
        return None
