"""tests/faults/duplicates.py and replicas.py's batch headers: synthetic v2 batches (fast lane).

The batches are built here field by field with Kafka's v2 header layout, apart from
replicas.py's parser, and parsed back by it as the runner does with the segment files.
"""
from __future__ import annotations

import struct
import types
from collections import Counter

from . import duplicates as d
from . import history as h
from .conftest import summary_lines
from .replicas import INT32_MAX, batches

I, T = h.IDEMPOTENT, h.TRANSACTIONAL
TOPIC = "nemesis-data"
PARTITION = 1
PID = 7
# baseOffset, batchLength | partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
# maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
HEADER = struct.Struct(">qi" + "ibIhiqqqhii")
CONTROL, TXN = 0x20, 0x10


def v2(base_offset: int, count: int, pid: int = PID, epoch: int = 0, seq: int = 0, *, attributes: int = 0,
       leader_epoch: int = 3) -> bytes:
    """One v2 batch of ``count`` records (the records themselves are stand-in bytes)."""
    payload = bytes(7 * count)
    length = HEADER.size - 12 + len(payload)
    return HEADER.pack(base_offset, length, leader_epoch, 2, 0, attributes, count - 1, 1000, 1000 + count,
                       pid, epoch, seq, count) + payload


def log_of(*specs) -> list:
    """Parsed batches of ``v2(*spec)`` for each spec, laid end to end."""
    return batches(b"".join(v2(*spec) if isinstance(spec, tuple) else spec for spec in specs))


def v(writer: int, seq: int) -> int:
    return int(h.encode(writer, seq))


def values(writer: int, layout: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(offset, value) read back: ``layout`` is (offset, writer seq) pairs."""
    return [(offset, v(writer, s)) for offset, s in layout]


def sources(items, pids=None, client_log=()) -> d.Sources:
    return d.Sources(TOPIC, {PARTITION: {2: items, 3: items[:2]}}, pids or {}, list(client_log))


def check(items, read, *, kind=I, pids=None, client_log=()) -> h.Findings:
    writer, first = 1, {}
    for offset, s in read:
        first.setdefault(s, offset)
    acks = [h.Ack(writer, kind, s, PARTITION, offset) for s, offset in first.items()]
    f = h.Findings()
    h.check_records(acks, {PARTITION: values(writer, read)}, {writer: kind}, f,
                    sources(items, pids, client_log))
    return f


# -- the header reader -------------------------------------------------------------------------------

def test_batches_reads_every_header_field_of_a_v2_batch():
    data = v2(40, 3, pid=123456789012, epoch=9, seq=77, attributes=TXN, leader_epoch=5) + v2(43, 1, CONTROL)
    first, second = batches(data)
    assert (first.base_offset, first.last_offset, first.leader_epoch) == (40, 42, 5)
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.records) == (123456789012, 9, 77, 3)
    assert first.transactional and not first.control and first.idempotent
    assert first.last_sequence == 79 and first.sequence_at(41) == 78
    assert (first.start, first.end, second.start) == (0, len(v2(0, 3)), len(v2(0, 3)))
    plain = batches(v2(0, 2, pid=-1, epoch=-1, seq=-1))[0]
    assert not plain.idempotent and plain.last_sequence == -1
    assert "pid 123456789012 epoch 9 seq 77..79 txn records 3" in first.describe()


def test_a_sequence_wraps_past_int32_max_to_zero():
    b = batches(v2(0, 3, seq=INT32_MAX - 1))[0]
    assert b.last_sequence == 0 and b.sequence_at(1) == INT32_MAX


def test_librdkafka_pid_changes_are_read_from_its_eos_log():
    assert d.pid_event("GETPID [rdkafka#producer-1] [thrd:main]: Acquired PID{Id:1000,Epoch:0}") == (
        "acquired", 1000, 0)
    assert d.pid_event("GETPID [rdkafka#producer-1] [thrd:main]: Acquired PID{Id:2,Epoch:0} "
                       "(previous PID{Id:1,Epoch:4})") == ("acquired", 2, 0)
    assert d.pid_event("DRAIN [rdkafka#producer-1] [thrd:main]: All partitions drained, bumped epoch to "
                       "PID{Id:1000,Epoch:1}") == ("bumped", 1000, 1)
    assert d.pid_event("NEWPID [rdkafka#producer-1] [thrd:b/1]: t [0] changed PID{Invalid} -> "
                       "PID{Id:0,Epoch:0} with base MsgId 1") is None


# -- the sequence invariant --------------------------------------------------------------------------

def kinds(items) -> list[str]:
    return [kind for kind, _, _ in d.sequence_problems(items)]


def test_contiguous_sequences_and_a_bumped_epoch_from_zero_pass():
    # a plain producer's batch (pid -1), another producer's, and a control batch (no sequence) between
    items = log_of((0, 4, PID, 0, 0), (4, 2, -1, -1, -1), (6, 3, PID, 0, 4), (9, 1, PID, 0, 7), (10, 2, 8, 0, 0),
                   v2(12, 1, PID, 0, -1, attributes=CONTROL | TXN), (13, 2, PID, 1, 0), (15, 3, PID, 1, 2))
    assert kinds(items) == []
    f = h.Findings()
    d.check_sequences(TOPIC, {0: {1: items, 2: items}}, f)
    assert f.violations == [] and f.evidence == []


def test_a_repeated_sequence_within_an_epoch_is_a_violation():
    items = log_of((0, 4, PID, 0, 0), (4, 2, PID, 0, 4), (6, 2, PID, 0, 4), (8, 3, PID, 0, 6))
    problems = d.sequence_problems(items)
    assert [(k, i) for k, i, _ in problems] == [("sequence-repeat", 2)]
    assert "seq 4..5 at offset 6 repeats seq 4..5 at offset 4" in problems[0][2]
    f = h.Findings()
    d.check_sequences(TOPIC, {PARTITION: {1: items, 2: items, 3: items[:2]}}, f)
    assert f.counts["sequence-repeat"] == 1 and len(f.violations) == 1
    assert f.violations[0].startswith("sequence-repeat: nemesis-data-1 (replica of broker(s) [1, 2]):")
    assert len(f.evidence) == 1 and ">> #2 offsets 6..7" in f.evidence[0] and "#3 offsets 8..10" in f.evidence[0]


def test_a_gap_a_bumped_epoch_off_zero_and_an_epoch_going_back_are_violations():
    assert kinds(log_of((0, 2, PID, 0, 0), (2, 2, PID, 0, 5))) == ["sequence-gap"]
    assert kinds(log_of((0, 2, PID, 0, 0), (2, 2, PID, 1, 3))) == ["epoch-start"]
    assert kinds(log_of((0, 2, PID, 1, 0), (2, 2, PID, 0, 2))) == ["epoch-regression"]
    assert kinds(log_of((0, 2, PID, 0, 0), (2, 2, PID, 0, 1), (4, 2, PID, 0, 3))) == ["sequence-repeat"]


def test_a_producer_first_seen_mid_sequence_is_counted_not_a_violation():
    items = log_of((0, 2, PID, 3, 40), (2, 2, PID, 3, 42))
    assert kinds(items) == ["sequence-first-nonzero"]
    f = h.Findings()
    d.check_sequences(TOPIC, {0: {1: items}}, f)
    assert f.violations == [] and f.counts["sequence-first-nonzero"] == 1


def test_sequences_continue_across_int32_max():
    assert kinds(log_of((0, 2, PID, 0, 0), (2, 2, PID, 0, 2))) == []
    items = log_of((0, 2, PID, 0, INT32_MAX - 3), (2, 2, PID, 0, INT32_MAX - 1), (4, 2, PID, 0, 0))
    assert kinds(items) == ["sequence-first-nonzero"]


# -- duplicates classified by their batches -----------------------------------------------------------

# A writer's seqs 0..3 in a batch at offsets 0..3, seqs 4..5 at 4..5 (its fate unknown to the client),
# then the copy of seq 5 again at offset 6 in a third batch, with seqs 6..7 after it.
READ = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 5), (7, 6), (8, 7)]
BUMP = "DRAIN [rdkafka#producer-1] [thrd:main]: All partitions drained, bumped epoch to PID{Id:7,Epoch:1}"


def test_a_retry_appended_twice_within_one_epoch_is_a_violation():
    items = log_of((0, 4, PID, 0, 0), (4, 2, PID, 0, 4), (6, 3, PID, 0, 5))
    f = check(items, READ)
    assert f.counts["duplicated"] == 1 and f.counts["duplicated_across_epochs"] == 0
    assert "appears 2 times, at [(1, 5), (1, 6)]: both in batches of pid 7 epoch 0 with overlapping sequences" \
        in f.violations[0]
    block = f.evidence[0]
    assert block.startswith("duplicated: ") and "nemesis-data-1 as broker 2 holds it" in block
    assert ">> #1 offsets 4..5 leaderEpoch 3 pid 7 epoch 0 seq 4..5" in block
    assert "copy 1: offset 5, record seq 5" in block and "copy 2: offset 6, record seq 5" in block


def test_a_copy_renumbered_under_a_bumped_epoch_is_classified_not_a_violation():
    items = log_of((0, 4, PID, 0, 0), (4, 2, PID, 0, 4), (6, 3, PID, 1, 0))
    pids = {1: [d.PidEvent(0.4, "acquired", PID, 0), d.PidEvent(31.5, "bumped", PID, 1)]}
    client_log = ["t=31.200s writer 1: DRAIN [rdkafka#producer-1] [thrd:main]: Beginning partition drain in "
                  "state Assigned for PID{Id:7,Epoch:0} epoch bump for 1 partition(s) with in-flight requests: "
                  "nemesis-data [1] 1 message(s) failed due to OUT_OF_ORDER_SEQUENCE_NUMBER",
                  f"t=31.500s writer 1: {BUMP}",
                  "t=31.510s writer 1: NEWPID [rdkafka#producer-1] [thrd:b/2]: nemesis-data [1] changed "
                  "PID{Id:7,Epoch:0} -> PID{Id:7,Epoch:1} with base MsgId 6",
                  "t=31.510s writer 1: NEWPID [rdkafka#producer-1] [thrd:b/2]: nemesis-data [2] changed "
                  "PID{Id:7,Epoch:0} -> PID{Id:7,Epoch:1} with base MsgId 9",
                  f"t=31.500s writer 2: {BUMP}"]
    f = check(items, READ, pids=pids, client_log=client_log)
    assert f.violations == [] and f.counts["duplicated_across_epochs"] == 1
    assert "pid 7 epoch 0 seq 4..5, then epoch 1 seq 0..2: renumbered after an epoch bump" in f.explained[0]
    assert "the client logged it: t=31.50s bumped epoch to PID{Id:7,Epoch:1}" in f.explained[0]
    block = f.evidence[0]
    assert "copy 2: offset 6, record seq 0" in block and "writer 1's producer ids" in block
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in block and "nemesis-data [1] changed" in block
    assert "nemesis-data [2] changed" not in block and "writer 2" not in block
    g = h.Findings()
    d.check_sequences(TOPIC, {PARTITION: {2: items}}, g)
    assert g.violations == []                           # the log itself is in order


def test_a_copy_under_a_new_producer_id_is_classified_unless_the_writer_never_held_it():
    items = log_of((0, 4, PID, 0, 0), (4, 2, PID, 0, 4), (6, 3, PID + 1, 0, 0))
    held = {1: [d.PidEvent(0.4, "acquired", PID, 0), d.PidEvent(20.0, "acquired", PID + 1, 0)]}
    f = check(items, READ, pids=held)
    assert f.violations == [] and f.counts["duplicated_new_producer"] == 1 and "both held" in f.explained[0]
    f = check(items, READ)
    assert f.violations == [] and "pids are not recorded" in f.explained[0]
    f = check(items, READ, pids={1: held[1][:1]})
    assert f.counts["duplicated"] == 1 and "the writer only ever held [7]" in f.violations[0]


def test_what_cannot_be_explained_stays_a_violation():
    renumbered = log_of((0, 4, PID, 0, 0), (4, 2, PID, 0, 4), (6, 3, PID, 1, 0))
    f = check(renumbered, READ, kind=T)                 # a transactional writer never re-sends a value
    assert f.counts["duplicated"] == 1 and "a transactional writer sends no value twice" in f.violations[0]
    f = check(renumbered[:2], READ)                     # the later copy's batch is not in the replica logs
    assert f.counts["duplicated"] == 1 and "no batch holds offsets [6]" in f.violations[0]
    older = log_of((0, 4, PID, 1, 0), (4, 2, PID, 1, 4), (6, 3, PID, 0, 0))
    f = check(older, READ)
    assert f.counts["duplicated"] == 1 and "below the first copy's epoch 1" in f.violations[0]
    twice = log_of((0, 4, PID, 0, 0), (4, 2, PID, 0, 4), (6, 3, PID, 0, 6))
    f = check(twice, READ)
    assert "at different sequences: sent twice within one epoch" in f.violations[0]
    f = check(twice, [(0, 0), (1, 1), (2, 0), (3, 3)])
    assert "both in one batch of pid 7 epoch 0" in f.violations[0] and "copy 1: offset 0, record seq 0; copy 2" \
        in f.evidence[0]
    f = h.Findings()
    h.check_records([], {0: [(0, v(1, 0)), (1, v(1, 0))], 1: [(0, v(1, 0))]}, {1: I}, f, sources(renumbered))
    assert "copies in partitions [0, 1]" in f.violations[0]


def test_the_summary_counts_explained_duplicates_apart_and_names_their_seeds():
    ok = types.SimpleNamespace(seed=5, injected=["kill"], skipped=[], violations=[], wall_s=30.0,
                               explained=["duplicated_across_epochs: idempotent writer 1 seq 5 ..."],
                               artifacts="/tmp/kwire-faults-seed5-1",
                               counts=Counter(acknowledged=10, read=11, duplicated_across_epochs=1))
    text = "\n".join(summary_lines("long", [ok]))
    assert "1 across producer epochs, 0 under a new producer id" in text
    assert "schedules with violations: 0" in text
    assert "seed 5: explained {'duplicated_across_epochs': 1}, not violations; artifacts /tmp/kwire-faults-seed5-1" \
        in text
