"""Reference brokers for the differential run: Tansu (a process) and Apache Kafka (testcontainers).

Tansu is started with bench/run.py's own ``Broker`` class (same binary lookup,
same flags, memory engine, stopped by PID), so the benchmark and the
compatibility run always mean the same Tansu.  That file lives in the source
checkout, not in the installed package: outside a checkout, pass a Tansu
bootstrap to ``kwire compat --bootstrap`` instead.

Apache Kafka runs through testcontainers' Kafka module when a Docker engine
answers ``GET /_ping``; otherwise ``docker_unavailable()`` says why and the
caller skips.
"""
from __future__ import annotations

import contextlib
import http.client
import importlib.util
import os
import socket
import tempfile
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
BENCH_RUN = REPO / "bench" / "run.py"
# None: the image testcontainers' Kafka module is built around (its start-up wait matches that
# image's log line); KWIRE_COMPAT_KAFKA_IMAGE overrides it
KAFKA_IMAGE = os.environ.get("KWIRE_COMPAT_KAFKA_IMAGE")


class ReferenceUnavailable(Exception):
    """The reference broker cannot run here; the message says why."""


def _bench_run():
    if not BENCH_RUN.exists():
        raise ReferenceUnavailable(f"{BENCH_RUN} not found (the Tansu launcher lives in a source checkout)")
    spec = importlib.util.spec_from_file_location("kwire_bench_run", BENCH_RUN)
    module = importlib.util.module_from_spec(spec)
    import sys
    sys.path.insert(0, str(BENCH_RUN.parent))   # run.py imports its sibling workloads.py
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH_RUN.parent))
    return module


@contextlib.contextmanager
def tansu(timeout: float = 20):
    """Yield the bootstrap of a Tansu broker (memory engine) on 127.0.0.1; stopped by PID after."""
    run = _bench_run()
    try:
        run.find_tansu(None)
    except run.BrokerStartError as exc:
        raise ReferenceUnavailable(str(exc)) from None
    args = SimpleNamespace(kwire_arg=[], tansu_bin=None, keep_data=False)
    log_dir = Path(tempfile.mkdtemp(prefix="kwire-compat-tansu-"))
    broker = run.Broker("tansu", args, log_dir)
    try:
        broker.start()
        broker.process.wait_ready(timeout)
    except run.BrokerStartError as exc:
        broker.stop()
        raise ReferenceUnavailable(f"Tansu did not start: {exc}") from None
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def docker_unavailable() -> str | None:
    """None when a Docker engine answers /_ping, else the reason (for a skip message)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return f"DOCKER_HOST={host}: only unix sockets are probed"
    path = host[len("unix://"):]
    if not os.path.exists(path):
        return f"no Docker engine: {path} does not exist (set DOCKER_HOST to use one)"
    conn = http.client.HTTPConnection("localhost", timeout=3)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(3)
    try:
        sock.connect(path)
        conn.sock = sock
        conn.request("GET", "/_ping")
        resp = conn.getresponse()
        if resp.status != 200:
            return f"Docker engine at {path} answered /_ping with {resp.status}"
    except OSError as exc:
        return f"no Docker engine reachable at {path}: {exc}"
    finally:
        conn.close()
    return None


@contextlib.contextmanager
def apache_kafka():
    """Yield the bootstrap of Apache Kafka in a container (testcontainers' Kafka module)."""
    why = docker_unavailable()
    if why:
        raise ReferenceUnavailable(why)
    try:
        from testcontainers.community.kafka import KafkaContainer   # testcontainers >= 4.10
    except ImportError:
        try:
            from testcontainers.kafka import KafkaContainer
        except ImportError:
            raise ReferenceUnavailable("pip install 'testcontainers[kafka]' to run against Apache Kafka") from None
    container = KafkaContainer(KAFKA_IMAGE) if KAFKA_IMAGE else KafkaContainer()
    with container as kafka:
        yield kafka.get_bootstrap_server()
