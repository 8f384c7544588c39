"""Runs the client x scenario matrix, each client in a worker process of its own.

The parent starts ``python -m kwire.compat_tests.runner --worker CLIENT`` in a
new session (its own process group), sends one scenario name per line and
waits for one JSON line back, bounded by the scenario's timeout.  A worker
that does not answer in time is killed with its whole process group (the
kcat/node children it started included) and the scenario is a fail with
"timeout"; a fresh worker takes the next scenario.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .clients import AioKafka, Confluent, KafkaPython
from .external import KafkaJS, Kcat
from .api_versions import api_name
from .java import JavaClient
from .model import NOT_INSTALLED, SETUP_CLIENT_ID, Client, ClientError, Fail, Setup, Skip
from .proxy import RecordingProxy
from .scenarios import SCENARIOS


class RawSocket(Client):
    name = "raw-socket"
    wire_only = True
    codecs = ()

    @classmethod
    def library_version(cls):
        return "hand-made frames (no client library)"


CLIENTS = {c.name: c for c in (KafkaPython, Confluent, AioKafka, Kcat, KafkaJS, JavaClient, RawSocket)}
DEFAULT_CLIENTS = list(CLIENTS)


class Env:
    """What a scenario sees besides its client: the setup admin and the other clients.

    ``bootstrap`` is where the client under test (``own``) connects, a recording proxy when
    the run records API versions; the setup admin and the other clients (the cross-client
    reads of ``compression``) use ``direct``, the broker itself, so only the client under
    test is recorded."""

    def __init__(self, bootstrap: str, client_names: list[str], own: str | None = None,
                 direct: str | None = None):
        self.bootstrap = bootstrap
        self.direct = direct or bootstrap
        self.own = own
        self.setup = Setup(self.direct)
        self.client_names = client_names
        self._clients: dict[str, Client] = {}

    def client(self, name: str) -> Client:
        if name not in self._clients:
            self._clients[name] = CLIENTS[name](self.bootstrap if name == self.own else self.direct)
        return self._clients[name]

    def consumers(self) -> list[Client]:
        out = []
        for name in self.client_names:
            c = self.client(name)
            if not getattr(c, "wire_only", False) and c.unavailable() is None:
                out.append(c)
        return out


def run_one(client: Client, name: str, env: Env) -> dict:
    fn = SCENARIOS[name][0]
    t0 = time.monotonic()
    why = client.unavailable()
    if why:
        status, reason = "skip", why
    else:
        try:
            status, reason = "pass", fn(client, env)
        except Skip as exc:
            status, reason = "skip", str(exc)
        except (Fail, AssertionError) as exc:
            status, reason = "fail", str(exc) or "assertion failed"
        except ClientError as exc:
            status, reason = "fail", f"client error {exc.code}: {exc}"
        except ModuleNotFoundError as exc:     # e.g. a compression codec's library
            status, reason = "skip", f"{exc.name}: {NOT_INSTALLED}"
        except Exception as exc:
            status, reason = "fail", f"{type(exc).__name__}: {exc}"
    return {"client": client.name, "scenario": name, "status": status,
            "reason": " ".join(str(reason).split())[:300] if reason else None,
            "seconds": round(time.monotonic() - t0, 2)}


def worker_main(client_name: str, bootstrap: str, client_names: list[str], direct: str | None = None) -> int:
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)   # anything a client library prints goes to the log, not into the protocol
    env = Env(bootstrap, client_names, own=client_name, direct=direct)
    client = env.client(client_name)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            break
        results.write(json.dumps(run_one(client, name, env)) + "\n")
    return 0


class Worker:
    def __init__(self, client: str, bootstrap: str, client_names: list[str], log_path: str,
                 direct: str | None = None):
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kwire.compat_tests.runner", "--worker", client, bootstrap,
             ",".join(client_names), *([direct] if direct else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1,
            start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def ask(self, scenario: str, timeout: float) -> dict | None:
        self.proc.stdin.write(scenario + "\n")
        self.proc.stdin.flush()
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        return json.loads(line) if line else {"status": "fail", "reason": "worker process died"}

    def kill(self):
        """SIGKILL the worker's process group: the worker and every kcat/node it started."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.log.close()

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


def summarize_requests(requests) -> dict[str, list[int]]:
    """{api name: sorted versions sent}, in api_key order, from a proxy's (key, version, client_id)."""
    seen: dict[int, set[int]] = {}
    for api_key, version, client_id in requests:
        if client_id != SETUP_CLIENT_ID:
            seen.setdefault(api_key, set()).add(version)
    return {api_name(k): sorted(v) for k, v in sorted(seen.items())}


def _run_client(client, bootstrap, clients, scenarios, log_dir, timeout_scale, progress,
                record_apis=False) -> list[dict]:
    out = []
    worker = None
    # a recording proxy between this client and the broker: the API versions of each cell
    proxy = RecordingProxy(bootstrap) if record_apis and not getattr(CLIENTS[client], "wire_only", False) else None
    for name in scenarios:
        timeout = SCENARIOS[name][1] * timeout_scale
        if worker is None:
            worker = Worker(client, proxy.bootstrap if proxy else bootstrap, clients,
                            os.path.join(log_dir, f"{client}.log"), direct=bootstrap if proxy else None)
        t0 = time.monotonic()
        if proxy:
            proxy.take()     # what a killed worker's children sent after their cell ended
        res = worker.ask(name, timeout)
        if res is None or res.get("reason") == "worker process died":
            worker.kill()
            worker = None
            res = {"status": "fail",
                   "reason": f"timeout after {timeout:.0f}s" if res is None else res["reason"]}
        res.update(client=client, scenario=name, seconds=res.get("seconds", round(time.monotonic() - t0, 2)))
        if proxy:
            res["apis"] = summarize_requests(proxy.take())
        out.append(res)
        if progress:
            progress(res)
    if worker is not None:
        worker.close()
    if proxy:
        proxy.close()
    return out


def run_matrix(bootstrap: str, clients: list[str] | None = None, scenarios: list[str] | None = None,
               log_dir: str | None = None, timeout_scale: float = 1.0, progress=None,
               jobs: int = 1, record_apis: bool = False) -> list[dict]:
    """Results in client order, then scenario order; ``jobs`` clients run at once.  With
    ``record_apis`` each client library talks to the broker through a recording proxy
    (``proxy.py``) and each result gets ``apis``: {api name: [versions the client sent]}."""
    clients = clients or DEFAULT_CLIENTS
    scenarios = scenarios or list(SCENARIOS)
    log_dir = log_dir or tempfile.mkdtemp(prefix="kwire-compat-")
    args = (bootstrap, clients, scenarios, log_dir, timeout_scale, progress, record_apis)
    # the JVM column is by far the longest (a JVM per scenario, Spark's connector): started
    # first, the other clients fill the other workers meanwhile instead of waiting behind it
    order = sorted(clients, key=lambda c: c != "java")
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        per_client = dict(zip(order, pool.map(lambda c: _run_client(c, *args), order)))
    return [r for c in clients for r in per_client[c]]


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    sys.exit(worker_main(sys.argv[2], sys.argv[3], sys.argv[4].split(","), *sys.argv[5:6]))
