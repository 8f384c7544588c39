"""Apache ZooKeeper as a child process, for ``kwire dev-cluster`` and the cluster tests.

ZooKeeper comes from Debian's ``zookeeper`` package and runs with ``java``
(QuorumPeerMain, standalone).  ``restart()`` keeps its port and data, so
sessions survive as with a real ZooKeeper restart.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from .testing_process import free_port, wait_port

ZK_JAR = "/usr/share/java/zookeeper.jar"


def zookeeper_available() -> tuple[bool, str]:
    if shutil.which("java") is None:
        return False, "java is not installed (Debian: openjdk-17-jre-headless)"
    if not os.path.exists(ZK_JAR):
        return False, f"{ZK_JAR} is missing (Debian: zookeeper)"
    return True, ""


class ZooKeeper:
    """One standalone ZooKeeper server; ``restart()`` keeps its port and data."""

    def __init__(self, data_dir: str, port: int | None = None):
        self.dir = data_dir
        self.port = port or free_port()
        os.makedirs(os.path.join(data_dir, "data"), exist_ok=True)
        with open(os.path.join(data_dir, "zoo.cfg"), "w") as f:
            f.write(f"tickTime=500\ndataDir={data_dir}/data\nclientPort={self.port}\n"
                    "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                    "minSessionTimeout=1000\nmaxSessionTimeout=60000\n")
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "ZooKeeper":
        with open(os.path.join(self.dir, "zookeeper.log"), "ab") as log:
            self.proc = subprocess.Popen(
                ["java", "-Xmx256m", "-cp", f"{ZK_JAR}:/usr/share/java/*",
                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", "zoo.cfg"],
                cwd=self.dir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_port("127.0.0.1", self.port, timeout, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()
