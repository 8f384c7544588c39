"""Spliced Fetch responses decode exactly like fully encoded ones."""
import pytest
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
