"""Transactions v2 (KIP-890 part 2) in the transaction coordinator: the implicit add, the epoch
bump of every EndTxn v5 and its markers, retries with the old epoch, the new producer id once
the epoch is exhausted, a reload in the middle, and v1 transactions left as they were."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode as E
from kwire.groups import txn_records as R
from kwire.groups.txn_records import TxnState

from tests.groups.test_txn_coordinator import Harness

S = TxnState


def v2_add(h, tid, pid, epoch, *partitions):
    return h.drive(h.c.add_partitions(tid, pid, epoch, partitions or [("t", 0)], h.now, tv2=True))


def v2_end(h, tid, pid, epoch, commit=True):
    return h.drive(h.c.end_txn(tid, pid, epoch, commit, h.now, tv2=True))


def test_each_v2_transaction_ends_with_the_epoch_bumped_and_marked_with_it():
    h = Harness(epoch=3)
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    for n in range(3):
        assert v2_add(h, "tx", pid, epoch, ("t", 0), ("t", 1)).error == E.NONE
        done = v2_end(h, "tx", pid, epoch, commit=n != 1)
        assert (done.error, done.producer_id, done.producer_epoch) == (E.NONE, pid, epoch + 1)
        assert done.markers.producer_epoch == epoch + 1 and done.markers.transaction_version == 2
        assert done.markers.commit is (n != 1)
        value = R.decode_value(h.log[-1][2])
        assert (value.producer_epoch, value.client_transaction_version) == (epoch + 1, 2)
        h.complete(done.markers)
        epoch += 1
    assert h.state().producer_epoch == epoch == 3


def test_a_late_write_of_the_old_epoch_cannot_open_a_transaction_again():
    h = Harness()
    r = h.init("tx")
    v2_add(h, "tx", r.producer_id, 0)
    done = v2_end(h, "tx", r.producer_id, 0)
    h.complete(done.markers)
    # the hanging-transaction case: a produce of the old epoch arriving after the commit
    assert v2_add(h, "tx", r.producer_id, 0, ("t", 5)).error == E.PRODUCER_FENCED
    assert v2_add(h, "tx", r.producer_id, 1, ("t", 5)).error == E.NONE


def test_a_retried_v2_end_txn_with_the_old_epoch_gets_the_same_answer():
    h = Harness()
    r = h.init("tx")
    v2_add(h, "tx", r.producer_id, 0)
    first = h.c.end_txn("tx", r.producer_id, 0, True, h.now, tv2=True)
    done = h.drive(first)
    assert v2_end(h, "tx", r.producer_id, 0).error == E.CONCURRENT_TRANSACTIONS   # markers outstanding
    h.complete(done.markers)
    again = v2_end(h, "tx", r.producer_id, 0)
    assert (again.error, again.producer_id, again.producer_epoch) == (E.NONE, r.producer_id, 1)
    assert v2_end(h, "tx", r.producer_id, 0, commit=False).error == E.INVALID_TXN_STATE
    assert v2_end(h, "tx", r.producer_id, 1).error == E.INVALID_TXN_STATE       # nothing open at epoch 1
    assert v2_end(h, "tx", r.producer_id, 5).error == E.PRODUCER_FENCED


def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_at_epoch_0():
    h = Harness()
    r = h.init("tx")
    meta = h.c._partitions[h.c.partition_for("tx")].txns["tx"]
    meta.producer_epoch = 32766                 # Short.MaxValue - 1: the last epoch handed out
    v2_add(h, "tx", r.producer_id, 32766)
    done = v2_end(h, "tx", r.producer_id, 32766)
    new_pid = done.producer_id
    assert new_pid != r.producer_id and done.producer_epoch == 0
    assert (done.markers.producer_id, done.markers.producer_epoch) == (r.producer_id, 32767)
    h.complete(done.markers)
    d = h.state()
    assert (d.producer_id, d.producer_epoch, d.state) == (new_pid, 0, "CompleteCommit")
    retry = v2_end(h, "tx", r.producer_id, 32766)          # the answer was lost: asked again
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, new_pid, 0)
    assert v2_add(h, "tx", new_pid, 0).error == E.NONE


def test_a_reloaded_coordinator_completes_a_v2_decision_and_knows_its_retries():
    h = Harness()
    r = h.init("tx")
    v2_add(h, "tx", r.producer_id, 0, ("t", 0))
    v2_end(h, "tx", r.producer_id, 0)                       # decided; markers not written
    c, jobs = h.replayed()
    assert [(j.producer_id, j.producer_epoch, j.commit) for j in jobs] == [(r.producer_id, 1, True)]
    h.c = c
    h.complete(jobs[0])
    again = v2_end(h, "tx", r.producer_id, 0)
    assert (again.error, again.producer_epoch) == (E.NONE, 1)


def test_v1_transactions_keep_their_epoch():
    h = Harness()
    r = h.init("tx")
    h.add("tx", r.producer_id, 0)
    done = h.end("tx", r.producer_id, 0)
    assert done.markers.producer_epoch == 0 and done.markers.transaction_version == 0
    assert R.decode_value(h.log[-1][2]).client_transaction_version == 0
    h.complete(done.markers)
    assert h.add("tx", r.producer_id, 0).error == E.NONE


def test_init_producer_id_with_the_epoch_before_a_v2_bump_is_fenced():
    h = Harness()
    r = h.init("tx")
    v2_add(h, "tx", r.producer_id, 0)
    h.complete(v2_end(h, "tx", r.producer_id, 0).markers)
    stale = h.init("tx", pid=r.producer_id, epoch=0)          # a zombie of the finished transaction
    assert stale.error == E.PRODUCER_FENCED
    current = h.init("tx", pid=r.producer_id, epoch=1)
    assert (current.error, current.producer_epoch) == (E.NONE, 2)
