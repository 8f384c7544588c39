"""A broker opened in-process (no listener, no socket) for tests that call handlers directly."""
from __future__ import annotations

import contextlib
import tempfile
from typing import Awaitable, Callable, Mapping

import trio

from kwire.admin.broker_config import load_broker_config
from kwire.server.broker import Broker


@contextlib.asynccontextmanager
async def broker_in_process(properties: Mapping[str, str], *, topics: Mapping[str, int], clock=None,
                            now_ms: int = 0, advertised=None):
    """A Broker on a temporary data dir with ``properties`` (Kafka keys) and ``topics``
    ({name: partitions}) created; closed on exit.  ``advertised`` stands in for what
    serve() sets from its listener."""
    with tempfile.TemporaryDirectory(prefix="kwire-inprocess-") as data_dir:
        broker = Broker(load_broker_config(None, {"log.dirs": data_dir, **properties}), clock=clock)
        broker.open()
        if advertised is not None:
            broker.advertised = advertised
        for name, partitions in topics.items():
            broker.logs.create_topic(name, partitions, {}, now_ms=now_ms)
        try:
            yield broker
        finally:
            broker.close()


def run_with(test: Callable[[Broker], Awaitable[None]], opening, timeout_s: float = 60) -> None:
    """``trio.run`` of ``await test(broker)`` inside ``opening`` (an async context manager
    yielding the broker, e.g. ``broker_in_process(...)``), failing after ``timeout_s``."""
    async def main():
        with trio.fail_after(timeout_s):
            async with opening as broker:
                await test(broker)
    trio.run(main)
