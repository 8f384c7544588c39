"""One connection's SASL state: Kafka's SaslServerAuthenticator with KIP-368 re-authentication.

Sans-I/O and Trio-free: the connection (kwire.server.connection) feeds it SaslHandshake and
SaslAuthenticate requests (or bare tokens after a v0 handshake) with ``now_ms``;
the mechanisms' exchanges are kwire.security.sasl's servers.

States (``State``) and what each serves:

    state                 frames                                   next
    HANDSHAKE             ApiVersions, SaslHandshake               AUTHENTICATE | FAILED
    AUTHENTICATE          SaslAuthenticate (v1 handshake) or       COMPLETE | FAILED
                          bare tokens (v0 handshake)
    COMPLETE              any request                              REAUTH_HANDSHAKE | closed on expiry
    REAUTH_HANDSHAKE      the SaslHandshake that began it          AUTHENTICATE | REAUTH_BAD_MECHANISM
                                                                   | FAILED
    REAUTH_BAD_MECHANISM  nothing: the next frame closes, unanswered
    FAILED                nothing: the answer goes out after the listener's delay, then a close

Kafka's session rules (SaslServerAuthenticator.ReauthInfo, KafkaChannel, SocketServer):

- When an exchange completes, the session lasts min(``connections.max.reauth.ms`` of the
  listener and mechanism when > 0, the credential's remaining lifetime when it has one: an
  OAUTHBEARER token's exp), at least 0; with neither, for ever.  SaslAuthenticate v1+ tells
  the client that lifetime (``session_lifetime_ms``, 0 = none); a v0 client is not told and
  its session ends all the same.
- A SaslHandshake on an authenticated connection begins a re-authentication when the session
  has an expiry and the last one began at least 1 s ago, even once the session has expired;
  otherwise it is an ordinary request, answered ILLEGAL_SASL_STATE.  A re-authentication
  must use the same mechanism (another enabled one is answered NONE, then the connection
  closes at the next frame) and prove the same principal (else SASL_AUTHENTICATION_FAILED,
  "Cannot change principals during re-authentication ...", and a close).
- Any other request on an expired session closes the connection, unanswered
  (``expired``).
"""
from __future__ import annotations

import enum

from kwire.codecs.errors import ErrorCode

from kwire.security import sasl

MIN_REAUTH_INTERVAL_MS = 1000     # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    REAUTH_HANDSHAKE = "re-authentication handshake"
    REAUTH_BAD_MECHANISM = "re-authentication with another mechanism"
    FAILED = "failed"


class SaslSession:
    """One connection's SASL state (see the module docstring).

    ``context`` is the listener's kwire.security.listeners.ListenerContext: its
    ``sasl_mechanisms`` ({mechanism: factory}) and ``max_reauth_ms`` ({mechanism: ms}).
    ``gated`` tells the connection whether a frame needs this session's look before the
    ordinary dispatch: always until authenticated, afterwards only when the session expires.
    """

    def __init__(self, context):
        self.context = context
        self.state = State.HANDSHAKE
        self.server = None             # the mechanism's exchange, after SaslHandshake
        self.mechanism: str | None = None
        self.raw_tokens = False        # SaslHandshake v0: the next frames are bare tokens
        self.principal: str | None = None    # kept through a re-authentication
        self.gated = True
        self.expires_ms: int | None = None   # the session's end; None: it never ends
        self.session_lifetime_ms = 0   # what SaslAuthenticate v1+ answered at the last completion
        self.refusal: str | None = None      # why the next frame closes the connection unanswered
        self.reauthentications = 0     # completed re-authentications
        self._reauth_began_ms: int | None = None

    @property
    def authenticated(self) -> bool:
        """Whether requests other than SASL's may be served (not during a re-authentication)."""
        return self.state is State.COMPLETE

    @property
    def failed(self) -> bool:
        """Answer, then close after the listener's delay."""
        return self.state is State.FAILED

    @property
    def reauthenticating(self) -> bool:
        return self.principal is not None and self.state is not State.COMPLETE

    @property
    def mechanisms(self) -> list[str]:
        return list(self.context.sasl_mechanisms)

    def handshake(self, mechanism: str, version: int, now_ms: int) -> ErrorCode:
        """SaslHandshake: NONE, UNSUPPORTED_SASL_MECHANISM (then the connection closes) or
        ILLEGAL_SASL_STATE (out of turn: the connection closes unless it is authenticated)."""
        if self.state not in (State.HANDSHAKE, State.REAUTH_HANDSHAKE):
            if self.state is not State.COMPLETE:
                self.state = State.FAILED
            return ErrorCode.ILLEGAL_SASL_STATE
        factory = self.context.sasl_mechanisms.get(mechanism)
        if factory is None:
            self.state = State.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        if self.state is State.REAUTH_HANDSHAKE and mechanism != self.mechanism:
            self.state = State.REAUTH_BAD_MECHANISM
            self.refusal = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                            f"re-authentication of mechanism '{self.mechanism}'")
            return ErrorCode.NONE
        self.server = factory(now_ms, reauthentication=self.reauthenticating)
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self.state = State.AUTHENTICATE
        return ErrorCode.NONE

    def authenticate(self, token: bytes, now_ms: int) -> bytes:
        """One token of the exchange; the server's answer.  Once the exchange completes,
        ``authenticated`` is true and ``session_lifetime_ms`` is what to tell the client.
        Raises kwire.security.sasl.SaslError (failed unless the session was already authenticated:
        the caller answers it, then closes)."""
        if self.state is not State.AUTHENTICATE:
            if self.state is not State.COMPLETE:
                self.state = State.FAILED
            raise sasl.SaslError("SaslAuthenticate request received in the wrong state",
                                 f"token in state {self.state.value}", ErrorCode.ILLEGAL_SASL_STATE)
        try:
            challenge, done = self.server.step(bytes(token))
            if done:
                self._complete(now_ms)
        except sasl.SaslError:
            self.state = State.FAILED
            raise
        return challenge

    def _complete(self, now_ms: int) -> None:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs, after the principal check."""
        principal = self.server.principal
        if self.principal is not None and principal != self.principal:
            message = ("Cannot change principals during re-authentication from "
                       f"{self.principal.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
            raise sasl.SaslError(message, message)
        if self.principal is not None:
            self.reauthentications += 1
        self.principal = principal
        limits = []
        if self.server.credential_expiry_ms is not None:
            limits.append(self.server.credential_expiry_ms - now_ms)
        max_reauth = self.context.max_reauth_ms.get(self.mechanism, 0)
        if max_reauth > 0:
            limits.append(max_reauth)
        self.session_lifetime_ms = max(0, min(limits)) if limits else 0
        self.expires_ms = now_ms + self.session_lifetime_ms if limits else None
        self.state = State.COMPLETE
        self.raw_tokens = False
        self.gated = self.expires_ms is not None

    def begin_reauthentication(self, now_ms: int) -> bool:
        """Called with a SaslHandshake on an authenticated connection: True when it begins a
        re-authentication (the handshake is then this session's, and only SASL frames are
        served until it completes); False when it is an ordinary request (no session
        expiry, or a re-authentication began less than a second ago)."""
        if self.state is not State.COMPLETE or self.expires_ms is None:
            return False
        if self._reauth_began_ms is not None and now_ms - self._reauth_began_ms < MIN_REAUTH_INTERVAL_MS:
            return False
        self._reauth_began_ms = now_ms
        self.state = State.REAUTH_HANDSHAKE
        self.server = None
        return True

    def expired(self, now_ms: int) -> bool:
        """Whether the session ended before ``now_ms`` (Kafka: the next request other than a
        re-authentication closes the connection)."""
        return self.expires_ms is not None and now_ms > self.expires_ms
