"""OffsetCommit / OffsetFetch, deletes, expiry."""
from kwire.codecs.errors import ErrorCode as E
from kwire.groups import OffsetCommit

from .harness import SESSION, Harness, subscription

DAY = 24 * 3600 * 1000


def test_simple_group_commit_and_fetch():
    h = Harness()
    assert h.commit("simple", -1, "", ("t", 0, 42, 7, "meta"), ("t", 1, 5)) == [E.NONE, E.NONE]
    assert h.c.fetch_offsets("simple", None) == [("t", 0, 42, 7, "meta", E.NONE), ("t", 1, 5, -1, "", E.NONE)]
    assert h.c.fetch_offsets("simple", [("t", 1), ("u", 0)]) == [("t", 1, 5, -1, "", E.NONE),
                                                                 ("u", 0, -1, -1, "", E.NONE)]
    assert h.c.fetch_offsets("unknown", [("t", 0)]) == [("t", 0, -1, -1, "", E.NONE)]
    assert h.c.fetch_offsets("unknown", None) == []
    assert h.c.list_groups(None) == [("simple", "", "Empty")]
    assert len(h.log) == 2 and all(v is not None for _, _, v, _ in h.log)
    # metadata None is stored as ""
    assert h.commit("simple", -1, "", OffsetCommit("t", 2, 1, -1, None)) == [E.NONE]
    assert h.c.fetch_offsets("simple", [("t", 2)])[0][4] == ""


def test_commit_errors():
    h = Harness()
    assert h.commit("nogroup", 3, "m", ("t", 0, 1)) == [E.ILLEGAL_GENERATION]
    assert h.commit(None, -1, "", ("t", 0, 1)) == [E.INVALID_GROUP_ID]
    assert h.commit("", -1, "", ("t", 0, 1)) == [E.NONE]  # Kafka allows the empty group id here
    assert h.commit("s", -1, "", ("t", 0, 1, -1, "x" * 4097), ("t", 1, 1, -1, "x" * 4096)) == [
        E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    gen, ids, leader = h.stable_group()
    assert h.commit("g", gen, ids[0], ("t", 0, 1)) == [E.NONE]
    assert h.commit("g", gen - 1, ids[0], ("t", 0, 1)) == [E.ILLEGAL_GENERATION]
    assert h.commit("g", gen, "ghost", ("t", 0, 1)) == [E.UNKNOWN_MEMBER_ID]
    assert h.commit("g", -1, "", ("t", 0, 1)) == [E.UNKNOWN_MEMBER_ID]  # non-empty group: members only
    # PreparingRebalance: a commit of the current (previous) generation is allowed
    h.join(member_id=leader)
    assert h.c.describe_group("g").state == "PreparingRebalance"
    assert h.commit("g", gen, ids[1], ("t", 1, 9)) == [E.NONE]
    for m in ids[1:]:
        h.join(member_id=m)
    assert h.c.describe_group("g").state == "CompletingRebalance"
    assert h.commit("g", gen + 1, ids[1], ("t", 1, 10)) == [E.REBALANCE_IN_PROGRESS]
    assert h.commit("g", gen, ids[1], ("t", 1, 10)) == [E.ILLEGAL_GENERATION]
    assert h.c.fetch_offsets("g", [("t", 1)])[0][2] == 9


def test_commit_counts_as_heartbeat():
    h = Harness()
    gen, ids, leader = h.stable_group(n=1)
    base = h.now
    h.commit("g", gen, ids[0], ("t", 0, 1), now=base + SESSION - 1)
    h.tick(base + SESSION)
    assert h.c.describe_group("g").state == "Stable"


def test_delete_groups():
    h = Harness()
    h.commit("simple", -1, "", ("t", 0, 1))
    gen, ids, leader = h.stable_group()
    h.commit("g", gen, ids[0], ("t", 0, 1))
    out = h.apply(h.c.delete_groups(["simple", "g", "missing", None], h.now))
    assert out.result == [E.NONE, E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND, E.INVALID_GROUP_ID]
    assert [v for _, _, v, _ in out.records] == [None]  # the offset tombstone; a generation-0 group wrote no metadata
    assert h.c.fetch_offsets("simple", None) == []
    h.leave("g", *[(m, None, None) for m in ids])
    out = h.apply(h.c.delete_groups(["g"], h.now))
    assert out.result == [E.NONE]
    assert sorted(k for _, k, v, _ in out.records if v is None) == sorted([k for _, k, _, _ in out.records])
    assert len(out.records) == 2  # one offset tombstone + the group tombstone
    assert h.c.describe_group("g").state == "Dead"
    assert h.c.list_groups(None) == []


def test_delete_offsets():
    h = Harness()
    h.commit("simple", -1, "", ("t", 0, 1), ("t", 1, 1))
    out = h.apply(h.c.delete_offsets("simple", [("t", 0), ("x", 0)], h.now))
    assert out.result == (E.NONE, [E.NONE, E.NONE])
    assert [v for _, _, v, _ in out.records] == [None]
    assert h.apply(h.c.delete_offsets("missing", [("t", 0)], h.now)).result == (E.GROUP_ID_NOT_FOUND, [E.GROUP_ID_NOT_FOUND])
    assert h.apply(h.c.delete_offsets("", [("t", 0)], h.now)).result == (E.INVALID_GROUP_ID, [E.INVALID_GROUP_ID])
    # the last offset of an Empty group goes: the group goes too
    h.apply(h.c.delete_offsets("simple", [("t", 1)], h.now))
    assert h.c.list_groups(None) == []

    gen, ids, leader = h.stable_group(protocols=[("range", subscription("t"))])
    h.commit("g", gen, ids[0], ("t", 0, 1), ("u", 0, 1))
    out = h.apply(h.c.delete_offsets("g", [("t", 0), ("u", 0)], h.now))
    assert out.result == (E.NONE, [E.GROUP_SUBSCRIBED_TO_TOPIC, E.NONE])
    assert h.c.fetch_offsets("g", None) == [("t", 0, 1, -1, "", E.NONE)]
    h2 = Harness()
    gen, ids, leader = h2.stable_group(protocol_type="connect")
    assert h2.apply(h2.c.delete_offsets("g", [("t", 0)], h2.now)).result == (E.NON_EMPTY_GROUP, [E.NON_EMPTY_GROUP])


def test_offsets_of_empty_group_expire_from_when_it_became_empty():
    h = Harness(offsets_retention_ms=DAY)
    gen, ids, leader = h.stable_group(n=1)
    h.commit("g", gen, ids[0], ("t", 0, 1))
    h.now = 5000
    h.leave("g", (ids[0], None, None))
    assert h.c.describe_group("g").state == "Empty"
    assert h.c.next_deadline_ms() == 5000 + DAY
    h.tick(5000 + DAY - 1)
    assert h.c.fetch_offsets("g", None) != []
    out = h.tick(5000 + DAY)
    assert h.c.fetch_offsets("g", None) == []
    assert h.c.describe_group("g").state == "Dead"
    assert [v for _, _, v, _ in out.records] == [None, None]  # offset + group tombstones
    assert h.c.next_deadline_ms() is None


def test_simple_group_offsets_expire_per_commit():
    h = Harness(offsets_retention_ms=DAY)
    h.commit("s", -1, "", ("t", 0, 1), now=0)
    h.commit("s", -1, "", ("t", 1, 1), now=1000)
    h.tick(DAY)
    assert [r[1] for r in h.c.fetch_offsets("s", None)] == [1]
    h.tick(DAY + 1000)
    assert h.c.list_groups(None) == []


def test_stable_consumer_group_expires_offsets_of_unsubscribed_topics_only():
    h = Harness(offsets_retention_ms=DAY, min_session_timeout_ms=1, max_session_timeout_ms=10 * DAY)
    gen, ids, leader = h.stable_group(n=1, protocols=[("range", subscription("t"))], session=10 * DAY)
    h.commit("g", gen, ids[0], ("t", 0, 1), ("old", 0, 1))
    h.tick(h.now + DAY)
    assert [r[0] for r in h.c.fetch_offsets("g", None)] == ["t"]


def test_empty_group_without_offsets_is_dropped_after_the_check_interval():
    h = Harness()
    gen, ids, leader = h.stable_group(n=1)
    h.leave("g", (ids[0], None, None))
    h.tick(h.now + 600_000)
    assert h.c.list_groups(None) == []


def txn_commit(h, group, producer_id, *offsets, generation=-1, member="", epoch=0):
    commits = [OffsetCommit(*o) for o in offsets]
    return h.apply(h.c.txn_commit_offsets(group, producer_id, epoch, generation, member, None, commits,
                                          h.now)).result


def test_transactional_offsets_count_only_once_their_transaction_commits():
    h = Harness()
    assert h.commit("g", -1, "", ("t", 0, 5)) == [E.NONE]
    assert txn_commit(h, "g", 7, ("t", 0, 10), ("t", 1, 3), epoch=2) == [E.NONE, E.NONE]
    assert [r.producer for r in h.log[-2:]] == [(7, 2), (7, 2)]      # a transactional batch of producer 7
    assert h.c.fetch_offsets("g", [("t", 0)]) == [("t", 0, 5, -1, "", E.NONE)]
    assert h.c.fetch_offsets("g", [("t", 0), ("t", 2)], require_stable=True) == [
        ("t", 0, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT), ("t", 2, -1, -1, "", E.NONE)]
    h.apply(h.c.complete_txn(7, True, lambda g: g == "other", h.now))      # another offsets partition
    assert h.c.fetch_offsets("g", [("t", 0)])[0][2] == 5
    h.apply(h.c.complete_txn(7, True, lambda g: True, h.now))
    assert h.c.fetch_offsets("g", [("t", 0), ("t", 1)], require_stable=True) == [
        ("t", 0, 10, -1, "", E.NONE), ("t", 1, 3, -1, "", E.NONE)]


def test_aborted_transactional_offsets_vanish_and_a_replay_holds_them_until_the_marker():
    h = Harness()
    txn_commit(h, "g", 7, ("t", 0, 10))
    txn_commit(h, "g", 8, ("t", 0, 20))
    replayed = h.replayed()
    h.apply(h.c.complete_txn(7, False, lambda g: True, h.now))
    assert h.c.fetch_offsets("g", [("t", 0)], require_stable=True)[0][5] == E.UNSTABLE_OFFSET_COMMIT   # 8 open
    h.apply(h.c.complete_txn(8, True, lambda g: True, h.now))
    assert h.c.fetch_offsets("g", [("t", 0)], require_stable=True) == [("t", 0, 20, -1, "", E.NONE)]
    assert replayed.fetch_offsets("g", [("t", 0)]) == [("t", 0, -1, -1, "", E.NONE)]
    replayed.replay_marker(8, True, lambda g: True)
    replayed.replay_marker(7, False, lambda g: True)
    assert replayed.fetch_offsets("g", [("t", 0)], require_stable=True) == [("t", 0, 20, -1, "", E.NONE)]


def test_transactional_commit_checks_the_member_when_it_names_one():
    h = Harness()
    joined = h.answers[h.join_new("g")]
    assert joined.error == E.NONE
    assert txn_commit(h, "g", 7, ("t", 0, 1), generation=joined.generation_id, member="nobody") == [
        E.UNKNOWN_MEMBER_ID]
    assert txn_commit(h, "g", 7, ("t", 0, 1), generation=joined.generation_id + 1,
                      member=joined.member_id) == [E.ILLEGAL_GENERATION]
    assert txn_commit(h, "g", 7, ("t", 0, 1), generation=joined.generation_id,
                      member=joined.member_id) == [E.NONE]
    assert txn_commit(h, "g", 8, ("t", 1, 1)) == [E.NONE]                # no member named: old clients


def test_pending_offsets_whose_records_were_not_written_are_discarded():
    h = Harness()
    txn_commit(h, "g", 7, ("t", 0, 10))
    h.c.discard_txn_offsets("g", 7)                                    # the append failed
    h.apply(h.c.complete_txn(7, True, lambda g: True, h.now))
    assert h.c.fetch_offsets("g", [("t", 0)], require_stable=True) == [("t", 0, -1, -1, "", E.NONE)]
