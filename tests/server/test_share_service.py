"""kwire.services.shares helpers: reading batch bounds from log bytes, when share groups are served."""
from __future__ import annotations

import struct

from kwire.admin.broker_config import load_broker_config
from kwire.services.shares import batch_bounds, enabled
from tests.log.logkit import build_batch


def test_batch_bounds_reads_offsets_and_the_control_bit_of_each_whole_batch():
    first = bytearray(build_batch([b"a", b"b", b"c"]))
    second = bytearray(build_batch([b"marker"]))
    struct.pack_into(">q", second, 0, 3)                 # base offset 3
    struct.pack_into(">h", second, 21, 0x30)             # transactional + control
    data = bytes(first + second)
    assert batch_bounds(data) == [(0, 2, False, len(first)), (3, 3, True, len(data))]
    assert batch_bounds(data[:-1]) == [(0, 2, False, len(first))]      # a cut batch is left out


def test_share_groups_are_served_by_default_and_in_a_cluster_and_not_when_turned_off(tmp_path):
    def config(**extra):
        return load_broker_config(None, {"log.dirs": str(tmp_path), **extra})
    assert enabled(config())
    assert not enabled(config(**{"group.share.enable": "false"}))
    assert not enabled(config(**{"group.coordinator.rebalance.protocols": "classic"}))
    assert enabled(config(**{"zookeeper.connect": "127.0.0.1:2181"}))


def _batch(base: int, values, *, producer_id=-1, transactional=False, control=False) -> bytearray:
    raw = bytearray(build_batch(values, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                base_sequence=0 if producer_id >= 0 else -1, transactional=transactional))
    struct.pack_into(">q", raw, 0, base)
    if control:
        struct.pack_into(">h", raw, 21, 0x30)
    return raw


def test_aborted_batches_are_a_producers_transactional_batches_up_to_its_marker():
    from kwire.services.shares import aborted_batches
    parts = [_batch(0, [b"a", b"b"], producer_id=7, transactional=True),       # aborted
             _batch(2, [b"c"], producer_id=8, transactional=True),             # committed elsewhere
             _batch(3, [b"m"], producer_id=7, transactional=True, control=True),
             _batch(4, [b"d"], producer_id=7, transactional=True),             # a later transaction
             _batch(5, [b"e"])]
    data = bytes(b"".join(parts))
    bounds = batch_bounds(data)
    assert aborted_batches(data, bounds, [(7, 0)]) == {0}
    assert aborted_batches(data, bounds, []) == set()


def test_group_configs_are_validated_persisted_and_reloaded(tmp_path):
    import pytest
    import trio

    from kwire.codecs.errors import KafkaApiError
    from kwire.services.group_configs import GroupConfigs
    broker_config = load_broker_config(None, {"log.dirs": str(tmp_path)})
    seen = []
    configs = GroupConfigs(str(tmp_path), lambda *change: seen.append(change), broker_config)

    async def alter(ops):
        await configs.alter("g", ops, True, False)
    trio.run(alter, [("share.auto.offset.reset", 0, "earliest"), ("share.record.lock.duration.ms", 0, "20000")])
    for bad in ([("share.auto.offset.reset", 0, "middle")], [("share.record.lock.duration.ms", 0, "999999")],
                [("no.such.config", 0, "x")], [("share.isolation.level", 2, "read_committed")]):
        with pytest.raises(KafkaApiError):
            trio.run(alter, bad)
    by_name = {e["name"]: e for e in configs.describe("g", None)}
    assert (by_name["share.auto.offset.reset"]["value"], by_name["share.auto.offset.reset"]["is_default"]) == (
        "earliest", False)
    assert by_name["share.isolation.level"]["is_default"] and by_name["share.record.lock.duration.ms"]["value"] == "20000"
    again = []
    GroupConfigs(str(tmp_path), lambda *change: again.append(change), broker_config).load()
    assert sorted(again) == [("g", "share.auto.offset.reset", "earliest"), ("g", "share.record.lock.duration.ms", "20000")]
