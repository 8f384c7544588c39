"""kwire groups against a real broker: stock clients produce, consume and commit; the tool's
tables and JSON must say exactly what those clients did, and a consumer started after a reset
must begin where the reset put the group."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

import kwire.testing
import kwire.tools.groups

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

T0 = 1704067200000          # 2024-01-01T00:00:00Z


@pytest.fixture(scope="module")
def broker():
    with kwire.testing.broker(partitions=3) as b:
        yield b


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def rows(table: str) -> list[list[str]]:
    """The data rows of a printed table, split on whitespace (header and rule left out)."""
    lines = [line.split() for line in table.splitlines() if line.strip()]
    return [line for line in lines[2:] if not set(line[0]) <= {"─"}]


def produce(broker, topic, counts, timestamps=None):
    """``counts[p]`` records to partition p; record i of each partition at ``timestamps(i)``."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for partition, count in counts.items():
        for i in range(count):
            producer.send(topic, f"{partition}-{i}".encode(), partition=partition,
                          timestamp_ms=timestamps(i) if timestamps else None)
    producer.flush()
    producer.close()


def commit(broker, group, offsets):
    """Commit ``{(topic, partition): offset}`` as an assign-mode kafka-python consumer of the group."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    consumer.assign([TopicPartition(t, p) for t, p in offsets])
    consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
    consumer.close()


def subscribed_consumer(broker, group, topic):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, client_id="groups-test",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    # the topic's metadata first: kafka-python 3.0.12 joining without it, then rejoining, loses
    # the rejoin when a poll times out mid-join (tests/integration/test_mixed_groups.py
    # KafkaPythonClassic has the details)
    assert consumer.partitions_for_topic(topic), f"no metadata for {topic}"
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(200)
    assert consumer.assignment(), "the consumer never joined"
    consumer.seek_to_beginning()         # the polls above may have returned records: read them again
    return consumer


def committed(groups, group):
    """{(topic, partition): CURRENT-OFFSET} as `describe --output json` reports it."""
    code, out, _ = groups("describe", "--group", group, "--output", "json")
    assert code == 0
    [doc] = json.loads(out)
    return {(p["topic"], p["partition"]): p["current_offset"] for p in doc["partitions"]}


def test_describe_shows_offsets_lag_and_members_while_consuming_and_after(broker, groups):
    topic, other, group = name("orders"), name("audit"), name("billing")
    broker.create_topic(topic, partitions=3)
    broker.create_topic(other, partitions=1)
    produce(broker, topic, {0: 10, 1: 20})              # partition 2 stays empty
    produce(broker, other, {0: 3})
    consumer = subscribed_consumer(broker, group, topic)
    processed, target = {0: 0, 1: 0}, {0: 4, 1: 15}
    deadline = time.monotonic() + 20
    while processed != target and time.monotonic() < deadline:
        for record in (r for batch in consumer.poll(500).values() for r in batch):
            if record.offset < target[record.partition]:
                processed[record.partition] = record.offset + 1
    assert processed == target
    consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in processed.items()}
                    | {TopicPartition(other, 0): OffsetAndMetadata(1, "", -1)})   # a topic it does not read

    code, out, err = groups("describe", "--group", group)
    assert code == 0 and err == ""
    assert out.split("\n")[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                          "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    table = rows(out)
    member_id, host = table[0][6], table[0][7]
    assert member_id.startswith("groups-test-") and host.endswith("127.0.0.1")
    assert table == [[group, topic, "0", "4", "10", "6", member_id, host, "groups-test"],
                     [group, topic, "1", "15", "20", "5", member_id, host, "groups-test"],
                     [group, topic, "2", "-", "0", "-", member_id, host, "groups-test"],
                     [group, other, "0", "1", "3", "2", "-", "-", "-"]]

    code, out, _ = groups("describe", "--group", group, "--members", "--verbose")
    assert code == 0 and rows(out) == [[group, member_id, host, "groups-test", "3", f"{topic}(0,1,2)"]]
    code, out, _ = groups("describe", "--group", group, "--state")
    assert rows(out) == [[group, f"127.0.0.1:{broker.port}", "(1)", "range", "Stable", "1"]]
    code, out, _ = groups("describe", "--group", group, "--state", "--output", "json")
    assert json.loads(out) == [{"group": group, "coordinator": {"id": 1, "host": "127.0.0.1", "port": broker.port},
                                "assignment_strategy": "range", "state": "Stable", "members": 1}]
    code, out, _ = groups("list", "--output", "json")
    assert {"group": group, "type": "classic", "state": "Stable", "protocol_type": "consumer"} in json.loads(out)
    assert group not in groups("list", "--state", "empty")[1]

    consumer.close()
    code, out, err = groups("--describe", "--group", group)          # Kafka's spelling
    assert code == 0 and err.strip() == f"Consumer group '{group}' has no active members."
    assert rows(out) == [[group, other, "0", "1", "3", "2", "-", "-", "-"],      # by topic, as Kafka sorts
                         [group, topic, "0", "4", "10", "6", "-", "-", "-"],
                         [group, topic, "1", "15", "20", "5", "-", "-", "-"]]
    code, out, _ = groups("describe", "--group", group, "--output", "json")
    assert json.loads(out) == [{"group": group, "state": "Empty", "partitions": [
        {"group": group, "topic": t, "partition": p, "current_offset": c, "log_end_offset": e, "lag": e - c,
         "leader_epoch": None, "consumer_id": None, "host": None, "client_id": None}
        for t, p, c, e in ((other, 0, 1, 3), (topic, 0, 4, 10), (topic, 1, 15, 20))]}]
    code, out, _ = groups("describe", "--group", group, "--members")
    assert rows(out) == []
    assert [group, "classic", "Empty", "consumer"] in rows(groups("list", "--state", "empty")[1])

    code, out, err = groups("describe", "--group", "no-such-group")
    assert code == 1 and out == "" and err.strip() == "Error: Consumer group 'no-such-group' does not exist."


def test_reset_offsets_each_scenario_dry_run_and_execute(broker, groups, monkeypatch):
    monkeypatch.setattr(kwire.tools.groups, "COMMIT_CHUNK", 2)      # 3 partitions: two OffsetCommits
    topic, group = name("ledger"), name("replay")
    broker.create_topic(topic, partitions=3)
    produce(broker, topic, {0: 10, 1: 10, 2: 10})
    commit(broker, group, {(topic, p): 5 for p in range(3)})
    everything = ("--group", group, "--all-topics")

    code, out, err = groups("reset-offsets", *everything, "--to-earliest", "--dry-run")
    assert code == 0 and err == ""
    assert out.split("\n")[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert rows(out) == [[group, topic, str(p), "0"] for p in range(3)]
    code, out, err = groups("reset-offsets", *everything, "--to-latest")        # neither flag: a dry run
    assert "No action will be performed as the --execute option is missing" in err
    assert committed(groups, group) == {(topic, p): 5 for p in range(3)}

    def execute(*how, expect):
        code, out, err = groups("reset-offsets", "--group", group, *how, "--execute")
        assert code == 0, err
        assert committed(groups, group) == {(topic, p): o for p, o in enumerate(expect)}
        return out, err

    execute("--all-topics", "--to-earliest", expect=[0, 0, 0])
    execute("--topic", topic, "--to-latest", expect=[10, 10, 10])
    execute("--topic", f"{topic}:0,1", "--to-offset", "7", expect=[7, 7, 10])
    execute("--all-topics", "--shift-by", "-3", expect=[4, 4, 7])
    _, err = execute("--topic", f"{topic}:1", "--to-offset", "50", expect=[4, 10, 7])
    assert err.strip() == (f"New offset (50) is higher than latest offset for topic partition {topic}-1. "
                           "Value will be set to 10.")
    _, err = execute("--all-topics", "--shift-by", "-6", expect=[0, 4, 1])
    assert f"New offset (-2) is lower than earliest offset for topic partition {topic}-0. " \
           "Value will be set to 0." in err
    out, _ = execute("--all-topics", "--to-current", expect=[0, 4, 1])
    assert rows(out) == [[group, topic, "0", "0"], [group, topic, "1", "4"], [group, topic, "2", "1"]]

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.delete_records({TopicPartition(topic, 0): 2})              # the log of partition 0 now starts at 2
    admin.close()
    _, err = execute("--topic", f"{topic}:0", "--to-offset", "1", expect=[2, 4, 1])
    assert "lower than earliest offset" in err
    execute("--topic", f"{topic}:0", "--to-earliest", expect=[2, 4, 1])

    code, out, _ = groups("reset-offsets", *everything, "--shift-by", "1", "--dry-run", "--output", "json")
    assert json.loads(out) == {"executed": False, "groups": [{"group": group, "state": "Empty", "warnings": [],
        "offsets": [{"topic": topic, "partition": p, "current_offset": c, "new_offset": c + 1}
                    for p, c in enumerate([2, 4, 1])]}]}
    assert committed(groups, group) == {(topic, 0): 2, (topic, 1): 4, (topic, 2): 1}

    execute("--topic", f"{topic}:0", "--to-offset", "3", expect=[3, 4, 1])
    execute("--topic", f"{topic}:1", "--to-offset", "6", expect=[3, 6, 1])
    execute("--topic", f"{topic}:2", "--to-offset", "9", expect=[3, 6, 9])
    assert consume_from_committed(broker, group, topic, expected=7 + 4 + 1) == {
        0: list(range(3, 10)), 1: list(range(6, 10)), 2: [9]}


def consume_from_committed(broker, group, topic, expected):
    """What a confluent-kafka consumer of ``group`` reads: {partition: offsets}.  It
    starts from the group's committed offsets (auto.offset.reset=latest would read nothing)."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "latest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: dict[int, list[int]] = {}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, seen.values())) < expected and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                assert message.error() is None, message.error()
                seen.setdefault(message.partition(), []).append(message.offset())
    finally:
        consumer.close()
    return {p: sorted(offsets) for p, offsets in sorted(seen.items())}


def test_reset_by_datetime_and_by_duration(broker, groups):
    topic, recent, group = name("history"), name("recent"), name("backfill")
    broker.create_topic(topic, partitions=3)
    broker.create_topic(recent, partitions=3)
    produce(broker, topic, {p: 10 for p in range(3)}, timestamps=lambda i: T0 + i * 60_000)   # one a minute
    now = int(time.time() * 1000)
    produce(broker, recent, {p: 10 for p in range(3)}, timestamps=lambda i: now - (10 - i) * 3_600_000)
    commit(broker, group, {(t, p): 0 for t in (topic, recent) for p in range(3)})

    def reset(t, *how):
        code, out, err = groups("reset-offsets", "--group", group, "--topic", t, *how, "--execute")
        assert code == 0, err
        offsets = committed(groups, group)
        return sorted({offsets[(t, p)] for p in range(3)}), err

    assert reset(topic, "--to-datetime", "2024-01-01T00:05:00.000") == ([5], "")
    assert reset(topic, "--to-datetime", "2024-01-01T01:02:30.000+01:00")[0] == [3]
    assert reset(topic, "--to-datetime", "2000-01-01T00:00:00.000")[0] == [0]
    offsets, err = reset(topic, "--to-datetime", "2030-01-01T00:00:00.000")
    assert offsets == [10]
    assert f"Warn: Partition 0 from topic {topic} is empty. Falling back to latest known offset." in err
    assert reset(recent, "--by-duration", "PT5H30M")[0] == [5]
    assert reset(recent, "--by-duration", "P1D")[0] == [0]
    assert reset(recent, "--by-duration", "PT1M")[0] == [10]


def test_an_active_group_refuses_reset_and_delete_then_deletes_once_empty(broker, groups):
    topic, other, group = name("events"), name("side"), name("workers")
    broker.create_topic(topic, partitions=3)
    broker.create_topic(other, partitions=1)
    produce(broker, topic, {0: 5, 1: 5, 2: 5})
    produce(broker, other, {0: 3})
    consumer = subscribed_consumer(broker, group, topic)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1),
                     TopicPartition(topic, 1): OffsetAndMetadata(3, "", -1),
                     TopicPartition(other, 0): OffsetAndMetadata(1, "", -1)})
    before = committed(groups, group)

    code, out, err = groups("reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    assert code == 1 and out == ""
    assert err.strip() == (f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                           "but the current state is Stable.")
    assert committed(groups, group) == before
    code, out, err = groups("delete", "--group", group)
    assert code == 1 and err.splitlines() == [
        "Error: Deletion of some consumer groups failed:",
        f"* Group '{group}' could not be deleted due to: GroupNotEmptyException: The group is not empty."]
    code, out, err = groups("delete-offsets", "--group", group, "--topic", f"{topic}:0")
    assert code == 1 and "Encountered some partition-level error" in err
    assert rows(out)[0][:3] == [topic, "0", "Error:"] and "actively subscribed" in out
    code, out, _ = groups("delete-offsets", "--group", group, "--topic", other)   # not subscribed: allowed
    assert code == 0 and out.startswith(f"Request succeeded for deleting offsets from group {group}.")
    assert rows(out) == [[other, "0", "Successful"]]
    assert committed(groups, group) == {(topic, 0): 2, (topic, 1): 3, (topic, 2): None}

    consumer.close()
    code, out, _ = groups("delete-offsets", "--group", group, "--topic", f"{topic}:0", "--output", "json")
    assert code == 0
    assert json.loads(out) == {"group": group, "error": None,
                               "partitions": [{"topic": topic, "partition": 0, "error": None}]}
    assert committed(groups, group) == {(topic, 1): 3}
    code, out, err = groups("delete", "--group", group, "--group", "no-such-group")
    assert code == 1
    assert "* Group 'no-such-group' could not be deleted due to: GroupIdNotFoundException" in err
    assert out.strip() == f"These consumer groups were deleted successfully: '{group}'"
    assert group not in groups("list")[1]
    assert groups("describe", "--group", group)[0] == 1

    commit(broker, group, {(topic, 1): 1})
    code, out, _ = groups("delete", "--group", group, "--output", "json")
    assert code == 0 and json.loads(out) == {"deleted": [group], "failed": []}


def test_runs_as_a_module(broker):
    group = name("module")
    commit(broker, group, {(broker.create_topic(name("m"), partitions=1), 0): 0})
    done = subprocess.run([sys.executable, "-m", "kwire.tools.groups", "list", "--bootstrap-server",
                           broker.bootstrap, "--output", "json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert {"group": group, "type": "classic", "state": "Empty", "protocol_type": ""} in json.loads(done.stdout)   # commits only
