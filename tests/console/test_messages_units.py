"""The messages page's parts that need no broker or browser: the JSON-path filter, how bytes
are shown, fetched batches read back (built by kafka-python's batch builder, as a client
writes them), the scan's bounds over a fake partition, and the query's parsing."""
from __future__ import annotations

import json
import re
import struct
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.console import browse, jsonpath
from kwire.console.batches import Record, RecordSet, read_record_set
from kwire.console.decode import RegistryDecoder, message_indexes, show
from kwire.console.pages.messages import parse_headers, parse_query, parse_time
from kwire.console.reader import scan


# -- the JSON-path filter -----------------------------------------------------------------------
ORDER = {"customer": {"id": 42, "name": "Ada"}, "status": "shipped", "items": [{"price": 12.5}],
         "paid": True, "note": None, "odd key": {"x": 1}}


@pytest.mark.parametrize("expression, expected", [
    ("$.customer.id == 42", True), ("$.customer.id == 42.0", True), ("$.customer.id == '42'", False),
    ("$.customer.id != 41", True), ("$.status", True), ("$.status exists", True), ("$.missing", False),
    ("$.note", False), ("$.note == null", True), ('$.status == "shipped"', True), ("$.status == shipped", True),
    ("$.status = shipped", True), ("$.items[0].price >= 10", True), ("$.items[1].price >= 10", False),
    ("$.items[-1].price < 13", True), ("$.paid == true", True), ("$.paid == 1", False),
    ("$.customer.name > 'A'", True), ("$.customer.name > 5", False), ('$["odd key"].x == 1', True),
    ("$['odd key'].x == 1", True), ("$.missing != 1", False), ("$ exists", True),
])
def test_json_path_filters_match_as_documented(expression, expected):
    assert jsonpath.parse(expression).matches(ORDER) is expected


@pytest.mark.parametrize("expression, complaint", [
    ("", "empty"), ("status == 1", "starts with $"), ("$.", "expected a name"), ("$.a ==", "needs a value"),
    ("$.a ~ 1", "expected an operator"), ("$.a == {}", "not an object"), ("$.a exists 1", "nothing may follow"),
    ("$[x]", "expected [number]"), ('$.a == "open', "unterminated"), ("$" + ".a" * 100, "at most"),
])
def test_a_bad_filter_says_what_is_wrong(expression, complaint):
    with pytest.raises(jsonpath.FilterSyntaxError, match=re.escape(complaint)):
        jsonpath.parse(expression)


def test_a_filter_on_a_non_object_value_matches_nothing():
    path = jsonpath.parse("$.a.b == 1")
    assert not any(path.matches(v) for v in (None, 1, "a", [1], {"a": 1}, {"a": [1]}))


# -- showing bytes ------------------------------------------------------------------------------
def test_values_are_shown_as_json_text_or_hex():
    assert show(None).kind == "null" and show(b"").kind == "empty"
    shown = show(b'{"a":1,"b":[true]}')
    assert (shown.kind, shown.data) == ("json", {"a": 1, "b": [True]})
    assert shown.text == '{\n  "a": 1,\n  "b": [\n    true\n  ]\n}'
    assert (show(b"hello").kind, show(b"hello").text, show(b"hello").hex) == ("text", "hello", "68 65 6c 6c 6f")
    assert show(b"42").has_data and show(b"42").data == 42 and show(b"42").kind == "text"
    binary = show(b"\xde\xad\x00")
    assert (binary.kind, binary.text, binary.hex) == ("binary", None, "de ad 00")
    assert show(b"a\x00b").kind == "binary" and show(b"a\x00b").escaped == "a\\x00b"   # UTF-8, but not text
    framed = b"\x00\x00\x00\x00\x07\x02"                          # Confluent framing, no registry: bytes
    assert show(framed).kind == "binary" and show(framed).error is None
    big = show(b"x" * 100_000)
    assert big.cut and len(big.text) < 21_000 and big.hex.endswith("bytes)")


def test_protobuf_message_indexes_are_read_as_confluent_writes_them():
    assert message_indexes(b"\x00rest") == ([0], 1)
    assert message_indexes(b"\x04\x02\x06rest") == ([1, 3], 3)     # zigzag: count 2, then 1 and 3
    with pytest.raises(ValueError):
        message_indexes(b"\x04\x02")


# -- batches as a Fetch returns them ---------------------------------------------------------------
def batch(base_offset: int, codec: int, records: list[tuple], *, log_append_time: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)                      # outside the CRC, as a broker stamps it
    if log_append_time:
        data[22] |= 0x08                                              # no CRC check in the reader
    return bytes(data)


def test_fetched_batches_are_read_with_their_codec_and_headers():
    blob = (batch(0, 1, [(b"k0", b"gzip " * 20, [("h", b"v")]), (None, None, [])])
            + batch(2, 3, [(b"k2", b"lz4 " * 30, [("bin", b"\xff"), ("null", None)])])
            + batch(3, 0, [(b"k3", b"plain", [])], log_append_time=True))
    found = read_record_set(blob, 1)
    assert [(r.offset, r.codec, r.key) for r in found.records] == [
        (1, "gzip", None), (2, "lz4", b"k2"), (3, "none", b"k3")]
    assert found.records[1].headers == [("bin", b"\xff"), ("null", None)]
    assert found.records[2].timestamp_type == "LogAppendTime"
    assert found.next_offset == 4 and not found.problems and found.bytes_read == len(blob)


def test_a_batch_cut_by_max_bytes_is_left_for_the_next_fetch_and_a_corrupt_one_is_reported():
    first, second = batch(0, 0, [(b"a", b"1", [])]), batch(1, 0, [(b"b", b"2", [])])
    cut = read_record_set(first + second[:30], 0)
    assert [r.offset for r in cut.records] == [0] and cut.next_offset == 1 and not cut.problems
    corrupt = bytearray(second)
    corrupt[61:] = b"\x7f" * (len(corrupt) - 61)                      # the records, not the header
    bad = read_record_set(first + bytes(corrupt), 0)
    assert [r.offset for r in bad.records] == [0] and bad.next_offset == 2
    assert bad.problems and bad.problems[0].base_offset == 1


# -- the scan's bounds, over a fake partition ------------------------------------------------------
class FakeReader:
    """Serves ``records`` (offsets with gaps, as after compaction) a few per fetch."""

    def __init__(self, offsets: list[int], per_fetch: int = 3, high_watermark: int | None = None):
        self.records = [Record(o, 0, "CreateTime", str(o % 3).encode(), json.dumps({"n": o}).encode(), [], "none")
                        for o in offsets]
        self.per_fetch = per_fetch
        self.high_watermark = high_watermark if high_watermark is not None else offsets[-1] + 1
        self.deadline = float("inf")
        self.fetches = 0

    def fetch(self, offset: int):
        self.fetches += 1
        ahead = [r for r in self.records if r.offset >= offset][:self.per_fetch]
        next_offset = ahead[-1].offset + 1 if ahead else self.high_watermark
        return RecordSet(ahead, next_offset, [], 100), self.high_watermark, 0


def test_a_scan_reads_the_first_or_the_last_matches_within_its_bounds():
    reader = FakeReader([0, 1, 2, 5, 6, 9, 10, 11], high_watermark=13)   # 11-12: say a control batch
    assert [r.offset for r in scan(reader, 0, None, 4).records] == [0, 1, 2, 5]
    found = scan(reader, 3, None, 50)
    assert [r.offset for r in found.records] == [5, 6, 9, 10, 11] and found.next_offset == 13
    last = scan(reader, 0, 13, 2, keep_last=True)
    assert [r.offset for r in last.records] == [10, 11] and last.scanned == 8
    keyed = scan(reader, 0, None, 50, lambda r: r.key == b"0")
    assert [r.offset for r in keyed.records] == [0, 6, 9] and not keyed.capped
    capped = scan(reader, 0, None, 50, lambda r: False, max_records=4)
    assert capped.capped and capped.scanned == 4 and capped.next_offset == 6
    assert scan(reader, 13, None, 5).records == [] and scan(reader, 13, None, 5).next_offset == 13


def test_a_scan_stops_at_its_stop_offset():
    found = scan(FakeReader(list(range(20)), per_fetch=7), 2, 9, 50)
    assert [r.offset for r in found.records] == list(range(2, 9)) and found.next_offset == 9


# -- the page's query ------------------------------------------------------------------------------
def test_the_query_defaults_follow_what_was_given():
    assert parse_query({"topic": "t"}).start == "end"
    assert parse_query({"topic": "t", "offset": "5"}).start == "offset"
    q = parse_query({"topic": "t", "timestamp": "2023-11-14T22:13:20Z", "limit": "9999", "path": "$.a == 1"})
    assert (q.start, q.timestamp_ms, q.limit, q.errors) == ("timestamp", 1_700_000_000_000, browse.MAX_LIMIT, [])
    assert q.filtered and q.path_filter.matches({"a": 1})
    bad = parse_query({"topic": "t", "partition": "-1", "start": "offset", "timestamp": "x", "path": "a"})
    assert len(bad.errors) == 3                        # partition, missing offset, path


def test_times_and_headers_parse():
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14 22:13:20") == parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(ValueError):
        parse_time("yesterday")
    errors: list[str] = []
    assert parse_headers("a: 1\n\nb:two: x\r\n", errors) == [("a", b"1"), ("b", b"two: x")] and not errors
    parse_headers("no colon", errors)
    assert errors and "line 1" in errors[0]


def test_a_registry_that_does_not_answer_is_shown_once_per_record_not_waited_for_again():
    registry = RegistryDecoder("http://127.0.0.1:9", timeout_s=2)      # nothing listens on port 9
    framed = b"\x00\x00\x00\x00\x05\x02\x06abc"
    first = show(framed, registry)
    assert first.kind == "binary" and first.schema_id == 5 and "did not answer" in first.error
    started = time.monotonic()
    again = show(b"\x00\x00\x00\x00\x06xyz", registry)                 # another id: the registry is down
    assert "did not answer" in again.error and time.monotonic() - started < 0.5


def test_a_read_from_a_cluster_that_does_not_answer_fails_within_its_bound(monkeypatch):
    from kafka.errors import KafkaError
    from kwire.console.access import KafkaAccess, error_text
    monkeypatch.setattr(browse, "BOOTSTRAP_TIMEOUT_MS", 1000)
    access = KafkaAccess({"bootstrap_servers": "127.0.0.1:9"})
    started = time.monotonic()
    with pytest.raises(KafkaError) as failed:
        browse.browse(access, parse_query({"topic": "t"}), None)
    assert time.monotonic() - started < 5
    assert "bootstrap" in error_text(failed.value)
