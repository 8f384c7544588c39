"""A Deferred answer (kwire.handlers.registry) lets a connection handle the requests behind it while
it waits, and every response still goes out in request order (kwire.server.connection).

In a cluster, an acks=all Produce answers Deferred while the followers copy its
batches.  Here, on a single node through a real ``Connection`` and the real
Produce handler, the handler is wrapped so that acks=-1 produces answer Deferred
with a completion the test releases: that stands for the wait on the followers,
which a single node has not got."""
from __future__ import annotations

import pytest
import trio
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from kwire.handlers import registry
from kwire.handlers.registry import Deferred, Handler
from kwire.server.connection import MAX_PIPELINED
from tests.log.logkit import build_batch
from tests.server.test_connection_inprocess import connected, create_topic, run


@pytest.fixture
def gated_acks_all(monkeypatch):
    """acks=-1 produces answer Deferred until ``gate`` is set; returns the gate holder."""
    real = registry.HANDLERS[0]
    gate: dict[str, trio.Event] = {}

    async def produce(ctx, request):
        fields = await real.func(ctx, request)
        if request.acks != -1:
            return fields

        async def complete():
            await gate["open"].wait()
            return fields
        return Deferred(complete)
    monkeypatch.setitem(registry.HANDLERS, 0, Handler(0, real.min_version, real.max_version, produce,
                                                     real.reject_below))
    return gate


def produce(client, value: bytes, acks: int) -> bytes:
    Data = ProduceRequest.TopicProduceData
    return client.frame(ProduceRequest, 9, transactional_id=None, acks=acks, timeout_ms=1000,
                        topic_data=[Data(name="p", partition_data=[Data.PartitionProduceData(
                            index=0, records=build_batch([value]))])])


async def no_response_within(client, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        await client.response()
        return False
    return True


def test_requests_behind_a_deferred_answer_are_handled_and_answered_in_order(tmp_path, gated_acks_all):
    async def scenario():
        gated_acks_all["open"] = trio.Event()
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "p")
            await client.send(produce(client, b"a", -1), produce(client, b"b", 1),
                              client.frame(ApiVersionsRequest, 3, client_software_name="t",
                                           client_software_version="1"))
            plog = broker.logs.partition("p", 0)
            with trio.fail_after(5):
                while plog.log_end_offset < 2:      # b appended while a's answer is owed
                    await trio.sleep(0.01)
            assert await no_response_within(client, 2)
            gated_acks_all["open"].set()
            first, second, versions = [await client.response() for _ in range(3)]
            offsets = [r.responses[0].partition_responses[0].base_offset for r in (first, second)]
            assert offsets == [0, 1]
            assert versions.error_code == 0
    run(scenario)


def test_a_connection_stops_reading_when_max_pipelined_answers_are_owed(tmp_path, gated_acks_all):
    async def scenario():
        gated_acks_all["open"] = trio.Event()
        async with connected(tmp_path) as (broker, client):
            await create_topic(client, "p")
            total = MAX_PIPELINED + 3
            frames = [produce(client, b"v%d" % i, -1) for i in range(total)]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.send, *frames)     # may block: the broker stops reading
                await trio.sleep(2)
                assert broker.logs.partition("p", 0).log_end_offset == MAX_PIPELINED
                gated_acks_all["open"].set()
                offsets = [(await client.response()).responses[0].partition_responses[0].base_offset
                           for _ in range(total)]
            assert offsets == list(range(total))
    run(scenario)
