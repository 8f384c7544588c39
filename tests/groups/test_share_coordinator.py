"""ShareCoordinator: membership by heartbeat, share-partitions, persistence records, replay."""
from __future__ import annotations

import base64
import uuid

from kwire.codecs.errors import ErrorCode
from kwire.groups.share_coordinator import GROUP_TRANSITIONS, ShareConfig, ShareCoordinator, Topic, new_member_id
from kwire.groups.share_partition import AckType, PartitionLimits
from kwire.groups.share_records import decode_key

TID = uuid.uuid4()
TOPICS = {"t": Topic("t", TID, 2)}
CONFIG = ShareConfig(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=2, max_groups=1,
                     limits=PartitionLimits(500, 3, 100))


def join(c, member, now=0, group="g", topics=("t",)):
    return c.heartbeat(group, member, 0, None, list(topics), TOPICS, "client", "/h", now).result


def test_every_member_gets_every_partition_and_the_group_is_stable():
    c = ShareCoordinator(CONFIG)
    a, b = join(c, "a"), join(c, "b")
    assert a.error == b.error == ErrorCode.NONE
    assert a.assignment == b.assignment == ((TID, "t", (0, 1)),)
    assert c.describe("g").state.value == "Stable" and b.heartbeat_interval_ms == 100
    again = c.heartbeat("g", "a", a.member_epoch, None, None, TOPICS, "client", "/h", 50).result
    assert again.error == ErrorCode.NONE and again.assignment is None     # unchanged: not sent again


def test_a_member_joining_without_an_id_gets_one_in_kafkas_uuid_form():
    """v0 (the Java 4.0 client) lets the coordinator choose, then parses it with Uuid.fromString;
    v1 clients (librdkafka) bring their own, which is kept."""
    c = ShareCoordinator(CONFIG)
    named = join(c, "")
    assert len(named.member_id) == 22 and len(base64.urlsafe_b64decode(named.member_id + "==")) == 16
    assert c.is_member("g", named.member_id) and join(c, "own-id").member_id == "own-id"
    assert not any(new_member_id().startswith("-") for _ in range(2000))


def test_limits_and_unknown_members():
    c = ShareCoordinator(CONFIG)
    join(c, "a"), join(c, "b")
    assert join(c, "c").error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert join(c, "x", group="other").error == ErrorCode.GROUP_MAX_SIZE_REACHED       # max.groups 1
    assert c.heartbeat("g", "nobody", 3, None, None, TOPICS, "c", "/h", 0).result.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "a", 99, None, None, TOPICS, "c", "/h", 0).result.error == ErrorCode.FENCED_MEMBER_EPOCH
    # a group unknown here (kwire does not persist membership: after a restart) is a rejoin
    assert c.heartbeat("gone", "a", 4, None, None, TOPICS, "c", "/h", 0).result.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_the_member_and_releases_its_records():
    c = ShareCoordinator(CONFIG)
    join(c, "a", now=0)
    c.set_offset_reset("g", "earliest")
    sp = c.share_partition("g", TID, 0, 0, 10).result
    assert c.acquire("g", "a", TID, 0, [(0, 9)], 500, 0) == [(0, 9, 1)]
    outcome = c.tick(1000)
    assert outcome.result == [("g", "a")]
    assert not c.is_member("g", "a") and c.describe("g").state.value == "Empty"
    assert outcome.records and sp.fetch_offset(10) == 0


def test_acknowledgements_are_records_and_replay_restores_them():
    c = ShareCoordinator(CONFIG)
    join(c, "a")
    c.set_offset_reset("g", "earliest")
    first = c.share_partition("g", TID, 0, 0, 10)
    assert len(first.records) == 1                         # the initial state is written
    c.acquire("g", "a", TID, 0, [(0, 9)], 500, 0)
    out = c.acknowledge("g", "a", TID, 0, [(0, 4, [AckType.ACCEPT]), (5, 5, [AckType.REJECT])])
    assert out.result == ErrorCode.NONE
    bad = c.acknowledge("g", "a", TID, 0, [(0, 0, [AckType.ACCEPT])])
    assert bad.result == ErrorCode.INVALID_RECORD_STATE
    replayed = ShareCoordinator(CONFIG)
    for key, value in first.records + out.records:
        replayed.replay(key, value)
    sp = replayed.partitions[("g", TID, 0)]
    assert sp.spso == 6 and sp.fetch_offset(10) == 6        # 6-9 were acquired only: delivered again
    # the group comes from its own records (__consumer_offsets), not from its share-partitions'
    assert replayed.list_groups() == []


def test_offset_reset_earliest_starts_at_the_log_start_and_latest_at_the_end():
    c = ShareCoordinator(ShareConfig(max_groups=5))
    assert c.share_partition("late", TID, 0, 3, 10).result.spso == 10
    c.set_offset_reset("early", "earliest")
    assert c.share_partition("early", TID, 0, 3, 10).result.spso == 3


def test_delete_only_an_empty_group_with_tombstones_for_its_state():
    c = ShareCoordinator(CONFIG)
    join(c, "a")
    c.share_partition("g", TID, 0, 0, 0)
    assert c.delete_group("g").result == ErrorCode.NON_EMPTY_GROUP
    c.leave("g", "a")
    out = c.delete_group("g")
    assert out.result == ErrorCode.NONE and [v for _, v in out.records] == [None]
    assert c.describe("g") is None and c.delete_group("g").result == ErrorCode.GROUP_ID_NOT_FOUND


def test_group_transitions_table():
    assert {s.value: {t.value for t in ts} for s, ts in GROUP_TRANSITIONS.items()} == {
        "Empty": {"Stable", "Dead"}, "Stable": {"Empty"}, "Dead": set()}


def test_a_member_leaving_with_its_share_session_open_keeps_its_records_for_the_close():
    c = ShareCoordinator(CONFIG)
    join(c, "a"), join(c, "b")
    c.set_offset_reset("g", "earliest")
    sp = c.share_partition("g", TID, 0, 0, 4).result
    c.acquire("g", "a", TID, 0, [(0, 3)], 500, 0)
    assert c.heartbeat("g", "a", -1, None, None, TOPICS, "c", "/h", 10, release=False).result.member_epoch == -1
    assert sp.fetch_offset(4) is None                      # still held: the close's acks settle them
    assert c.acknowledge("g", "a", TID, 0, [(0, 3, [AckType.ACCEPT])]).result == ErrorCode.NONE
    assert sp.spso == 4


def test_a_group_lock_duration_applies_to_the_acquisitions_after_it():
    c = ShareCoordinator(CONFIG)
    join(c, "a")
    c.set_offset_reset("g", "earliest")
    sp = c.share_partition("g", TID, 0, 0, 4).result
    c.acquire("g", "a", TID, 0, [(0, 1)], 500, 0)
    c.set_lock_duration("g", 5000)
    assert c.limits("g").record_lock_duration_ms == 5000 and c.limits("other").record_lock_duration_ms == 500
    c.acquire("g", "a", TID, 0, [(2, 3)], 500, 0)
    assert [sp.records[o].lock_deadline_ms for o in range(4)] == [500, 500, 5000, 5000]
    c.set_lock_duration("g", None)
    assert sp.limits.record_lock_duration_ms == 500


def test_a_new_leader_loads_the_persisted_state_and_an_old_one_unloads_it():
    old = ShareCoordinator(CONFIG)
    join(old, "a")
    old.set_offset_reset("g", "earliest")
    old.share_partition("g", TID, 0, 0, 10)
    old.acquire("g", "a", TID, 0, [(0, 9)], 500, 0)
    old.acknowledge("g", "a", TID, 0, [(0, 3, [AckType.ACCEPT])])
    persisted = old.partitions[("g", TID, 0)].state()
    old.unload_partition(("g", TID, 0))                     # leadership moved away
    assert ("g", TID, 0) not in old.partitions
    old.unload_group("g")
    assert old.describe("g") is None
    new = ShareCoordinator(CONFIG)
    new.load_partition(("g", TID, 0), persisted)
    assert new.partitions[("g", TID, 0)].fetch_offset(10) == 4   # 4-9 acquired only: available again
    assert new.list_groups() == [], "loading a share-partition does not make a group"


def test_delete_in_a_cluster_tombstones_every_partition_the_members_were_assigned():
    c = ShareCoordinator(CONFIG)
    join(c, "a")                                  # assigned t-0 and t-1; only t-0 led here
    c.share_partition("g", TID, 0, 0, 0)
    c.leave("g", "a")
    out = c.delete_group("g", assigned=True)
    keys = [decode_key(k) for k, v in out.records if v is None]
    assert sorted(k.partition for k in keys) == [0, 1] and len(out.records) == 2
