"""KIP-848 consumer groups in the sans-I/O coordinator: epochs, revocation before reassignment,
leaving, timeouts, static members, regex subscriptions, refusals, records and replay."""
from __future__ import annotations

import uuid

import pytest

from kwire.codecs.errors import ErrorCode as E
from kwire.groups import GroupConfig, GroupCoordinator, JoinRequest, OffsetCommit
from kwire.groups.consumer_group import MemberState
from kwire.groups.results import ConsumerGroupConfig, ConsumerHeartbeat

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
SESSION, INTERVAL, REBALANCE = 10_000, 1_000, 5_000


class Driver:
    def __init__(self, **consumer):
        self.config = GroupConfig(initial_rebalance_delay_ms=0, consumer=ConsumerGroupConfig(
            session_timeout_ms=SESSION, heartbeat_interval_ms=INTERVAL, **consumer))
        self.c = GroupCoordinator(self.config)
        self.topics = {"t1": (T1, 4)}
        self.log = []
        self.now = 0

    def hb(self, member_id="", epoch=0, owned=(), group="g", topics=("t1",), regex=None, **kw):
        if epoch == 0:
            kw.setdefault("rebalance_timeout_ms", REBALANCE)
        owned_tp = None if owned is None else tuple((tid, tuple(ps)) for tid, ps in
                                                    (owned.items() if isinstance(owned, dict) else owned))
        req = ConsumerHeartbeat(group_id=group, member_id=member_id, member_epoch=epoch, owned=owned_tp,
                                subscribed_topic_names=tuple(topics) if topics is not None else None,
                                subscribed_topic_regex=regex, client_id="c", client_host="h", **kw)
        out = self.c.consumer_group_heartbeat(req, self.topics, self.now)
        self.log.extend(out.records)
        return out.result

    def tick(self, now):
        self.now = now
        self.log.extend(self.c.tick(now).records)

    def group(self, gid="g"):
        return self.c._consumer_groups[gid]

    def holders(self, gid="g"):
        """Which member holds each partition (assigned or still revoking): never two."""
        seen = {}
        for m in self.group(gid).members.values():
            for a in (m.assigned, m.pending_revocation):
                for tid, ps in a.items():
                    for p in ps:
                        assert (tid, p) not in seen, f"{(tid, p)} held by {seen[(tid, p)]} and {m.member_id}"
                        seen[(tid, p)] = m.member_id
        return seen


def parts(result, tid=T1):
    return sorted(result.assignment.get(tid, ())) if result.assignment is not None else None


def test_first_member_gets_every_partition_at_epoch_1():
    d = Driver()
    r = d.hb("a")
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, "a", 1, INTERVAL)
    assert parts(r) == [0, 1, 2, 3]
    assert d.group().update_state().value == "Stable"
    r = d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    assert (r.error, r.member_epoch, r.assignment) == (E.NONE, 1, None)   # nothing changed: no assignment


def test_empty_member_id_gets_one():
    r = Driver().hb("")
    assert r.error is E.NONE and len(r.member_id) == 36


def test_second_member_waits_for_revocation_before_taking_partitions():
    d = Driver()
    d.hb("a")
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    rb = d.hb("b")
    assert rb.member_epoch == 2 and parts(rb) == []          # its partitions are still a's
    assert d.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    d.holders()
    ra = d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    assert ra.member_epoch == 1 and parts(ra) == [0, 1]       # revoke 2, 3; same epoch until done
    assert d.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    rb = d.hb("b", 2, {}, topics=None)
    assert parts(rb) is None and d.group().members["b"].assigned == {}   # a still owns them
    d.holders()
    ra = d.hb("a", 1, {T1: [0, 1]}, topics=None)               # revoked
    assert ra.member_epoch == 2
    rb = d.hb("b", 2, {}, topics=None)
    assert parts(rb) == [2, 3] and rb.member_epoch == 2
    d.holders()
    assert d.group().update_state().value == "Stable"


def test_leave_gives_partitions_back():
    d = Driver()
    d.hb("a")
    d.hb("b")
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    d.hb("a", 1, {T1: [0, 1]}, topics=None)
    d.hb("b", 2, {}, topics=None)
    r = d.hb("b", -1, topics=None)
    assert (r.error, r.member_epoch) == (E.NONE, -1)
    assert d.group().group_epoch == 3
    r = d.hb("a", 2, {T1: [0, 1]}, topics=None)
    assert (r.member_epoch, parts(r)) == (3, [0, 1, 2, 3])


def test_session_expiry_fences_the_member():
    d = Driver()
    d.hb("a")
    d.hb("b")
    assert d.c.next_deadline_ms() == SESSION
    d.now = SESSION - 1
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    d.tick(SESSION)                                            # b expired, a did not
    assert set(d.group().members) == {"a"}
    r = d.hb("b", 2, {}, topics=None)
    assert r.error is E.UNKNOWN_MEMBER_ID


def test_member_that_does_not_revoke_in_time_is_fenced():
    d = Driver()
    d.hb("a")
    d.hb("b")
    d.now = 100
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)               # asked to revoke 2, 3
    d.now = 100 + REBALANCE - 1
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)               # still owns them
    d.hb("b", 2, {}, topics=None)
    d.tick(100 + REBALANCE)
    assert set(d.group().members) == {"b"}
    assert d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None).error is E.UNKNOWN_MEMBER_ID
    r = d.hb("b", 2, {}, topics=None)
    assert (r.member_epoch, parts(r)) == (3, [0, 1, 2, 3])


def test_epoch_errors():
    d = Driver()
    d.hb("a")
    assert d.hb("a", 5, {}, topics=None).error is E.FENCED_MEMBER_EPOCH
    assert d.hb("zz", 1, {}, topics=None).error is E.UNKNOWN_MEMBER_ID
    assert d.hb("a", -3, topics=None).error is E.INVALID_REQUEST
    assert d.hb("b", server_assignor="sticky").error is E.UNSUPPORTED_ASSIGNOR
    assert d.hb("b", rebalance_timeout_ms=-1).error is E.INVALID_REQUEST
    assert d.hb("a", 1, {}, group="nope", topics=None).error is E.GROUP_ID_NOT_FOUND


def test_previous_epoch_with_a_subset_is_accepted():
    d = Driver()
    d.hb("a")
    d.hb("b")
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    d.hb("a", 1, {T1: [0, 1]}, topics=None)                     # now epoch 2, answer "lost"
    assert d.hb("a", 1, {T1: [0, 1]}, topics=None).error is E.NONE
    assert d.hb("a", 1, {T1: [0, 1, 2]}, topics=None).error is E.FENCED_MEMBER_EPOCH


def test_range_and_uniform_assignors_chosen_by_the_member():
    d = Driver()
    d.topics = {"t1": (T1, 3), "t2": (T2, 3)}
    ra = d.hb("a", topics=("t1", "t2"), server_assignor="range")
    d.hb("a", 1, {T1: [0, 1, 2], T2: [0, 1, 2]}, topics=None)
    d.hb("b", topics=("t1", "t2"), server_assignor="range")
    target = d.group().target
    assert target["a"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}     # co-partitioned ranges
    assert target["b"] == {T1: frozenset({2}), T2: frozenset({2})}
    assert ra.error is E.NONE


def test_max_size():
    d = Driver(max_size=1)
    d.hb("a")
    assert d.hb("b").error is E.GROUP_MAX_SIZE_REACHED


def test_static_member_temporary_leave_and_rejoin_keeps_the_assignment():
    d = Driver()
    d.hb("a", instance_id="i1")
    d.hb("b", instance_id="i2")
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None, instance_id="i1")
    d.hb("a", 1, {T1: [0, 1]}, topics=None, instance_id="i1")
    d.hb("b", 2, {}, topics=None, instance_id="i2")
    epoch = d.group().group_epoch
    assert d.hb("c", instance_id="i1").error is E.UNRELEASED_INSTANCE_ID
    r = d.hb("a", -2, topics=None, instance_id="i1")
    assert (r.error, r.member_epoch) == (E.NONE, -2)
    assert d.group().members["a"].assigned == {T1: frozenset({0, 1})}         # kept
    r = d.hb("a2", instance_id="i1")                                          # the restart
    assert (r.error, parts(r)) == (E.NONE, [0, 1])
    assert d.group().group_epoch == epoch and "a" not in d.group().members    # no rebalance
    assert d.hb("a", 2, {}, topics=None, instance_id="i1").error is E.FENCED_INSTANCE_ID


def test_static_member_that_left_is_removed_after_its_session():
    d = Driver()
    d.hb("a", instance_id="i1")
    d.hb("a", -2, topics=None, instance_id="i1")
    d.tick(SESSION)
    assert d.group().members == {}


def test_regex_subscription_picks_up_a_new_topic():
    d = Driver()
    r = d.hb("a", topics=None, regex="t.*")
    assert parts(r) == [0, 1, 2, 3]
    d.topics["t2"] = (T2, 2)
    d.topics["other"] = (uuid.UUID(int=3), 1)
    r = d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)
    assert r.member_epoch == 2 and parts(r, T2) == [0, 1] and d.group().group_epoch == 2
    d.topics["t2"] = (T2, 3)                                                   # partitions added
    r = d.hb("a", 2, {T1: [0, 1, 2, 3], T2: [0, 1]}, topics=None)
    assert r.member_epoch == 3 and parts(r, T2) == [0, 1, 2]
    assert d.hb("b", topics=None, regex="(").error is E.INVALID_REQUEST


def test_classic_and_consumer_group_ids_refuse_each_other():
    # Mixed groups (tests/groups/test_mixed_groups.py) take only the embedded consumer protocol.
    d = Driver()
    d.hb("a")
    out = d.c.join_group(1, JoinRequest(group_id="g", protocol_type="connect", protocols=(("range", b""),),
                                        session_timeout_ms=10000, rebalance_timeout_ms=10000, api_version=5), 0)
    assert out.completed[0][1].error is E.INCONSISTENT_GROUP_PROTOCOL
    d.c.join_group(2, JoinRequest(group_id="classic", protocol_type="consumer", protocols=(("range", b""),),
                                  session_timeout_ms=10000, rebalance_timeout_ms=10000, api_version=3), 0)
    assert d.hb("x", group="classic").error is E.GROUP_ID_NOT_FOUND


def test_empty_groups_convert_between_protocols():
    d = Driver()
    d.hb("a")
    d.hb("a", -1, topics=None)
    out = d.c.join_group(1, JoinRequest(group_id="g", protocol_type="consumer", protocols=(("range", b""),),
                                        session_timeout_ms=10000, rebalance_timeout_ms=10000, api_version=3), 0)
    assert out.completed[0][1].error is E.NONE and "g" not in d.c._consumer_groups


def test_offset_commit_uses_the_member_epoch():
    d = Driver()
    d.hb("a")
    commit = [OffsetCommit("t1", 0, 42)]
    assert d.c.commit_offsets("g", 1, "a", None, commit, 0).result == [E.NONE]
    assert d.c.commit_offsets("g", 0, "a", None, commit, 0).result == [E.STALE_MEMBER_EPOCH]
    assert d.c.commit_offsets("g", 2, "a", None, commit, 0).result == [E.FENCED_MEMBER_EPOCH]
    assert d.c.commit_offsets("g", 1, "x", None, commit, 0).result == [E.UNKNOWN_MEMBER_ID]
    assert d.c.fetch_offsets("g", [("t1", 0)])[0][2] == 42
    assert d.c.list_groups(None) == [] and d.c.list_consumer_groups(None) == [("g", "Stable")]


def test_a_consumer_protocol_member_must_commit_with_offset_commit_v9_or_later():
    """Kafka's ConsumerGroup.validateOffsetCommit: below v9 (no member epoch field of its own)
    a KIP-848 member is refused UNSUPPORTED_VERSION; an unknown member is still UNKNOWN_MEMBER_ID,
    and a commit of an empty group with epoch -1 (admin, assign mode) any version."""
    d = Driver()
    d.hb("a")
    commit = [OffsetCommit("t1", 0, 42)]
    assert d.c.commit_offsets("g", 1, "a", None, commit, 0, api_version=8).result == [E.UNSUPPORTED_VERSION]
    assert d.c.commit_offsets("g", 1, "x", None, commit, 0, api_version=8).result == [E.UNKNOWN_MEMBER_ID]
    assert d.c.commit_offsets("g", 1, "a", None, commit, 0, api_version=9).result == [E.NONE]
    d.hb("a", -1, topics=None)                  # leaves: the group is empty
    assert d.c.commit_offsets("g", -1, "", None, [OffsetCommit("t1", 0, 7)], 0,
                              api_version=2).result == [E.NONE]
    assert d.c.fetch_offsets("g", [("t1", 0)])[0][2] == 7


def test_delete_only_when_empty_and_tombstones():
    d = Driver()
    d.hb("a")
    d.c.commit_offsets("g", 1, "a", None, [OffsetCommit("t1", 0, 1)], 0)
    assert d.c.delete_groups(["g"], 0).result == [E.NON_EMPTY_GROUP]
    d.hb("a", -1, topics=None)
    out = d.c.delete_groups(["g"], 0)
    assert out.result == [E.NONE]
    assert sum(1 for r in out.records if r.value is None) == 4        # 6, 4, 3 and the offset
    assert d.c.consumer_group_describe("g").error is E.GROUP_ID_NOT_FOUND


def test_replay_rebuilds_the_group():
    d = Driver()
    d.hb("a", instance_id="i1")
    d.hb("b")
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None, instance_id="i1")
    before = d.group()
    fresh = GroupCoordinator(d.config)
    for record in d.log:
        assert fresh.replay(record.key, record.value)
    after = fresh._consumer_groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.target, after.subscription_metadata) == (
        before.group_epoch, before.assignment_epoch, before.target, before.subscription_metadata)
    for mid, m in before.members.items():
        n = after.members[mid]
        assert (n.member_epoch, n.previous_member_epoch, n.state, n.assigned, n.pending_revocation,
                n.instance_id, n.subscribed_topic_names, n.rebalance_timeout_ms) == (
            m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation,
            m.instance_id, m.subscribed_topic_names, m.rebalance_timeout_ms)
    assert fresh.next_deadline_ms() == 0                      # sessions start at the next clock
    out = fresh.tick(1000)
    assert fresh.next_deadline_ms() == 1000 + SESSION and not out.records


@pytest.mark.parametrize("members", [1, 2, 3, 5, 7])
def test_uniform_is_balanced_and_sticky(members):
    from kwire.groups.assignors import MemberSubscription, uniform
    topics = {"t1": (T1, 10), "t2": (T2, 7)}
    subs = {f"m{i}": MemberSubscription(frozenset(topics), {}) for i in range(members)}
    first = uniform(subs, topics)
    counts = [sum(len(ps) for ps in a.values()) for a in first.values()]
    assert sum(counts) == 17 and max(counts) - min(counts) <= 1
    subs = {m: MemberSubscription(frozenset(topics), first[m]) for m in subs}
    subs["new"] = MemberSubscription(frozenset(topics), {})
    second = uniform(subs, topics)
    counts = [sum(len(ps) for ps in a.values()) for a in second.values()]
    assert max(counts) - min(counts) <= 1
    moved = sum(len(ps - second[m].get(tid, frozenset())) for m, a in first.items() for tid, ps in a.items())
    assert moved == sum(len(ps) for ps in second["new"].values())     # only what the new member takes


def test_records_round_trip_and_reject_bad_bytes():
    from kwire.groups import GroupRecordError
    from kwire.groups import consumer_records as cr
    m = cr.MemberMetadata("i", None, "client", "host", ("a", "b"), "t.*", 300, "range")
    assert cr.decode_member_metadata(cr.encode_member_metadata(m)) == m
    c = cr.CurrentAssignment(5, 4, 1, {T1: frozenset({0, 2})}, {T2: frozenset({1})})
    assert cr.decode_current_assignment(cr.encode_current_assignment(c)) == c
    assert cr.decode_partition_metadata(cr.encode_partition_metadata({"t": (T1, 3)})) == {"t": (T1, 3)}
    assert cr.decode_epoch(cr.encode_group_epoch(7)) == 7
    assert cr.decode_consumer_key(cr.consumer_key(5, "g", "m")) == cr.ConsumerKey(5, "g", "m")
    assert cr.decode_consumer_key(cr.consumer_key(3, "g")) == cr.ConsumerKey(3, "g")
    # Kafka's tag 0: classic member metadata; unknown tags are skipped
    classic = cr.MemberMetadata("i", None, "client", "host", ("a",), None, 300, None,
                                cr.ClassicMetadata(10000, (("range", b"\x00\x01"), ("roundrobin", b""))))
    assert cr.decode_member_metadata(cr.encode_member_metadata(classic)) == classic
    encoded = cr.encode_member_metadata(m)
    tagged = encoded[:-1] + b"\x01\x07\x03abc"
    assert cr.decode_member_metadata(tagged) == m
    for bad in (encoded[:-2], encoded + b"\x00"):
        with pytest.raises(GroupRecordError):
            cr.decode_member_metadata(bad)


def test_offset_fetch_checks_the_member_epoch():
    d = Driver()
    d.hb("a")
    assert d.c.validate_offset_fetch("g", None, -1) is None                 # admin client
    assert d.c.validate_offset_fetch("g", "a", 1) is None
    assert d.c.validate_offset_fetch("g", "a", 0) is E.STALE_MEMBER_EPOCH
    assert d.c.validate_offset_fetch("g", "zz", 1) is E.UNKNOWN_MEMBER_ID
    assert d.c.validate_offset_fetch("classic-or-none", "a", 7) is None


def test_offsets_of_subscribed_topics_never_expire_and_cannot_be_deleted():
    d = Driver()
    d.config.offsets_retention_ms = 1000
    d.hb("a")
    d.c.commit_offsets("g", 1, "a", None, [OffsetCommit("t1", 0, 5), OffsetCommit("gone", 0, 7)], 0)
    d.hb("a", 1, {T1: [0, 1, 2, 3]}, topics=None)        # keeps the session alive
    assert d.c.next_deadline_ms() == 1000
    d.tick(1000)
    assert d.c.fetch_offsets("g", None) == [("t1", 0, 5, -1, "", E.NONE)]
    assert d.c.delete_offsets("g", [("t1", 0)], 1000).result == (E.NONE, [E.GROUP_SUBSCRIBED_TO_TOPIC])


def test_an_empty_group_without_offsets_is_removed_at_the_next_cleanup():
    d = Driver()
    interval = d.config.offsets_retention_check_interval_ms
    d.hb("a")
    d.hb("a", -1, topics=None)
    assert d.c.next_deadline_ms() == interval
    d.tick(interval)
    assert "g" not in d.c._consumer_groups
    assert [r.value for r in d.log[-3:]] == [None, None, None]           # types 6, 4, 3 tombstoned
    kept = Driver()
    kept.hb("a")
    kept.c.commit_offsets("g", 1, "a", None, [OffsetCommit("t1", 0, 1)], 0)
    kept.hb("a", -1, topics=None)
    kept.tick(interval)
    assert "g" in kept.c._consumer_groups                                # it has offsets


def test_a_replayed_empty_group_is_removed_one_interval_after_start():
    d = Driver()
    d.hb("a")
    d.hb("a", -1, topics=None)
    fresh = GroupCoordinator(d.config)
    for record in d.log:
        fresh.replay(record.key, record.value)
    assert fresh.next_deadline_ms() == 0
    fresh.tick(500)
    assert fresh.next_deadline_ms() == 500 + d.config.offsets_retention_check_interval_ms
