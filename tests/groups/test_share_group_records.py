"""Share groups' __consumer_offsets records (Kafka's types 9-15): layouts, what the coordinator
writes when, and that replaying them (whole or compacted) rebuilds the groups."""
from __future__ import annotations

import random
import uuid

import pytest

from kwire.codecs.errors import ErrorCode
from kwire.groups.consumer_records import consumer_key
from kwire.groups.records import GroupRecordError
from kwire.groups.share_coordinator import ShareConfig, ShareCoordinator, Topic
from kwire.groups.share_group_records import (
    SHARE_CURRENT_ASSIGNMENT, SHARE_GROUP_METADATA, SHARE_MEMBER_METADATA, SHARE_PARTITION_METADATA,
    SHARE_TARGET_MEMBER, SHARE_TARGET_METADATA, ShareCurrentAssignment, ShareKey, ShareMemberMetadata,
    decode_share_current_assignment, decode_share_group_epoch, decode_share_key, decode_share_member_metadata,
    decode_share_partition_metadata, decode_share_target_member, encode_share_current_assignment,
    encode_share_member_metadata, is_share_key, share_key,
)
from kwire.groups.share_partition import PartitionLimits

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": Topic("a", T1, 2), "b": Topic("b", T2, 3)}
CONFIG = ShareConfig(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=10, max_groups=10,
                     limits=PartitionLimits(500, 3, 100))


def join(c, member, now=0, group="g", topics=("a",)):
    return c.heartbeat(group, member, 0, "rack", list(topics), TOPICS, "client", "/h", now)


def types(outcome):
    return [(decode_share_key(r.key).record_type, r.value is None) for r in outcome.group_records]


def snapshot(c):
    """What the records must bring back: each group's epoch and state, each member's all."""
    return {g.group_id: (g.epoch, g.state, {m.member_id: (m.epoch, m.previous_epoch, m.subscribed, m.assignment,
                                                          m.client_id, m.client_host, m.rack_id)
                                            for m in g.members.values()})
            for g in c.groups.values()}


# -- layouts -----------------------------------------------------------------------
def test_keys_and_values_round_trip_in_kafkas_layout():
    assert share_key(SHARE_GROUP_METADATA, "g") == b"\x00\x0b\x00\x01g"
    assert share_key(SHARE_MEMBER_METADATA, "g", "m") == b"\x00\x0a\x00\x01g\x00\x01m"
    for t in (9, 11, 12):
        assert decode_share_key(share_key(t, "grp")) == ShareKey(t, "grp")
    for t in (10, 13, 14):
        assert decode_share_key(share_key(t, "grp", "mem")) == ShareKey(t, "grp", "mem")
    assert decode_share_key(consumer_key(3, "g")) is None and not is_share_key(consumer_key(3, "g"))
    assert is_share_key(share_key(15, "g")) and not is_share_key(b"\x00")
    m = ShareMemberMetadata(None, "cid", "/1.2.3.4", ("x", "y"))
    # version 0 | null rack | "cid" | "/1.2.3.4" | ["x", "y"] | no tags
    assert encode_share_member_metadata(m) == b"\x00\x00" + b"\x00" + b"\x04cid" + b"\x09/1.2.3.4" \
        + b"\x03\x02x\x02y" + b"\x00"
    assert decode_share_member_metadata(encode_share_member_metadata(m)) == m
    c = ShareCurrentAssignment(5, 4, 0, {T1: frozenset({0, 1})})
    assert decode_share_current_assignment(encode_share_current_assignment(c)) == c


def test_truncated_or_trailing_bytes_raise_group_record_error_only():
    value = encode_share_current_assignment(ShareCurrentAssignment(5, 4, 0, {T1: frozenset({0, 1})}))
    for cut in range(len(value)):
        with pytest.raises(GroupRecordError):
            decode_share_current_assignment(value[:cut])
    with pytest.raises(GroupRecordError):
        decode_share_current_assignment(value + b"\x00")
    rng = random.Random(7)
    for _ in range(500):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(30)))
        for decode in (decode_share_member_metadata, decode_share_current_assignment, decode_share_key):
            try:
                decode(junk)
            except GroupRecordError:
                pass


# -- what is written when ------------------------------------------------------------
def test_a_join_writes_member_metadata_epoch_and_assignments_in_kafkas_order():
    c = ShareCoordinator(CONFIG)
    out = join(c, "m1")
    assert types(out) == [(SHARE_MEMBER_METADATA, False), (SHARE_PARTITION_METADATA, False),
                          (SHARE_GROUP_METADATA, False), (SHARE_TARGET_MEMBER, False),
                          (SHARE_TARGET_METADATA, False), (SHARE_CURRENT_ASSIGNMENT, False)]
    assert all(r.group_id == "g" for r in out.group_records)
    values = {decode_share_key(r.key).record_type: r.value for r in out.group_records}
    assert decode_share_group_epoch(values[SHARE_GROUP_METADATA]) == c.describe("g").epoch
    assert decode_share_partition_metadata(values[SHARE_PARTITION_METADATA]) == {"a": (T1, 2)}
    assert decode_share_target_member(values[SHARE_TARGET_MEMBER]) == {T1: frozenset({0, 1})}
    current = decode_share_current_assignment(values[SHARE_CURRENT_ASSIGNMENT])
    assert (current.member_epoch, current.assigned) == (out.result.member_epoch, {T1: frozenset({0, 1})})
    # a heartbeat that changes nothing writes nothing
    again = c.heartbeat("g", "m1", out.result.member_epoch, "rack", None, TOPICS, "client", "/h", 10)
    assert again.group_records == []
    # a new subscription: the member's metadata, the topics, the epochs and its assignment
    more = c.heartbeat("g", "m1", out.result.member_epoch, "rack", ["a", "b"], TOPICS, "client", "/h", 20)
    assert [t for t, _ in types(more)] == [10, 9, 11, 13, 12, 14]


def test_leaving_expiring_and_deleting_write_tombstones():
    c = ShareCoordinator(CONFIG)
    join(c, "m1")
    join(c, "m2", topics=("a", "b"))
    left = c.heartbeat("g", "m2", -1, None, None, TOPICS, "client", "/h", 0)
    assert types(left) == [(14, True), (13, True), (10, True), (9, False), (11, False), (12, False)]
    expired = c.tick(CONFIG.session_timeout_ms)
    assert expired.result == [("g", "m1")]
    assert types(expired) == [(14, True), (13, True), (10, True), (9, False), (11, False), (12, False)]
    deleted = c.delete_group("g")
    assert deleted.result == ErrorCode.NONE
    assert types(deleted) == [(12, True), (9, True), (11, True)]


# -- replay ------------------------------------------------------------------------
class Log:
    """The group records a coordinator wrote, in order, as __consumer_offsets would keep them."""

    def __init__(self):
        self.records = []

    def __call__(self, outcome):
        self.records += [(r.key, r.value) for r in outcome.group_records]
        return outcome

    def compacted(self, keep_tombstones=True):
        last = {}
        for i, (key, value) in enumerate(self.records):
            last[key] = (i, value)
        return [(k, v) for k, (i, v) in sorted(last.items(), key=lambda kv: kv[1][0])
                if keep_tombstones or v is not None]


def replayed(records, now_ms=5000):
    c = ShareCoordinator(CONFIG)
    for key, value in records:
        assert c.replay_group_record(key, value, now_ms)
    return c


def test_replay_brings_back_the_group_its_epoch_members_and_assignments():
    c, log = ShareCoordinator(CONFIG), Log()
    m1 = log(join(c, "m1")).result
    log(join(c, "m2", topics=("a", "b")))
    log(join(c, "m3", group="other", topics=("b",)))
    log(c.heartbeat("other", "m3", -1, None, None, TOPICS, "client", "/h", 0))
    again = replayed(log.records, now_ms=5000)
    assert snapshot(again) == snapshot(c)
    assert again.describe("other").state.value == "Empty" and again.describe("g").state.value == "Stable"
    # the member carries on with its id and epoch: nothing new to send, nothing written
    hb = again.heartbeat("g", "m1", m1.member_epoch, "rack", None, TOPICS, "client", "/h", 5100)
    assert (hb.result.error, hb.result.member_epoch, hb.result.assignment, hb.group_records) == (
        ErrorCode.NONE, m1.member_epoch, None, [])
    # sessions restarted at load time: m2, silent, expires a session timeout after the load
    assert again.tick(5000 + CONFIG.session_timeout_ms - 1).result == []
    assert again.tick(5000 + CONFIG.session_timeout_ms).result == [("g", "m2")]


def test_replay_of_a_deleted_group_leaves_nothing_and_compaction_changes_nothing():
    rng = random.Random(3)
    c, log = ShareCoordinator(CONFIG), Log()
    epochs = {}
    now = 0
    for _ in range(300):
        now += rng.randrange(50)
        group, member = rng.choice(["g1", "g2"]), rng.choice(["m1", "m2", "m3"])
        op = rng.random()
        if op < 0.4:
            out = log(join(c, member, now, group, rng.choice([("a",), ("b",), ("a", "b")])))
        elif op < 0.7 and (group, member) in epochs:
            out = log(c.heartbeat(group, member, epochs[(group, member)], None,
                                  rng.choice([None, ["a"], ["b"], ["a", "b"]]), TOPICS, "client", "/h", now))
        elif op < 0.85:
            out = log(c.heartbeat(group, member, -1, None, None, TOPICS, "client", "/h", now))
        elif op < 0.95:
            out = log(c.tick(now + rng.randrange(2000)))
        else:
            out = log(c.delete_group(group))
        if out.result is not None and getattr(out.result, "member_id", None):
            epochs[(group, out.result.member_id)] = out.result.member_epoch
        assert snapshot(replayed(log.records)) == snapshot(c)
    assert snapshot(replayed(log.compacted())) == snapshot(c)
    assert snapshot(replayed(log.compacted(keep_tombstones=False))) == snapshot(c)


def test_an_undecodable_or_foreign_record_is_skipped_not_fatal(caplog):
    c, log = ShareCoordinator(CONFIG), Log()
    log(join(c, "m1"))
    again = ShareCoordinator(CONFIG)
    assert not again.replay_group_record(share_key(SHARE_CURRENT_ASSIGNMENT, "g", "m1"), b"\x00\x00\xff", 0)
    assert not again.replay_group_record(b"\x00\x0a\x00", b"", 0)              # truncated key
    assert not again.replay_group_record(consumer_key(3, "g"), b"\x00\x00\x00\x00\x00\x01\x00", 0)
    for key, value in log.records:
        again.replay_group_record(key, value, 0)
    assert snapshot(again) == snapshot(c)
    assert "skipping undecodable share group record" in caplog.text


def test_random_values_under_every_share_key_never_raise():
    rng = random.Random(11)
    c = ShareCoordinator(CONFIG)
    keys = [share_key(t, "g") for t in (9, 11, 12, 15)] + [share_key(t, "g", "m") for t in (10, 13, 14)]
    for _ in range(2000):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        c.replay_group_record(rng.choice(keys), rng.choice([junk, b"\x00\x00" + junk, None]), 0)
