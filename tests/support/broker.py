"""Run a kwire broker as a real process for client tests (no in-process shortcuts)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


class BrokerProcess:
    """``kwire serve`` in a subprocess with its own data dir; restartable, killable."""

    def __init__(self, data_dir: str | None = None, **overrides):
        self.port = free_port()
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kwire-test-")
            data_dir = self._tmp.name
        self.data_dir = data_dir
        self.overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          "log.dirs": os.path.join(data_dir, "logs"),
                          "group.initial.rebalance.delay.ms": "0"}
        self.overrides.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, "broker.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20) -> "BrokerProcess":
        args = [sys.executable, "-m", "kwire", "serve"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        wait_port("127.0.0.1", self.port, timeout, self.proc)
        return self

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM and wait: a clean shutdown."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        """kill -9: no chance to flush or write the clean-shutdown marker."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)
        if self._tmp is not None:
            self._tmp.cleanup()
