"""Connections to other brokers through the inter-broker listener, with TLS and SASL.

Brokers reach each other through the listener ``inter.broker.listener.name`` names
(by default the one named after ``security.inter.broker.protocol``), at the
endpoint the target broker registered for it in ``/brokers/ids/<id>``.  The
connection speaks that listener's security protocol as Kafka's brokers do:

* SSL / SASL_SSL: TLS with the listener's ``listener.name.<l>.ssl.*`` (else
  ``ssl.*``) settings (kwire.security.tls.client_context): the truststore verifies the
  peer's chain, ``ssl.endpoint.identification.algorithm`` (default https) its
  host name, and the keystore is the client certificate (mutual TLS).
* SASL_PLAINTEXT / SASL_SSL: SaslHandshake v1, then SaslAuthenticate with the
  mechanism of ``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256 or
  SCRAM-SHA-512; kwire.security.sasl_client), logging in with the ``username`` and
  ``password`` options of that mechanism's JAAS config on that listener
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``).
  When the peer answers a session lifetime (KIP-368), the connection logs in again
  on the same socket before it runs out, at 85-95% of it, as Kafka's clients do.

A PLAINTEXT inter-broker listener gets kwire.transport.peer's PeerConnection unchanged: the
replication hot path pays nothing for this module.

    connector = PeerConnector.from_config(config)       # at start: reads the stores; ConfigError
    conn = await connector.open(host, port, client_id, timeout_s)   # PeerError
"""
from __future__ import annotations

import dataclasses
import logging
import random
import ssl

import trio

from kwire.admin.broker_config import BrokerConfig, ConfigError, INTER_BROKER_SASL_MECHANISMS

from kwire.security import sasl
from kwire.transport.peer import PeerConnection, PeerError
from kwire.security.sasl_client import SaslClientError, sasl_client
from kwire.security.tls_stream import TlsStream

__all__ = ["PeerConnector", "PeerLogin", "SecurePeerConnection"]

logger = logging.getLogger("kwire.transport.peer")

HANDSHAKE_VERSION = 1           # SaslHandshake v1: SaslAuthenticate requests carry the tokens
AUTHENTICATE_VERSION = 2
REAUTH_WINDOW = (0.85, 0.10)    # Kafka's client: re-authenticate at 85% of the lifetime + up to 10%


@dataclasses.dataclass(frozen=True)
class PeerLogin:
    """The broker's own SASL credentials for its peers."""
    mechanism: str
    username: str
    password: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True)
class PeerConnector:
    """How this broker connects to the others: the inter-broker listener's name and protocol,
    its client TLS context and its login."""
    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    login: PeerLogin | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> "PeerConnector":
        """Raises ConfigError naming the key (a bad ``ssl.*`` setting or store, a JAAS config
        without username and password).  Reads the key and trust stores."""
        name = config.inter_broker_listener_name
        listener = next((entry for entry in config.advertised_listeners if entry.name == name), None)
        protocol = listener.protocol if listener is not None else "PLAINTEXT"
        context = login = None
        if protocol in ("SSL", "SASL_SSL"):
            from kwire.security import tls
            context = tls.client_context(dict(config.originals), name)
        if protocol.startswith("SASL_"):
            login = _login_of(config, name)
        return cls(name, protocol, context, login)

    async def open(self, host: str, port: int, client_id: str, timeout_s: float = 30.0) -> PeerConnection:
        """A connection to ``host:port`` of the inter-broker listener, secured and logged in.
        Raises PeerError (WARNING level for a refused certificate or login).  Cancel-safe: a
        cancelled or failed open closes what it opened."""
        if self.protocol == "PLAINTEXT":
            return await PeerConnection.open(host, port, client_id, timeout_s)
        try:
            with trio.fail_after(timeout_s):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            raise PeerError(f"cannot connect to {host}:{port}: {exc}") from None
        conn = None
        try:
            if self.ssl_context is not None:
                stream = await self._tls(stream, host, port, timeout_s)
            conn = SecurePeerConnection(stream, client_id, timeout_s, self.ssl_context is not None, self.login)
            if self.login is not None:
                await conn.authenticate()
            return conn
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(conn.stream if conn is not None else stream)
            raise

    async def _tls(self, stream: trio.SocketStream, host: str, port: int, timeout_s: float) -> TlsStream:
        """The TLS stream over ``stream``'s socket, after the handshake; closed when that fails."""
        try:
            tls = TlsStream.wrap(stream, self.ssl_context, server_side=False, server_hostname=host)
        except OSError as exc:
            raise PeerError(f"TLS with {host}:{port} (listener {self.listener}) failed: {exc}") from None
        try:
            with trio.fail_after(timeout_s):
                await tls.do_handshake()
            return tls
        except trio.TooSlowError:
            raise PeerError(f"TLS handshake with {host}:{port} not done after {timeout_s:.0f} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            cause = exc.__cause__ or exc
            level = logging.WARNING if isinstance(cause, ssl.SSLError) else logging.INFO
            raise PeerError(f"TLS handshake with {host}:{port} (listener {self.listener}) failed: {cause}",
                            level) from None
        finally:
            if not tls.handshaken:
                await trio.aclose_forcefully(tls)


def _login_of(config: BrokerConfig, listener: str) -> PeerLogin:
    mechanism = config.value_of("sasl.mechanism.inter.broker.protocol").strip()
    if mechanism not in INTER_BROKER_SASL_MECHANISMS:     # checked with the listener already
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism} is not one of "
                          f"{', '.join(INTER_BROKER_SASL_MECHANISMS)}")
    own = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    key = own if config.originals.get(own) else "sasl.jaas.config"
    text = config.originals.get(own) or config.value_of("sasl.jaas.config")
    where = f"{own} (or sasl.jaas.config)"
    if not text:
        raise ConfigError(f"the inter-broker listener {listener} uses SASL {mechanism}: set {where} with "
                          "the username and password this broker logs in to the others with")
    try:
        options = sasl.parse_jaas_config(text).options
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if not options.get("username") or "password" not in options:
        raise ConfigError(f"{key}: the inter-broker listener {listener} uses SASL {mechanism}, so its JAAS "
                          "config needs the username and password options this broker logs in to the "
                          "others with, as Kafka's brokers do")
    return PeerLogin(mechanism, options["username"], options["password"])


class SecurePeerConnection(PeerConnection):
    """A PeerConnection over TLS (``tls``) and/or logged in with SASL (``login``)."""

    def __init__(self, stream, client_id: str, timeout_s: float, tls: bool, login: PeerLogin | None):
        super().__init__(stream, client_id, timeout_s)
        self.tls = tls
        self.login = login
        self.reauth_at: float | None = None       # trio time of the next login, when the peer asked

    async def authenticate(self) -> None:
        """SaslHandshake + SaslAuthenticate exchange with ``login``; on a session lifetime,
        schedules the next one.  Raises PeerError (WARNING level when refused)."""
        login, self.reauth_at = self.login, None
        refused = f"SASL {login.mechanism} login as {login.username!r}"
        response = await self.request(17, HANDSHAKE_VERSION, mechanism=login.mechanism)
        if response.error_code:
            raise PeerError(f"{refused}: handshake answered error {response.error_code}; the listener "
                            f"enables {', '.join(response.mechanisms) or 'no mechanism'}", logging.WARNING)
        client = sasl_client(login.mechanism, login.username, login.password)
        token = client.first()
        while token is not None:
            response = await self.request(36, AUTHENTICATE_VERSION, auth_bytes=token)
            if response.error_code:
                raise PeerError(f"{refused} refused: {response.error_message or response.error_code}",
                                logging.WARNING)
            try:
                token = client.step(response.auth_bytes or b"")
            except SaslClientError as exc:
                raise PeerError(f"{refused}: {exc}", logging.WARNING) from None
        lifetime_s = (response.session_lifetime_ms or 0) / 1000
        if lifetime_s > 0:
            low, jitter = REAUTH_WINDOW
            self.reauth_at = trio.current_time() + lifetime_s * (low + jitter * random.random())

    async def request(self, api_key: int, version: int, wait_s: float = 0.0, **fields):
        """PeerConnection.request, after logging in again when the session is due to end."""
        if self.reauth_at is not None and trio.current_time() >= self.reauth_at:
            await self.authenticate()
        return await super().request(api_key, version, wait_s, **fields)

    async def _receive_exactly(self, n: int) -> bytearray:
        if not self.tls:
            return await super()._receive_exactly(n)
        buffer = bytearray(n)
        view = memoryview(buffer)
        got = 0
        while got < n:
            count = await self.stream.receive_into(view[got:])     # decrypted straight into the frame
            if not count:
                raise PeerError("the peer closed the connection")
            got += count
        return buffer

    async def aclose(self) -> None:
        # no close_notify: a peer that stopped reading must not hold a shielded close
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self.stream)
