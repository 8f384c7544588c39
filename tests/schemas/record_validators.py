"""Record validators for tests/schemas: their broker lists this module in
``kwire.record.validator.allowed.modules``."""
from __future__ import annotations

import time

SLOW_S = 3.0


def slow(record) -> None:
    """Sleeps past any short time box."""
    time.sleep(SLOW_S)


def exits(record) -> None:
    """A validator that tries to end the process: only its record is rejected."""
    raise SystemExit(f"no thanks, record {record.offset_delta}")
