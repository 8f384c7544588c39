"""One client connection: reads request frames, dispatches them, sends the responses in order.

One request in flight per connection: the next frame is read only after the
previous response was written, which keeps responses in request order and
lets TCP push back on a fast producer.  The one exception is a handler that
answers ``Deferred`` (an acks=all Produce in a cluster, waiting for the
ISR): the connection then reads and handles the requests behind it while the
wait goes on, up to ``MAX_PIPELINED`` unanswered ones, and an outbox sends
every response in request order.  Without it each acks=all append stalled its
connection for a follower round trip, where Kafka's request threads overlap it.  Errors are mapped here, in one place:
``CorruptFrame`` closes that connection only; ``KafkaApiError`` escaping a
handler becomes an error response when the API has a top-level error code,
otherwise the connection is closed; anything else is logged and answered
with UNKNOWN_SERVER_ERROR the same way; ``CloseConnection`` closes on purpose.

Limits (``ConnectionLimits``): a connection with no request in progress is
closed after ``connections.max.idle.ms``; a request whose first bytes arrived
must be complete within ``request.read.timeout.ms``; a frame's body is read
only after its announced size was taken from the ``queued.max.request.bytes``
budget shared by all connections, straight into one buffer of that size.

Binding the listeners and accepting clients is kwire.server.serving; the request context
and the limits are kwire.server.context; sending file records is kwire.server.sending.
"""
from __future__ import annotations

import collections
import functools
import logging
import os
import socket
from time import perf_counter

import trio

from kwire.admin.acl_operations import cluster_gate
from kwire.admin.acls import host_address
from kwire.admin.quotas import PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, principal_user
from kwire.codecs import messages
from kwire.codecs.errors import CloseConnection, CorruptFrame, ErrorCode, KafkaApiError
from kwire.codecs.framing import SIZE, FrameBuffer, frame_response, parse_request_header
from kwire.codecs.splice import encode_spliced, parts_size

from kwire import handlers  # noqa: F401  (registers the handlers)
from kwire.server.broker import Broker
from kwire.server.context import ConnectionLimits, RequestContext  # noqa: F401  (RequestContext: imported from here)
from kwire.server.sending import close_deferred, sendfile_all
from kwire.transport.lowat import RCVLOWAT_MAX, set_rcvlowat
from kwire.handlers.registry import HANDLERS, Deferred
from kwire.security.sasl import SaslError
from kwire.security.sasl_session import SaslSession
from kwire.security.listeners import ANONYMOUS, PLAINTEXT, ListenerContext

logger = logging.getLogger("kwire.server.connection")

API_VERSIONS = 18


def _flexible(api_key: int, api_version: int) -> bool | None:
    handler = HANDLERS.get(api_key)
    if handler is None or not handler.min_version <= api_version <= handler.max_version:
        return None
    return messages.request_is_flexible(api_key, api_version)


# Requests whose decoded form keeps the record bytes: their budget is held until they are handled
# (Kafka's "delayed allocation" APIs); every other request gives it back once decoded.
HOLDS_RECORDS = frozenset({0})
# What a connection may ask before its SASL authentication completed (Kafka's rule).
PRE_AUTHENTICATION_APIS = frozenset({18, 17, 36})   # ApiVersions, SaslHandshake, SaslAuthenticate
REAUTHENTICATION_APIS = frozenset({17, 36})          # Kafka serves nothing else during a re-authentication
SASL_HANDSHAKE_KEY = (17).to_bytes(2, "big")         # a frame's first bytes, its api_key
RECEIVE_HEAD_BYTES = 65536
RECEIVE_TLS_BYTES = 4 << 20       # plaintext asked of a TLS stream per read, at most
# Responses a connection may owe (deferred or queued behind one) before it stops reading
# requests: beyond it, TCP pushes back on the client as with one request in flight.
MAX_PIPELINED = 8

# Client quotas: requests never charged to a client's request_percentage (Kafka's cluster-action
# APIs, WriteTxnMarkers from a transaction coordinator included, and authentication), and the
# first version of each API whose clients throttle themselves on throttle_time_ms (KIP-219);
# below it the broker delays the response instead.
QUOTA_EXEMPT_APIS = frozenset({4, 5, 6, 7, 17, 18, 27, 36, 56, 57, 58, 62, 63, 67})
CLIENT_THROTTLES_SINCE = {0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2,
                          16: 2, 19: 3, 20: 2, 21: 1, 22: 1, 23: 1, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1,
                          30: 1, 31: 1, 32: 1, 33: 1, 35: 1, 37: 1}


class _Owed:
    """A response in the outbox: ``parts`` (None = nothing to send) once ``done`` is set."""
    __slots__ = ("parts", "done")

    def __init__(self, parts=None, done: trio.Event | None = None):
        self.parts = parts
        self.done = done


class Connection:
    """One client connection: read a frame, handle it, write the response, repeat.

    Reading obeys ``ConnectionLimits``: an idle connection is closed after
    ``idle_s``, a request that started to arrive must be complete within
    ``read_s``, and a frame's body is read (straight into its own buffer)
    only once its size has been taken from the shared byte budget.
    """

    def __init__(self, broker: Broker, stream, limits: ConnectionLimits | None = None,
                 listener: ListenerContext = PLAINTEXT, principal: str = ANONYMOUS):
        self.broker = broker
        self.stream = stream
        self.limits = limits or ConnectionLimits.from_config(broker.config)
        self.listener = listener
        self.principal = principal
        self.frames = FrameBuffer(self.limits.max_frame_bytes)
        # the socket, for sendfile and socket options: None for TLS and in-memory test streams
        self.sock = getattr(stream, "socket", None)
        self.reserved: int | None = None              # budget bytes held by the current request
        self.lowat = 1                                # the socket's SO_RCVLOWAT (kwire.transport.lowat)
        self.peer = peer_name(stream)
        self.host = host_address(self.peer.rpartition(":")[0].strip("[]") or "127.0.0.1")
        self.sasl = None
        self.client_software: tuple[str, str] | None = None    # from ApiVersions v3+ (KIP-511)
        self.mute_ms = 0                              # client quotas: how long to stop reading
        if listener.sasl_mechanisms is not None:     # nothing but SASL until authenticated
            self.sasl = SaslSession(listener)
            self.frames.max_size = min(self.frames.max_size, listener.sasl_max_bytes)

    async def _receive(self) -> int:
        """Read once, into the frame body when its size is known; returns the byte count (0 = EOF)."""
        frames = self.frames
        if self.sock is None and frames.announced() is not None and hasattr(self.stream, "receive_into"):
            n = await self.stream.receive_into(frames.body_view())     # TLS: decrypted in place
            frames.filled(n)
            return n
        if frames.announced() is None or self.sock is None:
            if self.sock is not None:
                data = await self.sock.recv(RECEIVE_HEAD_BYTES)
            else:      # TLS (kwire.security.tls_stream.TlsStream) or a test stream: the rest of the frame
                size = frames.announced()
                wanted = RECEIVE_HEAD_BYTES if size is None else size + 4 - frames.pending()
                data = await self.stream.receive_some(min(max(wanted, RECEIVE_HEAD_BYTES), RECEIVE_TLS_BYTES))
            frames.feed(data)
            return len(data)
        view = frames.body_view()
        wanted = min(len(view), RCVLOWAT_MAX)    # kwire.transport.lowat: fewer wake-ups per large frame
        if wanted != self.lowat:
            self.lowat = set_rcvlowat(self.sock, wanted)
        n = await self.sock.recv_into(view)
        frames.filled(n)
        if n == len(view) and self.lowat != 1:   # the frame is in: back to waking per byte
            self.lowat = set_rcvlowat(self.sock, 1)
        return n

    async def read_frame(self) -> bytearray | None:
        """The next request frame; None when the client closed between requests.

        The frame's size is held in the byte budget (``self.reserved``) until
        ``release_budget``.  Raises CloseConnection (idle for longer than
        connections.max.idle.ms, or a request not complete within
        request.read.timeout.ms) and FrameTooLarge.
        """
        if not self.frames.pending():
            with trio.move_on_after(self.limits.idle_s):
                if not await self._receive():
                    return None
            if not self.frames.pending():
                raise CloseConnection(f"idle for more than {self.limits.idle_s * 1000:.0f} ms "
                                      "(connections.max.idle.ms)", quiet=True)
        frame = None
        try:
            frame = await self._read_rest(trio.current_time() + self.limits.read_s)
            return frame
        finally:
            if frame is None:
                self.release_budget()

    async def _read_rest(self, deadline: float) -> bytearray | None:
        frames = self.frames
        while True:
            size = frames.announced()
            if size is not None and self.reserved is None:
                waited = trio.current_time()
                await self.limits.budget.acquire(size)
                self.reserved = size
                deadline += trio.current_time() - waited    # the broker's wait is not the client's fault
            frame = frames.next_frame()
            if frame is not None:
                return frame
            with trio.move_on_at(deadline) as scope:
                received = await self._receive()
            if scope.cancelled_caught:
                raise CloseConnection(f"request incomplete after {self.limits.read_s * 1000:.0f} ms "
                                      f"(request.read.timeout.ms): {frames.pending()} bytes of "
                                      f"{'?' if size is None else size + 4} received")
            if not received:
                logger.info("%s: connection closed mid-frame (%d bytes pending)", self.peer,
                            frames.pending())
                return None

    def release_budget(self) -> None:
        """Give the current request's bytes back to the shared budget (idempotent)."""
        if self.reserved is not None:
            self.limits.budget.release(self.reserved)
            self.reserved = None

    async def wait_peer_closed(self) -> None:
        """Return once the client has closed or reset its end; only peeks at the socket
        (under TLS, the stream's socket: kwire.security.tls_stream.TlsStream.wait_peer_closed).

        A request pipelined behind the current one stays in the socket for
        ``read_frame``; when one is there the client is alive and this waits
        for ever.  Cancel-safe.
        """
        if self.sock is None:
            watch = getattr(self.stream, "wait_peer_closed", None)     # TLS (kwire.security.tls_stream)
            await (watch() if watch is not None else trio.sleep_forever())
            return
        try:
            data = await self.sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return
        if data:
            await trio.sleep_forever()

    async def serve(self) -> None:
        """Serve requests until the client closes; raises what ends the connection
        (CloseConnection, CorruptFrame, socket errors), unwrapped."""
        self._outbox: collections.deque[_Owed] = collections.deque()
        self._sending = False
        self._room = trio.Event()
        self._failure: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    await self._serve_requests()
                    while self._outbox:       # the client is done sending: answer what is owed
                        self._room = trio.Event()
                        await self._room.wait()
                except Exception as exc:
                    self._fail(exc)
        finally:
            for owed in self._outbox:         # never sent: give their files back
                if owed.parts is not None:
                    close_deferred(owed.parts)
        if self._failure is not None:
            raise self._failure

    async def _serve_requests(self) -> None:
        while True:
            while len(self._outbox) >= MAX_PIPELINED:   # read on once a response went out
                self._room = trio.Event()
                await self._room.wait()
            frame = await self.read_frame()
            if frame is None:
                return
            if self.sasl is not None and self.sasl.gated and await self.serve_sasl(frame):
                continue
            size = len(frame)
            decoded = self.decode_frame(frame)
            del frame      # the decoded request no longer needs the frame's buffer
            try:
                if isinstance(decoded, list):
                    parts = decoded
                else:
                    if decoded[0].api_key not in HOLDS_RECORDS:
                        self.release_budget()
                    parts = await self.handle_request(*decoded, size=size)
            finally:
                self.release_budget()
            mute_s = 0.0
            if self.mute_ms:       # a quota was exceeded (kwire.services.quotas)
                mute_s, self.mute_ms = self.mute_ms / 1000, 0
                header = decoded[0]
                if header.api_version < CLIENT_THROTTLES_SINCE.get(header.api_key, 0):
                    await trio.sleep(mute_s)      # an older client: its response is delayed instead
                    mute_s = 0.0
            if type(parts) is Deferred:
                owed = _Owed(done=trio.Event())
                self._nursery.start_soon(self._complete, owed, parts)
                self._owe(owed)
            elif self._outbox or self._sending:
                self._owe(_Owed(parts))
            elif parts is not None:
                await self.send_parts(parts)
            if mute_s:             # KIP-219: answered at once, then the channel is muted
                await trio.sleep(mute_s)

    async def serve_sasl(self, frame: bytearray) -> bool:
        """A frame on a connection whose SASL session needs a look first (kwire.security.sasl_session):
        True when it was served here (authentication, or a SaslHandshake beginning a
        re-authentication), False when it goes on to the ordinary dispatch.  Raises
        CloseConnection for any other request once the session has expired (KIP-368)."""
        session = self.sasl
        if not session.authenticated:
            await self.serve_unauthenticated(frame)
            return True
        now_ms = self.broker.clock.now_ms()
        if frame[:2] == SASL_HANDSHAKE_KEY and session.begin_reauthentication(now_ms):
            await self.drain_outbox()       # Kafka answers a re-authentication after everything before it
            self.frames.max_size = min(self.frames.max_size, self.listener.sasl_max_bytes)
            await self.serve_unauthenticated(frame)
            return True
        if session.expired(now_ms):
            self.release_budget()
            raise CloseConnection(f"the SASL session of {session.principal} ({session.mechanism}) ended "
                                  f"{now_ms - session.expires_ms} ms ago without re-authentication "
                                  f"(session lifetime {session.session_lifetime_ms} ms: "
                                  f"connections.max.reauth.ms or the credential's expiry)")
        return False

    async def serve_unauthenticated(self, frame: bytearray) -> None:
        """A frame before SASL authentication (or re-authentication) completed: a bare token after
        SaslHandshake v0, else ApiVersions or a SASL request (only SASL ones when
        re-authenticating); anything else closes the connection.  A failed exchange is answered
        after the listener's delay, then the connection closes."""
        session = self.sasl
        try:
            if session.refusal is not None:
                raise CloseConnection(session.refusal)
            if session.raw_tokens:
                try:
                    challenge = session.authenticate(frame, self.broker.clock.now_ms())
                    parts = [SIZE.pack(len(challenge)) + challenge]
                except SaslError as exc:
                    logger.info("%s: SASL authentication failed: %s", self.peer, exc.detail)
                    parts = None
            else:
                decoded = self.decode_frame(frame)
                allowed = REAUTHENTICATION_APIS if session.reauthenticating else PRE_AUTHENTICATION_APIS
                if not isinstance(decoded, list) and decoded[0].api_key not in allowed:
                    raise CloseConnection(f"{messages.api_name(decoded[0].api_key)} request before SASL "
                                          f"{'re-' if session.reauthenticating else ''}authentication "
                                          f"completed on listener {self.listener.name}")
                parts = decoded if isinstance(decoded, list) else await self.handle_request(*decoded)
        finally:
            self.release_budget()
        if session.failed:       # the answer waits too: a client retrying at once is slowed down
            await trio.sleep(self.listener.failed_auth_delay_s)
        if parts:
            await self.send_parts(parts)
        if session.failed:
            raise CloseConnection("SASL authentication failed")
        if session.authenticated:
            self.principal = session.principal
            self.frames.max_size = self.limits.max_frame_bytes
            logger.debug("%s: %s as %s with %s; session lifetime %d ms", self.peer,
                         "re-authenticated" if session.reauthentications else "authenticated",
                         session.principal, session.mechanism, session.session_lifetime_ms)

    async def drain_outbox(self) -> None:
        """Wait until every response owed has been sent."""
        while self._outbox or self._sending:
            self._room = trio.Event()
            await self._room.wait()

    def _fail(self, exc: Exception) -> None:
        if self._failure is None:
            self._failure = exc
        self._nursery.cancel_scope.cancel()

    def _owe(self, owed: _Owed) -> None:
        """Queue a response behind those still owed."""
        self._outbox.append(owed)
        if not self._sending:
            self._sending = True
            self._nursery.start_soon(self._send_owed)

    async def _complete(self, owed: _Owed, deferred: Deferred) -> None:
        try:
            owed.parts = await deferred.complete()
        except Exception as exc:
            self._fail(exc)
        finally:
            owed.done.set()

    async def _send_owed(self) -> None:
        """Send the outbox in order, each response once it is complete."""
        try:
            while self._outbox:
                owed = self._outbox[0]
                if owed.done is not None:
                    await owed.done.wait()
                self._outbox.popleft()
                self._room.set()
                if owed.parts is not None:
                    await self.send_parts(owed.parts)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._sending = False
            self._room.set()

    async def send_parts(self, parts: list) -> None:
        """Send bytes parts as they are and file records with sendfile (pread + send on a stream
        without a socket); releases the files."""
        try:
            for part in parts:
                if isinstance(part, (bytes, bytearray)):
                    await self.stream.send_all(part)
                    continue
                for piece in part.slices:
                    if self.sock is None:
                        await self.stream.send_all(os.pread(piece.fd, piece.size, piece.position))
                    else:
                        await sendfile_all(self.stream, piece.fd, piece.position, piece.size)
        finally:
            close_deferred(parts)

    def decode_frame(self, frame):
        """``(header, handler, request)``, or the response parts when the frame is answered at once.

        Raises CorruptFrame for an unknown API, an unsupported version or undecodable bytes.
        """
        header = parse_request_header(frame, flexible_for=_flexible)
        handler = HANDLERS.get(header.api_key)
        if handler is None or not handler.serves(self.broker.config, getattr(self.broker, "features", None)):
            raise CorruptFrame(f"unknown api_key {header.api_key}")
        in_range = handler.min_version <= header.api_version <= handler.max_version
        if header.api_key == API_VERSIONS and not in_range:
            from kwire.handlers.api_versions import unsupported_version_response
            return [frame_response(header.correlation_id, unsupported_version_response(self.broker.config),
                                   header_v1=False)]
        if not in_range:
            raise CorruptFrame(f"unsupported version {header.api_version} of "
                               f"{messages.api_name(header.api_key)}")
        request = messages.decode_request(header.api_key, header.api_version, frame, header.body_offset)
        return header, handler, request

    async def handle_request(self, header, handler, request, size: int = 0) -> list | Deferred | None:
        """The response parts (None: no response), or a Deferred whose ``complete()``
        returns them.  ``size``: the request's frame size (what a produce quota counts)."""
        metrics, request_log = self.broker.metrics, self.broker.request_log
        started = perf_counter() if metrics is not None or request_log is not None else 0.0
        quota_started = perf_counter() if self.broker.quotas.active else 0.0
        if header.api_key == 18 and getattr(request, "client_software_name", None):     # ApiVersions v3+
            self.client_software = (request.client_software_name, request.client_software_version or "")
        ctx = RequestContext(self.broker, header.api_key, header.api_version, header.correlation_id,
                             header.client_id, self.peer, self.wait_peer_closed, self.listener.name,
                             self.principal, self.sasl, self.host, client_software=self.client_software)

        async def call():
            if header.api_version < handler.reject_below:
                raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION,
                                    f"version {header.api_version} is no longer supported")
            if self.broker.acls.enabled:
                self.check_cluster_acls(header)
            return await handler.func(ctx, request)
        fields = await self.answer(header, request, call)
        throttle = self.quota_throttle(ctx, request, fields, quota_started, size) if quota_started else 0
        if type(fields) is Deferred:
            return Deferred(functools.partial(self.complete_deferred, header, request, fields, started, throttle))
        parts = None if fields is None else self.encode_response(header, request, fields)
        if metrics is not None:
            metrics.request_done(header.api_key, header.api_version, started, request)
        if request_log is not None:
            request_log.done(self, header, started)
        return parts

    def check_cluster_acls(self, header) -> None:
        """The API's cluster-level ACL checks (kwire.admin.acl_operations.cluster_gate); an API
        with no ACL mapping is denied.  Raises KafkaApiError."""
        try:
            code = cluster_gate(self.broker.acls.authorizer, header.api_key, header.api_version,
                                self.principal, self.host)
        except KeyError:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if code is not None:
            logger.info("%s: %s denied %s (%s)", self.peer, self.principal, messages.api_name(header.api_key),
                        ErrorCode(code).name)
            raise KafkaApiError(ErrorCode(code), "Cluster authorization failed.")

    def quota_throttle(self, ctx, request, fields, started: float, size: int) -> int:
        """Client quotas after a request was handled (Kafka's KafkaApis and ClientQuotaManager):
        charge its produce bytes and its handling time, take the longest throttle of those and
        of the handler's own (a fetch's bytes, a controller mutation), put it in the response's
        throttle_time_ms and mute the connection for it.  Returns the throttle in ms."""
        enforcer = self.broker.quotas.enforcer
        user, client_id = principal_user(self.principal), ctx.client_id or ""
        now_ms = self.broker.clock.now_ms()
        api_key = ctx.api_key
        throttle, cause = ctx.throttle_ms, None
        if api_key == 0:
            produce_ms = enforcer.record(PRODUCER_BYTE_RATE, user, client_id, size, now_ms)
            if produce_ms > throttle:
                throttle, cause = produce_ms, PRODUCER_BYTE_RATE
        if api_key not in QUOTA_EXEMPT_APIS and not (api_key == 1 and _follower_fetch(request, ctx.api_version)):
            busy_s = max(0.0, perf_counter() - started - ctx.waited_s)
            request_ms = enforcer.record(REQUEST_PERCENTAGE, user, client_id, busy_s * 100.0, now_ms)
            if request_ms > throttle:
                throttle, cause = request_ms, REQUEST_PERCENTAGE
        if throttle <= 0:
            return 0
        if cause is not None:            # the handler counted its own
            enforcer.throttled(cause, user, client_id, throttle)
        if type(fields) is dict and "throttle_time_ms" in fields:
            fields["throttle_time_ms"] = max(fields["throttle_time_ms"] or 0, throttle)
        self.mute_ms = max(self.mute_ms, throttle)
        return throttle

    async def complete_deferred(self, header, request, deferred: Deferred, started: float = 0.0,
                                throttle: int = 0) -> list | None:
        fields = await self.answer(header, request, deferred.complete)
        if throttle and type(fields) is dict and "throttle_time_ms" in fields:
            fields["throttle_time_ms"] = max(fields["throttle_time_ms"] or 0, throttle)
        parts = None if fields is None else self.encode_response(header, request, fields)
        if self.broker.metrics is not None:
            self.broker.metrics.request_done(header.api_key, header.api_version, started, request)
        if self.broker.request_log is not None:
            self.broker.request_log.done(self, header, started)
        return parts

    async def answer(self, header, request, call):
        """``await call()``, with a KafkaApiError or a failure mapped to the error response's
        fields; CorruptFrame, CloseConnection and Cancelled propagate."""
        try:
            return await call()
        except KafkaApiError as exc:
            return self.error_fields(header.api_key, header.api_version, request, exc.code, exc.message)
        except (CorruptFrame, CloseConnection, trio.Cancelled):
            raise
        except Exception:
            logger.exception("%s: %s v%d failed", self.peer, messages.api_name(header.api_key),
                             header.api_version)
            return self.error_fields(header.api_key, header.api_version, request,
                                     ErrorCode.UNKNOWN_SERVER_ERROR, None)

    def encode_response(self, header, request, fields: dict) -> list:
        try:
            parts = encode_spliced(header.api_key, header.api_version, fields)
        except Exception:
            logger.exception("%s: cannot encode the %s v%d response", self.peer,
                             messages.api_name(header.api_key), header.api_version)
            close_deferred(fields)
            fields = self.error_fields(header.api_key, header.api_version, request,
                                       ErrorCode.UNKNOWN_SERVER_ERROR, None)
            parts = [messages.encode_response(header.api_key, header.api_version, fields)]
        v1 = messages.response_header_v1(header.api_key, header.api_version)
        if len(parts) == 1:
            return [frame_response(header.correlation_id, parts[0], header_v1=v1)]
        head = frame_response(header.correlation_id, b"", header_v1=v1)
        size = len(head) - 4 + parts_size(parts)
        return [SIZE.pack(size) + head[4:] + parts[0], *parts[1:]]

    @staticmethod
    def error_fields(api_key, api_version, request, code, message):
        from kwire.handlers.errors import error_response
        fields = error_response(api_key, request, code, message)
        if fields is None:
            raise CorruptFrame(f"{messages.api_name(api_key)} failed with {code.name}: {message}")
        return fields


def _follower_fetch(request, version: int) -> bool:
    """Whether a Fetch is a follower's (exempt from client quotas, as in Kafka)."""
    state = request.replica_id if version < 15 else getattr(request.replica_state, "replica_id", -1)
    return state is not None and state >= 0


def peer_name(stream) -> str:
    """``host:port`` of the client of a socket stream or of a TLS stream (kwire.security.tls_stream)."""
    try:
        host, port = getattr(stream, "socket", stream).getpeername()[:2]
    except (OSError, AttributeError):
        return "?"
    return f"{host}:{port}"
