"""Compatibility levels, as Confluent's Schema Registry applies them to a subject's versions.

* BACKWARD: the new schema can read data written with the latest version (consumers upgrade first);
* FORWARD: the latest version can read data written with the new schema (producers upgrade first);
* FULL: both;
* ``*_TRANSITIVE``: the same against every live version, not only the latest;
* NONE: no check.

Each schema type answers only "can this reader read that writer's data" (``reader_errors``);
this module decides which pairs to ask about.  Schemas of different types never read each other.
"""
from __future__ import annotations

from ._base import COMPATIBILITY_LEVELS, ParsedSchema


def compatibility_errors(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Messages saying why ``new`` is not compatible under ``level`` with ``previous`` (the
    subject's live versions, oldest first); [] when compatible.

    Raises ValueError for an unknown level.
    """
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}; expected one of {', '.join(COMPATIBILITY_LEVELS)}")
    if level == "NONE" or not previous:
        return []
    transitive = level.endswith("_TRANSITIVE")
    base = level.removesuffix("_TRANSITIVE")
    # newest first, so the latest version's problems come first in the answer
    positions = range(len(previous) - 1, -1, -1) if transitive else [len(previous) - 1]
    errors: list[str] = []
    for position in positions:
        old = previous[position]
        label = "the latest version" if position == len(previous) - 1 else \
            f"version #{position + 1} of {len(previous)} (oldest first)"
        if old.schema_type != new.schema_type:
            errors.append(f"{level}: the new {new.schema_type} schema cannot replace {label}, "
                          f"a {old.schema_type} schema")
            continue
        if base in ("BACKWARD", "FULL"):
            errors.extend(f"{level}: the new schema cannot read data written with {label}: {e}"
                          for e in new.reader_errors(old))
        if base in ("FORWARD", "FULL"):
            errors.extend(f"{level}: {label} cannot read data written with the new schema: {e}"
                          for e in old.reader_errors(new))
    return errors
