"""Random sequences of group operations: no exception, invariants hold, replay agrees, no ticket is lost."""
from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kwire.groups import GroupState, OffsetCommit

from .harness import Harness, subscription

GROUPS = ["g1", "g2"]
INSTANCES = [None, None, "i1", "i2"]
PROTOCOLS = [
    [("range", subscription("t"))],
    [("roundrobin", subscription("t", "u")), ("range", subscription("t", "u"))],
    [("range", subscription("u"))],
    [("sticky", b"")],
]


class GroupMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.h = Harness(initial_rebalance_delay_ms=1000, offsets_retention_ms=200_000,
                         offsets_retention_check_interval_ms=50_000)
        self.member_ids: list[str] = ["", "ghost"]
        self.generations: dict = {}   # group id -> (group object, generation)

    def _note_ids(self):
        for r in self.h.answers.values():
            mid = getattr(r, "member_id", "")
            if mid and mid not in self.member_ids:
                self.member_ids.append(mid)

    def _gen(self, group):
        g = self.h.c._groups.get(group)
        return g.generation_id if g else 0

    @rule(group=st.sampled_from(GROUPS), instance=st.sampled_from(INSTANCES), protocols=st.sampled_from(PROTOCOLS),
          api_version=st.sampled_from([3, 5, 9]), session=st.sampled_from([6000, 20_000]),
          rebalance=st.sampled_from([5000, 40_000]))
    def join_new(self, group, instance, protocols, api_version, session, rebalance):
        self.h.join(group, instance=instance, protocols=protocols, api_version=api_version, session=session,
                    rebalance=rebalance)
        self._note_ids()

    @rule(group=st.sampled_from(GROUPS), data=st.data(), protocols=st.sampled_from(PROTOCOLS),
          instance=st.sampled_from(INSTANCES))
    def rejoin(self, group, data, protocols, instance):
        member_id = data.draw(st.sampled_from(self.member_ids))
        self.h.join(group, member_id=member_id, instance=instance, protocols=protocols)
        self._note_ids()

    @rule(group=st.sampled_from(GROUPS), data=st.data(), gen_delta=st.sampled_from([0, 0, 0, -1]),
          assign=st.booleans())
    def sync(self, group, data, gen_delta, assign):
        member_id = data.draw(st.sampled_from(self.member_ids))
        g = self.h.c._groups.get(group)
        instance = g.members[member_id].group_instance_id if g and member_id in g.members else None
        assignments = [(m, b"x" + m.encode()) for m in self.member_ids] if assign else []
        self.h.sync(group, self._gen(group) + gen_delta, member_id, assignments, instance=instance)

    @rule(group=st.sampled_from(GROUPS), n=st.integers(1, 3), instance=st.sampled_from(INSTANCES))
    def form_group(self, group, n, instance):
        """Members join like clients, the join phase ends, everybody syncs."""
        for i in range(n):
            t = self.h.join(group, instance=instance if i == 0 else None)
            r = self.h.answers.get(t)
            if r is not None and r.member_id and r.error == 79:
                self.h.join(group, member_id=r.member_id)
        self.rejoin_like_clients(group)
        self.h.advance_to(self.h.now + 1000)
        self._note_ids()
        self.sync_like_clients(group, True)

    @rule(group=st.sampled_from(GROUPS), all_members=st.booleans())
    def sync_like_clients(self, group, all_members):
        """The leader (and maybe every follower) syncs the current generation, as real clients do."""
        g = self.h.c._groups.get(group)
        if g is None or not g.members:
            return
        for m in list(g.members.values()):
            if all_members or m.member_id == g.leader_id:
                self.h.sync(group, g.generation_id, m.member_id, [(m.member_id, b"a")],
                            instance=m.group_instance_id)

    @rule(group=st.sampled_from(GROUPS))
    def rejoin_like_clients(self, group):
        """Every member whose last JoinGroup was answered rejoins with its own metadata."""
        g = self.h.c._groups.get(group)
        for m in list(g.members.values()) if g else ():
            if not m.awaiting_join:
                self.h.join(group, member_id=m.member_id, instance=m.group_instance_id, protocols=m.protocols)
        self._note_ids()

    @rule()
    def heartbeat_all(self):
        for gid in GROUPS:
            g = self.h.c._groups.get(gid)
            for m in list(g.members.values()) if g else ():
                self.h.heartbeat(gid, g.generation_id, m.member_id, instance=m.group_instance_id)

    @rule(group=st.sampled_from(GROUPS), data=st.data())
    def heartbeat(self, group, data):
        member_id = data.draw(st.sampled_from(self.member_ids))
        self.h.heartbeat(group, self._gen(group), member_id)

    @rule(group=st.sampled_from(GROUPS), data=st.data(), instance=st.sampled_from(INSTANCES))
    def leave(self, group, data, instance):
        member_id = data.draw(st.sampled_from(self.member_ids))
        res = self.h.leave(group, (member_id or None, instance, None))
        assert len(res.member_errors) == 1

    @rule(group=st.sampled_from(GROUPS), data=st.data(), simple=st.booleans(), topic=st.sampled_from(["t", "u"]),
          offset=st.integers(0, 100))
    def commit(self, group, data, simple, topic, offset):
        member_id = "" if simple else data.draw(st.sampled_from(self.member_ids))
        result = self.h.commit(group, -1 if simple else self._gen(group), member_id,
                               OffsetCommit(topic, offset % 3, offset, offset % 5 - 1, "m"))
        assert len(result) == 1

    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group):
        self.h.apply(self.h.c.delete_groups([group], self.h.now))

    @rule(group=st.sampled_from(GROUPS), topic=st.sampled_from(["t", "u"]))
    def delete_offsets(self, group, topic):
        out = self.h.apply(self.h.c.delete_offsets(group, [(topic, 0), (topic, 1)], self.h.now))
        assert len(out.result[1]) == 2

    @rule(dt=st.sampled_from([1, 500, 1000, 3000, 7000, 30_000, 100_000]))
    def advance(self, dt):
        now = self.h.now + dt
        self.h.advance_to(now)
        self._note_ids()
        d = self.h.c.next_deadline_ms()
        assert d is None or d > now

    @invariant()
    def group_invariants(self):
        for gid, g in self.h.c._groups.items():
            event(f"reached {g.state.value}")
            members = g.members
            if g.state is GroupState.EMPTY:
                assert not members
            if g.state is GroupState.STABLE:
                assert not any(m.awaiting_join or m.awaiting_sync for m in members.values())
                assert g.protocol_name is not None
            if g.state is GroupState.COMPLETING_REBALANCE:
                assert not any(m.awaiting_join for m in members.values())
            if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                assert g.protocol_name in {n for n, _ in next(iter(members.values())).protocols}
            assert (g.leader_id in members) == bool(members)
            assert g.pending_sync <= set(members)
            assert {i: m for i, m in g.static_members.items()} == {
                m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id is not None}
            old = self.generations.get(gid)
            if old is not None and old[0] is g:
                assert g.generation_id >= old[1]
            self.generations[gid] = (g, g.generation_id)
        assert all(n == 1 for n in self.h.answer_counts.values()), "a ticket was answered twice"

    @invariant()
    def replay_agrees(self):
        other = self.h.replayed(offsets_retention_ms=200_000, offsets_retention_check_interval_ms=50_000)
        for gid in GROUPS:
            assert other.fetch_offsets(gid, None) == self.h.c.fetch_offsets(gid, None)
            live = self.h.c._groups.get(gid)
            if live is not None and (live.state is GroupState.STABLE or (
                    live.state is GroupState.EMPTY and (live.generation_id > 0 or live.offsets))):
                assert other.describe_group(gid) == self.h.c.describe_group(gid)

    def teardown(self):
        # Far in the future every parked request has been answered and every group has emptied.
        self.h.advance_to(self.h.now + 3_600_000)
        assert self.h.unanswered() == []
        for g in self.h.c._groups.values():
            assert g.state is GroupState.EMPTY


GroupMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestRandomOperations = GroupMachine.TestCase
