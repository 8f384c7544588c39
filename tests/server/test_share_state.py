"""kwire.services.share_state without a cluster: the state partition of a key, ShareUpdate merging,
and the persister RPCs' codec (specs 83-86)."""
from __future__ import annotations

import uuid
import zlib

from kwire.codecs.messages import API_CLASSES
from kwire.groups.share_records import SNAPSHOT_KEY, ShareState, StateBatch, encode_key
from kwire.transport.peer import _namespaces
from kwire.services.share_state import _merge, state_partition

TID = uuid.uuid4()


def test_the_state_partition_of_a_key_is_the_one_the_single_node_writes():
    key = ("g", TID, 2)
    assert state_partition(key, 50) == zlib.crc32(encode_key(SNAPSHOT_KEY, *key)) % 50


def test_an_update_overrides_the_snapshot_where_they_overlap():
    base = ShareState(0, 0, 1, 0, (StateBatch(0, 9, 0, 1),))
    update = ShareState(0, -1, 2, -1, (StateBatch(3, 4, 2, 1),))
    merged = _merge(base, update)
    assert merged.batches == (StateBatch(0, 2, 0, 1), StateBatch(3, 4, 2, 1), StateBatch(5, 9, 0, 1))
    assert merged.leader_epoch == 2 and merged.start_offset == 0
    assert _merge(base, ShareState(0, -1, 2, 6, ())).batches == (StateBatch(0, 9, 0, 1),)
    assert _merge(base, ShareState(0, -1, 2, 10, ())).batches == ()


def test_write_and_read_share_group_state_round_trip():
    request_class, response_class = API_CLASSES[85]
    req = request_class[0](group_id="g", topics=_namespaces([{"topic_id": TID, "partitions": [{
        "partition": 1, "state_epoch": 0, "leader_epoch": 3, "start_offset": 5,
        "state_batches": [{"first_offset": 5, "last_offset": 7, "delivery_state": 2, "delivery_count": 1}]}]}]))
    back = request_class.decode(req.encode(), version=0)
    p = back.topics[0].partitions[0]
    assert (p.partition, p.leader_epoch, p.start_offset) == (1, 3, 5)
    assert p.state_batches[0].delivery_state == 2
    read_response = API_CLASSES[84][1][0](results=_namespaces([{"topic_id": TID, "partitions": [{
        "partition": 1, "error_code": 0, "error_message": None, "state_epoch": 0, "start_offset": -1,
        "state_batches": []}]}]))
    again = API_CLASSES[84][1].decode(read_response.encode(), version=0)
    assert again.results[0].partitions[0].start_offset == -1
    assert {83, 86} <= set(API_CLASSES)
