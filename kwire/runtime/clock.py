"""Where the server layer reads the time: a clock object injected into the Broker.

Everything below ``kwire/`` takes ``now_ms`` as an argument; the server reads
it from ``broker.clock.now_ms()`` and sleeps on Trio's clock.  The default is
the wall clock (Kafka's timestamps are milliseconds since the epoch).
``TrioClock`` follows Trio's clock instead, so a test run under
``trio.testing.MockClock`` moves group timers (session timeouts, rebalance
delays) as fast as the mock clock jumps, with no real waiting.
"""
from __future__ import annotations

import time
from typing import Protocol

import trio

__all__ = ["Clock", "TrioClock", "WallClock", "now_ms"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds; only differences and order matter to timers, stored timestamps use it as is."""


def now_ms() -> int:
    """The wall clock in milliseconds since the epoch."""
    return int(time.time() * 1000)


class WallClock:
    """The system clock: the broker's default."""

    def now_ms(self) -> int:
        return now_ms()


class TrioClock:
    """Milliseconds that advance with ``trio.current_time()`` from ``start_ms``.

    Must be read inside ``trio.run``; with ``MockClock(autojump_threshold=0)`` a
    test sleeps through a 30 s session timeout in no real time.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.start_ms = start_ms

    def now_ms(self) -> int:
        return self.start_ms + int(trio.current_time() * 1000)
