"""``kwire serve [server.properties] [--override key=value ...]``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from kwire.admin.acls import AuthorizerConfig
from kwire.admin.broker_config import ConfigError, load_broker_config, parse_overrides

from kwire.runtime.allocator import tune_for_broker
from kwire.server.broker import Broker
from kwire.runtime.logging_setup import FORMATS, configure as configure_logging
from kwire.security.peer import PeerConnector
from kwire.security.listeners import listener_context
from kwire.server.serving import serve


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="kwire", description="A Kafka-wire-compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run a broker (like kafka-server-start)")
    s.add_argument("properties", nargs="?", help="a server.properties file")
    s.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override one property (repeatable)")
    s.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING or ERROR")
    s.add_argument("--log-format", choices=FORMATS, default="text",
                   help="text: one readable line per event (default); json: one JSON object per line")
    for name, (_module, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser.parse_args(argv)


async def run_until_signal(broker: Broker, host: str, port: int) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, broker, host, port)
            if broker.config.value_of("console.listener"):     # the web console, a client of this broker
                from kwire.console.server import broker_console_settings, serve_console
                await nursery.start(serve_console, broker_console_settings(broker.config, broker.advertised),
                                    broker.config.value_of("console.listener"))
            async for signum in signals:
                logging.getLogger("kwire").info("received %s: shutting down",
                                                signal.Signals(signum).name)
                if (broker.cluster is not None and signum == signal.SIGTERM
                        and broker.config.value_of("controlled.shutdown.enable")):
                    with trio.move_on_after(30):
                        await broker.cluster.controlled_shutdown()
                nursery.cancel_scope.cancel()
                break


# Subcommands that own their arguments: `kwire spark-demo ...`, `kwire compat ...`.
DELEGATED = {
    "spark-demo": ("kwire.spark.cli", "run the Spark Structured Streaming demo pipeline on kwire"),
    "compat": ("kwire.compat_tests.cli", "run the client x scenario compatibility matrix against a broker"),
    "dev-cluster": ("kwire.testing.dev_cluster", "start ZooKeeper and N replicated brokers on loopback (Ctrl-C stops them)"),
    "scram": ("kwire.tools.users:scram_main", "set, delete or describe SCRAM users (the older name of `kwire users`)"),
    "topics": ("kwire.tools.topics", "list, describe, create, alter or delete topics (kafka-topics.sh)"),
    "groups": ("kwire.tools.groups", "list, describe, reset offsets of or delete consumer groups (kafka-consumer-groups.sh)"),
    "configs": ("kwire.tools.configs", "describe or alter topic and broker configs (kafka-configs.sh)"),
    "produce": ("kwire.tools.console:producer_main", "the console producer: stdin lines become records (kafka-console-producer.sh)"),
    "consume": ("kwire.tools.console:consumer_main", "the console consumer: records printed as lines or JSON (kafka-console-consumer.sh)"),
    "perf": ("kwire.tools.perf", "produce or consume throughput and latency (kafka-producer/consumer-perf-test.sh)"),
    "acls": ("kwire.tools.acls", "list, add or remove ACLs (kafka-acls.sh)"),
    "reassign": ("kwire.tools.reassign", "move partition replicas between brokers, drain a broker (kafka-reassign-partitions.sh)"),
    "features": ("kwire.tools.features", "describe, upgrade or downgrade finalized feature levels (kafka-features.sh)"),
    "quotas": ("kwire.tools.quotas", "describe or alter client quotas (kafka-configs.sh --entity-type users|clients)"),
    "users": ("kwire.tools.users", "set, delete or describe SCRAM users (kafka-configs.sh --entity-type users; alias: scram)"),
    "console": ("kwire.console.server", "a web console for topics, messages, groups, lag and the cluster"),
    "schemas": ("kwire.tools.schemas", "list, register, check compatibility of and delete Schema Registry schemas"),
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        import importlib
        module, _, function = DELEGATED[argv[0]][0].partition(":")
        return getattr(importlib.import_module(module), function or "main")(argv[1:])
    args = parse_args(argv)
    try:
        configure_logging(args.log_level, args.log_format)
    except ValueError as exc:
        print(f"kwire: {exc}", file=sys.stderr)
        return 2
    try:
        config = load_broker_config(args.properties, parse_overrides(args.override))
    except (ConfigError, OSError) as exc:
        print(f"kwire: invalid configuration: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        logging.getLogger("kwire").warning("%s", warning)
    for note in config.notes:
        logging.getLogger("kwire").info("%s", note)
    try:      # TLS listeners: their key and trust stores load now, or the start is refused
        for listener in config.listeners:
            listener_context(config, listener)
        AuthorizerConfig.from_values(config.values)
        if config.value_of("zookeeper.connect"):      # how this broker reaches the others
            PeerConnector.from_config(config)
        if config.value_of("console.listener"):       # its users file and client properties, now
            from kwire.console.server import check_broker_console
            check_broker_console(config)
    except ConfigError as exc:
        print(f"kwire: invalid configuration: {exc}", file=sys.stderr)
        return 2
    tune_for_broker()
    broker = Broker(config)
    host, port = config.listen_host, config.listen_port
    try:
        trio.run(run_until_signal, broker, host, port)
    except BaseException as exc:
        refusal = _startup_refusal(exc)
        if refusal is None:
            raise
        logging.getLogger("kwire").error("refusing to start: %s", refusal)
        return 1
    return 0


def _startup_refusal(exc: BaseException) -> BaseException | None:
    """A cluster-mode start-up failure (ZooKeeper unreachable, broker.id taken, another
    cluster's data), possibly inside Trio's exception groups; None for anything else."""
    if isinstance(exc, BaseExceptionGroup):
        found = [_startup_refusal(e) for e in exc.exceptions]
        return next((f for f in found if f is not None), None)
    from kwire.cluster.zk import BrokerIdInUse, ZooKeeperUnavailable
    from kwire.cluster.node import ClusterIdMismatch
    return exc if isinstance(exc, (BrokerIdInUse, ZooKeeperUnavailable, ClusterIdMismatch)) else None
