"""The records of a Fetch response's record set, with what each record's batch says about it
(compression codec, timestamp type, transactional): what the messages page shows.

kafka-python's consumer hands out records without their batch, so the page reads the fetched
bytes itself: each v2 batch header (61 bytes, laid out in ``kwire.codecs.records``: the
codec is attributes bits 0-2, the timestamp type bit 3), its payload decompressed within
``DECOMPRESSED_LIMIT`` by ``kwire.codecs.compression``, then each record::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headerCount varint | (headerKeyLength varint | headerKey utf-8 |
                          headerValueLength varint (-1 null) | headerValue)*

Sans-I/O: ``read_record_set(blob, fetch_offset)`` takes bytes and returns records.  The bytes
come from a broker and are not trusted: every length is checked against what is left, and a
batch that does not decode is reported (``BatchProblem``) and skipped, never raised.  A Fetch
may end inside a batch (the broker cuts at ``max_bytes``): that tail is left for the next one.
Control batches (transaction markers) hold no user records and are skipped.
"""
from __future__ import annotations

from dataclasses import dataclass

from kwire.codecs import compression, records
from kwire.codecs.errors import CorruptFrame, KafkaApiError
from kwire.codecs.primitives import read_varint

DECOMPRESSED_LIMIT = 64 << 20          # bytes one batch's records may decompress to
CODECS = records.COMPRESSION_NAMES    # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass
class Record:
    offset: int
    timestamp: int
    timestamp_type: str                 # CreateTime or LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    codec: str                          # the batch's compression codec
    transactional: bool = False


@dataclass
class BatchProblem:
    base_offset: int
    reason: str


@dataclass
class RecordSet:
    records: list[Record]
    next_offset: int                    # where the next Fetch starts (after the last whole batch)
    problems: list[BatchProblem]
    bytes_read: int


def read_record_set(blob, fetch_offset: int) -> RecordSet:
    """The records at or after ``fetch_offset`` in ``blob`` (a partition's ``records`` of a
    Fetch response).  Never raises: undecodable batches are skipped and reported."""
    blob = memoryview(blob)
    out: list[Record] = []
    problems: list[BatchProblem] = []
    position, next_offset = 0, fetch_offset
    while len(blob) - position >= records.LOG_OVERHEAD:
        size = records.batch_size_at(blob, position)
        if size is None or size > len(blob) - position:
            break                                    # a batch cut by max_bytes: fetched next time
        if blob[position + records.MAGIC_OFFSET] != 2:
            base = int.from_bytes(blob[position:position + 8], "big", signed=True)
            problems.append(BatchProblem(base, f"message format v{blob[position + records.MAGIC_OFFSET]} "
                                               "(before Kafka 0.11) is not shown"))
            next_offset = max(next_offset, base + 1)
            position += size
            continue
        try:
            header = records.read_header(blob, position)
        except KafkaApiError as exc:
            problems.append(BatchProblem(next_offset, f"corrupt batch header: {exc}"))
            break                                    # the sizes that follow cannot be trusted
        position += header.size
        next_offset = max(next_offset, header.next_offset)
        if header.is_control or header.last_offset < fetch_offset:
            continue
        try:
            out.extend(r for r in _batch_records(blob, header) if r.offset >= fetch_offset)
        except (CorruptFrame, KafkaApiError, ValueError, UnicodeDecodeError) as exc:
            problems.append(BatchProblem(header.base_offset, f"undecodable batch: {exc}"))
    return RecordSet(out, next_offset, problems, position)


def _batch_records(blob, header: records.BatchHeader) -> list[Record]:
    body = blob[header.position + records.HEADER_SIZE:header.position + header.size]
    codec = header.compression
    if codec not in CODECS:
        raise ValueError(f"unknown compression codec {codec}")
    if codec:
        body = memoryview(compression.decompress(codec, body, DECOMPRESSED_LIMIT))
    timestamp_type = TIMESTAMP_TYPES[header.timestamp_type]
    out = []
    at = 0
    for _ in range(header.record_count):
        length, at = read_varint(body, at)
        end = at + length
        if length < 0 or end > len(body):
            raise ValueError(f"a record of {length} bytes with {len(body) - at} left")
        _attributes = body[at]
        ts_delta, at = read_varint(body, at + 1)
        offset_delta, at = read_varint(body, at)
        key, at = _bytes(body, at, end)
        value, at = _bytes(body, at, end)
        count, at = read_varint(body, at)
        if count < 0 or count > end - at:
            raise ValueError(f"{count} headers")
        headers = []
        for _ in range(count):
            name, at = _bytes(body, at, end)
            header_value, at = _bytes(body, at, end)
            headers.append((bytes(name or b"").decode("utf-8"), header_value))
        if at != end:
            raise ValueError("a record's fields do not end where its length says")
        timestamp = header.max_timestamp if header.timestamp_type else header.base_timestamp + ts_delta
        out.append(Record(header.base_offset + offset_delta, timestamp, timestamp_type, key, value, headers,
                          CODECS[codec], header.is_transactional))
        at = end
    return out


def _bytes(body, at: int, end: int) -> tuple[bytes | None, int]:
    length, at = read_varint(body, at)
    if length < -1 or length > end - at:
        raise ValueError(f"a field of {length} bytes with {end - at} left")
    if length < 0:
        return None, at
    return bytes(body[at:at + length]), at + length
