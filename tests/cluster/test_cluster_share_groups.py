"""Share groups (KIP-932) on the three-broker cluster through confluent-kafka's ShareConsumer.

Membership is served by the group's coordinator, ShareFetch/ShareAcknowledge by each
partition's leader, and the share-partitions' state by their share coordinator (the leader
of their ``__share_group_state`` partition), reached broker to broker by the persister RPCs.
Counted as a user would: every record read, each accepted one never again, none lost, when
a data partition's leader or a share coordinator dies (kill -9).

Most tests start their consumers on empty topics (share.auto.offset.reset latest starts at
offset 0 there); one sets the group config earliest, which every broker sees (ZooKeeper).
"""
from __future__ import annotations

import base64
import json
import time
import uuid
import zlib
from collections import Counter

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.protocol.metadata import ApiVersionsRequest

from kwire.groups.share_records import SNAPSHOT_KEY, encode_key
from kwire.testing.cluster import send_request
from tests.support.counting import create_topic, partition_states, wait_full_isrs

STATE_TOPIC = "__share_group_state"
SHARE_PROPERTIES = {"group.share.record.lock.duration.ms": 3000, "group.share.heartbeat.interval.ms": 500,
                    "group.share.min.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 6000,
                    "share.coordinator.state.topic.num.partitions": 3}


def share_cluster(cluster_factory):
    return cluster_factory(3, properties=SHARE_PROPERTIES)


def share_consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def produce(bootstrap: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(start, start + n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def warm_up(consumers: dict, seconds: float = 4.0) -> None:
    """Let the members join and open their share-partitions (at the log end: offset 0)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers.values():
            assert not list(c.poll(0.2) or []), "nothing is produced yet"


def test_share_group_apis_are_advertised_in_cluster_mode(cluster):
    for i in cluster.brokers:
        response = send_request(cluster.broker(i).bootstrap, ApiVersionsRequest[3](
            client_software_name="t", client_software_version="1"))
        keys = {a.api_key for a in response.api_keys}
        assert {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92} <= keys, sorted(keys)


def test_share_consumers_on_three_brokers_get_every_record_once(cluster_factory):
    cluster = share_cluster(cluster_factory)
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    leaders = {s["leader"] for s in wait_full_isrs(cluster.zookeeper.connect, topic).values()}
    assert len(leaders) >= 2, f"partitions led by {leaders}"
    consumers = {name: share_consumer(cluster.bootstrap, group, topic, **{"max.poll.records": 20})
                 for name in "abc"}
    deliveries: list[tuple[str, int, int]] = []
    try:
        warm_up(consumers)
        produce(cluster.bootstrap, topic, 600, 3)
        deadline = time.monotonic() + 60
        while len({(p, o) for _, p, o in deliveries}) < 600 and time.monotonic() < deadline:
            for name, c in consumers.items():
                for msg in c.poll(0.2) or []:
                    assert msg.error() is None, msg.error()
                    deliveries.append((name, msg.partition(), msg.offset()))
    finally:
        for c in consumers.values():
            c.close()
    counts = Counter((p, o) for _, p, o in deliveries)
    assert sorted(counts) == sorted((p, o) for p in range(3) for o in range(200))
    assert set(counts.values()) == {1}, "implicit acknowledgement: each record delivered once"
    assert len({name for name, _, _ in deliveries}) >= 2, Counter(name for name, _, _ in deliveries)


def topic_id(zookeeper_connect: str, topic: str) -> uuid.UUID:
    """The topic's id, from its znode (Kafka's layout: url-safe base64, unpadded)."""
    from kazoo.client import KazooClient
    zk = KazooClient(zookeeper_connect)
    zk.start(timeout=10)
    try:
        data, _ = zk.get(f"/brokers/topics/{topic}")
    finally:
        zk.stop()
    return uuid.UUID(bytes=base64.urlsafe_b64decode(json.loads(data)["topic_id"] + "=="))


def state_leader(zookeeper_connect: str, group: str, tid: uuid.UUID, partition: int) -> int:
    """The broker of the share coordinator of (group, topic id, partition)."""
    states = partition_states(zookeeper_connect, STATE_TOPIC)
    return states[zlib.crc32(encode_key(SNAPSHOT_KEY, group, tid, partition)) % len(states)]["leader"]


def prepared(cluster):
    """A one-partition RF=3 topic, __share_group_state created (by a throwaway group), and a
    group id whose share coordinator is not the partition's leader: (topic, group, data
    leader, state leader)."""
    topic = f"share-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=1, rf=3)
    data_leader = wait_full_isrs(cluster.zookeeper.connect, topic)[0]["leader"]
    throwaway = share_consumer(cluster.bootstrap, f"warm-{uuid.uuid4().hex[:6]}", topic)
    try:
        warm_up({"t": throwaway}, 3.0)
    finally:
        throwaway.close()
    wait_full_isrs(cluster.zookeeper.connect, STATE_TOPIC)
    tid = topic_id(cluster.zookeeper.connect, topic)
    for _ in range(100):
        group = f"g-{uuid.uuid4().hex[:6]}"
        leader = state_leader(cluster.zookeeper.connect, group, tid, 0)
        if leader != data_leader:
            return topic, group, data_leader, leader
    raise AssertionError("every group's share coordinator is the data leader")


def consume_through_a_kill(cluster, victim_of, n: int = 400, stop: bool = False) -> tuple[list, dict]:
    """Three explicit-acknowledgement share consumers read ``n`` records, accepting each batch
    (commit_sync).  A quarter of the records is produced, read, then a second quarter; the
    first batch of it a consumer gets it holds unacknowledged while the broker
    ``victim_of(data_leader, state_leader)`` is killed (-9); then the second half is produced.  Returns the
    events [("read" | "accepted", offset), ("killed", -1)] and the counts."""
    topic, group, data_leader, coordinator = prepared(cluster)
    victim = victim_of(data_leader, coordinator)
    consumers = {name: share_consumer(cluster.bootstrap, group, topic, **{
        "share.acknowledgement.mode": "explicit", "max.poll.records": 10}) for name in "abc"}
    events: list[tuple[str, int]] = []
    accepted: set[int] = set()
    killed = second_quarter = False
    try:
        warm_up(consumers)
        produce(cluster.bootstrap, topic, n // 4, 1)
        deadline = time.monotonic() + 90
        while len(accepted) < n and time.monotonic() < deadline:
            for c in consumers.values():
                msgs = [m for m in c.poll(0.2) or [] if m.error() is None]
                if not msgs:
                    continue
                if second_quarter and not killed:
                    # the victim dies while this consumer holds ``msgs`` unacknowledged
                    if stop:                  # controlled shutdown: leadership moves, then it stops
                        cluster.stop(victim)
                    else:
                        cluster.kill(victim)
                    killed = True
                    events.append(("killed", -1))
                    produce(cluster.bootstrap, topic, n - n // 2, 1, start=n // 2)
                for m in msgs:
                    events.append(("read", m.offset()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                try:
                    result = c.commit_sync(30)
                except Exception:              # noqa: BLE001 - the acknowledgement failed: not accepted
                    continue
                if result and all(v is None for v in result.values()):
                    for m in msgs:
                        events.append(("accepted", m.offset()))
                        accepted.add(m.offset())
                if not second_quarter and len({o for kind, o in events if kind == "read"}) >= n // 4:
                    second_quarter = True
                    produce(cluster.bootstrap, topic, n // 4, 1, start=n // 4)
    finally:
        for c in consumers.values():
            c.close()
    read = Counter(o for kind, o in events if kind == "read")
    at_kill = events.index(("killed", -1)) if killed else len(events)
    counts = {"read before the kill": len({o for kind, o in events[:at_kill] if kind == "read"}),
              "read": len(read), "accepted": len(accepted), "lost": n - len(read),
              "redelivered": sum(1 for c in read.values() if c > 1), "killed": killed}
    return events, counts


def assert_every_record_once_accepted(events, counts, n: int = 400) -> None:
    assert counts["killed"], counts
    assert counts["lost"] == 0 and counts["accepted"] == n, counts
    done: set[int] = set()
    for kind, offset in events:
        if kind == "accepted":
            done.add(offset)
        elif kind == "read":
            assert offset not in done, f"offset {offset} delivered again after it was accepted; {counts}"


def test_kill_9_of_the_data_partitions_leader_loses_and_redelivers_no_accepted_record(cluster_factory):
    """The new leader loads the state from the share coordinator: accepted records stay
    accepted, the batch held at the kill (acquired, never acknowledged) is delivered again."""
    cluster = share_cluster(cluster_factory)
    events, counts = consume_through_a_kill(cluster, lambda data_leader, _coordinator: data_leader)
    assert_every_record_once_accepted(events, counts)
    assert counts["redelivered"] >= 1, counts


def test_kill_9_of_the_share_coordinator_loses_and_redelivers_no_accepted_record(cluster_factory):
    """The acknowledgements wait for the new share coordinator (the next leader of the state
    partition, which loads it from its replica) and are answered once written there."""
    cluster = share_cluster(cluster_factory)
    events, counts = consume_through_a_kill(cluster, lambda _data_leader, coordinator: coordinator)
    assert_every_record_once_accepted(events, counts)


def test_a_group_config_set_through_one_broker_applies_on_every_partition_leader(cluster_factory):
    """share.auto.offset.reset=earliest (IncrementalAlterConfigs on resource GROUP, answered by
    one broker) is in ZooKeeper: the leaders of all three partitions start at the log start.
    The consumers start at once, with no wait for the other brokers' ZooKeeper watches: a leader
    reads the group's configs from ZooKeeper when it starts a share-partition."""
    cluster = share_cluster(cluster_factory)
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    leaders = {s["leader"] for s in wait_full_isrs(cluster.zookeeper.connect, topic).values()}
    assert len(leaders) >= 2, f"partitions led by {leaders}"
    produce(cluster.bootstrap, topic, 300, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=[entry])]).values():
        future.result(10)
    consumers = {name: share_consumer(cluster.bootstrap, group, topic) for name in "ab"}
    seen: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 300 and time.monotonic() < deadline:
            for c in consumers.values():
                seen += [(m.partition(), m.offset()) for m in c.poll(0.2) or [] if m.error() is None]
    finally:
        for c in consumers.values():
            c.close()
    assert sorted(seen) == sorted((p, o) for p in range(3) for o in range(100))


def test_a_controlled_shutdown_of_the_data_partitions_leader_loses_and_redelivers_no_accepted_record(
        cluster_factory):
    """The leader stops cleanly: leadership moves while it still runs (it drops its
    share-partitions, a late write of it would be fenced by the leader epoch)."""
    cluster = share_cluster(cluster_factory)
    events, counts = consume_through_a_kill(cluster, lambda data_leader, _coordinator: data_leader, stop=True)
    assert_every_record_once_accepted(events, counts)


def test_delete_groups_deletes_the_state_on_every_share_coordinator(cluster_factory):
    """DeleteGroups of an empty share group deletes the state of every partition its members
    were assigned (DeleteShareGroupState to their share coordinators); the leaders forget their
    idle share-partitions, so the group created again starts afresh (earliest: from 0)."""
    cluster = share_cluster(cluster_factory)
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    wait_full_isrs(cluster.zookeeper.connect, topic)
    produce(cluster.bootstrap, topic, 60, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def earliest() -> None:
        entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                      incremental_configs=[entry])]).values():
            future.result(10)
        time.sleep(1)
    earliest()

    def read_all() -> list[tuple[int, int]]:
        consumer = share_consumer(cluster.bootstrap, group, topic)
        seen: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + 30
            while len(seen) < 60 and time.monotonic() < deadline:
                seen += [(m.partition(), m.offset()) for m in consumer.poll(0.2) or [] if m.error() is None]
            consumer.commit_sync(10)
        finally:
            consumer.close()
        return seen
    assert len(read_all()) == 60
    deadline = time.monotonic() + 30
    while True:                          # the member's leave reaches its coordinator
        try:
            admin.delete_consumer_groups([group])[group].result(10)
            break
        except Exception:                # noqa: BLE001 - NON_EMPTY_GROUP until then
            assert time.monotonic() < deadline
            time.sleep(0.5)
    earliest()                           # DeleteGroups deletes the group's configs too
    assert sorted(read_all()) == sorted((p, o) for p in range(3) for o in range(20))


def test_the_new_coordinator_loads_the_share_group_after_a_kill_9_of_the_old_one(cluster_factory):
    """The group's records are in its __consumer_offsets partition: when the coordinator's
    broker is killed (-9), the next leader of that partition describes the group with its
    epoch and member, and the consumer carries on with them (a rejoin would bump the epochs),
    never getting an accepted record again."""
    from tests.cluster.test_groups import coordinator_of
    from tests.support.counting import wait_for
    from tests.support.raw_client import RawClient
    from kwire.codecs import messages
    cluster = share_cluster(cluster_factory)
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=1, rf=3)
    wait_full_isrs(cluster.zookeeper.connect, topic)
    describe_cls = messages.API_CLASSES[77]

    def describe(node):
        client = RawClient(cluster.broker(node).port)
        try:
            return client.call(describe_cls[0](version=1, group_ids=[group], include_authorized_operations=False),
                               describe_cls[1]).groups[0]
        finally:
            client.close()

    consumer = share_consumer(cluster.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    accepted: list[int] = []

    def consume(n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(accepted) < n and time.monotonic() < deadline:
            for m in consumer.poll(0.2) or []:
                if m.error() is None:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.append(m.offset())
            try:
                consumer.commit_sync(5)
            except Exception:          # noqa: BLE001 - a partition leader or share coordinator moving
                pass
    try:
        passing = share_consumer(cluster.bootstrap, group, topic)      # joins and leaves: the group
        warm_up({"c": consumer, "passing": passing})                     # epoch moves past a fresh one's
        passing.close()
        produce(cluster.bootstrap, topic, 20, 1)
        consume(20, 30)
        assert sorted(accepted) == list(range(20))
        coordinator = coordinator_of(cluster.broker(1).bootstrap, group)
        before = describe(coordinator)
        assert before.error_code == 0 and len(before.members) == 1, before
        assert before.group_epoch > before.members[0].member_epoch, "a rejoin would not give this epoch"
        others = [b for b in cluster.brokers if b != coordinator]
        cluster.kill(coordinator)
        new = wait_for(lambda: (c := coordinator_of(cluster.broker(others[0]).bootstrap, group)) in others and c,
                       30, "a new coordinator")
        loaded = wait_for(lambda: (d := describe(new)).error_code == 0 and d, 30, "the group at its new coordinator")
        assert (loaded.group_epoch, [(m.member_id, m.member_epoch) for m in loaded.members]) == (
            before.group_epoch, [(m.member_id, m.member_epoch) for m in before.members])
        produce(cluster.live_bootstrap(), topic, 20, 1, start=20)
        consume(40, 60)
        after = describe(new)
    finally:
        consumer.close()
    assert sorted(set(accepted)) == list(range(40)) and len(accepted) == 40, "an accepted record came again"
    assert (after.group_epoch, [(m.member_id, m.member_epoch) for m in after.members]) == (
        before.group_epoch, [(m.member_id, m.member_epoch) for m in before.members]), "no rejoin"
