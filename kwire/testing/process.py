"""kwire as a real child process, for tests that kill it, restart it or need it isolated.

    from kwire.testing import broker_process

    with broker_process(partitions=3) as b:        # ``python -m kwire serve``
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        ...
        b.kill()                                    # kill -9: no clean-shutdown marker
        b.start()                                   # same port, same data: recovery runs

Use it instead of ``kwire.testing.broker`` (in-process, milliseconds) when the
test is about the process itself: crashes, restarts over the same data, signal
handling, start-up, or a broker that must not share the test's interpreter.

Each ``BrokerProcess`` owns a free 127.0.0.1 port, chosen once so a restart
keeps it (one per listener when ``listeners={"CLIENT": "SASL_SSL", ...}`` names
several: ``ports``, ``address(name)``), and a data directory (a temporary one removed by ``close()`` unless
one is passed in) laid out as ``<data_dir>/logs`` (``log.dirs``) and
``<data_dir>/broker.log`` (the process's stdout and stderr, appended across
restarts).  Server properties follow ``kwire.testing.broker``'s rules: Kafka
keys, keywords with underscores for dots, ``group.initial.rebalance.delay.ms=0``
unless ``test_defaults=False``.

Only the standard library is used here: the launcher itself never imports the
broker.  A ``cluster_process(...)`` of several brokers belongs next to
``broker_process`` and should reuse ``BrokerProcess``.
"""
from __future__ import annotations

import collections
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Iterator, Mapping, Sequence

__all__ = ["BrokerProcess", "BrokerStartError", "broker_process", "free_port", "free_port_run", "wait_port"]

TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


class BrokerStartError(RuntimeError):
    """The broker process exited, or did not listen in time; the message ends with its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now, below the kernel's ephemeral range.

    Not the OS's port-0 choice: that comes from the ephemeral range, so after a broker on it
    is killed any outgoing connection (a client reconnecting to that very broker, even) may be
    handed the port, and restarting the broker there fails with EADDRINUSE."""
    return free_port_run(1, host)


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive TCP ports nothing listens on right now, for a program
    that numbers its listeners from a base port (``kwire dev-cluster --base-port``).  The run is
    taken below the kernel's ephemeral range, so an outgoing connection cannot be handed one of
    its ports between this check and the program's bind (the OS's port-0 choice can)."""
    low, _high = 32768, 60999
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, _high = (int(x) for x in f.read().split())
    start, stop = 10000, max(10000 + count, low - count)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    with _handed_out_lock:
        for _ in range(200):
            base = rng.randrange(start, stop)
            run = range(base, base + count)
            if any(port in _handed_out for port in run):
                continue
            with contextlib.ExitStack() as held:
                try:
                    for port in run:
                        s = held.enter_context(socket.socket())
                        s.bind((host, port))
                except OSError:
                    continue
            for port in run:
                if len(_handed_out_order) == _RECENT:
                    _handed_out.discard(_handed_out_order.popleft())
                _handed_out_order.append(port)
                _handed_out.add(port)
            return base
    raise RuntimeError(f"no run of {count} free ports below {low}")


# Ports given out lately are not given again: a cluster chooses ZooKeeper's port and every
# broker's before any of them binds, so the bind check alone let two of them draw the same
# port (a broker then died with EADDRINUSE while its twin answered in its place).
_RECENT = 4096
_handed_out: set[int] = set()
_handed_out_order: collections.deque[int] = collections.deque()
_handed_out_lock = threading.Lock()


def wait_port(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None,
              interval: float = 0.02) -> None:
    """Return once ``host:port`` accepts a TCP connection, polling every ``interval`` s.

    Raises ``BrokerStartError`` when ``proc`` exits first or nothing listens
    after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise BrokerStartError(f"the broker exited with code {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise BrokerStartError(f"nothing listening on {host}:{port} after {timeout:.0f}s")
        time.sleep(interval)


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class BrokerProcess:
    """``python -m kwire serve`` in a child process: start, stop (SIGTERM), kill (-9), restart.

    ``properties`` are Kafka keys (``{"log.segment.bytes": 200000}``); keyword
    arguments spell them with underscores for dots (``log_segment_bytes=200000``).
    ``log.dirs`` and ``listeners`` are set from ``data_dir`` and ``port`` unless
    given.  ``listeners`` ({name: security protocol}, in order) asks for several
    listeners, each on a free port of its own (``listeners`` and
    ``listener.security.protocol.map`` are then set from it); ``port`` is the port
    of the bootstrap listener: the first PLAINTEXT one, else the first.  ``args`` are extra command-line arguments for ``kwire serve``
    (``["--log-level", "WARNING"]``), ``log_path`` moves the output file,
    ``env`` replaces the child's environment, ``new_session`` puts the child in
    a session of its own (a Ctrl-C in the terminal then does not reach it).

    Attributes: ``port``, ``bootstrap`` ("127.0.0.1:PORT"), ``ports`` ({listener: port}),
    ``protocols`` ({listener: security protocol}), ``bootstrap_listener``, ``data_dir``,
    ``log_path``, ``proc`` (the ``subprocess.Popen`` of the current run).

    Subclasses may override ``command()`` to run another Kafka-compatible broker
    with the same lifecycle (kwire's benchmarks run Tansu this way).
    """

    def __init__(self, data_dir: str | os.PathLike | None = None, *,
                 properties: Mapping[str, Any] | None = None, port: int | None = None,
                 args: Sequence[str] = (), log_path: str | os.PathLike | None = None,
                 env: Mapping[str, str] | None = None, new_session: bool = False,
                 test_defaults: bool = True, listeners: Mapping[str, str] | None = None,
                 **server_properties: Any):
        self.protocols = {name.upper(): protocol.upper()
                          for name, protocol in (listeners or {"PLAINTEXT": "PLAINTEXT"}).items()}
        self.bootstrap_listener = next((n for n, p in self.protocols.items() if p == "PLAINTEXT"),
                                       next(iter(self.protocols)))
        self.ports = {self.bootstrap_listener: port or free_port()}
        for name in self.protocols:
            while name not in self.ports:
                candidate = free_port()
                if candidate not in self.ports.values():
                    self.ports[name] = candidate
        self.ports = {name: self.ports[name] for name in self.protocols}      # in listener order
        self.port = self.ports[self.bootstrap_listener]
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kwire-process-")
            data_dir = self._tmp.name
        self.data_dir = os.fspath(data_dir)
        self.log_path = os.fspath(log_path or os.path.join(self.data_dir, "broker.log"))
        self.properties = dict(TEST_DEFAULTS) if test_defaults else {}
        self.properties.update({"listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
                                "log.dirs": os.path.join(self.data_dir, "logs")})
        if listeners is not None:
            self.properties["listener.security.protocol.map"] = ",".join(
                f"{n}:{p}" for n, p in self.protocols.items())
        self.properties.update({k.replace("_", "."): _format(v) for k, v in server_properties.items()})
        self.properties.update({k: _format(v) for k, v in (properties or {}).items()})
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.new_session = new_session
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap_servers`` / ``bootstrap.servers`` (the bootstrap listener's)."""
        return f"127.0.0.1:{self.port}"

    def address(self, listener: str) -> str:
        """``host:port`` of the listener named ``listener``.  Raises ``KeyError``."""
        return f"127.0.0.1:{self.ports[listener.upper()]}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def command(self) -> list[str]:
        """The argv of the broker: ``python -m kwire serve --override k=v ... *args``."""
        cmd = [sys.executable, "-m", "kwire", "serve"]
        for key, value in self.properties.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + self.args

    # -- lifecycle ---------------------------------------------------------------
    def spawn(self) -> subprocess.Popen:
        """Start the process and return at once (``wait_ready()`` waits for the port).

        Raises ``RuntimeError`` if it is already running, ``BrokerStartError``
        if the command cannot be executed.
        """
        if self.alive():
            raise RuntimeError(f"already running (pid {self.proc.pid})")
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        with open(self.log_path, "ab") as log:
            try:
                self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.data_dir, env=self.env,
                                             start_new_session=self.new_session)
            except OSError as exc:
                raise BrokerStartError(f"could not execute {self.command()[0]}: {exc}") from None
        return self.proc

    def wait_ready(self, timeout: float = 20, interval: float = 0.02) -> None:
        """Return once the port accepts connections.

        Raises ``BrokerStartError`` (with the log's tail) if the process exits
        first or does not listen within ``timeout`` seconds; the process is
        left as it is (``close()`` ends it).
        """
        try:
            wait_port("127.0.0.1", self.port, timeout, self.proc, interval)
        except BrokerStartError as exc:
            raise BrokerStartError(f"{exc}; log tail ({self.log_path}):\n{self.log_tail()}") from None

    def start(self, timeout: float = 20) -> "BrokerProcess":
        """``spawn()`` then ``wait_ready(timeout)``; a start after ``stop()``/``kill()`` restarts
        on the same port and data.  Raises ``BrokerStartError``; a process that did
        not come up is killed."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except BrokerStartError:
            self._kill_quietly()
            raise
        return self

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM and wait: a clean shutdown.  Returns the exit code (0 after a clean stop).

        A process still running after ``timeout`` seconds is killed, and the
        code is then ``-signal.SIGKILL``.  Raises ``RuntimeError`` if never started.
        """
        if self.proc is None:
            raise RuntimeError("the broker was never started")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_quietly()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9: no chance to flush or to write the clean-shutdown marker."""
        if self.proc is None:
            raise RuntimeError("the broker was never started")
        self._kill_quietly()

    def _kill_quietly(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def alive(self) -> bool:
        """True while the process of the current run has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        """Everything the broker printed so far (all runs)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text()[-20_000:].splitlines()[-lines:])

    def close(self, timeout: float = 10) -> None:
        """Stop the broker if it runs (SIGTERM, then -9) and remove a temporary data dir.  Idempotent."""
        if self.alive():
            self.stop(timeout)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def broker_process(partitions: int | None = None, *, data_dir: str | os.PathLike | None = None,
                   properties: Mapping[str, Any] | None = None, args: Sequence[str] = (),
                   timeout: float = 20, **server_properties: Any) -> Iterator[BrokerProcess]:
    """A started ``python -m kwire serve`` for the ``with`` block, stopped and cleaned up after.

    ``partitions`` -> ``num.partitions``; other keywords as for ``BrokerProcess``
    (``foo_bar=x`` -> ``foo.bar=x``; ``properties`` takes Kafka keys and wins).
    Raises ``BrokerStartError`` if the broker does not listen within ``timeout`` s.
    """
    if partitions is not None:
        server_properties["num_partitions"] = partitions
    b = BrokerProcess(data_dir, properties=properties, args=args, **server_properties)
    try:
        yield b.start(timeout)
    finally:
        b.close()
