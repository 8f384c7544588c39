"""``__transaction_state`` records: golden bytes derived by hand from Kafka's
TransactionLogKey.json/TransactionLogValue.json, round trips, malformed input."""
import struct

import pytest
from hypothesis import given, strategies as st

from kwire.groups import txn_records as R
from kwire.groups.txn_records import TxnLogValue, TxnRecordError, TxnState

S = TxnState


def h(text: str) -> bytes:
    """Hex digits; whitespace and ``# comments`` ignored."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()).replace(" ", ""))


# -- golden bytes ---------------------------------------------------------------
def test_key_golden():
    #            version | int16 len 2 | "tx"
    assert R.encode_key("tx") == h("0000 0002 7478")
    assert R.decode_key(h("0000 0002 7478")) == "tx"
    assert R.encode_key("") == h("0000 0000")


ONGOING = TxnLogValue(producer_id=1000, producer_epoch=5, transaction_timeout_ms=60000, state=S.ONGOING,
                      partitions=(("t", (0, 2)),), last_update_timestamp_ms=1000, start_timestamp_ms=900)

ONGOING_V0 = h("""
    0000                                  # version 0
    0000 0000 0000 03e8                   # producer_id 1000
    0005                                  # producer_epoch 5
    0000 ea60                             # transaction_timeout_ms 60000
    01                                    # transaction_status Ongoing
    0000 0001                             # 1 topic
    0001 74                               #   "t"
    0000 0002 0000 0000 0000 0002         #   partition ids [0, 2]
    0000 0000 0000 03e8                   # last_update_timestamp 1000
    0000 0000 0000 0384                   # start_timestamp 900
""")


def test_value_v0_golden():
    assert R.encode_value(ONGOING) == ONGOING_V0
    assert R.decode_value(ONGOING_V0) == ONGOING


def test_empty_value_writes_a_null_partition_array():
    v = TxnLogValue(7, 0, 60000, S.EMPTY, (), 5, -1)
    golden = h("0000 0000000000000007 0000 0000ea60 00 ffffffff 0000000000000005 ffffffffffffffff")
    assert R.encode_value(v) == golden
    assert R.decode_value(golden) == v
    with pytest.raises(TxnRecordError):
        R.encode_value(TxnLogValue(7, 0, 60000, S.EMPTY, (("t", (0,)),), 5, -1))


def test_complete_value_writes_an_empty_partition_array():
    v = TxnLogValue(7, 1, 60000, S.COMPLETE_COMMIT, (), 5, 3)
    assert R.encode_value(v) == h("0000 0000000000000007 0001 0000ea60 04 00000000 0000000000000005 0000000000000003")


def test_value_v1_golden():
    # compact array: uvarint N+1; compact string: uvarint len+1; every struct ends with tagged fields
    plain = h("0001 00000000000003e8 0005 0000ea60 01"
              " 02  02 74  03 00000000 00000002  00"
              " 00000000000003e8 0000000000000384 00")
    assert R.encode_value(ONGOING, version=1) == plain
    assert R.decode_value(plain) == ONGOING
    tagged = TxnLogValue(1000, 5, 60000, S.ONGOING, (("t", (0, 2)),), 1000, 900,
                         previous_producer_id=3, next_producer_id=4, client_transaction_version=1)
    golden = plain[:-1] + h("03  00 08 0000000000000003  01 08 0000000000000004  02 02 0001")
    assert R.encode_value(tagged, version=1) == golden
    assert R.decode_value(golden) == tagged
    # v0 has no room for the tagged fields
    assert R.decode_value(R.encode_value(tagged)) == ONGOING
    # an Empty value: null compact array (0)
    empty = h("0001 0000000000000007 0000 0000ea60 00 00 0000000000000005 ffffffffffffffff 00")
    assert R.decode_value(empty) == TxnLogValue(7, 0, 60000, S.EMPTY, (), 5, -1)
    assert R.encode_value(TxnLogValue(7, 0, 60000, S.EMPTY, (), 5, -1), version=1) == empty


def test_v1_unknown_tagged_fields_are_skipped():
    plain = R.encode_value(ONGOING, version=1)
    unknown = plain[:-1] + h("01 09 03 aabbcc")       # tag 9, 3 bytes
    assert R.decode_value(unknown) == ONGOING
    in_partition = plain.replace(h("00000002 00"), h("00000002 01 05 01 ff"), 1)
    assert R.decode_value(in_partition) == ONGOING


def test_state_numbering_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert TxnState.from_kafka_name("PrepareAbort") is S.PREPARE_ABORT
    assert TxnState.from_kafka_name("prepareabort") is None


def test_partitions_of_groups_and_sorts():
    assert R.partitions_of({("b", 1), ("a", 3), ("b", 0), ("a", 3)}) == (("a", (3,)), ("b", (0, 1)))
    assert ONGOING.topic_partitions() == {("t", 0), ("t", 2)}


# -- malformed input ---------------------------------------------------------------
def test_unknown_key_version_is_skipped():
    assert R.decode_key(h("0001 0002 7478")) is None
    assert R.decode_key(h("ffff")) is None


@pytest.mark.parametrize("version", [0, 1])
def test_truncated_and_trailing_bytes_are_rejected(version):
    value = R.encode_value(ONGOING, version=version)
    for cut in range(len(value)):
        with pytest.raises(TxnRecordError):
            R.decode_value(value[:cut])
    with pytest.raises(TxnRecordError):
        R.decode_value(value + b"\x00")
    key = R.encode_key("tx")
    for cut in range(len(key)):
        with pytest.raises(TxnRecordError):
            R.decode_key(key[:cut])
    with pytest.raises(TxnRecordError):
        R.decode_key(key + b"\x00")


def test_bad_values_are_rejected():
    with pytest.raises(TxnRecordError, match="version 2"):
        R.decode_value(h("0002") + ONGOING_V0[2:])
    with pytest.raises(TxnRecordError, match="status 8"):
        R.decode_value(ONGOING_V0[:16] + b"\x08" + ONGOING_V0[17:])
    with pytest.raises(TxnRecordError, match="array length"):       # more topics than bytes
        R.decode_value(ONGOING_V0[:17] + struct.pack(">i", 10**6) + ONGOING_V0[21:])
    with pytest.raises(TxnRecordError, match="array length"):
        R.decode_value(ONGOING_V0[:17] + struct.pack(">i", -2) + ONGOING_V0[21:])
    with pytest.raises(TxnRecordError, match="UTF-8"):
        R.decode_value(ONGOING_V0.replace(h("0001 74"), h("0001 ff"), 1))
    with pytest.raises(TxnRecordError, match="null string"):
        R.decode_key(h("0000 ffff"))
    with pytest.raises(TxnRecordError, match="varint"):
        R.decode_value(h("0001 00000000000003e8 0005 0000ea60 01 ffffffffff7f"))
    with pytest.raises(TxnRecordError, match="tagged field 0"):
        R.decode_value(R.encode_value(ONGOING, version=1)[:-1] + h("01 00 01 05"))
    with pytest.raises(TxnRecordError):
        R.encode_value(ONGOING, version=2)


@given(st.binary(max_size=80))
def test_random_bytes_decode_or_raise_txn_record_error(data):
    for decode in (R.decode_key, R.decode_value):
        try:
            decode(data)
        except TxnRecordError:
            pass


@given(st.binary(max_size=40))
def test_random_bytes_after_a_valid_prefix(data):
    for prefix in (ONGOING_V0[:21], R.encode_value(ONGOING, version=1)[:19]):
        try:
            R.decode_value(prefix + data)
        except TxnRecordError:
            pass


# -- round trips -----------------------------------------------------------------------
int16 = st.integers(-2**15, 2**15 - 1)
int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)
partitions = st.lists(st.tuples(st.text(max_size=8), st.lists(int32, max_size=4).map(tuple)), max_size=4).map(tuple)


@st.composite
def values(draw, tagged: bool):
    state = draw(st.sampled_from(list(S)))
    parts = () if state is S.EMPTY else draw(partitions)
    extra = (draw(int64), draw(int64), draw(int16)) if tagged else (-1, -1, 0)
    return TxnLogValue(draw(int64), draw(int16), draw(int32), state, parts, draw(int64), draw(int64), *extra)


@given(st.text(max_size=50))
def test_key_round_trip(transactional_id):
    assert R.decode_key(R.encode_key(transactional_id)) == transactional_id


@given(values(tagged=False))
def test_value_v0_round_trip(v):
    assert R.decode_value(R.encode_value(v)) == v


@given(values(tagged=True))
def test_value_v1_round_trip(v):
    assert R.decode_value(R.encode_value(v, version=1)) == v
