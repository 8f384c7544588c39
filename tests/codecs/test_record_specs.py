"""Coordinator records through their JSON data specs (codecs/record_specs.py).

The golden bytes were written by kwire's hand-written encoders before the records moved
onto the specs; every record type must keep them exactly and read back to what was written.
"""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, strategies as st

from kwire.codecs.errors import CorruptFrame
from kwire.codecs.primitives import Reader
from kwire.codecs.record_specs import RecordSpec

TID = uuid.UUID("0123456789abcdef0123456789abcdef")
MEMBERS = [
    {"member_id": "m1", "group_instance_id": "i1", "client_id": "c", "client_host": "h",
     "rebalance_timeout": 30000, "session_timeout": 10000, "subscription": b"\x00\x01", "assignment": b""},
    {"member_id": "m2", "group_instance_id": None, "client_id": "c", "client_host": "h",
     "rebalance_timeout": 30000, "session_timeout": 10000, "subscription": b"", "assignment": b"\x02"},
]
BATCHES = [{"first_offset": 100, "last_offset": 109, "delivery_state": 0, "delivery_count": 1},
           {"first_offset": 110, "last_offset": 110, "delivery_state": 4, "delivery_count": 5}]
TXN = {"producer_id": 9, "producer_epoch": 2, "transaction_timeout_ms": 60000,
       "transaction_last_update_timestamp_ms": 1000, "transaction_start_timestamp_ms": 900}

# (spec, version, fields, golden hex)
CASES = [
    ("OffsetCommitKey", 1, {"group": "g", "topic": "t", "partition": 3}, "000100016700017400000003"),
    ("GroupMetadataKey", 2, {"group": "g"}, "0002000167"),
    ("OffsetCommitValue", 3, {"offset": 42, "leader_epoch": 5, "metadata": "meta", "commit_timestamp": 1700},
     "0003000000000000002a0000000500046d65746100000000000006a4"),
    ("GroupMetadataValue", 3, {"protocol_type": "consumer", "generation": 7, "protocol": "range",
                               "leader": "m1", "current_state_timestamp": 1800, "members": MEMBERS},
     "00030008636f6e73756d657200000007000572616e676500026d3100000000000007080000000200026d3100026931"
     "00016300016800007530000027100000000200010000000000026d32ffff0001630001680000753000002710000000"
     "000000000102"),
    ("TransactionLogKey", 0, {"transactional_id": "tx"}, "000000027478"),
    ("TransactionLogValue", 0, {**TXN, "transaction_status": 1, "transaction_partitions": [
        {"topic": "a", "partition_ids": [0, 2]}, {"topic": "b", "partition_ids": [1]}]},
     "0000000000000000000900020000ea600100000002000161000000020000000000000002000162000000010000000100"
     "000000000003e80000000000000384"),
    ("TransactionLogValue", 0, {**TXN, "transaction_status": 0, "transaction_partitions": None,
                                "transaction_start_timestamp_ms": -1},
     "0000000000000000000900020000ea6000ffffffff00000000000003e8ffffffffffffffff"),
    ("TransactionLogValue", 1, {**TXN, "transaction_status": 2, "previous_producer_id": 8,
                                "client_transaction_version": 2,
                                "transaction_partitions": [{"topic": "a", "partition_ids": [0, 2]}]},
     "0001000000000000000900020000ea60020202610300000000000000020000000000000003e800000000000003840200"
     "08000000000000000802020002"),
    ("ShareSnapshotKey", 0, {"group_id": "g", "topic_id": TID, "partition": 1},
     "00000001670123456789abcdef0123456789abcdef00000001"),
    ("ShareUpdateKey", 1, {"group_id": "g", "topic_id": TID, "partition": 1},
     "00010001670123456789abcdef0123456789abcdef00000001"),
    ("ShareSnapshotValue", 0, {"snapshot_epoch": 70000 & 0xFFFF, "state_epoch": 3, "leader_epoch": 4,
                               "start_offset": 100, "state_batches": BATCHES},
     "0000117000000003000000040000000000000064030000000000000064000000000000006d00000100000000000000006e"
     "000000000000006e0400050000"),
    ("ShareUpdateValue", 0, {"snapshot_epoch": 2, "leader_epoch": 4, "start_offset": -1,
                             "state_batches": [{**BATCHES[0], "delivery_state": 2}]},
     "0000000200000004ffffffffffffffff020000000000000064000000000000006d0200010000"),
]


SPECS = {name: RecordSpec(name) for name in {c[0] for c in CASES}}


def _decode(spec: RecordSpec, data: bytes) -> tuple[int, dict]:
    r = Reader(data)
    version = r.int16()
    fields = spec.decode(r, version)
    r.end()
    return version, fields


@pytest.mark.parametrize("name, version, fields, golden", CASES)
def test_golden_bytes_and_round_trip(name, version, fields, golden):
    spec = RecordSpec(name)
    data = spec.encode(version, fields)
    assert data.hex() == golden
    decoded_version, decoded = _decode(spec, data)
    assert decoded_version == version
    assert {k: v for k, v in decoded.items() if k in fields} == fields
    for cut in range(len(data)):
        with pytest.raises(CorruptFrame):
            _decode(spec, data[:cut])
    with pytest.raises(CorruptFrame, match="trailing"):
        _decode(spec, data + b"\x00")


def test_fields_absent_at_a_version_read_as_their_defaults():
    spec = RecordSpec("OffsetCommitValue")
    _, fields = _decode(spec, spec.encode(0, {"offset": 1, "metadata": "", "commit_timestamp": 2}))
    assert fields == {"offset": 1, "metadata": "", "commit_timestamp": 2, "leader_epoch": -1,
                      "expire_timestamp": -1}
    spec = RecordSpec("TransactionLogValue")
    _, fields = _decode(spec, spec.encode(1, {**TXN, "transaction_status": 0, "transaction_partitions": None}))
    assert (fields["previous_producer_id"], fields["next_producer_id"], fields["client_transaction_version"]) == (
        -1, -1, 0)


def test_unknown_tags_are_skipped_and_a_known_tag_of_the_wrong_size_is_refused():
    spec = RecordSpec("TransactionLogValue")
    data = spec.encode(1, {**TXN, "transaction_status": 0, "transaction_partitions": None})
    assert _decode(spec, data[:-1] + bytes.fromhex("01 07 02 abcd"))[1]["producer_id"] == 9
    with pytest.raises(CorruptFrame, match="tagged field 1 has 2 bytes"):
        _decode(spec, data[:-1] + bytes.fromhex("01 01 02 abcd"))


def test_unknown_version_and_unknown_field_are_refused():
    spec = RecordSpec("GroupMetadataKey")
    with pytest.raises(CorruptFrame, match="version 3"):
        _decode(spec, bytes.fromhex("0003 0001 67"))
    with pytest.raises(ValueError, match="unknown fields"):
        spec.encode(2, {"group": "g", "topic": "t"})
    with pytest.raises(ValueError):
        spec.encode(2, {"group": "g" * 40000})          # longer than an int16 length


@given(st.sampled_from([c[0] for c in CASES]), st.binary(max_size=64))
def test_random_bytes_decode_or_raise_corrupt_frame(name, data):
    try:
        _decode(SPECS[name], data)
    except CorruptFrame:
        pass


@pytest.mark.parametrize("name, version, fields, golden", CASES)
def test_flat_shortcut_writes_what_the_general_encoder_writes(name, version, fields, golden):
    from kwire.codecs.messages import encode_data
    spec = SPECS[name]
    spec.encode(version, fields)
    flexible = spec._plans[version].flexible
    assert golden[4:] == encode_data(spec._schema, version, flexible, fields).hex()
    if spec._plans[version].flat:
        nulls = {k: None for k, kind, _, nullable in spec._plans[version].steps if nullable}
        assert spec.encode(version, {**fields, **nulls})[2:] == encode_data(
            spec._schema, version, flexible, {**fields, **nulls})


def test_positional_encoders_write_what_the_dict_encoder_writes():
    """The commit path's positional encoders (one per flat spec version) write the same bytes
    as ``encode`` with a dict, and refuse a spec version that is not flat."""
    from kwire.codecs.record_specs import RecordSpec
    cases = {
        ("OffsetCommitKey", 1): [("g", "orders", 0), ("", "t" * 249, 2**31 - 1), ("grüppe", "é", -1)],
        ("OffsetCommitValue", 3): [(0, -1, "", 0), (2**63 - 1, 7, "meta", 1700000000000), (5, 0, "ü" * 300, -1)],
        ("GroupMetadataKey", 2): [("g",), ("ü" * 100,)],
    }
    for (name, version), rows in cases.items():
        spec = RecordSpec(name)
        encode = spec.positional(version)
        for row in rows:
            assert encode(*row) == spec.encode(version, dict(zip(encode.fields, row))), (name, row)
    with pytest.raises(ValueError):
        RecordSpec("GroupMetadataValue").positional(3)
