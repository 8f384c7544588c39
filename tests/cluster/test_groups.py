"""Consumer groups in a cluster: the coordinator follows the leader of the group's offsets partition."""
from __future__ import annotations

import socket
import struct
import threading
import time

from kafka import KafkaConsumer
from kafka.protocol.consumer import JoinGroupRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from kwire.codecs.messages import response_class
from kwire.testing.cluster import send_request
from tests.support.counting import create_topic, produce_counted, wait_for

NOT_COORDINATOR = 16


COORDINATOR_NOT_AVAILABLE = 15


def coordinator_of(address: str, group: str) -> int:
    """The group's coordinator; -1 while there is none (its offsets partition has no leader
    yet after a kill), which the waits below treat as "not yet"."""
    response = send_request(address, FindCoordinatorRequest[1](key=group, key_type=0))
    if response.error_code == COORDINATOR_NOT_AVAILABLE:
        return -1
    assert response.error_code == 0, response
    return response.node_id


def send_join(address: str, group: str, member_id: str = "") -> socket.socket:
    """JoinGroup v3 (no MEMBER_ID_REQUIRED round) on a new connection; the answer is not read."""
    host, port = address.rsplit(":", 1)
    request = JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=60000,
                               member_id=member_id, group_instance_id=None, protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    request.API_VERSION = 3
    request.with_header(correlation_id=1, client_id="raw-join")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(bytes(request.encode(header=True, framed=True)))
    return s


def join_answer(s: socket.socket):
    head = s.recv(4, socket.MSG_WAITALL)
    assert len(head) == 4, "the broker closed the connection instead of answering"
    body = s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    return response_class(11).decode(body[4:], version=3)


def test_a_parked_join_is_sent_to_the_new_coordinator_when_leadership_moves(cluster):
    group = "moving-group"

    def first_join():
        """The first member's JoinGroup, once the coordinator has loaded the group's partition
        (until then it answers COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS)."""
        coordinator = coordinator_of(cluster.broker(1).bootstrap, group)
        s = send_join(cluster.broker(coordinator).bootstrap, group)
        answer = join_answer(s)
        if answer.error_code in (14, 15, NOT_COORDINATOR):
            s.close()
            return None
        return coordinator, s, answer
    coordinator, first, joined = wait_for(first_join, 20, "a coordinator that accepts the group")
    address = cluster.broker(coordinator).bootstrap
    assert joined.error_code == 0 and joined.leader == joined.member_id
    second = send_join(address, group)         # parked: the rebalance waits for the first member
    time.sleep(0.5)
    stopping = threading.Thread(target=cluster.stop, args=(coordinator,))   # controlled shutdown
    started = time.monotonic()
    stopping.start()
    try:
        answer = join_answer(second)
        assert answer.error_code == NOT_COORDINATOR
        assert time.monotonic() - started < 15          # not the 60 s rebalance timeout
    finally:
        stopping.join(60)
        first.close()
        second.close()
    others = [b for b in cluster.brokers if b != coordinator]
    new = wait_for(lambda: coordinator_of(cluster.broker(others[0]).bootstrap, group) in others and
                   coordinator_of(cluster.broker(others[0]).bootstrap, group), 20, "a new coordinator")
    assert new != coordinator


def test_a_group_keeps_its_committed_offsets_across_a_coordinator_failover(cluster):
    create_topic(cluster.bootstrap, "committed", partitions=3, rf=3)
    produce_counted("confluent", cluster.bootstrap, "committed", 300)
    consumer = KafkaConsumer("committed", bootstrap_servers=cluster.bootstrap, group_id="stays",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    read = 0
    deadline = time.monotonic() + 30
    while read < 300 and time.monotonic() < deadline:
        read += sum(len(v) for v in consumer.poll(500).values())
    consumer.commit()
    consumer.close()
    assert read == 300
    coordinator = coordinator_of(cluster.broker(1).bootstrap, "stays")
    cluster.kill(coordinator)
    produce_counted("confluent", cluster.live_bootstrap(), "committed", 30)
    consumer = KafkaConsumer("committed", bootstrap_servers=cluster.live_bootstrap(), group_id="stays",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    again = []
    deadline = time.monotonic() + 40
    while len(again) < 30 and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            again.extend(int(r.value) for r in records)
    time.sleep(1)
    again.extend(int(r.value) for records in consumer.poll(500).values() for r in records)
    consumer.close()
    assert sorted(again) == list(range(30))         # only the new records: the commit survived


def test_a_consumer_protocol_member_survives_a_coordinator_failover(cluster_factory):
    """KIP-848: the group's records are replayed by the new coordinator, which accepts the member
    at the epoch it had (no rejoin), and the member's commits survive."""
    from confluent_kafka import Consumer

    from kwire.codecs.specs import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
    from tests.support.raw_client import RawClient

    cluster = cluster_factory(3, properties={
        "group.consumer.session.timeout.ms": 10000, "group.consumer.min.session.timeout.ms": 1000,
        "group.consumer.heartbeat.interval.ms": 300, "group.consumer.min.heartbeat.interval.ms": 100})
    create_topic(cluster.bootstrap, "kip848", partitions=3, rf=3)
    produce_counted("confluent", cluster.bootstrap, "kip848", 60)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "moves", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["kip848"])
    values = []

    def poll_until(n, timeout):
        deadline = time.monotonic() + timeout
        while len(values) < n and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                values.append(int(m.value()))
                consumer.commit(message=m, asynchronous=False)

    def describe(node):
        client = RawClient(cluster.broker(node).port)
        try:
            return client.call(ConsumerGroupDescribeRequest(version=0, group_ids=["moves"],
                                                            include_authorized_operations=False),
                               ConsumerGroupDescribeResponse).groups[0]
        finally:
            client.close()

    poll_until(60, 40)
    assert sorted(values) == list(range(60))
    coordinator = coordinator_of(cluster.broker(1).bootstrap, "moves")
    before = describe(coordinator)
    assert before.error_code == 0 and len(before.members) == 1
    others = [b for b in cluster.brokers if b != coordinator]
    assert describe(others[0]).error_code == NOT_COORDINATOR
    cluster.kill(coordinator)
    new = wait_for(lambda: (c := coordinator_of(cluster.broker(others[0]).bootstrap, "moves")) in others and c,
                   30, "a new coordinator")
    produce_counted("confluent", cluster.live_bootstrap(), "kip848", 30)
    poll_until(90, 60)
    after = describe(new)
    consumer.close()
    assert sorted(values[60:]) == list(range(30))                  # resumed from its commits, once each
    # the same member at the same group epoch: replayed, not rejoined (a rejoin bumps the epoch)
    assert after.error_code == 0 and after.group_epoch == before.group_epoch
    assert [m.member_id for m in after.members] == [before.members[0].member_id]
