"""Three brokers and ZooKeeper wired so that every fault of the nemesis can be applied.

    with FaultCluster() as env:
        env.bootstrap                       # the brokers' proxies, as clients and peers see them
        env.cut(2, ("zookeeper", "peers"), "drop")
        env.heal_network()
        env.fill_disk(3); env.free_disk(3)

Like tests/cluster/conftest.py's ``isolatable_cluster``: each broker advertises
a ``TcpProxy`` in front of its listener (clients and the other brokers go
through it) and reaches ZooKeeper through a proxy of its own.  The harness
itself (Metadata, kazoo) talks to brokers and ZooKeeper directly, so it still
sees a cut-off broker.

Each broker's log.dirs is a tmpfs of its own (``DISK_MB``) so a disk can be
filled without touching the machine's; where ``mount`` fails (not root, no
tmpfs) ``disk_error`` says why and the disk-full fault is skipped with that
reason.  ``close()`` kills everything it started, unmounts and removes the
directory; it never waits on a wedged controlled shutdown.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from typing import Iterable

from kwire.testing.cluster import ClusterProcess
from tests.support.proxy import TcpProxy

__all__ = ["BROKER_PROPERTIES", "DISK_MB", "FaultCluster"]

DISK_MB = 256
FILLER = "nemesis-filler"
BROKER_PROPERTIES = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.min.isr": 2,
    "unclean.leader.election.enable": "false",
    # a move's copy is throttled (tests/faults/injector.py): the rate bites within a second
    # instead of after Kafka's 11 samples
    "replication.quota.window.num": 2,
}


class FaultCluster:
    """A ``ClusterProcess(3)`` behind proxies, with a tmpfs log dir per broker.

    Attributes: ``cluster``, ``proxies`` and ``zk_proxies`` ({broker id: TcpProxy}),
    ``bootstrap`` (the proxies' addresses), ``disk_error`` (None when every tmpfs is mounted).
    """

    def __init__(self, properties: dict | None = None, brokers: int = 3):
        self.root = tempfile.mkdtemp(prefix="kwire-faults-")
        self.cluster = ClusterProcess(brokers, properties={**BROKER_PROPERTIES, **(properties or {})},
                                      data_dir=self.root)
        zk_port = self.cluster.zookeeper.port
        taken = {zk_port, *(b.port for b in self.cluster.brokers.values())}   # chosen, not yet bound
        self.proxies = {i: _proxy(b.port, taken) for i, b in self.cluster.brokers.items()}
        self.zk_proxies = {i: _proxy(zk_port, taken) for i in self.cluster.brokers}
        for i, b in self.cluster.brokers.items():
            b.properties["advertised.listeners"] = f"PLAINTEXT://{self.proxies[i].address}"
            b.properties["zookeeper.connect"] = self.zk_proxies[i].address
        self.bootstrap = ",".join(p.address for p in self.proxies.values())
        self.mounts: list[str] = []
        self.disk_error: str | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> "FaultCluster":
        """Mount the disks, start ZooKeeper and the brokers, wait until the cluster formed.
        Raises ``ZooKeeperStartError``, ``BrokerStartError`` or ``TimeoutError``."""
        for i in self.cluster.brokers:
            self._mount(self.log_dir(i))
        self.cluster.start()
        self.cluster.wait_until_ready()
        return self

    def _mount(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        if self.disk_error is not None:
            return
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", path],
                              capture_output=True, text=True, timeout=20)
        if done.returncode == 0:
            self.mounts.append(path)
        else:
            self.disk_error = f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}"

    def close(self) -> None:
        """Kill the brokers (-9: no controlled shutdown to wait on), stop ZooKeeper, close the
        proxies, unmount, remove the directory.  Idempotent."""
        for i in list(self.cluster.brokers):
            self.cluster.resume(i)
            if self.cluster.broker(i).alive():
                self.cluster.kill(i)
        self.cluster.close()
        for p in [*self.proxies.values(), *self.zk_proxies.values()]:
            p.close()
        for path in reversed(self.mounts):
            if subprocess.run(["umount", path], capture_output=True, timeout=20).returncode != 0:
                subprocess.run(["umount", "-l", path], capture_output=True, timeout=20)
        self.mounts = []
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "FaultCluster":
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    def log_dir(self, i: int) -> str:
        return os.path.join(self.cluster.broker(i).data_dir, "logs")

    def log_dirs(self) -> dict[int, str]:
        return {i: self.log_dir(i) for i in self.cluster.brokers}

    # -- network -----------------------------------------------------------------
    def cut(self, i: int, links: Iterable[str], mode: str) -> None:
        """Partition broker ``i`` from ``links`` ("zookeeper", "peers", "clients"), both ways;
        ``mode`` "drop" black-holes, "reset" answers RST until ``heal_network()``."""
        me = self.cluster.broker(i).pid
        others = {j: self.cluster.broker(j).pid for j in self.cluster.brokers if j != i}
        for link in links:
            if link == "zookeeper":
                self._apply(self.zk_proxies[i], None, mode)
            elif link == "peers":
                self._apply(self.proxies[i], [pid for pid in others.values() if pid], mode)
                for j in others:
                    self._apply(self.proxies[j], [me], mode)
            elif link == "clients":         # every client of the suite runs in this process
                self._apply(self.proxies[i], [os.getpid()], mode)
            else:
                raise ValueError(f"unknown link {link!r}")

    @staticmethod
    def _apply(proxy: TcpProxy, pids: list[int] | None, mode: str) -> None:
        if mode == "drop":
            proxy.partition(from_pids=pids)
        elif mode == "reset":
            proxy.refuse(from_pids=pids)
        else:
            raise ValueError(f"unknown mode {mode!r}")

    def heal_network(self) -> None:
        for p in [*self.proxies.values(), *self.zk_proxies.values()]:
            p.heal()

    # -- disks -------------------------------------------------------------------
    def fill_disk(self, i: int) -> int:
        """Fill broker ``i``'s log dir with a filler file until ENOSPC; returns its size.
        Raises ``RuntimeError`` when the log dir is not a tmpfs of ours."""
        path = self.log_dir(i)
        if path not in self.mounts:
            raise RuntimeError(self.disk_error or f"{path} is not a tmpfs of the suite")
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(os.path.join(path, FILLER), "wb", buffering=0) as f:
            while chunk:
                try:
                    written += f.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    chunk = chunk[:len(chunk) // 16]        # top up with smaller writes
        return written

    def free_disk(self, i: int) -> None:
        try:
            os.unlink(os.path.join(self.log_dir(i), FILLER))
        except FileNotFoundError:
            pass


def _proxy(target_port: int, taken: set[int]) -> TcpProxy:
    """A proxy to ``target_port`` on a port outside ``taken`` (the OS may hand a proxy the port
    it just gave ``free_port()`` for a broker that has not bound it yet); adds its port."""
    rejected = []
    try:
        while True:
            proxy = TcpProxy("127.0.0.1", target_port)
            if proxy.port not in taken:
                taken.add(proxy.port)
                return proxy
            rejected.append(proxy)
    finally:
        for proxy in rejected:
            proxy.close()
