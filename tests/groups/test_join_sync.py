"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup transitions and error codes."""
from kwire.codecs.errors import ErrorCode as E

from .harness import REBALANCE, SESSION, Harness


def test_member_id_required_then_join_and_sync_alone():
    h = Harness()
    t = h.join()
    r = h.answers[t]
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id.startswith("c-") and r.generation_id == -1
    assert h.c.describe_group("g").state == "Empty"
    t2 = h.join(member_id=r.member_id)
    j = h.answers[t2]
    assert (j.error, j.generation_id, j.leader_id, j.member_id) == (E.NONE, 1, r.member_id, r.member_id)
    assert j.protocol_type == "consumer" and j.protocol_name == "range"
    assert j.members == [(r.member_id, None, b"m")]
    assert h.c.describe_group("g").state == "CompletingRebalance"
    s = h.sync("g", 1, r.member_id, [(r.member_id, b"ASSIGN")])
    assert h.answers[s].error == E.NONE and h.answers[s].assignment == b"ASSIGN"
    assert h.c.describe_group("g").state == "Stable"
    assert h.heartbeat("g", 1, r.member_id) == E.NONE


def test_old_version_joins_directly():
    h = Harness()
    t = h.join(api_version=3)
    assert h.answers[t].error == E.NONE and h.answers[t].generation_id == 1


def test_three_members_queue_semantics():
    h = Harness(initial_rebalance_delay_ms=3000)
    firsts = [h.join(client_id=f"c{i}") for i in range(3)]
    ids = [h.answers[t].member_id for t in firsts]
    joins = [h.join(member_id=m, now=100 * i) for i, m in enumerate(ids)]
    assert not any(t in h.answers for t in joins), "joins park during the initial delay"
    assert h.c.describe_group("g").state == "PreparingRebalance"
    # delay 3000 from the first join, extended once by 3000 because new members arrived
    assert h.c.next_deadline_ms() == 3000
    h.tick(3000)
    assert not any(t in h.answers for t in joins)
    assert h.c.next_deadline_ms() == 6000
    h.tick(6000)
    results = [h.answers[t] for t in joins]
    assert {r.generation_id for r in results} == {1}
    leader = results[0].leader_id
    assert leader == ids[0]
    for m, r in zip(ids, results):
        assert r.member_id == m and r.leader_id == leader
        assert r.members == ([(i, None, b"m") for i in ids] if m == leader else [])
    # followers park until the leader syncs
    s1 = h.sync("g", 1, ids[1])
    s2 = h.sync("g", 1, ids[2])
    assert s1 not in h.answers and s2 not in h.answers
    assert h.heartbeat("g", 1, ids[1]) == E.NONE  # Kafka: NONE while CompletingRebalance
    s0 = h.sync("g", 1, ids[0], [(ids[0], b"a0"), (ids[1], b"a1")])  # ids[2] missing -> empty
    assert [h.answers[t].assignment for t in (s0, s1, s2)] == [b"a0", b"a1", b""]
    assert all(h.answers[t].error == E.NONE for t in (s0, s1, s2))
    d = h.c.describe_group("g")
    assert d.state == "Stable" and d.protocol_name == "range"
    assert [(m[0], m[5]) for m in d.members] == [(ids[0], b"a0"), (ids[1], b"a1"), (ids[2], b"")]
    # a late sync in Stable returns the stored assignment
    s3 = h.sync("g", 1, ids[1])
    assert h.answers[s3].assignment == b"a1"


def test_sync_errors():
    h = Harness()
    gen, ids, leader = h.stable_group()
    assert h.answers[h.sync("g", gen, "nobody")].error == E.UNKNOWN_MEMBER_ID
    assert h.answers[h.sync("nogroup", gen, ids[0])].error == E.UNKNOWN_MEMBER_ID
    assert h.answers[h.sync("g", gen + 1, ids[0])].error == E.ILLEGAL_GENERATION
    assert h.answers[h.sync("g", gen, ids[0], protocol_type="other")].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answers[h.sync("g", gen, ids[0], protocol_name="roundrobin")].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answers[h.sync("g", gen, ids[0], protocol_type="consumer", protocol_name="range")].error == E.NONE
    assert h.answers[h.sync("", gen, ids[0])].error == E.INVALID_GROUP_ID
    # leader rejoin in Stable triggers a rebalance; a sync meanwhile is REBALANCE_IN_PROGRESS
    t = h.join(member_id=leader)
    assert t not in h.answers
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert h.answers[h.sync("g", gen, ids[1])].error == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", gen, ids[1]) == E.REBALANCE_IN_PROGRESS


def test_heartbeat_errors():
    h = Harness()
    gen, ids, leader = h.stable_group()
    assert h.heartbeat("g", gen, ids[1]) == E.NONE
    assert h.heartbeat("g", gen + 1, ids[1]) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", gen, "ghost") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("other", gen, ids[1]) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", gen, ids[1]) == E.INVALID_GROUP_ID


def test_follower_rejoin_same_metadata_in_stable_is_answered_at_once():
    h = Harness()
    gen, ids, leader = h.stable_group()
    follower = ids[1]
    t = h.join(member_id=follower)
    r = h.answers[t]
    assert (r.error, r.generation_id, r.leader_id, r.members) == (E.NONE, gen, leader, [])
    assert h.c.describe_group("g").state == "Stable"
    # changed metadata forces a rebalance
    t = h.join(member_id=follower, protocols=[("range", b"new")])
    assert t not in h.answers and h.c.describe_group("g").state == "PreparingRebalance"


def test_rebalance_after_new_member_in_stable_and_timeout_evicts_non_rejoiners():
    h = Harness()
    gen, ids, leader = h.stable_group(n=2)
    h.now = 1000
    first = h.join(client_id="new")
    new_id = h.answers[first].member_id
    t_new = h.join(member_id=new_id)
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert t_new not in h.answers
    t_old0 = h.join(member_id=ids[0])   # only one old member rejoins
    # the other keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins
    for now in range(2000, 1000 + REBALANCE, 5000):
        assert h.heartbeat("g", gen, ids[1], now=now) == E.REBALANCE_IN_PROGRESS
        h.tick(now)
    assert t_new not in h.answers
    h.tick(1000 + REBALANCE)
    r_new, r_old = h.answers[t_new], h.answers[t_old0]
    assert r_new.generation_id == gen + 1 == r_old.generation_id
    assert r_old.leader_id == leader == ids[0]
    assert [m[0] for m in r_old.members] == [ids[0], new_id]
    assert h.heartbeat("g", gen + 1, ids[1], now=h.now) == E.UNKNOWN_MEMBER_ID


def test_leader_gone_new_leader_elected_from_joined():
    h = Harness()
    gen, ids, leader = h.stable_group(n=2)
    t = h.join(member_id=ids[1], protocols=[("range", b"x")])  # follower changes metadata
    assert h.leave("g", (leader, None, None)).member_errors == [E.NONE]
    r = h.answers[t]
    assert r.generation_id == gen + 1 and r.leader_id == ids[1] and r.members == [(ids[1], None, b"x")]


def test_session_expiry_triggers_rebalance():
    h = Harness()
    gen, ids, leader = h.stable_group(n=2)
    base = h.now
    assert h.c.next_deadline_ms() == base + SESSION
    h.heartbeat("g", gen, ids[0], now=base + 5000)
    h.tick(base + SESSION)          # ids[1] expired
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert [m[0] for m in h.c.describe_group("g").members] == [ids[0]]
    assert h.heartbeat("g", gen, ids[1], now=h.now) == E.UNKNOWN_MEMBER_ID
    t = h.join(member_id=ids[0])
    r = h.answers[t]
    assert r.generation_id == gen + 1 and r.members == [(ids[0], None, b"m")]


def test_expiry_in_completing_rebalance_answers_parked_syncs():
    h = Harness(initial_rebalance_delay_ms=100)
    a = h.answers[h.join()].member_id
    b = h.answers[h.join()].member_id
    ta, tb = h.join(member_id=a), h.join(member_id=b)
    h.settle([ta, tb])
    gen = h.answers[ta].generation_id
    leader = h.answers[ta].leader_id
    follower = b if leader == a else a
    s = h.sync("g", gen, follower)
    assert s not in h.answers
    # the leader never syncs nor heartbeats: its session expires, the follower's sync gets REBALANCE_IN_PROGRESS
    h.advance_to(h.now + SESSION)
    assert h.answers[s].error == E.REBALANCE_IN_PROGRESS
    assert h.c.describe_group("g").state == "PreparingRebalance"


def test_pending_sync_timeout_removes_members_that_never_sync():
    h = Harness()
    gen, ids, leader = h.stable_group(n=1)
    t = h.join_new(client_id="second", session=REBALANCE * 2, rebalance=REBALANCE)
    assert t not in h.answers
    h.join(member_id=ids[0], session=REBALANCE * 2)
    r = h.answers[t]
    assert r.generation_id == gen + 1
    start = h.now
    h.sync("g", gen + 1, ids[0], [(ids[0], b"x"), (r.member_id, b"y")])
    assert h.c.describe_group("g").state == "Stable"
    h.heartbeat("g", gen + 1, ids[0], now=start + REBALANCE - 1)
    h.tick(start + REBALANCE)   # r.member_id never sent SyncGroup
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert [m[0] for m in h.c.describe_group("g").members] == [ids[0]]


def test_leave_group_batch_and_errors():
    h = Harness()
    gen, ids, leader = h.stable_group(n=3)
    res = h.leave("g", (ids[1], None, "bye"), ("ghost", None, None))
    assert res.error == E.NONE and res.member_errors == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert h.leave("nogroup", ("x", None, None)).member_errors == [E.UNKNOWN_MEMBER_ID]
    assert h.leave("", ("x", None, None)).error == E.INVALID_GROUP_ID
    res = h.leave("g", (ids[0], None, None), (ids[2], None, None))
    assert res.member_errors == [E.NONE, E.NONE]
    d = h.c.describe_group("g")
    assert d.state == "Empty" and d.members == []
    # Kafka bumps the generation even when the group ends empty, and persists the empty group
    assert h.log[-1][2] is not None


def test_leave_pending_member():
    h = Harness()
    t = h.join()
    pending = h.answers[t].member_id
    assert h.leave("g", (pending, None, None)).member_errors == [E.NONE]
    assert h.answers[h.join(member_id=pending)].error == E.UNKNOWN_MEMBER_ID


def test_join_errors():
    h = Harness(max_size=2)
    assert h.answers[h.join(group="")].error == E.INVALID_GROUP_ID
    assert h.answers[h.join(session=100)].error == E.INVALID_SESSION_TIMEOUT
    assert h.answers[h.join(session=2_000_000)].error == E.INVALID_SESSION_TIMEOUT
    assert h.answers[h.join(group="fresh", member_id="made-up")].error == E.UNKNOWN_MEMBER_ID
    assert h.answers[h.join(protocols=[])].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answers[h.join(protocol_type="")].error == E.INCONSISTENT_GROUP_PROTOCOL
    gen, ids, leader = h.stable_group(n=2)
    # the size check comes first, as in Kafka
    assert h.answers[h.join(member_id="made-up")].error == E.GROUP_MAX_SIZE_REACHED
    assert h.answers[h.join()].error == E.GROUP_MAX_SIZE_REACHED
    assert h.answers[h.join(member_id=ids[0], protocol_type="connect")].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answers[h.join(protocols=[("sticky", b"")])].error == E.GROUP_MAX_SIZE_REACHED
    h2 = Harness()
    h2.stable_group(n=1)
    assert h2.answers[h2.join(member_id="made-up")].error == E.UNKNOWN_MEMBER_ID
    assert h2.answers[h2.join(protocols=[("sticky", b"")])].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h2.answers[h2.join(protocol_type="connect")].error == E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_vote():
    h = Harness(initial_rebalance_delay_ms=1000)
    prefs = [[("roundrobin", b"1"), ("range", b"1")],
             [("range", b"2"), ("roundrobin", b"2"), ("sticky", b"2")],
             [("range", b"3"), ("roundrobin", b"3")]]
    ids = [h.answers[h.join(protocols=p)].member_id for p in prefs]
    tickets = [h.join(member_id=m, protocols=p) for m, p in zip(ids, prefs)]
    results = h.settle(tickets)
    assert {r.protocol_name for r in results} == {"range"}  # 2 votes to 1; sticky is not common
    assert results[0].members == [(ids[0], None, b"1"), (ids[1], None, b"2"), (ids[2], None, b"3")]


def test_protocol_vote_tie_goes_to_leader_preference():
    h = Harness(initial_rebalance_delay_ms=1000)
    prefs = [[("b", b""), ("a", b"")], [("a", b""), ("b", b"")]]
    ids = [h.answers[h.join(protocols=p)].member_id for p in prefs]
    results = h.settle([h.join(member_id=m, protocols=p) for m, p in zip(ids, prefs)])
    assert {r.protocol_name for r in results} == {"b"}


def test_initial_delay_capped_by_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3000)
    tickets = [h.join(api_version=3, rebalance=7000, now=i * 1000) for i in range(3)]
    h.tick(3000)   # members arrived: extend by the delay
    assert h.c.next_deadline_ms() == 6000
    tickets += [h.join(api_version=3, rebalance=7000, now=i * 1000) for i in (4, 5)]
    h.tick(6000)   # extend again, but only by what is left of the rebalance timeout
    assert not any(t in h.answers for t in tickets)
    assert h.c.next_deadline_ms() == 7000
    h.tick(7000)
    assert all(h.answers[t].generation_id == 1 for t in tickets)


def test_last_member_leaving_in_preparing_makes_group_empty():
    h = Harness()
    gen, ids, leader = h.stable_group(n=1)
    t = h.join(member_id=ids[0], protocols=[("range", b"z")])
    assert h.answers[t].generation_id == gen + 1  # sole member: completes at once
    res = h.leave("g", (ids[0], None, None))
    assert res.member_errors == [E.NONE]
    assert h.c.describe_group("g").state == "Empty"


def test_parked_join_of_expired_new_member_is_answered():
    h = Harness()
    gen, ids, leader = h.stable_group(n=1)
    t = h.join_new(client_id="slow", rebalance=10 * 60_000)
    h.join(member_id=ids[0], rebalance=10 * 60_000)
    assert h.answers[t].error == E.NONE  # both joined
    # duplicated JoinGroup tickets of one member are all answered
    t1 = h.join(member_id=ids[0], protocols=[("range", b"changed")])
    t2 = h.join(member_id=ids[0], protocols=[("range", b"changed")])
    assert t1 not in h.answers and t2 not in h.answers
    h.advance_to(h.now + 20 * 60_000)
    assert h.answers[t1].error == h.answers[t2].error
    assert h.unanswered() == []
