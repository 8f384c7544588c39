"""``kwire topics`` against an embedded kwire broker: what an operator reads and what scripts parse.

Every command runs through ``main([...])`` (one through ``python -m kwire.tools.topics``) and
the tests check the printed tables, the JSON documents, the exit codes and Kafka's messages.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import uuid

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

import kwire.testing
from kwire.tools.topics import kafka_topic_id, main, topic_filter
from tests.support.tool_output import run_tool, run_tool_json, tables

clients = pytest.mark.clients      # these start a broker; the pure ones below stay in the fast lane
RECORDS = 40


@pytest.fixture(scope="module")
def broker():
    with kwire.testing.broker(offsets_topic_num_partitions=2) as b:
        yield b


def name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topics(broker, capsys, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``kwire topics argv --bootstrap-server <broker>``."""
    return run_tool(main, broker.bootstrap, capsys, *argv)


def topics_json(broker, capsys, *argv: str):
    return run_tool_json(main, broker.bootstrap, capsys, *argv)


def produce(broker, topic: str, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v" * 100, partition=i % partitions)
               for i in range(RECORDS * partitions)]
    producer.flush(15)
    for f in futures:
        f.get(10)
    producer.close()


def segment_bytes(broker, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in pathlib.Path(broker.data_dir, f"{topic}-{partition}").glob("*.log"))


@clients
def test_create_with_configs_then_describe_shows_them(broker, capsys):
    topic = name("orders")
    code, out, err = topics(broker, capsys, "create", "--topic", topic, "--partitions", "3",
                            "--config", "retention.ms=60000", "--config", "max.message.bytes=2000000")
    assert (code, out) == (0, f"Created topic {topic}.\n"), err
    code, out, err = topics(broker, capsys, "describe", "--topic", topic)
    assert code == 0, err
    summary, partitions = tables(out)
    assert summary["columns"] == ["Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs"]
    [row] = summary["rows"]
    assert (row["Topic"], row["PartitionCount"], row["ReplicationFactor"]) == (topic, "3", "1")
    assert row["Configs"] == "max.message.bytes=2000000,retention.ms=60000"
    assert partitions["columns"] == ["Topic", "Partition", "Leader", "Replicas", "Isr", "LogStartOffset",
                                     "LogEndOffset", "Size"]
    assert [(r["Partition"], r["Leader"], r["Replicas"], r["Isr"]) for r in partitions["rows"]] == \
        [("0", "1", "1", "1"), ("1", "1", "1", "1"), ("2", "1", "1", "1")]
    # the same topic id as the Java client and kafka-topics.sh print
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    [described] = admin.describe_topics([topic])
    admin.close()
    assert row["TopicId"] == kafka_topic_id(described["topic_id"]) != "AAAAAAAAAAAAAAAAAAAAAA"


@clients
def test_describe_after_a_known_workload_shows_offsets_and_sizes(broker, capsys):
    topic = name("load")
    assert topics(broker, capsys, "create", "--topic", topic, "--partitions", "2")[0] == 0
    produce(broker, topic, 2)
    [doc] = topics_json(broker, capsys, "describe", "--topic", topic)["topics"]
    assert (doc["name"], doc["partition_count"], doc["replication_factor"], doc["internal"]) == (topic, 2, 1, False)
    assert doc["configs"] == {}
    for p in doc["partitions"]:
        assert (p["log_start_offset"], p["log_end_offset"]) == (0, RECORDS)
        assert (p["leader"], p["replicas"], p["isr"], p["offline_replicas"]) == (1, [1], [1], [])
        on_disk = segment_bytes(broker, topic, p["partition"])
        assert p["size_bytes"] == on_disk > RECORDS * 100
        assert p["replica_sizes"] == {"1": on_disk}
    code, out, err = topics(broker, capsys, "describe", "--topic", topic)
    rows = tables(out)[1]["rows"]
    # a single healthy broker: no partition is under-replicated or without a leader
    for only in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert topics(broker, capsys, "describe", "--topic", topic, only) == (0, "", "")
        assert topics_json(broker, capsys, "describe", "--topic", topic, only) == {"topics": []}
    assert [(r["LogStartOffset"], r["LogEndOffset"]) for r in rows] == [("0", str(RECORDS))] * 2
    assert all(r["Size"].endswith("KiB") and float(r["Size"].split()[0]) > 0 for r in rows)


@clients
def test_alter_adds_partitions_and_refuses_fewer(broker, capsys):
    topic = name("grow")
    assert topics(broker, capsys, "create", "--topic", topic, "--partitions", "2")[0] == 0
    code, out, err = topics(broker, capsys, "alter", "--topic", topic, "--partitions", "5")
    assert (code, out) == (0, f"Topic {topic} now has 5 partitions.\n"), err
    [doc] = topics_json(broker, capsys, "describe", "--topic", topic)["topics"]
    assert [p["partition"] for p in doc["partitions"]] == [0, 1, 2, 3, 4]
    assert all(p["log_end_offset"] == 0 and p["size_bytes"] == 0 for p in doc["partitions"])
    code, out, err = topics(broker, capsys, "alter", "--topic", topic, "--partitions", "3")
    assert code == 1
    assert "Topic currently has 5 partitions, which is higher than or equal to the requested 3." in err


@clients
def test_delete_then_it_is_gone_and_deleting_again_is_an_error_unless_if_exists(broker, capsys):
    topic = name("doomed")
    assert topics(broker, capsys, "create", "--topic", topic)[0] == 0
    code, out, err = topics(broker, capsys, "delete", "--topic", topic)
    assert (code, out) == (0, f"Deleted topic {topic}.\n"), err
    assert topic not in topics(broker, capsys, "list")[1].split()
    code, out, err = topics(broker, capsys, "delete", "--topic", topic)
    assert (code, err.strip()) == (1, f"kwire: Topic '{topic}' does not exist as expected")
    assert topics(broker, capsys, "delete", "--topic", topic, "--if-exists") == (0, "", "")
    assert topics_json(broker, capsys, "delete", "--topic", topic, "--if-exists") == {"deleted": []}


@clients
def test_create_errors_print_kafkas_message_and_exit_1(broker, capsys):
    topic = name("dup")
    assert topics(broker, capsys, "create", "--topic", topic)[0] == 0
    code, out, err = topics(broker, capsys, "create", "--topic", topic)
    assert (code, out, err.strip()) == (1, "", f"kwire: Topic '{topic}' already exists.")
    assert topics(broker, capsys, "create", "--topic", topic, "--if-not-exists") == (0, "", "")
    code, _, err = topics(broker, capsys, "create", "--topic", name(), "--partitions", "0")
    assert (code, err.strip()) == (1, "kwire: Number of partitions must be larger than 0.")
    code, _, err = topics(broker, capsys, "create", "--topic", name(), "--config", "no.such.config=1")
    assert (code, err.strip()) == (1, "kwire: Unknown topic config name: no.such.config")
    code, _, err = topics(broker, capsys, "create", "--topic", name(), "--replication-factor", "3")
    assert code == 1 and "replication factor of 3 cannot be reached" in err
    code, _, err = topics(broker, capsys, "describe", "--topic", "absent-topic")
    assert (code, err.strip()) == (1, "kwire: Topic 'absent-topic' does not exist as expected")


@clients
def test_bad_arguments_exit_2_before_any_connection(capsys):
    assert main(["create", "--topic", "x", "--config", "novalue", "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert "--config 'novalue': expected key=value" in capsys.readouterr().err
    assert main(["create", "--bootstrap-server", "127.0.0.1:1"]) == 2          # no --topic
    assert main(["create", "--topic", "bad/name", "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert "illegal" in capsys.readouterr().err


@clients
def test_list_shows_internal_topics_unless_excluded_and_matches_whole_names(broker, capsys):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.describe_groups(["any-group"])          # FindCoordinator makes __consumer_offsets
    admin.close()
    prefix = name("re")
    for suffix in ("a", "b", "a.x"):
        assert topics(broker, capsys, "create", "--topic", f"{prefix}-{suffix}")[0] == 0
    listed = topics(broker, capsys, "list")[1].splitlines()
    assert "__consumer_offsets" in listed and f"{prefix}-a" in listed
    assert listed == sorted(listed)
    assert "__consumer_offsets" not in topics(broker, capsys, "list", "--exclude-internal")[1].split()
    # kafka-topics.sh: a regular expression over the whole name; commas separate alternatives
    assert topics(broker, capsys, "list", "--topic", f"{prefix}-a")[1].split() == [f"{prefix}-a"]
    assert topics(broker, capsys, "list", "--topic", f"{prefix}-.*")[1].split() == \
        [f"{prefix}-a", f"{prefix}-a.x", f"{prefix}-b"]
    assert topics(broker, capsys, "list", "--topic", f"{prefix}-b,{prefix}-a")[1].split() == \
        [f"{prefix}-a", f"{prefix}-b"]
    described = topics_json(broker, capsys, "describe", "--topic", f"{prefix}-a.*")["topics"]
    assert [t["name"] for t in described] == [f"{prefix}-a", f"{prefix}-a.x"]
    listed_json = topics_json(broker, capsys, "list", "--topic", "__consumer_offsets")["topics"]
    assert [(t["name"], t["partitions"], t["internal"]) for t in listed_json] == [("__consumer_offsets", 2, True)]


@clients
def test_kafkas_spelling_and_python_dash_m(broker, capsys):
    topic = name("kafka-style")
    assert topics(broker, capsys, "--create", "--topic", topic, "--partitions", "2")[0] == 0
    code, out, err = topics(broker, capsys, "--describe", "--topic", topic)
    assert code == 0 and [r["Partition"] for r in tables(out)[1]["rows"]] == ["0", "1"]
    done = subprocess.run([sys.executable, "-m", "kwire.tools.topics", "list", "--topic", topic,
                           "--bootstrap-server", broker.bootstrap], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"{topic}\n"), done.stderr


@clients
def test_the_connection_options_may_come_before_the_command(broker, capsys):
    """Kafka users type ``--bootstrap-server`` first: ``kwire topics --bootstrap-server H:P create``."""
    topic = name("options-first")
    assert main(["--bootstrap-server", broker.bootstrap, "create", "--topic", topic, "--partitions", "3"]) == 0
    capsys.readouterr()
    assert main([f"--bootstrap-server={broker.bootstrap}", "--output", "json", "describe", "--topic", topic]) == 0
    described = json.loads(capsys.readouterr().out)
    assert [p["partition"] for p in described["topics"][0]["partitions"]] == [0, 1, 2]
    done = subprocess.run([sys.executable, "-m", "kwire", "groups", "--bootstrap-server", broker.bootstrap, "list"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert main(["--bootstrap-server", broker.bootstrap, "--no-such-option", "list"]) == 2


@pytest.mark.parametrize("pattern, names", [
    ("orders", ["orders"]),
    ("orders.v2", ["orders.v2", "ordersXv2"]),          # Kafka's rule: the dot is a regex dot
    (r"orders\.v2", ["orders.v2"]),
    ("ord", []),                                          # the whole name must match
    ("'orders,audit'", ["orders", "audit"]),
])
def test_topic_filter_is_kafka_topics_include_list(pattern, names):
    allowed = topic_filter(pattern, exclude_internal=False)
    assert [n for n in ("orders", "orders.v2", "ordersXv2", "audit") if allowed(n, False)] == names


def test_internal_topics_are_left_out_on_request():
    assert topic_filter(None, exclude_internal=False)("__consumer_offsets", True)
    assert not topic_filter(None, exclude_internal=True)("__consumer_offsets", True)


def test_topic_ids_are_spelled_as_kafka_does():
    assert kafka_topic_id("00000000-0000-0000-0000-000000000000") == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_topic_id("fb8d0d4f-5f36-4b9f-a2f8-0e1bd76b2a51") == "-40NT182S5-i-A4b12sqUQ"
    assert kafka_topic_id(None) is None


@clients
def test_without_describe_on_the_cluster_sizes_are_unknown_but_the_rest_is_shown(tmp_path, capsys):
    from confluent_kafka.admin import AclOperation, ResourceType

    from tests.support.acl_broker import AclBroker
    with AclBroker(tmp_path / "broker") as b:
        topic = name("guarded")
        admin_props = tmp_path / "admin.properties"
        alice_props = tmp_path / "alice.properties"
        for path, user in ((admin_props, "admin"), (alice_props, "alice")):
            path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                            f'username="{user}" password="{user}-secret";\n')
        code, _, err = run_tool(main, b.bootstrap, capsys, "create", "--topic", topic, "--partitions", "2",
                                "--command-config", str(admin_props))
        assert code == 0, err
        b.allow("alice", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
        code, out, err = run_tool(main, b.bootstrap, capsys, "describe", "--topic", topic,
                                  "--command-config", str(alice_props))
        assert code == 0, err
        assert "sizes unknown" in err
        rows = tables(out)[1]["rows"]
        assert [(r["Partition"], r["LogEndOffset"], r["Size"]) for r in rows] == [("0", "0", "-"), ("1", "0", "-")]
        # the super user sees the sizes
        [doc] = run_tool_json(main, b.bootstrap, capsys, "describe", "--topic", topic,
                              "--command-config", str(admin_props))["topics"]
        assert [p["size_bytes"] for p in doc["partitions"]] == [0, 0]
