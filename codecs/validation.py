"""Record-level checks of a Produce batch, as Kafka's LogValidator makes them.

Each record of a v2 batch (after decompression) is::

    length          varint   bytes after this field
    attributes      int8     unused
    timestampDelta  varlong  timestamp - baseTimestamp
    offsetDelta     varint   must be the record's index 0..n-1
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value
    value           bytes
    headerCount     varint
    (headerKeyLength varint >= 0, headerKey, headerValueLength varint, headerValue)*

``walk_records`` checks, in a single pass over the bytes without creating a
Python object per record, that exactly ``record_count`` records fill the
bytes, that every length lies inside its record and every record ends where
its length says.  Any failure there is INVALID_RECORD, as Kafka's
DefaultRecord parser answers ("Incorrect declared batch size", "Invalid
record size").  Rule violations of single records are collected as
``RecordError``s, as Kafka's ``validateRecord`` does, and answered with
``record_errors`` (Produce v8+):

* offsetDelta != index: INVALID_RECORD (Kafka rewrites such compressed
  batches; kwire stores batches as sent, so it refuses them);
* a null key on a compacted topic: INVALID_RECORD, Kafka's message;
* with CreateTime, a timestamp outside [now - before, now + after]
  (message.timestamp.before.max.ms / after.max.ms): INVALID_TIMESTAMP.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

from .errors import ErrorCode, KafkaApiError

MIN_RECORD_SIZE = 7          # one byte each: length, attributes, 3 deltas/lengths, value length, header count
NO_TIMESTAMP = -1
LONG_MAX = 2**63 - 1         # a timestamp bound left at its default: unchecked
_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(128))


class RecordError(NamedTuple):
    """One entry of a Produce response's record_errors."""

    batch_index: int
    message: str


class RecordValidationError(KafkaApiError):
    """Records of a batch broke a rule; ``record_errors`` says which (by index in the batch)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[RecordError]):
        super().__init__(code, message)
        self.record_errors = record_errors


@dataclasses.dataclass(frozen=True, slots=True)
class RecordRules:
    """Per-topic record rules: key presence and the timestamp window (None = unchecked)."""

    compacted: bool = False
    timestamp_before_max_ms: int | None = None
    timestamp_after_max_ms: int | None = None

    @property
    def checks_timestamps(self) -> bool:
        return self.timestamp_before_max_ms is not None or self.timestamp_after_max_ms is not None

    @classmethod
    def for_topic(cls, cleanup_policy: str, timestamp_type: str, before_max_ms: int,
                  after_max_ms: int) -> RecordRules:
        """The rules of a topic's configs: cleanup.policy, message.timestamp.type/before/after."""
        compacted = "compact" in cleanup_policy
        if timestamp_type != "CreateTime":
            before_max_ms = after_max_ms = LONG_MAX
        if not compacted and before_max_ms == after_max_ms == LONG_MAX:
            return NO_RULES
        return cls(compacted, None if before_max_ms == LONG_MAX else before_max_ms,
                   None if after_max_ms == LONG_MAX else after_max_ms)


NO_RULES = RecordRules()


def _invalid(message: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.INVALID_RECORD, message)


def _varint(data, position: int, end: int) -> tuple[int, int]:
    """Zigzag varint (up to 64 bits) at ``position``; raises INVALID_RECORD past ``end``."""
    value = shift = 0
    while position < end:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position
        shift += 7
        if shift > 63:
            break
    raise _invalid(f"malformed varint at record byte {position}")


def _skip_headers(data, position: int, record_end: int) -> int:
    """Skip the header count and headers of a record; must end exactly at ``record_end``."""
    count, position = _varint(data, position, record_end)
    if count < 0 or count > record_end - position:
        raise _invalid(f"invalid header count {count}")
    for _ in range(count):
        key_length, position = _varint(data, position, record_end)
        if key_length < 0 or key_length > record_end - position:
            raise _invalid(f"header key length {key_length}")
        try:    # a String: consumers decode it (kafka-python fails on bad UTF-8)
            bytes(data[position:position + key_length]).decode()
        except UnicodeDecodeError:
            raise _invalid("header key is not UTF-8") from None
        value_length, position = _varint(data, position + key_length, record_end)
        if value_length < -1:
            raise _invalid(f"header value length {value_length}")
        position += max(value_length, 0)
    if position != record_end:
        raise _invalid("record fields do not end where its length says (invalid record size)")
    return position


def walk_records(data, start: int, end: int, record_count: int, base_timestamp: int,
                 rules: RecordRules = NO_RULES, now_ms: int = 0) -> list[RecordError]:
    """Check the ``record_count`` records in ``data[start:end]``; return the rule violations.

    Raises KafkaApiError(INVALID_RECORD) if the bytes are not exactly
    ``record_count`` well-formed records: lengths consistent with the bytes,
    record attributes 0 (unused by Kafka; a set high bit breaks kafka-python's
    reader) and header keys UTF-8.  One pass, reading ``data`` in place.
    """
    if record_count * MIN_RECORD_SIZE > end - start:
        raise _invalid(f"{record_count} records cannot fit in {end - start} bytes "
                       "(incorrect declared batch size)")
    try:
        return _walk(data, start, end, record_count, base_timestamp, rules, now_ms)
    except IndexError:
        raise _invalid("records run past the end of the batch") from None


def _walk(data, position: int, end: int, record_count: int, base_timestamp: int,
          rules: RecordRules, now_ms: int) -> list[RecordError]:
    # The hot loop: single-byte varints (and two-byte lengths) are decoded inline, the
    # rest by _varint.  Reads may overshoot a record's end (never the buffer's: IndexError);
    # the position checks then fail.  Record errors are rare, the list stays empty.
    errors: list[RecordError] = []
    zigzag, varint = _ZIGZAG, _varint
    keys, times = rules.compacted, rules.checks_timestamps
    for index in range(record_count):
        byte = data[position]
        if byte < 0x80:
            length, position = zigzag[byte], position + 1
        elif data[position + 1] < 0x80:
            raw = (byte & 0x7F) | data[position + 1] << 7
            length, position = (raw >> 1) ^ -(raw & 1), position + 2
        else:
            length, position = varint(data, position, end)
        record_end = position + length
        if length < MIN_RECORD_SIZE - 1 or record_end > end:
            raise _invalid(f"record {index} of length {length} does not fit the batch "
                           "(incorrect declared batch size)")
        if data[position]:
            raise _invalid(f"record {index} has attributes {data[position]}; they are unused (0)")
        if times:
            ts_delta, position = varint(data, position + 1, record_end)
            _check_timestamp(errors, index, base_timestamp + ts_delta, rules, now_ms)
        elif data[position + 1] < 0x80:
            position += 2
        elif data[position + 2] < 0x80:
            position += 3
        else:
            position = varint(data, position + 1, record_end)[1]
        byte = data[position]
        if byte < 0x80:
            offset_delta, position = zigzag[byte], position + 1
        else:
            offset_delta, position = varint(data, position, record_end)
        if offset_delta != index:
            errors.append(RecordError(index, f"record offset delta {offset_delta} at index "
                                             f"{index}; deltas must run 0..{record_count - 1}"))
        byte = data[position]
        key_length, position = ((zigzag[byte], position + 1) if byte < 0x80
                                else varint(data, position, record_end))
        if key_length > 0:
            position += key_length
        elif key_length < 0 and (keys or key_length < -1):
            if key_length < -1:
                raise _invalid(f"record {index}: key length {key_length}")
            errors.append(RecordError(index, "Compacted topic cannot accept message without key"))
        byte = data[position]
        value_length, position = ((zigzag[byte], position + 1) if byte < 0x80
                                  else varint(data, position, record_end))
        if value_length > 0:
            position += value_length
        elif value_length < -1:
            raise _invalid(f"record {index}: value length {value_length}")
        if position + 1 == record_end and data[position] == 0:      # no headers
            position = record_end
        else:
            position = _skip_headers(data, position, record_end)
    if position != end:
        raise _invalid(f"{end - position} bytes remain after {record_count} records "
                       "(incorrect declared batch size)")
    return errors


def _check_timestamp(errors: list, index: int, timestamp: int, rules: RecordRules,
                     now_ms: int) -> None:
    if timestamp == NO_TIMESTAMP:
        return
    low = now_ms - rules.timestamp_before_max_ms if rules.timestamp_before_max_ms is not None else None
    high = now_ms + rules.timestamp_after_max_ms if rules.timestamp_after_max_ms is not None else None
    if (low is not None and timestamp < low) or (high is not None and timestamp > high):
        errors.append(RecordError(index, f"Timestamp {timestamp} of message at index {index} is "
                                         f"out of range. The timestamp should be within "
                                         f"[{low}, {high}]"))


def raise_record_errors(errors: list[RecordError]) -> None:
    """Raise RecordValidationError for a non-empty list, with Kafka's summary message."""
    if not errors:
        return
    if any(e.message.startswith("Timestamp ") for e in errors):
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                    "One or more records have been rejected due to invalid "
                                    "timestamp", errors)
    shown = ", ".join(f"{e.batch_index}: {e.message}" for e in errors[:3])
    raise RecordValidationError(ErrorCode.INVALID_RECORD,
                                f"One or more records have been rejected due to {len(errors)} "
                                f"record errors in total, and only showing the first three "
                                f"errors at most: [{shown}]", errors)
