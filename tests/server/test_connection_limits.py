"""Connection limits in-process over real sockets, with trio's MockClock (virtual time).

Idle and slowloris connections are closed at the configured times, a parked
fetch is neither idle nor held past fetch.max.wait.ms, a client that leaves
releases its parked fetch at once, a pipelined request behind a parked fetch
is not mistaken for a close, and the shared byte budget grants in order.
"""
import struct

import pytest
import trio
import trio.testing
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kwire.admin.broker_config import broker_config_from_properties
from kwire.server.broker import Broker
from kwire.transport.budget import ByteBudget
from kwire.server.serving import serve


def run_with_broker(tmp_path, scenario, **props):
    """Run ``scenario(broker, port)`` against an in-process broker on virtual time."""
    props = {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0",
             "group.initial.rebalance.delay.ms": "0", **props}
    broker = Broker(broker_config_from_properties(props))

    async def main():
        async with trio.open_nursery() as nursery:
            _, port = await nursery.start(serve, broker, "127.0.0.1", 0)
            with trio.fail_after(5000):
                await scenario(broker, port)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def fetch(max_wait_ms: int, correlation_id: int = 1) -> bytes:
    req = FetchRequest[4](replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                          isolation_level=0, topics=[])
    req.with_header(correlation_id=correlation_id, client_id="limits")
    return bytes(req.encode(header=True, framed=True))


def api_versions(correlation_id: int) -> bytes:
    req = ApiVersionsRequest[0]()
    req.with_header(correlation_id=correlation_id, client_id="limits")
    return bytes(req.encode(header=True, framed=True))


async def recv_exact(stream, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = await stream.receive_some(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


async def correlation_of_next_response(stream) -> int | None:
    head = await recv_exact(stream, 4)
    if head is None:
        return None
    body = await recv_exact(stream, struct.unpack(">i", head)[0])
    return struct.unpack(">i", body[:4])[0]


async def closed(stream) -> bool:
    try:
        return await stream.receive_some(1) == b""
    except trio.BrokenResourceError:
        return True


def test_idle_connection_closed_after_connections_max_idle_ms(tmp_path):
    async def scenario(broker, port):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        t0 = trio.current_time()
        assert await closed(stream)
        assert 600 <= trio.current_time() - t0 < 601      # Kafka's default, 600000 ms
    run_with_broker(tmp_path, scenario)


def test_active_connection_outlives_the_idle_limit(tmp_path):
    async def scenario(broker, port):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        for cid in range(4):                                 # 4 x 8 s > 10 s, never 10 s idle
            await stream.send_all(api_versions(cid))
            assert await correlation_of_next_response(stream) == cid
            await trio.sleep(8)
        assert await closed(stream)
    run_with_broker(tmp_path, scenario, **{"connections.max.idle.ms": "10000"})


def test_slowloris_closed_after_request_read_timeout(tmp_path):
    async def scenario(broker, port):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        frame = fetch(100)
        t0 = trio.current_time()

        async def drip():
            try:
                for i in range(len(frame) - 1):
                    await stream.send_all(frame[i:i + 1])
                    await trio.sleep(5)
            except trio.BrokenResourceError:
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drip)
            assert await closed(stream)
            assert 60 <= trio.current_time() - t0 < 61      # request.read.timeout.ms default 60000
            nursery.cancel_scope.cancel()
    run_with_broker(tmp_path, scenario)


def test_parked_fetch_is_not_idle_and_is_capped(tmp_path):
    async def scenario(broker, port):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        t0 = trio.current_time()
        await stream.send_all(fetch(2**31 - 1))             # names no partition: only the cap ends it
        assert await correlation_of_next_response(stream) == 1
        assert 30 <= trio.current_time() - t0 < 31         # fetch.max.wait.ms default 30000
    run_with_broker(tmp_path, scenario, **{"connections.max.idle.ms": "10000"})


def test_client_leaving_releases_its_parked_fetch_at_once(tmp_path):
    async def scenario(broker, port):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(fetch(2**31 - 1))
        await trio.sleep(1)
        assert broker.connections == 1
        t0 = trio.current_time()
        await stream.aclose()
        while broker.connections:
            await trio.sleep(0.001)
        assert trio.current_time() - t0 < 0.1
    run_with_broker(tmp_path, scenario)


def test_request_pipelined_behind_a_parked_fetch_is_answered_in_order(tmp_path):
    async def scenario(broker, port):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(fetch(5000, correlation_id=1) + api_versions(2))
        t0 = trio.current_time()
        assert await correlation_of_next_response(stream) == 1
        assert 5 <= trio.current_time() - t0 < 6
        assert await correlation_of_next_response(stream) == 2
    run_with_broker(tmp_path, scenario)


def test_byte_budget_grants_in_order_and_lets_an_oversized_frame_through():
    async def main():
        budget = ByteBudget(100)
        order = []

        async def take(name, size, hold):
            await budget.acquire(size)
            order.append(name)
            await trio.sleep(hold)
            budget.release(size)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, "a", 60, 10)
            await trio.sleep(1)
            nursery.start_soon(take, "big", 500, 10)      # larger than the budget: waits for "a" alone
            await trio.sleep(1)
            nursery.start_soon(take, "small", 10, 1)      # fits, but queues behind "big" (no starvation)
            await trio.sleep(1)
            assert order == ["a"] and budget.statistics()["waiting"] == 2
        assert order == ["a", "big", "small"] and budget.used == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_byte_budget_cancelled_wait_takes_nothing():
    async def main():
        budget = ByteBudget(100)
        await budget.acquire(80)
        with trio.move_on_after(1):
            await budget.acquire(50)
        assert budget.statistics() == {"capacity": 100, "used": 80, "waiting": 0}
        budget.release(80)
        await budget.acquire(100)
        assert budget.used == 100

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("capacity", [0, -1])
def test_byte_budget_unlimited(capacity):
    async def main():
        budget = ByteBudget(capacity)
        for _ in range(10):
            await budget.acquire(10**9)
        assert budget.used == 10**10

    trio.run(main)
