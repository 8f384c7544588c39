"""Fixtures for the cluster tests: ZooKeeper and broker processes on loopback.

``cluster``            three brokers, started and formed (every broker in Metadata)
``cluster_factory``    ``cluster_factory(brokers=3, ready=True, **ClusterProcess keywords)``
                       for other sizes or properties; everything made is closed after the test
``isolatable_cluster`` three brokers behind TcpProxies: ``isolate(i)`` partitions broker i
                       from ZooKeeper, clients and the other brokers; ``heal()``

Both skip the test, with the reason, where ZooKeeper cannot run (no java or no
Debian ``zookeeper`` package).  Tests in this folder are marked ``clients``
by tests/conftest.py.
"""
from __future__ import annotations

import pytest

from kwire.testing.cluster import ClusterProcess
from kwire.testing.zookeeper import zookeeper_available
from tests.support.proxy import TcpProxy


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed cluster test's report gets the brokers' ERROR and traceback lines: CI shows
    only pytest's output, and the broker logs are gone with the test's directory."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, ClusterProcess):
            report.sections.append((f"broker errors ({name})", value.error_lines()))


def require_zookeeper() -> None:
    available, why = zookeeper_available()
    if not available:
        pytest.skip(f"ZooKeeper cannot run here: {why}")


@pytest.fixture
def cluster_factory():
    require_zookeeper()
    made: list[ClusterProcess] = []

    def make(brokers: int = 3, *, ready: bool = True, **kwargs) -> ClusterProcess:
        c = ClusterProcess(brokers, **kwargs)
        made.append(c)
        c.start()
        if ready:
            c.wait_until_ready()
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def cluster(cluster_factory) -> ClusterProcess:
    return cluster_factory(3)


@pytest.fixture
def isolatable_cluster():
    """Three brokers, each behind a TcpProxy of its own (advertised, so clients and the other
    brokers go through it) and each with its own proxy to ZooKeeper.  ``isolate(i)`` cuts broker
    i off from ZooKeeper, clients and the other brokers, in both directions; ``heal()``."""
    require_zookeeper()
    cluster = ClusterProcess(3)
    zk_port = int(cluster.zookeeper.connect.rsplit(":", 1)[1])
    proxies = {i: TcpProxy("127.0.0.1", b.port) for i, b in cluster.brokers.items()}
    zk_proxies = {i: TcpProxy("127.0.0.1", zk_port) for i in cluster.brokers}
    for i, b in cluster.brokers.items():
        b.properties["advertised.listeners"] = f"PLAINTEXT://{proxies[i].address}"
        b.properties["zookeeper.connect"] = zk_proxies[i].address

    def isolate(i: int) -> None:
        zk_proxies[i].partition()
        proxies[i].partition()
        for j, p in proxies.items():
            if j != i:
                p.partition(from_pids={cluster.broker(i).pid})

    def heal() -> None:
        for p in [*proxies.values(), *zk_proxies.values()]:
            p.heal()

    cluster.isolate, cluster.heal = isolate, heal
    cluster.proxied_bootstrap = ",".join(p.address for p in proxies.values())
    try:
        cluster.start()
        cluster.wait_until_ready()
        yield cluster
    finally:
        cluster.close()
        for p in [*proxies.values(), *zk_proxies.values()]:
            p.close()
