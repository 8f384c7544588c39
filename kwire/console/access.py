"""The console's only way to the cluster: Kafka clients (kafka-python), so it works against
kwire and against any Kafka cluster.

``KafkaAccess`` holds one ``KafkaAdminClient`` and one ``KafkaProducer``, made on first use
and made again after a failure; their calls block, so pages run them in Starlette's thread
pool (``await access.run(fn, *args)``), one admin call at a time (kafka-python's admin client
is not meant to be shared by threads).  The message browser reads with requests of its own
(``reader.py``), not a KafkaConsumer.

Errors: every failure a page shows goes through ``error_text(exc)``, which names Kafka's error
(``TOPIC_ALREADY_EXISTS: Topic 'x' already exists.``) and never a traceback.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, TypeVar

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")
logger = logging.getLogger("kwire.console")

# short enough that a page with a dead broker in the bootstrap list still answers
REQUEST_TIMEOUT_MS = 8000


class KafkaAccess:
    """Clients for ``client_config`` (kafka-python keywords: bootstrap_servers, security)."""

    def __init__(self, client_config: dict[str, Any]):
        self.client_config = dict(client_config)
        self._admin = None
        self._producer = None
        self._admin_lock = threading.Lock()
        self._producer_lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        servers = self.client_config["bootstrap_servers"]
        return ",".join(servers) if isinstance(servers, (list, tuple)) else str(servers)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread (it may block on the network)."""
        return await run_in_threadpool(fn, *args, **kwargs)

    async def admin_call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(admin, *args, **kwargs)`` with the shared admin client, in a worker thread; the
        client is dropped (and made again next time) when the call fails on the connection."""
        return await run_in_threadpool(self.with_admin, fn, *args, **kwargs)

    def with_admin(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """The blocking form of ``admin_call`` (for code that already runs in a thread)."""
        from kafka.errors import KafkaConnectionError, KafkaTimeoutError
        with self._admin_lock:
            if self._admin is None:
                from kafka.admin import KafkaAdminClient
                self._admin = KafkaAdminClient(**self._config("kwire-console-admin"))
            try:
                return fn(self._admin, *args, **kwargs)
            except (KafkaConnectionError, KafkaTimeoutError, OSError):
                self._close_admin()
                raise

    def producer(self):
        """The shared KafkaProducer (acks=all, idempotent as kafka-python's default is)."""
        with self._producer_lock:
            if self._producer is None:
                from kafka import KafkaProducer
                # max_block_ms: a send with the brokers gone fails within a page's time, not 60 s
                self._producer = KafkaProducer(acks="all", linger_ms=0, max_block_ms=REQUEST_TIMEOUT_MS,
                                               **self._config("kwire-console-producer"))
            return self._producer

    def _config(self, client_id: str) -> dict[str, Any]:
        return {"client_id": client_id, "request_timeout_ms": REQUEST_TIMEOUT_MS, **self.client_config}

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:       # noqa: BLE001 - a broken client may fail to close; it is dropped anyway
                logger.debug("closing the admin client failed", exc_info=True)

    def close(self) -> None:
        with self._admin_lock:
            self._close_admin()
        with self._producer_lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(timeout=5)


def error_text(exc: BaseException) -> str:
    """A readable one-line account of a failure: Kafka's error name and the broker's message
    for a broker refusal, the exception's own text otherwise; never a traceback."""
    from kafka.errors import KafkaError
    if isinstance(exc, KafkaError):
        name = type(exc).__name__
        if getattr(exc, "errno", None) is not None and hasattr(exc, "message"):
            name = exc.message        # the protocol's error name, e.g. TOPIC_ALREADY_EXISTS
        detail = str(exc.args[0]) if exc.args else ""
        if detail.startswith(f"[Error {getattr(exc, 'errno', '')}]"):
            detail = detail.split(":", 1)[-1].strip()
        return f"{name}: {detail}" if detail and detail != name else name
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:500]
