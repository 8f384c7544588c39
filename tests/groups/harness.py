"""A test driver for GroupCoordinator: tickets, collected answers and the record log."""
from __future__ import annotations

import itertools
import struct

from kwire.groups import GroupConfig, GroupCoordinator, JoinRequest, OffsetCommit, SyncRequest

SESSION = 10_000
REBALANCE = 30_000


def subscription(*topics: str, user_data: bytes = b"") -> bytes:
    """A v0 ConsumerProtocolSubscription."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", len(user_data)) + user_data


class Harness:
    def __init__(self, **config):
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(**config)
        self._ids = itertools.count(1)
        self.c = GroupCoordinator(self.config, unique_id=lambda: f"u{next(self._ids)}")
        self.tickets = itertools.count(1)
        self.answers: dict[int, object] = {}
        self.answer_counts: dict[int, int] = {}
        self.issued: list[int] = []
        self.log: list[tuple[str, bytes, bytes | None]] = []
        self.now = 0

    def apply(self, outcome):
        self.log.extend(outcome.records)
        for ticket, result in outcome.completed:
            self.answers[ticket] = result
            self.answer_counts[ticket] = self.answer_counts.get(ticket, 0) + 1
        return outcome

    def join(self, group="g", member_id="", instance=None, protocols=(("range", b"m"),), protocol_type="consumer",
             session=SESSION, rebalance=REBALANCE, client_id="c", api_version=5, now=None):
        t = next(self.tickets)
        self.issued.append(t)
        req = JoinRequest(group_id=group, member_id=member_id, group_instance_id=instance,
                          protocol_type=protocol_type, protocols=tuple(protocols), session_timeout_ms=session,
                          rebalance_timeout_ms=rebalance, client_id=client_id, client_host="/127.0.0.1",
                          api_version=api_version)
        self.apply(self.c.join_group(t, req, self.now if now is None else now))
        return t

    def join_new(self, group="g", **kw):
        """MEMBER_ID_REQUIRED round trip; returns the ticket of the second JoinGroup."""
        t = self.join(group, **kw)
        member_id = self.answers[t].member_id
        return self.join(group, member_id=member_id, **kw)

    def sync(self, group, generation, member_id, assignments=(), instance=None, protocol_type=None,
             protocol_name=None, now=None):
        t = next(self.tickets)
        self.issued.append(t)
        req = SyncRequest(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
                          protocol_type=protocol_type, protocol_name=protocol_name, assignments=tuple(assignments))
        self.apply(self.c.sync_group(t, req, self.now if now is None else now))
        return t

    def heartbeat(self, group, generation, member_id, instance=None, now=None):
        return self.apply(self.c.heartbeat(group, generation, member_id, instance,
                                           self.now if now is None else now)).result

    def leave(self, group, *members, now=None):
        out = self.apply(self.c.leave_group(group, list(members), self.now if now is None else now))
        return out.result

    def commit(self, group, generation, member_id, *offsets, instance=None, now=None):
        commits = [o if isinstance(o, OffsetCommit) else OffsetCommit(*o) for o in offsets]
        out = self.apply(self.c.commit_offsets(group, generation, member_id, instance, commits,
                                               self.now if now is None else now))
        return out.result

    def tick(self, now):
        self.now = now
        return self.apply(self.c.tick(now))

    def advance_to(self, now):
        """Tick at every deadline up to ``now``, then at ``now``."""
        while True:
            d = self.c.next_deadline_ms()
            if d is None or d > now:
                break
            self.tick(max(d, self.now))
        self.tick(now)

    def unanswered(self):
        return [t for t in self.issued if t not in self.answers]

    def replayed(self, **config):
        config.setdefault("initial_rebalance_delay_ms", self.config.initial_rebalance_delay_ms)
        other = GroupCoordinator(GroupConfig(**config))
        for _group, key, value, producer in self.log:
            other.replay(key, value, None if producer is None else producer[0])
        return other

    def settle(self, tickets):
        """Advance time deadline by deadline until every ticket is answered."""
        for _ in range(100):
            if all(t in self.answers for t in tickets):
                return [self.answers[t] for t in tickets]
            d = self.c.next_deadline_ms()
            assert d is not None, "tickets parked with no timer pending"
            self.tick(max(d, self.now))
        raise AssertionError("tickets never answered")

    def _rejoin_until_complete(self, group, latest, kw):
        """Act like clients: a member whose JoinGroup was answered rejoins while the group rebalances."""
        for _ in range(100):
            state = self.c.describe_group(group).state
            if state == "PreparingRebalance":
                parked = [m for m, t in latest.items() if t not in self.answers]
                for m, t in list(latest.items()):
                    if t in self.answers:
                        latest[m] = self.join(group, member_id=m, **kw)
                if not parked or any(t in self.answers for t in latest.values()):
                    continue
                d = self.c.next_deadline_ms()
                self.tick(max(d, self.now))
            elif all(t in self.answers for t in latest.values()):
                return [self.answers[t] for t in latest.values()]
            else:
                raise AssertionError(f"unexpected state {state}")
        raise AssertionError("no stable generation")

    def stable_group(self, group="g", n=3, **kw):
        """n members joined and synced (assignment b"A<i>"); returns (generation, [member ids], leader)."""
        ids, latest = [], {}
        for _ in range(n):
            m = self.answers[self.join(group, **kw)].member_id
            ids.append(m)
            latest[m] = self.join(group, member_id=m, **kw)
            results = self._rejoin_until_complete(group, latest, kw)
        gen, leader = results[0].generation_id, results[0].leader_id
        assert all(r.generation_id == gen for r in results)
        for m in ids:
            if m != leader:
                self.sync(group, gen, m)
        self.sync(group, gen, leader, [(m, f"A{i}".encode()) for i, m in enumerate(ids)])
        return gen, ids, leader
