"""``kwire serve [server.properties] [--override key=value ...]``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from kwire.admin.broker_config import ConfigError, load_broker_config

from .broker import Broker
from .server import serve


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="kwire", description="A Kafka-wire-compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run a broker (like kafka-server-start)")
    s.add_argument("properties", nargs="?", help="a server.properties file")
    s.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override one property (repeatable)")
    s.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


async def run_until_signal(broker: Broker, host: str, port: int) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, broker, host, port)
            async for signum in signals:
                logging.getLogger("kwire").info("received %s: shutting down",
                                                signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = []
    for item in args.override:
        if "=" not in item:
            print(f"kwire: --override needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides.append(tuple(item.split("=", 1)))
    try:
        config = load_broker_config(args.properties, dict(overrides))
    except (ConfigError, OSError) as exc:
        print(f"kwire: invalid configuration: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        logging.getLogger("kwire").warning("%s", warning)
    for note in config.notes:
        logging.getLogger("kwire").info("%s", note)
    broker = Broker(config)
    host, port = config.listen_host, config.listen_port
    trio.run(run_until_signal, broker, host, port)
    return 0
