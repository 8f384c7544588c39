"""``__share_group_state`` records: Kafka's ShareSnapshot/ShareUpdate layouts, bounds-checked."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, strategies as st

from kwire.groups.share_records import (
    SNAPSHOT_KEY, UPDATE_KEY, ShareRecordError, ShareState, StateBatch, decode_key, decode_value, encode_key,
    encode_snapshot, encode_update,
)

TOPIC_ID = uuid.UUID("4f1c3a8e-0000-4000-8000-000000000001")
batches = st.lists(st.builds(StateBatch, st.integers(0, 2**40), st.integers(0, 2**40), st.sampled_from([0, 2, 4]),
                             st.integers(0, 10)), max_size=5).map(tuple)


def test_key_layout_is_type_group_topic_id_partition():
    key = encode_key(SNAPSHOT_KEY, "g", TOPIC_ID, 3)
    assert key == b"\x00\x00" + b"\x00\x01g" + TOPIC_ID.bytes + b"\x00\x00\x00\x03"
    assert decode_key(key).partition == 3
    assert decode_key(b"\x00\x07rest") is None          # another record type: skipped


def test_snapshot_value_bytes():
    value = encode_snapshot(ShareState(1, 0, 0, 5, (StateBatch(5, 6, 2, 1),)))
    assert value == (b"\x00\x00" b"\x00\x01" b"\x00\x00\x00\x00" b"\x00\x00\x00\x00" + (5).to_bytes(8, "big")
                     + b"\x02" + (5).to_bytes(8, "big") + (6).to_bytes(8, "big") + b"\x02\x00\x01\x00" + b"\x00")


@given(st.integers(0, 65535), st.integers(-1, 2**31 - 1), st.integers(-1, 2**40), batches)
def test_snapshot_and_update_round_trip(snapshot_epoch, state_epoch, start, bs):
    s = ShareState(snapshot_epoch, state_epoch, 0, start, bs)
    assert decode_value(SNAPSHOT_KEY, encode_snapshot(s)) == s
    u = ShareState(snapshot_epoch, -1, 0, start, bs)
    assert decode_value(UPDATE_KEY, encode_update(u)) == u


@given(batches)
def test_truncated_or_padded_values_raise(bs):
    value = encode_snapshot(ShareState(1, 0, 0, 0, bs))
    for cut in range(len(value)):
        with pytest.raises(ShareRecordError):
            decode_value(SNAPSHOT_KEY, value[:cut])
    with pytest.raises(ShareRecordError):
        decode_value(SNAPSHOT_KEY, value + b"\x00")
