"""``kwire dev-cluster --brokers 3``: ZooKeeper and N brokers on loopback, for trying a cluster.

Prints the bootstrap string and runs until Ctrl-C (or SIGTERM), then stops the
brokers (SIGTERM: controlled shutdown) and ZooKeeper.  Data stays in
``--data-dir`` (default ./kwire-dev-cluster), so a second run resumes it.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from .testing_process import BrokerProcess, free_port
from .zookeeper_process import ZooKeeper, zookeeper_available


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="kwire dev-cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=9092, help="broker i listens on base-port + i - 1")
    parser.add_argument("--zookeeper-port", type=int, default=None, help="default: a free port")
    parser.add_argument("--data-dir", default="./kwire-dev-cluster")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property for every broker (repeatable)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    ok, why = zookeeper_available()
    if not ok:
        print(f"kwire dev-cluster: {why}", file=sys.stderr)
        return 2
    data_dir = os.path.abspath(args.data_dir)
    zookeeper = ZooKeeper(os.path.join(data_dir, "zookeeper"), port=args.zookeeper_port or free_port())
    extra = dict(o.split("=", 1) for o in args.override)
    brokers = [BrokerProcess(os.path.join(data_dir, f"broker-{i}"), port=args.base_port + i - 1,
                             test_defaults=False, new_session=True,
                             properties={"broker.id": i, "zookeeper.connect": zookeeper.connect,
                                         "default.replication.factor": min(3, args.brokers),
                                         "offsets.topic.replication.factor": min(3, args.brokers), **extra})
               for i in range(1, args.brokers + 1)]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    try:
        zookeeper.start()
        for b in brokers:
            b.spawn()
        for b in brokers:
            b.wait_ready(60)
        print(f"ZooKeeper: {zookeeper.connect}")
        print(f"bootstrap: {','.join(b.bootstrap for b in brokers)}")
        print(f"logs: {data_dir}/broker-N/broker.log; Ctrl-C stops everything", flush=True)
        while not stop and all(b.alive() for b in brokers):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        for b in brokers:
            b.close(timeout=40)
        zookeeper.stop()
    print("stopped", flush=True)
    return 0
