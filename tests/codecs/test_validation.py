"""Record-level Produce validation (Kafka's LogValidator rules) and bounded decompression."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import crc32c
import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kwire.codecs import compression as C
from kwire.codecs import records as R
from kwire.codecs import validation as V
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.validation import RecordRules, RecordValidationError

NOW = 1_700_000_000_000
MiB = 1 << 20
CODECS = [0, 1, 2, 3, 4]      # none, gzip, snappy, lz4, zstd: kafka-python's own codecs


def kp_batch(records, codec=0, base_timestamp=None):
    """A batch from kafka-python's DefaultRecordBatchBuilder; records are (key, value, headers, ts)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts if ts is not None else NOW + i, key=key, value=value,
                       headers=headers)
    return bytes(builder.build())


def simple(n, codec=0, key=b"k", value=b"value"):
    return kp_batch([(key, value, [], None)] * n, codec)


def envelope(body: bytes, *, count: int, codec: int = 0, last_offset_delta: int | None = None,
             base_timestamp: int = NOW, attributes: int | None = None) -> bytes:
    """A batch header with a valid CRC around ``body`` (the records, compressed or not)."""
    header = bytearray(simple(1)[:R.HEADER_SIZE])
    struct.pack_into(">i", header, 8, R.HEADER_SIZE + len(body) - R.LOG_OVERHEAD)
    struct.pack_into(">h", header, 21, codec if attributes is None else attributes)
    struct.pack_into(">i", header, 23, count - 1 if last_offset_delta is None else last_offset_delta)
    struct.pack_into(">qq", header, 27, base_timestamp, base_timestamp)
    struct.pack_into(">i", header, 57, count)
    batch = header + body
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def body_of(batch: bytes) -> bytes:
    return batch[R.HEADER_SIZE:]


def payload(n: int, codec: int) -> bytes:
    """The (compressed) records of ``simple(n)``."""
    raw = body_of(simple(n))
    return C_compress(codec, raw) if codec else raw


def refused(blob, code, **kwargs) -> KafkaApiError:
    with pytest.raises(KafkaApiError) as err:
        R.validate_produce_records(blob, MiB, **kwargs)
    assert err.value.code == code, err.value
    return err.value


# -- valid batches pass ---------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_pass_with_every_codec(codec):
    records = [(None if i % 7 == 0 else b"key-%d" % i,
                None if i % 11 == 0 else os.urandom(i % 300) + b"v" * (i % 5000),
                [("h%d" % j, b"x" * j) for j in range(i % 3)] + ([("n", None)] if i % 13 == 0 else []),
                NOW + i * 37) for i in range(9000)]          # multi-byte offset and timestamp deltas
    batch = kp_batch(records, codec)
    (h,) = R.validate_produce_records(batch, 64 * MiB)
    assert h.record_count == 9000 and h.compression == codec


def test_many_batches_and_empty_values_pass():
    blob = b"".join(simple(n, codec, key=b"", value=b"") for n in (1, 63, 64, 65, 200) for codec in CODECS)
    assert len(R.validate_produce_records(blob, MiB)) == 25


# -- poison batches from the issue -------------------------------------------------

@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload_is_corrupt_message(codec):
    err = refused(envelope(os.urandom(200), count=3, codec=codec), ErrorCode.CORRUPT_MESSAGE)
    assert "decompress" in err.message


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_inside_valid_compression_is_invalid_record(codec):
    body = C_compress(codec, os.urandom(300))
    refused(envelope(body, count=3, codec=codec), ErrorCode.INVALID_RECORD)


def test_garbage_uncompressed_records_are_invalid_record():
    refused(envelope(b"\xff" * 64, count=2), ErrorCode.INVALID_RECORD)
    refused(envelope(bytes(range(64)), count=2), ErrorCode.INVALID_RECORD)


@pytest.mark.parametrize("codec", CODECS)
def test_batch_claiming_1000_records_holding_one(codec):
    err = refused(envelope(payload(1, codec), count=1000, codec=codec), ErrorCode.INVALID_RECORD)
    assert "incorrect declared batch size" in err.message


def test_one_record_claiming_offset_delta_int32_max_minus_one():
    # lastOffsetDelta 2^31-2 with a matching count: would move the log end to 2^31-1.
    err = refused(envelope(body_of(simple(1)), count=2**31 - 1), ErrorCode.INVALID_RECORD)
    assert "cannot fit" in err.message


def test_fewer_records_than_bytes_leaves_trailing_bytes():
    two = simple(2)
    refused(envelope(body_of(two), count=1, last_offset_delta=0), ErrorCode.INVALID_RECORD)
    refused(envelope(body_of(simple(1)) + b"\x00" * 7, count=1), ErrorCode.INVALID_RECORD)


def test_offset_deltas_must_be_the_record_index():
    first = body_of(simple(1))                      # offset delta 0
    err = refused(envelope(first + first, count=2), ErrorCode.INVALID_RECORD)
    assert isinstance(err, RecordValidationError)
    assert [e.batch_index for e in err.record_errors] == [1]


def test_record_length_inconsistent_with_fields():
    good = bytearray(body_of(simple(1, value=b"abc")))
    longer = bytearray(good)
    longer[0] += 2                                   # length + 1 (zigzag), one spare byte
    refused(envelope(bytes(longer) + b"\x00", count=1), ErrorCode.INVALID_RECORD)
    shorter = bytearray(good)
    shorter[0] -= 2
    refused(envelope(bytes(shorter), count=1), ErrorCode.INVALID_RECORD)


def test_log_append_time_batch_from_a_producer_is_invalid_timestamp():
    # Kafka's validateTimestamp: "Producer should not set timestamp type to LogAppendTime."
    batch = envelope(body_of(simple(2)), count=2, attributes=R.TIMESTAMP_TYPE_BIT)
    err = refused(batch, ErrorCode.INVALID_TIMESTAMP)
    assert [e.batch_index for e in err.record_errors] == [0, 1]


def test_zstd_needs_produce_v7():
    batch = simple(3, 4)
    refused(batch, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, produce_version=6)
    assert R.validate_produce_records(batch, MiB, produce_version=7)
    # every batch is checked, not only the first
    refused(simple(1) + batch, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, produce_version=3)


# -- topic rules: compaction keys and timestamps ------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_compacted_topic_needs_keys(codec):
    rules = RecordRules.for_topic("compact,delete", "CreateTime", 2**63 - 1, 2**63 - 1)
    assert R.validate_produce_records(simple(3, codec), MiB, rules=rules)
    batch = kp_batch([(b"a", b"1", [], None), (None, b"2", [], None), (None, None, [], None)], codec)
    assert R.validate_produce_records(batch, MiB)          # fine on a delete topic
    err = refused(batch, ErrorCode.INVALID_RECORD, rules=rules)
    assert [e.batch_index for e in err.record_errors] == [1, 2]
    assert err.record_errors[0].message == "Compacted topic cannot accept message without key"


def test_timestamps_outside_the_window_are_invalid_timestamp():
    rules = RecordRules.for_topic("delete", "CreateTime", 1_000, 500)
    records = [(b"k", b"v", [], ts) for ts in (NOW - 1_000, NOW + 500, NOW - 1_001, NOW + 501, -1)]
    err = refused(kp_batch(records), ErrorCode.INVALID_TIMESTAMP, rules=rules, now_ms=NOW)
    assert [e.batch_index for e in err.record_errors] == [2, 3]
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    ok = kp_batch(records[:2])
    assert R.validate_produce_records(ok, MiB, rules=rules, now_ms=NOW)
    # LogAppendTime topics and unset bounds do not check record timestamps
    for unchecked in (RecordRules.for_topic("delete", "LogAppendTime", 1_000, 500),
                      RecordRules.for_topic("delete", "CreateTime", 2**63 - 1, 2**63 - 1)):
        assert R.validate_produce_records(kp_batch(records), MiB, rules=unchecked, now_ms=NOW)


# -- decompression bombs -------------------------------------------------------------

def C_compress(codec: int, data: bytes) -> bytes:
    from kafka import codec as kc
    return {1: kc.gzip_encode, 2: kc.snappy_encode, 3: kc.lz4_encode, 4: kc.zstd_encode}[codec](data)


def test_decompression_bombs_are_refused_without_allocating_them():
    # Run in a child so its peak RSS is the bombs' cost alone.  Each bomb fits in
    # max.message.bytes (2 MiB) but expands to 256 MiB .. 1 GiB.
    script = textwrap.dedent('''
        import resource, struct, zlib
        from kwire.codecs import compression as C
        from kwire.codecs.errors import KafkaApiError
        limit = C.decompressed_limit(2 << 20)
        zeros = bytes(1 << 20)
        deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
        gz = b"".join(deflate.compress(zeros) for _ in range(256)) + deflate.flush()
        # zstd: one frame of 8192 RLE blocks of 128 KiB (1 GiB), 4 bytes each
        rle = struct.pack("<I", (128 << 10) << 3 | 1 << 1)[:3] + b"\\0"
        last = struct.pack("<I", (128 << 10) << 3 | 1 << 1 | 1)[:3] + b"\\0"
        zst = struct.pack("<I", 0xFD2FB528) + bytes([0, 0x38]) + rle * 8191 + last
        # lz4: one frame of 16384 stored-length-claiming blocks of 64 KiB zeros
        import cramjam
        block = bytes(cramjam.lz4.compress_block(bytes(64 << 10), store_size=False))
        lz = (struct.pack("<I", 0x184D2204) + bytes([0x60, 0x40, 0x82])
              + (struct.pack("<I", len(block)) + block) * 4096 + struct.pack("<I", 0))
        snappy = b"\\x80\\x80\\x80\\x80\\x04" + bytes(200)   # claims 1 GiB
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for codec, bomb in ((1, gz), (3, lz), (4, zst), (2, snappy)):
            assert len(bomb) < (2 << 20), (codec, len(bomb))
            try:
                C.decompress(codec, bomb, limit)
            except KafkaApiError as exc:
                print(codec, exc.code.name)
        print("grew", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    ''')
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split("\n")
    assert out[:4] == ["1 MESSAGE_TOO_LARGE", "3 MESSAGE_TOO_LARGE", "4 MESSAGE_TOO_LARGE",
                       "2 CORRUPT_MESSAGE"], out
    grew_mib = int(out[4].split()[1])
    assert grew_mib < C.decompressed_limit(2 << 20) // MiB + 40, out


def test_handcrafted_zstd_rle_frame_is_what_zstd_decodes():
    # The bomb above is a real zstd frame: a small one decodes to the bytes it claims.
    rle = struct.pack("<I", 1000 << 3 | 1 << 1 | 1)[:3] + b"z"
    frame = struct.pack("<I", 0xFD2FB528) + bytes([0, 0x38]) + rle
    assert C.decompress(4, frame, MiB) == b"z" * 1000
    with pytest.raises(KafkaApiError) as err:
        C.decompress(4, frame, 999)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [1, 3, 4])     # snappy expands at most ~21x: never over the limit
def test_decompressed_limit_follows_max_message_bytes(codec):
    batch = simple(2000, codec, value=b"\0" * 20_000)            # 40 MB of zeros
    assert len(batch) < MiB
    refused(batch, ErrorCode.MESSAGE_TOO_LARGE)                 # limit 32 MiB
    assert R.validate_produce_records(batch, 2 * MiB)           # limit 64 MiB


# -- properties -------------------------------------------------------------------------

def _kafka_python_reads(batch: bytes) -> list:
    return [(r.offset, r.key, r.value) for r in DefaultRecordBatch(batch)]


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=160), st.integers(1, 12), st.sampled_from(CODECS))
def test_random_records_in_a_valid_envelope_never_crash_or_pass_when_invalid(body, count, codec):
    if codec and body:
        body = C_compress(codec, body) if body[0] & 1 else body
    batch = envelope(body, count=count, codec=codec)
    try:
        R.validate_produce_records(batch, MiB)
    except KafkaApiError as exc:
        assert exc.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD,
                            ErrorCode.MESSAGE_TOO_LARGE)
        return
    # It passed: kafka-python must read exactly ``count`` records, offsets 0..count-1.
    assert [offset for offset, _, _ in _kafka_python_reads(batch)] == list(range(count))


_header = st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=20))
_record = st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=300),
                    st.lists(_header, max_size=3), st.integers(0, 2**40))


@settings(max_examples=150, deadline=None)
@given(st.lists(_record, min_size=1, max_size=80), st.sampled_from(CODECS))
def test_every_batch_kafka_python_builds_passes(records, codec):
    batch = kp_batch(records, codec)
    (h,) = R.validate_produce_records(batch, MiB)
    assert h.record_count == len(records)


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, min_size=1, max_size=6), st.data())
def test_mutated_records_pass_only_when_kafka_python_reads_them(records, data):
    body = bytearray(body_of(kp_batch(records)))
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    batch = envelope(bytes(body), count=len(records))
    try:
        R.validate_produce_records(batch, MiB)
    except KafkaApiError as exc:
        assert exc.code == ErrorCode.INVALID_RECORD
        return
    assert [offset for offset, _, _ in _kafka_python_reads(batch)] == list(range(len(records)))


# -- the strided fast path agrees with the record loop -----------------------------------

_SLOW = {False: RecordRules(timestamp_before_max_ms=2**62, timestamp_after_max_ms=2**62),
         True: RecordRules(compacted=True, timestamp_before_max_ms=2**62,
                           timestamp_after_max_ms=2**62)}     # timestamps checked: the loop


def _outcome(body, count, rules):
    try:
        return [tuple(e) for e in V.walk_records(body, 0, len(body), count, NOW, rules, 0)]
    except KafkaApiError as exc:
        return exc.code


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1500), st.integers(0, 3), st.integers(-1, 20), st.integers(-1, 200),
       st.integers(0, 200), st.booleans(), st.data())
def test_strided_fast_path_agrees_with_the_record_loop(count, mutations, key_size, value_size,
                                                       ts_step, compacted, data):
    key = None if key_size < 0 else b"k" * key_size
    value = None if value_size < 0 else b"v" * value_size
    records = [(key, value, [], NOW + i * ts_step) for i in range(count)]
    if data.draw(st.booleans()):                      # one odd record somewhere
        odd = data.draw(st.integers(0, count - 1))
        records[odd] = (b"odd-key", b"odd", [("h", b"x")], NOW)
    body = bytearray(body_of(kp_batch(records)))
    for _ in range(mutations):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.sampled_from([0, 1, 2, 0x80, 0xFF]))
    fast_rules = RecordRules(compacted=True) if compacted else V.NO_RULES
    assert _outcome(bytes(body), count, fast_rules) == _outcome(bytes(body), count, _SLOW[compacted])


@pytest.mark.parametrize("ts_step, key, value", [(0, b"key", b"value"), (1, None, b"v" * 70),
                                                  (40, b"", None)])
def test_every_byte_of_chosen_records_changed_fast_path_agrees(ts_step, key, value):
    count = 300
    body = body_of(kp_batch([(key, value, [], NOW + i * ts_step) for i in range(count)]))
    starts, position = [], 0
    for _ in range(count):
        starts.append(position)
        position += V._layout(body, position, len(body))[4]
    for k in (0, 63, 64, 128, 299):
        size = (starts[k + 1] if k + 1 < count else len(body)) - starts[k]
        # every field byte; of a long value only its ends
        for position in (starts[k] + j for j in {*range(min(14, size)), *range(size - 3, size)}):
            for byte in {0, 0x80, 0xFF, body[position] ^ 1, body[position] ^ 2}:
                changed = bytearray(body)
                changed[position] = byte
                for compacted in (False, True):
                    fast = RecordRules(compacted=True) if compacted else V.NO_RULES
                    assert _outcome(bytes(changed), count, fast) == \
                        _outcome(bytes(changed), count, _SLOW[compacted]), (k, position, byte)


@pytest.mark.parametrize("count", [1, 2, 65])
@pytest.mark.parametrize("attributes", [1, 0x80])
def test_record_attributes_must_be_zero(count, attributes):
    # Kafka leaves record attributes unused; kafka-python reads the byte as a varint,
    # so a set high bit would stall it.
    body = bytearray(body_of(simple(count)))
    body[1] = attributes                          # record 0: length varint, then attributes
    for rules in (V.NO_RULES, _SLOW[False]):
        assert _outcome(bytes(body), count, rules) == ErrorCode.INVALID_RECORD
