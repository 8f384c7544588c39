"""AlterPartitionReassignments and ListPartitionReassignments on a single node, through
kafka-python: a partition can only be "moved" to the one broker there is."""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError
from kafka.protocol.metadata import ApiVersionsRequest

from kwire.testing.cluster import send_request

pytestmark = pytest.mark.clients


def test_a_single_node_accepts_a_move_to_itself_and_refuses_the_rest(broker):
    topic = f"single-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        tp = TopicPartition(topic, 0)
        node = admin.describe_cluster()["controller_id"]     # the one broker
        assert admin.alter_partition_reassignments({tp: [node]}) == {tp: None}
        assert admin.alter_partition_reassignments({tp: [node, node + 1]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({TopicPartition(topic, 3): [node]}) == \
            {TopicPartition(topic, 3): UnknownTopicOrPartitionError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    versions = send_request(broker.bootstrap, ApiVersionsRequest[3](client_software_name="t",
                                                                     client_software_version="1"), 10)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert advertised[45] == (0, 1) and advertised[46] == (0, 0)
