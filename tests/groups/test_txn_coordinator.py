"""The transaction coordinator: transitions, fencing (KIP-360/588), idempotent retries, write
failures, crash between decision and completion, timeouts, expiry, epoch exhaustion, loading."""
from __future__ import annotations

import itertools
import random

import pytest

from kwire.codecs.errors import ErrorCode as E, KafkaApiError
from kwire.groups import txn_records as R
from kwire.groups.coordinator import partition_for as group_partition_for
from kwire.groups.txn_coordinator import (
    VALID_PREVIOUS_STATES, InvalidTxnTransition, TransactionCoordinator, TxnConfig, TxnListing, TxnMarkers,
    TxnResult, TxnWrite, WriteKind, error_for_version,
)
from kwire.groups.txn_coordinator import TxnMetadata, _TxnPartition
from kwire.groups.txn_records import TxnLogValue, TxnState

S = TxnState
T = 60_000            # transaction timeout used by the tests
EXPIRY = 604_800_000  # transactional.id.expiration.ms


class Harness:
    """Drives the coordinator as the I/O service would: appends every write to ``log`` and
    reports it, unless told to fail it."""

    def __init__(self, epoch: int = 0, load: bool = True, **config):
        self.config = TxnConfig(**config)
        self.pids = itertools.count(1000)
        self.c = TransactionCoordinator(lambda: next(self.pids), self.config)
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.now = 0
        if load:
            for p in range(self.config.num_partitions):
                self.c.begin_load(p, epoch)
                assert self.c.finish_load(p) == []

    def drive(self, r: TxnResult, fail: E | None = None) -> TxnResult:
        """Append each write of ``r`` (or fail the first with ``fail``) until an answer."""
        while r.write is not None:
            if fail is not None:
                r, fail = self.c.write_done(r.write, fail, self.now), None
                continue
            self.log.append((r.write.partition, r.write.key, r.write.value))
            r = self.c.write_done(r.write, E.NONE, self.now)
        return r

    def init(self, tid="tx", timeout=T, pid=-1, epoch=-1, fail=None) -> TxnResult:
        return self.drive(self.c.init_producer_id(tid, timeout, pid, epoch, now_ms=self.now), fail)

    def add(self, tid, pid, epoch, *partitions, fail=None) -> TxnResult:
        return self.drive(self.c.add_partitions(tid, pid, epoch, partitions or [("t", 0)], self.now), fail)

    def end(self, tid, pid, epoch, commit=True, fail=None) -> TxnResult:
        return self.drive(self.c.end_txn(tid, pid, epoch, commit, self.now), fail)

    def complete(self, markers: TxnMarkers, fail=None) -> TxnResult:
        return self.drive(self.c.markers_written(markers, self.now), fail)

    def state(self, tid="tx"):
        [d] = self.c.describe_transactions([tid])
        return d

    def replayed(self, epoch: int = 1) -> tuple[TransactionCoordinator, list[TxnMarkers]]:
        """A new coordinator (another broker, or this one restarted) loaded from ``log``."""
        c = TransactionCoordinator(lambda: next(self.pids), self.config)
        jobs = []
        for p in range(self.config.num_partitions):
            c.begin_load(p, epoch)
        for p, key, value in self.log:
            assert c.replay(key, value)
        for p in range(self.config.num_partitions):
            jobs += c.finish_load(p)
        return c, jobs

    def ongoing(self, tid="tx", *partitions):
        r = self.init(tid)
        assert self.add(tid, r.producer_id, r.producer_epoch, *partitions).error == E.NONE
        return r.producer_id, r.producer_epoch


def last_value(h: Harness) -> TxnLogValue | None:
    value = h.log[-1][2]
    return None if value is None else R.decode_value(value)


# -- the table ---------------------------------------------------------------------------
def test_table_is_kafkas_valid_previous_states():
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }


@pytest.mark.parametrize("start, target", [
    (start, target) for target, allowed in VALID_PREVIOUS_STATES.items() for start in S if start not in allowed])
def test_a_transition_outside_the_table_raises_and_changes_nothing(start, target):
    c = TransactionCoordinator(lambda: 1)
    part = _TxnPartition(0, loading=False)
    meta = part.txns["tx"] = TxnMetadata("tx", 1, -1, 0, -1, T, start)
    transit = None if target is S.DEAD else meta.transit(state=target)
    with pytest.raises(InvalidTxnTransition, match=f"{start.kafka_name} -> {target.kafka_name}"):
        c._prepare(0, part, meta, transit, WriteKind.END_TXN)
    assert (meta.state, meta.pending, meta.pending_write) == (start, None, None)


def test_partition_for_is_the_group_coordinators_java_hash():
    c = TransactionCoordinator(lambda: 1)
    for tid in ["", "tx", "my-transactional-id", "grüße", "😀"]:
        assert c.partition_for(tid) == group_partition_for(tid, 50)
    assert c.partition_for("hello") == 99162322 % 50      # "hello".hashCode() == 99162322


def test_error_for_version_maps_producer_fenced_for_old_clients():
    assert error_for_version(E.PRODUCER_FENCED, 22, 3) == E.INVALID_PRODUCER_EPOCH
    assert error_for_version(E.PRODUCER_FENCED, 22, 4) == E.PRODUCER_FENCED
    for api_key in (24, 25, 26):
        assert error_for_version(E.PRODUCER_FENCED, api_key, 1) == E.INVALID_PRODUCER_EPOCH
        assert error_for_version(E.PRODUCER_FENCED, api_key, 2) == E.PRODUCER_FENCED
    assert error_for_version(E.CONCURRENT_TRANSACTIONS, 26, 0) == E.CONCURRENT_TRANSACTIONS


# -- InitProducerId ----------------------------------------------------------------------------
def test_init_new_id_answers_only_after_its_record_is_written():
    h = Harness()
    h.now = 5
    r = h.c.init_producer_id("tx", T, now_ms=h.now)
    w = r.write
    assert (r.error, r.producer_id, r.markers) == (E.NONE, -1, None)
    assert w.kind is WriteKind.INIT_PRODUCER_ID and w.partition == h.c.partition_for("tx")
    assert R.decode_key(w.key) == "tx"
    assert R.decode_value(w.value) == TxnLogValue(1000, 0, T, S.EMPTY, (), 5, -1)
    # while the record is being written, the id is busy and epoch 0 is not in force yet
    assert h.c.init_producer_id("tx", T, now_ms=h.now).error == E.CONCURRENT_TRANSACTIONS
    assert h.c.add_partitions("tx", 1000, 0, [("t", 0)], h.now).error == E.PRODUCER_FENCED
    assert h.state().producer_epoch == -1
    done = h.c.write_done(w, E.NONE, h.now)
    assert (done.error, done.producer_id, done.producer_epoch, done.write) == (E.NONE, 1000, 0, None)
    assert h.state().state == "Empty"


def test_init_again_bumps_the_epoch_and_fences_the_old_producer():
    h = Harness()
    first = h.init()
    second = h.init()
    assert (second.error, second.producer_id, second.producer_epoch) == (E.NONE, 1000, 1)
    assert h.add("tx", 1000, 0).error == E.PRODUCER_FENCED
    assert h.end("tx", 1000, first.producer_epoch).error == E.PRODUCER_FENCED
    assert h.add("tx", 1000, 1).error == E.NONE
    assert error_for_version(h.add("tx", 1000, 0).error, 24, 1) == E.INVALID_PRODUCER_EPOCH


def test_init_request_checks():
    h = Harness(transaction_max_timeout_ms=900_000)
    assert h.init(timeout=0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout=900_001).error == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout=900_000).error == E.NONE
    assert h.init(tid="").error == E.INVALID_REQUEST
    assert h.init(pid=5).error == E.INVALID_REQUEST            # producer id without epoch
    assert h.init(epoch=5).error == E.INVALID_REQUEST
    assert [d.error for d in h.c.describe_transactions(["", "nope"])] == [
        E.INVALID_REQUEST, E.TRANSACTIONAL_ID_NOT_FOUND]


def test_init_on_a_partition_not_led_or_loading():
    h = Harness(load=False)
    assert h.init().error == E.NOT_COORDINATOR
    h.c.begin_load(h.c.partition_for("tx"), 3)
    assert h.init().error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.add("tx", 1, 0).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.end("tx", 1, 0).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.describe_transactions(["tx"])[0].error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.list_transactions().error == E.COORDINATOR_LOAD_IN_PROGRESS
    h.c.finish_load(h.c.partition_for("tx"))
    assert h.init().error == E.NONE
    other = next(t for t in map(str, itertools.count()) if h.c.partition_for(t) != h.c.partition_for("tx"))
    assert h.init(other).error == E.NOT_COORDINATOR


def test_allocator_errors_are_answered():
    h = Harness()

    def unavailable():
        raise KafkaApiError(E.COORDINATOR_LOAD_IN_PROGRESS, "reserving a block")

    h.c._allocate = unavailable
    assert h.init().error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.state().error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.log == []


def test_failed_init_write_is_answered_with_the_coordinator_error():
    h = Harness()
    assert h.init(fail=E.NOT_LEADER_OR_FOLLOWER).error == E.NOT_COORDINATOR
    assert h.init(fail=E.REQUEST_TIMED_OUT).error == E.COORDINATOR_NOT_AVAILABLE
    assert h.init(fail=E.MESSAGE_TOO_LARGE).error == E.UNKNOWN_SERVER_ERROR
    # as Kafka, the new id stayed cached with no epoch: the retry keeps its producer id
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)


# -- KIP-360: InitProducerId with the current producer id and epoch ------------------------------
def test_kip360_resume_bumps_and_a_lost_answer_is_retried_without_bumping():
    h = Harness()
    h.init()
    r = h.init(pid=1000, epoch=0)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 1)
    retry = h.init(pid=1000, epoch=0)                # the answer above was lost
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 1000, 1)
    assert h.init(pid=1000, epoch=1).producer_epoch == 2
    assert h.init(pid=1000, epoch=0).error == E.PRODUCER_FENCED   # neither current nor previous
    assert h.init(pid=999, epoch=2).error == E.PRODUCER_FENCED    # another producer id


def test_kip360_a_new_producer_forgets_the_previous_epoch():
    h = Harness()
    h.init()
    h.init(pid=1000, epoch=0)          # epoch 1, previous 0
    h.init()                           # another producer: epoch 2, no previous
    assert h.init(pid=1000, epoch=0).error == E.PRODUCER_FENCED
    assert h.init(pid=1000, epoch=1).error == E.PRODUCER_FENCED


def test_kip360_for_an_unknown_id_starts_at_epoch_zero():
    h = Harness()
    r = h.init(pid=77, epoch=3)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)


# -- epoch exhaustion ---------------------------------------------------------------------------
def loaded_with(h: Harness, tid: str, value: TxnLogValue, epoch: int = 0) -> None:
    p = h.c.partition_for(tid)
    h.c.begin_load(p, epoch)
    h.log.append((p, R.encode_key(tid), R.encode_value(value)))
    assert h.c.replay(R.encode_key(tid), R.encode_value(value))
    h.c.finish_load(p)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    h = Harness()
    loaded_with(h, "tx", TxnLogValue(5, 32765, T, S.COMPLETE_COMMIT, (), 0, 0))
    r = h.init()
    assert (r.producer_id, r.producer_epoch) == (5, 32766)          # Short.MAX - 1 is still handed out
    r = h.init()
    assert (r.producer_id, r.producer_epoch) == (1000, 0)           # exhausted: a new producer id
    assert last_value(h) == TxnLogValue(1000, 0, T, S.EMPTY, (), 0, -1)
    assert h.add("tx", 5, 32766).error == E.INVALID_PRODUCER_ID_MAPPING


def test_kip360_retry_across_a_rotation_gets_the_new_producer_id():
    h = Harness()
    loaded_with(h, "tx", TxnLogValue(5, 32766, T, S.EMPTY, (), 0, -1))
    r = h.init(pid=5, epoch=32766)
    assert (r.producer_id, r.producer_epoch) == (1000, 0)
    retry = h.init(pid=5, epoch=32766)        # the rotation's answer was lost
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 1000, 0)
    assert h.init(pid=5, epoch=32765).error == E.PRODUCER_FENCED


def test_fencing_an_open_transaction_at_an_exhausted_epoch_then_rotates():
    h = Harness()
    loaded_with(h, "tx", TxnLogValue(5, 32766, T, S.ONGOING, (("t", (0,)),), 0, 0))
    fence = h.init()
    assert fence.error == E.CONCURRENT_TRANSACTIONS and fence.markers.producer_epoch == 32767
    h.complete(fence.markers)
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)


# -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------
def test_add_partitions_starts_the_transaction_and_is_idempotent():
    h = Harness()
    r = h.init()
    h.now = 100
    out = h.add("tx", 1000, 0, ("t", 0), ("t", 1))
    assert out.error == E.NONE and out.partition_errors == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert last_value(h) == TxnLogValue(1000, 0, T, S.ONGOING, (("t", (0, 1)),), 100, 100)
    before = len(h.log)
    h.now = 200
    assert h.c.add_partitions("tx", 1000, 0, [("t", 1)], h.now) == TxnResult(E.NONE, partitions=(("t", 1),))
    assert len(h.log) == before               # already added: no record
    h.add("tx", 1000, 0, ("u", 3))
    assert last_value(h) == TxnLogValue(1000, 0, T, S.ONGOING, (("t", (0, 1)), ("u", (3,))), 200, 100)
    d = h.state()
    assert (d.state, d.transaction_start_time_ms, d.topics) == ("Ongoing", 100, (("t", (0, 1)), ("u", (3,))))
    assert r.producer_epoch == d.producer_epoch == 0


def test_add_partitions_errors_go_to_every_partition():
    h = Harness()
    h.init()
    parts = (("t", 0), ("u", 1))
    out = h.add("tx", 1001, 0, *parts)
    assert out.partition_errors == {p: E.INVALID_PRODUCER_ID_MAPPING for p in parts}
    assert h.add("tx", 1000, 1, *parts).partition_errors == {p: E.PRODUCER_FENCED for p in parts}
    assert h.add("unknown", 1000, 0, *parts).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("", 1000, 0, *parts).error == E.INVALID_REQUEST
    assert h.add("tx", 1000, 0, *parts, fail=E.NOT_ENOUGH_REPLICAS).partition_errors == {
        p: E.COORDINATOR_NOT_AVAILABLE for p in parts}
    assert h.state().state == "Empty"         # the failed append changed nothing
    assert h.add("tx", 1000, 0, *parts).error == E.NONE


def test_add_offsets_adds_the_groups_offsets_partition():
    h = Harness()
    h.init()
    out = h.drive(h.c.add_offsets("tx", 1000, 0, "group", 17, h.now))
    assert out.error == E.NONE
    assert h.state().topics == (("__consumer_offsets", (17,)),)
    assert h.drive(h.c.add_offsets("tx", 1000, 1, "group", 17, h.now)).error == E.PRODUCER_FENCED
    r = h.end("tx", 1000, 0, commit=True)
    assert r.markers.partitions == (("__consumer_offsets", 17),)


# -- EndTxn ---------------------------------------------------------------------------------------
def test_commit_writes_prepare_then_markers_then_complete():
    h = Harness(epoch=7)
    h.ongoing("tx", ("t", 0), ("u", 2))
    h.now = 50
    r = h.c.end_txn("tx", 1000, 0, True, h.now)
    assert r.write.kind is WriteKind.END_TXN and r.markers is None
    assert R.decode_value(r.write.value) == TxnLogValue(1000, 0, T, S.PREPARE_COMMIT, (("t", (0,)), ("u", (2,))), 50, 0)
    done = h.drive(r)
    assert done.error == E.NONE
    assert done.markers == TxnMarkers("tx", 1000, 0, 7, True, (("t", 0), ("u", 2)), h.c.partition_for("tx"))
    assert h.state().state == "PrepareCommit"
    assert h.c.pending_completions() == [done.markers]
    h.now = 60
    complete = h.c.markers_written(done.markers, h.now)
    assert complete.write.kind is WriteKind.COMPLETE
    assert h.drive(complete) == TxnResult(E.NONE)
    assert last_value(h) == TxnLogValue(1000, 0, T, S.COMPLETE_COMMIT, (), 60, 0)
    d = h.state()
    assert (d.state, d.producer_epoch, d.topics) == ("CompleteCommit", 0, ())   # no bump: transaction.version < 2
    assert h.c.pending_completions() == []


def test_abort_and_the_next_transaction():
    h = Harness()
    h.ongoing()
    done = h.end("tx", 1000, 0, commit=False)
    assert done.markers.commit is False
    h.complete(done.markers)
    assert h.state().state == "CompleteAbort"
    h.now = 500
    assert h.add("tx", 1000, 0, ("v", 0)).error == E.NONE
    d = h.state()
    assert (d.state, d.transaction_start_time_ms, d.topics) == ("Ongoing", 500, (("v", (0,)),))


def test_end_txn_retries_and_wrong_decisions():
    h = Harness()
    h.ongoing()
    done = h.end("tx", 1000, 0, commit=True)
    # markers being written: every request for the id waits (Kafka's pending CompleteCommit)
    assert h.end("tx", 1000, 0, commit=True).error == E.CONCURRENT_TRANSACTIONS
    assert h.end("tx", 1000, 0, commit=False).error == E.CONCURRENT_TRANSACTIONS
    assert h.add("tx", 1000, 0, ("t", 9)).error == E.CONCURRENT_TRANSACTIONS
    assert h.init().error == E.CONCURRENT_TRANSACTIONS
    h.complete(done.markers)
    before = len(h.log)
    assert h.end("tx", 1000, 0, commit=True).error == E.NONE           # a retry: success
    assert h.end("tx", 1000, 0, commit=False).error == E.INVALID_TXN_STATE
    assert len(h.log) == before


def test_end_txn_without_a_transaction_and_bad_producers():
    h = Harness()
    h.init()
    assert h.end("tx", 1000, 0).error == E.INVALID_TXN_STATE                 # Empty
    assert h.end("tx", 1001, 0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("tx", 1000, 1).error == E.PRODUCER_FENCED
    assert h.end("unknown", 1000, 0).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("", 1000, 0).error == E.INVALID_REQUEST


def test_a_failed_prepare_write_leaves_the_transaction_open():
    h = Harness()
    h.ongoing()
    r = h.end("tx", 1000, 0, commit=True, fail=E.KAFKA_STORAGE_ERROR)
    assert (r.error, r.markers) == (E.NOT_COORDINATOR, None)
    assert h.state().state == "Ongoing"
    assert h.end("tx", 1000, 0, commit=False).markers.commit is False


def test_a_prepare_record_in_a_prepare_state_without_pending_markers():
    """Kafka's answers for EndTxn in PrepareX when no markers are pending (not reachable through
    the public calls, which keep the completion pending until the Complete record)."""
    h = Harness()
    h.ongoing()
    done = h.end("tx", 1000, 0)
    meta = h.c._partitions[h.c.partition_for("tx")].txns["tx"]
    meta.pending = None
    assert h.end("tx", 1000, 0, commit=True).error == E.CONCURRENT_TRANSACTIONS
    assert h.end("tx", 1000, 0, commit=False).error == E.INVALID_TXN_STATE
    assert h.c.markers_written(done.markers, h.now).error == E.INVALID_TXN_STATE


def test_a_failed_completion_record_is_retried_after_a_backoff():
    h = Harness(retry_backoff_ms=250)
    h.ongoing()
    done = h.end("tx", 1000, 0)
    r = h.c.markers_written(done.markers, h.now)
    again = h.c.write_done(r.write, E.NOT_ENOUGH_REPLICAS, h.now)
    assert (again.error, again.write, again.backoff_ms) == (E.COORDINATOR_NOT_AVAILABLE, r.write, 250)
    assert h.init().error == E.CONCURRENT_TRANSACTIONS      # still completing
    assert h.drive(again) == TxnResult(E.NONE)
    assert h.state().state == "CompleteCommit"


def test_markers_for_another_transaction_are_refused():
    h = Harness()
    h.ongoing()
    done = h.end("tx", 1000, 0)
    for wrong in ({"commit": False}, {"producer_epoch": 1}, {"producer_id": 1}, {"transactional_id": "x"}):
        fields = {**done.markers.__dict__, **wrong}
        assert h.c.markers_written(TxnMarkers(**fields), h.now).error == E.INVALID_TXN_STATE
    assert h.c.markers_written(TxnMarkers(**{**done.markers.__dict__, "coordinator_epoch": 9}),
                               h.now).error == E.NOT_COORDINATOR
    h.complete(done.markers)
    assert h.c.markers_written(done.markers, h.now).error == E.INVALID_TXN_STATE   # already complete


# -- InitProducerId fencing an open transaction ----------------------------------------------------
def test_init_aborts_an_open_transaction_with_a_bumped_epoch():
    h = Harness(epoch=4)
    h.ongoing("tx", ("t", 0), ("t", 1))
    h.now = 30
    r = h.c.init_producer_id("tx", T, now_ms=h.now)
    assert r.write.kind is WriteKind.FENCE
    assert R.decode_value(r.write.value) == TxnLogValue(1000, 1, T, S.PREPARE_ABORT, (("t", (0, 1)),), 30, 0)
    fence = h.drive(r)
    assert fence.error == E.CONCURRENT_TRANSACTIONS and fence.producer_id == -1   # the bump is not handed out
    assert fence.markers == TxnMarkers("tx", 1000, 1, 4, False, (("t", 0), ("t", 1)), h.c.partition_for("tx"))
    assert h.end("tx", 1000, 0).error == E.PRODUCER_FENCED                      # the old producer
    assert h.init().error == E.CONCURRENT_TRANSACTIONS                          # markers outstanding
    h.complete(fence.markers)
    assert h.state().state == "CompleteAbort"
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 2)


def test_a_failed_fence_keeps_the_old_producer_fenced_and_does_not_bump_twice():
    h = Harness()
    h.ongoing()
    assert h.init(fail=E.NOT_ENOUGH_REPLICAS).error == E.COORDINATOR_NOT_AVAILABLE
    d = h.state()
    assert (d.state, d.producer_epoch) == ("Ongoing", 1)      # bumped in memory only, as Kafka
    assert h.add("tx", 1000, 0, ("t", 5)).error == E.PRODUCER_FENCED
    fence = h.init()
    assert fence.markers.producer_epoch == 1                  # not bumped again
    h.complete(fence.markers)
    assert h.init().producer_epoch == 2


# -- timeouts and expiry ------------------------------------------------------------------------
def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced():
    h = Harness()
    h.init(timeout=1000)
    h.now = 10
    h.add("tx", 1000, 0)
    assert h.c.next_deadline_ms() == 10 + 1000 + 1       # Kafka: start + timeout < now
    assert h.c.expired(1010) == []
    [r] = h.c.expired(1011)
    assert r.write.kind is WriteKind.TIMEOUT_ABORT
    assert R.decode_value(r.write.value).producer_epoch == 1
    h.now = 1011
    done = h.drive(r)
    assert done.error == E.NONE and done.markers.commit is False and done.markers.producer_epoch == 1
    assert h.c.next_deadline_ms() is None                 # waiting for the markers
    h.complete(done.markers)
    assert h.state().state == "CompleteAbort"
    assert h.end("tx", 1000, 0).error == E.PRODUCER_FENCED
    assert h.add("tx", 1000, 0).error == E.PRODUCER_FENCED
    assert h.init().producer_epoch == 2


def test_a_failed_timeout_abort_is_retried_after_the_backoff():
    h = Harness(retry_backoff_ms=500)
    h.init(timeout=1000)
    h.add("tx", 1000, 0)
    h.now = 2000
    [r] = h.c.expired(h.now)
    assert h.drive(r, fail=E.REQUEST_TIMED_OUT).error == E.COORDINATOR_NOT_AVAILABLE
    assert h.c.next_deadline_ms() == 2500
    assert h.c.expired(2499) == []
    [r] = h.c.expired(2500)
    assert R.decode_value(r.write.value).producer_epoch == 1   # the failed fence is not bumped twice
    assert h.drive(r).markers.producer_epoch == 1


def test_a_busy_transaction_is_not_timed_out_until_its_write_is_done():
    h = Harness()
    h.init(timeout=1000)
    r = h.c.add_partitions("tx", 1000, 0, [("t", 0)], 0)
    assert h.c.expired(5000) == []
    h.now = 5000
    h.drive(r)
    assert h.c.next_deadline_ms() == 1001        # the start timestamp is the AddPartitions call's
    assert len(h.c.expired(5000)) == 1


def test_an_idle_transactional_id_expires_with_a_tombstone():
    h = Harness()
    h.ongoing()
    h.now = 100
    h.complete(h.end("tx", 1000, 0).markers)
    assert h.c.next_deadline_ms() == 100 + EXPIRY
    assert h.c.expired(100 + EXPIRY - 1) == []
    [r] = h.c.expired(100 + EXPIRY)
    assert r.write.kind is WriteKind.EXPIRE and r.write.value is None and R.decode_key(r.write.key) == "tx"
    assert h.init().error == E.CONCURRENT_TRANSACTIONS       # being removed
    assert h.drive(r) == TxnResult(E.NONE)
    assert h.state().error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.c.next_deadline_ms() is None
    assert h.init().producer_id == 1001                     # a new producer id
    other, _ = h.replayed()
    assert [d.producer_id for d in other.describe_transactions(["tx"])] == [1001]


def test_activity_pushes_expiry_back_and_a_failed_tombstone_is_retried():
    h = Harness(transactional_id_expiration_ms=1000, retry_backoff_ms=100)
    h.init()
    h.now = 900
    h.init()                                  # updates the last update timestamp
    assert h.c.expired(1000) == []
    h.now = 1900
    [r] = h.c.expired(h.now)
    assert h.drive(r, fail=E.NOT_LEADER_OR_FOLLOWER).error == E.NOT_COORDINATOR
    assert h.state().state == "Empty"
    assert h.c.next_deadline_ms() == 1900 + 100
    [r] = h.c.expired(2000)
    h.drive(r)
    assert h.state().error == E.TRANSACTIONAL_ID_NOT_FOUND


def test_ongoing_transactions_never_expire_as_ids():
    h = Harness(transactional_id_expiration_ms=10, transaction_max_timeout_ms=10**9)
    h.init(timeout=10**8)
    h.add("tx", 1000, 0)
    assert h.c.next_deadline_ms() == 10**8 + 1
    assert h.c.expired(10**8) == []


# -- loading: crash between decision and completion ----------------------------------------------
def test_crash_after_prepare_commit_completes_after_the_reload():
    h = Harness(epoch=0)
    h.ongoing("tx", ("t", 0), ("u", 1))
    h.end("tx", 1000, 0, commit=True)         # PrepareCommit written; the broker dies before the markers
    h.ongoing("open")
    h.ongoing("done")
    h.complete(h.end("done", 1002, 0, commit=False).markers)
    h.now = 1000
    c, jobs = h.replayed(epoch=5)
    assert jobs == [TxnMarkers("tx", 1000, 0, 5, True, (("t", 0), ("u", 1)), c.partition_for("tx"))]
    assert c.pending_completions() == jobs
    assert c.init_producer_id("tx", T, now_ms=h.now).error == E.CONCURRENT_TRANSACTIONS
    assert c.end_txn("tx", 1000, 0, True, h.now).error == E.CONCURRENT_TRANSACTIONS
    h.c = c
    assert h.complete(jobs[0]) == TxnResult(E.NONE)
    assert [d.state for d in c.describe_transactions(["tx", "open", "done"])] == [
        "CompleteCommit", "Ongoing", "CompleteAbort"]
    assert h.end("tx", 1000, 0, commit=True).error == E.NONE
    # the open transaction is left to time out from its start, as Kafka does
    assert c.next_deadline_ms() == T + 1
    [r] = c.expired(T + 1)
    assert h.drive(r).markers.transactional_id == "open"


def test_crash_after_prepare_abort_of_a_fence_completes_with_the_bumped_epoch():
    h = Harness()
    h.ongoing()
    fence = h.init()
    c, jobs = h.replayed(epoch=2)
    assert jobs == [TxnMarkers("tx", 1000, 1, 2, False, (("t", 0),), fence.markers.txn_partition)]


def test_replay_reproduces_describe_and_list():
    h = Harness(transactional_id_expiration_ms=10**6)
    h.ongoing("gone")
    h.complete(h.end("gone", 1000, 0).markers)
    h.now = 500_000
    r = h.init("a", timeout=900_000)
    h.add("a", r.producer_id, 0, ("t", 0), ("u", 2))
    h.init("b")
    h.init("b")
    pid, epoch = h.ongoing("c", ("t", 1))
    h.complete(h.end("c", pid, epoch).markers)
    h.now = 10**6
    [r] = h.c.expired(h.now)                      # only "gone" has idled long enough
    assert r.write.transactional_id == "gone"
    h.drive(r)
    ids = ["a", "b", "c", "gone"]
    c, jobs = h.replayed()
    assert jobs == []
    assert [d.state for d in c.describe_transactions(ids)] == ["Ongoing", "Empty", "CompleteCommit", ""]
    assert c.describe_transactions(ids) == h.c.describe_transactions(ids)
    assert c.list_transactions() == h.c.list_transactions()
    assert c.next_deadline_ms() == h.c.next_deadline_ms() == 500_000 + 900_001


def test_replay_skips_foreign_damaged_and_unknown_records():
    h = Harness(load=False)
    c = h.c
    p = c.partition_for("tx")
    key = R.encode_key("tx")
    value = R.encode_value(TxnLogValue(5, 0, T, S.EMPTY, (), 0, -1))
    assert c.replay(key, value) is False                       # not loading that partition
    c.begin_load(p, 1)
    assert c.replay(b"\x00\x01\x00\x02tx", value) is False     # a key version we do not know
    assert c.replay(key, b"\x00\x00\x01") is False             # damaged
    assert c.replay(None, value) is False
    assert c.replay(key, value) is True
    assert c.replay(key, None) is True                         # tombstone
    c.finish_load(p)
    assert c.describe_transactions(["tx"])[0].error == E.TRANSACTIONAL_ID_NOT_FOUND


def test_replay_of_states_kafka_never_writes():
    h = Harness(load=False)
    c = h.c
    for tid in ("dead", "fence"):
        c.begin_load(c.partition_for(tid), 0)
    c.replay(R.encode_key("dead"), R.encode_value(TxnLogValue(5, 0, T, S.EMPTY, (), 0, -1)))
    c.replay(R.encode_key("dead"), R.encode_value(TxnLogValue(5, 0, T, S.DEAD, (), 0, -1)))
    c.replay(R.encode_key("fence"), R.encode_value(TxnLogValue(6, 0, T, S.PREPARE_EPOCH_FENCE, (("t", (0,)),), 0, 0)))
    for tid in ("dead", "fence"):
        c.finish_load(c.partition_for(tid))
    assert [d.error for d in c.describe_transactions(["dead"])] == [E.TRANSACTIONAL_ID_NOT_FOUND]
    assert c.describe_transactions(["fence"])[0].state == "Ongoing"


def test_v1_records_are_read():
    h = Harness(load=False)
    c = h.c
    p = c.partition_for("tx")
    c.begin_load(p, 0)
    v = TxnLogValue(5, 3, T, S.PREPARE_ABORT, (("t", (0,)),), 10, 5, previous_producer_id=4, next_producer_id=6,
                    client_transaction_version=1)
    assert c.replay(R.encode_key("tx"), R.encode_value(v, version=1))
    [job] = c.finish_load(p)
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (5, 3, False, (("t", 0),))


def test_unload_and_reload_make_outstanding_work_stale():
    h = Harness(epoch=1)
    h.ongoing()
    p = h.c.partition_for("tx")
    end = h.c.end_txn("tx", 1000, 0, True, h.now)
    assert h.c.unload_partition(p) == 1
    assert h.c.write_done(end.write, E.NONE, h.now).error == E.NOT_COORDINATOR
    assert h.c.write_done(end.write, E.NOT_LEADER_OR_FOLLOWER, h.now).error == E.NOT_COORDINATOR
    assert h.init().error == E.NOT_COORDINATOR
    assert h.c.unload_partition(p) == 0
    # led again at a higher epoch: the log has the Ongoing record, the stale write is refused
    c, _ = h.replayed(epoch=2)
    assert c.write_done(end.write, E.NONE, h.now).error == E.NOT_COORDINATOR
    assert c.describe_transactions(["tx"])[0].state == "Ongoing"
    h.c = c
    done = h.end("tx", 1000, 0)
    assert done.markers.coordinator_epoch == 2
    c.begin_load(p, 3)                         # reloaded while the markers were being written
    for rec in h.log:
        if rec[0] == p:
            c.replay(rec[1], rec[2])
    [job] = c.finish_load(p)
    assert c.markers_written(done.markers, h.now).error == E.NOT_COORDINATOR
    assert job.coordinator_epoch == 3
    assert h.complete(job).error == E.NONE
    assert c.owned_partitions()[p] == 3 and c.coordinator_epoch(p) == 3 and c.coordinator_epoch(-1) is None


def test_unloaded_ids_have_no_timers():
    h = Harness()
    h.init(timeout=1000)
    h.add("tx", 1000, 0)
    h.c.unload_partition(h.c.partition_for("tx"))
    assert h.c.next_deadline_ms() is None
    assert h.c.expired(10**12) == []


# -- DescribeTransactions / ListTransactions -----------------------------------------------------
def test_describe_and_list():
    h = Harness()
    h.now = 100
    h.ongoing("a", ("t", 0), ("u", 1))
    h.now = 200
    h.init("b")
    d = h.state("a")
    assert d == type(d)("a", E.NONE, "Ongoing", 1000, 0, T, 100, (("t", (0,)), ("u", (1,))))
    assert h.c.list_transactions() == TxnListing(E.NONE, (), (("a", 1000, "Ongoing"), ("b", 1001, "Empty")))
    assert h.c.list_transactions(["Ongoing", "Bogus"]) == TxnListing(E.NONE, ("Bogus",), (("a", 1000, "Ongoing"),))
    assert h.c.list_transactions(["Bogus"]).states == ()
    assert h.c.list_transactions(producer_id_filters=[1001]).states == (("b", 1001, "Empty"),)
    # KIP-994: only transactions running longer than the duration; as in Kafka an id without
    # a transaction (start -1) always counts as long-running
    assert h.c.list_transactions(duration_filter_ms=150, now_ms=300).states == (
        ("a", 1000, "Ongoing"), ("b", 1001, "Empty"))
    assert h.c.list_transactions(duration_filter_ms=200, now_ms=300).states == (("b", 1001, "Empty"),)


# -- every change goes through the log ------------------------------------------------------------
def test_random_operations_keep_memory_equal_to_the_log():
    """Random calls with random append failures: whatever the coordinator holds of an id whose
    state is settled equals what a coordinator replaying the appended records holds."""
    rng = random.Random(7)
    h = Harness(transactional_id_expiration_ms=50_000, retry_backoff_ms=10)
    replica = TransactionCoordinator(lambda: 0, h.config)      # kept loading; fed the log as it grows
    for p in range(h.config.num_partitions):
        replica.begin_load(p, 0)
    replayed = 0
    ids = ["a", "b", "c", "d"]
    producers: dict[str, tuple[int, int]] = {}
    outstanding: list[TxnMarkers] = []
    fails = [None] * 6 + [E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT, E.NOT_LEADER_OR_FOLLOWER]
    seen: set = set()

    def drive(r):
        while r.write is not None:
            fail = rng.choice(fails)
            seen.add((r.write.kind, fail is None))
            r = h.drive(TxnResult(write=r.write), fail) if fail else h.drive(r)
        if r.markers is not None:
            outstanding.append(r.markers)
        seen.add(r.error)
        return r

    for _ in range(2000):
        h.now += rng.randrange(0, 3000)
        tid = rng.choice(ids)
        pid, epoch = producers.get(tid, (0, 0))
        op = rng.randrange(6)
        if op == 0:
            r = drive(h.c.init_producer_id(tid, rng.choice([1000, 5000, T]), now_ms=h.now))
            if r.error == E.NONE:
                producers[tid] = (r.producer_id, r.producer_epoch)
        elif op == 1:
            drive(h.c.add_partitions(tid, pid, epoch, [("t", rng.randrange(3))], h.now))
        elif op == 2:
            drive(h.c.end_txn(tid, pid, epoch, rng.random() < 0.5, h.now))
        elif op == 3 and outstanding:
            drive(h.c.markers_written(outstanding.pop(rng.randrange(len(outstanding))), h.now))
        elif op == 4:
            for r in h.c.expired(h.now):
                drive(r)
        for _, key, value in h.log[replayed:]:
            assert replica.replay(key, value)
        replayed = len(h.log)
        for t in ids:
            if _settled(h.c, t):
                assert _held(replica, t) == _held(h.c, t), t
    kinds = {k for k in seen if isinstance(k, tuple)}
    assert {(k, ok) for k in WriteKind for ok in (True, False)} <= kinds
    assert {E.NONE, E.CONCURRENT_TRANSACTIONS, E.PRODUCER_FENCED, E.INVALID_TXN_STATE} <= seen


def _settled(c: TransactionCoordinator, tid: str) -> bool:
    meta = c._partitions[c.partition_for(tid)].txns.get(tid)
    return meta is None or (meta.pending is None and not meta.has_failed_epoch_fence and meta.producer_epoch >= 0)


def _held(c: TransactionCoordinator, tid: str):
    meta = c._partitions[c.partition_for(tid)].txns.get(tid)
    return meta and (meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state, meta.partitions,
                     meta.start_timestamp_ms, meta.last_update_timestamp_ms)


def test_writes_are_values():
    h = Harness()
    w = h.c.init_producer_id("tx", T, now_ms=0).write
    assert isinstance(w, TxnWrite) and w.target.state is S.EMPTY and w.coordinator_epoch == 0
    with pytest.raises(AttributeError):
        w.value = b""


def test_config_defaults_are_kafkas():
    c = TxnConfig()
    assert (c.transaction_max_timeout_ms, c.transactional_id_expiration_ms, c.num_partitions) == (
        900_000, 604_800_000, 50)
