"""Kafka record batches, format v2 (magic 2): headers, CRCs and Produce validation.

Byte layout of one batch (big-endian; the header is 61 bytes)::

    offset  size  field
         0     8  baseOffset            int64   set by the broker
         8     4  batchLength           int32   bytes after this field (size - 12)
        12     4  partitionLeaderEpoch  int32   set by the broker
        16     1  magic                 int8    2 (0 and 1 are the legacy formats)
        17     4  crc                   uint32  CRC-32C of bytes 21 .. end of batch
        21     2  attributes            int16   bits 0-2 compression codec,
                                                bit 3 timestamp type (1 = LogAppendTime),
                                                bit 4 transactional, bit 5 control
        23     4  lastOffsetDelta       int32
        27     8  baseTimestamp         int64
        35     8  maxTimestamp          int64
        43     8  producerId            int64   -1 = not idempotent
        51     2  producerEpoch         int16
        53     4  baseSequence          int32
        57     4  recordCount           int32
        61     -  records               possibly compressed as one block

Each record (after decompression) starts with: length varint, attributes int8,
timestampDelta varlong, offsetDelta varint, then key, value and headers.

A control batch (attributes bits 4 and 5: transactional and control, written
only by brokers) holds one record whose key is ``version int16 (0), type
int16`` (0 = ABORT, 1 = COMMIT; Kafka's ControlRecordType) and, for those two
types, whose value is the EndTransactionMarker ``version int16 (0),
coordinatorEpoch int32``.  Its baseSequence is -1; its producer id and epoch
are the transaction's.

A Produce is validated in one pass (``validate_produce_records``): each
header here, then its records in ``validation`` after bounded decompression
in ``compression``.  Stored batches are read by header only.

baseOffset and partitionLeaderEpoch lie before byte 21, so the broker stamps
them without touching the CRC; switching a batch to LogAppendTime changes
attributes and maxTimestamp, which are covered, so the CRC is recomputed.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Iterator, NamedTuple

import crc32c

from . import compression, validation
from .errors import CorruptFrame, ErrorCode, KafkaApiError
from .primitives import read_varint as _read_varint, varint as _varint
from .validation import NO_RULES, RecordRules

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size
assert HEADER_SIZE == 61
LOG_OVERHEAD = 12            # baseOffset + batchLength: bytes not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC_OFFSET = 16            # same byte in the legacy v0/v1 message formats
CRC_OFFSET = 17
CRC_START = 21               # the CRC covers attributes onward
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ZSTD = 4
INT32_MAX = 2**31 - 1
LATEST_PRODUCE_VERSION = 11


@dataclasses.dataclass(slots=True)
class BatchHeader:
    """The 61-byte header of one v2 batch, plus where it sits in its buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int = 0
    size: int = 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from INT32_MAX to 0."""
        if self.base_sequence < 0:
            return self.base_sequence
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)


def read_header(buf, position: int = 0, *, whole: bool = True) -> BatchHeader:
    """Unpack the header at ``position``; with ``whole``, check the batch fits in ``buf``.

    Raises KafkaApiError(CORRUPT_MESSAGE) if the header is cut short, the
    magic is not 2, the length is too small or (``whole``) the batch runs
    past the end of ``buf``.
    """
    available = len(buf) - position
    if available < HEADER_SIZE:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"batch header cut short at position {position}")
    fields = HEADER.unpack_from(buf, position)
    header = BatchHeader(*fields, position=position, size=fields[1] + LOG_OVERHEAD)
    if header.magic != 2:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"magic {header.magic} at position {position}, expected 2")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"batch length {header.batch_length} at position {position}")
    if whole and header.size > available:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"batch at position {position} needs {header.size} bytes, "
                            f"{available} left")
    return header


def iter_batches(buf, start: int = 0) -> Iterator[BatchHeader]:
    """Yield the header of every batch in ``buf`` from ``start``, without CRC checks.

    Stops cleanly at the end of ``buf``; raises KafkaApiError(CORRUPT_MESSAGE)
    on a header that does not fit or is inconsistent (see ``read_header``).
    """
    position, end = start, len(buf)
    while position < end:
        header = read_header(buf, position)
        yield header
        position += header.size


def crc_ok(buf, header: BatchHeader) -> bool:
    """True if the stored CRC matches bytes 21..end of the batch."""
    start = header.position
    view = memoryview(buf)[start + CRC_START:start + header.size]
    return crc32c.crc32c(view) == header.crc


def _check_complete(buf, header: BatchHeader) -> bool:
    """Everything a stored batch must satisfy beyond ``read_header``."""
    return (header.last_offset_delta >= 0
            and header.record_count == header.last_offset_delta + 1
            and crc_ok(buf, header))


def scan_valid_prefix(buf, start: int = 0) -> tuple[list[BatchHeader], int]:
    """Walk batches from ``start`` checking everything, including the CRC.

    Returns the headers of the valid batches and the number of valid bytes
    after ``start``; stops at the first torn or corrupt batch.  Never raises.
    """
    headers: list[BatchHeader] = []
    position, end = start, len(buf)
    while position < end:
        try:
            header = read_header(buf, position)
        except KafkaApiError:
            break
        if not _check_complete(buf, header):
            break
        headers.append(header)
        position += header.size
    return headers, position - start


def batch_size_at(buf, position: int) -> int | None:
    """The total size the batch at ``position`` claims, or None if fewer than 12 bytes remain."""
    if len(buf) - position < LOG_OVERHEAD:
        return None
    return _I32.unpack_from(buf, position + 8)[0] + LOG_OVERHEAD


def _validate_one(buf, position: int, max_message_bytes: int, produce_version: int) -> BatchHeader:
    """Header-level checks of one batch (Kafka's ProduceRequest.validateRecords and validateBatch)."""
    remaining = len(buf) - position
    if remaining > MAGIC_OFFSET and buf[MAGIC_OFFSET + position] in (0, 1):
        # Kafka 3.x/4.x ProduceRequest.validateRecords: InvalidRecordException for any
        # Produce v3+ (kwire's minimum), whatever the version; not UNSUPPORTED_FOR_MESSAGE_FORMAT.
        raise KafkaApiError(ErrorCode.INVALID_RECORD,
                            f"Produce requests with version {produce_version} are only allowed "
                            f"to contain record batches with magic version 2 (magic "
                            f"{buf[MAGIC_OFFSET + position]} at position {position})")
    size = batch_size_at(buf, position)
    if size is not None and size > max_message_bytes and size <= remaining:
        raise KafkaApiError(ErrorCode.MESSAGE_TOO_LARGE,
                            f"batch of {size} bytes at position {position} exceeds "
                            f"max.message.bytes {max_message_bytes}")
    header = read_header(buf, position)
    if not crc_ok(buf, header):
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, f"CRC mismatch at position {position}")
    if header.record_count <= 0 or header.record_count != header.last_offset_delta + 1:
        raise KafkaApiError(ErrorCode.INVALID_RECORD,
                            f"record count {header.record_count} does not match last offset "
                            f"delta {header.last_offset_delta} at position {position}")
    if header.compression not in COMPRESSION_NAMES:
        raise KafkaApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                            f"compression codec {header.compression} at position {position}")
    if header.compression == ZSTD and produce_version < 7:
        raise KafkaApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                            f"Produce requests with version {produce_version} are not allowed "
                            "to use ZStandard compression (KIP-110: v7 or later)")
    if header.is_control:
        raise KafkaApiError(ErrorCode.INVALID_RECORD,
                            f"clients may not write control batches (position {position})")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise KafkaApiError(ErrorCode.INVALID_RECORD,
                            f"producer id {header.producer_id} with sequence "
                            f"{header.base_sequence} at position {position}")
    return header


def _validate_records(buf, header: BatchHeader, max_message_bytes: int, rules: RecordRules,
                      now_ms: int) -> None:
    """Record-level checks of one batch: decompress (bounded) and walk every record."""
    start, end = header.position + HEADER_SIZE, header.position + header.size
    if header.compression:
        limit = compression.decompressed_limit(max_message_bytes)
        buf = compression.decompress(header.compression, memoryview(buf)[start:end], limit)
        start, end = 0, len(buf)
    try:
        errors = validation.walk_records(buf, start, end, header.record_count,
                                         header.base_timestamp, rules, now_ms)
    except KafkaApiError as exc:
        raise KafkaApiError(exc.code, f"{exc.message} in batch at position {header.position}"
                            ) from None
    if header.timestamp_type and not errors:
        # Kafka's validateTimestamp: only the broker may set LogAppendTime.
        errors = [validation.RecordError(i, "Invalid timestamp type in message. Producer should "
                                            "not set timestamp type to LogAppendTime.")
                  for i in range(header.record_count)]
        raise validation.RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                               "One or more records have been rejected due to "
                                               "invalid timestamp", errors)
    validation.raise_record_errors(errors)


def validate_produce_records(records, max_message_bytes: int, *,
                             produce_version: int = LATEST_PRODUCE_VERSION,
                             rules: RecordRules = NO_RULES, now_ms: int = 0) -> list[BatchHeader]:
    """Check the records blob of one partition of a Produce request; return its headers.

    One pass: each batch's header and CRC, then its records (decompressed with
    a bound derived from ``max_message_bytes``), as Kafka's LogValidator does;
    ``rules`` adds the compacted-topic key rule and the timestamp window
    (against ``now_ms``).  Raises KafkaApiError with MESSAGE_TOO_LARGE (batch
    or its decompressed records too big), CORRUPT_MESSAGE (bad CRC, magic
    above 2, length, trailing bytes, undecodable compressed payload),
    INVALID_RECORD (magic 0/1, empty blob, record count inconsistent with the
    offset delta or with the records present, malformed records, control
    batch, producer id without a sequence), UNSUPPORTED_COMPRESSION_TYPE
    (codec 5-7, zstd before Produce v7); RecordValidationError (a
    KafkaApiError carrying ``record_errors``) with INVALID_RECORD or
    INVALID_TIMESTAMP for rule violations of single records.
    """
    if not records:
        raise KafkaApiError(ErrorCode.INVALID_RECORD, "no record batch in produce data")
    headers: list[BatchHeader] = []
    position, end = 0, len(records)
    while position < end:
        header = _validate_one(records, position, max_message_bytes, produce_version)
        _validate_records(records, header, max_message_bytes, rules, now_ms)
        headers.append(header)
        position += header.size
    return headers


def own_batch_headers(records, max_message_bytes: int) -> list[BatchHeader]:
    """Headers of batches the broker built itself (a coordinator's state records or offsets).

    Only what the topic's limits require is checked: whole batches and
    max.message.bytes (KafkaApiError CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
    INVALID_RECORD when empty).  The CRC and the record walk of
    ``validate_produce_records`` guard against clients; these bytes came from
    kafka-python's batch builder in this process, so they are skipped (about
    half the CPU of such an append).
    """
    headers = list(iter_batches(records))
    if not headers:
        raise KafkaApiError(ErrorCode.INVALID_RECORD, "no record batch in the coordinator's data")
    for header in headers:
        if header.size > max_message_bytes:
            raise KafkaApiError(ErrorCode.MESSAGE_TOO_LARGE,
                                f"batch of {header.size} bytes at position {header.position} exceeds "
                                f"max.message.bytes {max_message_bytes}")
    return headers


def stamp(buf: bytearray, position: int, base_offset: int, leader_epoch: int) -> None:
    """Write baseOffset and partitionLeaderEpoch of the batch at ``position`` (outside the CRC)."""
    _I64.pack_into(buf, position, base_offset)
    _I32.pack_into(buf, position + 12, leader_epoch)


_STAMPED = struct.Struct(">qii")     # baseOffset, batchLength, partitionLeaderEpoch
STAMPED_SIZE = _STAMPED.size
assert STAMPED_SIZE == MAGIC_OFFSET == 16


def stamped_prefix(header: BatchHeader, base_offset: int, leader_epoch: int) -> bytes:
    """The batch's first STAMPED_SIZE bytes with baseOffset and partitionLeaderEpoch set (both
    outside the CRC): written in front of ``batch[STAMPED_SIZE:]`` it stores the batch uncopied."""
    return _STAMPED.pack(base_offset, header.batch_length, leader_epoch)


def set_log_append_time(buf: bytearray, position: int, size: int, now_ms: int) -> None:
    """Mark the batch as LogAppendTime with maxTimestamp ``now_ms`` and recompute its CRC.

    baseTimestamp is kept, as Kafka does: readers of a LogAppendTime batch
    take every record's timestamp from maxTimestamp.
    """
    attributes = _I16.unpack_from(buf, position + ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c.crc32c(memoryview(buf)[position + CRC_START:position + size])
    _U32.pack_into(buf, position + CRC_OFFSET, crc)


def stamp_batches(records, headers: list[BatchHeader], base_offset: int, leader_epoch: int,
                  append_time: int) -> list:
    """Assign offsets from ``base_offset`` and ``leader_epoch`` to validated ``headers`` (in
    place); returns the bytes to store, as a list of buffers written back to back.

    With CreateTime (``append_time`` < 0) nothing is copied: each batch is its
    ``stamped_prefix`` and a view of the rest of ``records``.  LogAppendTime
    rewrites attributes and maxTimestamp, which the CRC covers, so ``records``
    is copied once and each batch's CRC recomputed.
    """
    offset = base_offset
    if append_time >= 0:
        buf = bytearray(records)
    else:
        view, parts = memoryview(records), []
    for header in headers:
        if append_time >= 0:
            stamp(buf, header.position, offset, leader_epoch)
            set_log_append_time(buf, header.position, header.size, append_time)
            header.max_timestamp = append_time
            header.attributes |= TIMESTAMP_TYPE_BIT
        else:
            parts.append(stamped_prefix(header, offset, leader_epoch))
            parts.append(view[header.position + STAMPED_SIZE:header.position + header.size])
        header.base_offset, header.partition_leader_epoch = offset, leader_epoch
        offset += header.last_offset_delta + 1
    return [buf] if append_time >= 0 else parts


# -- control batches: transaction markers (KIP-98) -------------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_ATTRIBUTES = TRANSACTIONAL_BIT | CONTROL_BIT
_CONTROL_KEY = struct.Struct(">hh")      # version, type
_MARKER_VALUE = struct.Struct(">hi")     # version, coordinatorEpoch
NO_COORDINATOR_EPOCH = -1


def build_control_batch(producer_id: int, producer_epoch: int, commit: bool,
                        coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """A complete, CRC-valid end-transaction marker batch, as Kafka's
    MemoryRecords.withEndTransactionMarker builds it: base offset 0, partition leader
    epoch -1 (both stamped at append), CreateTime ``timestamp_ms``, no compression,
    baseSequence -1, one record (see the module docstring).  Never raises."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    body = (b"\x00" + _varint(0) + _varint(0)            # attributes, timestamp/offset delta
            + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0))
    record = _varint(len(body)) + body
    size = HEADER_SIZE + len(record)
    batch = bytearray(HEADER.pack(0, size - LOG_OVERHEAD, -1, 2, 0, CONTROL_ATTRIBUTES, 0,
                                  timestamp_ms, timestamp_ms, producer_id, producer_epoch,
                                  -1, 1))
    batch += record
    _U32.pack_into(batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def control_marker(buf, header: BatchHeader) -> tuple[int, int] | None:
    """``(type, coordinator_epoch)`` of the record of the control batch at
    ``header.position`` in ``buf`` (coordinator_epoch is -1 for types other than ABORT
    and COMMIT), or None if the batch is not a control batch.

    Reads only the first record (a control batch has one).  Raises
    KafkaApiError(CORRUPT_MESSAGE) if it cannot be decoded.
    """
    if not header.is_control:
        return None
    start = header.position + HEADER_SIZE
    body = bytes(memoryview(buf)[start:header.position + header.size])
    try:
        if header.compression:     # Kafka never compresses them; a leader's batch is taken as is
            body = compression.decompress(header.compression, body, compression.DECOMPRESSED_CAP)
        _length, position = _read_varint(body, 0)
        _ts_delta, position = _read_varint(body, position + 1)   # after attributes
        _offset_delta, position = _read_varint(body, position)
        key_length, position = _read_varint(body, position)
        if key_length < _CONTROL_KEY.size:
            raise ValueError(f"control record key of {key_length} bytes")
        version, kind = _CONTROL_KEY.unpack_from(body, position)
        if version < 0:
            raise ValueError(f"control record key version {version}")
        position += key_length
        coordinator_epoch = NO_COORDINATOR_EPOCH
        if kind in (CONTROL_ABORT, CONTROL_COMMIT):
            value_length, position = _read_varint(body, position)
            if value_length < _MARKER_VALUE.size:
                raise ValueError(f"end transaction marker value of {value_length} bytes")
            version, coordinator_epoch = _MARKER_VALUE.unpack_from(body, position)
            if version < 0:
                raise ValueError(f"end transaction marker version {version}")
    except (ValueError, IndexError, struct.error, CorruptFrame, KafkaApiError) as exc:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"undecodable control record in batch at offset "
                            f"{header.base_offset}: {exc}") from None
    return kind, coordinator_epoch


def control_type(buf, header: BatchHeader) -> int | None:
    """The control record type (CONTROL_ABORT, CONTROL_COMMIT, ...) of the control batch at
    ``header.position`` in ``buf``; None for other batches.  Raises as ``control_marker``."""
    marker = control_marker(buf, header)
    return None if marker is None else marker[0]


def compression_of(buf, header: BatchHeader) -> str:
    """Name of the codec ('none', 'gzip', ...) the batch at ``header.position`` uses.

    Raises KafkaApiError(UNSUPPORTED_COMPRESSION_TYPE) for codecs 5-7.
    """
    codec = _I16.unpack_from(buf, header.position + ATTRIBUTES_OFFSET)[0] & COMPRESSION_MASK
    try:
        return COMPRESSION_NAMES[codec]
    except KeyError:
        raise KafkaApiError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                            f"compression codec {codec} at position {header.position}") from None


# -- record timestamps: the one place records are decoded (ListOffsets by time) --

def _payload(buf, header: BatchHeader) -> bytes:
    """The records of the batch at ``header.position``, decompressed.  Raises KafkaApiError."""
    body = bytes(memoryview(buf)[header.position + HEADER_SIZE:header.position + header.size])
    if header.compression:
        body = compression.decompress(header.compression, body, compression.DECOMPRESSED_CAP)
    return body


def record_timestamps(buf, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) of every record of the batch, decompressing if needed.

    Raises KafkaApiError(CORRUPT_MESSAGE) if the records cannot be decoded.
    """
    try:
        body = _payload(buf, header)
        position = 0
        for _ in range(header.record_count):
            length, position = _read_varint(body, position)
            next_record = position + length
            ts_delta, position = _read_varint(body, position + 1)   # after attributes
            offset_delta, position = _read_varint(body, position)
            if header.timestamp_type:
                timestamp = header.max_timestamp
            else:
                timestamp = header.base_timestamp + ts_delta
            yield header.base_offset + offset_delta, timestamp
            position = next_record
    except (ValueError, IndexError, KeyError, struct.error, CorruptFrame, KafkaApiError) as exc:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"undecodable records in batch at position {header.position}: {exc}"
                            ) from None


# -- the log cleaner's view of a batch: records with their keys, and a batch rebuilt from some --

class RecordSpan(NamedTuple):
    """One record of a decoded batch payload: its offset delta, key (None for a null key),
    whether its value is null (a tombstone), and where its bytes lie in the payload."""
    offset_delta: int
    key: bytes | None
    null_value: bool
    start: int
    end: int


def batch_records(buf, header: BatchHeader) -> tuple[bytes, list[RecordSpan]]:
    """The batch's records payload (decompressed) and its records, keys included.

    Raises KafkaApiError(CORRUPT_MESSAGE) if the records cannot be decoded.
    """
    spans = []
    try:
        body = _payload(buf, header)
        position = 0
        for _ in range(header.record_count):
            length, at = _read_varint(body, position)
            end = at + length
            if length < 0 or end > len(body):
                raise ValueError(f"record of {length} bytes")
            _ts_delta, at = _read_varint(body, at + 1)       # after attributes
            offset_delta, at = _read_varint(body, at)
            key_length, at = _read_varint(body, at)
            key = None
            if key_length >= 0:
                key = body[at:at + key_length]
                at += key_length
            value_length, at = _read_varint(body, at)
            spans.append(RecordSpan(offset_delta, key, value_length < 0, position, end))
            position = end
    except (ValueError, IndexError, CorruptFrame, KafkaApiError) as exc:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"undecodable records in batch at offset {header.base_offset}: "
                            f"{getattr(exc, 'message', exc)}") from None
    return body, spans


def rebuild_batch(buf, header: BatchHeader, body: bytes, kept: list[RecordSpan]) -> bytes:
    """The batch at ``header.position`` of ``buf`` holding only the records ``kept`` (spans of
    ``body``, from ``batch_records``), as Kafka's cleaner writes it: base offset, last offset
    delta, partition leader epoch, producer id/epoch/base sequence and both timestamps kept
    (so record deltas and sequences stay valid), the same codec, a new length and CRC.  With
    nothing kept, the empty batch Kafka keeps for a producer's last sequence (no records,
    no compression).  Never raises for a batch ``batch_records`` decoded."""
    attributes = header.attributes
    if kept:
        payload = b"".join(body[r.start:r.end] for r in kept)
        if header.compression:
            payload = compression.compress(header.compression, payload)
    else:
        payload = b""
        attributes &= ~COMPRESSION_MASK
    size = HEADER_SIZE + len(payload)
    batch = bytearray(HEADER.pack(header.base_offset, size - LOG_OVERHEAD, header.partition_leader_epoch,
                                  2, 0, attributes, header.last_offset_delta, header.base_timestamp,
                                  header.max_timestamp, header.producer_id, header.producer_epoch,
                                  header.base_sequence, len(kept)))
    batch += payload
    _U32.pack_into(batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)
