"""The records of one partition of a Produce request, read for the record checks.

The produce hot path never decodes records (``kwire.codecs.records`` checks them in place);
a topic with validation configured pays for this read, once per append, before it.  Each
v2 record (after the batch's payload is decompressed; layout in ``kwire.codecs.records``
and ``kwire.codecs.validation``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headerCount varint | (headerKeyLength varint | headerKey utf-8 |
                          headerValueLength varint (-1 null) | headerValue)*

Records are read by aiokafka's record reader, compiled (Cython) in its wheels: about 0.4 µs
a record, against several µs for a Python loop over the varints.  Compressed payloads are
decompressed here, within the append's bound (``kwire.codecs.compression``), and handed to
the reader as an uncompressed batch, so a decompression bomb stops here as at the append.
The reader does not check that the records fill their batch exactly; the append after the
checks does (``kwire.codecs.validation.walk_records``) and refuses what the reader let pass.

Control batches (transaction markers, written only by brokers) are skipped: they are never
validated (a client's control batch is refused by the append itself).

The schema checks (``field_runs``) read batches before their CRC is checked: the append checks
every CRC anyway, and reading 1 KiB records twice cost as much as the checks themselves.  A
refusal must name the right cause, so before refusing, the caller asks ``crc_errors`` (a
batch corrupted in flight is CORRUPT_MESSAGE, not a schema error).  A Python validator sees
only records whose CRC was checked (``produced_records``).
"""
from __future__ import annotations

import functools
import itertools
import operator
import struct
from typing import NamedTuple

from kwire.codecs import compression, records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.primitives import read_varint
from kwire.codecs.validation import CHUNK, record_chunks, uniform_run

_LENGTH = struct.Struct(">i")
_LENGTH_OFFSET = 8                        # batchLength, after baseOffset


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
    for header, _body, reader in _batches(blob, max_message_bytes, crc=True):
        batch = reader()
        base = batch.base_offset
        read = _read(batch, header, lambda r: ProducedRecord(topic, partition, r.offset - base, r.timestamp,
                                                             r.key, r.value, tuple(r.headers)))
        out += enumerate(read, len(out))
    return out


FieldRun = tuple[int, int, "bytes | None", "bytes | None"]
"""(index of the first record, number of records, key, value): records that share one key
and one value as far as the schema checks read them (see ``field_runs``)."""


def field_runs(blob, max_message_bytes: int, head: int | None = None, *, keys: bool = True,
               values: bool = True) -> list[FieldRun]:
    """The keys and values of every non-control batch of ``blob`` as the schema checks read
    them (a side not asked for, ``keys`` or ``values`` False, is None in every run): without
    ``head``, one run per record with its whole key and value; with ``head``, the checks read
    only the first ``head`` bytes of a key or value (the schema-ID check reads the 5-byte
    prefix), and consecutive records that agree on those bytes are one run whose key and
    value are the shared first bytes.  Raises as ``produced_records``.

    A Confluent serializer's records share their prefix (one schema id), and records of one
    size (fixed-width payloads) share their layout too: a batch of such records is split into
    runs with strided slices over its bytes (kwire.codecs.validation's ``uniform_run``, as
    the append's own checks do), without reading a record; any other batch is read record
    by record, keeping only the bytes asked for (no record object outlives its read, which
    keeps the garbage collector's work per batch small)."""
    out: list[FieldRun] = []
    for header, body, reader in _batches(blob, max_message_bytes, crc=False):
        first = out[-1][0] + out[-1][1] if out else 0
        runs = None if head is None else _uniform_runs(body, header.record_count, first, head, keys, values)
        if runs is None:
            read = _read(reader(), header, _GETTERS[keys, values])
            if head is not None:
                cut = (lambda b: None if b is None else b[:head])
                read = ([(cut(k), cut(v)) for k, v in read] if keys and values else [cut(b) for b in read])
                read = _groups(read)
            else:
                read = [(1, field) for field in read]
            runs = []
            for count, field in read:
                key, value = field if keys and values else (field, None) if keys else (None, field)
                runs.append((first, count, key, value))
                first += count
        out += runs
    return out


_GETTERS = {(True, True): operator.attrgetter("key", "value"), (True, False): operator.attrgetter("key"),
            (False, True): operator.attrgetter("value"), (False, False): lambda _record: None}


def crc_errors(blob) -> KafkaApiError | None:
    """CORRUPT_MESSAGE for the first batch of ``blob`` whose CRC does not match (or that is cut
    short), else None: asked before a refusal of records read without their CRC checked."""
    try:
        for header, _body, _reader in _batches(blob, None, crc=True):
            pass
    except KafkaApiError as exc:
        if exc.code == ErrorCode.CORRUPT_MESSAGE:
            return exc
    return None


def _batches(blob, max_message_bytes: int | None, *, crc: bool):
    """(header, records bytes, a function making aiokafka's DefaultRecordBatch over them
    uncompressed) of each non-control batch; the CRC is checked with ``crc``.  Without
    ``max_message_bytes`` the records are not read (None for the bytes)."""
    position, end = 0, len(blob)
    while position < end:
        header = records.read_header(blob, position)
        if crc and not records.crc_ok(blob, header):
            raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE, f"CRC mismatch at position {position}")
        if not header.is_control and max_message_bytes is not None:
            body = _body(blob, header, max_message_bytes)
            yield header, body, functools.partial(_reader, blob, header, body)
        position += header.size


def _reader(blob, header, body: bytes):
    """aiokafka's DefaultRecordBatch over the batch ``header`` of ``blob``, its records ``body``
    (decompressed): made only when the records are read one by one."""
    start = header.position
    if header.compression:          # the reader gets the same batch, uncompressed
        batch = bytearray(blob[start:start + records.HEADER_SIZE]) + body
        batch[records.ATTRIBUTES_OFFSET + 1] &= ~records.COMPRESSION_MASK & 0xFF
        _LENGTH.pack_into(batch, _LENGTH_OFFSET, len(batch) - records.LOG_OVERHEAD)
    else:
        batch = blob[start:start + header.size]
    # imported here: aiokafka's package import costs ~150 ms of a broker's start, and
    # only a topic with validation configured reads records
    from aiokafka.record.default_records import DefaultRecordBatch
    return DefaultRecordBatch(bytes(batch))


def _read(batch, header, get) -> list:
    """``get(record)`` of each record of ``batch``, all ``header.record_count`` of them.
    Raises INVALID_RECORD for records that do not parse."""
    try:
        read = [get(record) for record in batch]
    except Exception as exc:        # the reader's CorruptRecordException, a header key not UTF-8
        raise KafkaApiError(ErrorCode.INVALID_RECORD, f"a record of the batch at position {header.position} "
                            f"does not parse: {exc}") from None
    if len(read) != header.record_count:
        raise KafkaApiError(ErrorCode.INVALID_RECORD, f"the batch at position {header.position} holds "
                            f"{len(read)} records, not {header.record_count}")
    return read


def _groups(items: list) -> list[tuple[int, object]]:
    """(count, item) of each stretch of equal consecutive ``items``."""
    if not items:
        return []
    if items.count(items[0]) == len(items):         # the usual batch: one schema id
        return [(len(items), items[0])]
    return [(sum(1 for _ in same), item) for item, same in itertools.groupby(items)]


def _uniform_runs(body: bytes, count: int, first: int, head: int, keys: bool,
                  values: bool) -> list[FieldRun] | None:
    """The runs of ``body``'s ``count`` records when each of record_chunks' chunks (else each
    CHUNK records of it) shares one layout and the first ``head`` bytes of the keys and values
    asked for; else None (nothing is concluded)."""
    runs: list[FieldRun] = []
    at = 0
    for start, last in record_chunks(count):
        run = _shared_run(body, at, start, last, head, keys, values)
        pieces = [(start, last, run)] if run is not None or last - start <= CHUNK else [
            (sub, min(last, sub + CHUNK), None) for sub in range(start, last, CHUNK)]
        for sub, sub_last, run in pieces:
            run = run or _shared_run(body, at, sub, sub_last, head, keys, values)
            if run is None:
                return None
            at, key, value = run
            if runs and runs[-1][2:] == (key, value):
                runs[-1] = (runs[-1][0], runs[-1][1] + sub_last - sub, key, value)
            else:
                runs.append((first + sub, sub_last - sub, key, value))
    return runs if at == len(body) else None


def _shared_run(body: bytes, at: int, first: int, last: int, head: int, keys: bool,
                values: bool) -> tuple[int, bytes | None, bytes | None] | None:
    """(position after, shared key head, shared value head) when records first .. last - 1
    at ``at`` share one layout and the first ``head`` bytes of their key and value (each
    None when not asked for)."""
    run = uniform_run(body, at, len(body), first, last)
    if run is None:
        return None
    stop, (_ts, _offset, key_start, value_start, record_size) = run
    count = last - first
    fields = []
    for length_at, wanted in ((at + key_start, keys), (at + value_start, values)):
        n, start = read_varint(body, length_at)
        if n < 0 or not wanted:
            fields.append(None)
            continue
        for j in range(start, start + min(n, head)):                # one strided slice per byte
            if body[j:stop:record_size] != bytes((body[j],)) * count:
                return None
        fields.append(body[start:start + min(n, head)])
    return stop, fields[0], fields[1]


def _body(blob, header, max_message_bytes: int) -> bytes:
    """The batch's records bytes, decompressed within the append's bound."""
    start, end = header.position + records.HEADER_SIZE, header.position + header.size
    records.compression_of(blob, header)            # UNSUPPORTED_COMPRESSION_TYPE for codecs 5-7
    if header.compression:
        return compression.decompress(header.compression, memoryview(blob)[start:end],
                                      compression.decompressed_limit(max_message_bytes))
    return bytes(memoryview(blob)[start:end])
