"""TxnOffsetCommit is verified with the transaction coordinator before the group coordinator
holds any offset pending (Kafka 3.6+, KIP-890 part 1), through the real handlers in-process.

Without the check, a fenced zombie's offsets waited pending under its producer id, which its
successor keeps (with a bumped epoch), and the successor's COMMIT made them count.
"""
from __future__ import annotations

from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import TxnOffsetCommitRequest

from kwire.codecs.errors import ErrorCode as E
from tests.server.test_txn_admin_inprocess import call, end_txn, init_producer, run

ADD_OFFSETS, TXN_OFFSET_COMMIT, OFFSET_FETCH = 25, 28, 9


async def add_offsets(broker, tid: str, pid: int, epoch: int, group: str) -> int:
    return (await call(broker, ADD_OFFSETS, 1, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                       group_id=group))["error_code"]


async def commit_offsets(broker, tid: str, pid: int, epoch: int, group: str, offsets: dict,
                         version: int = 3) -> dict[int, int]:
    Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    member = {"generation_id": -1, "member_id": "", "group_instance_id": None} if version >= 3 else {}
    r = await call(broker, TXN_OFFSET_COMMIT, version, transactional_id=tid, group_id=group, producer_id=pid,
                   producer_epoch=epoch, **member, topics=[Topic(name="t", partitions=[
                       Topic.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                             committed_leader_epoch=-1, committed_metadata="")
                       for p, o in offsets.items()])])
    return {p["partition_index"]: p["error_code"] for t in r["topics"] for p in t["partitions"]}


async def committed(broker, group: str, require_stable: bool = False) -> dict[int, tuple[int, int]]:
    R = OffsetFetchRequest
    r = await call(broker, OFFSET_FETCH, 7, group_id=group, require_stable=require_stable,
                   topics=[R.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])])
    return {p["partition_index"]: (p["committed_offset"], p["error_code"]) for t in r["topics"]
            for p in t["partitions"]}


def test_only_the_current_producer_of_an_open_transaction_with_the_group_commits_offsets():
    async def scenario(broker):
        pid, zombie = await init_producer(broker, "tx")
        assert await add_offsets(broker, "tx", pid, zombie, "g") == E.NONE
        assert await commit_offsets(broker, "tx", pid, zombie, "g", {0: 5}) == {0: E.NONE}
        fence = await call(broker, 22, 1, transactional_id="tx", transaction_timeout_ms=60_000)
        assert fence["error_code"] == E.CONCURRENT_TRANSACTIONS       # the zombie's transaction is aborted
        assert await init_producer(broker, "tx") == (pid, zombie + 2)
        successor = zombie + 2
        for version in range(5):
            assert await commit_offsets(broker, "tx", pid, zombie, "g", {1: 99}, version) == {
                1: E.INVALID_PRODUCER_EPOCH}, version
        assert await commit_offsets(broker, "tx", pid, successor, "g", {0: 7}) == {0: E.INVALID_TXN_STATE}
        assert await add_offsets(broker, "tx", pid, successor, "g") == E.NONE
        assert await commit_offsets(broker, "tx", pid + 1, successor, "g", {1: 99}) == {
            1: E.INVALID_PRODUCER_ID_MAPPING}
        assert await commit_offsets(broker, "nobody", pid, successor, "g", {1: 99}) == {
            1: E.INVALID_PRODUCER_ID_MAPPING}
        assert await commit_offsets(broker, "", pid, successor, "g", {1: 99}) == {1: E.INVALID_REQUEST}
        assert await commit_offsets(broker, "tx", pid, successor, "g", {0: 7}) == {0: E.NONE}
        assert await committed(broker, "g", require_stable=True) == {
            0: (-1, E.UNSTABLE_OFFSET_COMMIT), 1: (-1, E.NONE), 2: (-1, E.NONE)}
        assert await end_txn(broker, "tx", pid, successor, commit=True) == E.NONE
        assert await committed(broker, "g", require_stable=True) == {0: (7, 0), 1: (-1, 0), 2: (-1, 0)}
    run(scenario)


def test_txn_offset_commit_while_the_transaction_is_being_decided_is_concurrent_transactions():
    async def scenario(broker):
        pid, epoch = await init_producer(broker, "tx")
        assert await add_offsets(broker, "tx", pid, epoch, "g") == E.NONE
        # hold the markers: the offsets partition cannot take them, the transaction stays PrepareCommit
        plog = broker.logs.partition("__consumer_offsets", broker.groups.partition_of("g"))
        plog.health.take_offline("test: disk gone")
        assert await end_txn(broker, "tx", pid, epoch, commit=True) == E.NONE
        d = broker.transactions.describe_transactions(["tx"])[0]
        assert d.state == "PrepareCommit"
        assert await commit_offsets(broker, "tx", pid, epoch, "g", {0: 1}) == {0: E.CONCURRENT_TRANSACTIONS}
    run(scenario)
