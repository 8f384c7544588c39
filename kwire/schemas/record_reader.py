"""The records of one partition of a Produce request, decoded for the record validators.

The produce hot path never decodes records (``kwire.codecs.records`` checks them in place);
a topic with validation configured pays for this decode, once per append, before it.  Each
v2 record (after the batch's payload is decompressed; layout in ``kwire.codecs.records``
and ``kwire.codecs.validation``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headerCount varint | (headerKeyLength varint | headerKey utf-8 |
                          headerValueLength varint (-1 null) | headerValue)*

Control batches (transaction markers, written only by brokers) are skipped: they are never
validated (a client's control batch is refused by the append itself).
"""
from __future__ import annotations

from typing import NamedTuple

from kwire.codecs import compression, records
from kwire.codecs.errors import CorruptFrame, ErrorCode, KafkaApiError
from kwire.codecs.primitives import read_varint


class ProducedRecord(NamedTuple):
    """One produced record as a validator sees it (offsets are not assigned yet)."""

    topic: str
    partition: int
    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def produced_records(blob, topic: str, partition: int,
                     max_message_bytes: int) -> list[tuple[int, ProducedRecord]]:
    """(index in the partition's records, record) for every record of every non-control batch
    of ``blob``, the records of one partition of a Produce request.

    Raises KafkaApiError as the append would refuse the same bytes: CORRUPT_MESSAGE (a cut or
    corrupt header, a CRC mismatch, an undecodable compressed payload), MESSAGE_TOO_LARGE
    (records decompressing past the bound of ``max_message_bytes``),
    UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD (records that do not parse).
    """
    out: list[tuple[int, ProducedRecord]] = []
    position, end = 0, len(blob)
    while position < end:
        header = records.read_header(blob, position)
        if not records.crc_ok(blob, header):
            raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, f"CRC mismatch at position {position}")
        if not header.is_control:
            _decode_batch(blob, header, topic, partition, max_message_bytes, out)
        position += header.size
    return out


def keys_and_values(blob, max_message_bytes: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """(index, key, value) of every record of every non-control batch of ``blob``: what the
    schema checks read, without the timestamps and headers a Python validator gets (each
    record's headers are skipped by its length).  Raises as ``produced_records``."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    position, end = 0, len(blob)
    while position < end:
        header = records.read_header(blob, position)
        if not records.crc_ok(blob, header):
            raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, f"CRC mismatch at position {position}")
        if not header.is_control:
            body = _body(blob, header, max_message_bytes)
            try:
                at = _walk_keys_and_values(body, header.record_count, out)
            except (CorruptFrame, IndexError, ValueError) as exc:
                raise KafkaApiError(ErrorCode.INVALID_RECORD, f"a record of the batch at position "
                                    f"{header.position} does not parse: {exc}") from None
            if at != len(body):
                raise KafkaApiError(ErrorCode.INVALID_RECORD, f"{len(body) - at} bytes remain after "
                                    f"{header.record_count} records in the batch at position {header.position}")
        position += header.size
    return out


def _walk_keys_and_values(body: bytes, count: int, out: list) -> int:
    """Append (index, key, value) of ``count`` records of ``body``; the position after them.
    The hot loop of schema validation: one-byte varints (most lengths and deltas of small
    records) are read inline, longer ones through read_varint."""
    at, size = 0, len(body)
    index = len(out)
    for _ in range(count):
        b = body[at]
        if b < 0x80:
            length, at = (b >> 1) ^ -(b & 1), at + 1
        else:
            length, at = read_varint(body, at)
        record_end = at + length
        if length < 6 or record_end > size:
            raise ValueError(f"record length {length}")
        at += 1                                             # attributes
        for _field in range(2):                             # timestampDelta, offsetDelta
            if body[at] < 0x80:
                at += 1
            else:
                at = read_varint(body, at)[1]
        fields = []
        for _field in range(2):                             # key, value
            b = body[at]
            if b < 0x80:
                n, at = (b >> 1) ^ -(b & 1), at + 1
            else:
                n, at = read_varint(body, at)
            if n < 0:
                if n != -1:
                    raise ValueError(f"length {n}")
                fields.append(None)
                continue
            if at + n > record_end:
                raise ValueError(f"length {n} runs past the record")
            fields.append(body[at:at + n])
            at += n
        out.append((index, fields[0], fields[1]))
        index += 1
        at = record_end                                     # the headers are not read
    return at


def _body(blob, header, max_message_bytes: int) -> bytes:
    """The batch's records bytes, decompressed within the append's bound."""
    start, end = header.position + records.HEADER_SIZE, header.position + header.size
    records.compression_of(blob, header)            # UNSUPPORTED_COMPRESSION_TYPE for codecs 5-7
    if header.compression:
        return compression.decompress(header.compression, memoryview(blob)[start:end],
                                      compression.decompressed_limit(max_message_bytes))
    return bytes(memoryview(blob)[start:end])


def _decode_batch(blob, header, topic: str, partition: int, max_message_bytes: int,
                  out: list) -> None:
    body = _body(blob, header, max_message_bytes)
    first = len(out)
    at = 0
    try:
        for _ in range(header.record_count):
            at = _decode_record(body, at, header, topic, partition, len(out), out)
    except (CorruptFrame, IndexError, ValueError) as exc:
        raise KafkaApiError(ErrorCode.INVALID_RECORD,
                            f"record {len(out) - first} of the batch at position {header.position} "
                            f"does not parse: {exc}") from None
    if at != len(body):
        raise KafkaApiError(ErrorCode.INVALID_RECORD, f"{len(body) - at} bytes remain after "
                            f"{header.record_count} records in the batch at position {header.position}")


def _decode_record(body: bytes, at: int, header, topic: str, partition: int, index: int,
                   out: list) -> int:
    """Append the record at ``body[at]`` to ``out``; the position after it.  Raises
    CorruptFrame, IndexError or ValueError on malformed bytes."""
    length, at = read_varint(body, at)
    record_end = at + length
    if length < 6 or record_end > len(body):
        raise ValueError(f"record length {length}")
    timestamp_delta, at = read_varint(body, at + 1)          # after attributes
    offset_delta, at = read_varint(body, at)
    key, at = _nullable_bytes(body, at, record_end)
    value, at = _nullable_bytes(body, at, record_end)
    count, at = read_varint(body, at)
    if not 0 <= count <= record_end - at:
        raise ValueError(f"header count {count}")
    headers = []
    for _ in range(count):
        name, at = _nullable_bytes(body, at, record_end)
        if name is None:
            raise ValueError("null header key")
        header_value, at = _nullable_bytes(body, at, record_end)
        headers.append((name.decode(), header_value))
    if at != record_end:
        raise ValueError("record fields do not end where its length says")
    timestamp = header.max_timestamp if header.timestamp_type else header.base_timestamp + timestamp_delta
    out.append((index, ProducedRecord(topic, partition, offset_delta, timestamp, key, value, tuple(headers))))
    return at


def _nullable_bytes(body: bytes, at: int, limit: int) -> tuple[bytes | None, int]:
    length, at = read_varint(body, at)
    if length < 0:
        if length != -1:
            raise ValueError(f"length {length}")
        return None, at
    if at + length > limit:
        raise ValueError(f"length {length} runs past the record")
    return body[at:at + length], at + length
