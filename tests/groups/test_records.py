"""Record layout, replay, partition_for, subscription parsing."""
import pytest
from hypothesis import given, strategies as st

from kwire.codecs.errors import ErrorCode as E
from kwire.groups import GroupCoordinator, GroupRecordError, parse_subscription, partition_for
from kwire.groups import records as R

from .harness import SESSION, Harness, subscription


def test_partition_for_matches_java_hashcode():
    def java_hash(s):  # String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, int32 overflow
        h = 0
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + int.from_bytes(data[i:i + 2], "big")) % 2**32
        return h - 2**32 if h >= 2**31 else h
    assert java_hash("") == 0
    assert java_hash("a") == 97
    assert java_hash("hello") == 99162322
    # twice each: computed, then from the cache; ids over 255 characters are never cached
    for gid in ["", "a", "hello", "console-consumer-12345", "grüße", "😀group", "g" * 255, "é" * 300] * 2:
        assert partition_for(gid, 50) == (java_hash(gid) & 0x7FFFFFFF) % 50
    assert GroupCoordinator.partition_for("hello", 50) == 99162322 % 50


def test_parse_subscription():
    assert parse_subscription(subscription("a", "bb", user_data=b"xyz")) == ["a", "bb"]
    with pytest.raises(GroupRecordError):
        parse_subscription(b"\x00\x00\x00\x00\x00\x05\x00")
    with pytest.raises(ValueError):
        parse_subscription(b"")


@given(st.text(), st.text(), st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
       st.integers(-2**31, 2**31 - 1), st.text(), st.integers(-2**63, 2**63 - 1))
def test_offset_record_round_trip(group, topic, partition, offset, epoch, metadata, ts):
    assert R.decode_key(R.offset_key(group, topic, partition)) == R.OffsetKey(group, topic, partition)
    v = R.OffsetValue(offset, epoch, metadata, ts)
    assert R.decode_offset_value(R.encode_offset_value(v)) == v


members = st.builds(R.MemberValue, st.text(), st.none() | st.text(), st.text(), st.text(),
                    st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.binary(), st.binary())


@given(st.text(), st.integers(0, 2**31 - 1), st.none() | st.text(), st.none() | st.text(),
       st.integers(-1, 2**62), st.lists(members, max_size=4).map(tuple))
def test_group_record_round_trip(ptype, gen, proto, leader, ts, ms):
    v = R.GroupValue(ptype, gen, proto, leader, ts, ms)
    assert R.decode_group_value(R.encode_group_value(v)) == v
    assert R.decode_key(R.group_key("g")) == R.GroupKey("g")


@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_group_record_error(data):
    for decode in (R.decode_key, R.decode_offset_value, R.decode_group_value, parse_subscription):
        try:
            decode(data)
        except GroupRecordError:
            pass


def test_truncated_and_trailing_bytes_are_rejected():
    v = R.encode_group_value(R.GroupValue("consumer", 1, "range", "m", 5, (
        R.MemberValue("m", None, "c", "h", 1, 2, b"s", b"a"),)))
    for cut in range(len(v)):
        with pytest.raises(GroupRecordError):
            R.decode_group_value(v[:cut])
    with pytest.raises(GroupRecordError):
        R.decode_group_value(v + b"\x00")


def test_old_value_versions_are_read():
    import struct
    v0 = struct.pack(">hq", 0, 5) + struct.pack(">h", 1) + b"m" + struct.pack(">q", 99)
    assert R.decode_offset_value(v0) == R.OffsetValue(5, -1, "m", 99)
    v1 = struct.pack(">hq", 1, 5) + struct.pack(">h", 0) + struct.pack(">qq", 99, 1234)
    assert R.decode_offset_value(v1) == R.OffsetValue(5, -1, "", 99, 1234)


def _snapshot(c, group_ids):
    return ({g: c.describe_group(g) for g in group_ids}, {g: c.fetch_offsets(g, None) for g in group_ids},
            c.list_groups(None))


def test_replay_reproduces_describe_and_fetch():
    h = Harness()
    gen, ids, leader = h.stable_group(protocols=[("range", subscription("t", "u"))])
    h.commit("g", gen, ids[0], ("t", 0, 10, 3, "a"), ("u", 1, 20))
    h.commit("g", gen, ids[1], ("t", 0, 11, 4, "b"))
    h.commit("simple", -1, "", ("x", 0, 1))
    h.commit("gone", -1, "", ("x", 0, 1))
    h.apply(h.c.delete_groups(["gone"], h.now))
    g2, ids2, _ = h.stable_group("h", n=1)
    h.leave("h", (ids2[0], None, None))          # Empty, generation 2
    groups = ["g", "simple", "gone", "h"]
    other = h.replayed()
    assert _snapshot(other, groups) == _snapshot(h.c, groups)
    # replayed members expire a session after the first clock reading
    assert other.next_deadline_ms() == 0
    other.tick(1_000_000)
    assert other.next_deadline_ms() == 1_000_000 + SESSION
    out = other.tick(1_000_000 + SESSION)
    assert other.describe_group("g").state == "Empty"
    assert other.describe_group("g").members == []
    # a replayed member that heartbeats stays
    other2 = h.replayed()
    assert other2.heartbeat("g", gen, ids[0], None, 1_000_000).result == E.NONE
    assert other2.heartbeat("g", gen, ids[1], None, 1_000_000).result == E.NONE


def test_replay_skips_foreign_and_damaged_records():
    c = GroupCoordinator()
    assert c.replay(b"\x00\x05whatever", b"x") is False
    assert c.replay(R.offset_key("g", "t", 0), b"\x00\x03\x00") is False
    assert c.replay(R.offset_key("g", "t", 0), R.encode_offset_value(R.OffsetValue(1, -1, "", 0))) is True
    assert c.replay(R.offset_key("g", "t", 0), None) is True
    assert c.list_groups(None) == []


def test_group_tombstone_keeps_offsets_as_a_simple_group():
    c = GroupCoordinator()
    c.replay(R.offset_key("g", "t", 0), R.encode_offset_value(R.OffsetValue(1, -1, "", 0)))
    c.replay(R.group_key("g"), R.encode_group_value(R.GroupValue("consumer", 3, None, None, 0, ())))
    assert c.list_groups(None) == [("g", "consumer", "Empty")]
    c.replay(R.group_key("g"), None)
    assert c.list_groups(None) == [("g", "", "Empty")]
    assert c.fetch_offsets("g", None) == [("t", 0, 1, -1, "", E.NONE)]
