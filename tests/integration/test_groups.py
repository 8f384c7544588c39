"""Consumer groups through stock clients: queue and pub/sub semantics, rebalances, commits."""
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def new_topic(broker, partitions=6):
    name = f"grp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(broker, topic, n, start=0):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, key=f"key-{i}".encode(), value=f"{i}".encode())
    assert p.flush(20) == 0


def consumer(broker, group, **conf):
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **conf})


def drain(consumers, want, timeout=30):
    """Poll all consumers round-robin until ``want`` records arrived; returns {consumer index: [values]}."""
    got = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            m = c.poll(0.1)
            if m is not None and not m.error():
                got[i].append(int(m.value()))
    return got


@pytest.mark.parametrize("members", [2, 3])
def test_queue_semantics_split_partitions(broker, members):
    topic = new_topic(broker)
    group = f"q-{uuid.uuid4().hex[:6]}"
    cs = [consumer(broker, group) for _ in range(members)]
    for c in cs:
        c.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:   # wait until all members own partitions
        for c in cs:
            c.poll(0.1)
        if all(c.assignment() for c in cs) and sum(len(c.assignment()) for c in cs) == 6:
            break
    owned = [{tp.partition for tp in c.assignment()} for c in cs]
    assert sorted(p for s in owned for p in s) == list(range(6)), owned
    produce(broker, topic, 600)
    got = drain(cs, 600)
    values = [v for vs in got.values() for v in vs]
    assert sorted(values) == list(range(600)), "every message consumed exactly once across the group"
    assert all(got[i] for i in range(members)), "work is spread over every member"
    for c in cs:
        c.close()


def test_pub_sub_two_groups_each_get_everything(broker):
    topic = new_topic(broker, 3)
    produce(broker, topic, 300)
    for _ in range(2):
        c = consumer(broker, f"ps-{uuid.uuid4().hex[:6]}")
        c.subscribe([topic])
        got = drain([c], 300)
        assert sorted(got[0]) == list(range(300))
        c.close()


def test_resume_at_committed_offset_after_consumer_restart(broker):
    topic = new_topic(broker, 1)
    group = f"res-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 100)
    c = consumer(broker, group, **{"enable.auto.commit": False})
    c.subscribe([topic])
    got = drain([c], 40)[0][:40]
    c.commit(offsets=[TopicPartition(topic, 0, 40)], asynchronous=False)
    c.close()
    c = consumer(broker, group)
    c.subscribe([topic])
    rest = drain([c], 60)[0]
    assert rest[0] == 40 and sorted(rest) == list(range(40, 100))
    committed = c.committed([TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset == 40
    c.close()


def test_auto_commit_and_broker_restart(fresh_broker):
    b = fresh_broker()
    topic = new_topic(b, 2)
    group = f"ac-{uuid.uuid4().hex[:6]}"
    produce(b, topic, 200)
    c = consumer(b, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
    c.subscribe([topic])
    assert len(drain([c], 200)[0]) == 200
    time.sleep(0.6)
    c.close()  # final auto-commit on close
    b.stop()
    b.start()
    produce(b, topic, 50, start=200)
    c = consumer(b, group)
    c.subscribe([topic])
    got = drain([c], 50, timeout=30)[0]
    assert sorted(got) == list(range(200, 250)), "resumed exactly after the committed offsets"
    c.close()


def test_kafka_python_and_librdkafka_in_one_group(broker):
    topic = new_topic(broker, 4)
    group = f"mix-{uuid.uuid4().hex[:6]}"
    ck = consumer(broker, group, **{"partition.assignment.strategy": "range,roundrobin"})
    ck.subscribe([topic])
    kp = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                       auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500)
    assert kp.partitions_for_topic(topic)   # before its first join: see KafkaPythonClassic (test_mixed_groups)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ck.poll(0.1)
        kp.poll(timeout_ms=100)
        if ck.assignment() and kp.assignment() and len(ck.assignment()) + len(kp.assignment()) == 4:
            break
    assert len(ck.assignment()) + len(kp.assignment()) == 4
    produce(broker, topic, 200)
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 200 and time.monotonic() < deadline:
        m = ck.poll(0.05)
        if m is not None and not m.error():
            values.append(int(m.value()))
        for recs in kp.poll(timeout_ms=50).values():
            values.extend(int(r.value) for r in recs)
    assert sorted(values) == list(range(200))
    ck.close()
    kp.close()


def run_member(broker, topic, group, out, order):
    return subprocess.Popen([sys.executable, "-m", "tests.integration.group_member", broker.bootstrap, topic,
                             group, str(out), order], cwd=ROOT)


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


@pytest.mark.parametrize("order", ["commit-after", "commit-before"])
def test_killed_member_rebalance_delivery_guarantees(broker, tmp_path, order):
    """kill -9 one of two members mid-stream: the survivor takes over its partitions after the
    session timeout. Commit after processing: nothing lost (duplicates possible, only the
    uncommitted record). Commit before processing: no duplicates."""
    topic = new_topic(broker, 4)
    group = f"kill-{uuid.uuid4().hex[:6]}"
    a_out, b_out = tmp_path / "a.txt", tmp_path / "b.txt"
    a = run_member(broker, topic, group, a_out, order)
    b = run_member(broker, topic, group, b_out, order)
    try:
        total = 0
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not (read_lines(a_out) and read_lines(b_out)):
            produce(broker, topic, 20, start=total)   # keep records coming until both members own partitions
            total += 20
            time.sleep(0.2)
        assert read_lines(a_out) and read_lines(b_out), "both members consumed"
        a.kill()
        a.wait()
        produce(broker, topic, 400, start=total)
        total += 400
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            seen = {int(v) for _, _, v in read_lines(a_out) + read_lines(b_out)}
            if len(seen) >= total - 1 and time.monotonic() > deadline - 30:
                break
            time.sleep(0.2)
        values = [int(v) for _, _, v in read_lines(a_out) + read_lines(b_out)]
        if order == "commit-after":
            assert set(values) == set(range(total)), "at-least-once: nothing lost"
            assert len(values) - len(set(values)) <= 1, "duplicates only within the uncommitted window"
        else:
            assert len(values) == len(set(values)), "at-most-once: no duplicates"
            assert len(set(range(total)) - set(values)) <= 1, "at most the in-flight record is lost"
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_admin_describe_list_delete_groups(broker):
    topic = new_topic(broker, 2)
    group = f"adm-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 10)
    c = consumer(broker, group)
    c.subscribe([topic])
    drain([c], 10)
    c.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(10)
    assert group in {g.group_id for g in listed.valid}
    [desc] = admin.describe_consumer_groups([group])[group].result(10) and [
        admin.describe_consumer_groups([group])[group].result(10)]
    assert desc.state.name == "STABLE" and len(desc.members) == 1
    assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1}
    from confluent_kafka import ConsumerGroupTopicPartitions
    with pytest.raises(Exception) as err:
        admin.delete_consumer_groups([group])[group].result(10)
    assert "NON_EMPTY_GROUP" in str(err.value)
    c.close()
    time.sleep(0.5)
    admin.delete_consumer_groups([group])[group].result(10)
    listed = admin.list_consumer_groups().result(10)
    assert group not in {g.group_id for g in listed.valid}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert all(tp.offset < 0 for tp in offsets.topic_partitions)


# -- bad input over the raw protocol ---------------------------------------------------------

def call(sock, request, version, correlation_id=1):
    import struct

    from kwire.codecs.messages import response_class
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="raw-groups")
    sock.sendall(bytes(request.encode(header=True, framed=True)))
    head = sock.recv(4, socket_MSG_WAITALL())
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    flexible = response_class(request.API_KEY).flexible_version_q(version)
    start = 4 + (1 if flexible else 0)
    return response_class(request.API_KEY).decode(body[start:], version=version)


def socket_MSG_WAITALL():
    import socket
    return socket.MSG_WAITALL


def raw_socket(broker):
    import socket
    host, port = broker.bootstrap.split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def join(sock, group, member_id="", session_timeout=10000, version=5, protocols=(("range", b"\x00"),),
         protocol_type="consumer"):
    from kafka.protocol.consumer import JoinGroupRequest
    req = JoinGroupRequest(group_id=group, session_timeout_ms=session_timeout, rebalance_timeout_ms=10000,
                           member_id=member_id, group_instance_id=None, protocol_type=protocol_type,
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                                      for n, m in protocols])
    return call(sock, req, version)


def test_group_protocol_errors(broker):
    from kafka.protocol.consumer import HeartbeatRequest, SyncGroupRequest
    group = f"bad-{uuid.uuid4().hex[:6]}"
    s = raw_socket(broker)
    try:
        assert join(s, group, session_timeout=10).error_code == 26          # INVALID_SESSION_TIMEOUT
        assert join(s, group, member_id="nobody").error_code == 25          # UNKNOWN_MEMBER_ID
        first = join(s, group)
        assert first.error_code == 79 and first.member_id                  # MEMBER_ID_REQUIRED
        joined = join(s, group, member_id=first.member_id)
        assert joined.error_code == 0 and joined.leader == first.member_id
        gen = joined.generation_id
        sync = call(s, SyncGroupRequest(group_id=group, generation_id=gen, member_id=first.member_id,
                                        group_instance_id=None, assignments=[]), 3)
        assert sync.error_code == 0
        stranger = call(s, SyncGroupRequest(group_id=group, generation_id=gen, member_id="stranger",
                                            group_instance_id=None, assignments=[]), 3)
        assert stranger.error_code == 25                                    # UNKNOWN_MEMBER_ID
        hb = call(s, HeartbeatRequest(group_id=group, generation_id=gen - 1, member_id=first.member_id,
                                      group_instance_id=None), 3)
        assert hb.error_code == 22                                          # ILLEGAL_GENERATION
        hb = call(s, HeartbeatRequest(group_id=group, generation_id=gen, member_id=first.member_id,
                                      group_instance_id=None), 3)
        assert hb.error_code == 0
        other = join(raw_socket(broker), group, version=3, protocols=(("nothing-in-common", b""),))
        assert other.error_code == 23                                       # INCONSISTENT_GROUP_PROTOCOL
    finally:
        s.close()


def test_static_member_rejoins_without_rebalance(broker):
    topic = new_topic(broker, 2)
    group = f"static-{uuid.uuid4().hex[:6]}"
    conf = {"group.instance.id": "instance-a", "session.timeout.ms": 10000}
    c = consumer(broker, group, **conf)
    c.subscribe([topic])
    produce(broker, topic, 20)
    assert len(drain([c], 20)[0]) == 20
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = admin.describe_consumer_groups([group])[group].result(10)
    c.close()  # a static member's close sends no LeaveGroup: the group keeps its assignment
    c = consumer(broker, group, **conf)
    c.subscribe([topic])
    produce(broker, topic, 10, start=20)
    assert sorted(drain([c], 10)[0]) == list(range(20, 30))
    after = admin.describe_consumer_groups([group])[group].result(10)
    assert after.state.name == "STABLE" and len(after.members) == 1
    assert after.members[0].group_instance_id == "instance-a"
    assert after.members[0].member_id != before.members[0].member_id
    c.close()


def test_static_rejoin_keeps_generation_raw(broker):
    """A known group.instance.id rejoining with unchanged metadata gets a new member id in the same
    generation; the old member id is fenced and the other member sees no rebalance."""
    from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
    group = f"static-raw-{uuid.uuid4().hex[:6]}"

    def static_join(sock, instance, member_id=""):
        req = JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                               member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])
        return call(sock, req, 5)

    s1 = raw_socket(broker)
    try:
        j1 = static_join(s1, "inst-1")
        assert j1.error_code == 0 and j1.member_id
        sync = call(s1, SyncGroupRequest(group_id=group, generation_id=j1.generation_id, member_id=j1.member_id,
                                         group_instance_id="inst-1", assignments=[
                                             SyncGroupRequest.SyncGroupRequestAssignment(member_id=j1.member_id,
                                                                                         assignment=b"a1")]), 3)
        assert sync.error_code == 0 and sync.assignment == b"a1"
        s2 = raw_socket(broker)
        j2 = static_join(s2, "inst-1")   # the same instance restarts with no member id
        assert j2.error_code == 0 and j2.member_id != j1.member_id
        assert j2.generation_id == j1.generation_id, "no rebalance"
        sync2 = call(s2, SyncGroupRequest(group_id=group, generation_id=j2.generation_id, member_id=j2.member_id,
                                          group_instance_id="inst-1", assignments=[]), 3)
        assert sync2.error_code == 0 and sync2.assignment == b"a1", "keeps its assignment"
        hb_old = call(s1, HeartbeatRequest(group_id=group, generation_id=j1.generation_id,
                                           member_id=j1.member_id, group_instance_id="inst-1"), 3)
        assert hb_old.error_code == 82                                      # FENCED_INSTANCE_ID
        s2.close()
    finally:
        s1.close()


def test_cooperative_sticky_two_members(broker):
    topic = new_topic(broker, 4)
    group = f"coop-{uuid.uuid4().hex[:6]}"
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a = consumer(broker, group, **conf)
    a.subscribe([topic])
    produce(broker, topic, 100)
    first = drain([a], 100)[0]
    assert sorted(first) == list(range(100))
    a.commit(asynchronous=False)
    b = consumer(broker, group, **conf)
    b.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        a.poll(0.1)
        b.poll(0.1)
        if a.assignment() and b.assignment() and len(a.assignment()) + len(b.assignment()) == 4:
            break
    assert len(a.assignment()) == 2 and len(b.assignment()) == 2, "incremental rebalance split the partitions"
    produce(broker, topic, 100, start=100)
    got = drain([a, b], 100)
    assert sorted(got[0] + got[1]) == list(range(100, 200))
    assert got[0] and got[1]
    a.close()
    b.close()


def test_kafka_python_group_seek_to_beginning_and_end(broker):
    topic = new_topic(broker, 1)
    group = f"seek-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 30)
    c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    assert c.partitions_for_topic(topic)    # before its first join: see KafkaPythonClassic (test_mixed_groups)
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 30 and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=200).values():
            got.extend(int(r.value) for r in recs)
    assert got == list(range(30))
    c.commit()
    c.seek_to_beginning()
    again = []
    deadline = time.monotonic() + 20
    while len(again) < 30 and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=200).values():
            again.extend(int(r.value) for r in recs)
    assert again == list(range(30)), "rewound inside the group"
    c.seek_to_end()
    assert not any(c.poll(timeout_ms=500).values())
    tp = next(iter(c.assignment()))
    assert c.position(tp) == 30 and c.committed(tp) == 30
    c.close()


def test_aiokafka_group_commit_and_resume(broker):
    import asyncio

    from aiokafka import AIOKafkaConsumer
    topic = new_topic(broker, 2)
    group = f"aio-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 60)

    async def consume(n):
        c = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
        await c.start()
        got = []
        try:
            async with asyncio.timeout(30):
                while len(got) < n:
                    for recs in (await c.getmany(timeout_ms=300)).values():
                        got.extend(int(r.value) for r in recs)
            await c.commit()
        finally:
            await c.stop()
        return got

    first = asyncio.run(consume(60))
    assert sorted(first) == list(range(60))
    produce(broker, topic, 20, start=60)
    assert sorted(asyncio.run(consume(20))) == list(range(60, 80)), "resumed after the committed offsets"
