"""One deadline per key, earliest first: the timer queue of the coordinators.

Kafka keeps purgatories and timer wheels; a coordinator here keeps, per key (a
group id, a transactional id), the time its next event is due, in a heap of
(deadline, key) invalidated lazily: setting a key again pushes a new entry and
leaves the old one to be skipped when it reaches the top.  The heap is rebuilt
once it holds more than twice the live entries (plus 64), so it stays bounded.
"""
from __future__ import annotations

import heapq
from typing import Iterator


class Deadlines:
    __slots__ = ("_heap", "_at")

    def __init__(self) -> None:
        self._heap: list[tuple[int, str]] = []
        self._at: dict[str, int] = {}

    def set(self, key: str, at: int | None) -> None:
        """``key`` is next due at ``at``; None: it has no deadline."""
        if at is None:
            self._at.pop(key, None)
        elif self._at.get(key) != at:
            self._at[key] = at
            heapq.heappush(self._heap, (at, key))

    def discard(self, key: str) -> None:
        self._at.pop(key, None)

    def compact(self) -> None:
        """Drop the stale entries once they outnumber the live ones."""
        if len(self._heap) > 2 * len(self._at) + 64:
            self._heap = [(at, key) for key, at in self._at.items()]
            heapq.heapify(self._heap)

    def pop_due(self, now_ms: int) -> Iterator[str]:
        """The keys due at ``now_ms``, earliest first; each is forgotten as it is yielded."""
        while self._heap and self._heap[0][0] <= now_ms:
            at, key = heapq.heappop(self._heap)
            if self._at.get(key) == at:
                del self._at[key]
                yield key

    def earliest(self) -> int | None:
        """The earliest live deadline, or None."""
        while self._heap and self._at.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None
