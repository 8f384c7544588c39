"""The process plumbing of cluster tests: ZooKeeperProcess, ClusterProcess, ``kwire dev-cluster``.

About what a process does, not what the cluster does: those are test_replication's.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kazoo.client import KazooClient

from kwire.testing import zookeeper as zookeeper_process
from kwire.testing.cluster import send_request
from kwire.testing.process import free_port, free_port_run
from kwire.testing.zookeeper import ZooKeeperProcess, ZooKeeperStartError, zookeeper_available

available, why = zookeeper_available()
pytestmark = pytest.mark.skipif(not available, reason=f"ZooKeeper cannot run here: {why}")


def kazoo(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=2)
    client.start(timeout=5)
    return client


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def api_versions(address: str, timeout: float = 5.0):
    return send_request(address, ApiVersionsRequest[3](client_software_name="kwire-tests",
                                                       client_software_version="1"), timeout)


def test_zookeeper_keeps_its_data_across_restart_and_kill_9():
    with ZooKeeperProcess(tick_time_ms=500) as zk:
        assert zk.alive() and zk.connect == f"127.0.0.1:{zk.port}"
        client = kazoo(zk.connect)
        client.create("/kwire-test", b"written before the restart")
        client.stop()
        client.close()

        port, data_dir = zk.port, zk.data_dir
        zk.restart()
        assert (zk.port, zk.data_dir) == (port, data_dir)
        client = kazoo(zk.connect)
        assert client.get("/kwire-test")[0] == b"written before the restart"
        client.set("/kwire-test", b"written before kill -9")      # acknowledged = in the txn log
        client.stop()
        client.close()

        pid = zk.pid
        zk.kill()
        assert not zk.alive() and zk.proc.returncode == -signal.SIGKILL
        assert not os.path.exists(f"/proc/{pid}") and refuses(port)
        zk.start()
        client = kazoo(zk.connect)
        assert client.get("/kwire-test")[0] == b"written before kill -9"
        client.stop()
        client.close()
        assert "binding to port" in zk.log_text()     # the log is not empty (one slf4j binding)
    assert not zk.alive() and not os.path.exists(data_dir)   # the temporary dir went with close()


def test_zookeeper_errors_name_the_cause(monkeypatch, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:          # someone else's port
        zk = ZooKeeperProcess(tmp_path, port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperStartError, match="exited with code") as info:
            zk.start(timeout=20)
        assert "Address already in use" in str(info.value)        # from the log tail
        assert not zk.alive()
    monkeypatch.setattr(zookeeper_process, "ZK_JAR", str(tmp_path / "missing.jar"))
    assert zookeeper_process.zookeeper_available() == (
        False, f"{tmp_path / 'missing.jar'} is missing (Debian: apt-get install zookeeper)")
    with pytest.raises(ZooKeeperStartError, match="missing.jar is missing"):
        ZooKeeperProcess(tmp_path).start()


def test_cluster_processes_each_answer_and_can_be_paused_stopped_and_restarted(cluster_factory):
    cluster = cluster_factory(3, ready=False, properties={"num.partitions": 2})
    assert sorted(cluster.brokers) == [1, 2, 3]
    assert len({b.port for b in cluster.brokers.values()}) == 3
    assert cluster.bootstrap == ",".join(cluster.broker(i).bootstrap for i in (1, 2, 3))
    for i, b in cluster.brokers.items():
        assert b.properties["broker.id"] == str(i)
        assert b.properties["zookeeper.connect"] == cluster.zookeeper.connect
        assert b.properties["zookeeper.session.timeout.ms"] == "6000"
        assert b.properties["num.partitions"] == "2"
        response = api_versions(b.bootstrap)
        assert response.error_code == 0 and any(k.api_key == 3 for k in response.api_keys)

    cluster.pause(2)
    assert cluster.live_ids() == [1, 3]
    with pytest.raises(TimeoutError):
        api_versions(cluster.broker(2).bootstrap, timeout=0.5)     # the kernel accepts, nobody answers
    cluster.resume(2)
    assert api_versions(cluster.broker(2).bootstrap).error_code == 0

    assert cluster.stop(3) == 0 and refuses(cluster.broker(3).port)
    assert cluster.start_broker(3).alive()         # a clean stop: it registers again at once
    assert api_versions(cluster.broker(3).bootstrap).error_code == 0
    snapshot = cluster.wait_until_ready(30)          # the Metadata snapshot's shape, not semantics
    assert set(snapshot["brokers"]) == {1, 2, 3} and snapshot["controller_id"] in (1, 2, 3)

    cluster.kill(1)                                  # no restart here: that waits out its session
    assert cluster.live_ids() == [2, 3] and refuses(cluster.broker(1).port)
    assert cluster.broker(1).proc.returncode == -signal.SIGKILL


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"     # a zombie has exited
    except FileNotFoundError:
        return True


def test_dev_cluster_prints_addresses_and_ctrl_c_stops_every_process(tmp_path):
    base, zk_port = free_port_run(2), free_port()
    # its own process group, so a Ctrl-C can be sent the way a terminal does: to the whole group
    proc = subprocess.Popen([sys.executable, "-m", "kwire", "dev-cluster", "--brokers", "2",
                             "--base-port", str(base), "--zookeeper-port", str(zk_port),
                             "--data-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        printed = []
        deadline = time.monotonic() + 60
        while not (printed and printed[-1].startswith("logs: ")) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "dev-cluster exited early:\n" + "".join(printed)
            printed.append(line)
        assert f"ZooKeeper: 127.0.0.1:{zk_port}\n" in printed
        assert f"bootstrap: 127.0.0.1:{base},127.0.0.1:{base + 1}\n" in printed
        children = children_of(proc.pid)
        assert len(children) == 3                                  # ZooKeeper and two brokers
        assert api_versions(f"127.0.0.1:{base + 1}").error_code == 0
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    assert out.strip() == "stopped"                                # nothing noisy on the way out
    assert all(gone(pid) for pid in children)
    assert os.path.exists(tmp_path / "zookeeper" / "data" / "version-2")   # data kept for the next run
