"""Apache ZooKeeper as a child process, for ``kwire dev-cluster`` and the cluster tests.

    from kwire.testing.zookeeper import ZooKeeperProcess

    with ZooKeeperProcess() as zk:                 # a temporary data dir, a free port
        ...  zookeeper.connect=zk.connect ...
        zk.kill()                                   # kill -9
        zk.start()                                  # same port, same data

ZooKeeper comes from Debian's ``zookeeper`` package (scripts/test installs it
on CI) and runs standalone with ``java`` (``QuorumPeerMain zoo.cfg``).
``zookeeper_available()`` says why it cannot run here, for a skip reason.

Each ``ZooKeeperProcess`` owns a free 127.0.0.1 port, chosen once so a restart
keeps it, and a directory laid out as ``<data_dir>/zoo.cfg``,
``<data_dir>/data`` (ZooKeeper's ``dataDir``: snapshots and transaction log,
kept across restarts) and ``<data_dir>/zookeeper.log`` (stdout and stderr,
appended across runs).  The server is "ready" when a real client session
lists ``/`` (ZooKeeper 3.8 disables the four-letter-word commands, and an open
port alone does not mean it serves requests yet).

Logging goes through slf4j-simple when Debian ships it: with the whole of
/usr/share/java on the class path slf4j binds to whichever of several
bindings comes first (often slf4j-nop) and the log stays empty.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from kwire.testing.process import BrokerStartError, free_port, wait_port

__all__ = ["ZooKeeper", "ZooKeeperProcess", "ZooKeeperStartError", "zookeeper_available"]

ZK_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A small heap and the C1 compiler only: a test ZooKeeper holds a few hundred znodes and
# should start in well under a second.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
               "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
# The readiness probe's kazoo client: connections dropped while ZooKeeper is still loading
# its data are expected and retried, so only errors are worth printing.
_probe_logger = logging.getLogger("kwire.testing.zookeeper.probe")
_probe_logger.setLevel(logging.ERROR)


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper cannot run here, exited, or did not serve in time; the message ends with its log."""


def zookeeper_available() -> tuple[bool, str]:
    """``(True, "")`` when ``java`` and Debian's ZooKeeper jar are present, else ``(False, reason)``."""
    if shutil.which("java") is None:
        return False, "java is not on PATH (Debian: apt-get install zookeeper, which pulls in a JRE)"
    if not os.path.exists(ZK_JAR):
        return False, f"{ZK_JAR} is missing (Debian: apt-get install zookeeper)"
    return True, ""


def classpath() -> str:
    """The jar (its manifest lists its dependencies) plus one slf4j binding."""
    if os.path.exists(SLF4J_SIMPLE_JAR):
        return f"{ZK_JAR}:{SLF4J_SIMPLE_JAR}"
    return f"{ZK_JAR}:/usr/share/java/*"


class ZooKeeperProcess:
    """One standalone ZooKeeper server in a child process: start, stop (SIGTERM), kill (-9), restart.

    ``data_dir`` is kept (a temporary one is made, and removed by ``close()``,
    when it is None); ``port`` defaults to a free one; ``tick_time_ms`` is
    ZooKeeper's tickTime (sessions may last 2..120 ticks, so the default 500 ms
    allows session timeouts of 1 s to 60 s); ``new_session`` puts the child in
    a session of its own so a Ctrl-C in the terminal does not reach it.

    Attributes: ``port``, ``connect`` ("127.0.0.1:PORT"), ``data_dir``,
    ``log_path``, ``proc`` (the ``subprocess.Popen`` of the current run).
    """

    def __init__(self, data_dir: str | os.PathLike | None = None, *, port: int | None = None,
                 tick_time_ms: int = 500, new_session: bool = False):
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.new_session = new_session
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kwire-zookeeper-")
            data_dir = self._tmp.name
        self.data_dir = os.path.abspath(os.fspath(data_dir))
        self.log_path = os.path.join(self.data_dir, "zookeeper.log")
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect`` and ``KazooClient(hosts=...)``."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def config(self) -> str:
        """The text of zoo.cfg."""
        return (f"tickTime={self.tick_time_ms}\ndataDir={os.path.join(self.data_dir, 'data')}\n"
                f"clientPort={self.port}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                f"minSessionTimeout={2 * self.tick_time_ms}\nmaxSessionTimeout={120 * self.tick_time_ms}\n")

    def command(self) -> list[str]:
        return ["java", *JVM_OPTIONS, "-cp", classpath(), MAIN_CLASS, os.path.join(self.data_dir, "zoo.cfg")]

    # -- lifecycle ---------------------------------------------------------------
    def start(self, timeout: float = 30) -> "ZooKeeperProcess":
        """Start the server and return once it serves a client session; after ``stop()`` or
        ``kill()`` this restarts it on the same port and data.

        Raises ``RuntimeError`` if it already runs, ``ZooKeeperStartError`` (with the
        log's tail) if java or the jar is missing, the process exits, or it does not
        serve within ``timeout`` seconds; a server that did not come up is killed.
        """
        if self.alive():
            raise RuntimeError(f"ZooKeeper already runs (pid {self.proc.pid})")
        ok, why = zookeeper_available()
        if not ok:
            raise ZooKeeperStartError(f"ZooKeeper cannot run here: {why}")
        os.makedirs(os.path.join(self.data_dir, "data"), exist_ok=True)
        with open(os.path.join(self.data_dir, "zoo.cfg"), "w") as f:
            f.write(self.config())
        with open(self.log_path, "ab") as log:
            try:
                self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.data_dir,
                                             start_new_session=self.new_session)
            except OSError as exc:
                raise ZooKeeperStartError(f"could not execute java: {exc}") from None
        try:
            self.wait_ready(timeout)
        except ZooKeeperStartError:
            self._signal(signal.SIGKILL)
            raise
        return self

    def wait_ready(self, timeout: float = 30) -> None:
        """Return once a kazoo session lists ``/``.  Raises ``ZooKeeperStartError``."""
        deadline = time.monotonic() + timeout
        try:
            wait_port("127.0.0.1", self.port, timeout, self.proc)
        except BrokerStartError:            # wait_port speaks of "the broker": say what happened here
            if self.proc.poll() is not None:
                raise self._error(f"ZooKeeper exited with code {self.proc.returncode}") from None
            raise self._error(f"ZooKeeper did not listen on {self.connect} within {timeout:.0f} s") from None
        try:
            self._list_root(deadline)
        except ZooKeeperStartError:
            raise
        except Exception as exc:            # kazoo's timeout and connection errors alike
            raise self._error(f"ZooKeeper on {self.connect} did not serve a session: {exc!r}") from None

    def _list_root(self, deadline: float) -> None:
        """One kazoo session lists ``/``; fails fast if the process exits meanwhile (the port
        may belong to someone else: ZooKeeper then exits with "Address already in use")."""
        from kazoo.client import KazooClient    # only here: importing this module stays cheap
        client = KazooClient(hosts=self.connect, timeout=max(2 * self.tick_time_ms / 1000, 1.0),
                             logger=_probe_logger)
        try:
            connected = client.start_async()
            while not connected.wait(0.05):
                if self.proc.poll() is not None:
                    raise self._error(f"ZooKeeper exited with code {self.proc.returncode}")
                if time.monotonic() > deadline:
                    raise self._error(f"ZooKeeper on {self.connect} did not serve a session in time")
            client.get_children("/")
        finally:
            client.stop()
            client.close()

    def _error(self, what: str) -> ZooKeeperStartError:
        return ZooKeeperStartError(f"{what}; log tail ({self.log_path}):\n{self.log_tail()}")

    def stop(self, timeout: float = 10) -> int | None:
        """SIGTERM and wait (ZooKeeper syncs and closes its log).  Returns the exit code
        (None if it never ran); still running after ``timeout`` s it is killed."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9 by PID: sessions stay open in the data until they time out after a restart.
        Raises ``RuntimeError`` if never started."""
        if self.proc is None:
            raise RuntimeError("ZooKeeper was never started")
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signum)
            self.proc.wait(10)

    def restart(self, timeout: float = 30) -> "ZooKeeperProcess":
        """``stop()`` then ``start()``: the same port and data.  Raises ``ZooKeeperStartError``."""
        self.stop()
        return self.start(timeout)

    def alive(self) -> bool:
        """True while the process of the current run has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text()[-20_000:].splitlines()[-lines:])

    def close(self) -> None:
        """Stop the server if it runs and remove a temporary data dir.  Idempotent."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "ZooKeeperProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


# The first version's name; tests/support/cluster.py and older callers use it.
ZooKeeper = ZooKeeperProcess
