"""Record batch v2 header handling, against batches built by kafka-python."""
from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kwire.codecs import records as R
from kwire.codecs.errors import ErrorCode, KafkaApiError

_COMPRESSORS = {
    2: lambda body: bytes(cramjam.snappy.compress_raw(body)),
    3: lambda body: bytes(cramjam.lz4.compress(body)),
    4: lambda body: bytes(cramjam.zstd.compress(body)),
}


def build(values, *, compression=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
          timestamps=None, base_timestamp=1_000):
    """One batch as a client sends it (base offset 0); codecs 2-4 compressed with cramjam."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression if compression <= 1 else 0,
        is_transactional=False, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, batch_size=1 << 30)
    for i, value in enumerate(values):
        ts = timestamps[i] if timestamps else base_timestamp + i
        builder.append(i, timestamp=ts, key=b"k%d" % i, value=value, headers=[])
    batch = bytearray(builder.build())
    if compression > 1:
        body = _COMPRESSORS[compression](bytes(batch[R.HEADER_SIZE:]))
        batch = batch[:R.HEADER_SIZE] + body
        struct.pack_into(">i", batch, 8, len(batch) - R.LOG_OVERHEAD)
        struct.pack_into(">h", batch, 21, compression)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def fix_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_header_fields_match_kafka_python():
    batch = build([b"a", b"bb", b"ccc"], producer_id=7, producer_epoch=2, base_sequence=10)
    (h,) = R.validate_produce_records(batch, 1 << 20)
    theirs = DefaultRecordBatch(batch)
    assert (h.base_offset, h.magic, h.crc) == (0, 2, theirs.crc)
    assert h.size == len(batch) == theirs.size_in_bytes
    assert (h.record_count, h.last_offset_delta, h.last_offset) == (3, 2, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 10, 12)
    assert (h.base_timestamp, h.max_timestamp) == (1_000, 1_002)
    assert (h.compression, h.timestamp_type, h.is_transactional, h.is_control) == (0, 0, False, False)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_compressed_batches_validate_and_decode(codec):
    batch = build([b"x" * 100] * 5, compression=codec)
    (h,) = R.validate_produce_records(batch, 1 << 20)
    assert h.compression == codec
    assert R.compression_of(batch, h) == R.COMPRESSION_NAMES[codec]
    assert list(R.record_timestamps(batch, h)) == [(i, 1_000 + i) for i in range(5)]


def test_xerial_snappy_is_decoded():
    raw = build([b"v%d" % i for i in range(3)])
    body = raw[R.HEADER_SIZE:]
    block = bytes(cramjam.snappy.compress_raw(body))
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    batch = bytearray(raw[:R.HEADER_SIZE] + xerial)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, 2)
    batch = fix_crc(batch)
    (h,) = R.validate_produce_records(batch, 1 << 20)
    assert [o for o, _ in R.record_timestamps(batch, h)] == [0, 1, 2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=50), min_size=1, max_size=8), min_size=1, max_size=5),
       st.sampled_from([0, 1, 3, 4]))
def test_round_trip_many_batches(batches, codec):
    built = [build(values, compression=codec) for values in batches]
    blob = b"".join(built)
    headers = R.validate_produce_records(blob, 1 << 20)
    assert [h.record_count for h in headers] == [len(v) for v in batches]
    assert [h.size for h in headers] == [len(b) for b in built]
    assert [h.position for h in R.iter_batches(blob)] == [h.position for h in headers]
    scanned, valid = R.scan_valid_prefix(blob)
    assert valid == len(blob) and len(scanned) == len(batches)
    # Stamping offsets/epoch leaves the CRC valid and kafka-python sees the offsets.
    buf, offset = bytearray(blob), 100
    for h in headers:
        R.stamp(buf, h.position, offset, 5)
        offset += h.record_count
    decoded = [DefaultRecordBatch(bytes(buf[h.position:h.position + h.size])) for h in headers]
    assert all(b.validate_crc() for b in decoded)
    assert [b.base_offset for b in decoded] == [
        100 + sum(len(v) for v in batches[:i]) for i in range(len(batches))]
    assert all(b.leader_epoch == 5 for b in decoded)


def test_every_byte_flip_after_crc_start_is_corrupt():
    batch = build([b"hello", b"world"], producer_id=1, producer_epoch=0, base_sequence=0)
    for i in range(R.CRC_START, len(batch)):
        flipped = bytearray(batch)
        flipped[i] ^= 0xFF
        with pytest.raises(KafkaApiError) as err:
            R.validate_produce_records(bytes(flipped), 1 << 20)
        assert err.value.code == ErrorCode.CORRUPT_MESSAGE, i
        assert R.scan_valid_prefix(bytes(flipped)) == ([], 0)


def test_truncation_at_every_byte():
    two = build([b"a" * 20] * 3) + build([b"b" * 20] * 2)
    first = R.read_header(two).size
    for cut in range(len(two)):
        part = two[:cut]
        if cut != first:
            with pytest.raises(KafkaApiError) as err:
                R.validate_produce_records(part, 1 << 20)
            assert err.value.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        headers, valid = R.scan_valid_prefix(part)
        assert valid == (first if cut >= first else 0)
        assert len(headers) == (1 if cut >= first else 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_kafka_api_error(data):
    try:
        R.validate_produce_records(data, 1 << 20)
    except KafkaApiError:
        pass
    try:
        list(R.iter_batches(data))
    except KafkaApiError:
        pass
    headers, valid = R.scan_valid_prefix(data)
    assert 0 <= valid <= len(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=120), st.integers(0, 4))
def test_garbage_bodies_with_valid_crc_are_refused(body, codec):
    batch = bytearray(build([b"x"])[:R.HEADER_SIZE] + body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, codec)
    batch = fix_crc(batch)
    try:
        (h,) = R.validate_produce_records(batch, 1 << 20)
    except KafkaApiError as exc:
        assert exc.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        return
    # Passed: then it is one well-formed record, and reading its timestamp works.
    assert list(DefaultRecordBatch(batch)) and len(list(R.record_timestamps(batch, h))) == 1


@pytest.mark.parametrize("produce_version", [3, 6, 7, 11])
def test_legacy_magic_is_invalid_record_on_every_produce_version(produce_version):
    # Kafka's ProduceRequest.validateRecords: magic 2 only for Produce v3+, InvalidRecordException.
    for magic in (0, 1):
        batch = bytearray(build([b"a"]))
        batch[16] = magic
        with pytest.raises(KafkaApiError) as err:
            R.validate_produce_records(bytes(batch), 1 << 20, produce_version=produce_version)
        assert err.value.code == ErrorCode.INVALID_RECORD
        assert "only allowed to contain record batches with magic version 2" in err.value.message


def test_message_too_large():
    batch = build([b"x" * 1000])
    assert R.validate_produce_records(batch, len(batch))
    with pytest.raises(KafkaApiError) as err:
        R.validate_produce_records(batch, len(batch) - 1)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("patch, code", [
    ((57, ">i", 5), ErrorCode.INVALID_RECORD),          # recordCount != lastOffsetDelta + 1
    ((57, ">i", 0), ErrorCode.INVALID_RECORD),
    ((23, ">i", -1), ErrorCode.INVALID_RECORD),
    ((21, ">h", 5), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ((21, ">h", 0x20), ErrorCode.INVALID_RECORD),        # control batch from a client
    ((43, ">q", 9), ErrorCode.INVALID_RECORD),           # producer id without a sequence
    ((16, ">b", 3), ErrorCode.CORRUPT_MESSAGE),
    ((8, ">i", 10), ErrorCode.CORRUPT_MESSAGE),          # length below the header
])
def test_inconsistent_headers(patch, code):
    batch = bytearray(build([b"a", b"b"]))
    position, fmt, value = patch
    struct.pack_into(fmt, batch, position, value)
    with pytest.raises(KafkaApiError) as err:
        R.validate_produce_records(fix_crc(batch), 1 << 20)
    assert err.value.code == code


def test_empty_and_trailing_bytes():
    with pytest.raises(KafkaApiError) as err:
        R.validate_produce_records(b"", 1 << 20)
    assert err.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(KafkaApiError) as err:
        R.validate_produce_records(build([b"a"]) + b"\x00\x00\x00", 1 << 20)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


def test_own_batch_headers_match_full_validation_and_keep_the_limits():
    """The broker's own batches (coordinator records) skip the record walk, not the limits."""
    batches = build([b"a" * 10, b"b" * 20]) + build([b"c"])
    assert R.own_batch_headers(batches, 1 << 20) == R.validate_produce_records(batches, 1 << 20)
    with pytest.raises(KafkaApiError) as err:
        R.own_batch_headers(batches, len(build([b"c"])) - 1)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(KafkaApiError) as err:
        R.own_batch_headers(batches[:-1], 1 << 20)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaApiError) as err:
        R.own_batch_headers(b"", 1 << 20)
    assert err.value.code == ErrorCode.INVALID_RECORD


def test_set_log_append_time_keeps_a_valid_crc():
    batch = bytearray(build([b"a", b"b"], compression=1))
    (h,) = R.validate_produce_records(bytes(batch), 1 << 20)
    R.set_log_append_time(batch, h.position, h.size, 123_456)
    (h2,), valid = R.scan_valid_prefix(bytes(batch))
    assert valid == len(batch)
    assert (h2.timestamp_type, h2.max_timestamp, h2.base_timestamp) == (1, 123_456, 1_000)
    theirs = DefaultRecordBatch(bytes(batch))
    assert theirs.validate_crc()
    assert [r.timestamp for r in theirs] == [123_456, 123_456]
    assert [t for _, t in R.record_timestamps(batch, h2)] == [123_456, 123_456]


def test_sequence_wraps():
    batch = build([b"a"] * 3, producer_id=1, producer_epoch=0, base_sequence=R.INT32_MAX - 1)
    (h,) = R.validate_produce_records(batch, 1 << 20)
    assert h.last_sequence == 0          # MAX-1, MAX, 0
