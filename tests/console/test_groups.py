"""The groups pages in chromium, against three brokers: lag seen appearing and draining, a
reset previewed, executed and read back by a stock client, Kafka's refusals (an active group
is neither reset nor deleted), a deletion, a share group's members, and its start offsets reset
(AlterShareGroupOffsets on the cluster, read back by a ShareConsumer); and, against one
broker whose /metrics the console reads (``--metrics-url``), a share group's in-flight and
archived record counts.

Records, commits and consumers come from confluent-kafka (librdkafka); the console samples
every second and the group page refreshes its lag every few, hence the generous timeouts.
"""
from __future__ import annotations

import time
import urllib.parse
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from playwright.sync_api import expect

from kwire.testing import BrokerProcess
from kwire.testing.process import free_port
from tests.support.console import ConsoleProcess

SEEN = 20_000          # ms: a sample (1 s) and a refresh of the page's lag (3 s), with room to spare


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def group_url(console, group: str) -> str:
    return f"{console.url}/groups/{urllib.parse.quote(group, safe='')}"


def new_topic(bootstrap: str, records_per_partition: int, partitions: int = 2) -> str:
    """A topic of ``partitions`` with ``records_per_partition`` records in each."""
    topic = name("cg")
    admin = AdminClient({"bootstrap.servers": bootstrap})         # kept: its futures die with it
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(partitions):
        for i in range(records_per_partition):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0
    return topic


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int = 2) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10)}
    finally:
        consumer.close()


def active_member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A subscribed consumer of ``group`` holding its assignment (the group is Stable); close it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "console-active",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the consumer joined no group"
    return consumer


def test_a_groups_lag_appears_on_its_page_and_in_the_list_then_drains(console, console_cluster, page):
    bootstrap = console_cluster.bootstrap
    topic, group = new_topic(bootstrap, 20), name("lag")
    commit(bootstrap, group, topic, {0: 5, 1: 8})                  # lag 15 + 12

    page.goto(group_url(console, group))
    expect(page.locator("#group-state")).to_have_text("Empty")
    expect(page.locator("#group-total-lag")).to_have_text("27", timeout=SEEN)
    row = page.locator(f'#group-lag-table tr[data-partition="{topic}-0"] td')
    expect(row).to_have_text([topic, "0", "5", "20", "15"])
    expect(page.locator("#group-lag .chart .uplot")).to_have_count(1)

    page.goto(f"{console.url}/groups")
    page.get_by_label("Filter by group id").fill(group)
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#groups tbody tr")).to_have_count(1)
    listed = page.locator(f'#groups tr[data-group="{group}"] td')
    expect(listed).to_have_text([group, "Empty", "classic", "0", "27"])

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])     # from the committed offsets
    read, deadline = 0, time.monotonic() + 20
    while read < 27 and time.monotonic() < deadline:
        read += sum(1 for m in consumer.consume(50, 0.5) if m.error() is None)
    consumer.commit(asynchronous=False)
    consumer.close()
    assert read == 27
    expect(listed.last).to_have_text("0", timeout=SEEN)              # the list refreshes itself

    page.goto(group_url(console, group))
    expect(page.locator("#group-total-lag")).to_have_text("0", timeout=SEEN)
    expect(page.locator(f'#group-lag-table tr[data-partition="{topic}-1"] td.lag')).to_have_text("0")


def test_a_reset_is_previewed_then_executed_and_an_active_group_is_refused(console, console_cluster, page):
    bootstrap = console_cluster.bootstrap
    topic, group = new_topic(bootstrap, 20), name("reset")
    commit(bootstrap, group, topic, {0: 10, 1: 12})

    page.goto(group_url(console, group))
    page.locator("#reset-panel summary").click()
    page.get_by_label("Topic").select_option(topic)
    page.get_by_label("Reset to").select_option(label="Specific offset")
    page.get_by_label("Value").fill("3")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("heading", name="Preview: nothing has changed yet")).to_be_visible()
    expect(page.locator(f'#reset-preview tr[data-partition="{topic}-0"] td')).to_have_text([topic, "0", "10", "3"])
    expect(page.locator(f'#reset-preview tr[data-partition="{topic}-1"] td')).to_have_text([topic, "1", "12", "3"])
    assert committed(bootstrap, group, topic) == {0: 10, 1: 12}          # a preview changes nothing

    page.get_by_role("button", name="Execute").click()
    expect(page.locator("main .flash")).to_have_text(f"Reset the offsets of group '{group}' on 2 partitions.")
    assert committed(bootstrap, group, topic) == {0: 3, 1: 3}

    page.goto(f"{group_url(console, group)}?action=reset&topic=&scenario=shift_by&value=-5")
    expect(page.locator(f'#reset-preview tr[data-partition="{topic}-1"] td.new-offset')).to_have_text("0")
    expect(page.locator("main")).to_contain_text("is lower than earliest offset")        # Kafka's warning

    member = active_member(bootstrap, group, topic)
    try:
        page.goto(f"{group_url(console, group)}?action=reset&topic=&scenario=to_earliest")
        expect(page.locator("main .flash.error")).to_have_text(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable.")
        expect(page.get_by_role("button", name="Execute")).to_have_count(0)
        assert "Traceback" not in page.content()
    finally:
        member.close()
    assert committed(bootstrap, group, topic) == {0: 3, 1: 3}


def test_a_group_is_deleted_after_confirmation_and_a_non_empty_one_is_refused(console, console_cluster, page):
    bootstrap = console_cluster.bootstrap
    topic, group, busy = new_topic(bootstrap, 5), name("delete"), name("busy")
    commit(bootstrap, group, topic, {0: 2, 1: 2})

    member = active_member(bootstrap, busy, topic)
    try:
        page.goto(group_url(console, busy))
        page.get_by_role("button", name="Delete group…").click()
        page.get_by_role("button", name="Delete group", exact=True).click()
        expect(page.locator("main .flash.error")).to_contain_text("NON_EMPTY_GROUP")
    finally:
        member.close()

    page.goto(group_url(console, group))
    page.get_by_role("button", name="Delete group…").click()
    expect(page.get_by_role("heading", name=f"Delete group {group}?")).to_be_visible()
    page.get_by_role("button", name="Delete group", exact=True).click()
    expect(page).to_have_url(f"{console.url}/groups?flash=Deleted+group+%27{group}%27.&kind=ok")
    expect(page.locator("main .flash")).to_have_text(f"Deleted group '{group}'.")
    expect(page.locator(f'#groups tr[data-group="{group}"]')).to_have_count(0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(10)
    assert group not in {g.group_id for g in listed.valid}
    assert committed(bootstrap, group, topic) == {0: -1001, 1: -1001}      # no offsets: librdkafka's INVALID


def share_consumer_class():
    try:
        from confluent_kafka import ShareConsumer
    except ImportError:
        pytest.skip("confluent-kafka without ShareConsumer (librdkafka < 2.16)")
    return ShareConsumer


def read_from_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for ``group`` (a group config, set before it starts)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    earliest = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(10)


def test_a_share_groups_page_shows_its_members_and_share_partitions(console, console_cluster, page):
    ShareConsumer = share_consumer_class()
    bootstrap = console_cluster.bootstrap
    topic, group = new_topic(bootstrap, 10), name("share")
    read_from_earliest(bootstrap, group)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "console-share"})
    consumer.subscribe([topic])
    try:
        read, deadline = 0, time.monotonic() + 20
        while read < 20 and time.monotonic() < deadline:
            read += sum(1 for m in consumer.poll(0.5) or [] if m.error() is None)
        assert read == 20
        for _ in range(2):                # the next polls acknowledge the last records (implicit mode)
            consumer.poll(0.2)

        page.goto(group_url(console, group))
        expect(page.locator("#group-type")).to_have_text("share (KIP-932)")
        expect(page.locator("#group-state")).to_have_text("Stable")
        members = page.locator("#group-members tbody tr")
        expect(members).to_have_count(1)
        expect(members.locator("td").nth(1)).to_have_text("console-share")
        expect(members.locator("td").nth(3)).to_have_text(topic)
        expect(members.locator("td").nth(4)).to_have_text(f"{topic} (0, 1)")
        expect(page.locator("#share-partitions tbody tr")).to_have_count(2, timeout=SEEN)
        expect(page.locator("#share-partitions tbody tr").first.locator("td")).to_have_text(
            [topic, "0", "10", "0"], timeout=SEEN)
        expect(page.locator("#share-counts-note")).to_contain_text("--metrics-url")     # none given

        page.goto(f"{console.url}/groups?q={group}")
        expect(page.locator(f'#groups tr[data-group="{group}"] td')).to_have_text(
            [group, "Stable", "share (KIP-932)", "1", "–"])
    finally:
        consumer.close()


def test_a_share_groups_start_offsets_are_reset_with_a_preview_only_while_it_is_empty(console, console_cluster,
                                                                                       page):
    ShareConsumer = share_consumer_class()
    bootstrap = console_cluster.bootstrap
    topic, group = new_topic(bootstrap, 10), name("share-reset")
    read_from_earliest(bootstrap, group)

    def share_consumer():
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        return consumer

    consumer = share_consumer()
    try:
        read, deadline = 0, time.monotonic() + 20
        while read < 20 and time.monotonic() < deadline:
            read += sum(1 for m in consumer.poll(0.5) or [] if m.error() is None)
        assert read == 20
        for _ in range(2):                # the next polls acknowledge the last records (implicit mode)
            consumer.poll(0.2)
        page.goto(f"{group_url(console, group)}?action=reset&topic=&scenario=to_earliest")
        expect(page.locator("main .flash.error")).to_have_text(f"Share group '{group}' is not empty.")
        expect(page.get_by_role("button", name="Execute")).to_have_count(0)
    finally:
        consumer.close()

    page.goto(group_url(console, group))
    page.locator("#reset-panel summary").click()
    page.get_by_label("Topic").select_option(topic)
    page.get_by_label("Reset to").select_option(label="Specific offset")
    page.get_by_label("Value").fill("4")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("heading", name="Preview: nothing has changed yet")).to_be_visible()
    for p in (0, 1):
        expect(page.locator(f'#reset-preview tr[data-partition="{topic}-{p}"] td')).to_have_text(
            [topic, str(p), "10", "4"])
    page.get_by_role("button", name="Execute").click()
    expect(page.locator("main .flash")).to_have_text(f"Reset the offsets of group '{group}' on 2 partitions.")

    page.goto(group_url(console, group))             # DescribeShareGroupOffsets: start 4, lag 6
    expect(page.locator("#share-partitions tbody tr").first.locator("td")).to_have_text([topic, "0", "4", "6"])
    consumer, first, deadline = share_consumer(), {}, time.monotonic() + 20
    try:                          # the share-partition leaders deliver from the new start offset
        while len(first) < 2 and time.monotonic() < deadline:
            for m in consumer.poll(0.5) or []:
                if m.error() is None:
                    first[m.partition()] = min(first.get(m.partition(), m.offset()), m.offset())
    finally:
        consumer.close()
    assert first == {0: 4, 1: 4}


@pytest.fixture
def metrics_console(tmp_path):
    """One broker with its /metrics on, and a console reading it: (broker, console)."""
    metrics_port = free_port()
    broker = BrokerProcess(tmp_path / "broker", properties={
        "prometheus.listener": f"127.0.0.1:{metrics_port}", "offsets.topic.num.partitions": 1}).start()
    console = ConsoleProcess(broker.bootstrap, str(tmp_path / "console.log"), "--metrics-url",
                             f"http://127.0.0.1:{metrics_port}/metrics")
    try:
        console.start()
        yield broker, console
    finally:
        console.close()
        broker.close()


def test_a_share_groups_in_flight_and_archived_records_come_from_the_brokers_metrics(metrics_console, page):
    try:
        from confluent_kafka import AcknowledgeType, ShareConsumer
    except ImportError:
        pytest.skip("confluent-kafka without ShareConsumer (librdkafka < 2.16)")
    broker, console = metrics_console
    bootstrap, topic, group = broker.bootstrap, name("queue"), name("share")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(10):
        producer.produce(topic, f"job-{i}".encode())
    assert producer.flush(15) == 0
    earliest = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(10)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        held, deadline = [], time.monotonic() + 20
        while len(held) < 10 and time.monotonic() < deadline:
            held += [m for m in consumer.poll(0.5) or [] if m.error() is None]
        assert len(held) == 10

        page.goto(group_url(console, group))
        row = page.locator(f'#share-partitions tr[data-partition="{topic}-0"] td')
        # topic, partition, start offset, in flight, available, acquired, acknowledged, archived, lag
        expect(row).to_have_text([topic, "0", "0", "10", "0", "10", "0", "0", "10"], timeout=SEEN)
        expect(page.locator("#share-counts-note")).to_have_count(0)

        for m in held:
            if m.offset() > 0:       # the first stays acquired: the start offset stays behind it
                consumer.acknowledge(m, AcknowledgeType.REJECT if m.offset() % 2 else AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        expect(row).to_have_text([topic, "0", "0", "5", "0", "1", "4", "5", "1"], timeout=SEEN)
    finally:
        consumer.close()
