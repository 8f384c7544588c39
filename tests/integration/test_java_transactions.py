"""Transactions through Apache Kafka's Java client (``tests/java/TxnPipeline.java``, run by
``tests/support/java.py`` against ``../shared/jars``): an exactly-once consume-transform-produce
pipeline with sendOffsetsToTransaction(offsets, groupMetadata) across an aborted transaction,
and a Java read_committed consumer over transactions written by confluent-kafka."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.java import java_available, run_to_end


@pytest.fixture(autouse=True)
def require_java():
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")


def name(prefix: str) -> str:
    return f"jtxn-{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})      # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def run_java(tmp_path, *args, timeout: float = 60) -> list[str]:
    """Run ``TxnPipeline *args`` to its end; its stdout lines (the last one starts with DONE)."""
    stderr_path = tmp_path / f"TxnPipeline-{args[0]}-{time.monotonic_ns()}.stderr"
    out, code = run_to_end("TxnPipeline", *args, stderr_path=stderr_path, timeout=timeout)
    lines = out.splitlines()
    assert code == 0 and lines and lines[-1].startswith("DONE"), (
        f"TxnPipeline {args[0]} exited {code}; last lines {lines[-5:]}\n"
        f"stderr: {stderr_path.read_text()[-3000:]}")
    return lines


def java_read(tmp_path, bootstrap: str, topic: str, isolation: str) -> tuple[dict, dict]:
    """``({partition: end offset}, {partition: [(offset, value), ...]})`` read by the Java consumer."""
    ends, records = {}, {}
    for line in run_java(tmp_path, "read", bootstrap, topic, isolation, 40, timeout=70):
        kind, *rest = line.split(" ", 3)
        if kind == "END":
            ends[int(rest[0])] = int(rest[1])
            records.setdefault(int(rest[0]), [])
        elif kind == "REC":
            records[int(rest[0])].append((int(rest[1]), rest[2]))
        else:
            assert kind == "DONE", line             # UNFINISHED: positions never reached the ends
    return ends, records


def test_java_consume_transform_produce_is_exactly_once_across_an_aborted_transaction(broker, tmp_path):
    bootstrap, count, abort_at = broker.bootstrap, 400, 150
    source, sink, group = name("in"), name("out"), name("eos")
    create(bootstrap, source)
    create(bootstrap, sink)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        plain.produce(source, f"rec-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    started = time.monotonic()
    lines = run_java(tmp_path, "pipeline", bootstrap, source, sink, group, name("tid"), count, abort_at, 90,
                     timeout=120)
    pipeline_s = time.monotonic() - started
    commits = [tuple(map(int, line.split()[1:])) for line in lines if line.startswith("COMMIT ")]
    aborts = [tuple(map(int, line.split()[1:])) for line in lines if line.startswith("ABORT ")]
    rewinds = [tuple(map(int, line.split()[1:])) for line in lines if line.startswith("REWIND ")]
    assert len(aborts) == 1, lines
    aborted_records, aborted_first, _ = aborts[0]
    assert aborted_first >= abort_at
    assert rewinds == [(0, aborted_first)]           # the committed offset: where the aborted step began
    assert sum(n for n, _ in commits) == count and commits[-1][1] == count, "\n".join(lines)

    ends, committed = java_read(tmp_path, bootstrap, sink, "read_committed")
    _, everything = java_read(tmp_path, bootstrap, sink, "read_uncommitted")
    values = [v for _, v in committed[0]]
    offsets = [o for o, _ in committed[0]]
    group_offsets = [line.split()[1:] for line in run_java(tmp_path, "committed", bootstrap, group, source)
                     if line.startswith("COMMITTED ")]
    print(f"\n{count} records through {len(commits)} committed transactions and {len(aborts)} aborted one "
          f"({aborted_records} records from input offset {aborted_first}) in {pipeline_s:.1f} s; "
          f"read_committed read {len(values)} of the output (end {ends[0]}), read_uncommitted "
          f"{len(everything[0])}; the group's committed offset {group_offsets}")
    assert values == [f"REC-{i}" for i in range(count)]           # each once, in order
    assert offsets == sorted(offsets)
    # the aborted records are in the log, hidden from read_committed only
    assert len(everything[0]) == count + aborted_records
    assert [v for _, v in everything[0]].count(f"REC-{aborted_first}") == 2
    # one marker per transaction: the last stable offset is the log end
    assert ends[0] == count + aborted_records + len(commits) + len(aborts)
    assert group_offsets == [["0", str(count)]]


def txn_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name("tid"), "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def send(producer: Producer, topic: str, label: str, n: int = 20) -> None:
    for i in range(n):
        producer.produce(topic, f"{label}-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def test_java_read_committed_consumer_sees_only_committed_records_from_confluent_kafka(broker, tmp_path):
    bootstrap, topic = broker.bootstrap, name("mixed")
    create(bootstrap, topic, partitions=2)
    one, two = txn_producer(bootstrap), txn_producer(bootstrap)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    # in the log, per partition: a (committed) and b (aborted) interleaved with c (no transaction),
    # then d (aborted), e (committed), f (left open)
    one.begin_transaction()
    send(one, topic, "a")
    two.begin_transaction()
    send(two, topic, "b")
    send(plain, topic, "c")
    send(one, topic, "a2")
    one.commit_transaction(30)
    two.abort_transaction(30)
    one.begin_transaction()
    send(one, topic, "d")
    one.abort_transaction(30)
    two.begin_transaction()
    send(two, topic, "e")
    two.commit_transaction(30)
    one.begin_transaction()
    send(one, topic, "f")
    try:
        ends, committed = java_read(tmp_path, bootstrap, topic, "read_committed")
        high, everything = java_read(tmp_path, bootstrap, topic, "read_uncommitted")
    finally:
        one.abort_transaction(30)

    def expected(labels):
        return {p: [f"{label}-{i}" for label in labels for i in range(p, 20, 2)] for p in (0, 1)}

    got = {p: [v for _, v in recs] for p, recs in committed.items()}
    print(f"\nread_committed read {sum(map(len, got.values()))} records up to {ends}, "
          f"read_uncommitted {sum(map(len, everything.values()))} up to {high}")
    assert got == expected(["a", "c", "a2", "e"])
    assert {p: [v for _, v in recs] for p, recs in everything.items()} == expected(["a", "b", "c", "a2", "d", "e", "f"])
    for p in (0, 1):
        # the open transaction holds the last stable offset at its first record
        assert ends[p] == everything[p][[v for _, v in everything[p]].index(f"f-{p}")][0]
        assert ends[p] < high[p]
