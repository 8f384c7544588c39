"""__consumer_offsets is compacted: after 1,000,000 offset commits a restart replays only
the live keys (plus the active segment), and the group's offsets are all there."""
from __future__ import annotations

import os
import re
import time

from confluent_kafka import Consumer, TopicPartition

from kwire.testing.process import BrokerProcess

PARTITIONS = 1000
ROUNDS = 300                       # x PARTITIONS = 300,000 commits: tens of 1 MiB segments of history
SEGMENT_BYTES = 1 << 20


def offsets_dir_bytes(b: BrokerProcess) -> int:
    path = os.path.join(b.data_dir, "logs", "__consumer_offsets-0")
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path) if n.endswith(".log"))


def committed(bootstrap: str, group: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition("many", p) for p in range(PARTITIONS)], timeout=60)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def test_a_restart_after_300000_commits_replays_only_the_live_keys(tmp_path):
    b = BrokerProcess(str(tmp_path), **{"offsets.topic.num.partitions": "1",
                                        "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
                                        "log.cleaner.backoff.ms": "200",
                                        "num.partitions": str(PARTITIONS)})
    b.start()
    try:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "many-commits", "enable.auto.commit": False})
        c.list_topics("many", timeout=30)                            # auto-created, 1000 partitions
        for r in range(ROUNDS):
            c.commit(offsets=[TopicPartition("many", p, r + 1) for p in range(PARTITIONS)], asynchronous=False)
        c.close()
        written = ROUNDS * PARTITIONS
        # the cleaner catches up: what is left is one record per partition plus the active segment
        deadline = time.monotonic() + 120
        while offsets_dir_bytes(b) > 3 * SEGMENT_BYTES and time.monotonic() < deadline:
            time.sleep(0.5)
        size = offsets_dir_bytes(b)
        assert size <= 3 * SEGMENT_BYTES, f"__consumer_offsets still holds {size} bytes after {written} commits"
        assert "cleaned __consumer_offsets-0" in b.log_text()

        b.stop()
        started = time.monotonic()
        b.start()
        offsets = committed(b.bootstrap, "many-commits")
        ready_s = time.monotonic() - started
        assert offsets == {p: ROUNDS for p in range(PARTITIONS)}
        replayed = [int(n) for n in re.findall(r"replayed (\d+) group record", b.log_text())][-1]
        # live keys plus at most the active segment's records (over 20 bytes each), not the history
        assert replayed <= PARTITIONS + SEGMENT_BYTES // 20, (replayed, written)
        assert ready_s < 30, f"start-up to committed offsets took {ready_s:.1f} s"
    finally:
        b.close()
