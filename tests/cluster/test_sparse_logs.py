"""A cluster broker holds log files only for the partitions it replicates, as Kafka's brokers
do: a new topic, new partitions, a restart and a deletion each leave every broker's log dir
with exactly its own replicas, while a stock producer writes throughout and every acknowledged
record is read back once.  (A reassignment's copies coming and going: test_reassignment.)"""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.support.cluster_state import create, held
from tests.support.counting import (join_producer, produce_in_background, read_all, tally, total,
                                    wait_acknowledged, wait_for)

pytestmark = pytest.mark.clients


def replicas_of(assignment: list[list[int]]) -> dict[int, set[int]]:
    return {b: {p for p, replicas in enumerate(assignment) if b in replicas} for b in (1, 2, 3)}


def test_each_broker_holds_only_its_replicas_through_create_grow_restart_and_delete(cluster):
    assignment = [[1], [2], [3], [1, 2], [2, 3], [3, 1]]
    create(cluster, "spread", assignment)
    assert {b: held(cluster, b, "spread") for b in (1, 2, 3)} == replicas_of(assignment)

    thread, acked = produce_in_background("confluent", cluster.bootstrap, "spread", 6000, partitions=6,
                                          pause_every=20, timeout=90)
    wait_acknowledged(thread, acked, 500)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    grown = assignment + [[2], [3, 1]]
    admin.create_partitions([NewPartitions("spread", 8, replica_assignment=grown[6:])])["spread"].result(30)
    wait_for(lambda: {b: held(cluster, b, "spread") for b in (1, 2, 3)} == replicas_of(grown), 20,
             "the new partitions' logs on their replicas only")

    # a restarted broker finds its own replicas and creates none of the others
    assert cluster.stop(2) == 0
    cluster.start_broker(2)
    assert held(cluster, 2, "spread") == replicas_of(grown)[2]
    join_producer(thread, 120)
    seen = read_all(cluster.bootstrap, "spread", 6, expected=total(acked))
    counts = tally(acked, seen)
    assert counts == {"acknowledged": 6000, "read": 6000, "lost": 0, "duplicates": 0, "out_of_order": 0}, counts
    assert held(cluster, 2, "spread") == replicas_of(grown)[2]

    admin.delete_topics(["spread"])["spread"].result(30)
    wait_for(lambda: not any(held(cluster, b, "spread") for b in (1, 2, 3)), 20, "every broker's logs deleted")
