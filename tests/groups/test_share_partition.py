"""SharePartition (KIP-932 delivery state), sans-I/O: time is passed in, no broker."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kwire.groups.share_partition import (
    TRANSITIONS, AckType, InvalidRecordState, InvalidRequest, PartitionLimits, RecordState, SharePartition,
)
from kwire.groups.share_records import ShareState

LIMITS = PartitionLimits(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=100)
A, Q, K, X = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def fresh(start=0, limits=LIMITS) -> SharePartition:
    return SharePartition(limits, start)


def test_new_records_are_acquired_in_whole_batches_with_delivery_count_one():
    sp = fresh()
    assert sp.fetch_offset(high_watermark=10) == 0
    assert sp.acquire("m1", [(0, 4), (5, 9)], max_records=3, now_ms=0) == [(0, 4, 1)]
    assert (sp.spso, sp.speo) == (0, 5)
    assert sp.fetch_offset(10) == 5            # the next batch; 0-4 are held
    assert sp.acquire("m2", [(5, 9)], 500, 0) == [(5, 9, 1)]
    assert sp.fetch_offset(10) is None


def test_accept_moves_the_start_offset_over_the_acknowledged_prefix():
    sp = fresh()
    sp.acquire("m1", [(0, 9)], 500, 0)
    sp.acknowledge("m1", 3, 9, [AckType.ACCEPT])
    assert sp.spso == 0                        # 0-2 still held
    sp.acknowledge("m1", 0, 2, [AckType.ACCEPT])
    assert (sp.spso, sp.speo, sp.records) == (10, 10, {})


def test_release_redelivers_with_a_higher_count_and_reject_never_does():
    sp = fresh()
    sp.acquire("m1", [(0, 2)], 500, 0)
    sp.acknowledge("m1", 0, 2, [AckType.RELEASE, AckType.REJECT, AckType.ACCEPT])
    assert sp.fetch_offset(3) == 0
    assert sp.acquire("m2", [(0, 2)], 500, 0) == [(0, 0, 2)]      # only 0: 1 archived, 2 acknowledged
    sp.acknowledge("m2", 0, 0, [AckType.ACCEPT])
    assert sp.spso == 3


def test_record_counts_are_the_window_between_the_start_and_end_offsets_by_state():
    sp = fresh()
    assert sp.record_counts() == {A: 0, Q: 0, K: 0, X: 0}
    sp.acquire("m1", [(0, 9)], 500, 0)
    assert sp.record_counts() == {A: 0, Q: 10, K: 0, X: 0}
    sp.acknowledge("m1", 2, 5, [AckType.ACCEPT, AckType.REJECT, AckType.RELEASE, AckType.GAP])
    assert sp.record_counts() == {A: 1, Q: 6, K: 1, X: 2}
    sp.acknowledge("m1", 0, 1, [AckType.ACCEPT])        # the start offset moves over 0-3: forgotten
    assert (sp.spso, sp.speo) == (4, 10)
    assert sp.record_counts() == {A: 1, Q: 4, K: 0, X: 1}
    assert sum(sp.record_counts().values()) == sp.speo - sp.spso


def test_the_delivery_count_limit_archives_a_record_released_again_and_again():
    sp = fresh()
    for delivery in (1, 2, 3):
        assert sp.acquire("m", [(0, 0)], 500, 0) == [(0, 0, delivery)]
        sp.acknowledge("m", 0, 0, [AckType.RELEASE])
    assert sp.fetch_offset(1) is None and sp.spso == 1


def test_an_expired_lock_makes_records_available_again():
    sp = fresh()
    sp.acquire("m", [(0, 4)], 500, now_ms=100)
    assert sp.next_lock_deadline() == 1100
    assert not sp.expire_locks(1099)
    assert sp.expire_locks(1100)
    assert sp.acquire("other", [(0, 4)], 500, 1200) == [(0, 4, 2)]
    with pytest.raises(InvalidRecordState):        # the first member's lock is gone
        sp.acknowledge("m", 0, 4, [AckType.ACCEPT])


def test_a_member_leaving_releases_only_its_records():
    sp = fresh()
    sp.acquire("a", [(0, 1)], 500, 0)
    sp.acquire("b", [(2, 3)], 500, 0)
    assert sp.release_member("a")
    assert sp.acquire("c", [(0, 3)], 500, 0) == [(0, 1, 2)]


def test_bad_acknowledgements_change_nothing():
    sp = fresh()
    sp.acquire("m", [(0, 3)], 500, 0)
    with pytest.raises(InvalidRequest):
        sp.acknowledge("m", 0, 3, [1, 1])               # neither one type nor one per offset
    with pytest.raises(InvalidRequest):
        sp.acknowledge("m", 0, 3, [9])
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("m", 2, 5, [AckType.ACCEPT])      # 4-5 were never acquired: all or nothing
    assert all(r.state is Q for r in sp.records.values())


def test_record_locks_limit_new_acquisitions():
    sp = fresh(limits=PartitionLimits(1000, 3, max_record_locks=4))
    assert sp.acquire("m", [(0, 1), (2, 3), (4, 5)], 500, 0) == [(0, 3, 1)]
    assert sp.fetch_offset(6) is None
    sp.acknowledge("m", 0, 1, [AckType.ACCEPT])
    assert sp.fetch_offset(6) == 4


def test_control_batches_and_log_gaps_are_archived_not_delivered():
    sp = fresh()
    assert sp.acquire("m", [(0, 1), (2, 2, True), (5, 6)], 500, 0) == [(0, 1, 1), (5, 6, 1)]
    sp.acknowledge("m", 0, 1, [AckType.ACCEPT])
    sp.acknowledge("m", 5, 6, [AckType.ACCEPT])
    assert (sp.spso, sp.records) == (7, {})


def test_skip_to_archives_what_retention_deleted():
    sp = fresh()
    sp.acquire("m", [(0, 4)], 500, 0)
    assert sp.skip_to(3)
    assert sp.spso == 3 and sorted(sp.records) == [3, 4]


def test_state_round_trips_acquired_as_available_and_terminal_states_stay():
    sp = fresh(start=10)
    sp.acquire("m", [(10, 15)], 500, 0)
    sp.acknowledge("m", 11, 11, [AckType.ACCEPT])
    sp.acknowledge("m", 12, 12, [AckType.REJECT])
    state = sp.state()
    assert state.start_offset == 10
    back = SharePartition.from_state(LIMITS, state)
    assert back.fetch_offset(16) == 10
    assert back.acquire("n", [(10, 15)], 500, 0) == [(10, 10, 2), (13, 15, 2)]


def test_the_transition_table_has_no_way_out_of_a_terminal_state():
    assert not [k for k in TRANSITIONS if k[0] in (K, X)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fetch", "ack", "expire", "leave"]), st.integers(0, 2),
                          st.sampled_from(list(AckType)), st.integers(1, 6)), max_size=40))
def test_random_operations_never_deliver_an_acknowledged_record_and_keep_counts_bounded(ops):
    sp = fresh()
    now, accepted, delivered = 0, set(), []
    held: dict[str, list] = {}
    for op, member_no, ack, n in ops:
        member = f"m{member_no}"
        now += 300
        if op == "fetch":
            start = sp.fetch_offset(30)
            if start is not None:
                for first, last, count in sp.acquire(member, [(o, o) for o in range(start, 30)], n, now):
                    assert 1 <= count <= LIMITS.delivery_count_limit
                    delivered += range(first, last + 1)
                    assert not accepted & set(range(first, last + 1))
                    held.setdefault(member, []).extend(range(first, last + 1))
        elif op == "ack" and held.get(member):
            offset = held[member].pop(0)
            try:
                sp.acknowledge(member, offset, offset, [ack])
                if ack == AckType.ACCEPT:
                    accepted.add(offset)
            except InvalidRecordState:
                pass               # its lock expired meanwhile
        elif op == "expire":
            sp.expire_locks(now)
        else:
            sp.release_member(member)
        assert sp.spso <= sp.speo and all(sp.spso <= o < sp.speo for o in sp.records)
        assert SharePartition.from_state(LIMITS, sp.state()).spso == sp.spso
    assert isinstance(sp.state(), ShareState)


# -- Kafka 4.2 (ShareFetch/ShareAcknowledge v2) ------------------------------------------------
def test_a_renew_keeps_the_records_acquired_and_restarts_their_lock():
    sp = fresh()
    sp.acquire("m1", [(0, 3)], 500, now_ms=0)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("m2", 0, 1, [AckType.RENEW], now_ms=900)          # not its records
    sp.acknowledge("m1", 0, 1, [AckType.RENEW], now_ms=900)
    assert sp.expire_locks(1000)                                          # 2-3: their first lock ends
    assert [sp.records[o].state for o in range(4)] == [Q, Q, A, A]
    assert sp.records[0].delivery_count == 1                             # a renew is no new delivery
    assert sp.expire_locks(1900) and sp.records[0].state is A
    assert (Q, "renew") in TRANSITIONS and (A, "renew") not in TRANSITIONS


def test_record_limit_mode_takes_part_of_a_batch():
    sp = fresh()
    assert sp.acquire("m1", [(0, 4)], max_records=2, now_ms=0, record_limit=True) == [(0, 1, 1)]
    assert sp.speo == 2
    assert sp.acquire("m1", [(0, 4)], max_records=2, now_ms=0, record_limit=True) == [(2, 3, 1)]
    assert sp.acquire("m1", [(0, 4)], max_records=2, now_ms=0) == [(4, 4, 1)]
    assert sp.state().batches[-1].last_offset == 4


def test_delivery_complete_count_counts_acknowledged_and_archived_offsets_from_the_start():
    from kwire.groups.share_partition import delivery_complete_count
    from kwire.groups.share_records import StateBatch
    state = ShareState(0, 1, 0, 12, (StateBatch(10, 13, 2, 1), StateBatch(14, 15, 0, 1), StateBatch(16, 18, 4, 3)))
    assert delivery_complete_count(state) == 2 + 3
    assert delivery_complete_count(ShareState(0, 0, 0, 5, ())) == 0
