"""The group state machine: one table of valid transitions, and one Outcome per call."""
import dataclasses

import pytest

from kwire.codecs.errors import ErrorCode as E
from kwire.groups import VALID_PREVIOUS_STATES, GroupState, InvalidTransition, JoinRequest, OffsetCommit
from kwire.groups.group import Group

from .harness import Harness

S = GroupState


def test_table_is_kafkas_valid_previous_states():
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: {S.PREPARING_REBALANCE},
        S.PREPARING_REBALANCE: {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.DEAD: set(S),
    }


@pytest.mark.parametrize("start, target", [
    (start, target) for target, allowed in VALID_PREVIOUS_STATES.items() for start in S if start not in allowed])
def test_a_transition_outside_the_table_raises_and_changes_nothing(start, target):
    group = Group("g", start, state_timestamp=5)
    with pytest.raises(InvalidTransition, match=f"{start.value} -> {target.value}"):
        group.transition(target, 9)
    assert (group.state, group.state_timestamp) == (start, 5)


def test_a_full_cycle_moves_only_through_the_table():
    h = Harness()
    gen, ids, leader = h.stable_group(n=2)
    group = h.c._groups["g"]
    assert group.state is S.STABLE
    for m in ids:
        h.leave("g", (m, None, None))
    assert group.state is S.EMPTY
    assert h.apply(h.c.delete_groups(["g"], h.now)).result == [E.NONE]
    assert group.state is S.DEAD and h.c.describe_group("g").state == "Dead"


def test_each_call_returns_its_own_outcome():
    h = Harness()
    first = h.c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 0, 1)], 10)
    second = h.c.commit_offsets("s", -1, "", None, [OffsetCommit("t", 1, 2), OffsetCommit("t", 2, 3)], 20)
    assert len(first.records) == 1 and len(second.records) == 2
    assert first.result == [E.NONE] and second.result == [E.NONE, E.NONE]
    assert not set(map(id, first.records)) & set(map(id, second.records))
    t = h.join(session=10_000)
    out = h.c.heartbeat("g", 0, h.answers[t].member_id, None, 30)
    assert (out.records, out.completed, out.result) == ([], [], E.UNKNOWN_MEMBER_ID)
    # the timer in the outcome is the coordinator's: the pending member id expires after its session
    assert out.next_deadline_ms == h.c.next_deadline_ms() == 10_000


def test_join_request_is_frozen_and_normalised():
    req = JoinRequest(group_id="g", member_id=None, protocol_type=None, protocols=[("range", None)],
                      session_timeout_ms=10_000, rebalance_timeout_ms=10_000, api_version=5, client_id=None)
    assert (req.member_id, req.protocol_type, req.client_id, req.protocols) == ("", "", "", (("range", b""),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.member_id = "m"
