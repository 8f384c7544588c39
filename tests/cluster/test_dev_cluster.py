"""`kwire dev-cluster`: ZooKeeper and brokers in one command, used by kafka-python and aiokafka."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kwire.testing.process import free_port, free_port_run
from kwire.testing.zookeeper import zookeeper_available

available, why = zookeeper_available()
pytestmark = pytest.mark.skipif(not available, reason=f"ZooKeeper cannot run here: {why}")


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_dev_cluster_serves_kafka_python_and_aiokafka_and_stops_on_ctrl_c(tmp_path):
    base = free_port_run(2)
    console_port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kwire", "dev-cluster", "--brokers", "2", "--base-port", str(base),
                             "--data-dir", str(tmp_path), "--override", "zookeeper.session.timeout.ms=6000",
                             "--override", f"console.listener=http://127.0.0.1:{console_port}",
                             "--override", "group.initial.rebalance.delay.ms=0",
                             "--override", "offsets.topic.num.partitions=3"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        bootstrap = None
        deadline = time.monotonic() + 90
        while bootstrap is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "dev-cluster exited early"
            if line.startswith("bootstrap: "):
                bootstrap = line.split(": ", 1)[1].strip()
        assert bootstrap == f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        children = children_of(proc.pid)
        assert len(children) == 4                          # ZooKeeper, two brokers and the console

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("dev", 2, 2)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(100):
            producer.send("dev", str(i).encode(), partition=i % 2)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer("dev", bootstrap_servers=bootstrap, group_id="dev-group",
                                 auto_offset_reset="earliest", consumer_timeout_ms=15000)
        seen = []
        for m in consumer:             # until the hundredth (15 s of silence ends it short)
            seen.append(int(m.value))
            if len(seen) == 100:
                break
        consumer.close()
        assert sorted(seen) == list(range(100))

        async def aio_read() -> list[int]:
            from aiokafka import AIOKafkaConsumer
            c = AIOKafkaConsumer("dev", bootstrap_servers=bootstrap, group_id="aio-group",
                                 auto_offset_reset="earliest")
            await c.start()
            got: list[int] = []
            try:
                while len(got) < 100:
                    batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                    got += [int(m.value) for ms in batch.values() for m in ms]
            finally:
                await c.stop()
            return sorted(got)
        assert asyncio.run(aio_read()) == list(range(100))

        # the console (one for the cluster) lists both brokers and the topic
        deadline = time.monotonic() + 30
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{console_port}/topics", timeout=10).read().decode()
                if 'data-topic="dev"' in page:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the console never listed the topic"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    assert "stopped" in out
    for pid in children:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
