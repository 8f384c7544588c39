"""``_schemas-0`` read from its leader by a broker that holds no copy of it.

Why.  The registry's state is the replay of this broker's own copy of ``_schemas-0``
(kwire.schemas.service).  A cluster with more brokers than
``schema.registry.topic.replication.factor`` has brokers without one: their REST reads
forward to the primary, but the produce path's schema validation asks the state
synchronously, and an empty state would refuse every record that names a registered id.

How.  Such a broker fetches ``_schemas-0`` from its leader as a consumer does (Fetch with
``replica_id`` -1, over the inter-broker listener: ``ClusterNode.open_peer``), so it gets
only what is below the leader's high watermark, which no leader change takes back, as the
local replay gets only what is below the local high watermark.  The records go through the
service's own bookkeeping (``_next_offset``, ``_replay``), long-polled: a registration
committed at the leader wakes the parked fetch, so it is here about one round trip later.

Switching.  Mirroring runs while the cluster state names a partition ``_schemas-0`` and this
broker holds no copy of it; the decision is taken after a reconciliation
(``ClusterNode.changed``), when the local logs match the cluster state.  It goes on from the
offset the state was replayed to (a copy that went away: same partition, same offsets), and
sets the service's ``_plog`` to None, so a copy that appears later is replayed from scratch
by ``catch_up``; records are applied only while no copy is here, with no await between that
check and the apply.  A leader that moved or refuses the partition's epoch ends the
connection; the next leader is read from the cluster state.  OFFSET_OUT_OF_RANGE (the
leader's log does not hold the next offset: it lost records in an unclean election, or its
start moved past them) replays from the leader's log start into a new state.  With an
authorizer the leader checks READ on ``_schemas`` for this broker's principal (a consumer's
fetch, not a follower's CLUSTER_ACTION): a refusal is logged at WARNING, once per streak.

Freshness.  A record can name a schema registered a moment ago that the last fetch missed:
``wait_fetched`` returns once a fetch sent after the call has been applied (the next fetch
then does not park at the leader), which the produce path waits for before it refuses
(``SchemaRegistryService.refresh``).
"""
from __future__ import annotations

import logging

import trio

from kwire.codecs.errors import ErrorCode
from kwire.cluster.fetcher import FETCH_VERSION, REFUSED
from kwire.groups.internal_topics import SCHEMAS
from kwire.schemas.state import RegistryState
from kwire.transport.peer import PeerError

logger = logging.getLogger(__name__)

TOPIC = SCHEMAS.name

WAIT_MS = 500                # a fetch parks at the leader this long when nothing is new
FETCH_BYTES = 1 << 20
BACKOFF_S = (0.1, 5.0)       # after a failure, doubling from the first to the second
STALE_RETRY_S = 0.2          # an epoch error: the cluster state is read again after this


class _Stale(Exception):
    """The leader refused the fetch for the partition (not the leader, another epoch)."""


class SchemaMirror:
    """Run by the registry (``SchemaRegistryService.serve``) in cluster mode: ``run``."""

    def __init__(self, service):
        self.service = service
        self.active = False            # this broker holds no copy of an existing _schemas-0
        self.sent = 0                  # fetches sent
        self.applied = 0               # the number of the last fetch whose answer was applied
        self._applied_event = trio.Event()
        self._hurry = False            # a wait_fetched: the next fetch does not park
        self._failures = 0             # connection failures since the last fetch applied
        self.client_id = f"broker-{service.broker.node_id}-schema-registry"

    # -- what the service asks ------------------------------------------------------------
    async def wait_fetched(self) -> None:
        """Return once a fetch sent after this call has been applied, or at once when there is
        no leader to fetch from; stops waiting when mirroring stops.  Cancel-safe."""
        target = self.sent + 1
        self._hurry = True
        while self.active and self.applied < target and self._source() is not None:
            await self._applied_event.wait()

    # -- the loop ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Mirror whenever this broker has no copy, until cancelled.  Logs and retries every
        failure: it never ends the registry (nor the broker)."""
        cluster = self.service.broker.cluster
        while True:
            self._note_active()
            source = self._source()
            if source is None:
                # the local logs and leaders change with a reconciliation; looking in the middle
                # of one (a new state, its partitions not opened yet) would mirror for nothing
                await cluster.changed.wait()
                continue
            try:
                await self._mirror_from(*source)
            except (PeerError, OSError) as exc:
                self._failures += 1
                level = getattr(exc, "log_level", logging.INFO) if self._failures == 1 else logging.DEBUG
                logger.log(level, "mirroring %s-0 from broker %d: %s; reconnecting", TOPIC, source[0], exc)
                await trio.sleep(min(BACKOFF_S[0] * 2 ** (self._failures - 1), BACKOFF_S[1]))
            except _Stale as exc:
                logger.debug("mirroring %s-0: %s; reading the cluster state again", TOPIC, exc)
                await trio.sleep(STALE_RETRY_S)
            except Exception:
                logger.exception("mirroring %s-0 from broker %d failed; retrying", TOPIC, source[0])
                await trio.sleep(BACKOFF_S[1])

    def _source(self) -> tuple[int, int] | None:
        """(leader id, leader epoch) of _schemas-0 to fetch from; None when this broker holds a
        copy, or the partition has no leader (or is not known yet)."""
        if not self.active:
            return None
        state = self.service.broker.cluster.snapshot.states.get((TOPIC, 0))
        if state is None or state.leader < 0 or state.leader == self.service.broker.node_id:
            return None
        return state.leader, state.leader_epoch

    def _note_active(self) -> None:
        """Set ``active`` from the cluster state and the local logs; log when it changes."""
        service = self.service
        snapshot = service.broker.cluster.snapshot
        exists = snapshot is not None and (TOPIC, 0) in snapshot.states
        active = exists and service._local_copy() is None
        if active == self.active:
            return
        self.active = active
        self._applied_event.set()               # waiters look at ``active`` again
        self._applied_event = trio.Event()
        if active:
            service._plog = None                # a copy that appears later is replayed from scratch
            logger.info("this broker holds no copy of %s-0: mirroring it from its leader (from offset %d)",
                        TOPIC, service._next_offset)
        elif exists:
            logger.info("this broker holds a copy of %s-0 now: mirroring stopped", TOPIC)
        else:
            logger.info("%s-0 is gone from the cluster state: mirroring stopped", TOPIC)

    async def _mirror_from(self, leader_id: int, leader_epoch: int) -> None:
        """Fetch from ``leader_id`` while it leads in ``leader_epoch`` and this broker has no
        copy.  Raises PeerError, OSError, _Stale."""
        timeout_s = self.service.broker.config.value_of("replica.socket.timeout.ms") / 1000
        conn = await self.service.broker.cluster.open_peer(leader_id, self.client_id, timeout_s)
        try:
            while True:
                self._note_active()
                if self._source() != (leader_id, leader_epoch):
                    return
                await self._fetch(conn, leader_epoch)
        finally:
            await conn.aclose()

    async def _fetch(self, conn, leader_epoch: int) -> None:
        service = self.service
        offset = service._next_offset
        wait_ms = 0 if self._hurry else WAIT_MS
        self._hurry = False
        self.sent += 1
        number = self.sent
        response = await conn.request(
            1, FETCH_VERSION, wait_s=wait_ms / 1000, replica_id=-1, max_wait_ms=wait_ms, min_bytes=1,
            max_bytes=FETCH_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            forgotten_topics_data=[], rack_id="",
            topics=[{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": FETCH_BYTES}]}])
        if response.error_code:
            raise PeerError(f"fetch answered {ErrorCode(response.error_code).name}")
        answer = next((p for t in response.responses if t.topic == TOPIC
                       for p in t.partitions if p.partition_index == 0), None)
        if answer is None:
            raise PeerError(f"fetch answered without {TOPIC}-0")
        code = ErrorCode(answer.error_code)
        if service._local_copy() is not None or offset != service._next_offset:
            return                              # a copy appeared meanwhile: catch_up replays it
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            start = max(answer.log_start_offset, 0)
            logger.info("%s-0: offset %d is out of the leader's range; replaying from its log start %d",
                        TOPIC, offset, start)
            service.state_now, service._next_offset = RegistryState(), start
        elif code in REFUSED:
            raise PeerError(f"the leader refuses this broker ({code.name}): its principal needs READ on the "
                            f"topic {TOPIC} (super.users, or an ACL)", logging.WARNING)
        elif code != ErrorCode.NONE:
            raise _Stale(f"the leader answered {code.name} in leader epoch {leader_epoch}")
        elif answer.records:
            service._next_offset = service._replay(answer.records, offset)
        self.applied, self._failures = number, 0
        self._applied_event.set()
        self._applied_event = trio.Event()
