"""A shared byte budget for request frames read but not yet handled (``queued.max.request.bytes``).

A connection acquires a frame's announced size (from its length prefix)
before it reads the frame's body, and releases it once the request no
longer needs its bytes.  While the budget is used up, connections stop
reading: TCP pushes back on the clients instead of the broker's memory
growing.  Kafka's broker does the same with a memory pool.

Rules:
- grants are first come, first served, so a large frame is not starved by a
  stream of small ones;
- a frame larger than the whole budget is granted when nothing else is held,
  so any frame up to ``socket.request.max.bytes`` eventually proceeds;
- a capacity of 0 or less means unlimited (Kafka's -1).
"""
from __future__ import annotations

import collections

import trio


class ByteBudget:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[list] = collections.deque()   # [size, event, granted]

    def _fits(self, size: int) -> bool:
        return self.capacity <= 0 or self.used == 0 or self.used + size <= self.capacity

    async def acquire(self, size: int) -> None:
        """Wait until ``size`` bytes can be granted, then take them.

        Cancel-safe: a cancelled wait takes nothing (a grant that raced with
        the cancellation is given back).
        """
        if not self._waiters and self._fits(size):
            self.used += size
            await trio.lowlevel.checkpoint()
            return
        waiter = [size, trio.Event(), False]
        self._waiters.append(waiter)
        try:
            await waiter[1].wait()
        except BaseException:
            if waiter[2]:
                self.release(size)
            else:
                self._waiters.remove(waiter)
                self._grant()
            raise

    def release(self, size: int) -> None:
        """Give back ``size`` bytes taken by ``acquire`` and wake the waiters that now fit."""
        self.used -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            waiter = self._waiters.popleft()
            self.used += waiter[0]
            waiter[2] = True
            waiter[1].set()

    def statistics(self) -> dict:
        return {"capacity": self.capacity, "used": self.used, "waiting": len(self._waiters)}
