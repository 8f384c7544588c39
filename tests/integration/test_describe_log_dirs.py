"""DescribeLogDirs (35) through stock clients: what an operator reads about the disks.

A broker with two log dirs gets a known workload (records of a fixed size into topics spread
over both dirs, one of them rolling segments); the sizes every client reports must be the
bytes of the partitions' segment files, each partition in the dir that holds it.
confluent-kafka 2.16 has no describe_log_dirs (librdkafka implements no DescribeLogDirs), so
the clients are kafka-python's admin client, Apache Kafka's Java Admin and raw requests of
every version kwire serves.
"""
from __future__ import annotations

import json
import os
import pathlib

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeLogDirsRequest

import kwire.testing
from kwire.testing.cluster import send_request
from tests.support.java import java_available, run_to_end

RECORDS = 300
VALUE = b"v" * 200
CLUSTER_AUTHORIZATION_FAILED = 31


def segment_bytes(log_dir, topic: str, partition: int) -> int:
    folder = pathlib.Path(log_dir, f"{topic}-{partition}")
    return sum(f.stat().st_size for f in folder.glob("*.log"))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A broker over two log dirs; topics "a" (2 partitions, 4 KiB segments), "b" (1) and
    "c" (3), with RECORDS records of VALUE in each partition of "a" and "b"."""
    root = tmp_path_factory.mktemp("logdirs")
    dirs = [str(root / "d1"), str(root / "d2")]
    with kwire.testing.broker(properties={"log.dirs": ",".join(dirs)}) as b:
        b.create_topic("a", partitions=2, configs={"segment.bytes": 4096})
        b.create_topic("b", partitions=1)
        b.create_topic("c", partitions=3)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
        for topic, partitions in (("a", 2), ("b", 1)):
            for p in range(partitions):
                for _ in range(RECORDS):
                    producer.send(topic, VALUE, partition=p)
        producer.flush(30)
        producer.close()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            yield b, dirs, admin
        finally:
            admin.close()


def where(dirs) -> dict[tuple[str, int], str]:
    """(topic, partition) -> the log dir whose folder holds it, from the file system."""
    found = {}
    for d in dirs:
        for entry in os.listdir(d):
            topic, sep, index = entry.rpartition("-")
            if sep and index.isdigit() and not entry.startswith("__"):
                found[(topic, int(index))] = d
    return found


def test_kafka_python_sees_every_dir_with_the_segment_files_bytes(loaded):
    b, dirs, admin = loaded
    [answer] = admin.describe_log_dirs()
    assert answer["broker"] == 1
    results = {r["log_dir"]: r for r in answer["log_dirs"]}
    assert sorted(results) == sorted(dirs)
    reported = {}
    for d, r in results.items():
        assert r["error_code"] == 0
        assert 0 < r["usable_bytes"] <= r["total_bytes"]
        st = os.statvfs(d)
        assert r["total_bytes"] == st.f_blocks * st.f_frsize
        for t in r["topics"]:
            for p in t["partitions"]:
                assert (p["offset_lag"], p["is_future_key"]) == (0, False)
                reported[(t["name"], p["partition_index"])] = (d, p["partition_size"])
    user_topics = {k: v for k, v in reported.items() if not k[0].startswith("__")}
    locations = where(dirs)
    assert {k: d for k, (d, _) in user_topics.items()} == locations
    # the topics were spread over both dirs
    assert set(locations.values()) == set(dirs)
    for (topic, partition), (d, size) in user_topics.items():
        assert size == segment_bytes(d, topic, partition), (topic, partition)
    # the workload: every partition of a and b holds RECORDS records of 200 bytes; c is empty
    for partition in (0, 1):
        assert user_topics[("a", partition)][1] > RECORDS * len(VALUE)
    assert user_topics[("b", 0)][1] > RECORDS * len(VALUE)
    assert [user_topics[("c", p)][1] for p in range(3)] == [0, 0, 0]
    # "a" rolled segments (4 KiB each): its size is the sum of several .log files
    a_dir = locations[("a", 0)]
    assert len(list(pathlib.Path(a_dir, "a-0").glob("*.log"))) > 3


def test_asked_for_some_partitions_only_those_are_described(loaded):
    b, dirs, admin = loaded
    [answer] = admin.describe_log_dirs(topic_partitions={"a": [1], "c": [0, 2], "absent": [0]})
    described = sorted((t["name"], p["partition_index"]) for r in answer["log_dirs"]
                       for t in r["topics"] for p in t["partitions"])
    assert described == [("a", 1), ("c", 0), ("c", 2)]
    # every dir is still listed, with its volume
    assert sorted(r["log_dir"] for r in answer["log_dirs"]) == sorted(dirs)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_served_version_answers_the_same_sizes(loaded, version):
    b, dirs, admin = loaded
    topics = [DescribeLogDirsRequest.DescribableLogDirTopic(topic="b", partitions=[0])]
    response = send_request(b.bootstrap, DescribeLogDirsRequest[version](topics=topics)).to_dict()
    sizes = {(r["log_dir"], t["name"], p["partition_index"]): p["partition_size"]
             for r in response["results"] for t in r["topics"] for p in t["partitions"]}
    d = where(dirs)[("b", 0)]
    assert sizes == {(d, "b", 0): segment_bytes(d, "b", 0)}
    if version >= 3:
        assert response["error_code"] == 0
    if version >= 4:
        assert all(r["total_bytes"] > 0 for r in response["results"])


def test_java_admin_describes_the_dirs_and_a_replicas_dir(loaded, tmp_path):
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    b, dirs, admin = loaded
    out, code = run_to_end("JcLogDirs", b.bootstrap, 1, "a", stderr_path=tmp_path / "stderr.txt", timeout=120)
    checks = {c.pop("check"): c for c in map(json.loads, out.splitlines())}
    assert code == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    described = checks["describeLogDirs"]
    assert described["ok"], described
    by_path = {d["path"]: d for d in described["dirs"]}
    assert sorted(by_path) == sorted(dirs)
    for path, d in by_path.items():
        assert d["error"] is None
        assert 0 < d["usable_bytes"] <= d["total_bytes"]
    locations = where(dirs)
    for (topic, partition), d in locations.items():
        replica = by_path[d]["replicas"][f"{topic}-{partition}"]
        assert replica == {"size": segment_bytes(d, topic, partition), "offset_lag": 0, "future": False}
    replica_dir = checks["describeReplicaLogDirs"]
    assert replica_dir["ok"], replica_dir
    assert (replica_dir["dir"], replica_dir["offset_lag"], replica_dir["future_dir"]) == \
        (locations[("a", 0)], 0, None)


@pytest.mark.parametrize("version", [1, 4])
def test_without_describe_on_the_cluster_no_dir_is_shown(version):
    # PLAINTEXT with an authorizer: the client is User:ANONYMOUS, who has no ACL at all
    with kwire.testing.broker(authorizer_class_name="kafka.security.authorizer.AclAuthorizer") as b:
        response = send_request(b.bootstrap, DescribeLogDirsRequest[version](topics=None)).to_dict()
    assert response["results"] == []
    if version >= 3:
        assert response["error_code"] == CLUSTER_AUTHORIZATION_FAILED
