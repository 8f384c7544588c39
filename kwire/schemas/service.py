"""The Schema Registry of one broker: its state from ``_schemas``, its writes, its HTTP listener.

Storage.  The registry's state (kwire.schemas.state) is the replay of ``_schemas``
partition 0 (Confluent's records, kwire.schemas.records), read from this broker's own copy
up to its high watermark, so it never shows a record that a leader change could still take
back.  The topic is created on first use, compacted, with
``schema.registry.topic.replication.factor`` replicas (fewer when fewer brokers are live).

Writes.  The primary is the broker leading ``_schemas-0`` (one node: itself), as Confluent's
registry has one primary that allocates ids.  It runs one write at a time: catch up, let the
command compute its records from the state, append them as one batch, wait until the ISR
has them (the high watermark passes them), then catch up again so the answer reflects them.
A broker that is not the primary forwards writes over HTTP to the primary's registry
(``schema.registry.listeners`` of the broker leading ``_schemas-0``, from its ZooKeeper
registration); one without a copy of ``_schemas`` forwards reads too.

For the produce path (kwire.schemas.validation), ``schema_by_id`` and ``subject_has_id``
answer from the state at once (catching up first, without awaiting).  A cluster broker with no
copy of ``_schemas-0`` has its state from a mirror instead (kwire.schemas.mirror: it fetches
the partition from its leader as a consumer).  A copy, or the mirror, can lag the primary by a
fetch: a record naming a schema registered a moment ago may not be in the state yet, so the
produce path awaits ``refresh`` before it refuses one.
"""
from __future__ import annotations

import functools
import http.client
import logging

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kwire.admin.config_def import split_http_url
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.internal_topics import SCHEMAS
from kwire.runtime.blocking import run_blocking, run_detached
from kwire.schemas import types
from kwire.schemas.mirror import SchemaMirror
from kwire.schemas.records import RecordFormatError, decode
from kwire.schemas.state import RegistryError, RegistryState

logger = logging.getLogger(__name__)

TOPIC = SCHEMAS.name
WRITE_WAIT_S = 10.0          # a write waits this long for the ISR (Confluent's kafkastore.timeout.ms is 500 ms)
FORWARD_TIMEOUT_S = 15.0
PRIMARY_WAIT_S = 5.0         # a write waits this long for _schemas-0 to have a leader
READ_BYTES = 1 << 20
HIGH_WATERMARK_POLL_S = 0.02  # refresh on a follower: a follower's high watermark moves without a wake-up


class SchemaRegistryService:
    """Built by the broker when ``schema.registry.listeners`` is set (``broker.schema_registry``)."""

    def __init__(self, broker):
        self.broker = broker
        self.state_now = RegistryState()
        self._next_offset = 0
        self._plog = None                      # the copy of _schemas-0 read so far
        self._write_lock = trio.Lock()
        self.url: str | None = None            # as bound: http://host:port
        self.skipped = 0                       # records this reader could not understand
        self.mirror = SchemaMirror(self)       # run by ``serve`` in cluster mode

    # -- the log --------------------------------------------------------------------------
    async def ensure_topic(self) -> None:
        """``_schemas`` created if missing.  Raises RegistryError 50001 while it cannot be."""
        if self.broker.logs.get(TOPIC) is not None:
            return
        try:
            await self.broker.topic_admin.internal_topic(SCHEMAS)
        except KafkaApiError as exc:
            raise RegistryError(500, 50001, f"Error in the backend data store: {TOPIC}: {exc}") from None

    def _local_copy(self):
        plog = self.broker.logs.partition(TOPIC, 0)
        return None if plog is None or getattr(plog, "absent", False) else plog

    def catch_up(self) -> RegistryState:
        """Replay what this broker's copy of ``_schemas-0`` holds below its high watermark and
        was not replayed yet (from scratch when the copy was replaced or cut below what was
        read).  Synchronous: reads the page cache."""
        plog = self._local_copy()
        if plog is None:
            return self.state_now
        if plog is not self._plog or plog.log_end_offset < self._next_offset:
            self.state_now, self._plog, self._next_offset = RegistryState(), plog, 0
        offset = max(self._next_offset, plog.log_start_offset)
        while offset < plog.high_watermark:
            data = plog.read(offset, READ_BYTES)
            if not data:
                break
            offset = self._replay(data, offset)
        self._next_offset = offset
        return self.state_now

    def _replay(self, data, offset: int) -> int:
        """Apply the records at or after ``offset`` in ``data`` (whole batches of
        ``_schemas-0``, the first one holding ``offset``), control batches skipped; the offset
        after the last batch.  Shared with the mirror (kwire.schemas.mirror)."""
        records = MemoryRecords(data)
        while records.has_next():
            batch = records.next_batch()
            if not batch.is_control_batch:
                for record in batch:
                    if record.offset >= offset:
                        self._apply(record.offset, record.key, record.value)
            offset = max(offset, batch.base_offset + batch.last_offset_delta + 1)
        return offset

    def _apply(self, offset: int, key, value) -> None:
        try:
            self.state_now.apply(decode(key, value))
        except RecordFormatError as exc:
            self.skipped += 1
            logger.warning("%s-0 offset %d: skipped: %s", TOPIC, offset, exc)

    # -- what the REST layer calls ----------------------------------------------------------
    def is_primary(self) -> bool:
        return self.broker.partitions.leadership(TOPIC, 0)[0] and self._local_copy() is not None

    async def forward_target(self, method: str) -> str | None:
        """The primary's URL when this broker must forward a request, else None (serve it
        here).  A write first creates ``_schemas`` if missing; while its partition has no
        leader with a registry, waits up to PRIMARY_WAIT_S.  Raises RegistryError 50001
        (cannot create the topic), 50003 (no primary to forward to)."""
        if self.broker.cluster is None:
            return None
        reading = method in ("GET", "HEAD")
        if reading and self._local_copy() is not None:
            return None
        if not reading:
            await self.ensure_topic()
        deadline = trio.current_time() + PRIMARY_WAIT_S
        while True:
            if not reading and self.is_primary():
                return None
            url = self.broker.cluster.schema_registry_url(TOPIC, 0)
            if url is not None and url != self.url:
                return url
            if trio.current_time() > deadline:
                raise RegistryError(500, 50003, f"Error while forwarding the request to the primary: "
                                                f"{TOPIC}-0 has no leader serving a schema registry")
            await trio.sleep(0.1)

    async def state(self) -> RegistryState:
        return self.catch_up()

    async def execute(self, command):
        """Run ``command(state) -> (records, result)`` as the primary; its result once the
        records are committed and replayed.  Raises RegistryError (the command's, or 50001
        when the records could not be written, 50002 when the ISR did not get them in time)."""
        await self.ensure_topic()
        async with self._write_lock:
            write, result = command(self.catch_up())
            if write:
                await self._append(write)
                self.catch_up()
            return result

    async def _append(self, write) -> None:
        plog = self._local_copy()
        partitions = self.broker.partitions
        now = self.broker.clock.now_ms()
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2 ** 31 - 1)
        for i, (key, value) in enumerate(write):
            builder.append(i, timestamp=now, key=key, value=value, headers=[])
        try:
            if plog is None:
                raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker holds no copy of {TOPIC}-0")
            leader = partitions.check_writer(TOPIC, 0, plog)
            result = plog.append(bytes(builder.build()), now_ms=now, built_here=True)
            if result.needs_flush:
                await run_blocking(plog.flush)
        except KafkaApiError as exc:
            raise RegistryError(500, 50001, f"Error in the backend data store: {exc}") from None
        required = partitions.coordinator_appended((TOPIC, 0), result)
        if required is not None:
            code = await partitions.wait_committed((TOPIC, 0), required, trio.current_time() + WRITE_WAIT_S, leader)
            if code:
                raise RegistryError(500, 50002, f"Timed out or failed writing to {TOPIC}: {code.name}")

    async def forward(self, request, url: str):
        """Send ``request`` to the registry at ``url``; its answer.  Raises RegistryError 50003."""
        from starlette.responses import Response
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        try:
            status, content_type, body = await run_detached(functools.partial(
                _send, url, request.method, target, headers, await request.body(), self._peer_tls(url)))
        except (OSError, http.client.HTTPException) as exc:
            raise RegistryError(500, 50003, f"Error while forwarding the request to the primary at {url}: "
                                            f"{exc}") from None
        return Response(body, status_code=status, media_type=content_type)

    # -- what the produce path calls (kwire.schemas.validation) ------------------------------
    def schema_by_id(self, schema_id: int) -> types.ParsedSchema | None:
        state = self.catch_up()
        try:
            return state.parsed(schema_id)
        except types.SchemaError:
            return None

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        return any(v.id == schema_id for v in self.catch_up().live_versions(subject))

    async def refresh(self, timeout_s: float = 2.0) -> None:
        """Wait (up to ``timeout_s``) until the state holds what the primary had committed at
        the call; for the produce path, before it refuses a record whose schema id or subject
        the state does not know.  The next ``schema_by_id``/``subject_has_id`` then answers
        from it (they catch up first).

        The primary (or a single node) replays up to what is committed: it returns at once.
        The mirror: once a fetch sent after the call has been applied.  A follower's copy:
        once its high watermark reaches the log end it had at the call (the follower learns
        the leader's high watermark with its next fetch, up to ``replica.fetch.wait.max.ms``
        later).  Never raises; cancel-safe."""
        if self.broker.cluster is None:
            return
        with trio.move_on_after(timeout_s):
            if self.mirror.active:
                await self.mirror.wait_fetched()
                return
            plog = self._local_copy()
            if plog is None or self.is_primary():
                return
            target = plog.log_end_offset
            while plog.high_watermark < target and self._local_copy() is plog:
                await trio.sleep(HIGH_WATERMARK_POLL_S)

    # -- serving ----------------------------------------------------------------------------
    def _tls_context(self):
        """The broker's ``ssl.*`` settings as a server context (kwire.security.tls).  Raises
        ConfigError naming a bad key."""
        from kwire.security import tls
        context = tls.server_context(dict(self.broker.config.originals), None, security_protocol="SSL")
        context.set_alpn_protocols(["http/1.1"])
        return context

    def _peer_tls(self, url: str):
        """The broker's client TLS settings (``ssl.truststore.*``, as its inter-broker
        connections use them) for forwarding to an https primary; None for http."""
        if not url.startswith("https:"):
            return None
        from kwire.security import tls
        return tls.client_context(dict(self.broker.config.originals))

    async def _check_password(self, user: str, password: str) -> bool:
        """HTTP Basic credentials against the broker's SASL users (kwire.security.passwords)."""
        from kwire.security.passwords import check_password, plain_users_of
        scram = getattr(self.broker.scram, "store", None)
        plain = plain_users_of(self.broker.config.originals)
        return await run_detached(check_password, user, password, scram, plain)

    async def serve(self, listener: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve the REST API at ``listener`` (http(s)://HOST:PORT; port 0 picks one), and in
        cluster mode run the mirror, until cancelled; ``task_status.started(url as bound)``."""
        from hypercorn.trio import serve
        from kwire.schemas.rest import BasicAuth, RegistryApi
        scheme, host, port = split_http_url(listener)
        config = _config(self._tls_context() if scheme == "https" else None)
        config.bind = [f"{host}:{port}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("kwire.schemas.http")
        config.keep_alive_timeout = 75
        middleware = []
        if self.broker.config.value_of("schema.registry.authentication.method").upper() == "BASIC":
            middleware.append(BasicAuth.middleware(self._check_password))
        app = RegistryApi(self).app(middleware)
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve, app, config))
            bound = binds[0].split("://", 1)[-1]
            self.url = f"{scheme}://{bound}"
            logger.info("schema registry listening on %s", self.url)
            if self.broker.cluster is not None:
                nursery.start_soon(self.mirror.run)
            task_status.started(self.url)


def _config(ssl_context):
    """hypercorn's Config serving ``ssl_context`` (the broker's TLS settings) when given."""
    from hypercorn.config import Config

    class RegistryConfig(Config):
        @property
        def ssl_enabled(self) -> bool:
            return ssl_context is not None

        def create_ssl_context(self):
            return ssl_context
    return RegistryConfig()


def _send(url: str, method: str, target: str, headers: dict, body: bytes, tls) -> tuple[int, str, bytes]:
    scheme, host, port = split_http_url(url)
    if scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=FORWARD_TIMEOUT_S, context=tls)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=FORWARD_TIMEOUT_S)
    try:
        conn.request(method, target, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", "application/json"), response.read()
    finally:
        conn.close()
