"""The KIP-848 consumer-group records in __consumer_offsets byte for byte as Kafka lays them
out (its ConsumerGroup*Key/Value specs), and the member records an older kwire wrote."""
from __future__ import annotations

import uuid

from kwire.groups import consumer_records as cr

T1 = uuid.UUID(int=1)
CLASSIC = cr.MemberMetadata(None, None, "c", "/h", ("a",), None, 1000, None,
                            cr.ClassicMetadata(45000, (("range", b"xy"),)))
# version 0 | null instance | null rack | "c" | "/h" | ["a"] | null regex | 1000 | null assignor
BODY = (b"\x00\x00" + b"\x00" + b"\x00" + b"\x02c" + b"\x03/h" + b"\x02\x02a" + b"\x00"
        + b"\x00\x00\x03\xe8" + b"\x00")
# session timeout 45000 | [("range", b"xy")] with its empty tag section | the struct's own tags
CLASSIC_STRUCT = b"\x00\x00\xaf\xc8" + b"\x02" + b"\x06range" + b"\x03xy" + b"\x00" + b"\x00"


def test_keys_carry_the_record_type_as_their_version():
    assert cr.consumer_key(cr.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert cr.consumer_key(cr.MEMBER_METADATA, "g", "m") == b"\x00\x05\x00\x01g\x00\x01m"
    assert cr.consumer_key(cr.CURRENT_ASSIGNMENT, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"


def test_a_classic_member_is_tag_0_with_the_nullable_struct_presence_byte():
    # one tagged field: tag 0, size 17 (the presence byte 1 and the 16-byte struct)
    expected = BODY + b"\x01" + b"\x00" + b"\x11" + b"\x01" + CLASSIC_STRUCT
    assert cr.encode_member_metadata(CLASSIC) == expected
    assert cr.decode_member_metadata(expected) == CLASSIC
    consumer_protocol = cr.MemberMetadata(None, None, "c", "/h", ("a",), None, 1000, None)
    assert cr.encode_member_metadata(consumer_protocol) == BODY + b"\x00"


def test_member_records_an_older_kwire_wrote_without_the_presence_byte_still_read():
    legacy = BODY + b"\x01" + b"\x00" + b"\x10" + CLASSIC_STRUCT
    assert cr.decode_member_metadata(legacy) == CLASSIC


def test_epochs_and_assignments_in_kafkas_layout():
    assert cr.encode_group_epoch(7) == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00"
    assert cr.decode_assignment_epoch(cr.encode_assignment_epoch(9)) == 9
    current = cr.CurrentAssignment(5, 4, 1, {T1: frozenset({2, 0})}, {})
    # epochs | state | [(T1, [0, 2])] | [] | no tags
    assert cr.encode_current_assignment(current) == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x04" + b"\x01"
        + b"\x02" + T1.bytes + b"\x03\x00\x00\x00\x00\x00\x00\x00\x02" + b"\x00" + b"\x01" + b"\x00")
    assert cr.decode_current_assignment(cr.encode_current_assignment(current)) == current
