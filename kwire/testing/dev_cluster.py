"""``kwire dev-cluster --brokers 3``: ZooKeeper and N brokers on loopback, for trying a cluster.

Prints the ZooKeeper connect string and the bootstrap string and runs until
Ctrl-C (or SIGTERM, SIGHUP), then stops the brokers one by one (SIGTERM: a
controlled shutdown, which needs ZooKeeper) and ZooKeeper last.  Broker i
listens on base-port + i - 1.  Data and logs stay in ``--data-dir`` (default
./kwire-dev-cluster: ``zookeeper/`` and ``broker-N/broker.log``), so a second
run resumes the same cluster.

``--console HOST:PORT`` (or ``--override console.listener=http://HOST:PORT``) also runs the web
console (``kwire console``) on every broker's address, as a process of its own: it keeps
serving while any broker is down.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from kwire.testing.cluster import wait_serving
from kwire.testing.process import BrokerProcess, BrokerStartError, free_port
from kwire.testing.zookeeper import ZooKeeperProcess, ZooKeeperStartError, zookeeper_available

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
BROKER_STOP_TIMEOUT_S = 40      # a controlled shutdown moves leadership away first


class _Stop(Exception):
    """A stop signal arrived."""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="kwire dev-cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=9092, help="broker i listens on base-port + i - 1")
    parser.add_argument("--zookeeper-port", type=int, default=None, help="default: a free port")
    parser.add_argument("--data-dir", default="./kwire-dev-cluster")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property for every broker (repeatable)")
    parser.add_argument("--console", metavar="HOST:PORT",
                        help="also serve the web console there (kwire console on every broker)")
    args = parser.parse_args(argv)
    if args.brokers < 1:
        parser.error("--brokers must be at least 1")
    if any("=" not in o for o in args.override):
        parser.error("--override takes KEY=VALUE")
    return args


def build(args) -> tuple[ZooKeeperProcess, list[BrokerProcess]]:
    """The processes, not started.  Each runs in a session of its own: a Ctrl-C in the
    terminal reaches only dev-cluster, which then stops them in order."""
    data_dir = os.path.abspath(args.data_dir)
    zookeeper = ZooKeeperProcess(os.path.join(data_dir, "zookeeper"), port=args.zookeeper_port or free_port(),
                                 new_session=True)
    rf = min(3, args.brokers)
    extra = dict(o.split("=", 1) for o in args.override)
    listener = extra.pop("console.listener", None)      # one console for the cluster, not one per broker
    args.console = args.console or listener
    brokers = [BrokerProcess(os.path.join(data_dir, f"broker-{i}"), port=args.base_port + i - 1,
                             test_defaults=False, new_session=True,
                             properties={"broker.id": i, "zookeeper.connect": zookeeper.connect,
                                         "default.replication.factor": rf,
                                         "offsets.topic.replication.factor": rf, **extra})
               for i in range(1, args.brokers + 1)]
    return zookeeper, brokers


def start_console(args, brokers: list[BrokerProcess]) -> subprocess.Popen | None:
    """``kwire console`` on every broker's address at ``--console``, in a session of its own
    (its output in ``<data-dir>/console.log``); None without ``--console``."""
    if not args.console:
        return None
    log = open(os.path.join(os.path.abspath(args.data_dir), "console.log"), "ab")
    with log:
        return subprocess.Popen([sys.executable, "-m", "kwire", "console", "--bootstrap-server",
                                 ",".join(b.bootstrap for b in brokers), "--listen", args.console],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _raise_stop(signum, _frame):
    raise _Stop(signal.Signals(signum).name)


def run(zookeeper: ZooKeeperProcess, brokers: list[BrokerProcess], args=None,
        children: list[subprocess.Popen] | None = None) -> int:
    """Start everything (the console too, with ``args.console``, appended to ``children``),
    print the addresses, wait for a signal or a broker's death."""
    zookeeper.start()
    for b in brokers:
        b.spawn()
    for b in brokers:
        wait_serving(b, 60)
    print(f"ZooKeeper: {zookeeper.connect}")
    print(f"bootstrap: {','.join(b.bootstrap for b in brokers)}")
    console = start_console(args, brokers) if args is not None else None
    if console is not None:
        (children if children is not None else []).append(console)
        print(f"console: http://{args.console} (log: {os.path.abspath(args.data_dir)}/console.log)")
    print(f"logs: {os.path.dirname(brokers[0].data_dir)}/broker-N/broker.log; Ctrl-C stops everything",
          flush=True)
    while True:
        dead = [(i, b) for i, b in enumerate(brokers, 1) if not b.alive()]
        if dead or not zookeeper.alive():
            for i, b in dead:
                print(f"kwire dev-cluster: broker {i} exited with code {b.proc.returncode}:\n{b.log_tail(10)}",
                      file=sys.stderr)
            if not zookeeper.alive():
                print(f"kwire dev-cluster: ZooKeeper exited:\n{zookeeper.log_tail(10)}", file=sys.stderr)
            return 1
        time.sleep(0.2)


def shut_down(zookeeper: ZooKeeperProcess, brokers: list[BrokerProcess],
              children: list[subprocess.Popen] = ()) -> None:
    """The console, then brokers one at a time (each moves its leaderships to those still
    running), then ZooKeeper."""
    for signum in STOP_SIGNALS:     # a second Ctrl-C must not leave children behind
        signal.signal(signum, signal.SIG_IGN)
    for child in children:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)
    for b in brokers:
        b.close(timeout=BROKER_STOP_TIMEOUT_S)
    zookeeper.close()


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    ok, why = zookeeper_available()
    if not ok:
        print(f"kwire dev-cluster: {why}", file=sys.stderr)
        return 2
    zookeeper, brokers = build(args)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stop)
    code = 0
    children: list[subprocess.Popen] = []
    try:
        code = run(zookeeper, brokers, args, children)
    except (_Stop, KeyboardInterrupt):
        pass
    except (ZooKeeperStartError, BrokerStartError) as exc:
        print(f"kwire dev-cluster: could not start: {exc}", file=sys.stderr)
        code = 1
    finally:
        shut_down(zookeeper, brokers, children)
    print("stopped", flush=True)
    return code
