"""DescribeTransactions, ListTransactions and DescribeProducers through the real handlers, in-process.

Requests are built with kafka-python's classes, encoded and decoded as on the
wire, and handed to the registered handlers of a broker whose clock is a
number the test sets, so the transaction start times and ListTransactions'
duration filter are exact.  Transactions are driven with the same handlers a
client reaches (InitProducerId, AddPartitionsToTxn, Produce, EndTxn).
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.handlers.registry import HANDLERS
from kwire.server.connection import RequestContext
from tests.support.inprocess import broker_in_process, run_with

PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 0, 22, 24, 26
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66
T0 = 1_700_000_000_000


class ManualClock:
    """The broker's ``now_ms``: moved by the test only."""

    def __init__(self, now_ms: int = T0):
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


def run(test, **properties) -> None:
    run_with(test, broker_in_process(
        {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "1", **properties},
        topics={"t": 3}, clock=ManualClock(), now_ms=T0))


async def call(broker, api_key: int, version: int, **fields) -> dict:
    """One request through its registered handler, decoded from the bytes a client would send."""
    cls = messages.API_CLASSES[api_key][0]
    body = bytes(cls(version=version, **fields).encode(version=version))
    request = messages.decode_request(api_key, version, body, 0)
    ctx = RequestContext(broker=broker, api_key=api_key, api_version=version, correlation_id=1,
                         client_id="inproc", peer="127.0.0.1:40000")
    response = await HANDLERS[api_key].func(ctx, request)
    messages.encode_response(api_key, version, response)     # the answer must encode
    return response


def batch(producer_id: int, epoch: int, sequence: int, n: int, *, transactional: bool, timestamp: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                        batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=timestamp + i, key=None, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


async def produce(broker, partition: int, records: bytes, transactional_id: str | None = None) -> dict:
    Data = ProduceRequest.TopicProduceData
    r = await call(broker, PRODUCE, 8, transactional_id=transactional_id, acks=-1, timeout_ms=1000, topic_data=[
        Data(name="t", partition_data=[Data.PartitionProduceData(index=partition, records=records)])])
    return r["responses"][0]["partition_responses"][0]


async def init_producer(broker, transactional_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    r = await call(broker, INIT_PRODUCER_ID, 1, transactional_id=transactional_id, transaction_timeout_ms=timeout_ms)
    assert r["error_code"] == E.NONE, r
    return r["producer_id"], r["producer_epoch"]


async def add_partitions(broker, transactional_id: str, pid: int, epoch: int, partitions) -> list[int]:
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    r = await call(broker, ADD_PARTITIONS, 3, v3_and_below_transactional_id=transactional_id,
                   v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                   v3_and_below_topics=[Topic(name="t", partitions=list(partitions))])
    return [p["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]]


async def end_txn(broker, transactional_id: str, pid: int, epoch: int, commit: bool) -> int:
    r = await call(broker, END_TXN, 1, transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                   committed=commit)
    return r["error_code"]


async def describe(broker, *ids: str) -> list[dict]:
    return (await call(broker, DESCRIBE_TXNS, 0, transactional_ids=list(ids)))["transaction_states"]


async def listed(broker, version: int = 1, states=(), pids=(), duration: int = -1, pattern=None) -> dict:
    fields = dict(state_filters=list(states), producer_id_filters=list(pids))
    if version >= 1:
        fields["duration_filter"] = duration
    if version >= 2:
        fields["transactional_id_pattern"] = pattern
    return await call(broker, LIST_TXNS, version, **fields)


async def producers(broker, topic: str = "t", partitions=(0, 1, 2)) -> dict[int, dict]:
    r = await call(broker, DESCRIBE_PRODUCERS, 0, topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=list(partitions))])
    return {p["partition_index"]: p for p in r["topics"][0]["partitions"]}


def test_describe_transactions_follows_one_transaction_through_its_states():
    async def scenario(broker):
        assert [d["error_code"] for d in await describe(broker, "tx", "")] == [
            E.TRANSACTIONAL_ID_NOT_FOUND, E.INVALID_REQUEST], "before __transaction_state exists"
        pid, epoch = await init_producer(broker, "tx", 45_000)
        d, = await describe(broker, "tx")
        assert (d["error_code"], d["transaction_state"], d["producer_id"], d["producer_epoch"],
                d["transaction_timeout_ms"], d["transaction_start_time_ms"], d["topics"]) == (
            E.NONE, "Empty", pid, epoch, 45_000, -1, [])
        broker.clock.now = T0 + 1000
        assert await add_partitions(broker, "tx", pid, epoch, [2, 0]) == [E.NONE, E.NONE]
        d, = await describe(broker, "tx")
        assert (d["transaction_state"], d["transaction_start_time_ms"]) == ("Ongoing", T0 + 1000)
        assert [(t["topic"], sorted(t["partitions"])) for t in d["topics"]] == [("t", [0, 2])]
        assert await end_txn(broker, "tx", pid, epoch, commit=True) == E.NONE
        d, unknown = await describe(broker, "tx", "nobody")
        assert (d["transaction_state"], d["topics"]) == ("CompleteCommit", [])
        assert unknown["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
        assert await add_partitions(broker, "tx", pid, epoch, [1]) == [E.NONE]
        assert await end_txn(broker, "tx", pid, epoch, commit=False) == E.NONE
        assert (await describe(broker, "tx"))[0]["transaction_state"] == "CompleteAbort"
        # a second producer with the id fences the first: the epoch moves on
        assert await init_producer(broker, "tx") == (pid, epoch + 1)
        assert (await describe(broker, "tx"))[0]["producer_epoch"] == epoch + 1
    run(scenario)


def test_list_transactions_filters_by_state_producer_id_and_duration():
    async def scenario(broker):
        assert (await listed(broker))["transaction_states"] == []
        ids = {}
        for name in ("a", "b", "c"):
            ids[name] = await init_producer(broker, name)
        broker.clock.now = T0 + 10_000
        assert await add_partitions(broker, "a", *ids["a"], [0]) == [E.NONE]       # Ongoing since T0 + 10 s
        broker.clock.now = T0 + 20_000
        assert await add_partitions(broker, "b", *ids["b"], [1]) == [E.NONE]       # Ongoing since T0 + 20 s
        assert await end_txn(broker, "b", *ids["b"], commit=True) == E.NONE        # CompleteCommit
        broker.clock.now = T0 + 30_000

        def rows(r):
            assert r["error_code"] == E.NONE
            return sorted((s["transactional_id"], s["producer_id"], s["transaction_state"])
                          for s in r["transaction_states"])
        everything = [("a", ids["a"][0], "Ongoing"), ("b", ids["b"][0], "CompleteCommit"),
                      ("c", ids["c"][0], "Empty")]
        assert rows(await listed(broker, version=0)) == everything
        assert rows(await listed(broker, version=1)) == everything
        r = await listed(broker, states=["Ongoing", "Bogus"])
        assert rows(r) == everything[:1] and r["unknown_state_filters"] == ["Bogus"]
        assert rows(await listed(broker, pids=[ids["c"][0], 999_999])) == everything[2:]
        # v1: only transactions started more than duration_filter ms ago (Empty ones never started)
        assert rows(await listed(broker, states=["Ongoing", "CompleteCommit"], duration=15_000)) == everything[:1]
        assert rows(await listed(broker, states=["Ongoing", "CompleteCommit"], duration=5_000)) == everything[:2]
        assert rows(await listed(broker, states=["Ongoing"], duration=20_000)) == []   # exactly 20 s: not more
        # v2 (KIP-1152): a regular expression the whole id matches; null or empty filters nothing
        for pattern, expected in ((None, everything), ("", everything), ("[ab]", everything[:2]), ("a|c", [
                everything[0], everything[2]]), ("b.", [])):
            assert rows(await listed(broker, version=2, pattern=pattern)) == expected
        bad = await listed(broker, version=2, pattern="(")
        assert (bad["error_code"], bad["transaction_states"]) == (E.INVALID_REGULAR_EXPRESSION, [])
    run(scenario)


def test_describe_producers_reports_sequences_timestamps_and_open_transactions():
    async def scenario(broker):
        assert {p: r["active_producers"] for p, r in (await producers(broker)).items()} == {0: [], 1: [], 2: []}
        # an idempotent producer (a plain id) on partition 1: two batches
        for seq, ts in ((0, T0 + 5), (5, T0 + 50)):
            assert (await produce(broker, 1, batch(700, 3, seq, 5, transactional=False, timestamp=ts)))[
                "error_code"] == E.NONE
        pid, epoch = await init_producer(broker, "tx")
        assert await add_partitions(broker, "tx", pid, epoch, [0]) == [E.NONE]
        assert (await produce(broker, 0, batch(900, 0, 0, 2, transactional=False, timestamp=T0)))["error_code"] == 0
        start = await produce(broker, 0, batch(pid, epoch, 0, 4, transactional=True, timestamp=T0 + 100), "tx")
        assert (start["error_code"], start["base_offset"]) == (E.NONE, 2)
        state = await producers(broker)
        assert state[1]["active_producers"] == [{
            "producer_id": 700, "producer_epoch": 3, "last_sequence": 9, "last_timestamp": T0 + 54,
            "coordinator_epoch": -1, "current_txn_start_offset": -1}]
        mine, = (p for p in state[0]["active_producers"] if p["producer_id"] == pid)
        assert (mine["current_txn_start_offset"], mine["last_timestamp"], mine["coordinator_epoch"]) == (
            start["base_offset"], T0 + 103, -1)
        assert await end_txn(broker, "tx", pid, epoch, commit=True) == E.NONE
        mine, = (p for p in (await producers(broker))[0]["active_producers"] if p["producer_id"] == pid)
        assert (mine["current_txn_start_offset"], mine["coordinator_epoch"]) == (-1, 0)
    run(scenario)


def test_describe_producers_answers_bad_topics_and_partitions_per_partition():
    async def scenario(broker):
        T = DescribeProducersRequest.TopicRequest
        r = await call(broker, DESCRIBE_PRODUCERS, 0, topics=[
            T(name="t", partition_indexes=[0, 7, -1]), T(name="missing", partition_indexes=[0]),
            T(name="bad/name", partition_indexes=[0, 1]), T(name="", partition_indexes=[0])])
        got = [(t["name"], p["partition_index"], p["error_code"]) for t in r["topics"] for p in t["partitions"]]
        unknown, invalid = E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_TOPIC_EXCEPTION
        assert got == [("t", 0, E.NONE), ("t", 7, unknown), ("t", -1, unknown), ("missing", 0, unknown),
                       ("bad/name", 0, invalid), ("bad/name", 1, invalid), ("", 0, invalid)]
        broker.logs.partition("t", 2).health.take_offline("test: disk gone")
        assert (await producers(broker, partitions=[2]))[2]["error_code"] == E.KAFKA_STORAGE_ERROR
    run(scenario)
