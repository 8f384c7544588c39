"""The resource-level ACL checks of the group and transaction APIs, through the real handlers,
in-process: each answer compared field by field with what Kafka's KafkaApis sends.

The broker runs Kafka's ACL authorizer (super user ``User:admin``); requests are built with
kafka-python's classes, encoded and decoded as on the wire, and handed to the registered
handler with the principal the test names, whose ACLs are put straight into the broker's
store.  The stock-client view of the same checks is tests/integration/test_acl_groups.py.
"""
from __future__ import annotations

import logging

from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.consumer import (JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest,
                                     OffsetFetchRequest)
from kafka.protocol.producer import AddPartitionsToTxnRequest, TxnOffsetCommitRequest

from kwire.admin.acls import (CLUSTER_NAME, AclBinding, AclChange, AclOperation, AclPermissionType, PatternType,
                              ResourceType)
from kwire.server.broker import Endpoint
from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.handlers.registry import HANDLERS
from kwire.server.connection import RequestContext
from tests.support.inprocess import broker_in_process, run_with

ALICE = "User:alice"
Op, R = AclOperation, ResourceType
GROUP_DENIED, TOPIC_DENIED = E.GROUP_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED
TXN_DENIED, CLUSTER_DENIED = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66


def run(test, **properties) -> None:
    run_with(test, broker_in_process(
        {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
         "group.initial.rebalance.delay.ms": "0", "super.users": "User:admin",
         "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", **properties},
        topics={"t": 2, "secret": 2}, advertised=Endpoint("127.0.0.1", 9092)))


def allow(broker, resource_type: ResourceType, name: str, *operations: AclOperation, principal: str = ALICE,
          pattern: PatternType = PatternType.LITERAL, permission=AclPermissionType.ALLOW) -> None:
    broker.acls.store.apply(AclChange(added=tuple(
        AclBinding(resource_type, name, pattern, principal, "*", op, permission) for op in operations)))


async def call(broker, api_key: int, version: int, principal: str = ALICE, **fields) -> dict:
    """One request through its registered handler as ``principal``; the answer must encode."""
    cls = messages.API_CLASSES[api_key][0]
    body = bytes(cls(version=version, **fields).encode(version=version))
    request = messages.decode_request(api_key, version, body, 0)
    ctx = RequestContext(broker=broker, api_key=api_key, api_version=version, correlation_id=1,
                         client_id="inproc", peer="127.0.0.1:40000", principal=principal)
    response = await HANDLERS[api_key].func(ctx, request)
    messages.encode_response(api_key, version, response)
    return response


def errors_of(topics, partitions_key: str = "partitions", error_key: str = "error_code") -> dict:
    return {(t["name"], p["partition_index"]): p[error_key] for t in topics for p in t[partitions_key]}


# -- group membership ---------------------------------------------------------------------------
JOIN_FIELDS = dict(session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="", group_instance_id=None,
                   protocol_type="consumer",
                   protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])


def test_membership_apis_need_read_on_the_group():
    async def scenario(broker):
        join = await call(broker, JOIN, 7, group_id="g", **JOIN_FIELDS)
        assert join == {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "generation_id": -1,
                        "protocol_type": None, "protocol_name": None, "leader": "", "member_id": "", "members": []}
        assert (await call(broker, JOIN, 5, group_id="g", **JOIN_FIELDS))["protocol_name"] == ""
        sync = await call(broker, SYNC, 5, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
                          protocol_type="consumer", protocol_name="range", assignments=[])
        assert (sync["error_code"], sync["assignment"]) == (GROUP_DENIED, b"")
        no_protocol = await call(broker, SYNC, 5, group_id="g", generation_id=1, member_id="m",
                                 group_instance_id=None, protocol_type=None, protocol_name=None, assignments=[])
        assert no_protocol["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL, "Kafka checks this before the ACL"
        heartbeat = await call(broker, HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m",
                               group_instance_id=None)
        assert heartbeat == {"throttle_time_ms": 0, "error_code": GROUP_DENIED}
        leave = await call(broker, LEAVE, 5, group_id="g", members=[
            LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason=None)])
        assert leave == {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "members": []}

        allow(broker, R.GROUP, "g", Op.READ)
        assert (await call(broker, JOIN, 7, group_id="g", **JOIN_FIELDS))["error_code"] == E.MEMBER_ID_REQUIRED
        assert (await call(broker, HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m",
                           group_instance_id=None))["error_code"] == E.UNKNOWN_MEMBER_ID
        assert (await call(broker, HEARTBEAT, 4, "User:admin", group_id="h", generation_id=1, member_id="m",
                           group_instance_id=None))["error_code"] == E.UNKNOWN_MEMBER_ID, "a super user"
    run(scenario)


def test_find_coordinator_needs_describe_on_each_key():
    async def scenario(broker):
        allow(broker, R.GROUP, "g", Op.READ)                 # READ implies DESCRIBE
        allow(broker, R.TRANSACTIONAL_ID, "tx", Op.WRITE)    # so does WRITE
        old = await call(broker, FIND_COORDINATOR, 3, key="nope", key_type=0)
        assert old == {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "error_message": "Group authorization failed.",
                       "node_id": -1, "host": "", "port": -1}
        old = await call(broker, FIND_COORDINATOR, 2, key="nope", key_type=1)
        assert (old["error_code"], old["error_message"]) == (TXN_DENIED, "Transactional Id authorization failed.")
        assert broker.logs.get("__transaction_state") is None, "no internal topic for a denied key"
        assert (await call(broker, FIND_COORDINATOR, 0, key="g"))["error_code"] == E.NONE
        batched = await call(broker, FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["g", "nope"])
        assert [(c["key"], c["error_code"], c["node_id"]) for c in batched["coordinators"]] == [
            ("g", E.NONE, broker.node_id), ("nope", GROUP_DENIED, -1)]
        assert batched["coordinators"][1] == {"key": "nope", "node_id": -1, "host": "", "port": -1,
                                              "error_code": GROUP_DENIED, "error_message": None}
        txn = await call(broker, FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["tx", "g"])
        assert [(c["key"], c["error_code"]) for c in txn["coordinators"]] == [("tx", E.NONE), ("g", TXN_DENIED)]
    run(scenario)


# -- offsets ---------------------------------------------------------------------------------------
def commit_topics(*topics: str, offset: int = 5) -> list:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return [T(name=topic, partitions=[T.OffsetCommitRequestPartition(
        partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m")
        for p in (0, 1)]) for topic in topics]


async def commit(broker, group: str, *topics: str, principal: str = ALICE) -> dict:
    r = await call(broker, OFFSET_COMMIT, 8, principal, group_id=group, generation_id_or_member_epoch=-1,
                   member_id="", group_instance_id=None, topics=commit_topics(*topics))
    return errors_of(r["topics"])


def fetch_group(group: str, topics) -> OffsetFetchRequest.OffsetFetchRequestGroup:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    return G(group_id=group, topics=None if topics is None else [
        G.OffsetFetchRequestTopics(name=t, partition_indexes=[0, 1]) for t in topics])


def test_offset_commit_needs_read_on_the_group_then_on_each_topic():
    async def scenario(broker):
        assert await commit(broker, "g", "t", "secret") == dict.fromkeys(
            [("t", 0), ("t", 1), ("secret", 0), ("secret", 1)], GROUP_DENIED)
        allow(broker, R.GROUP, "g", Op.READ)
        assert await commit(broker, "g", "secret") == {("secret", 0): TOPIC_DENIED, ("secret", 1): TOPIC_DENIED}
        assert broker.logs.get("__consumer_offsets") is None, "nothing reached the coordinator"
        allow(broker, R.TOPIC, "t", Op.READ)
        assert await commit(broker, "g", "secret", "t") == {("secret", 0): TOPIC_DENIED, ("secret", 1): TOPIC_DENIED,
                                                             ("t", 0): E.NONE, ("t", 1): E.NONE}
        assert await commit(broker, "g", "secret", principal="User:admin") == {("secret", 0): E.NONE,
                                                                               ("secret", 1): E.NONE}
        # OffsetFetch needs DESCRIBE (READ implies it) on the group and on each topic
        r = await call(broker, OFFSET_FETCH, 8, groups=[fetch_group("g", ["secret", "t"]), fetch_group("h", ["t"])],
                       require_stable=False)
        g, h = r["groups"]
        assert h == {"group_id": "h", "topics": [], "error_code": GROUP_DENIED}
        assert g["error_code"] == E.NONE
        assert [(t["name"], [(p["partition_index"], p["committed_offset"], p["error_code"]) for p in t["partitions"]])
                for t in g["topics"]] == [("t", [(0, 5, 0), (1, 5, 0)]),
                                          ("secret", [(0, -1, TOPIC_DENIED), (1, -1, TOPIC_DENIED)])]
        every = await call(broker, OFFSET_FETCH, 8, groups=[fetch_group("g", None)], require_stable=False)
        assert [t["name"] for t in every["groups"][0]["topics"]] == ["t"], "secret's offsets are hidden"
        admin = await call(broker, OFFSET_FETCH, 8, "User:admin", groups=[fetch_group("g", None)],
                           require_stable=False)
        assert sorted(t["name"] for t in admin["groups"][0]["topics"]) == ["secret", "t"]
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        v3 = await call(broker, OFFSET_FETCH, 3, group_id="h", topics=[T(name="t", partition_indexes=[0])])
        assert (v3["error_code"], v3["topics"]) == (GROUP_DENIED, [])
        v1 = await call(broker, OFFSET_FETCH, 1, group_id="h", topics=[T(name="t", partition_indexes=[0, 1])])
        assert errors_of(v1["topics"]) == {("t", 0): GROUP_DENIED, ("t", 1): GROUP_DENIED}, "v1: per partition"
        v3 = await call(broker, OFFSET_FETCH, 3, group_id="g", topics=None)
        assert [t["name"] for t in v3["topics"]] == ["t"]
    run(scenario)


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic():
    async def scenario(broker):
        assert await commit(broker, "g", "t", "secret", principal="User:admin")
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        topics = [T(name=name, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])
                  for name in ("t", "secret")]
        allow(broker, R.GROUP, "g", Op.READ)
        r = await call(broker, OFFSET_DELETE, 0, group_id="g", topics=topics)
        assert r == {"error_code": GROUP_DENIED, "throttle_time_ms": 0, "topics": []}
        allow(broker, R.GROUP, "g", Op.DELETE)
        allow(broker, R.TOPIC, "t", Op.READ)
        r = await call(broker, OFFSET_DELETE, 0, group_id="g", topics=topics)
        assert (r["error_code"], errors_of(r["topics"])) == (E.NONE, {("t", 0): E.NONE, ("secret", 0): TOPIC_DENIED})
    run(scenario)


# -- group administration -------------------------------------------------------------------------
def test_describe_list_and_delete_groups_per_group():
    async def scenario(broker):
        for group in ("mine", "theirs", "other"):
            await commit(broker, group, "t", principal="User:admin")
        allow(broker, R.GROUP, "mine", Op.DESCRIBE)
        allow(broker, R.GROUP, "other", Op.DELETE)
        r = await call(broker, DESCRIBE_GROUPS, 5, groups=["mine", "theirs"], include_authorized_operations=True)
        denied, mine = r["groups"]           # as Kafka: the denied groups first
        assert denied == {"error_code": GROUP_DENIED, "error_message": None, "group_id": "theirs", "group_state": "",
                          "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": None}
        assert (mine["group_id"], mine["error_code"], mine["group_state"]) == ("mine", E.NONE, "Empty")
        assert mine["authorized_operations"] == [int(Op.DESCRIBE)]
        admin = await call(broker, DESCRIBE_GROUPS, 5, "User:admin", groups=["mine"], include_authorized_operations=True)
        assert admin["groups"][0]["authorized_operations"] == sorted(
            int(op) for op in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
        plain = await call(broker, DESCRIBE_GROUPS, 5, groups=["mine"], include_authorized_operations=False)
        assert plain["groups"][0]["authorized_operations"] is None

        listed = await call(broker, LIST_GROUPS, 4, states_filter=[])
        assert sorted(g["group_id"] for g in listed["groups"]) == ["mine", "other"], "DELETE implies DESCRIBE"
        allow(broker, R.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)
        listed = await call(broker, LIST_GROUPS, 4, states_filter=[])
        assert sorted(g["group_id"] for g in listed["groups"]) == ["mine", "other", "theirs"]

        r = await call(broker, DELETE_GROUPS, 2, groups_names=["theirs", "other", "theirs", "mine"])
        assert [(g["group_id"], g["error_code"]) for g in r["results"]] == [
            ("other", E.NONE), ("theirs", GROUP_DENIED), ("mine", GROUP_DENIED)]
    run(scenario)


# -- producer ids and transactions ----------------------------------------------------------------
async def init_producer_id(broker, transactional_id: str | None, principal: str = ALICE) -> dict:
    return await call(broker, INIT_PRODUCER_ID, 4, principal, transactional_id=transactional_id,
                      transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)


def test_init_producer_id_needs_write_on_the_transactional_id_or_idempotent_write():
    async def scenario(broker):
        assert await init_producer_id(broker, "tx") == {"throttle_time_ms": 0, "error_code": TXN_DENIED,
                                                        "producer_id": -1, "producer_epoch": -1}
        assert await init_producer_id(broker, None) == {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                        "producer_id": -1, "producer_epoch": -1}
        allow(broker, R.TOPIC, "t", Op.READ)
        assert (await init_producer_id(broker, None))["error_code"] == CLUSTER_DENIED, "READ is no WRITE"
        allow(broker, R.TOPIC, "logs-", Op.WRITE, pattern=PatternType.PREFIXED)
        assert (await init_producer_id(broker, None))["error_code"] == E.NONE, "KIP-679: WRITE on some topic"
        assert (await init_producer_id(broker, None, "User:bob"))["error_code"] == CLUSTER_DENIED
        allow(broker, R.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE, principal="User:bob")
        assert (await init_producer_id(broker, None, "User:bob"))["error_code"] == E.NONE
        allow(broker, R.TRANSACTIONAL_ID, "tx", Op.WRITE)
        assert (await init_producer_id(broker, "tx"))["error_code"] == E.NONE
        assert (await init_producer_id(broker, "other"))["error_code"] == TXN_DENIED
    run(scenario)


def test_transaction_apis_need_write_on_the_transactional_id_then_on_topics_and_read_on_groups():
    async def scenario(broker):
        allow(broker, R.TRANSACTIONAL_ID, "tx", Op.WRITE)
        r = await init_producer_id(broker, "tx")
        pid, epoch = r["producer_id"], r["producer_epoch"]
        ids = dict(producer_id=pid, producer_epoch=epoch)
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

        async def add(transactional_id, topics: dict, principal=ALICE) -> dict:
            r = await call(broker, ADD_PARTITIONS, 3, principal, v3_and_below_transactional_id=transactional_id,
                           v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                           v3_and_below_topics=[Topic(name=n, partitions=ps) for n, ps in topics.items()])
            return errors_of(r["results_by_topic_v3_and_below"], "results_by_partition", "partition_error_code")

        assert await add("other", {"t": [0]}) == {("t", 0): TXN_DENIED}
        assert await add("tx", {"t": [0], "secret": [0], "__consumer_offsets": [0], "gone": [0]}) == {
            ("t", 0): TOPIC_DENIED, ("secret", 0): TOPIC_DENIED, ("__consumer_offsets", 0): TOPIC_DENIED,
            ("gone", 0): TOPIC_DENIED}
        allow(broker, R.TOPIC, "t", Op.WRITE)
        allow(broker, R.TOPIC, "gone", Op.WRITE)
        assert await add("tx", {"t": [0], "secret": [0], "gone": [0]}) == {
            ("t", 0): E.OPERATION_NOT_ATTEMPTED, ("secret", 0): TOPIC_DENIED, ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert await add("tx", {"t": [0, 1]}) == {("t", 0): E.NONE, ("t", 1): E.NONE}

        assert (await call(broker, ADD_OFFSETS, 3, transactional_id="other", group_id="g", **ids))["error_code"] \
            == TXN_DENIED
        assert (await call(broker, ADD_OFFSETS, 3, transactional_id="tx", group_id="g", **ids))["error_code"] \
            == GROUP_DENIED
        allow(broker, R.GROUP, "g", Op.READ)
        assert (await call(broker, ADD_OFFSETS, 3, transactional_id="tx", group_id="g", **ids))["error_code"] \
            == E.NONE

        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic

        async def txn_commit(transactional_id, group) -> dict:
            r = await call(broker, TXN_OFFSET_COMMIT, 3, transactional_id=transactional_id, group_id=group,
                           generation_id=-1, member_id="", group_instance_id=None, **ids, topics=[
                               T(name=n, partitions=[T.TxnOffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                   committed_metadata="")]) for n in ("t", "secret")])
            return errors_of(r["topics"])

        assert await txn_commit("other", "g") == {("t", 0): TXN_DENIED, ("secret", 0): TXN_DENIED}
        assert await txn_commit("tx", "h") == {("t", 0): GROUP_DENIED, ("secret", 0): GROUP_DENIED}
        assert await txn_commit("tx", "g") == {("t", 0): TOPIC_DENIED, ("secret", 0): TOPIC_DENIED}, "WRITE is no READ"
        allow(broker, R.TOPIC, "t", Op.READ)
        assert await txn_commit("tx", "g") == {("t", 0): E.NONE, ("secret", 0): TOPIC_DENIED}

        assert (await call(broker, END_TXN, 3, transactional_id="other", committed=True, **ids))["error_code"] \
            == TXN_DENIED
        assert (await call(broker, END_TXN, 3, transactional_id="tx", committed=True, **ids))["error_code"] == E.NONE
    run(scenario)


def test_transaction_admin_reads_hide_what_the_principal_may_not_describe(caplog):
    async def scenario(broker):
        for tid in ("tx", "tx2"):
            r = await init_producer_id(broker, tid, "User:admin")
            add = await call(broker, ADD_PARTITIONS, 3, "User:admin", v3_and_below_transactional_id=tid,
                             v3_and_below_producer_id=r["producer_id"], v3_and_below_producer_epoch=r["producer_epoch"],
                             v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                                 name=n, partitions=[0]) for n in ("t", "secret")])
            assert all(code == 0 for code in errors_of(add["results_by_topic_v3_and_below"], "results_by_partition",
                                                       "partition_error_code").values())
        allow(broker, R.TRANSACTIONAL_ID, "tx", Op.DESCRIBE)
        allow(broker, R.TOPIC, "t", Op.DESCRIBE)
        denied, tx = (await call(broker, DESCRIBE_TXNS, 0, transactional_ids=["tx2", "tx"]))["transaction_states"]
        assert denied == {"error_code": TXN_DENIED, "transactional_id": "tx2", "topics": []}
        assert (tx["error_code"], tx["transaction_state"]) == (E.NONE, "Ongoing")
        assert tx["topics"] == [{"topic": "t", "partitions": [0]}], "secret's partitions are left out"
        listed = await call(broker, LIST_TXNS, 1, state_filters=[], producer_id_filters=[], duration_filter=-1)
        assert [s["transactional_id"] for s in listed["transaction_states"]] == ["tx"]
        admin = await call(broker, LIST_TXNS, 1, "User:admin", state_filters=[], producer_id_filters=[],
                           duration_filter=-1)
        assert [s["transactional_id"] for s in admin["transaction_states"]] == ["tx", "tx2"]

        allow(broker, R.TOPIC, "gone", Op.READ)
        r = await call(broker, DESCRIBE_PRODUCERS, 0, topics=[DescribeProducersRequest.TopicRequest(
            name=n, partition_indexes=[0]) for n in ("t", "secret", "gone", "bad name")])
        assert [(t["name"], t["partitions"][0]["error_code"]) for t in r["topics"]] == [
            ("t", TOPIC_DENIED), ("secret", TOPIC_DENIED), ("gone", E.UNKNOWN_TOPIC_OR_PARTITION),
            ("bad name", E.INVALID_TOPIC_EXCEPTION)], "DESCRIBE is no READ; invalid names come first"
        allow(broker, R.TOPIC, "t", Op.READ)
        r = await call(broker, DESCRIBE_PRODUCERS, 0, topics=[DescribeProducersRequest.TopicRequest(
            name="t", partition_indexes=[0])])
        assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [E.NONE]
    with caplog.at_level(logging.INFO, logger="kwire.acls"):
        run(scenario)
    assert "User:alice denied DESCRIBE on TRANSACTIONAL_ID tx2" in caplog.text


def test_without_an_authorizer_nothing_is_checked():
    async def scenario(broker):
        assert (await init_producer_id(broker, "tx"))["error_code"] == E.NONE
        assert (await init_producer_id(broker, None))["error_code"] == E.NONE
        assert await commit(broker, "g", "t", "secret") == dict.fromkeys(
            [("t", 0), ("t", 1), ("secret", 0), ("secret", 1)], E.NONE)
        r = await call(broker, DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=True)
        assert r["groups"][0]["authorized_operations"] is None
        assert [g["group_id"] for g in (await call(broker, LIST_GROUPS, 4, states_filter=[]))["groups"]] == ["g"]
    run(scenario, **{"authorizer.class.name": ""})
