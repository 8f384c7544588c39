"""KIP-848 consumer groups (``group.protocol=consumer``) through confluent-kafka (librdkafka 2.16):
join, a second member taking partitions only once revoked, leave, commits and a restart,
static membership, a regex subscription that picks up a new topic, describe/list through
the admin client, and a classic member in a consumer group (a mixed group)."""
import time
import uuid

import pytest
from confluent_kafka import ConsumerGroupType, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kwire.codecs.specs import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from tests.support.broker import BrokerProcess
from tests.support.raw_client import RawClient

# Short group settings so each test takes seconds (Kafka's defaults: 45 s / 5 s).
GROUP_PROPS = {"group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 1000,
               "group.consumer.heartbeat.interval.ms": 300, "group.consumer.min.heartbeat.interval.ms": 100}


@pytest.fixture(scope="module")
def kbroker():
    b = BrokerProcess(properties=GROUP_PROPS).start()
    yield b
    assert b.alive(), b.log_text()[-5000:]
    b.close()


def new_topic(broker, partitions=4, name=None):
    name = name or f"kip848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(broker, topic, n, start=0, partitions=4):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(20) == 0


class Member:
    """A consumer-protocol consumer that records when it gains and loses each partition."""

    def __init__(self, broker, group, events, name, **conf):
        self.name, self.events, self.values = name, events, []
        self.c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})

    def subscribe(self, topics):
        self.c.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)

    def _assigned(self, consumer, partitions):
        self.events.extend((time.monotonic(), self.name, "+", tp.topic, tp.partition) for tp in partitions)

    def _revoked(self, consumer, partitions):
        self.events.extend((time.monotonic(), self.name, "-", tp.topic, tp.partition) for tp in partitions)

    def poll(self, timeout=0.05):
        m = self.c.poll(timeout)
        if m is not None and not m.error():
            self.values.append(int(m.value()))
            self.c.commit(message=m, asynchronous=False)
        return m

    def owned(self):
        return {(tp.topic, tp.partition) for tp in self.c.assignment()}


def poll_until(members, condition, timeout=30):
    """Poll every member in turn until ``condition()``; fails after ``timeout`` s with what each
    member owns and how many records it read."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if condition():
            return
    raise AssertionError(f"timed out; owned: {[sorted(m.owned()) for m in members]}, "
                         f"read: {[len(m.values) for m in members]}")


def assert_never_shared(events):
    """Replay the gain/loss events: a partition never has two owners at once."""
    owner = {}
    for _, name, sign, topic, p in sorted(events):
        if sign == "+":
            assert owner.get((topic, p)) in (None, name), f"{topic}-{p} given to {name} while {owner[(topic, p)]} has it"
            owner[(topic, p)] = name
        elif owner.get((topic, p)) == name:
            del owner[(topic, p)]


def raw_describe(broker, group):
    """ConsumerGroupDescribe v0 as librdkafka sends it, decoded with kwire's spec."""
    client = RawClient(broker.port)
    try:
        return client.call(ConsumerGroupDescribeRequest(version=0, group_ids=[group],
                                                        include_authorized_operations=False),
                           ConsumerGroupDescribeResponse).groups[0]
    finally:
        client.close()


def describe(broker, group):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)


def test_one_member_consumes_everything_and_is_described(kbroker):
    topic, group = new_topic(kbroker), f"g-{uuid.uuid4().hex[:6]}"
    produce(kbroker, topic, 40)
    events = []
    a = Member(kbroker, group, events, "a")
    a.subscribe([topic])
    poll_until([a], lambda: len(a.values) == 40)
    assert sorted(a.values) == list(range(40)) and len(a.owned()) == 4
    d = describe(kbroker, group)
    assert d.type == ConsumerGroupType.CONSUMER and str(d.state).endswith("STABLE")
    assert len(d.members) == 1
    assert sorted(tp.partition for tp in d.members[0].assignment.topic_partitions) == [0, 1, 2, 3]
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})        # must outlive the future
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    assert any(g.group_id == group and g.type == ConsumerGroupType.CONSUMER for g in listed.valid)
    a.c.close()


def test_second_member_gets_partitions_only_after_revocation_and_leave_gives_them_back(kbroker):
    topic, group = new_topic(kbroker), f"g-{uuid.uuid4().hex[:6]}"
    produce(kbroker, topic, 100)
    events = []
    a, b = Member(kbroker, group, events, "a"), Member(kbroker, group, events, "b")
    a.subscribe([topic])
    poll_until([a], lambda: len(a.owned()) == 4 and len(a.values) >= 20)
    b.subscribe([topic])
    poll_until([a, b], lambda: len(a.owned()) == 2 and len(b.owned()) == 2)
    produce(kbroker, topic, 100, start=100)
    poll_until([a, b], lambda: len(a.values) + len(b.values) == 200)
    assert sorted(a.values + b.values) == list(range(200))           # each record once across the group
    assert not a.owned() & b.owned()
    assert_never_shared(events)
    b.c.close()                                                      # leaves: epoch -1
    poll_until([a], lambda: len(a.owned()) == 4)
    produce(kbroker, topic, 20, start=200)
    poll_until([a], lambda: len(a.values) + len(b.values) == 220)
    assert sorted(a.values + b.values) == list(range(220))
    assert_never_shared(events)
    a.c.close()


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(kbroker):
    topic, group = new_topic(kbroker), f"g-{uuid.uuid4().hex[:6]}"
    events = []
    a = Member(kbroker, group, events, "a", **{"group.instance.id": "i-a"})
    b = Member(kbroker, group, events, "b", **{"group.instance.id": "i-b"})
    a.subscribe([topic])
    b.subscribe([topic])
    poll_until([a, b], lambda: len(a.owned()) == 2 and len(b.owned()) == 2)
    kept = a.owned()
    epoch = raw_describe(kbroker, group).group_epoch
    b_events = [e for e in events if e[1] == "b"]
    a.c.close()                                                      # static leave: epoch -2
    assert {m.member_epoch for m in raw_describe(kbroker, group).members} >= {-2}
    a2 = Member(kbroker, group, events, "a2", **{"group.instance.id": "i-a"})
    a2.subscribe([topic])
    poll_until([a2, b], lambda: a2.owned() == kept)
    assert len(b.owned()) == 2 and [e for e in events if e[1] == "b"] == b_events   # b saw no rebalance
    d = describe(kbroker, group)
    assert sorted(m.group_instance_id for m in d.members) == ["i-a", "i-b"]
    assert raw_describe(kbroker, group).group_epoch == epoch
    b.c.close()
    a2.c.close()


def test_regex_subscription_picks_up_a_new_topic(kbroker):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = new_topic(kbroker, 2, f"{prefix}-a")
    produce(kbroker, first, 10, partitions=2)
    events, group = [], f"g-{uuid.uuid4().hex[:6]}"
    a = Member(kbroker, group, events, "a", **{"topic.metadata.refresh.interval.ms": 500})
    a.subscribe([f"^{prefix}-.*"])
    poll_until([a], lambda: len(a.values) == 10)
    member = raw_describe(kbroker, group).members[0]
    assert member.subscribed_topic_regex is not None            # resolved by the broker, not the client
    second = new_topic(kbroker, 2, f"{prefix}-b")
    produce(kbroker, second, 10, start=10, partitions=2)
    poll_until([a], lambda: len(a.values) == 20)
    assert {t for t, _ in a.owned()} == {first, second}
    a.c.close()


def test_classic_member_joins_a_consumer_group(kbroker):
    """A mixed group: a classic (JoinGroup/SyncGroup) consumer joining a consumer group gets its
    share from the server-side assignor; when it leaves, the other member takes everything back."""
    topic, group = new_topic(kbroker), f"g-{uuid.uuid4().hex[:6]}"
    a = Member(kbroker, group, [], "a")
    a.subscribe([topic])
    poll_until([a], lambda: len(a.owned()) == 4)
    classic = Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                        "heartbeat.interval.ms": 300})
    classic.subscribe([topic])

    def classic_owned():
        return {(tp.topic, tp.partition) for tp in classic.assignment()}
    deadline = time.monotonic() + 30
    while not (classic_owned() and a.owned() and not classic_owned() & a.owned()
               and len(classic_owned() | a.owned()) == 4):
        assert time.monotonic() < deadline, (classic_owned(), a.owned())
        classic.poll(0.05)
        a.poll()
    assert raw_describe(kbroker, group).group_state in ("Stable", "Reconciling")
    classic.close()
    poll_until([a], lambda: len(a.owned()) == 4)
    a.c.close()


def test_committed_offsets_and_group_survive_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", properties=GROUP_PROPS).start()
    try:
        topic, group = new_topic(b), "restart-group"
        produce(b, topic, 60)
        a = Member(b, group, [], "a")
        a.subscribe([topic])
        poll_until([a], lambda: len(a.values) == 60)
        a.c.close()
        before = raw_describe(b, group)
        b.stop()
        b.start()
        after = describe(b, group)
        assert after.type == ConsumerGroupType.CONSUMER and str(after.state).endswith("EMPTY")
        replayed = raw_describe(b, group)
        assert (replayed.group_state, replayed.group_epoch, replayed.assignment_epoch) == (
            "Empty", before.group_epoch, before.assignment_epoch)
        produce(b, topic, 20, start=60)
        a2 = Member(b, group, [], "a2")
        a2.subscribe([topic])
        poll_until([a2], lambda: len(a2.values) == 20)
        time.sleep(0.5)
        a2.poll(0.2)
        assert sorted(a2.values) == list(range(60, 80))                # resumed from the commits
        a2.c.close()
    finally:
        b.close()


def test_not_served_without_consumer_in_the_rebalance_protocols():
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    with BrokerProcess(properties={"group.coordinator.rebalance.protocols": "classic"}) as b:
        client = RawClient(b.port)
        keys = {k.api_key for k in client.call(ApiVersionsRequest(version=3, client_software_name="t",
                                                                  client_software_version="1"),
                                               ApiVersionsResponse).api_keys}
        assert 11 in keys and not keys & {68, 69}
        client.close()
        client = RawClient(b.port)            # and not accepted: the connection is closed
        assert client.call(ConsumerGroupDescribeRequest(version=0, group_ids=["g"],
                                                        include_authorized_operations=False),
                           ConsumerGroupDescribeResponse) is None
        client.close()


CRASHING_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_crashed_member_is_removed_after_the_session_timeout(kbroker):
    import subprocess
    import sys
    topic, group = new_topic(kbroker), f"g-{uuid.uuid4().hex[:6]}"
    events = []
    a = Member(kbroker, group, events, "a")
    a.subscribe([topic])
    poll_until([a], lambda: len(a.owned()) == 4)
    crashing = subprocess.Popen([sys.executable, "-c", CRASHING_MEMBER, kbroker.bootstrap, group, topic],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        poll_until([a], lambda: len(a.owned()) == 2)          # a revokes two for the new member
        assert crashing.stdout.readline().strip() == "assigned"
    finally:
        crashing.kill()                                  # no leave heartbeat: only the session ends it
        crashing.wait()
    killed = time.monotonic()
    poll_until([a], lambda: len(a.owned()) == 4, timeout=20)
    waited = time.monotonic() - killed
    assert 3 < waited < 15, waited                       # group.consumer.session.timeout.ms=6000
    assert len(raw_describe(kbroker, group).members) == 1
    a.c.close()


def test_an_empty_classic_group_converts(kbroker):
    """Once the classic members have left, the group id converts and the consumer-protocol member
    resumes from the classic group's commits (a live classic group is upgraded online:
    tests/integration/test_mixed_groups.py)."""
    topic, group = new_topic(kbroker), f"g-{uuid.uuid4().hex[:6]}"
    produce(kbroker, topic, 40)
    classic = Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    classic.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 20
    while read < 40 and time.monotonic() < deadline:
        m = classic.poll(0.1)
        if m is not None and not m.error():
            read += 1
    classic.commit(asynchronous=False)
    assert len(classic.assignment()) == 4
    classic.close()                                        # the classic group is now Empty
    produce(kbroker, topic, 10, start=40)
    a = Member(kbroker, group, [], "a")
    a.subscribe([topic])
    poll_until([a], lambda: len(a.values) == 10)
    assert sorted(a.values) == list(range(40, 50))
    assert raw_describe(kbroker, group).error_code == 0
    a.c.close()
