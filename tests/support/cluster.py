"""ZooKeeper and N ``kwire serve`` processes on loopback, for the cluster tests.

ZooKeeper is Debian's ``zookeeper`` package run with ``java`` (scripts/test
installs it); the tests skip with the reason when it is missing.
"""
from __future__ import annotations

import os
import signal
import tempfile
import time

from kwire.testing_process import BrokerProcess
from kwire.zookeeper_process import ZooKeeper, zookeeper_available  # noqa: F401

class Cluster:
    """ZooKeeper plus brokers 1..N (``broker.id`` = index), each with its own port and data."""

    def __init__(self, brokers: int = 3, properties: dict | None = None):
        self._tmp = tempfile.TemporaryDirectory(prefix="kwire-cluster-")
        self.zookeeper = ZooKeeper(os.path.join(self._tmp.name, "zookeeper"))
        props = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 5000,
                 "offsets.topic.num.partitions": 5, "group.initial.rebalance.delay.ms": 0,
                 "leader.imbalance.check.interval.seconds": 3600}
        props.update(properties or {})
        self.brokers = {
            i: BrokerProcess(os.path.join(self._tmp.name, f"broker-{i}"),
                             properties={**props, "broker.id": i, "zookeeper.connect": self.zookeeper.connect})
            for i in range(1, brokers + 1)}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def broker(self, i: int) -> BrokerProcess:
        return self.brokers[i]

    def start(self) -> "Cluster":
        self.zookeeper.start()
        for b in self.brokers.values():
            b.spawn()
        for b in self.brokers.values():
            b.wait_ready(60)
        return self

    def kill(self, i: int) -> None:
        self.brokers[i].kill()

    def stop(self, i: int) -> None:
        self.brokers[i].stop(timeout=40)

    def start_broker(self, i: int) -> None:
        self.brokers[i].start(timeout=60)

    def pause(self, i: int) -> None:
        os.kill(self.brokers[i].pid, signal.SIGSTOP)

    def resume(self, i: int) -> None:
        os.kill(self.brokers[i].pid, signal.SIGCONT)

    def metadata(self, bootstrap: str | None = None) -> dict:
        """Brokers, controller and per-partition leader/replicas/isr/leader_epoch, from a Metadata
        request (confluent-kafka's admin client) to a live broker."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": bootstrap or self.live_bootstrap()})
        md = admin.list_topics(timeout=15)
        return {"brokers": sorted(md.brokers), "controller_id": md.controller_id,
                "topics": {name: {p: {"leader": pm.leader, "replicas": list(pm.replicas),
                                      "isr": list(pm.isrs)} for p, pm in t.partitions.items()}
                           for name, t in md.topics.items()}}

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def wait_until_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                meta = self.metadata()
                if len(meta["brokers"]) == sum(b.alive() for b in self.brokers.values()) \
                        and meta["controller_id"] > 0:
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise RuntimeError("the cluster did not form: " + "\n".join(
            b.log_tail(10) for b in self.brokers.values()))

    def close(self) -> None:
        for b in self.brokers.values():
            b.close()
        self.zookeeper.stop()
        self._tmp.cleanup()

    def __enter__(self) -> "Cluster":
        try:
            self.start()
            self.wait_until_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()
