"""What one coordinator call has done so far.

Each public call of ``GroupCoordinator`` makes its own ``Effects``, passes it
to the helpers it uses, and turns it into the returned ``Outcome`` at its one
exit.  Nothing survives the call: there is no accumulator on the coordinator
for one call to leak into the next.
"""
from __future__ import annotations

from typing import Any

from .results import Record


class Effects:
    __slots__ = ("now_ms", "records", "completed", "touched")

    def __init__(self, now_ms: int):
        self.now_ms = now_ms
        self.records: list[Record] = []
        self.completed: list[tuple[int, Any]] = []
        # Groups whose timers may have changed: their due events run, then they are rescheduled.
        self.touched: set[str] = set()

    def append(self, record: Record) -> None:
        self.records.append(record)

    def complete(self, ticket: int, result: Any) -> None:
        self.completed.append((ticket, result))

    def touch(self, group_id: str) -> None:
        self.touched.add(group_id)
