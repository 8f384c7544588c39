"""Example record validators for a topic's ``kwire.record.validator`` (kwire.schemas.validators).

This module is the default of the broker's ``kwire.record.validator.allowed.modules``, so its
functions can be named from a topic config as they are::

    kwire.record.validator=kwire.schemas.validator_examples:no_pii

A validator is called with a ``ProducedRecord`` (``topic, partition, offset_delta, timestamp,
key, value, headers``; key and value are bytes or None) and rejects the record by raising:
the exception's text is what the producer reads.  It runs in a worker thread, so it must
not touch broker state; it may keep its own (thread-safe) state.

* ``json_schema_validator(schema)``: a factory.  Your own schema goes in a module of your
  own that the operator allows (or registers as an entry point of group
  ``kwire.record_validators``)::

      # acme/validators.py, with kwire.record.validator.allowed.modules=acme.validators
      orders = json_schema_validator({"type": "object", "required": ["id"]})

  ``json_object`` (any JSON object) and ``example_order`` (``EXAMPLE_ORDER_SCHEMA``) are two
  built with it.  A null value (a tombstone) passes, as in Confluent's schema validation.
* ``no_pii``: rejects a key or value holding an e-mail address, a US social security number
  or a payment card number (13-19 digits passing the Luhn check).  The error says what was
  found and where, never the data itself.
"""
from __future__ import annotations

import json
import re
from typing import Callable, Mapping

import jsonschema

EXAMPLE_ORDER_SCHEMA = {
    "type": "object",
    "required": ["id", "amount", "currency"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "amount": {"type": "number", "minimum": 0},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
    },
}


def json_schema_validator(schema: Mapping) -> Callable[[object], None]:
    """A validator requiring each non-null value to be UTF-8 JSON matching ``schema``.
    Raises jsonschema.SchemaError now if ``schema`` is not a valid JSON schema."""
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    checker = cls(schema)

    def validate(record) -> None:
        if record.value is None:
            return
        try:
            document = json.loads(record.value)
        except ValueError as exc:               # bad UTF-8 is a ValueError too
            raise ValueError(f"value is not JSON: {exc}") from None
        if not checker.is_valid(document):
            error = jsonschema.exceptions.best_match(checker.iter_errors(document))
            raise ValueError(f"value does not match the JSON schema: {error.message} at {error.json_path}")
    return validate


json_object = json_schema_validator({"type": "object"})
example_order = json_schema_validator(EXAMPLE_ORDER_SCHEMA)


_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# SSA rules: no area 000, 666 or 9xx, no group 00, no serial 0000
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_CARD = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")


def luhn_ok(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check of payment card numbers."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if position % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def pii_found(text: str) -> str | None:
    """What kind of personal data ``text`` holds and where, or None."""
    match = _EMAIL.search(text)
    if match:
        return f"an e-mail address at character {match.start()}"
    match = _SSN.search(text)
    if match:
        return f"a US social security number at character {match.start()}"
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_ok(digits):
            return f"a payment card number at character {match.start()}"
    return None


def no_pii(record) -> None:
    """Rejects a record whose key or value holds personal data (see ``pii_found``); both are
    read as UTF-8, undecodable bytes skipped.  Raises ValueError naming the kind and place."""
    for field in ("key", "value"):
        data = getattr(record, field)
        if data:
            found = pii_found(data.decode("utf-8", "replace"))
            if found:
                raise ValueError(f"{field} contains {found}")
