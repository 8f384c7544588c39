"""Which parked fetches a change wakes (kwire.server.broker.Broker.wait_appended).

In a cluster a consumer reads up to the high watermark and a follower up to the
log end: an append wakes the followers, the high watermark moving wakes the
consumers, and neither wakes the other side for nothing (each wake-up builds a
response and parks again, which cost the replication path a third of its
fetch handling)."""
from __future__ import annotations

import trio

from tests.server.test_connection_inprocess import connected, run

TP = ("t", 0)


async def parked(broker, name: str, replica: bool, woken: list) -> None:
    await broker.wait_appended([TP], trio.current_time() + 60, replica=replica)
    woken.append(name)


def scenario_with_both_parked(tmp_path, then):
    """Park a consumer's and a follower's fetch on ``TP``, run ``then(broker, woken)``."""
    async def scenario():
        async with connected(tmp_path) as (broker, _client):
            woken: list[str] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(parked, broker, "consumer", False, woken)
                nursery.start_soon(parked, broker, "follower", True, woken)
                await trio.sleep(1)
                await then(broker, woken)
            assert not broker._fetch_waiters and not broker._replica_waiters
    run(scenario)


def test_log_end_wakes_followers_and_high_watermark_wakes_consumers(tmp_path):
    async def then(broker, woken):
        broker.notify_log_end([TP])
        await trio.sleep(1)
        assert woken == ["follower"]
        broker.notify_committed([TP])
        await trio.sleep(1)
        assert woken == ["follower", "consumer"]
    scenario_with_both_parked(tmp_path, then)


def test_an_append_on_a_single_node_wakes_both(tmp_path):
    async def then(broker, woken):
        broker.notify_appended([TP, ("other", 0)])
        await trio.sleep(1)
        assert sorted(woken) == ["consumer", "follower"]
    scenario_with_both_parked(tmp_path, then)
