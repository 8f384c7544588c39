"""Idempotent producers: duplicates, gaps, epoch bumps, fencing, rebuild after reopen."""
from __future__ import annotations

import pytest
from logkit import build_batch

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import INT32_MAX


def send(log, seq, n=2, *, pid=1000, epoch=0, now_ms=0):
    return log.append(build_batch([b"v"] * n, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq), now_ms=now_ms)


def code_of(fn, *args, **kwargs):
    with pytest.raises(KafkaApiError) as err:
        fn(*args, **kwargs)
    return err.value.code


def test_in_sequence_appends(open_log):
    log = open_log()
    assert [send(log, s).base_offset for s in (0, 2, 4)] == [0, 2, 4]
    assert log.producer_ids() == 1000


def test_duplicate_of_recent_batch_returns_original_offsets(open_log):
    log = open_log()
    for seq in range(0, 14, 2):                 # 7 batches, offsets 0..13
        send(log, seq)
    dup = send(log, 10)
    assert (dup.duplicate, dup.base_offset, dup.last_offset) == (True, 10, 11)
    assert log.log_end_offset == 14
    # older than the last five: not recognised, so it is out of order
    assert code_of(send, log, 2) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order(open_log):
    log = open_log()
    send(log, 0)
    assert code_of(send, log, 3) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2
    assert send(log, 2).base_offset == 2


def test_epoch_bump_must_start_at_zero_and_fences_old_epoch(open_log):
    log = open_log()
    send(log, 0)
    assert code_of(send, log, 2, epoch=1) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(log, 0, epoch=1).base_offset == 2
    assert code_of(send, log, 2, epoch=0) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert send(log, 2, epoch=1).base_offset == 4


def test_unknown_producer_accepted_at_any_sequence(open_log):
    log = open_log()
    assert send(log, 42, pid=7).base_offset == 0
    assert code_of(send, log, 50, pid=7) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(log, 44, pid=7).base_offset == 2


def test_sequence_wraps_at_int32_max(open_log):
    log = open_log()
    send(log, INT32_MAX - 1, pid=9)             # sequences MAX-1, MAX
    assert send(log, 0, pid=9).base_offset == 2


def test_failed_append_leaves_state_untouched(open_log):
    log = open_log(max_message_bytes=300)
    send(log, 0)
    big = build_batch([b"x" * 400], producer_id=1000, producer_epoch=0, base_sequence=2)
    assert code_of(log.append, big, now_ms=0) == ErrorCode.MESSAGE_TOO_LARGE
    assert send(log, 2).base_offset == 2


def test_multi_batch_append_checks_each_batch(open_log):
    log = open_log()
    blob = (build_batch([b"a"] * 2, producer_id=5, producer_epoch=0, base_sequence=0)
            + build_batch([b"b"] * 3, producer_id=5, producer_epoch=0, base_sequence=2))
    result = log.append(blob, now_ms=0)
    assert (result.base_offset, result.last_offset, result.record_count) == (0, 4, 5)
    gap = (build_batch([b"a"], producer_id=5, producer_epoch=0, base_sequence=5)
           + build_batch([b"b"], producer_id=5, producer_epoch=0, base_sequence=9))
    assert code_of(log.append, gap, now_ms=0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 5
    assert send(log, 2, n=3, pid=5).duplicate


@pytest.mark.parametrize("recover", [False, True])
def test_state_rebuilt_after_reopen(open_log, recover):
    log = open_log(segment_bytes=400)
    for seq in range(0, 20, 2):
        send(log, seq)
    send(log, 0, pid=2000, epoch=3)
    log.close()
    again = open_log(recover=recover, segment_bytes=400)
    assert again.producer_ids() == 2000
    dup = send(again, 18)
    assert (dup.duplicate, dup.base_offset) == (True, 18)
    assert code_of(send, again, 30) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(send, again, 2, pid=2000, epoch=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert send(again, 20).base_offset == 22
