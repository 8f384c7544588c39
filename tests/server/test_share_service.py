"""kwire.share_service helpers: reading batch bounds from log bytes, when share groups are served."""
from __future__ import annotations

import struct

from kwire.admin.broker_config import load_broker_config
from kwire.share_service import batch_bounds, enabled
from tests.log.logkit import build_batch


def test_batch_bounds_reads_offsets_and_the_control_bit_of_each_whole_batch():
    first = bytearray(build_batch([b"a", b"b", b"c"]))
    second = bytearray(build_batch([b"marker"]))
    struct.pack_into(">q", second, 0, 3)                 # base offset 3
    struct.pack_into(">h", second, 21, 0x30)             # transactional + control
    data = bytes(first + second)
    assert batch_bounds(data) == [(0, 2, False, len(first)), (3, 3, True, len(data))]
    assert batch_bounds(data[:-1]) == [(0, 2, False, len(first))]      # a cut batch is left out


def test_share_groups_are_served_by_default_and_not_when_turned_off_or_in_a_cluster(tmp_path):
    def config(**extra):
        return load_broker_config(None, {"log.dirs": str(tmp_path), **extra})
    assert enabled(config())
    assert not enabled(config(**{"group.share.enable": "false"}))
    assert not enabled(config(**{"group.coordinator.rebalance.protocols": "classic"}))
    assert not enabled(config(**{"zookeeper.connect": "127.0.0.1:2181"}))
