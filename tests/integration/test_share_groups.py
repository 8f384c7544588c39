"""Share groups (KIP-932, queues) through confluent-kafka's ShareConsumer (librdkafka 2.16).

Counts what a user would check: every record delivered, to whom, how often; nothing
accepted is delivered again, whatever dies.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType,
)

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse

from kwire.codecs import messages
from kwire.testing import BrokerProcess
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.clients
MEMBER = os.path.join(os.path.dirname(__file__), "share_member.py")


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share"), properties={
            "group.share.record.lock.duration.ms": 1000, "group.share.delivery.count.limit": 3,
            "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
            "group.share.session.timeout.ms": 6000, "group.share.max.groups": 50}) as broker:
        yield broker


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def earliest(bootstrap: str, group: str, isolation: str | None = None) -> None:
    """share.auto.offset.reset=earliest on the group (IncrementalAlterConfigs, resource GROUP),
    and share.isolation.level if given."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    if isolation is not None:
        entries.append(ConfigEntry("share.isolation.level", isolation, incremental_operation=AlterConfigOpType.SET))
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def produce(bootstrap: str, topic: str, n: int, per_batch: int = 10) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode())
        if i % per_batch == per_batch - 1:
            producer.flush(10)
    assert producer.flush(10) == 0


def share_consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers, done, timeout: float = 30.0, on_message=None) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for name, consumer in consumers.items():
            for msg in consumer.poll(0.2) or []:
                assert msg.error() is None, msg.error()
                on_message(name, consumer, msg)


def test_three_share_consumers_share_one_partition_each_record_once(share_broker):
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    earliest(bootstrap, group)
    consumers = {name: share_consumer(bootstrap, group, topic, **{"max.poll.records": 10}) for name in "abc"}
    try:
        produce(bootstrap, topic, 300)
        deliveries: list[tuple[str, int]] = []
        poll_until(consumers, lambda: len({o for _, o in deliveries}) >= 300,
                   on_message=lambda name, _c, msg: deliveries.append((name, msg.offset())))
        counts = Counter(offset for _, offset in deliveries)
        assert sorted(counts) == list(range(300))
        assert set(counts.values()) == {1}, "implicit acknowledgement: each record delivered once"
        assert {name for name, _ in deliveries} == set("abc"), Counter(name for name, _ in deliveries)
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_release_redelivers_and_reject_never_does(share_broker):
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    earliest(bootstrap, group)
    produce(bootstrap, topic, 20)
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    seen: list[tuple[int, int]] = []          # (offset, delivery count)

    def handle(_name, c, msg):
        seen.append((msg.offset(), msg.delivery_count()))
        if msg.delivery_count() > 1:
            c.acknowledge(msg, AcknowledgeType.ACCEPT)
        elif msg.offset() % 2 == 0:
            c.acknowledge(msg, AcknowledgeType.RELEASE)
        else:
            c.acknowledge(msg, AcknowledgeType.REJECT)
        c.commit_sync()
    try:
        poll_until({"c": consumer}, lambda: len(seen) >= 30, on_message=handle)
        poll_until({"c": consumer}, lambda: False, timeout=2, on_message=handle)    # nothing more comes
    finally:
        consumer.close()
    counts = Counter(offset for offset, _ in seen)
    assert {o for o, n in counts.items() if n == 2} == set(range(0, 20, 2)), "released: delivered again"
    assert {o for o, n in counts.items() if n == 1} == set(range(1, 20, 2)), "rejected: never again"
    assert sorted(c for o, c in seen if o % 2 == 0) == [1] * 10 + [2] * 10


def test_the_delivery_count_limit_archives_a_record_released_again_and_again(share_broker):
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    earliest(bootstrap, group)
    produce(bootstrap, topic, 1)
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    counts: list[int] = []

    def release(_name, c, msg):
        counts.append(msg.delivery_count())
        c.acknowledge(msg, AcknowledgeType.RELEASE)
        c.commit_sync()
    try:
        poll_until({"c": consumer}, lambda: len(counts) >= 3, on_message=release)
        poll_until({"c": consumer}, lambda: False, timeout=2.5, on_message=release)
    finally:
        consumer.close()
    assert counts == [1, 2, 3], "group.share.delivery.count.limit=3: archived after the third delivery"


def test_records_of_a_killed_consumer_come_back_after_the_lock_duration(share_broker):
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    earliest(bootstrap, group)
    produce(bootstrap, topic, 10, per_batch=10)
    member = subprocess.Popen([sys.executable, MEMBER, bootstrap, group, topic, "10"], stdout=subprocess.PIPE,
                              text=True)
    try:
        line = member.stdout.readline().split()
        assert line[0] == "acquired" and sorted(map(int, line[1:])) == list(range(10))
    finally:
        member.kill()              # -9, holding all ten records
        member.wait()
    consumer = share_consumer(bootstrap, group, topic)
    got: list[tuple[int, int]] = []
    started = time.monotonic()
    try:
        poll_until({"c": consumer}, lambda: len(got) >= 10,
                   on_message=lambda _n, _c, msg: got.append((msg.offset(), msg.delivery_count())))
    finally:
        consumer.close()
    assert sorted(got) == [(o, 2) for o in range(10)], "delivered again, the second time"
    assert time.monotonic() - started < 15


def test_broker_kill_never_redelivers_an_accepted_record(tmp_path):
    with BrokerProcess(tmp_path, properties={"group.share.record.lock.duration.ms": 1000}) as broker:
        bootstrap, group = broker.bootstrap, "durable"
        topic = new_topic(bootstrap)
        earliest(bootstrap, group)
        produce(bootstrap, topic, 100)
        consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit",
                                                             "max.poll.records": 10})
        accepted: list[int] = []
        held: list[int] = []

        def accept_half(_n, c, msg):
            if len(accepted) < 50:
                c.acknowledge(msg, AcknowledgeType.ACCEPT)
                c.commit_sync()            # answered: persisted
                accepted.append(msg.offset())
            else:
                held.append(msg.offset())  # acquired, never acknowledged
        poll_until({"c": consumer}, lambda: len(accepted) >= 50 and held, on_message=accept_half)
        broker.kill()
        consumer.close()
        broker.start()
        again = share_consumer(bootstrap, group, topic)
        after: list[int] = []
        try:
            poll_until({"c": again}, lambda: len(after) >= 50,
                       on_message=lambda _n, _c, msg: after.append(msg.offset()))
        finally:
            again.close()
    assert not set(accepted) & set(after), "an accepted record was delivered again"
    assert set(held) <= set(after), "acquired but unacknowledged records come back"
    assert sorted(set(accepted) | set(after)) == list(range(100))


def test_the_share_state_topic_is_internal_and_cannot_be_deleted(share_broker):
    """__share_group_state is one of Kafka's internal topics: Metadata says so and DeleteTopics
    refuses it (TOPIC_AUTHORIZATION_FAILED, as for __consumer_offsets), leaving the share state."""
    from confluent_kafka import KafkaError
    from kafka.admin import KafkaAdminClient
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    earliest(bootstrap, group)
    produce(bootstrap, topic, 5)
    consumer = share_consumer(bootstrap, group, topic)
    got: list[int] = []
    try:
        poll_until({"c": consumer}, lambda: len(got) >= 5, on_message=lambda _n, _c, msg: got.append(msg.offset()))
    finally:
        consumer.close()
    assert sorted(got) == list(range(5))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert "__share_group_state" in admin.list_topics(timeout=10).topics
    for name in ("__share_group_state", "__consumer_offsets"):
        error = admin.delete_topics([name], operation_timeout=10)[name].exception(10)
        assert error is not None and error.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (name, error)
    assert "__share_group_state" in admin.list_topics(timeout=10).topics
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = kp.describe_topics(["__share_group_state", topic])
    finally:
        kp.close()
    assert {t["name"]: t["is_internal"] for t in described} == {"__share_group_state": True, topic: False}


def test_admin_lists_describes_and_deletes_a_share_group(share_broker):
    """ListGroups says type share (librdkafka's list_consumer_groups shows only consumer protocol
    types, as against Kafka, so the requests are raw); DescribeGroups and ShareGroupDescribe
    show the member; DeleteGroups refuses a group with members and deletes an empty one."""
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    consumer = share_consumer(bootstrap, group, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    raw = RawClient(share_broker.port)
    describe_cls = messages.API_CLASSES[77]
    try:
        poll_until({"c": consumer}, lambda: False, timeout=1.5, on_message=lambda *a: None)
        listed = raw.call(ListGroupsRequest[5](states_filter=[], types_filter=["share"]), ListGroupsResponse)
        assert [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group] == [("share", "Stable")]
        described = raw.call(DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False),
                             DescribeGroupsResponse)
        assert (described.groups[0].protocol_type, len(described.groups[0].members)) == ("share", 1)
        share_described = raw.call(describe_cls[0](version=1, group_ids=[group], include_authorized_operations=False),
                                   describe_cls[1])
        member = share_described.groups[0].members[0]
        assert [tp.topic_name for tp in member.assignment.topic_partitions] == [topic]
        assert admin.delete_consumer_groups([group])[group].exception(10) is not None    # not empty
    finally:
        consumer.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if admin.delete_consumer_groups([group])[group].exception(10) is None:
            break
        time.sleep(0.2)
    listed = raw.call(ListGroupsRequest[5](states_filter=[], types_filter=[]), ListGroupsResponse)
    assert group not in [g.group_id for g in listed.groups]


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_transaction_markers_are_never_delivered_and_never_stall_the_queue(share_broker, isolation):
    """Control batches are archived by the broker, not acquired: with a 1 s lock, a marker
    left acquired would come back again and again.  With share.isolation.level at Kafka's
    default, read_uncommitted, the aborted transaction's records are delivered too; with
    read_committed they are archived."""
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap)
    earliest(bootstrap, group, isolation)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(10)
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=f"{commit}-{i}".encode())
        assert producer.flush(10) == 0      # written before the end (an abort purges what is queued)
        (producer.commit_transaction if commit else producer.abort_transaction)(10)
    consumer = share_consumer(bootstrap, group, topic)
    got: list[tuple[int, int]] = []
    try:
        poll_until({"c": consumer}, lambda: len(got) >= (10 if isolation == "read_committed" else 15),
                   on_message=lambda _n, _c, msg: got.append((msg.offset(), msg.delivery_count())))
        poll_until({"c": consumer}, lambda: False, timeout=2.5,
                   on_message=lambda _n, _c, msg: got.append((msg.offset(), msg.delivery_count())))
    finally:
        consumer.close()
    expected = list(range(0, 5)) + list(range(12, 17)) + ([] if isolation == "read_committed" else list(range(6, 11)))
    assert sorted(got) == [(offset, 1) for offset in sorted(expected)], str(got)


def test_the_group_config_and_the_share_state_survive_a_broker_kill(tmp_path):
    with BrokerProcess(tmp_path) as broker:
        bootstrap = broker.bootstrap
        topic = new_topic(bootstrap)
        earliest(bootstrap, "reset-kept")
        produce(bootstrap, topic, 5)
        broker.kill()
        broker.start()
        consumer = share_consumer(bootstrap, "reset-kept", topic)
        got: list[int] = []
        try:
            poll_until({"c": consumer}, lambda: len(got) >= 5, timeout=20,
                       on_message=lambda _n, _c, msg: got.append(msg.offset()))
        finally:
            consumer.close()
    assert sorted(got) == list(range(5)), "share.auto.offset.reset=earliest kept across the restart"


def share_describe(port: int, group: str):
    """ShareGroupDescribe v1 of one group, on a new connection."""
    describe_cls = messages.API_CLASSES[77]
    return RawClient(port).call(describe_cls[0](version=1, group_ids=[group], include_authorized_operations=False),
                                describe_cls[1]).groups[0]


def test_a_running_share_consumer_carries_on_across_a_broker_kill(tmp_path):
    """Membership is persisted in __consumer_offsets: after the restart the consumer's heartbeat
    is accepted with its member id and epoch (its share session, per broker as in Kafka, is
    opened again), with no record lost and none accepted delivered again."""
    with BrokerProcess(tmp_path, properties={"group.share.record.lock.duration.ms": 1000}) as broker:
        bootstrap = broker.bootstrap
        topic = new_topic(bootstrap)
        earliest(bootstrap, "survivor")
        consumer = share_consumer(bootstrap, "survivor", topic, **{"share.acknowledgement.mode": "explicit"})
        got: list[int] = []

        def accept(_n, c, msg):
            c.acknowledge(msg, AcknowledgeType.ACCEPT)
            c.commit_sync()
            got.append(msg.offset())
        try:
            passing = share_consumer(bootstrap, "survivor", topic)     # joins and leaves: the group
            poll_until({"c": consumer, "passing": passing}, lambda: False, timeout=2)    # epoch moves on
            passing.close()
            produce(bootstrap, topic, 5)
            poll_until({"c": consumer}, lambda: len(got) >= 5, on_message=accept)
            before = share_describe(broker.port, "survivor")
            assert before.group_epoch > before.members[0].member_epoch, "a rejoin would not give this epoch"
            broker.kill()
            broker.start()
            after_load = share_describe(broker.port, "survivor")
            produce(bootstrap, topic, 5)
            poll_until({"c": consumer}, lambda: len(got) >= 10, timeout=40, on_message=accept)
            after = share_describe(broker.port, "survivor")
        finally:
            consumer.close()
    assert sorted(got) == list(range(10))
    members = lambda d: [(m.member_id, m.member_epoch) for m in d.members]     # noqa: E731
    assert len(before.members) == 1
    assert (after_load.group_state, after_load.group_epoch, members(after_load)) == (
        "Stable", before.group_epoch, members(before)), "the group and its member are loaded"
    assert (after.group_epoch, members(after)) == (before.group_epoch, members(before)), \
        "the member carried on: no rejoin, no new epoch"


def test_an_empty_share_group_survives_a_restart_with_its_epoch(tmp_path, capsys):
    """A share group whose consumer has left is still listed (type share, Empty) after the
    broker restarts, by ListGroups and by ``kwire groups list``; its epoch carries on."""
    from kwire.tools.groups import main as groups_main
    with BrokerProcess(tmp_path) as broker:
        bootstrap, group = broker.bootstrap, "left-behind"
        topic = new_topic(bootstrap)
        earliest(bootstrap, group)
        produce(bootstrap, topic, 5)
        consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
        got: list[int] = []

        def accept(_n, c, msg):
            c.acknowledge(msg, AcknowledgeType.ACCEPT)
            c.commit_sync()            # answered: persisted
            got.append(msg.offset())
        try:
            poll_until({"c": consumer}, lambda: len(got) >= 5, on_message=accept)
        finally:
            consumer.close()
        before = share_describe(broker.port, group)
        assert before.group_state == "Empty"
        broker.stop()
        broker.start()
        listed = RawClient(broker.port).call(ListGroupsRequest[5](states_filter=[], types_filter=["share"]),
                                             ListGroupsResponse)
        assert [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group] == [("share", "Empty")]
        capsys.readouterr()
        assert groups_main(["list", "--output", "json", "--bootstrap-server", bootstrap]) == 0
        assert {"group": group, "type": "share", "state": "Empty", "protocol_type": "share"} \
            in json.loads(capsys.readouterr().out)
        after = share_describe(broker.port, group)
        assert (after.error_code, after.group_state, after.group_epoch, after.members) == (
            0, "Empty", before.group_epoch, [])
        produce(bootstrap, topic, 5)
        again = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
        try:
            poll_until({"c": again}, lambda: len(got) >= 10, on_message=accept)
            assert share_describe(broker.port, group).group_epoch > before.group_epoch      # not restarted
        finally:
            again.close()
        # DeleteGroups (once the member's leave is in) writes tombstones: gone after a restart too
        admin, deadline = AdminClient({"bootstrap.servers": bootstrap}), time.monotonic() + 10
        while admin.delete_consumer_groups([group])[group].exception(10) is not None:
            assert time.monotonic() < deadline, "DeleteGroups kept failing"
            time.sleep(0.2)
        broker.kill()
        broker.start()
        assert share_describe(broker.port, group).error_code == 69      # GROUP_ID_NOT_FOUND
        listed = RawClient(broker.port).call(ListGroupsRequest[5](states_filter=[], types_filter=[]),
                                             ListGroupsResponse)
        assert group not in [g.group_id for g in listed.groups]
    assert sorted(got) == list(range(10))


def test_two_share_consumers_on_three_partitions_get_every_record_once(share_broker):
    bootstrap, group = share_broker.bootstrap, f"g-{uuid.uuid4().hex[:6]}"
    topic = new_topic(bootstrap, partitions=3)
    earliest(bootstrap, group)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 3)
    assert producer.flush(10) == 0
    consumers = {name: share_consumer(bootstrap, group, topic, **{"max.poll.records": 20}) for name in "ab"}
    seen: list[tuple[int, int]] = []
    try:
        poll_until(consumers, lambda: len(seen) >= 300,
                   on_message=lambda _n, _c, msg: seen.append((msg.partition(), msg.offset())))
    finally:
        for consumer in consumers.values():
            consumer.close()
    assert sorted(seen) == sorted((p, o) for p in range(3) for o in range(100))
