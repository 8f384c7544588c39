"""Apache Kafka's Java client against the three-broker cluster while a leader is killed (-9).

The programs are ``tests/java/ClusterProducer.java`` and ``ClusterConsumer.java``, compiled and
run by ``tests/support/java.py`` against ``../shared/jars``; both print one line per record
(``ACK partition value`` / ``REC partition offset value``), which the tests count.  After a
leader change the Java consumer may validate its position with OffsetForLeaderEpoch (KIP-320,
served in v2-4); that it does so here has not been observed on the wire.
"""
from __future__ import annotations

import subprocess
import threading
import time

import pytest

from tests.support.java import java_available, start_java, stop
from tests.support import counting
from tests.support.counting import create_topic, wait_for


def partition_states(cluster, topic: str) -> dict[int, dict]:
    return counting.partition_states(cluster.zookeeper.connect, topic)


def produce_counted(bootstrap: str, topic: str, count: int, **kwargs) -> dict[int, list[int]]:
    return counting.produce_counted("confluent", bootstrap, topic, count, **kwargs)

TOPIC_CONFIG = dict(partitions=3, rf=3, min_insync_replicas=2)


@pytest.fixture(autouse=True)
def require_java():
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")


class JavaProgram:
    """A ``start_java`` child whose stdout lines are collected by a thread; stderr goes to a file."""

    def __init__(self, tmp_path, main_class: str, *args):
        self.name = main_class
        self.stderr_path = tmp_path / f"{main_class}.stderr"
        self.lines: list[str] = []
        self.times: list[float] = []            # time.monotonic() of each line
        self._stderr = open(self.stderr_path, "w")
        try:
            self.proc = start_java(main_class, *args, stdout=subprocess.PIPE, stderr=self._stderr)
        except BaseException:
            self._stderr.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.times.append(time.monotonic())
            self.lines.append(line.rstrip("\n"))

    def count(self, prefix: str) -> int:
        return sum(1 for line in list(self.lines) if line.startswith(prefix))

    def longest_pause(self, prefix: str, since: float) -> float:
        """The longest time between two ``prefix`` lines (or ``since`` and the first) after ``since``."""
        times = [since] + [t for t, line in zip(self.times, self.lines) if t >= since and line.startswith(prefix)]
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)

    def wait(self, timeout: float) -> list[str]:
        """Wait for the program to end (it prints DONE last) and return its lines."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} still running after {timeout} s; last lines "
                                 f"{self.lines[-5:]}\n{self.stderr_tail()}") from None
        self._reader.join(10)
        assert self.proc.returncode == 0 and self.lines and self.lines[-1].startswith("DONE"), \
            f"{self.name} exited {self.proc.returncode}; last lines {self.lines[-5:]}\n{self.stderr_tail()}"
        return list(self.lines)

    def stderr_tail(self, chars: int = 3000) -> str:
        self._stderr.flush()
        return f"{self.name} stderr: " + self.stderr_path.read_text()[-chars:]

    def close(self) -> None:
        stop(self.proc)
        self._reader.join(5)
        self.proc.stdout.close()
        self._stderr.close()


def wait_full_isrs(cluster, topic: str) -> dict[int, dict]:
    return wait_for(lambda: (s := partition_states(cluster, topic)) and len(s) == TOPIC_CONFIG["partitions"]
                    and all(len(v["isr"]) == 3 for v in s.values()) and s, 20, "full ISRs")


def java_read_all(tmp_path, bootstrap: str, topic: str, expected: int, timeout: int = 40,
                  pause_ms: int = 0, *props: str) -> dict[int, list[tuple[int, int]]]:
    """Every record the Java consumer reads, as ``{partition: [(offset, value), ...]}`` in read order."""
    reader = JavaProgram(tmp_path, "ClusterConsumer", bootstrap, topic, expected, timeout, pause_ms, *props)
    try:
        return parse_records(reader.wait(timeout + 30))
    finally:
        reader.close()


def parse_records(lines: list[str]) -> dict[int, list[tuple[int, int]]]:
    seen: dict[int, list[tuple[int, int]]] = {p: [] for p in range(TOPIC_CONFIG["partitions"])}
    for line in lines:
        if line.startswith("REC "):
            _, partition, offset, value = line.split()
            seen[int(partition)].append((int(offset), int(value)))
    return seen


def test_java_producer_loses_nothing_when_a_leader_is_killed_under_acks_all_load(cluster, tmp_path):
    topic, count = "java-load", 40000
    create_topic(cluster.bootstrap, topic, **TOPIC_CONFIG)
    wait_full_isrs(cluster, topic)
    victim = partition_states(cluster, topic)[0]["leader"]
    producer = JavaProgram(tmp_path, "ClusterProducer", cluster.bootstrap, topic, count, 3)
    try:
        # the kill lands once a fifth is acknowledged: a fixed sleep was the whole load on a faster machine
        wait_for(lambda: producer.count("ACK ") >= count // 5 or producer.proc.poll() is not None, 60,
                 "a fifth of the records acknowledged")
        acked_before = producer.count("ACK ")
        assert producer.proc.poll() is None, f"the load was over before the kill: {producer.lines[-3:]}"
        started = time.monotonic()
        cluster.kill(victim)
        lines = producer.wait(120)
        producer_seconds = time.monotonic() - started
        pause = producer.longest_pause("ACK ", started)
    finally:
        producer.close()
    acked: dict[int, list[int]] = {p: [] for p in range(3)}
    errors = []
    for line in lines:
        if line.startswith("ACK "):
            _, partition, value = line.split()
            acked[int(partition)].append(int(value))
        elif line.startswith("ERR "):
            errors.append(line)
    total = sum(len(v) for v in acked.values())
    states = wait_for(lambda: (s := partition_states(cluster, topic)) and s[0]["leader"] not in (victim, -1) and s,
                      20, "a new leader")
    assert states[0]["leader_epoch"] >= 1
    seen = {p: [v for _, v in recs] for p, recs in java_read_all(tmp_path, cluster.bootstrap, topic, total).items()}
    lost = sum(len(set(acked[p]) - set(seen[p])) for p in acked)
    duplicates = sum(len(v) - len(set(v)) for v in seen.values())
    print(f"\nacknowledged {total} ({acked_before} before the kill of broker {victim}), "
          f"read {sum(len(v) for v in seen.values())}, lost {lost}, duplicates {duplicates}, "
          f"errors {len(errors)}, producer done {producer_seconds:.1f} s after the kill "
          f"(longest pause in ACKs {pause:.1f} s)")
    assert not errors, errors[:5]
    assert total == count
    assert all(len(v) == len(set(v)) for v in acked.values()), "a record acknowledged twice"
    assert lost == 0 and duplicates == 0
    for p in seen:
        assert seen[p] == sorted(seen[p]), f"partition {p} out of order"
        assert seen[p] == [v for v in range(count) if v % 3 == p]


def test_java_consumer_reads_everything_once_across_the_kill_of_a_leader(cluster, tmp_path):
    topic, count = "java-read", 9000
    create_topic(cluster.bootstrap, topic, **TOPIC_CONFIG)
    wait_full_isrs(cluster, topic)
    acked = produce_counted(cluster.bootstrap, topic, count, pause_every=60, timeout=30)
    assert sum(len(v) for v in acked.values()) == count
    # small fetches, slow polls: it is still fetching from every leader when one dies
    reader = JavaProgram(tmp_path, "ClusterConsumer", cluster.bootstrap, topic, count, 45, 20,
                         "max.poll.records=30", "max.partition.fetch.bytes=1024", "fetch.max.bytes=4096",
                         "fetch.max.wait.ms=50")
    try:
        wait_for(lambda: reader.count("REC ") >= count // 4 or reader.proc.poll() is not None, 30,
                 "a quarter of the records read")
        read_before = reader.count("REC ")
        assert read_before < count // 2, f"the consumer read {read_before} records before the kill"
        victim = partition_states(cluster, topic)[0]["leader"]
        started = time.monotonic()
        cluster.kill(victim)
        seen = parse_records(reader.wait(75))
        reader_seconds = time.monotonic() - started
        pause = reader.longest_pause("REC 0 ", started)
    finally:
        reader.close()
    values = {p: [v for _, v in recs] for p, recs in seen.items()}
    lost = sum(len(set(acked[p]) - set(values[p])) for p in acked)
    duplicates = sum(len(v) - len(set(v)) for v in values.values())
    print(f"\nproduced {count}, read {sum(len(v) for v in values.values())} ({read_before} before the kill "
          f"of broker {victim}), lost {lost}, duplicates {duplicates}, consumer done {reader_seconds:.1f} s "
          f"after the kill (longest pause in partition 0's records {pause:.1f} s)")
    assert lost == 0 and duplicates == 0
    for p, recs in seen.items():
        offsets = [o for o, _ in recs]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not 0..n-1 in order"
        assert values[p] == sorted(acked[p]), f"partition {p}: values differ from what was acknowledged"
