"""Compaction and crashes: kill -9 at each step of the cleaner's segment swap, and a restart after a
group committed many times to the compacted __consumer_offsets.

The swap tests start ``kwire serve`` with ``KWIRE_CLEANER_PAUSE_AT=<phase>``: the cleaner writes the
empty file ``<log dir>/cleaner-paused-<phase>`` at that step of its first clean and blocks there.
The test waits for the file, kill -9s the broker, restarts it without the variable and checks, with
stock consumers, what a user would: every key's latest acknowledged value is read at the offset its
producer was told, the log reads to its end without an error, new records are accepted after it, and
the cleaner then finishes (old duplicates gone).  Messages count acknowledged, read and lost records.
"""
from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.integration.test_compaction import (COMPACT, Acked, create_topic, difference, fill, key_value,
                                               produce, read_confluent, read_kafka_python, set_topic_configs,
                                               topic_name, wait_read_back, watermarks)
from tests.support.broker import BrokerProcess

PAUSE_ENV = "KWIRE_CLEANER_PAUSE_AT"
PROCESS_PROPS = {"log.cleaner.backoff.ms": "100"}
# Phases reached on the cleaner's thread; "replaced" is inside the swap itself, which renames files in
# one step on the broker's event loop (so that no fetch sees half of it) and so pauses the whole broker.
OFF_THE_EVENT_LOOP = ("cleaned", "swap")


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != PAUSE_ENV}
    env.update(extra)
    return env


def wait_file(path: str, timeout: float, broker: BrokerProcess) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert broker.alive(), f"the broker exited before {path} appeared:\n{broker.log_tail(40)}"
        assert time.monotonic() < deadline, (f"{os.path.basename(path)} did not appear within {timeout} s "
                                             f"(the cleaner never reached that step); log tail:\n"
                                             f"{broker.log_tail(40)}")
        time.sleep(0.05)


def step(broker: BrokerProcess, what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; an AssertionError is re-raised naming the step, with the broker's log."""
    try:
        return fn(*args, **kwargs)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}\nbroker log tail:\n{broker.log_tail(30)}") from None


def lost_latest(acked: Acked, got) -> list:
    """Latest acknowledged record of each key not read back at its offset with its value."""
    have = set(got)
    return [r for r in acked.latest() if r not in have]


@pytest.mark.parametrize("phase", ["cleaned", "swap", "replaced"])
def test_kill_9_during_the_cleaner_swap_loses_nothing_and_the_clean_completes(tmp_path, phase):
    b = BrokerProcess(str(tmp_path), properties=PROCESS_PROPS, env=environment(**{PAUSE_ENV: phase}))
    b.start()
    try:
        # held back by min.compaction.lag.ms until everything is written: at "replaced" the whole
        # broker stands still, and a clean of the first few segments would stop the writes half way
        topic = create_topic(b.bootstrap, topic_name(f"swap-{phase}"), **COMPACT,
                             **{"min.compaction.lag.ms": 3600000})
        acked = Acked()
        for rnd in range(8):
            produce(b.bootstrap, topic, [key_value("k", i, f"r{rnd}") for i in range(40)], acked)
        fill(b.bootstrap, topic, acked)
        set_topic_configs(b.bootstrap, topic, **{"min.compaction.lag.ms": 0})
        pause_file = os.path.join(b.data_dir, "logs", f"cleaner-paused-{phase}")
        wait_file(pause_file, 30, b)
        if phase in OFF_THE_EVENT_LOOP:
            # the broker keeps taking writes while its cleaner thread is stuck before the swap
            produce(b.bootstrap, topic, [key_value("k", i, "while-paused") for i in range(10)], acked)
            fill(b.bootstrap, topic, acked, n=10)
        before_kill = (step(b, "reading while the cleaner is paused", read_confluent, b.bootstrap, topic)
                       if phase in OFF_THE_EVENT_LOOP else [])
        b.kill()
        os.remove(pause_file)       # the test's marker, not the broker's data

        b.env = environment()
        b.start()
        got = step(b, "reading after the restart", read_confluent, b.bootstrap, topic)
        lost = lost_latest(acked, got)
        wrong = [r for r in got if acked.by_offset.get(r[0]) != (r[1], r[2])]
        counts = (f"{len(acked)} records acknowledged ({len(acked.latest())} latest per key), "
                  f"{len(before_kill)} read before the kill, {len(got)} read after the restart, "
                  f"{len(lost)} latest values lost e.g. {lost[:3]}, {len(wrong)} read with an offset or value "
                  f"never acknowledged e.g. {wrong[:3]}")
        assert not lost and not wrong, f"kill -9 at '{phase}': {counts}\nlog tail:\n{b.log_tail(30)}"
        assert [r[0] for r in got] == sorted({r[0] for r in got}), f"offsets not increasing: {counts}"
        assert watermarks(b.bootstrap, topic) == (0, max(acked.by_offset) + 1), counts
        kp_got = read_kafka_python(b.bootstrap, topic)
        assert not lost_latest(acked, kp_got), f"kafka-python after the restart: {difference(acked.latest(), kp_got)}"

        # new records go after the old ones, and the cleaner finishes the interrupted clean
        end = max(acked.by_offset) + 1
        offsets = produce(b.bootstrap, topic, [key_value("k", i, "after-restart") for i in range(5)], acked)
        assert offsets == list(range(end, end + 5))
        fill(b.bootstrap, topic, acked)
        wait_read_back(b.bootstrap, topic, acked.latest(), what=f"the clean after a kill -9 at '{phase}'")
        assert read_kafka_python(b.bootstrap, topic) == acked.latest()
        leftovers = [f for f in os.listdir(os.path.join(b.data_dir, "logs", f"{topic}-0"))
                     if f.endswith((".cleaned", ".swap"))]
        assert not leftovers, f"files of the interrupted swap left behind: {leftovers}"
        assert f"cleaned {topic}-0:" in b.log_text()
    finally:
        b.close()


def broker_config(bootstrap: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1")
    return admin.describe_configs([res])[res].result(15)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([CkTopicPartition(topic, p) for p in range(partitions)], timeout=15)}
    finally:
        c.close()


def count_records(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("count"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 20})
    c.assign([CkTopicPartition(topic, partition, 0)])
    n, deadline = 0, time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return n
            n += 1
    finally:
        c.close()
    raise AssertionError(f"{topic}-{partition} not read to its end within 30 s ({n} records)")


def test_group_offsets_after_many_commits_survive_kill_9_of_a_compacted_offsets_topic(tmp_path):
    """Two groups commit 1,500 times each to one __consumer_offsets partition with small segments;
    the cleaner compacts it; after kill -9 and a restart both groups' committed offsets are the last
    ones committed."""
    b = BrokerProcess(str(tmp_path), properties={**PROCESS_PROPS, "offsets.topic.num.partitions": "1",
                                                 "offsets.topic.segment.bytes": "4096"})
    b.start()
    try:
        topic = create_topic(b.bootstrap, topic_name("grp"), partitions=3)
        groups = [f"g-{uuid.uuid4().hex[:6]}" for _ in range(2)]
        last: dict[str, dict[int, int]] = {g: {} for g in groups}
        consumers = {g: Consumer({"bootstrap.servers": b.bootstrap, "group.id": g, "enable.auto.commit": False})
                     for g in groups}
        commits = 1500
        try:
            for i in range(commits):
                for g, c in consumers.items():
                    p = i % 3
                    offset = i + 1 if g == groups[0] else 10 * (i + 1)
                    c.commit(offsets=[CkTopicPartition(topic, p, offset)], asynchronous=False)
                    last[g][p] = offset
        finally:
            for c in consumers.values():
                c.close()
        for g in groups:
            assert committed(b.bootstrap, g, topic, 3) == last[g], f"{g} before the restart"

        # Kafka's offsets.topic.segment.bytes: when the broker has it, the offsets partition rolls every
        # few commits and the cleaner must shrink it; otherwise only the restart is checked
        small_segments = "offsets.topic.segment.bytes" in broker_config(b.bootstrap)
        if small_segments:
            # what a consumer of the offsets partition reads: the latest commit of each of the 6 keys
            # and the active segment (4096 bytes: a few dozen commits), not the history
            deadline = time.monotonic() + 60
            while (left := count_records(b.bootstrap, "__consumer_offsets", 0)) >= 200:
                assert time.monotonic() < deadline, (
                    f"__consumer_offsets-0 still holds {left} records 60 s after {2 * commits} commits; "
                    f"cleans logged: {b.log_text().count('cleaned __consumer_offsets-0:')}; log tail:\n"
                    f"{b.log_tail(20)}")
                time.sleep(0.5)

        b.kill()
        t0 = time.monotonic()
        b.start()
        startup = time.monotonic() - t0
        for g in groups:
            got = committed(b.bootstrap, g, topic, 3)
            assert got == last[g], (f"{g} after kill -9 and restart ({startup:.1f} s): committed {got}, "
                                    f"last committed {last[g]}")
        # and commits keep working on the compacted log
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": groups[0], "enable.auto.commit": False})
        c.commit(offsets=[CkTopicPartition(topic, 0, 99999)], asynchronous=False)
        c.close()
        assert committed(b.bootstrap, groups[0], topic, 3) == {**last[groups[0]], 0: 99999}
    finally:
        b.close()
