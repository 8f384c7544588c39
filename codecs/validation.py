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
from typing import Iterator, NamedTuple

from .errors import ErrorCode, KafkaApiError

MIN_RECORD_SIZE = 7          # one byte each: length, attributes, 3 deltas/lengths, value length, header count
NO_TIMESTAMP = -1
CHUNK = 64                   # records checked together when they share one layout ...
BIG_CHUNK = 1024             # ... and first tried in runs of this many
LONG_MAX = 2**63 - 1         # a timestamp bound left at its default: unchecked
# One-byte zigzag varints decoded by table: hot-path twin of primitives.read_varint.
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
    """Zigzag varint (up to 64 bits) at ``position``; raises INVALID_RECORD past ``end``.

    The Produce hot path's twin of ``primitives.read_varint`` (the canonical one): kept
    here, bounded by the record's end and raising INVALID_RECORD, so the per-record loop
    below pays no exception translation; ``tests/codecs/test_primitives.py`` checks both
    (and ``_ZIGZAG``) agree."""
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
    if isinstance(data, memoryview):
        data = data.obj if isinstance(data.obj, bytes) and len(data) == len(data.obj) \
            else data.tobytes()     # bytes index and slice faster than a memoryview
    errors: list[RecordError] = []
    position = start
    try:
        if not rules.checks_timestamps:
            # Runs of records sharing one layout are checked with strided slices (C
            # speed): BIG_CHUNK records at once, else CHUNK; other records one by one.
            keys = rules.compacted
            for first, last in record_chunks(record_count):
                after = _uniform_chunk(data, position, end, first, last, keys)
                if after is None:
                    after = _walk_small_chunks(data, position, end, first, last, record_count,
                                               rules, errors)
                position = after
        else:
            position = _walk(data, position, end, 0, record_count, record_count,
                             base_timestamp, rules, now_ms, errors)
    except IndexError:
        raise _invalid("records run past the end of the batch") from None
    if position != end:
        raise _invalid(f"{end - position} bytes remain after {record_count} records "
                       "(incorrect declared batch size)")
    return errors


def record_chunks(record_count: int) -> Iterator[tuple[int, int]]:
    """(first, last) index ranges of at most BIG_CHUNK records, each inside one
    offset-delta varint width (deltas 0-63: 1 byte, 64-8191: 2 bytes, ...)."""
    first, width_end = 0, 64
    while first < record_count:
        while first >= width_end:
            width_end <<= 7
        last = min(record_count, first + BIG_CHUNK, width_end)
        yield first, last
        first = last


def _walk_small_chunks(data, position: int, end: int, first: int, last: int,
                       record_count: int, rules: RecordRules, errors: list) -> int:
    """Records first .. last - 1 in chunks of CHUNK, then one by one (timestamps unchecked)."""
    for sub in range(first, last, CHUNK):
        sub_last = min(last, sub + CHUNK)
        after = None
        if last - first > CHUNK:
            after = _uniform_chunk(data, position, end, sub, sub_last, rules.compacted)
        if after is None:
            after = _walk(data, position, end, sub, sub_last, record_count, 0, rules, 0, errors)
        position = after
    return position


def _walk(data, position: int, end: int, first: int, last: int, record_count: int,
          base_timestamp: int, rules: RecordRules, now_ms: int, errors: list) -> int:
    """Check records ``first`` .. ``last - 1`` starting at ``position``; the position after them."""
    # The hot loop: single-byte varints (and two-byte lengths) are decoded inline, the
    # rest by _varint.  Reads may overshoot a record's end (never the buffer's: IndexError);
    # the position checks then fail.  Record errors are rare, the list stays empty.
    zigzag, varint = _ZIGZAG, _varint
    keys, times = rules.compacted, rules.checks_timestamps
    for index in range(first, last):
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
    return position


def _layout(data, position: int, end: int) -> tuple[int, int, int, int, int] | None:
    """Field boundaries of a header-less record at ``position`` (relative to it), or None.

    Returns (timestamp start, offset-delta start, key-length start, value-length
    start, size): the length varint and attributes lie before the timestamp,
    the key between key length and value length, the value and a zero
    header count after the value length.
    """
    try:
        length, ts_start = _varint(data, position, end)
        offset_start = _varint(data, ts_start + 1, end)[1]
        key_start = _varint(data, offset_start, end)[1]
        key_length, after = _varint(data, key_start, end)
        value_start = after + max(key_length, 0)
        value_length, after = _varint(data, value_start, end)
    except KafkaApiError:
        return None
    size = ts_start - position + length
    if data[ts_start] or after + max(value_length, 0) + 1 != position + size or key_length < -1 or value_length < -1:
        return None
    return ts_start - position + 1, offset_start - position, key_start - position, \
        value_start - position, size


def _encode_deltas(first: int, last: int) -> list[bytes]:
    encoded = []
    for delta in range(first, last):
        value, out = delta << 1, bytearray()
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
        encoded.append(out)
    return [bytes(e[j] for e in encoded) for j in range(len(encoded[0]))]


_DELTAS_1 = _encode_deltas(0, 64)         # the columns of deltas 0-63 (one byte) ...
_DELTAS_2 = _encode_deltas(64, 8192)      # ... and 64-8191 (two bytes): 16 KiB


def _offset_delta_columns(first: int, last: int) -> list[bytes]:
    """Byte columns of the zigzag varints of offset deltas first .. last - 1 (one width)."""
    if last <= 64:
        return [column[first:last] for column in _DELTAS_1]
    if last <= 8192:
        return [column[first - 64:last - 64] for column in _DELTAS_2]
    return _encode_deltas(first, last)       # batches of more than 8192 records


def _uniform_chunk(data, position: int, end: int, first: int, last: int,
                   keys: bool = False) -> int | None:
    """If records first .. last - 1 all share the layout of the first, the position after
    them; else None (nothing is concluded)."""
    run = uniform_run(data, position, end, first, last, keys)
    return None if run is None else run[0]


def uniform_run(data, position: int, end: int, first: int, last: int,
                keys: bool = False) -> tuple[int, tuple[int, int, int, int, int]] | None:
    """If records first .. last - 1 all share the layout of the first, (the position after
    them, that layout as ``_layout`` gives it); else None (nothing is concluded).  Each
    check is one strided slice.

    The chunk lies inside one offset-delta width (see ``record_chunks``), so equal
    layouts mean equal lengths.  Key and value bytes are not read; header
    counts must be 0, keys present if ``keys`` (a compacted topic).  The schema
    checks (kwire.schemas.record_reader) read a run's keys and values as columns.
    """
    layout = _layout(data, position, end)
    if layout is None:
        return None
    ts_start, offset_start, key_start, value_start, size = layout
    count, stop = last - first, position + (last - first) * size

    def column(j: int) -> bytes:
        return data[position + j:stop:size]

    if stop > end:
        return None
    key_length, key_end = _varint(data, position + key_start, end)
    if keys and key_length < 0:
        return None
    key_end -= position
    value_end = _varint(data, position + value_start, end)[1] - position
    for j in (*range(ts_start), *range(key_start, key_end), *range(value_start, value_end)):
        if column(j) != bytes((data[position + j],)) * count:      # lengths and attributes
            return None
    if column(size - 1) != bytes(count):                             # header count 0
        return None
    if any(min(column(j)) < 0x80 for j in range(ts_start, offset_start - 1)):
        return None                                                  # timestamp varint ...
    if max(column(offset_start - 1)) >= 0x80:                        # ... of one width
        return None
    expected = _offset_delta_columns(first, last)
    if len(expected) != key_start - offset_start:
        return None
    if any(column(offset_start + j) != col for j, col in enumerate(expected)):
        return None
    return stop, layout


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
