"""Spliced Fetch responses decode exactly like fully encoded ones."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from kwire.codecs import messages
from kwire.codecs.splice import encode_spliced, parts_size


class Deferred:
    def __init__(self, data):
        self.data = data
        self.size = len(data)


def fetch_fields(records):
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
             "log_start_offset": 0, "aborted_transactions": [], "preferred_read_replica": -1,
             "records": r} for i, r in enumerate(records)]}]}


@pytest.mark.parametrize("version", [4, 7, 11, 12])
@pytest.mark.parametrize("sizes", [[0], [5], [200, 0, 70000], [1 << 20, 3]])
def test_spliced_equals_whole(version, sizes):
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    whole = messages.encode_response(1, version, fetch_fields(payloads))
    parts = encode_spliced(1, version, fetch_fields([Deferred(p) for p in payloads]))
    assert parts_size(parts) == len(whole)
    joined = b"".join(p if isinstance(p, bytes) else p.data for p in parts)
    assert joined == whole
    decoded = FetchResponse.decode(joined, version=version)
    assert [p.records or b"" for p in decoded.responses[0].partitions] == payloads


def test_without_deferred_is_one_part():
    assert len(encode_spliced(1, 12, fetch_fields([b"abc"]))) == 1


# --- structural splicing: no field value can be mistaken for a record set -------------

OLD_MARKER = b"\xfe\xedKW"  # what the marker-searching encoder looked for


def int64_containing(pattern: bytes):
    """int64 values whose big-endian bytes hold ``pattern`` at some position."""
    return st.integers(0, 8 - len(pattern)).flatmap(
        lambda at: st.tuples(st.binary(min_size=at, max_size=at),
                             st.binary(min_size=8 - len(pattern) - at, max_size=8 - len(pattern) - at))
    ).map(lambda pre_post: int.from_bytes(pre_post[0] + pattern + pre_post[1], "big", signed=True))


offsets = st.one_of(st.just(0xFEED4B57), st.integers(-1, (1 << 63) - 1), int64_containing(OLD_MARKER),
                    int64_containing(OLD_MARKER + b"\x00\x00"))
partitions = st.lists(st.tuples(offsets, offsets, st.integers(0, 300), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(4, 12), partitions=partitions)
def test_spliced_fetch_decodes_to_its_input(version, partitions):
    payloads = [bytes([i % 251]) * size for i, (_, _, size, _) in enumerate(partitions)]
    records = [Deferred(p) if deferred else p for p, (_, _, _, deferred) in zip(payloads, partitions)]
    fields = fetch_fields(records)
    for entry, (hwm, log_start, _, _) in zip(fields["responses"][0]["partitions"], partitions):
        entry.update(high_watermark=hwm, last_stable_offset=hwm, log_start_offset=log_start)
    parts = encode_spliced(1, version, fields)

    assert [p for p in parts if not isinstance(p, bytes)] == [r for r in records
                                                             if isinstance(r, Deferred) and r.size]
    assert all(isinstance(p, bytes) for p in parts[::2]) and not any(isinstance(p, bytes) for p in parts[1::2])
    joined = b"".join(p if isinstance(p, bytes) else p.data for p in parts)
    assert parts_size(parts) == len(joined)
    decoded = FetchResponse.decode(joined, version=version).responses[0].partitions
    has_log_start = version >= 5  # otherwise it decodes as its default, -1
    assert [(p.high_watermark, p.last_stable_offset, p.log_start_offset, p.records) for p in decoded] == [
        (hwm, hwm, log_start if has_log_start else -1, payload)
        for (hwm, log_start, _, _), payload in zip(partitions, payloads)]


@pytest.mark.parametrize("version", [4, 11, 12])
def test_high_watermark_with_the_old_marker_bytes(version):
    """0xFEED4B57 followed by a zero int32 spelt the old marker for record set 0."""
    fields = fetch_fields([Deferred(b"x" * 100)])
    fields["responses"][0]["partitions"][0].update(high_watermark=0xFEED4B57, last_stable_offset=7)
    parts = encode_spliced(1, version, fields)
    joined = b"".join(p if isinstance(p, bytes) else p.data for p in parts)
    partition = FetchResponse.decode(joined, version=version).responses[0].partitions[0]
    assert (partition.high_watermark, partition.last_stable_offset, partition.records) == (0xFEED4B57, 7, b"x" * 100)
