"""``kwire console``: the web console as a program, and ``serve_console`` for ``kwire serve``.

    kwire console [--bootstrap-server HOST:PORT] [--listen 127.0.0.1:8080]
                  [--command-config FILE] [--users-file FILE] [--read-only]
                  [--schema-registry-url URL] [--metrics-url URL ...] [--sample-interval-s S]
    kwire console hash-password          # reads a password, prints a users-file line's hash

It speaks only the Kafka protocol (kafka-python's clients), so it works against any Kafka
cluster; ``--command-config`` takes the same client properties as every kwire tool (TLS,
SASL).  Served by hypercorn on Trio, like the Schema Registry.
"""
from __future__ import annotations

import argparse
import functools
import getpass
import logging
import sys
from typing import Sequence

import trio

from kwire.console.app import ConsoleSettings, create_app
from kwire.console.auth import UsersFileError, hash_password
from kwire.tools.common import DEFAULT_BOOTSTRAP, UsageError, client_config

logger = logging.getLogger("kwire.console")
DEFAULT_LISTEN = "127.0.0.1:8080"


def split_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``http://HOST:PORT``) -> (host, port).  Raises ValueError."""
    text = text.strip()
    if "://" in text:
        scheme, _, text = text.partition("://")
        if scheme.lower() != "http":
            raise ValueError(f"the console serves http only, not {scheme}")
    host, sep, port = text.rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


async def serve_console(settings: ConsoleSettings, listen: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve the console at ``listen`` until cancelled; ``task_status.started("http://host:port")``
    once it accepts connections (port 0 picks one)."""
    from hypercorn.config import Config
    from hypercorn.trio import serve
    host, port = split_listen(listen)
    if logging.getLogger("kafka").level == logging.NOTSET:     # kafka-python's connection chatter
        logging.getLogger("kafka").setLevel(logging.WARNING)
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("kwire.console.http")
    app = create_app(settings)
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve, app, config, mode="asgi"))
        url = "http://" + binds[0].split("://", 1)[-1]
        logger.info("console listening on %s (cluster %s)", url, app.state.console.access.bootstrap)
        task_status.started(url)


def broker_console_settings(config, advertised) -> ConsoleSettings:
    """The in-process console of ``kwire serve`` (``console.*`` keys): a Kafka client of this
    broker's first listener (``advertised``: its Endpoint), with ``console.command.config``'s
    security.  Raises UsageError (a bad properties file) or UsersFileError."""
    args = argparse.Namespace(bootstrap_server=f"{advertised.host}:{advertised.port}",
                              command_config=config.value_of("console.command.config"))
    metrics = config.value_of("prometheus.listener")
    return ConsoleSettings(client_config(args), read_only=bool(config.value_of("console.read.only")),
                           users_file=config.value_of("console.users.file"),
                           metrics_urls=[f"http://{metrics}/metrics"] if metrics else [])


def check_broker_console(config) -> None:
    """Refuse a start whose ``console.*`` keys cannot work (an https listener, an unreadable
    users file or client properties file).  Raises ConfigError."""
    from kwire.admin.config_def import ConfigError
    from kwire.console.auth import read_users_file
    try:
        split_listen(config.value_of("console.listener"))
        if config.value_of("console.users.file"):
            read_users_file(config.value_of("console.users.file"))
        client_config(argparse.Namespace(bootstrap_server="127.0.0.1:9092",
                                         command_config=config.value_of("console.command.config")))
    except (ValueError, UsageError) as exc:
        raise ConfigError(f"console: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kwire console", description="A web console for a Kafka cluster.")
    parser.add_argument("action", nargs="?", choices=("serve", "hash-password"), default="serve",
                        help="serve the console (default), or print a password's hash for a users file")
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"the cluster to show (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (TLS, SASL), as for Kafka's tools")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"where the console serves (default {DEFAULT_LISTEN})")
    parser.add_argument("--users-file", metavar="FILE",
                        help="name:hash lines; every page then needs a login (without it, no login)")
    parser.add_argument("--read-only", action="store_true", help="hide and refuse every write")
    parser.add_argument("--schema-registry-url", metavar="URL",
                        help="a Schema Registry, to decode Avro, Protobuf and JSON Schema records")
    parser.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                        help="a kwire broker's /metrics (repeatable), for the overview's rates and "
                             "share-partitions' record counts")
    parser.add_argument("--sample-interval-s", type=float, default=5.0, metavar="S",
                        help="how often lag and offsets are sampled (default 5)")
    parser.add_argument("--log-level", default="INFO")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.action == "hash-password":
        password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
        if not password:
            print("kwire console: an empty password", file=sys.stderr)
            return 2
        print(hash_password(password))
        return 0
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        split_listen(args.listen)
        settings = ConsoleSettings(client_config(args), read_only=args.read_only, users_file=args.users_file,
                                   registry_url=args.schema_registry_url, metrics_urls=args.metrics_url,
                                   sample_interval_s=args.sample_interval_s)
        create_app(settings)        # a bad users file is reported before serving
    except (UsageError, UsersFileError, ValueError) as exc:
        print(f"kwire console: {exc}", file=sys.stderr)
        return 2
    try:
        trio.run(serve_console, settings, args.listen)
    except KeyboardInterrupt:
        pass
    return 0
