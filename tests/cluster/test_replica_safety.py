"""Issue 28's cluster findings that need ZooKeeper or broker processes.

* SIGTERM then SIGKILL inside a controlled shutdown must not leave the broker
  "shutting down" for ever (its single-replica partitions at leader -1).
* Becoming controller is one ZooKeeper multi-op: a broker whose /controller
  vanished before it bumped /controller_epoch cannot bump it after the real
  controller did.
* An ISR write whose first attempt was applied before the connection dropped
  (its retry then meets BadVersion) is recognised on read-back.
* A follower's fetch is validated before it counts: an offset past the log end
  does not move the high watermark, and a broker that is not a replica is refused.
"""
from __future__ import annotations

import os
import signal
import socket
import struct
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kazoo.client import KazooClient

from kwire.admin import zk_layout as layout
from kwire.admin.controller import PartitionState, StateWrite
from kwire.codecs.errors import ErrorCode
from kwire.zk import CONTROLLED_SHUTDOWN, ZooKeeperClient
from kwire.zookeeper_process import ZooKeeperProcess
from tests.cluster.conftest import require_zookeeper
from tests.support.counting import partition_states, wait_for


def kazoo(connect: str) -> KazooClient:
    zk = KazooClient(connect)
    zk.start(timeout=10)
    return zk


def test_sigkill_during_a_controlled_shutdown_does_not_wedge_the_broker(cluster_factory):
    cluster = cluster_factory(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic("only-on-2", num_partitions=2, replica_assignment=[[2], [2]]),
                                   NewTopic("everywhere", num_partitions=1, replica_assignment=[[2, 1, 3]])])
    for future in futures.values():
        future.result(30)
    connect = cluster.zookeeper.connect
    wait_for(lambda: len(partition_states(connect, "everywhere").get(0, {}).get("isr", [])) == 3, 30,
             "the full ISR of 'everywhere'")
    zk = kazoo(connect)
    try:
        os.kill(cluster.broker(2).pid, signal.SIGTERM)      # a process manager escalates ...
        marker = f"{CONTROLLED_SHUTDOWN}/2"
        deadline = time.monotonic() + 10
        while zk.exists(marker) is None:
            assert time.monotonic() < deadline, "broker 2 never asked for a controlled shutdown"
            time.sleep(0.001)
        cluster.kill(2)                                     # ... to SIGKILL mid-shutdown
        cluster.start_broker(2)                             # after its old session expired

        def recovered():
            states = partition_states(connect, "only-on-2")
            return (all(s["leader"] == 2 for s in states.values())
                    and 2 in partition_states(connect, "everywhere")[0]["isr"]) and states
        wait_for(recovered, 20, "broker 2 to lead its single-replica partitions and rejoin the ISR "
                                f"(states {partition_states(connect, 'only-on-2')}, "
                                f"marker left: {zk.exists(marker) is not None})")
        assert zk.exists(marker) is None
    finally:
        zk.stop()


def started_zookeeper(tmp_path) -> ZooKeeperProcess:
    require_zookeeper()
    return ZooKeeperProcess(str(tmp_path / "zk")).start()


def zk_client(connect: str) -> ZooKeeperClient:
    client = ZooKeeperClient(connect, 6000, 10000, lambda: None, lambda state: None)
    client.start()
    client.ensure_paths()
    return client


def test_a_broker_that_lost_the_controller_race_cannot_bump_the_epoch(tmp_path):
    """A: /controller created, then its session ends (the znode goes) before it read and
    bumped /controller_epoch; B becomes controller meanwhile.  Before the fix A then bumped the
    epoch too, and B's fenced writes failed for good while B never resigned."""
    zookeeper = started_zookeeper(tmp_path)
    a, b = zk_client(zookeeper.connect), zk_client(zookeeper.connect)
    try:
        a.client.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(7), makepath=True)
        results = {}
        real_get = a.client.get

        def get_with_a_race(path, *args, **kwargs):
            if path == layout.CONTROLLER_EPOCH and "b" not in results:
                if a.client.exists(layout.CONTROLLER):
                    a.client.delete(layout.CONTROLLER)       # what A's session expiry does
                results["b"] = b.try_become_controller(2, 0)
            return real_get(path, *args, **kwargs)
        a.client.get = get_with_a_race
        results["a"] = a.try_become_controller(1, 0)
        a.client.get = real_get

        winners = {name: won for name, won in results.items() if won is not None}
        assert list(winners) == ["b"], f"both think they are controller: {results}"
        epoch, version = winners["b"]
        data, stat = b.client.get(layout.CONTROLLER_EPOCH)
        assert (layout.decode_controller_epoch(data), stat.version) == (epoch, version) == (8, 1)
        assert layout.decode_controller(b.client.get(layout.CONTROLLER)[0]) == 2
        write = StateWrite("t", 0, PartitionState(2, 0, (2,), epoch), layout.NEW_ZNODE)
        assert b.write_states([write], version) == 1, "the real controller's writes are fenced"
    finally:
        a.stop()
        b.stop()
        zookeeper.close()


def test_an_isr_write_applied_before_a_dropped_connection_counts_on_read_back(tmp_path):
    zookeeper = started_zookeeper(tmp_path)
    zk = zk_client(zookeeper.connect)
    try:
        path = layout.partition_state_path("t", 0)
        zk.client.create(path, layout.encode_partition_state(PartitionState(1, 3, (1, 2), 5)), makepath=True)
        ours = PartitionState(1, 3, (1, 2, 3), 5)
        # The first attempt landed (the connection then dropped); the retry meets BadVersion.
        zk.client.set(path, layout.encode_partition_state(ours), version=0)
        assert zk.write_isr("t", 0, ours, 0) == 1
        # Someone else's write is not ours: a lost race.
        zk.client.set(path, layout.encode_partition_state(PartitionState(2, 4, (2,), 6)), version=1)
        assert zk.write_isr("t", 0, PartitionState(1, 3, (1,), 5), 1) is None
    finally:
        zk.stop()
        zookeeper.close()


def raw_fetch(address: str, replica_id: int, topic: str, fetch_offset: int, leader_epoch: int = -1):
    """One Fetch v12 as broker ``replica_id`` (or a consumer with -1) would send it."""
    host, port = address.split(":")
    T = FetchRequest[12].FetchTopic
    body = FetchRequest[12](
        replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[T(topic=topic, partitions=[
            T.FetchPartition(partition=0, current_leader_epoch=leader_epoch, fetch_offset=fetch_offset,
                             last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])]
    ).encode(version=12)
    header = struct.pack(">hhih", 1, 12, 1, 4) + b"test" + b"\x00"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + bytes(body))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    return FetchResponse.decode(memoryview(frame)[5:], version=12).responses[0].partitions[0]


def test_a_follower_fetch_is_validated_before_it_moves_the_high_watermark(cluster_factory):
    cluster = cluster_factory(3, properties={"replica.lag.time.max.ms": 60000})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("checked", num_partitions=1, replica_assignment=[[1, 2]])])["checked"].result(30)
    wait_for(lambda: partition_states(cluster.zookeeper.connect, "checked")[0]["isr"] == [1, 2], 30,
             "the full ISR")
    epoch = partition_states(cluster.zookeeper.connect, "checked")[0]["leader_epoch"]
    leader = cluster.broker(1).bootstrap
    cluster.pause(2)                                  # the real follower stops fetching
    try:
        producer = Producer({"bootstrap.servers": leader, "acks": "1"})
        for i in range(5):
            producer.produce("checked", value=b"%d" % i, partition=0)
        assert producer.flush(20) == 0
        hw = raw_fetch(leader, -1, "checked", 0).high_watermark
        assert hw < 5

        past_the_end = raw_fetch(leader, 2, "checked", 5 + 1000, epoch)
        assert past_the_end.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert raw_fetch(leader, -1, "checked", 0).high_watermark == hw, \
            "an invalid follower fetch committed records the follower does not have"

        stranger = raw_fetch(leader, 7, "checked", 0, epoch)
        assert stranger.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert not stranger.records
    finally:
        cluster.resume(2)
    wait_for(lambda: raw_fetch(leader, -1, "checked", 0).high_watermark == 5, 20,
             "the high watermark once the follower fetches again")
