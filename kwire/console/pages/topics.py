"""The topics pages (being written)."""
from __future__ import annotations

NAV = [("Topics", "/topics")]


def routes(console) -> list:
    return []
