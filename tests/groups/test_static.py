"""Static membership (KIP-345): instant member ids, rejoin without rebalance, fencing."""
from kwire.codecs.errors import ErrorCode as E

from .harness import Harness


def static_group(h, n=2, **kw):
    """Static members i0..i{n-1}, Stable; returns (generation, ids, leader)."""
    ids = []
    tickets = []
    for i in range(n):
        t = h.join(instance=f"i{i}", **kw)
        tickets.append(t)
    results = h.settle(tickets)
    ids = [r.member_id for r in results]
    gen, leader = results[0].generation_id, results[0].leader_id
    assert all(r.generation_id == gen for r in results)
    for m in ids:
        if m != leader:
            h.sync("g", gen, m, instance=f"i{ids.index(m)}")
    h.sync("g", gen, leader, [(m, f"A{i}".encode()) for i, m in enumerate(ids)], instance=f"i{ids.index(leader)}")
    assert h.c.describe_group("g").state == "Stable"
    return gen, ids, leader


def test_static_member_gets_id_at_once():
    h = Harness()
    t = h.join(instance="inst")
    r = h.answers[t]
    assert r.error == E.NONE and r.member_id.startswith("inst-") and r.generation_id == 1
    # not Stable yet: members are listed without metadata or assignment (Kafka's summaryNoMetadata)
    assert h.c.describe_group("g").members == [(r.member_id, "inst", "c", "/127.0.0.1", b"", b"")]
    assert h.c.describe_group("g").protocol_name == ""
    h.sync("g", 1, r.member_id, [(r.member_id, b"x")], instance="inst")
    assert h.c.describe_group("g").members[0][:2] == (r.member_id, "inst")


def test_static_rejoin_in_stable_replaces_member_without_rebalance():
    h = Harness(initial_rebalance_delay_ms=100)
    gen, ids, leader = static_group(h)
    follower = [m for m in ids if m != leader][0]
    fi = f"i{ids.index(follower)}"
    records_before = len(h.log)
    t = h.join(instance=fi)
    r = h.answers[t]
    assert r.error == E.NONE and r.generation_id == gen and r.member_id != follower
    assert r.leader_id == leader and r.members == [] and not r.skip_assignment
    assert h.c.describe_group("g").state == "Stable"
    assert len(h.log) == records_before + 1   # the new member id is persisted
    new_id = r.member_id
    # the new id gets the old assignment
    s = h.sync("g", gen, new_id, instance=fi)
    assert h.answers[s].assignment == f"A{ids.index(follower)}".encode()
    # the old id is fenced everywhere
    assert h.heartbeat("g", gen, follower, instance=fi) == E.FENCED_INSTANCE_ID
    assert h.answers[h.sync("g", gen, follower, instance=fi)].error == E.FENCED_INSTANCE_ID
    assert h.commit("g", gen, follower, ("t", 0, 1), instance=fi) == [E.FENCED_INSTANCE_ID]
    assert h.answers[h.join(member_id=follower, instance=fi)].error == E.FENCED_INSTANCE_ID
    assert h.leave("g", (follower, fi, None)).member_errors == [E.FENCED_INSTANCE_ID]
    assert h.heartbeat("g", gen, new_id, instance=fi) == E.NONE
    # unknown instance id
    assert h.heartbeat("g", gen, new_id, instance="nope") == E.UNKNOWN_MEMBER_ID


def test_static_leader_rejoin_old_and_new_versions():
    h = Harness(initial_rebalance_delay_ms=100)
    gen, ids, leader = static_group(h)
    li = f"i{ids.index(leader)}"
    r = h.answers[h.join(instance=li, api_version=5)]
    # pre-v9: the previous leader id is named so the member does not run an assignment
    assert (r.error, r.generation_id, r.leader_id, r.skip_assignment, r.members) == (E.NONE, gen, leader, False, [])
    new_leader = r.member_id
    r = h.answers[h.join(instance=li, api_version=9)]
    assert r.leader_id == r.member_id and r.skip_assignment
    assert sorted(m[0] for m in r.members) == sorted([r.member_id, ids[1 - ids.index(leader)]])
    assert h.c.describe_group("g").state == "Stable"
    assert new_leader != r.member_id


def test_static_rejoin_changing_selected_protocol_rebalances():
    h = Harness(initial_rebalance_delay_ms=100)
    gen, ids, leader = static_group(h, n=1, protocols=[("range", b""), ("roundrobin", b"")])
    t = h.join(instance="i0", protocols=[("roundrobin", b"")])
    r = h.answers[t]
    assert r.generation_id == gen + 1 and r.protocol_name == "roundrobin"


def test_static_member_not_rejoining_is_kept_until_its_session_expires():
    h = Harness(initial_rebalance_delay_ms=100)
    gen, ids, leader = static_group(h, n=2)
    other = [m for m in ids if m != leader][0]
    t = h.join(member_id=leader, instance=f"i{ids.index(leader)}")   # leader rejoin: rebalance
    h.heartbeat("g", gen, other, instance=f"i{ids.index(other)}", now=h.now)
    start = h.now
    # the rebalance timeout passes before the other's session (30 s vs 10 s here: heartbeat keeps it)
    for now in range(start + 5000, start + 30_001, 5000):
        h.heartbeat("g", gen, other, instance=f"i{ids.index(other)}", now=now)
        h.tick(now)
    r = h.answers[t]
    assert r.generation_id == gen + 1
    assert sorted(m[0] for m in r.members) == sorted(ids)   # the static member is still in the group


def test_leave_by_instance_id():
    h = Harness(initial_rebalance_delay_ms=100)
    gen, ids, leader = static_group(h, n=2)
    res = h.leave("g", (None, "i0", None), (None, "zz", None))
    assert res.member_errors == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert [m[0] for m in h.c.describe_group("g").members] == [ids[1]]


def test_static_rejoin_during_completing_rebalance_fences_parked_sync_and_rebalances():
    h = Harness(initial_rebalance_delay_ms=100)
    ta, tb = h.join(instance="a"), h.join(instance="b")
    ra, rb = h.settle([ta, tb])
    follower = rb if ra.leader_id == ra.member_id else ra
    fi = "b" if follower is rb else "a"
    s = h.sync("g", follower.generation_id, follower.member_id, instance=fi)
    t = h.join(instance=fi)
    assert h.answers[s].error == E.FENCED_INSTANCE_ID
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert t not in h.answers
