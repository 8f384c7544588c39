"""The messages page's blocking work: browse a partition, tail it, produce to it.

Each function runs in a worker thread (``await access.run(fn, ...)``), opens its own
connections (``reader.Connections`` with ``access.client_config``, closed before it returns)
for a ``PartitionReader`` and finishes within ``READ_DEADLINE_S`` (plus the bootstrap's
``BOOTSTRAP_TIMEOUT_MS``).  A ``Query`` says what to show; the result holds ``Row``s ready
for the templates (keys, values and headers decoded by ``kwire.console.decode``).

Filters (``Query.matcher``): the key equals a text, the value contains a text (case-
insensitive; a registry-decoded value is searched as its JSON), a JSON path matches
(``kwire.console.jsonpath``).  A filtered read examines at most ``SCAN_RECORDS`` records.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kwire.console.batches import Record
from kwire.console.decode import RegistryDecoder, Shown, hex_of, pretty, show
from kwire.console.jsonpath import Filter
from kwire.console.reader import EARLIEST, LATEST, SCAN_RECORDS, Connections, PartitionReader, Scan, scan

READ_DEADLINE_S = 10.0
BOOTSTRAP_TIMEOUT_MS = 6000
PRODUCE_TIMEOUT_S = 10.0
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
TAIL_KEEP = 200                     # rows a live tail keeps on screen (and reads per poll at most)
HEADER_HEX = 64                     # bytes of a header value shown as hex


@dataclass
class Query:
    """What the page was asked for (``pages.messages.parse_query`` builds it)."""
    topic: str = ""
    partition: int = 0
    start: str = "end"              # beginning, end, offset, timestamp
    offset: int | None = None
    timestamp: str = ""
    timestamp_ms: int | None = None
    limit: int = DEFAULT_LIMIT
    key: str = ""
    text: str = ""
    path: str = ""
    path_filter: Filter | None = None
    tail: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def filtered(self) -> bool:
        return bool(self.key or self.text or self.path_filter)

    def matcher(self, registry: RegistryDecoder | None) -> Callable[[Record], bool] | None:
        tests: list[Callable[[Record], bool]] = []
        if self.key:
            wanted = self.key.encode("utf-8")
            tests.append(lambda r: r.key == wanted)
        if self.text:
            needle = self.text.casefold()
            tests.append(lambda r: needle in _searchable(r.value, registry).casefold())
        if self.path_filter is not None:
            path = self.path_filter

            def json_path(r: Record) -> bool:
                value = show(r.value, registry)
                return value.has_data and path.matches(value.data)
            tests.append(json_path)
        if not tests:
            return None
        return lambda r: all(test(r) for test in tests)


def _searchable(value: bytes | None, registry: RegistryDecoder | None) -> str:
    if value is None:
        return ""
    if registry is not None and value[:1] == b"\x00":
        shown = show(value, registry)
        if shown.schema_id is not None and shown.has_data:
            return pretty(shown.data)
    return value.decode("utf-8", "replace")


@dataclass
class HeaderView:
    name: str
    text: str | None                # None: null, or not UTF-8 (then see hex)
    hex: str
    null: bool = False


@dataclass
class Row:
    offset: int
    timestamp: str
    timestamp_ms: int
    timestamp_type: str
    codec: str
    transactional: bool
    key: Shown
    value: Shown
    headers: list[HeaderView]


def utc_text(ms: int) -> str:
    if ms is None or ms < 0:
        return "–"
    at = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return at.strftime("%Y-%m-%d %H:%M:%S") + f".{ms % 1000:03d} UTC"


def row_of(record: Record, registry: RegistryDecoder | None) -> Row:
    headers = []
    for name, value in record.headers:
        if value is None:
            headers.append(HeaderView(name, None, "", null=True))
            continue
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        headers.append(HeaderView(name, text, hex_of(value, HEADER_HEX)))
    return Row(record.offset, utc_text(record.timestamp), record.timestamp, record.timestamp_type, record.codec,
               record.transactional, show(record.key, registry), show(record.value, registry), headers)


@dataclass
class Browse:
    rows: list[Row]
    scan: Scan
    start_offset: int               # where the read began
    log_start_offset: int
    end_offset: int                 # the high watermark when the read began
    partitions: int | None
    note: str | None = None


def _connections(access) -> Connections:
    return Connections(access.client_config, BOOTSTRAP_TIMEOUT_MS)


def _reader(connections: Connections, topic: str, partition: int) -> PartitionReader:
    return PartitionReader(connections.manager, topic, partition, time.monotonic() + READ_DEADLINE_S)


def browse(access, query: Query, registry: RegistryDecoder | None) -> Browse:
    """The records ``query`` asks for.  Raises ReadError or kafka-python's errors."""
    with _connections(access) as connections:
        reader = _reader(connections, query.topic, query.partition)
        reader.leader()
        log_start, end = reader.list_offset(EARLIEST) or 0, reader.list_offset(LATEST) or 0
        start, stop, keep_last, note = _plan(reader, query, log_start, end)
        found = scan(reader, start, stop, query.limit, query.matcher(registry), keep_last=keep_last,
                     bounds=(log_start, end))
        rows = [row_of(r, registry) for r in found.records]
        return Browse(rows, found, start, log_start, end, reader.partitions, note)


def _plan(reader: PartitionReader, query: Query, log_start: int, end: int) -> tuple[int, int | None, bool, str | None]:
    """(start, stop, keep_last, note) of the read ``query`` asks for."""
    window = SCAN_RECORDS if query.filtered else query.limit
    if query.start == "end" or query.tail:
        return max(log_start, end - window), end, True, None
    if query.start == "beginning":
        return log_start, None, False, None
    if query.start == "timestamp" and query.timestamp_ms is not None:
        found = reader.list_offset(query.timestamp_ms)
        if found is None:
            return end, end, False, f"No record has a timestamp at or after {utc_text(query.timestamp_ms)}."
        return max(found, log_start), None, False, None
    offset = query.offset if query.offset is not None else log_start
    if offset < log_start:
        return log_start, None, False, f"Offset {offset} is before the log start ({log_start}): shown from there."
    if offset > end:
        return end, end, False, f"Offset {offset} is past the end ({end})."
    return offset, None, False, None


@dataclass
class Tail:
    rows: list[Row]
    after: int                      # the next poll reads from here
    skipped: int = 0                # records passed over to keep up
    scanned: int = 0


def tail(access, query: Query, after: int, registry: RegistryDecoder | None) -> Tail:
    """Records from ``after`` to the current end (the newest ``TAIL_KEEP`` matching ones of at
    most ``SCAN_RECORDS``).  Raises ReadError or kafka-python's errors."""
    from kafka.errors import OffsetOutOfRangeError
    with _connections(access) as connections:
        reader = _reader(connections, query.topic, query.partition)
        end = reader.list_offset(LATEST) or 0
        if after >= end:
            return Tail([], min(after, end))      # nothing new (or the partition was truncated)
        start = max(after, end - (SCAN_RECORDS if query.filtered else TAIL_KEEP))
        try:
            found = scan(reader, start, end, TAIL_KEEP, query.matcher(registry), keep_last=True)
        except OffsetOutOfRangeError:         # retention removed what the tail had not read yet
            start = max(start, reader.list_offset(EARLIEST) or 0)
            found = scan(reader, start, end, TAIL_KEEP, query.matcher(registry), keep_last=True)
        return Tail([row_of(r, registry) for r in found.records], found.next_offset, start - after, found.scanned)


def produce(access, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
            headers: list[tuple[str, bytes]]) -> Any:
    """Send one record with the console's producer and wait for its acknowledgement: the
    RecordMetadata (partition, offset).  The topic (and partition) are checked first, with a
    bounded Metadata request, so the producer never waits for a topic that does not exist."""
    with _connections(access) as connections:
        _reader(connections, topic, 0 if partition is None else partition).leader()
    producer = access.producer()
    future = producer.send(topic, value=value, key=key, headers=headers or None, partition=partition)
    return future.get(timeout=PRODUCE_TIMEOUT_S)

