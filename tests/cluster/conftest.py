"""Fixtures for the cluster tests: ZooKeeper and broker processes on loopback.

``cluster``            three brokers, started and formed (every broker in Metadata)
``cluster_factory``    ``cluster_factory(brokers=3, ready=True, **ClusterProcess keywords)``
                       for other sizes or properties; everything made is closed after the test

Both skip the test, with the reason, where ZooKeeper cannot run (no java or no
Debian ``zookeeper`` package).  Tests in this folder are marked ``clients``
by tests/conftest.py.
"""
from __future__ import annotations

import pytest

from kwire.testing_cluster import ClusterProcess
from kwire.zookeeper_process import zookeeper_available


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
