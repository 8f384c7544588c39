"""``kwire console`` as a child process for the browser tests (tests/console)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

from kwire.testing.process import free_port, wait_port


class ConsoleProcess:
    """``python -m kwire console --bootstrap-server BOOTSTRAP --listen 127.0.0.1:PORT *args``;
    ``url`` is where it serves, ``log_path`` its output."""

    def __init__(self, bootstrap: str, log_path: str, *args: str, sample_interval_s: float = 1.0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.command = [sys.executable, "-m", "kwire", "console", "--bootstrap-server", bootstrap,
                        "--listen", f"127.0.0.1:{self.port}", "--sample-interval-s", str(sample_interval_s), *args]
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> "ConsoleProcess":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=os.path.dirname(self.log_path))
        wait_port("127.0.0.1", self.port, timeout, self.proc)
        deadline = time.monotonic() + timeout       # the first sample: pages then show the cluster
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the console did not sample the cluster within {timeout} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def log_text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
