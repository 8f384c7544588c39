"""A full disk: appends fail whole with KAFKA_STORAGE_ERROR, no offset is reused, kill -9 loses
nothing acknowledged, and producing resumes once space is freed (a real 20 MB tmpfs)."""
import errno
import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaError
from kafka import KafkaConsumer, TopicPartition as KafkaTopicPartition

from tests.support.broker import BrokerProcess
from tests.support.measure import produce_one_record_batches

pytestmark = pytest.mark.clients
PARTITIONS = 50


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def produce(bootstrap, topic, items):
    """One-record batches, no retries; ({(partition, offset): value}, [error codes])."""
    return produce_one_record_batches(bootstrap, topic, items)


def fill(path):
    """Write a filler file until the disk has 0 bytes free."""
    filler = os.path.join(path, "filler")
    chunk = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 4096, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    assert os.statvfs(path).f_bavail == 0
    return filler


def read_all(bootstrap, topic, expected, timeout=40):
    """{(partition, offset): value} read with kafka-python, no group (no coordinator needed)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    c.assign([KafkaTopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    got, deadline = {}, time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        for tp, messages in c.poll(timeout_ms=500).items():
            for m in messages:
                assert (tp.partition, m.offset) not in got
                got[(tp.partition, m.offset)] = m.value
    c.close()
    return got


def test_full_disk_fails_whole_appends_and_kill_9_loses_nothing(tmp_path, small_disk):
    b = BrokerProcess(str(tmp_path / "broker"), properties={
        "log.dirs": small_disk, "num.partitions": PARTITIONS})
    b.start()
    try:
        topic = f"full-{uuid.uuid4().hex[:6]}"
        acked, errors = produce(b.bootstrap, topic, [(p, b"pre-%02d-%02d" % (p, i))
                                                     for i in range(26) for p in range(PARTITIONS)])
        assert len(acked) == 26 * PARTITIONS and not errors
        filler = fill(small_disk)
        attempts = [(p, b"full-%02d-%03d" % (p, i)) for i in range(60) for p in range(PARTITIONS)]
        more, errors = produce(b.bootstrap, topic, attempts)
        assert errors and set(errors) == {KafkaError.KAFKA_STORAGE_ERROR}, set(errors)
        assert not set(more) & set(acked), "an offset was reused"
        acked.update(more)
        text = b.log_text()
        assert "storage error" in text and text.count(" ERROR ") < len(errors)

        b.kill()
        b.start()
        got = read_all(b.bootstrap, topic, len(acked))
        lost = [tp for tp, value in acked.items() if got.get(tp) != value]
        print(f"\nfull disk: attempted={len(attempts)} acknowledged={len(acked)} "
              f"(while full: {len(more)}, KAFKA_STORAGE_ERROR: {len(errors)}) "
              f"read after kill -9={len(got)} lost={len(lost)}")
        assert not lost and len(got) == len(acked), b.log_text()[-3000:]
        for p in range(PARTITIONS):         # offsets dense: nothing unacknowledged slipped in
            offsets = sorted(o for q, o in got if q == p)
            assert offsets == list(range(len(offsets)))

        os.unlink(filler)
        again, errors = produce(b.bootstrap, topic, [(p, b"freed") for p in range(PARTITIONS)])
        print(f"after freeing space: acknowledged={len(again)} errors={len(errors)}")
        assert len(again) == PARTITIONS and not errors
    finally:
        b.close()


def test_with_two_log_dirs_a_full_one_fails_only_its_own_partitions(tmp_path, small_disk):
    """JBOD: the topic whose partitions live on the full disk answers KAFKA_STORAGE_ERROR; the
    topic on the other dir keeps taking writes; both recover once space is freed, and nothing
    acknowledged is lost across a kill -9."""
    roomy = str(tmp_path / "roomy")
    b = BrokerProcess(str(tmp_path / "broker"), properties={"log.dirs": f"{roomy},{small_disk}", "num.partitions": 4})
    b.start()
    try:
        acked = {}
        for topic in ("on-roomy", "on-small"):          # the least-loaded dir takes each new topic
            got, errors = produce(b.bootstrap, topic, [(p, b"pre") for p in range(4)])
            assert len(got) == 4 and not errors
            acked.update({(topic, *k): v for k, v in got.items()})
        assert os.path.isdir(os.path.join(roomy, "on-roomy-0")) and os.path.isdir(os.path.join(small_disk, "on-small-0"))
        filler = fill(small_disk)
        ok, errors = produce(b.bootstrap, "on-roomy", [(p, b"while-full-%d" % i) for i in range(20) for p in range(4)])
        assert len(ok) == 80 and not errors, errors
        acked.update({("on-roomy", *k): v for k, v in ok.items()})
        # (a record may still fit in a segment file's last page: enough to need new pages)
        landed, errors = produce(b.bootstrap, "on-small", [(p, b"x" * 8192) for _ in range(10) for p in range(4)])
        assert errors and set(errors) == {KafkaError.KAFKA_STORAGE_ERROR}, errors
        acked.update({("on-small", *k): v for k, v in landed.items()})
        os.unlink(filler)
        again, errors = produce(b.bootstrap, "on-small", [(p, b"freed") for p in range(4)])
        assert len(again) == 4 and not errors
        acked.update({("on-small", *k): v for k, v in again.items()})

        b.kill()
        b.start()
        got = {}
        for topic in ("on-roomy", "on-small"):
            c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, group_id=None)
            c.assign([KafkaTopicPartition(topic, p) for p in range(4)])
            c.seek_to_beginning()
            deadline = time.monotonic() + 30
            while sum(1 for k in got if k[0] == topic) < sum(1 for k in acked if k[0] == topic) \
                    and time.monotonic() < deadline:
                for tp, messages in c.poll(timeout_ms=500).items():
                    for m in messages:
                        got[(topic, tp.partition, m.offset)] = m.value
            c.close()
        assert got == acked
    finally:
        b.close()
