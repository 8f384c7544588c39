"""Mixed groups in the sans-I/O coordinator: a classic group upgraded by a consumer-protocol
member, its classic member served from the target assignment, the downgrade when the last
consumer-protocol member leaves, the migration policy, and replay of a mixed group."""
from __future__ import annotations

import struct

from kwire.codecs.errors import ErrorCode as E
from kwire.groups import GroupCoordinator, JoinRequest, OffsetCommit, SyncRequest
from kwire.groups.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from kwire.groups.group import GroupState

from .test_consumer_groups import SESSION, T1, Driver, parts

SUB = encode_subscription(["t1"])


class Mixed(Driver):
    ticket = 0

    def join(self, member_id="", gid="g", version=3):
        self.ticket += 1
        out = self.c.join_group(self.ticket, JoinRequest(
            group_id=gid, member_id=member_id, protocol_type="consumer", protocols=(("range", SUB),),
            session_timeout_ms=SESSION, rebalance_timeout_ms=SESSION, client_id="k", api_version=version),
            self.now, self.topics)
        self.log.extend(out.records)
        done = dict(out.completed)
        if self.ticket not in done:             # parked: the classic join phase ends at its deadline
            out = self.c.tick(self.now)
            self.log.extend(out.records)
            done = dict(out.completed)
        return done.get(self.ticket)

    def sync(self, member_id, generation, assignments=(), gid="g"):
        self.ticket += 1
        out = self.c.sync_group(self.ticket, SyncRequest(group_id=gid, generation_id=generation, member_id=member_id,
                                                         assignments=assignments), self.now)
        self.log.extend(out.records)
        return dict(out.completed).get(self.ticket)

    def heartbeat(self, member_id, generation, gid="g"):
        out = self.c.heartbeat(gid, generation, member_id, None, self.now)
        self.log.extend(out.records)
        return out.result

    def classic_group(self):
        """A Stable classic group g of one member, given all of t1."""
        leader = self.join().member_id
        gen = self.c._groups["g"].generation_id
        sync = self.sync(leader, gen, [(leader, encode_assignment(0, {"t1": frozenset(range(4))}))])
        assert sync.error is E.NONE
        return leader, gen


def test_a_consumer_member_upgrades_a_classic_group_and_shares_its_partitions():
    d = Mixed()
    c1, gen = d.classic_group()
    r = d.hb("a")                                                      # the upgrade
    assert r.error is E.NONE and "g" in d.c._consumer_groups
    g = d.group()
    assert g.members[c1].classic is not None and g.members[c1].assigned == {T1: frozenset(range(4))}
    assert parts(r) == []                                              # c1 still holds everything
    assert d.heartbeat(c1, gen) is E.REBALANCE_IN_PROGRESS            # c1 must rejoin
    assert d.c.commit_offsets("g", gen, c1, None, [OffsetCommit("t1", 0, 5)], d.now).result == [E.NONE]
    j = d.join(c1)                                                     # eager: it owns nothing now
    assert j.error is E.NONE and j.generation_id == g.group_epoch and j.leader_id == ""
    s = d.sync(c1, j.generation_id)
    mine = decode_assignment(s.assignment)["t1"]
    assert s.error is E.NONE and len(mine) == 2
    assert d.heartbeat(c1, j.generation_id) is E.NONE
    assert {m.member_id: m.classic for m in d.c.consumer_group_describe("g").members} == {c1: True, "a": False}
    r = d.hb("a", r.member_epoch, [])
    assert set(parts(r)) == set(range(4)) - mine                      # disjoint, together all
    d.holders()
    assert d.c.commit_offsets("g", gen, c1, None, [OffsetCommit("t1", 0, 6)], d.now).result == [
        E.ILLEGAL_GENERATION]
    assert d.c.fetch_offsets("g", [("t1", 0)])[0][2] == 5              # offsets survive the upgrade


def test_the_last_consumer_member_leaving_downgrades_the_group():
    d = Mixed()
    c1, gen = d.classic_group()
    r = d.hb("a")
    j = d.join(c1)
    d.sync(c1, j.generation_id)
    r = d.hb("a", r.member_epoch, [])
    d.hb("a", -1, topics=None)                                         # a leaves
    assert "g" not in d.c._consumer_groups
    classic = d.c._groups["g"]
    assert classic.state is GroupState.PREPARING_REBALANCE and list(classic.members) == [c1]
    assert d.heartbeat(c1, j.generation_id) is E.REBALANCE_IN_PROGRESS
    j2 = d.join(c1)
    assert j2.error is E.NONE and j2.leader_id == c1 and j2.generation_id > j.generation_id
    s = d.sync(c1, j2.generation_id, [(c1, encode_assignment(0, {"t1": frozenset(range(4))}))])
    assert s.error is E.NONE and classic.state is GroupState.STABLE


def test_a_mixed_group_is_replayed_with_its_classic_members():
    d = Mixed()
    c1, _ = d.classic_group()
    r = d.hb("a")
    j = d.join(c1)
    fresh = GroupCoordinator(d.config)
    for record in d.log:
        fresh.replay(record.key, record.value)
    g = fresh._consumer_groups["g"]
    assert g.members[c1].classic == d.group().members[c1].classic
    assert g.members[c1].member_epoch == j.generation_id and g.group_epoch == d.group().group_epoch
    assert "g" not in fresh._groups                                    # the classic record is tombstoned
    # the downgrade is replayed too
    d.hb("a", r.member_epoch, [])
    d.hb("a", -1, topics=None)
    fresh = GroupCoordinator(d.config)
    for record in d.log:
        fresh.replay(record.key, record.value)
    assert "g" not in fresh._consumer_groups and list(fresh._groups["g"].members) == [c1]


def test_migration_policy_and_size_limits():
    d = Mixed(migration_policy="disabled")
    d.classic_group()
    assert d.hb("a").error is E.GROUP_ID_NOT_FOUND and "g" not in d.c._consumer_groups
    d = Mixed(migration_policy="upgrade")
    c1, _ = d.classic_group()
    d.hb("a")
    d.hb("a", -1, topics=None)                                         # no downgrade
    assert list(d.group().members) == [c1]
    d = Mixed(max_size=1)
    d.classic_group()
    d.join()                                                           # a second classic member: 2 > 1
    assert d.hb("a").error is E.GROUP_ID_NOT_FOUND


def test_classic_joins_to_a_consumer_group():
    d = Mixed()
    d.hb("a")
    j = d.join(version=5)                                              # Kafka asks for a member id first
    assert j.error is E.MEMBER_ID_REQUIRED and j.member_id
    j = d.join(j.member_id, version=5)
    assert j.error is E.NONE and d.group().members[j.member_id].classic is not None
    assert d.heartbeat("nobody", 1) is E.UNKNOWN_MEMBER_ID
    assert d.heartbeat("a", 1) is E.UNKNOWN_MEMBER_ID                 # a consumer-protocol member
    assert d.heartbeat(j.member_id, j.generation_id + 1) is E.ILLEGAL_GENERATION
    out = d.c.leave_group("g", [(j.member_id, None, None)], d.now)
    assert out.result.member_errors == [E.NONE] and j.member_id not in d.group().members
    d2 = Mixed(max_size=1)
    d2.hb("a")
    assert d2.join().error is E.GROUP_MAX_SIZE_REACHED


def _sub_v1(topics, owned):
    """A v1 ConsumerProtocolSubscription (owned partitions), as cooperative clients send."""
    s = lambda t: struct.pack(">h", len(t)) + t.encode()  # noqa: E731
    body = struct.pack(">hi", 1, len(topics)) + b"".join(s(t) for t in topics) + struct.pack(">i", -1)
    return body + struct.pack(">i", len(owned)) + b"".join(
        s(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps) for t, ps in owned.items())


def test_a_cooperative_classic_member_revokes_before_others_get_its_partitions():
    d = Mixed()
    c1, gen = d.classic_group()
    r = d.hb("a")

    def join(owned):
        d.ticket += 1
        out = d.c.join_group(d.ticket, JoinRequest(
            group_id="g", member_id=c1, protocol_type="consumer", protocols=(("cooperative-sticky",
                                                                                 _sub_v1(["t1"], owned)),),
            session_timeout_ms=SESSION, rebalance_timeout_ms=SESSION, client_id="k", api_version=5), d.now, d.topics)
        d.log.extend(out.records)
        return dict(out.completed)[d.ticket]
    j = join({"t1": [0, 1, 2, 3]})                     # still owns everything: it must revoke first
    g = d.group()
    assert g.members[c1].state.name == "UNREVOKED_PARTITIONS" and j.generation_id == gen
    s = d.sync(c1, j.generation_id)
    kept = decode_assignment(s.assignment)["t1"]
    assert s.error is E.NONE and len(kept) == 2
    assert d.heartbeat(c1, j.generation_id) is E.REBALANCE_IN_PROGRESS
    d.hb("a", r.member_epoch, [])
    assert g.members["a"].assigned == {}                                # not released yet
    j = join({"t1": sorted(kept)})
    assert g.members[c1].state.name == "STABLE" and j.generation_id == g.group_epoch
    assert set(parts(d.hb("a", r.member_epoch, []))) == set(range(4)) - kept


def test_consumer_protocol_codec_raises_only_group_record_error():
    import random
    from kwire.groups import GroupRecordError
    from kwire.groups.consumer_protocol import decode_subscription
    sub = decode_subscription(_sub_v1(["t1", "t2"], {"t1": [3, 1]}))
    assert sub.version == 1 and sub.topics == ("t1", "t2") and sub.owned == (("t1", (3, 1)),)
    assert decode_assignment(encode_assignment(3, {"t": frozenset({2, 0})})) == {"t": frozenset({0, 2})}
    rng = random.Random(7)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(24)))
        for decode in (decode_subscription, decode_assignment):
            try:
                decode(data)
            except GroupRecordError:
                pass


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced():
    d = Mixed()
    c1, gen = d.classic_group()
    r = d.hb("a")
    assert d.heartbeat(c1, gen) is E.REBALANCE_IN_PROGRESS            # rejoin within the rebalance timeout
    d.now = SESSION * 6 // 10
    assert d.heartbeat(c1, gen) is E.REBALANCE_IN_PROGRESS            # its session is alive, but
    r = d.hb("a", r.member_epoch, [])
    d.tick(SESSION)
    assert list(d.group().members) == ["a"]                           # it did not rejoin in time
    j = d.join()
    assert j.error is E.NONE
    d.now = SESSION + SESSION * 6 // 10
    d.heartbeat(j.member_id, j.generation_id)
    d.hb("a", d.group().members["a"].member_epoch, [])
    d.tick(2 * SESSION)
    assert list(d.group().members) == ["a"]                           # joined but never synced
