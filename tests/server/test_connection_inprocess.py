"""The server layer in-process: a real ``Connection`` over trio's in-memory streams.

Requests are encoded with kafka-python's classes exactly as a client sends them
(size prefix, request header, body) and written into one end of a
``trio.testing.memory_stream_pair``; the other end is served by
``kwire.server.connection.Connection`` with the real handlers and a real log in a temp
dir.  Responses are decoded with kafka-python's response classes.  The broker
runs on ``TrioClock`` under ``MockClock``, so retention and long polls take no
real time.  No sockets, no subprocess: each test runs in well under a second.
"""
from __future__ import annotations

import contextlib
import math
import os
import struct

import trio
import trio.testing
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kwire.admin.broker_config import load_broker_config
from kwire.server.broker import Broker, Endpoint
from kwire.runtime.clock import TrioClock
from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.handlers.fetch import FileRecords
from kwire.log.slices import FileSlice
from kwire.server.connection import close_deferred
from kwire.server.serving import handle_connection
from tests.log.logkit import build_batch, decode

SIZE = struct.Struct(">i")


class Client:
    """The client end of an in-memory connection: send requests, read responses in order."""

    def __init__(self, stream):
        self.stream = stream
        self.correlation_id = 0
        self.pending: list[tuple[int, int, int]] = []       # (correlation_id, api_key, version)
        self.buffer = bytearray()

    def frame(self, cls, version: int, **fields) -> bytes:
        """One request frame, remembered so its response can be decoded."""
        self.correlation_id += 1
        api_key = cls.API_KEY
        client_id = b"inproc"
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(client_id)) + client_id
        if messages.request_is_flexible(api_key, version):
            header += b"\x00"                                    # no tagged fields
        body = bytes(cls(version=version, **fields).encode(version=version))
        self.pending.append((self.correlation_id, api_key, version))
        return SIZE.pack(len(header) + len(body)) + header + body

    async def send(self, *frames: bytes) -> None:
        await self.stream.send_all(b"".join(frames))

    async def _read(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.buffer += data
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    async def response(self):
        """The next response, decoded; None if the broker closed the connection."""
        prefix = await self._read(4)
        if prefix is None:
            return None
        body = await self._read(SIZE.unpack(prefix)[0])
        correlation_id, api_key, version = self.pending.pop(0)
        assert SIZE.unpack_from(body)[0] == correlation_id, "responses must come in request order"
        start = 5 if messages.response_header_v1(api_key, version) else 4
        return messages.API_CLASSES[api_key][1].decode(memoryview(body)[start:], version=version)

    async def call(self, cls, version: int, **fields):
        await self.send(self.frame(cls, version, **fields))
        return await self.response()


@contextlib.asynccontextmanager
async def connected(tmp_path, **properties):
    """A broker on the mock clock and one client connected to it through memory streams."""
    config = load_broker_config(None, {"log.dirs": str(tmp_path / "logs"),
                                       "group.initial.rebalance.delay.ms": "0", **properties})
    broker = Broker(config, clock=TrioClock())
    broker.open()
    broker.advertised = Endpoint("127.0.0.1", 9092)      # what serve() sets from the listener
    client_end, server_end = trio.testing.memory_stream_pair()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run_housekeeping)
            nursery.start_soon(handle_connection, broker, server_end)
            yield broker, Client(client_end)
            nursery.cancel_scope.cancel()
    finally:
        broker.close()


def run(scenario) -> None:
    async def main():
        with trio.fail_after(3600):         # mock seconds: a hang fails instead of spinning
            await scenario()
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@contextlib.contextmanager
def real_time():
    """Stop the mock clock's autojump while the broker does file work in a worker thread
    (CreateTopics): every task waits then, and an autojump would skip mock time ahead."""
    clock = trio.lowlevel.current_clock()
    saved, clock.autojump_threshold = clock.autojump_threshold, math.inf
    try:
        yield
    finally:
        clock.autojump_threshold = saved


async def create_topic(client, name: str, partitions: int = 1, **configs) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    topic = Topic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                  configs=[Topic.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                           for k, v in configs.items()])
    with real_time():
        r = await client.call(CreateTopicsRequest, 5, topics=[topic], timeout_ms=1000, validate_only=False)
    assert r.topics[0].error_code == E.NONE, r


def produce_frame(client, topic: str, batch: bytes, partition: int = 0) -> bytes:
    Data = ProduceRequest.TopicProduceData
    return client.frame(ProduceRequest, 9, transactional_id=None, acks=1, timeout_ms=1000,
                        topic_data=[Data(name=topic, partition_data=[Data.PartitionProduceData(
                            index=partition, records=batch)])])


def fetch_fields(topic: str, offset: int, *, max_wait_ms: int = 0, max_bytes: int = 1 << 20) -> dict:
    Topic = FetchRequest.FetchTopic
    return dict(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                    partition_max_bytes=max_bytes)])])


async def earliest(client, topic: str) -> int:
    Topic = ListOffsetsRequest.ListOffsetsTopic
    r = await client.call(ListOffsetsRequest, 5, replica_id=-1, isolation_level=0, topics=[Topic(
        name=topic, partitions=[Topic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                           timestamp=-2)])])
    return r.topics[0].partitions[0].offset


def test_api_versions_and_metadata_over_a_connection(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            versions = await client.call(ApiVersionsRequest, 3, client_software_name="t",
                                         client_software_version="1")
            assert versions.error_code == E.NONE
            assert {k.api_key for k in versions.api_keys} >= {0, 1, 2, 3, 18, 19}
            await create_topic(client, "orders", partitions=3)
            meta = await client.call(MetadataRequest, 9, topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                                     allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                     include_topic_authorized_operations=False)
            assert [(t.name, len(t.partitions)) for t in meta.topics] == [("orders", 3)]
    run(scenario)


def test_produce_then_fetch_small_and_large_record_sets(tmp_path):
    """Small fetches are copied into the response; large ones take the file path (sendfile on a
    socket, pread here): both must carry the exact batches the producer sent."""
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "t")
            small = build_batch([b"a", b"b"], timestamp=broker.clock.now_ms())
            large = build_batch([bytes([i]) * 1000 for i in range(40)], timestamp=broker.clock.now_ms())
            for batch, base in ((small, 0), (large, 2)):
                await client.send(produce_frame(client, "t", batch))
                r = await client.response()
                part = r.responses[0].partition_responses[0]
                assert (part.error_code, part.base_offset) == (E.NONE, base)
            r = await client.call(FetchRequest, 12, **fetch_fields("t", 0, max_bytes=100))
            part = r.responses[0].partitions[0]
            assert part.high_watermark == 42 and [v for _, _, v in decode(part.records)] == [b"a", b"b"]
            r = await client.call(FetchRequest, 12, **fetch_fields("t", 2))
            records = r.responses[0].partitions[0].records
            assert len(records) >= 16 * 1024, "large enough for the file path"
            assert [v for _, _, v in decode(records)] == [bytes([i]) * 1000 for i in range(40)]
    run(scenario)


def test_pipelined_requests_are_answered_in_order_behind_a_long_poll(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "t")
            fetch = client.frame(FetchRequest, 12, **fetch_fields("t", 0, max_wait_ms=5000))
            versions = client.frame(ApiVersionsRequest, 0)
            start = trio.current_time()
            await client.send(fetch, versions)                   # both in one write
            r = await client.response()                           # the fetch, after its wait
            assert r.responses[0].partitions[0].records in (b"", None)
            assert trio.current_time() - start >= 5
            assert (await client.response()).error_code == E.NONE
    run(scenario)


def test_a_parked_fetch_wakes_on_produce(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "t")
            consumer_end, server_end = trio.testing.memory_stream_pair()
            consumer = Client(consumer_end)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(handle_connection, broker, server_end)
                await consumer.send(consumer.frame(FetchRequest, 12, **fetch_fields("t", 0, max_wait_ms=30000)))
                await trio.sleep(2)
                start = trio.current_time()
                await client.send(produce_frame(client, "t", build_batch([b"wake"])))
                assert (await client.response()).responses[0].partition_responses[0].error_code == E.NONE
                r = await consumer.response()
                assert trio.current_time() - start < 1, "woken by the append, not by max_wait_ms"
                assert [v for _, _, v in decode(r.responses[0].partitions[0].records)] == [b"wake"]
                nursery.cancel_scope.cancel()
    run(scenario)


def test_retention_deletes_old_segments_on_the_mock_clock(tmp_path):
    """log.retention.check.interval.ms and retention.ms pass in mock time; the log start moves.

    Real file work in a worker thread lets the mock clock jump, so none may overlap the checks:
    flush.messages=1 makes each produce fsync in its own handler (in real time), and retention
    (20 s) is over long before the recovery-point checkpoint falls due (a minute after a flush)."""
    async def scenario():
        async with connected(tmp_path, **{"log.retention.check.interval.ms": "1000"}) as (broker, client):
            await create_topic(client, "t", retention_ms="20000", segment_bytes="1024", flush_messages="1")
            with real_time():
                for i in range(6):   # each ~570-byte batch fills most of a 1 KiB segment: 6 segments
                    batch = build_batch([b"%d" % i * 500], timestamp=broker.clock.now_ms())
                    await client.send(produce_frame(client, "t", batch))
                    assert (await client.response()).responses[0].partition_responses[0].error_code == E.NONE
            assert await earliest(client, "t") == 0
            await trio.sleep(10)
            assert await earliest(client, "t") == 0, "nothing is older than retention.ms yet"
            await trio.sleep(15)
            assert await earliest(client, "t") == 5, "closed segments deleted, the active one kept"
            r = await client.call(FetchRequest, 12, **fetch_fields("t", 0))
            assert r.responses[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
    run(scenario)


def test_a_corrupt_frame_closes_only_that_connection(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            other_end, server_end = trio.testing.memory_stream_pair()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(handle_connection, broker, server_end)
                await other_end.send_all(SIZE.pack(6) + b"\x7f\x7f\x00\x00\x00\x01")   # unknown api key
                assert await other_end.receive_some(10) == b"", "closed without a response"
                nursery.cancel_scope.cancel()
            assert (await client.call(ApiVersionsRequest, 0)).error_code == E.NONE
    run(scenario)


def test_file_records_nested_in_response_fields_are_released(tmp_path):
    """If a response cannot be encoded, its file records are still closed (no descriptor leak)."""
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)
    try:
        records = FileRecords([FileSlice(os.dup(fd), 0, 50), FileSlice(os.dup(fd), 50, 50)])
        fields = {"responses": [{"topic": "t", "partitions": [{"records": b""}, {"records": records}]}]}
        close_deferred(fields)
        for piece in records.slices:
            try:
                os.fstat(piece.fd)
            except OSError:
                continue
            raise AssertionError(f"descriptor {piece.fd} still open")
    finally:
        os.close(fd)
