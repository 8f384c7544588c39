"""An embedded kwire broker for test suites: a real broker in milliseconds.

    import kwire.testing

    with kwire.testing.broker(partitions=3, auto_create_topics_enable=False) as b:
        b.create_topic("orders", partitions=6, configs={"retention.ms": "60000"})
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)

The broker is the same code ``kwire serve`` runs, listening on an ephemeral
127.0.0.1 port with a temporary data directory that is removed on exit.  It
runs in this process on a daemon thread with its own ``trio.run``, so it starts
in tens of milliseconds and works from synchronous tests, asyncio tests (the
event loop of the test is not touched) and trio tests alike.  Clients talk to
it over real sockets, exactly as they would to a Kafka cluster of one.

Server properties are Kafka's keys.  Keyword arguments spell them with
underscores (``auto_create_topics_enable=False`` means
``auto.create.topics.enable=false``); keys that cannot be spelled that way go
in ``properties={"some.key": "value"}``.  ``partitions`` sets
``num.partitions``.  Defaults differ from a production broker only where tests
want them to: ``group.initial.rebalance.delay.ms=0`` (Kafka waits 3 s before
the first rebalance of an empty group).

The pytest plugin (``kwire.testing.pytest_plugin``) wraps this in fixtures.

For a broker in a child process of its own (kill -9, restart over the same
data, start-up), use ``broker_process(...)`` / ``BrokerProcess`` from
``kwire.testing.process``, re-exported here.
"""
from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import time
import uuid
from typing import Any, Iterator, Mapping

import trio

from kwire.admin.broker_config import load_broker_config

from kwire.server.broker import Broker
from kwire.server.serving import serve
from kwire.testing.process import BrokerProcess, BrokerStartError, broker_process

__all__ = ["BrokerProcess", "BrokerStartError", "EmbeddedBroker", "broker", "broker_process",
           "property_name"]

logger = logging.getLogger("kwire.testing")

TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def property_name(keyword: str) -> str:
    """``auto_create_topics_enable`` -> ``auto.create.topics.enable``."""
    return keyword.replace("_", ".")


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class EmbeddedBroker:
    """A kwire broker on a background thread.  Use ``broker()`` or ``start()``/``stop()``.

    Attributes once started: ``host``, ``port``, ``bootstrap`` ("127.0.0.1:PORT"),
    ``data_dir`` (removed by ``stop()`` unless it was passed in), ``startup_s``.
    """

    def __init__(self, properties: Mapping[str, Any] | None = None, *, data_dir: str | None = None,
                 startup_timeout: float = 10.0):
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kwire-testing-")
        self.properties = dict(TEST_DEFAULTS)
        self.properties.update({k: _format(v) for k, v in (properties or {}).items()})
        self.properties["listeners"] = "PLAINTEXT://127.0.0.1:0"
        self.properties.setdefault("log.dirs", self.data_dir)
        self.startup_timeout = startup_timeout
        self.host: str | None = None
        self.port: int | None = None
        self.startup_s: float | None = None
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap_servers`` / ``bootstrap.servers``."""
        if self.port is None:
            raise RuntimeError("the broker is not running")
        return f"{self.host}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> "EmbeddedBroker":
        """Start serving; returns once the port accepts connections.

        Raises the broker's own exception (e.g. ``ConfigError`` for a bad
        property) or ``TimeoutError`` after ``startup_timeout`` seconds.
        """
        if self._thread is not None:
            raise RuntimeError("already started")
        t0 = time.perf_counter()
        try:
            config = load_broker_config(None, self.properties)
        except Exception:
            self._remove_dir()
            raise
        self._thread = threading.Thread(target=self._run, args=(Broker(config),),
                                        name=f"kwire-testing-{uuid.uuid4().hex[:6]}", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.startup_timeout):
            self.stop()
            raise TimeoutError(f"kwire did not start within {self.startup_timeout}s")
        if self._error is not None:
            self._thread.join(5)
            self._thread = None
            self._remove_dir()
            raise self._error
        self.startup_s = time.perf_counter() - t0
        return self

    def _run(self, broker: Broker) -> None:
        try:
            trio.run(self._main, broker)
        except BaseException as exc:  # reported to start() or logged at stop()
            if not self._ready.is_set():
                self._error = exc
            else:
                logger.exception("the embedded kwire broker failed")
        finally:
            self._ready.set()

    async def _main(self, broker: Broker) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self.broker = broker          # for white-box checks; touch it only through run_sync
        with trio.CancelScope() as scope:
            self._cancel = scope
            async with trio.open_nursery() as nursery:
                self.host, self.port = await nursery.start(serve, broker, "127.0.0.1", 0)
                self._ready.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the broker (closing its logs cleanly), join its thread, remove the data dir.

        Idempotent.  Raises ``TimeoutError`` if the thread does not finish in time.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            if self._token is not None and self._cancel is not None:
                with contextlib.suppress(trio.RunFinishedError):
                    self._token.run_sync_soon(self._cancel.cancel)
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"the embedded broker did not stop within {timeout}s")
        self.port = None
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers ------------------------------------------------------------------
    def create_topic(self, name: str | None = None, partitions: int | None = None,
                     configs: Mapping[str, Any] | None = None, timeout: float = 10.0) -> str:
        """Create a topic through the Kafka admin API (kafka-python); returns its name.

        ``name=None`` makes a unique one; ``partitions=None`` takes the broker's
        ``num.partitions``.  Raises kafka-python's errors, e.g.
        ``TopicAlreadyExistsError`` or ``InvalidConfigurationError``.
        """
        from kafka.admin import KafkaAdminClient, NewTopic

        name = name or f"topic-{uuid.uuid4().hex[:10]}"
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="kwire-testing",
                                 request_timeout_ms=int(timeout * 1000))
        try:
            admin.create_topics([NewTopic(name, -1 if partitions is None else partitions, -1,
                                          topic_configs={k: _format(v) for k, v in (configs or {}).items()})])
        finally:
            admin.close()
        return name

    def delete_topic(self, name: str, timeout: float = 10.0) -> None:
        """Delete a topic through the admin API; raises ``UnknownTopicOrPartitionError`` if absent."""
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="kwire-testing",
                                 request_timeout_ms=int(timeout * 1000))
        try:
            admin.delete_topics([name])
        finally:
            admin.close()


@contextlib.contextmanager
def broker(partitions: int | None = None, *, properties: Mapping[str, Any] | None = None,
           data_dir: str | None = None, **server_properties: Any) -> Iterator[EmbeddedBroker]:
    """A running embedded broker for the ``with`` block; stopped and cleaned up on exit.

    ``partitions`` -> ``num.partitions``; ``foo_bar=x`` -> ``foo.bar=x``;
    ``properties`` takes Kafka keys verbatim and wins over keywords.
    """
    props: dict[str, Any] = {}
    if partitions is not None:
        props["num.partitions"] = partitions
    props.update({property_name(k): v for k, v in server_properties.items()})
    props.update(properties or {})
    b = EmbeddedBroker(props, data_dir=data_dir).start()
    try:
        yield b
    finally:
        b.stop()
