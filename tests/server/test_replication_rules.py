"""The leader's replication rules (kwire.cluster.replication) on a real partition log, in virtual time.

Each test is one of issue 28's findings, reproduced without processes: a leader
``ReplicaManager`` over a ``PartitionLog`` in a temporary directory, followers
played by calls of the same hooks the Fetch handler makes, ZooKeeper played
by the ``write_isr`` callback (which decides when, and whether, a write lands).

* The ISR must not shrink under steady load: a follower that keeps fetching
  what the leader had at its previous fetch stays caught up (Kafka's
  lastFetchLeaderLogEndOffset rule), although no fetch reaches the moving end.
* The high watermark waits for a replica being added while the write is in
  flight or of unknown outcome (maximal ISR), and a snapshot read before the
  leader's own ISR write does not roll the ISR back.
* A new epoch with the same leader keeps waiting acks=all produces.
* Followers' fetches are validated before they count.
* A follower's truncation in a worker thread and a leadership change of the
  same partition are serialised (the partition's role lock).
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import trio
import trio.testing

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.config import LogConfig
from kwire.log.partition import PartitionLog
from kwire.cluster.fetcher import ReplicaFetcher
from kwire.cluster.replication import IsrWriteUnknown, ReplicaManager
from tests.log.logkit import build_batch, decode

TP = ("t", 0)
LAG_MS = 3000


class Config:
    def value_of(self, key):
        return {"replica.lag.time.max.ms": LAG_MS}[key]


class ManualClock:
    def __init__(self):
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


class Zk:
    """The state znode as the leader's writes see it; ``mode`` says what a write does."""

    def __init__(self):
        self.version = 0
        self.isr = (1, 2, 3)
        self.mode = "apply"            # "apply", "block" (until release), "unknown" (apply, then raise)
        self.writes: list[tuple[int, ...]] = []
        self.release = trio.Event()

    async def write_isr(self, tp, isr, leader_epoch, expected_version):
        self.writes.append(tuple(isr))
        if self.mode == "block":
            await self.release.wait()
        if expected_version != self.version:
            return None
        self.version += 1
        self.isr = tuple(isr)
        if self.mode == "unknown":
            raise IsrWriteUnknown("connection lost")
        return self.version


def make(tmp_path, zk: Zk, min_isr: int = 1):
    plog = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(min_insync_replicas=min_isr),
                             now_ms=0, recover=False)
    clock = ManualClock()
    manager = ReplicaManager(1, Config(), clock, lambda tps: None, lambda tps: None, zk.write_isr)
    return plog, clock, manager


def append(plog, manager, n: int = 1) -> int:
    plog.append(build_batch([b"x"] * n), now_ms=0)
    manager.after_append(TP)
    return plog.log_end_offset


async def steady_load(plog, clock, manager, rounds: int, step_ms: int, fetch_offsets) -> None:
    """``rounds`` rounds of: 5 records appended, each follower fetching at
    ``fetch_offsets[follower](end before the append)``, ``step_ms`` passing, ISR maintenance."""
    state = manager.leader(TP)
    for _ in range(rounds):
        previous_end = plog.log_end_offset
        append(plog, manager, 5)              # records keep arriving while followers fetch
        for follower, offset in fetch_offsets.items():
            manager.on_follower_fetch(TP, state, follower, offset(previous_end))
        clock.ms += step_ms
        await manager.update_isrs()


def leader_of_three(tmp_path, zk):
    plog, clock, manager = make(tmp_path, zk)
    manager.become_leader(TP, plog, 1, (1, 2, 3), (1, 2, 3), 0)
    return plog, clock, manager, manager.leader(TP)


def keeps_up(previous_end: int) -> int:
    return previous_end


def stuck(previous_end: int) -> int:
    return 0


def test_a_follower_that_keeps_up_with_the_previous_fetch_stays_in_the_isr(tmp_path):
    """Under continuous load no fetch reaches the leader's current log end; the old rule
    (caught up only at the end) shrank the ISR after replica.lag.time.max.ms."""
    async def main():
        zk = Zk()
        plog, clock, manager, state = leader_of_three(tmp_path, zk)
        # 40 x 200 ms = 8 s, well past the lag time
        await steady_load(plog, clock, manager, 40, 200, {2: keeps_up, 3: keeps_up})
        assert zk.writes == [], f"the ISR changed under steady load: {zk.writes}"
        assert state.isr == (1, 2, 3)
        assert plog.high_watermark == plog.log_end_offset - 5
    trio.run(main)


def test_a_follower_that_really_falls_behind_leaves_the_isr(tmp_path):
    async def main():
        zk = Zk()
        plog, clock, manager, state = leader_of_three(tmp_path, zk)
        await steady_load(plog, clock, manager, 20, 250, {2: keeps_up, 3: stuck})
        assert state.isr == (1, 2)
        assert zk.writes == [(1, 2)]
    trio.run(main)


def expansion_due(tmp_path, zk):
    """A leader of ISR [1, 2] whose follower 3 has caught up (offset 10): an expansion is due.
    (plog, manager, leader state)."""
    zk.isr = (1, 2)
    plog, clock, manager = make(tmp_path, zk)
    manager.become_leader(TP, plog, 1, (1, 2, 3), (1, 2), 0)
    state = manager.leader(TP)
    append(plog, manager, 10)
    manager.on_follower_fetch(TP, state, 2, 10)
    manager.on_follower_fetch(TP, state, 3, 10)
    return plog, manager, state


def test_the_high_watermark_waits_for_a_replica_whose_addition_is_in_flight(tmp_path):
    """While the expansion to [1, 2, 3] is being written, ZooKeeper may already hold it and
    the controller may elect 3: records 3 lacks must not count as committed."""
    async def main():
        zk = Zk()
        plog, manager, state = expansion_due(tmp_path, zk)
        assert plog.high_watermark == 10
        zk.mode = "block"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(manager.update_isrs)
            await trio.testing.wait_all_tasks_blocked()
            assert zk.writes == [(1, 2, 3)]
            append(plog, manager, 10)                    # offsets 10..19
            manager.on_follower_fetch(TP, state, 2, 20)  # 2 has them, 3 does not yet
            assert plog.high_watermark == 10, "committed past a replica being added"
            zk.release.set()
        assert state.isr == (1, 2, 3)
        manager.on_follower_fetch(TP, state, 3, 20)
        assert plog.high_watermark == 20
    trio.run(main)


def test_an_isr_write_of_unknown_outcome_keeps_the_added_replica_in_the_high_watermark(tmp_path):
    async def main():
        zk = Zk()
        plog, manager, state = expansion_due(tmp_path, zk)
        zk.mode = "unknown"                          # applied in ZooKeeper, then the connection dropped
        await manager.update_isrs()
        assert zk.isr == (1, 2, 3)
        append(plog, manager, 10)
        manager.on_follower_fetch(TP, state, 2, 20)
        assert plog.high_watermark == 10, "committed past a replica ZooKeeper already lists"
        # The next read of ZooKeeper settles it: the write was applied.
        manager.become_leader(TP, plog, 1, (1, 2, 3), zk.isr, zk.version)
        assert state.isr == (1, 2, 3) and state.pending_isr is None
        manager.on_follower_fetch(TP, state, 3, 20)
        assert plog.high_watermark == 20
    trio.run(main)


def test_a_snapshot_read_before_the_leaders_own_isr_write_does_not_roll_it_back(tmp_path):
    async def main():
        zk = Zk()
        plog, clock, manager, state = leader_of_three(tmp_path, zk)
        await steady_load(plog, clock, manager, 20, 250, {2: keeps_up})    # 3 silent: [1, 2]
        assert state.isr == (1, 2) and state.zk_version == 1
        # A reconciliation that read ZooKeeper before that write applies what it read.
        manager.become_leader(TP, plog, 1, (1, 2, 3), (1, 2, 3), 0)
        assert state.isr == (1, 2) and state.zk_version == 1
    trio.run(main)


def produce_through(tmp_path, change) -> tuple[list, object]:
    """An acks=all produce of 3 records waits on a leader of ISR [1, 2, 3] (min.insync.replicas
    2) while ``change(manager, plog, end)`` runs; (what the produce got, the log)."""
    results = []

    async def main():
        plog, clock, manager = make(tmp_path, Zk(), min_isr=2)
        manager.become_leader(TP, plog, 1, (1, 2, 3), (1, 2, 3), 0)
        state = manager.leader(TP)
        end = append(plog, manager, 3)

        async def produce_waits():
            results.append(await manager.wait_replicated(TP, state, end, trio.current_time() + 30))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_waits)
            await trio.testing.wait_all_tasks_blocked()
            await change(manager, plog, end)
        results.append(plog.high_watermark)
    trio.run(main)
    return results


def test_a_new_epoch_with_the_same_leader_keeps_waiting_acks_all_produces(tmp_path):
    """The controller removes a dead follower: epoch 2, same leader, ISR [1, 2].  The produce
    waiting for 3 must complete once 2 has the records, not fail with NOT_LEADER_OR_FOLLOWER
    (a non-idempotent producer would retry and duplicate)."""
    async def controller_removes_3(manager, plog, end):
        manager.become_leader(TP, plog, 2, (1, 2, 3), (1, 2), 1)
        await trio.testing.wait_all_tasks_blocked()
        manager.on_follower_fetch(TP, manager.leader(TP), 2, end)
    assert produce_through(tmp_path, controller_removes_3) == [ErrorCode.NONE, 3]


def test_a_change_of_leader_still_fails_waiting_produces(tmp_path):
    async def another_broker_leads(manager, plog, end):
        manager.stop_leading(TP)
    assert produce_through(tmp_path, another_broker_leads) == [ErrorCode.NOT_LEADER_OR_FOLLOWER, 0]


def test_a_fetch_from_a_broker_that_is_not_a_replica_is_refused(tmp_path):
    zk = Zk()
    plog, clock, manager = make(tmp_path, zk)
    manager.become_leader(TP, plog, 1, (1, 2, 3), (1, 2, 3), 0)
    state = manager.leader(TP)
    for stranger in (4, 1):
        try:
            manager.check_follower(state, stranger)
        except KafkaApiError as exc:
            assert exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            raise AssertionError(f"broker {stranger} fetched as a follower")
    manager.check_follower(state, 2)


class FetcherConfig:
    def value_of(self, key):
        return {"replica.fetch.wait.max.ms": 500, "replica.fetch.max.bytes": 1 << 20,
                "replica.fetch.response.max.bytes": 10 << 20, "replica.fetch.backoff.ms": 1000,
                "replica.socket.timeout.ms": 30000}[key]


def slow_truncation(plog, started: threading.Event):
    """Make ``plog.truncate_to`` take a while in its worker thread, as fsyncs on a busy disk do."""
    real = plog.truncate_to

    def truncate_to(offset):
        started.set()
        time.sleep(0.3)
        real(offset)
    plog.truncate_to = truncate_to


def following(tmp_path):
    """A follower's log of ten one-record batches, committed up to 4, in a fetcher's hands:
    (plog, manager, fetcher, its FollowState)."""
    plog, clock, manager = make(tmp_path, Zk())
    for _ in range(10):
        append(plog, manager)
    plog.enable_replication()
    plog.update_high_watermark(4)
    fetcher = ReplicaFetcher(1, 2, None, FetcherConfig(), clock, manager.lock)
    fetcher.follow(TP, plog, 1)
    return plog, manager, fetcher, fetcher.partitions[TP]


def test_becoming_leader_waits_for_a_follower_truncation_in_flight(tmp_path):
    """The fetcher truncates 10 -> 4 in a worker thread while this broker is elected leader.
    Unfenced, the leader started its epoch at the old end (10) and appended there while the
    thread cut the log back: records acknowledged as leader were lost."""
    async def main():
        plog, manager, fetcher, follow_state = following(tmp_path)
        started = threading.Event()
        slow_truncation(plog, started)
        no_common_epoch = SimpleNamespace(error_code=0, leader_epoch=-1, end_offset=-1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetcher._truncate_one, TP, follow_state, no_common_epoch)
            while not started.is_set():
                await trio.sleep(0.01)
            async with manager.lock(TP):          # what the cluster node does to lead
                fetcher.forget(TP)
                manager.become_leader(TP, plog, 2, (1, 2), (1,), 0)
            end = append(plog, manager, 3)
        assert manager.leader(TP).epoch_start_offset == 4
        assert end == 7 and plog.log_end_offset == 7
        assert [r[0] for r in decode(plog.read(4, 1 << 20, max_offset=7))] == [4, 5, 6]
    trio.run(main)


def test_a_truncation_that_starts_after_becoming_leader_cuts_nothing(tmp_path):
    async def main():
        plog, manager, fetcher, follow_state = following(tmp_path)
        async with manager.lock(TP):
            fetcher.forget(TP)
            manager.become_leader(TP, plog, 2, (1, 2), (1, 2), 0)
        assert plog.high_watermark == 4
        await fetcher._truncate_one(TP, follow_state, SimpleNamespace(error_code=0, leader_epoch=-1,
                                                                      end_offset=-1))
        assert plog.log_end_offset == 10
    trio.run(main)
