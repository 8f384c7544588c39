"""Apache Kafka's AdminClient (Java client 4.0) against kwire: ``tests/java/JcAdmin.java``.

One JVM run per module; each test checks what a user of the Admin API would look at."""
from __future__ import annotations

import pytest

from tests.java_client.conftest import run_checks

BASE = 1_700_000_000_000            # JcAdmin.BASE: record i of the timestamp topic is BASE + i s
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture(scope="module")
def admin(kwire_broker, tmp_path_factory):
    return run_checks(tmp_path_factory, "JcAdmin", kwire_broker.bootstrap)


def test_describe_cluster_names_the_broker_clients_connect_to(admin, kwire_broker):
    r = admin["describeCluster"]
    assert r["nodes"] == [{"id": r["controller"], "host": "127.0.0.1", "port": kwire_broker.port}]
    assert r["cluster_id"]


def test_create_topics_applies_partitions_and_configs_and_refuses_duplicates_and_bad_names(admin):
    r = admin["createTopics"]
    assert (r["partitions"], r["replication_factor"], r["retention_ms"]) == (3, 1, "3600000")
    assert r["listed"] is True
    assert r["again"] == "TopicExistsException"
    assert r["invalid_name"] == "InvalidTopicException"


def test_describe_topics_lists_every_partition_with_its_leader_and_a_stable_topic_id(admin):
    created, r = admin["createTopics"], admin["describeTopics"]
    assert [p["partition"] for p in r["partitions"]] == [0, 1, 2]
    assert all((p["leader"], p["replicas"], p["isr"]) == (1, 1, 1) for p in r["partitions"])
    assert r["internal"] is False
    assert r["topic_id"] == created["topic_id"] != ZERO_TOPIC_ID
    assert admin["describeTopics_unknown"]["error"] == "UnknownTopicOrPartitionException"


def test_list_offsets_earliest_latest_by_timestamp_and_max_timestamp(admin):
    assert admin["produce_timestamps"]["offsets"] == list(range(10))
    r = admin["listOffsets"]
    assert r["earliest"]["offset"] == 0
    assert r["latest"]["offset"] == 10
    # the first record at or after the time
    assert (r["for_timestamp"]["offset"], r["for_timestamp"]["timestamp"]) == (4, BASE + 4000)
    assert (r["for_timestamp_exact"]["offset"], r["for_timestamp_exact"]["timestamp"]) == (2, BASE + 2000)
    assert r["for_timestamp_future"]["offset"] == -1
    # record 5 carries the largest timestamp although later records were written after it
    assert (r["max_timestamp"]["offset"], r["max_timestamp"]["timestamp"]) == (5, BASE + 100_000)


def test_delete_records_moves_the_log_start_offset(admin):
    r = admin["deleteRecords"]
    assert r["low_watermark"] == 3
    assert r["earliest_after"]["offset"] == 3
    assert r["latest_after"]["offset"] == 10
    assert r["beyond_end"] == "OffsetOutOfRangeException"


def test_create_partitions_adds_partitions_and_refuses_to_remove_any(admin):
    r = admin["createPartitions"]
    assert [p["partition"] for p in r["partitions"]] == [0, 1, 2, 3, 4]
    assert all(p["leader"] == 1 for p in r["partitions"])
    assert r["decrease"] == "InvalidPartitionsException"


def test_describe_configs_shows_topic_overrides_defaults_and_broker_configs(admin):
    r = admin["describeConfigs"]
    assert r["retention_ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG", "default": False,
                                 "read_only": False}
    assert (r["cleanup_policy"]["value"], r["cleanup_policy"]["source"]) == ("delete", "DEFAULT_CONFIG")
    assert r["max_message_bytes"]["value"] == "1048588"
    assert r["broker_num_partitions"]["value"] == "1"
    assert r["entries"] > 10 and r["broker_entries"] > 10


def test_incremental_alter_configs_sets_deletes_and_validates(admin):
    r = admin["incrementalAlterConfigs"]
    assert r["after_set"]["retention_ms"]["value"] == "7200000"
    assert r["after_set"]["max_message_bytes"] == {"value": "500000", "source": "DYNAMIC_TOPIC_CONFIG",
                                                   "default": False, "read_only": False}
    # DELETE reverts one key to its default and leaves the others alone
    assert r["after_delete"]["retention_ms"]["value"] == "7200000"
    assert (r["after_delete"]["max_message_bytes"]["value"],
            r["after_delete"]["max_message_bytes"]["source"]) == ("1048588", "DEFAULT_CONFIG")
    assert r["invalid"] == "InvalidConfigurationException"


def test_dynamic_broker_configs_of_the_cluster_default_and_of_the_broker(admin):
    r = admin["brokerConfigs"]
    assert r["message_max_bytes"] == {"value": "1048600", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                                      "default": False, "read_only": False}
    assert r["max_connections"] == {"value": "5000", "source": "DYNAMIC_BROKER_CONFIG", "default": False,
                                    "read_only": False}
    assert r["default_entries"] == 1
    assert r["default_message_max_bytes"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert r["refused"] == "InvalidRequestException"
    assert (r["after"]["message_max_bytes"]["value"], r["after"]["message_max_bytes"]["source"]) == \
        ("1048588", "DEFAULT_CONFIG")
    assert r["after"]["max_connections"]["source"] == "DEFAULT_CONFIG"


def test_consumer_group_calls_while_a_member_is_active(admin):
    assert admin["group_consume"]["records"] == 7               # offsets 3..9 after deleteRecords
    listed = admin["listConsumerGroups_active"]
    assert (listed["found"], listed["state"], listed["simple"]) == (True, "Stable", False)
    d = admin["describeConsumerGroups_active"]
    assert (d["state"], d["assignor"], d["coordinator"]) == ("Stable", "range", 1)
    assert len(d["members"]) == 1
    assert [a.rsplit("-", 2)[-2:] for a in d["members"][0]["assignment"]] == [["times", "0"]]
    assert admin["deleteConsumerGroups_active"]["error"] == "GroupNotEmptyException"


def test_consumer_group_calls_after_the_member_left(admin):
    listed = admin["listConsumerGroups"]
    assert (listed["found"], listed["state"]) == (True, "Empty")
    d = admin["describeConsumerGroups"]
    assert (d["state"], d["members"], d["assignor"]) == ("Empty", [], "")
    offsets = admin["listConsumerGroupOffsets"]["offsets"]
    assert list(offsets.values()) == [{"offset": 8, "metadata": "from JcAdmin"}]
    deleted = admin["deleteConsumerGroups"]
    assert deleted["listed_after"] is False
    assert deleted["again"] == "GroupIdNotFoundException"
    assert deleted["offsets_after"] == {}
    assert admin["done"]["ok"]
