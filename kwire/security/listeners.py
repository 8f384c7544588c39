"""What a connection knows of the listener it arrived on: TLS, and SASL's state.

Every listener of ``listeners`` is bound (kwire.server.connection.serve); a connection
carries its ``ListenerContext``: the listener's name (Metadata and
FindCoordinator answer with the endpoints of that same listener, as Kafka
does), its security protocol and, on an SSL listener, the server TLS context
built once at start-up from Kafka's ``ssl.*`` keys (kwire.security.tls, with the
``listener.name.<name>.ssl.*`` overrides).

TLS runs in kwire.security.tls_stream.TlsStream (the stdlib's ``ssl.SSLObject`` on memory
BIOs, driven without trio.SSLStream's machinery).  Records cannot go out with sendfile(2), so an
SSL connection reads each fetched slice with pread and encrypts it (the
README's TLS section gives the cost).  The handshake must finish within
``HANDSHAKE_TIMEOUT_S``; garbage, a plaintext client or a refused client
certificate ends in a closed connection and one INFO line, never more.

SASL (SASL_PLAINTEXT, SASL_SSL): each connection has a kwire.security.sasl_session.SaslSession,
Kafka's SaslServerAuthenticator in sans-I/O form.  SaslHandshake picks the mechanism
(v0: raw tokens follow, v1: SaslAuthenticate requests), the exchange runs
through kwire.security.sasl's servers, and until it completes only ApiVersions and the
SASL APIs are served, in frames of at most ``sasl.server.max.receive.size``
bytes.  A failed exchange is answered after
``connection.failed.authentication.delay.ms`` (so a client that retries at once is
slowed down), then the connection closes.  The mechanisms of a listener are
``listener.name.<l>.sasl.enabled.mechanisms`` or ``sasl.enabled.mechanisms``;
the JAAS options of a mechanism are ``listener.name.<l>.<mechanism>.sasl.jaas.config``,
or ``sasl.jaas.config`` for all of them.  A session lasts at most
``connections.max.reauth.ms`` of the mechanism (``listener.name.<l>.<mechanism>.`` and
``listener.name.<l>.`` prefixes first) and the credential's lifetime; clients re-authenticate
on the same connection before it ends (KIP-368, kwire.security.sasl_session).
"""
from __future__ import annotations

import dataclasses
import logging
import ssl

import trio

from kwire.admin.broker_config import BrokerConfig, ConfigError, Listener
from kwire.admin.security_config import max_reauth_ms
from kwire.security import sasl
from kwire.security.tls_stream import TlsStream

logger = logging.getLogger("kwire.server.connection")

HANDSHAKE_TIMEOUT_S = 10.0
ANONYMOUS = "User:ANONYMOUS"          # the principal of a connection that proved nothing


@dataclasses.dataclass(frozen=True)
class ListenerContext:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: object | None = None     # kwire.security.tls.PrincipalMapper on TLS listeners
    sasl_mechanisms: dict | None = None        # {mechanism: kwire.security.sasl factory} on SASL listeners
    max_reauth_ms: dict = dataclasses.field(default_factory=dict)   # {mechanism: connections.max.reauth.ms}
    sasl_max_bytes: int = sasl.MAX_SASL_TOKEN_BYTES
    failed_auth_delay_s: float = 0.1

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None


PLAINTEXT = ListenerContext("PLAINTEXT", "PLAINTEXT")


def listener_context(config: BrokerConfig, listener: Listener, scram=None) -> ListenerContext:
    """Build a listener's context; raises ConfigError (kwire.admin.config_def) for a bad
    ``ssl.*`` or ``sasl.*`` setting, naming the key.  Reads the key and trust stores.
    ``scram`` is the SCRAM credential store (an empty one when None: checking only)."""
    props = dict(config.originals)
    context = ListenerContext(listener.name, listener.protocol)
    if listener.protocol in ("SSL", "SASL_SSL"):
        from kwire.security import tls
        context = dataclasses.replace(
            context, ssl_context=tls.server_context(props, listener.name, security_protocol=listener.protocol),
            principal_mapper=tls.principal_mapper(props, listener.name))
    if listener.protocol.startswith("SASL_"):
        max_bytes = config.value_of("sasl.server.max.receive.size")
        mechanisms = _mechanisms(config, listener.name, scram, max_bytes)
        context = dataclasses.replace(
            context, sasl_mechanisms=mechanisms, sasl_max_bytes=max_bytes,
            max_reauth_ms={m: max_reauth_ms(config.value_of("connections.max.reauth.ms"), config.originals,
                                            listener.name, m) for m in mechanisms},
            failed_auth_delay_s=config.value_of("connection.failed.authentication.delay.ms") / 1000)
    return context


def _listener_value(config: BrokerConfig, listener: str, key: str):
    """``listener.name.<l>.<key>`` as given, else the broker-wide value of ``key``."""
    return config.originals.get(f"listener.name.{listener.lower()}.{key}", config.value_of(key))


def _mechanisms(config: BrokerConfig, listener: str, scram, max_bytes: int) -> dict:
    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    enabled = _listener_value(config, listener, "sasl.enabled.mechanisms")
    entries = []
    try:
        for mechanism in sasl.parse_enabled_mechanisms(enabled):
            own = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
            text = config.originals.get(own) or config.value_of("sasl.jaas.config")
            if text:
                entries.append(sasl.parse_jaas_config(text))
        if scram is None:
            from kwire.security.scram import ScramCredentialStore
            scram = ScramCredentialStore()
        return sasl.server_factories(enabled, jaas=entries, scram=scram, max_token_bytes=max_bytes)
    except ValueError as exc:
        raise ConfigError(f"listener {listener} ({key} or sasl.enabled.mechanisms, and the JAAS "
                          f"configs): {exc}") from None


async def secure(stream: trio.SocketStream, context: ListenerContext, peer: str
                 ) -> tuple[trio.abc.Stream, str] | None:
    """The stream to serve (``stream`` itself, or a kwire.security.tls_stream.TlsStream that took
    over its socket) and the TLS principal (``User:ANONYMOUS`` without a client certificate);
    None when the handshake failed (logged at INFO; the TLS stream is closed, closing
    ``stream`` too does no harm).  Cancel-safe: a cancelled handshake closes the socket."""
    if context.ssl_context is None:
        return stream, ANONYMOUS
    from kwire.security import tls
    try:
        tls_stream = TlsStream.wrap(stream, context.ssl_context, server_side=True)
    except OSError as exc:
        logger.info("%s: TLS on listener %s failed: %s; closing", peer, context.name, exc)
        return None
    secured = None
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await tls_stream.do_handshake()
        secured = tls_stream, tls.principal_of(tls_stream, context.principal_mapper)
    except trio.TooSlowError:
        logger.info("%s: TLS handshake on listener %s not done after %.0f s; closing", peer,
                    context.name, HANDSHAKE_TIMEOUT_S)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        cause = exc.__cause__ or exc
        logger.info("%s: TLS handshake on listener %s failed: %s; closing", peer, context.name, cause)
    except tls.NoMatchingRule as exc:
        logger.info("%s: no ssl.principal.mapping.rules rule maps the client certificate of "
                    "listener %s: %s; closing", peer, context.name, exc)
    finally:
        if secured is None:
            await trio.aclose_forcefully(tls_stream)
    return secured
