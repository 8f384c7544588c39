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
* The group coordinator (found by tests/faults): an offset commit its in-sync
  replicas did not get is not acknowledged, and a coordinator paused past its
  ZooKeeper session does not serve the offsets it had before the pause.
"""
from __future__ import annotations

import os
import signal
import socket
import struct
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kazoo.client import KazooClient

from kwire.admin import zk_layout as layout
from kwire.admin.controller import PartitionState, StateWrite
from kwire.codecs.errors import ErrorCode
from kwire.testing.cluster import recv_exactly, send_request
from kwire.cluster.zk import CONTROLLED_SHUTDOWN, ZooKeeperClient
from kwire.testing.zookeeper import ZooKeeperProcess
from tests.cluster.conftest import require_zookeeper
from tests.support.counting import partition_states, wait_for


def kazoo(connect: str) -> KazooClient:
    zk = KazooClient(connect)
    zk.start(timeout=10)
    return zk


def test_sigkill_during_a_controlled_shutdown_does_not_wedge_the_broker(cluster_factory):
    cluster = cluster_factory(3, properties={"zookeeper.session.timeout.ms": 4000})
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


def test_a_restarted_broker_registers_when_its_old_session_expires_mid_registration(tmp_path):
    """Found by tests/faults: the old session's /brokers/ids/<id> made the create fail, and it
    expired before the read that followed; the NoNodeError killed the restarted broker."""
    from kwire.admin.broker_config import Listener
    zookeeper = started_zookeeper(tmp_path)
    old, new = zk_client(zookeeper.connect), zk_client(zookeeper.connect)
    try:
        info = layout.BrokerInfo.of(1, [Listener("PLAINTEXT", "127.0.0.1", 9092)])
        old.register_broker(info)
        real_get = new.client.get

        def get_after_the_old_session_ends(path, *args, **kwargs):
            if old.client.connected:
                old.stop()                 # its ephemeral node goes with its session
            return real_get(path, *args, **kwargs)
        new.client.get = get_after_the_old_session_ends
        new.register_broker(info)
        new.client.get = real_get
        _, stat = new.client.get(layout.broker_path(1))
        assert stat.ephemeralOwner == new.client.client_id[0]
    finally:
        new.stop()
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
    # the paused follower's session outlasts the test: once it expires the controller drops
    # the follower from the ISR, and the leader alone rightly commits everything
    cluster = cluster_factory(3, properties={"replica.lag.time.max.ms": 60000,
                                             "zookeeper.session.timeout.ms": 30000})
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


# -- the group coordinator under faults (found by tests/faults, seed 219) --------------------------
def coordinator_of(cluster, group: str) -> tuple[int, list[int]]:
    """(leader, followers) of the __consumer_offsets partition of ``group``."""
    from kazoo.exceptions import NoNodeError

    from kwire.groups.coordinator import partition_for
    try:
        state = partition_states(cluster.zookeeper.connect, "__consumer_offsets")
        p = state[partition_for(group, len(state))]
    except (NoNodeError, KeyError, ZeroDivisionError):      # not created yet
        return -1, []
    return p["leader"], [b for b in p["isr"] if b != p["leader"]]


def find_coordinator(address: str, group: str) -> None:
    """FindCoordinator, which creates __consumer_offsets on first use."""
    response = send_request(address, FindCoordinatorRequest[1](key=group, key_type=0), 30)
    assert response.error_code in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE), response


def commit_offset(address: str, group: str, topic: str, offset: int, timeout: float = 15.0) -> int:
    """A simple-consumer OffsetCommit v2 (no member) of ``offset`` on partition 0; its error code."""
    R = OffsetCommitRequest[2]
    request = R(group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[
                    R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata="")])])
    return send_request(address, request, timeout).topics[0].partitions[0].error_code


def fetch_offset_request(group: str, topic: str):
    R = OffsetFetchRequest[7]
    return R(group_id=group, require_stable=False,
             topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])


def answered_offset(response) -> tuple[int, int]:
    """(top-level or partition error, committed offset) of an OffsetFetch v7 answer."""
    part = response.topics[0].partitions[0] if response.topics else None
    return (response.error_code or (part.error_code if part else 0), part.committed_offset if part else -1)


def test_an_offset_commit_the_in_sync_replicas_did_not_get_is_not_acknowledged(cluster_factory):
    """Before: the coordinator waited up to 5 s for its followers, then answered success
    anyway; a failover then lost the acknowledged commit (offsets went backwards).

    The followers' ZooKeeper sessions outlast the commit's 5 s wait: once a paused follower's
    session expires, the controller drops it from the ISR, and a commit the remaining ISR
    (the leader alone, min.insync.replicas 1) has is rightly acknowledged, as in Kafka."""
    cluster = cluster_factory(3, properties={"replica.lag.time.max.ms": 60000,
                                             "zookeeper.session.timeout.ms": 30000})
    create_topics(cluster, "committed", [[1, 2, 3]])
    group = "g-unreplicated"
    leader = cluster.broker(1).bootstrap
    find_coordinator(leader, group)
    coordinator, followers = wait_for(lambda: (c := coordinator_of(cluster, group)) and len(c[1]) == 2 and c,
                                      30, "the group's offsets partition with its full ISR")
    address = cluster.broker(coordinator).bootstrap
    # NOT_COORDINATOR (retriable) until the named leader has loaded the partition
    wait_for(lambda: commit_offset(address, group, "committed", 10) == 0, 20, "a commit through the coordinator")
    for f in followers:
        cluster.pause(f)
    try:
        code = commit_offset(address, group, "committed", 20)
        assert code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR), \
            f"a commit no follower has was answered {code}"
    finally:
        for f in followers:
            cluster.resume(f)


def test_a_coordinator_paused_past_its_session_does_not_serve_stale_offsets(cluster_factory):
    cluster = cluster_factory(3, properties={"zookeeper.session.timeout.ms": 4000})
    create_topics(cluster, "committed", [[1, 2, 3]])
    group = "g-paused"
    find_coordinator(cluster.broker(1).bootstrap, group)
    coordinator, followers = wait_for(lambda: (c := coordinator_of(cluster, group)) and len(c[1]) == 2 and c,
                                      30, "the group's offsets partition with its full ISR")
    old = cluster.broker(coordinator).bootstrap
    # ZooKeeper names the leader before that broker has loaded the partition: NOT_COORDINATOR
    # (retriable, a client retries) until it has
    wait_for(lambda: commit_offset(old, group, "committed", 100) == 0, 20, "a commit through the coordinator")
    cluster.pause(coordinator)
    try:
        new = wait_for(lambda: (c := coordinator_of(cluster, group)[0]) not in (coordinator, -1) and c, 20,
                       "a new coordinator")
        wait_for(lambda: commit_offset(cluster.broker(new).bootstrap, group, "committed", 200) == 0, 20,
                 "a commit through the new coordinator")
        # Sent while the old coordinator sleeps, answered as it wakes: it must not serve 100.
        s = socket.create_connection(old.split(":"), timeout=10)
        request = fetch_offset_request(group, "committed")
        request.with_header(correlation_id=1, client_id="stale-reader")
        s.sendall(bytes(request.encode(header=True, framed=True)))
    finally:
        cluster.resume(coordinator)
    with s:
        size, = struct.unpack(">i", recv_exactly(s, 4))
        response = request.header.get_response_class().decode(recv_exactly(s, size), header=True)
    error, offset = answered_offset(response)
    assert (error, offset) != (0, 100), "a deposed coordinator served the offsets it had before the pause"
    assert error == ErrorCode.NOT_COORDINATOR or offset == 200, (error, offset)


def create_topics(cluster, name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)])[name].result(30)
