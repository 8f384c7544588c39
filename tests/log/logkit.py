"""Helpers for log tests: batches built by kafka-python, as a client would send them."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder


def build_batch(values, *, timestamp=1_000, timestamps=None, compression=0,
                producer_id=-1, producer_epoch=-1, base_sequence=-1,
                transactional=False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, batch_size=1 << 30)
    for i, value in enumerate(values):
        ts = timestamps[i] if timestamps else timestamp + i
        builder.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


def decode(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, value) of every record in a read result."""
    out, position = [], 0
    while position < len(data):
        size = int.from_bytes(data[position + 8:position + 12], "big") + 12
        batch = DefaultRecordBatch(data[position:position + size])
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.value) for r in batch)
        position += size
    return out
