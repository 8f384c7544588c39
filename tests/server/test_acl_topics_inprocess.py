"""The resource-level ACL checks of the topic, config and cluster APIs (kwire.handlers.authz),
through a real ``Connection`` over memory streams (see test_connection_inprocess).

The client is ``User:ANONYMOUS`` (a PLAINTEXT listener); each test grants it ACLs straight in
the broker's store, so it can see each answer Kafka's KafkaApis gives: per-partition and
per-entry errors, hidden topics, withheld names, authorized-operations bit fields."""
from __future__ import annotations

import uuid

import trio
from kafka.protocol.admin import (AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest,
                                  DescribeConfigsRequest, DescribeTopicPartitionsRequest,
                                  ElectLeadersRequest, IncrementalAlterConfigsRequest)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kwire.admin.acls import (SUPPORTED_OPERATIONS, AclBinding, AclChange, AclOperation, AclPermissionType,
                              PatternType, ResourceType)
from kwire.codecs.errors import ErrorCode as E
from tests.log.logkit import build_batch
from tests.server.test_connection_inprocess import connected, real_time, run
from tests.server.test_fetch_sessions_inprocess import answered, fetch, produce, topic_id

ACLS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
ME = "User:ANONYMOUS"
Op, R = AclOperation, ResourceType
TAF = E.TOPIC_AUTHORIZATION_FAILED


def binding(rtype, name, op, deny=False, principal=ME) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, principal, "*", op,
                      AclPermissionType.DENY if deny else AclPermissionType.ALLOW)


def grant(broker, rtype, name, *ops, deny=False) -> None:
    broker.acls.store.apply(AclChange(added=tuple(binding(rtype, name, op, deny) for op in ops)))


def revoke(broker, rtype, name, *ops) -> None:
    broker.acls.store.apply(AclChange(removed=tuple(binding(rtype, name, op) for op in ops)))


async def create_topics(client, broker, *names, partitions: int = 1) -> None:
    """Create topics as a principal briefly allowed CREATE on the cluster."""
    Topic = CreateTopicsRequest.CreatableTopic
    grant(broker, R.CLUSTER, "kafka-cluster", Op.CREATE)
    with real_time():
        r = await client.call(CreateTopicsRequest, 5, timeout_ms=1000, validate_only=False, topics=[
            Topic(name=n, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
            for n in names])
    revoke(broker, R.CLUSTER, "kafka-cluster", Op.CREATE)
    assert [t.error_code for t in r.topics] == [E.NONE] * len(names), r


def produce_fields(topics: dict, transactional_id=None, batch=None) -> dict:
    Data = ProduceRequest.TopicProduceData
    return dict(transactional_id=transactional_id, acks=1, timeout_ms=1000, topic_data=[
        Data(name=t, partition_data=[Data.PartitionProduceData(index=p, records=batch or build_batch([b"v"]))
                                     for p in parts]) for t, parts in topics.items()])


def produced(r) -> dict:
    return {(t.name, p.index): p.error_code for t in r.responses for p in t.partition_responses}


def test_produce_needs_write_on_each_topic_and_on_a_transactional_id(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b", partitions=2)
            grant(broker, R.TOPIC, "a", Op.WRITE)
            r = await client.call(ProduceRequest, 9, **produce_fields({"a": [0, 1], "b": [0], "nope": [0]}))
            assert produced(r) == {("a", 0): E.NONE, ("a", 1): E.NONE, ("b", 0): TAF, ("nope", 0): TAF}
            assert broker.logs.partition("b", 0).log_end_offset == 0
            # transactional batches: WRITE on the transactional id first, for the whole request
            txn = build_batch([b"t"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
            for tid in (None, "tx"):
                r = await client.call(ProduceRequest, 9, **produce_fields({"a": [0], "b": [0]}, tid, txn))
                assert produced(r) == {("a", 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                       ("b", 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            grant(broker, R.TRANSACTIONAL_ID, "tx", Op.WRITE)
            r = await client.call(ProduceRequest, 9, **produce_fields({"a": [0], "b": [0]}, "tx", txn))
            codes = produced(r)       # no transaction is open: the coordinator's error, not an ACL's
            assert codes[("b", 0)] == TAF and codes[("a", 0)] not in (E.NONE, TAF,
                                                                      E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            grant(broker, R.TOPIC, "b", Op.WRITE, deny=True)   # DENY beats the wildcard ALLOW
            grant(broker, R.TOPIC, "*", Op.WRITE)
            r = await client.call(ProduceRequest, 9, **produce_fields({"a": [0], "b": [0]}))
            assert produced(r) == {("a", 0): E.NONE, ("b", 0): TAF}
    run(scenario)


def test_fetch_needs_read_and_refused_partitions_do_not_end_a_long_poll(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b")
            grant(broker, R.TOPIC, "*", Op.WRITE)
            await produce(client, broker, "a", 0, b"a0")
            await produce(client, broker, "b", 0, b"b0")
            grant(broker, R.TOPIC, "a", Op.READ)
            r = await client.call(FetchRequest, 12, **fetch(12, {"a": {0: 0}, "b": {0: 0}}, epoch=-1))
            assert answered(r) == {("a", 0): (E.NONE, 1, [b"a0"]), ("b", 0): (TAF, -1, [])}
            # a refused partition is no reason to answer before max_wait_ms ...
            start = trio.current_time()
            r = await client.call(FetchRequest, 12, **fetch(12, {"a": {0: 1}, "b": {0: 0}}, epoch=-1,
                                                             max_wait_ms=400))
            assert trio.current_time() - start >= 0.4 and answered(r)[("b", 0)][0] == TAF
            # ... unless nothing else was asked for
            start = trio.current_time()
            r = await client.call(FetchRequest, 12, **fetch(12, {"b": {0: 0}}, epoch=-1, max_wait_ms=400))
            assert trio.current_time() - start < 0.4 and answered(r) == {("b", 0): (TAF, -1, [])}
    run(scenario)


def test_an_incremental_fetch_checks_every_session_partition_each_time(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b")
            grant(broker, R.TOPIC, "*", Op.WRITE)
            await produce(client, broker, "a", 0, b"a0")
            grant(broker, R.TOPIC, "a", Op.READ)
            r = await client.call(FetchRequest, 12, **fetch(12, {"a": {0: 0}, "b": {0: 0}}))
            sid = r.session_id
            assert sid and answered(r) == {("a", 0): (E.NONE, 1, [b"a0"]), ("b", 0): (TAF, -1, [])}
            r = await client.call(FetchRequest, 12, **fetch(12, {"a": {0: 1}}, session_id=sid, epoch=1))
            assert answered(r) == {("b", 0): (TAF, -1, [])}      # a is idle, b's error always answered
            revoke(broker, R.TOPIC, "a", Op.READ)                 # an idle partition is checked too
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=2))
            assert answered(r) == {("a", 0): (TAF, -1, []), ("b", 0): (TAF, -1, [])}
            grant(broker, R.TOPIC, "a", Op.READ)
            grant(broker, R.TOPIC, "b", Op.READ)
            r = await client.call(FetchRequest, 12, **fetch(12, {}, session_id=sid, epoch=3))
            assert answered(r) == {("a", 0): (E.NONE, 1, []), ("b", 0): (E.NONE, 0, [])}
    run(scenario)


def test_fetch_by_topic_id_and_follower_fetches(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b")
            grant(broker, R.TOPIC, "*", Op.WRITE)                  # WRITE implies DESCRIBE: ids readable
            await produce(client, broker, "a", 0, b"a0")
            a_id, b_id, stranger = await topic_id(client, "a"), await topic_id(client, "b"), uuid.uuid4()
            grant(broker, R.TOPIC, "a", Op.READ)
            r = await client.call(FetchRequest, 13, **fetch(13, {a_id: {0: 0}, b_id: {0: 0}, stranger: {0: 0}}))
            assert answered(r) == {(a_id, 0): (E.NONE, 1, [b"a0"]), (b_id, 0): (TAF, -1, []),
                                   (stranger, 0): (E.UNKNOWN_TOPIC_ID, -1, [])}
            assert {t.topic for t in r.responses} == {""}         # v13+ names topics by id only
            # a follower needs CLUSTER_ACTION: refused, every partition (unknown ids too) is refused
            follower = dict(fetch(13, {a_id: {0: 0}, stranger: {0: 0}}, epoch=-1), replica_id=1)
            r = await client.call(FetchRequest, 13, **follower)
            assert answered(r) == {(a_id, 0): (TAF, -1, []), (stranger, 0): (TAF, -1, [])}
            grant(broker, R.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)
            follower = dict(fetch(12, {"b": {0: 0}}, epoch=-1), replica_id=1)
            r = await client.call(FetchRequest, 12, **follower)    # no READ on b needed
            assert answered(r) == {("b", 0): (E.NONE, 0, [])}
    run(scenario)


def test_list_offsets_delete_records_and_offset_for_leader_epoch(tmp_path):
    LTopic = ListOffsetsRequest.ListOffsetsTopic
    DTopic = DeleteRecordsRequest.DeleteRecordsTopic
    ETopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic

    async def list_offsets(client, *names):
        r = await client.call(ListOffsetsRequest, 7, replica_id=-1, isolation_level=0, topics=[
            LTopic(name=n, partitions=[LTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                   timestamp=-1)]) for n in names])
        return {t.name: (t.partitions[0].error_code, t.partitions[0].offset) for t in r.topics}

    async def epochs(client, *names):
        r = await client.call(OffsetForLeaderEpochRequest, 4, replica_id=-1, topics=[
            ETopic(topic=n, partitions=[ETopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                        leader_epoch=0)]) for n in names])
        return {t.topic: t.partitions[0].error_code for t in r.topics}

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b")
            grant(broker, R.TOPIC, "a", Op.WRITE)
            await produce(client, broker, "a", 0, b"1", b"2")
            assert await list_offsets(client, "a", "b", "nope") == {"a": (E.NONE, 2), "b": (TAF, -1),
                                                                    "nope": (TAF, -1)}
            grant(broker, R.TOPIC, "nope", Op.DESCRIBE)
            assert (await list_offsets(client, "nope"))["nope"][0] == E.UNKNOWN_TOPIC_OR_PARTITION
            with real_time():
                r = await client.call(DeleteRecordsRequest, 2, timeout_ms=1000, topics=[DTopic(
                    name="a", partitions=[DTopic.DeleteRecordsPartition(partition_index=0, offset=1)])])
                assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].low_watermark) == (TAF, -1)
                grant(broker, R.TOPIC, "a", Op.DELETE)
                r = await client.call(DeleteRecordsRequest, 2, timeout_ms=1000, topics=[DTopic(
                    name="a", partitions=[DTopic.DeleteRecordsPartition(partition_index=0, offset=1)])])
                assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].low_watermark) == (0, 1)
            assert await epochs(client, "a", "b") == {"a": E.NONE, "b": TAF}
            grant(broker, R.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)   # any topic then
            assert await epochs(client, "a", "b") == {"a": E.NONE, "b": E.NONE}
    run(scenario)


def metadata_fields(topics, *, create=False, ops=True) -> dict:
    Topic = MetadataRequest.MetadataRequestTopic
    return dict(topics=None if topics is None else [
        Topic(name=None, topic_id=t) if isinstance(t, uuid.UUID) else Topic(name=t, topic_id=None) for t in topics],
        allow_auto_topic_creation=create, include_cluster_authorized_operations=ops,
        include_topic_authorized_operations=ops)


def topic_bits(*ops) -> set[int]:
    return {int(op) for op in ops}


def test_metadata_hides_refuses_auto_creates_and_reports_operations(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b", "c")
            grant(broker, R.TOPIC, "a", Op.DESCRIBE)
            grant(broker, R.TOPIC, "b", Op.READ)                   # READ implies DESCRIBE
            r = await client.call(MetadataRequest, 10, **metadata_fields(None))
            assert {t.name: t.authorized_operations for t in r.topics} == {
                "a": topic_bits(Op.DESCRIBE), "b": topic_bits(Op.READ, Op.DESCRIBE)}
            assert r.authorized_operations == set()                # no DESCRIBE on the cluster
            r = await client.call(MetadataRequest, 12, **metadata_fields(["a", "c", "ghost"], create=True))
            assert [(t.name, t.error_code, t.topic_id, len(t.partitions), t.authorized_operations)
                    for t in r.topics] == [("a", 0, broker.logs.get("a").topic_id, 1, topic_bits(Op.DESCRIBE)),
                                           ("c", TAF, None, 0, None), ("ghost", TAF, None, 0, None)]
            c_id = broker.logs.get("c").topic_id
            r = await client.call(MetadataRequest, 12, **metadata_fields([c_id]))
            assert [(t.name, t.error_code, t.topic_id) for t in r.topics] == [(None, TAF, c_id)]
            # auto-creation: DESCRIBE, then CREATE on the cluster or on the topic
            grant(broker, R.TOPIC, "new", Op.DESCRIBE)
            r = await client.call(MetadataRequest, 12, **metadata_fields(["new"], create=True))
            assert (r.topics[0].error_code, r.topics[0].authorized_operations) == (TAF, None)
            assert broker.logs.get("new") is None
            grant(broker, R.TOPIC, "new", Op.CREATE)
            with real_time():
                r = await client.call(MetadataRequest, 12, **metadata_fields(["new"], create=True))
            assert r.topics[0].error_code == E.NONE and broker.logs.get("new") is not None
            assert r.topics[0].authorized_operations == topic_bits(Op.DESCRIBE, Op.CREATE)
            grant(broker, R.CLUSTER, "kafka-cluster", Op.DESCRIBE)
            r = await client.call(MetadataRequest, 9, **metadata_fields(["a"]))
            assert r.authorized_operations == {int(Op.DESCRIBE)}
    run(scenario)


def test_authorized_operations_without_an_authorizer_are_all_supported_ones(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            await create_topics(client, broker, "a")
            r = await client.call(MetadataRequest, 10, **metadata_fields(["a"]))
            assert r.topics[0].authorized_operations == topic_bits(*SUPPORTED_OPERATIONS[R.TOPIC])
            assert r.authorized_operations == topic_bits(*SUPPORTED_OPERATIONS[R.CLUSTER])
            r = await client.call(MetadataRequest, 10, **metadata_fields(["a"], ops=False))
            assert (r.topics[0].authorized_operations, r.authorized_operations) == (None, None)
            r = await client.call(DescribeClusterRequest, 1, include_cluster_authorized_operations=True,
                                  endpoint_type=1, include_fenced_brokers=False)
            assert r.authorized_operations == topic_bits(*SUPPORTED_OPERATIONS[R.CLUSTER])
    run(scenario)


def test_describe_topic_partitions_and_describe_cluster(tmp_path):
    Req = DescribeTopicPartitionsRequest

    async def describe(client, names=(), limit=100):
        r = await client.call(Req, 0, topics=[Req.TopicRequest(name=n) for n in names],
                              response_partition_limit=limit, cursor=None)
        return [(t.name, t.error_code, t.topic_authorized_operations) for t in r.topics], r.next_cursor

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", "b", "c")
            grant(broker, R.TOPIC, "a", Op.DESCRIBE)
            grant(broker, R.TOPIC, "c", Op.DESCRIBE)
            described = 1 << Op.DESCRIBE
            assert await describe(client) == ([("a", 0, described), ("c", 0, described)], None)
            rows, cursor = await describe(client, limit=1)          # b is passed over, not a page stop
            assert rows == [("a", 0, described)] and (cursor.topic_name, cursor.partition_index) == ("c", 0)
            rows, _ = await describe(client, ["b", "c", "ghost"])
            assert rows == [("c", 0, described), ("b", TAF, -2147483648), ("ghost", TAF, -2147483648)]
            r = await client.call(DescribeClusterRequest, 1, include_cluster_authorized_operations=True,
                                  endpoint_type=1, include_fenced_brokers=False)
            assert r.authorized_operations == set()
            grant(broker, R.CLUSTER, "kafka-cluster", Op.ALTER)     # ALTER implies DESCRIBE
            r = await client.call(DescribeClusterRequest, 1, include_cluster_authorized_operations=True,
                                  endpoint_type=1, include_fenced_brokers=False)
            assert r.authorized_operations == topic_bits(Op.ALTER, Op.DESCRIBE)
    run(scenario)


def test_create_delete_and_grow_topics(tmp_path):
    Topic = CreateTopicsRequest.CreatableTopic
    Grow = CreatePartitionsRequest.CreatePartitionsTopic
    Delete = DeleteTopicsRequest.DeleteTopicState

    async def create(client, name):
        with real_time():
            r = await client.call(CreateTopicsRequest, 7, timeout_ms=1000, validate_only=False, topics=[
                Topic(name=name, num_partitions=2, replication_factor=1, assignments=[], configs=[])])
        t = r.topics[0]
        return t.error_code, t.error_message, t.topic_config_error_code, t.num_partitions, len(t.configs or ())

    async def grow(client, name):
        with real_time():
            r = await client.call(CreatePartitionsRequest, 3, timeout_ms=1000, validate_only=False,
                                  topics=[Grow(name=name, count=3, assignments=None)])
        return r.results[0].error_code, r.results[0].error_message

    async def delete(client, *topics):
        with real_time():
            r = await client.call(DeleteTopicsRequest, 6, timeout_ms=1000, topics=[
                Delete(name=None, topic_id=t) if isinstance(t, uuid.UUID) else Delete(name=t, topic_id=None)
                for t in topics])
        return [(d.name, d.error_code) for d in r.responses]

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            assert await create(client, "x") == (TAF, "Authorization failed.", TAF, -1, 0)
            grant(broker, R.TOPIC, "x", Op.CREATE)
            assert await create(client, "x") == (E.NONE, None, TAF, -1, 0)   # created, configs withheld
            assert len(broker.logs.get("x").partitions) == 2
            grant(broker, R.TOPIC, "y", Op.CREATE, Op.DESCRIBE_CONFIGS)
            code, _, config_code, partitions, configs = await create(client, "y")
            assert (code, config_code, partitions) == (E.NONE, E.NONE, 2) and configs > 0
            assert await grow(client, "x") == (TAF, "The topic authorization is failed.")
            grant(broker, R.TOPIC, "x", Op.ALTER)
            assert await grow(client, "x") == (E.NONE, None)
            x_id, y_id = broker.logs.get("x").topic_id, broker.logs.get("y").topic_id
            # by id: without DESCRIBE the name is withheld (ALTER on x implies DESCRIBE)
            assert await delete(client, x_id, y_id, "y", "ghost", uuid.uuid4()) == [
                ("x", TAF), (None, TAF), ("y", TAF), ("ghost", TAF), (None, E.UNKNOWN_TOPIC_ID)]
            grant(broker, R.TOPIC, "y", Op.DELETE)
            grant(broker, R.TOPIC, "ghost", Op.DELETE)
            assert await delete(client, y_id, "ghost") == [("y", E.NONE), ("ghost", E.UNKNOWN_TOPIC_OR_PARTITION)]
            assert broker.logs.get("y") is None and broker.logs.get("x") is not None
    run(scenario)


def test_config_resources_are_checked_one_by_one(tmp_path):
    Describe = DescribeConfigsRequest.DescribeConfigsResource
    Alter = AlterConfigsRequest.AlterConfigsResource
    Incremental = IncrementalAlterConfigsRequest.AlterConfigsResource
    TOPIC, BROKER, GROUP = 2, 4, 32

    async def describe(client):
        r = await client.call(DescribeConfigsRequest, 4, include_synonyms=False, include_documentation=False,
                              resources=[Describe(resource_type=t, resource_name=n, configuration_keys=None)
                                         for t, n in ((TOPIC, "a"), (BROKER, ""), (GROUP, "g"))])
        return [(x.error_code, x.error_message, bool(x.configs)) for x in r.results]

    async def alter(client):
        with real_time():
            r = await client.call(AlterConfigsRequest, 2, validate_only=False, resources=[
                Alter(resource_type=TOPIC, resource_name="a", configs=[
                    Alter.AlterableConfig(name="retention.ms", value="60000")]),
                Alter(resource_type=BROKER, resource_name="", configs=[])])
            i = await client.call(IncrementalAlterConfigsRequest, 1, validate_only=False, resources=[
                Incremental(resource_type=TOPIC, resource_name="a", configs=[
                    Incremental.AlterableConfig(name="retention.ms", config_operation=0, value="120000")]),
                Incremental(resource_type=GROUP, resource_name="g", configs=[])])
        return [x.error_code for x in r.responses], [x.error_code for x in i.responses]

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a")
            assert await describe(client) == [(TAF, "Topic authorization failed.", False),
                                              (E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", False),
                                              (E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", False)]
            assert await alter(client) == ([TAF, E.CLUSTER_AUTHORIZATION_FAILED],
                                           [TAF, E.GROUP_AUTHORIZATION_FAILED])
            grant(broker, R.TOPIC, "a", Op.ALTER_CONFIGS)            # implies DESCRIBE_CONFIGS
            grant(broker, R.CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
            grant(broker, R.GROUP, "g", Op.DESCRIBE_CONFIGS)
            # a group's configs: kwire serves share.auto.offset.reset (kwire.services.group_configs)
            # the cluster default resource lists only its dynamic configs: none yet
            assert await describe(client) == [(E.NONE, None, True), (E.NONE, None, False), (E.NONE, None, True)]
            assert await alter(client) == ([E.NONE, E.NONE], [E.NONE, E.GROUP_AUTHORIZATION_FAILED])
            assert broker.logs.get("a").configs == {"retention.ms": "120000"}
    run(scenario)


def test_a_refused_elect_leaders_answers_each_partition(tmp_path):
    """ALTER on the cluster is checked before dispatch; the refusal is Kafka's error response:
    every partition asked about (and from v1 the top level) carries the error, even at v0,
    which has no top-level error to carry it alone."""
    async def elect(client, version):
        r = await client.call(ElectLeadersRequest, version, election_type=0, timeout_ms=1000, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic="a", partitions=[0, 1])])
        return r.error_code if version else None, [(t.topic, p.partition_id, p.error_code)
                                                for t in r.replica_election_results for p in t.partition_result]

    async def scenario():
        async with connected(tmp_path, **ACLS) as (broker, client):
            await create_topics(client, broker, "a", partitions=2)
            denied = E.CLUSTER_AUTHORIZATION_FAILED
            assert await elect(client, 0) == (None, [("a", 0, denied), ("a", 1, denied)])
            assert await elect(client, 2) == (denied, [("a", 0, denied), ("a", 1, denied)])
            grant(broker, R.CLUSTER, "kafka-cluster", Op.ALTER)
            assert await elect(client, 2) == (E.NONE, [("a", 0, E.ELECTION_NOT_NEEDED),
                                                       ("a", 1, E.ELECTION_NOT_NEEDED)])
    run(scenario)
