"""The groups pages (being written)."""
from __future__ import annotations

NAV: list[tuple[str, str]] = []


def routes(console) -> list:
    return []
