"""The embedded consumer protocol of classic groups (protocol type ``consumer``), as Kafka's
ConsumerProtocolSubscription and ConsumerProtocolAssignment (non-flexible, every version):

    Subscription  int16 version | [string topic] | bytes? user_data
                  | v1+: [string topic, [int32 partition]] owned_partitions
                  | v2+: int32 generation_id | v3+: string? rack_id
    Assignment    int16 version | [string topic, [int32 partition]] | bytes? user_data

(``string`` = int16 length + UTF-8, -1 for null; ``bytes`` = int32 length, -1 for null;
arrays int32 count.)  Fields of later versions than we know are ignored, as Kafka's
readers do.  Decoding raises ``GroupRecordError`` (a ValueError) on malformed bytes.

A classic member of a KIP-848 consumer group is served from these: its JoinGroup
subscription gives its topics, rack and owned partitions; its SyncGroup answer is its
assignment, in the version of the subscription it sent.
"""
from __future__ import annotations

from dataclasses import dataclass

from .records import INT16, INT32, GroupRecordError, _bytes, _Reader, _string


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: tuple[tuple[str, tuple[int, ...]], ...] | None    # None: v0 (not reported)
    rack_id: str | None = None


def decode_subscription(metadata: bytes) -> Subscription:
    r = _Reader(metadata)
    version = r.int16()
    if version < 0:
        raise GroupRecordError("negative subscription version")
    topics = tuple(r.string() for _ in range(r.array_len()))
    r.bytes_()
    owned = None
    rack_id = None
    if version >= 1 and r.pos < len(r.data):
        owned = tuple((r.string(), tuple(r.int32() for _ in range(r.array_len()))) for _ in range(r.array_len()))
        if version >= 2 and r.pos < len(r.data):
            r.int32()
            if version >= 3 and r.pos < len(r.data):
                rack_id = r.nullable_string()
    return Subscription(version, topics, owned, rack_id)


def encode_assignment(version: int, partitions: dict[str, frozenset[int]]) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` (topic name -> partitions), no user data."""
    topics = [(t, sorted(ps)) for t, ps in sorted(partitions.items()) if ps]
    body = INT32.pack(len(topics)) + b"".join(
        _string(t) + INT32.pack(len(ps)) + b"".join(INT32.pack(p) for p in ps) for t, ps in topics)
    return INT16.pack(max(version, 0)) + body + INT32.pack(-1)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Topic name -> partitions of a ConsumerProtocolAssignment; empty bytes = nothing assigned."""
    if not data:
        return {}
    r = _Reader(data)
    if r.int16() < 0:
        raise GroupRecordError("negative assignment version")
    return {r.string(): frozenset(r.int32() for _ in range(r.array_len())) for _ in range(r.array_len())}


def encode_subscription(topics, version: int = 0) -> bytes:
    """A v0 subscription (tests, and the metadata of a downgraded member without one)."""
    return INT16.pack(version) + INT32.pack(len(topics)) + b"".join(_string(t) for t in topics) + _bytes(b"")
