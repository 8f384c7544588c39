"""What a cluster test reads about partitions: ZooKeeper's topic znode and controller, a topic
created with a given assignment, the bytes of a replica's segment files, the partitions a
broker holds; and ``kwire reassign`` run as a user runs it."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.counting import partition_states, wait_for


def znode_json(cluster, path: str) -> dict:
    from kazoo.client import KazooClient
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        return json.loads(zk.get(path)[0])
    finally:
        zk.stop()


def topic_znode(cluster, topic: str) -> dict:
    return znode_json(cluster, f"/brokers/topics/{topic}")


def controller_of(cluster) -> int:
    return znode_json(cluster, "/controller")["brokerid"]


def create(cluster, name: str, assignment: list[list[int]]) -> None:
    """The topic with these replicas per partition, once every ISR is full."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)])[name].result(30)
    wait_for(lambda: all(len(s["isr"]) == len(assignment[p])
                         for p, s in partition_states(cluster.zookeeper.connect, name).items()), 30, "full ISRs")


def local_bytes(cluster, broker: int, topic: str, partition: int) -> int:
    """The bytes of the partition's segment files in broker ``broker``'s log dir (0: none)."""
    path = os.path.join(cluster.data_dir, f"broker-{broker}", "logs", f"{topic}-{partition}")
    if not os.path.isdir(path):
        return 0
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".log"))


def held(cluster, broker: int, topic: str) -> set[int]:
    """The partitions of ``topic`` with a folder in broker ``broker``'s log dir (a cluster
    broker holds only its replicas)."""
    logs = os.path.join(cluster.data_dir, f"broker-{broker}", "logs")
    prefix = f"{topic}-"
    return {int(name[len(prefix):]) for name in os.listdir(logs)
            if name.startswith(prefix) and name[len(prefix):].isdigit()}


def reassign(cluster, *argv: str, command_config=None, own_process: bool = False) -> subprocess.CompletedProcess:
    """``kwire reassign ARGV``: exit code, stdout and stderr as a user sees them.  Through the
    entry point's dispatch in this process (a subprocess costs ~0.8 s of start-up, a dozen per
    test), or with ``own_process`` as ``python -m kwire``, as before: while a broker was paused,
    an in-process run once failed its three tries with request timeouts to the paused broker
    (cause not found; the tool in a process of its own had passed every CI run)."""
    from kwire.cli import main
    # the live brokers only: a client bootstrapping from a paused one waits for its answer
    config = ["--command-config", str(command_config)] if command_config else []
    args = ["reassign", *argv, *config, "--bootstrap-server", cluster.live_bootstrap()]
    if own_process:
        run = subprocess.run([sys.executable, "-m", "kwire", *args], capture_output=True, text=True, timeout=120)
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as done:          # argparse refusing the arguments
                code = done.code
        run = subprocess.CompletedProcess(args, code or 0, out.getvalue(), err.getvalue())
    assert "Traceback" not in run.stdout + run.stderr, run.stderr
    return run
