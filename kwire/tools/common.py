"""What every operator command (``kwire topics|groups|configs|produce|consume|perf|acls|users``) shares.

They are Kafka clients built on kafka-python, so they work against any
Kafka-compatible broker.  Kafka's tool options, so muscle memory works:

``--bootstrap-server HOST:PORT[,HOST:PORT]``   default 127.0.0.1:9092 (``kwire serve``'s)
``--command-config FILE``   the Java client's properties (security.protocol,
                            sasl.mechanism, sasl.jaas.config, ssl.truststore.location,
                            ssl.keystore.location, ssl.key.password,
                            ssl.endpoint.identification.algorithm, client.id,
                            request.timeout.ms), turned into kafka-python keywords
``--output table|json``     a readable table (``rich``) or one JSON document for scripts

Exit codes: 0 done, 1 the broker refused or cannot be reached (``ToolError``, or one of
kafka-python's errors), 2 bad arguments or an unreadable ``--command-config``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence

from kwire.admin.config_def import ConfigError
from kwire.admin.properties import parse_properties

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# Java client property -> kafka-python keyword, for the ones that map one to one
_DIRECT = {
    "security.protocol": ("security_protocol", str.upper),
    "sasl.mechanism": ("sasl_mechanism", str.upper),
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "ssl.key.password": ("ssl_password", str),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", str),
}
# handled below, or with no kafka-python counterpart that changes anything here
_KNOWN = {"sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location",
          "ssl.keystore.type", "ssl.endpoint.identification.algorithm", "ssl.truststore.password",
          "ssl.keystore.password", "bootstrap.servers"}


class ToolError(Exception):
    """A failure to report in one line and exit 1 (the broker refused, nothing to show)."""


class UsageError(Exception):
    """Bad arguments or client properties: exit 2."""


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"the broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security settings and so on), as for Kafka's tools")
    parser.add_argument("--output", choices=("table", "json"), default="table",
                        help="a readable table (default) or JSON for scripts")


def tool_parser(prog: str, description: str | None,
                ) -> tuple[argparse.ArgumentParser, Callable[[str, str], argparse.ArgumentParser]]:
    """A tool's parser and ``command(name, help_text)``, which adds a subcommand taking the
    common arguments and returns its parser."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_common_arguments(p)
        return p
    return parser, command


def read_command_config(path: str | None) -> dict[str, str]:
    """The properties of ``--command-config`` (none: empty).  Raises UsageError."""
    return read_properties_file(path, "--command-config")


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """kafka-python keyword arguments (KafkaAdminClient, KafkaProducer, KafkaConsumer) for
    ``--bootstrap-server`` and ``--command-config``; ``extra`` wins.  Raises UsageError for
    a property kafka-python cannot honour (a JKS or PKCS12 store, a JAAS module it lacks)."""
    props = read_command_config(getattr(args, "command_config", None))
    config: dict[str, Any] = {"bootstrap_servers": args.bootstrap_server.split(",")}
    config.update(_security_keywords(props))
    config.update(extra)
    return config


def _security_keywords(props: Mapping[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, value in props.items():
        if key in _DIRECT:
            name, convert = _DIRECT[key]
            try:
                config[name] = convert(value)
            except ValueError:
                raise UsageError(f"--command-config: {key}={value!r} is not valid") from None
    config.update(_jaas_credentials(props))
    config.update(_ssl_files(props))
    if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        config["ssl_check_hostname"] = False
    return config


def unused_properties(props: Mapping[str, str]) -> list[str]:
    """Keys of ``--command-config`` that nothing here reads (reported, never fatal)."""
    return sorted(k for k in props if k not in _DIRECT and k not in _KNOWN)


# kafka-python keywords that are objects, or set by the tools themselves, never from a property
_NOT_PROPERTIES = {"bootstrap_servers", "key_serializer", "value_serializer", "key_deserializer",
                   "value_deserializer", "partitioner", "selector", "ssl_context", "socket_options",
                   "metric_reporters", "kafka_client", "sasl_oauth_token_provider", "api_version",
                   "default_offset_commit_callback", "partition_assignment_strategy",
                   "sasl_plain_username", "sasl_plain_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile"}


def java_client_keywords(props: Mapping[str, str], defaults: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The Java client's properties (``--producer-property linger.ms=5``, a ``--producer.config``
    file) as keywords of one kafka-python client, whose ``DEFAULT_CONFIG`` is ``defaults``: the
    security ones as for ``--command-config``, and each other ``a.b.c`` whose ``a_b_c`` that client
    has, in the type of its default (``true``/``false``, numbers; ``acks=all``,
    ``compression.type=none``).  Returns the keywords and, sorted, the names with no kafka-python
    counterpart (Kafka's clients warn about unknown ones too).  Raises UsageError for a value
    of the wrong type."""
    config = _security_keywords(props)
    unknown = []
    for key, value in props.items():
        name = key.replace(".", "_")
        if key in _DIRECT or key in _KNOWN:
            continue
        if name not in defaults or name in _NOT_PROPERTIES:
            unknown.append(key)
            continue
        try:
            config[name] = _typed(key, value.strip(), defaults[name])
        except ValueError:
            raise UsageError(f"{key}={value!r} is not valid") from None
    return config, sorted(unknown)


def _typed(key: str, value: str, default: Any) -> Any:
    if key == "acks":
        return -1 if value.lower() == "all" else int(value)
    if key == "compression.type":
        return None if value.lower() == "none" else value.lower()
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise ValueError(value)
        return value.lower() == "true"
    if isinstance(default, int) or (default is None and key.endswith((".bytes", ".ms"))):
        return int(value)               # kafka-python leaves the socket buffer sizes None
    if isinstance(default, float):
        return float(value)
    return value


def key_value_args(values: Iterable[str] | None, option: str) -> dict[str, str]:
    """``["k=v", ...]`` of a repeatable option (``--property``, ``--producer-property``) as a
    dict; the value is everything after the first ``=``.  Raises UsageError without one."""
    out = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} {item!r}: expected key=value")
        out[key.strip()] = value
    return out


def read_properties_file(path: str | None, option: str) -> dict[str, str]:
    """A Java properties file named by ``option`` (``--producer.config``); none: empty.
    Raises UsageError."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return {k: v.strip() for k, v in parse_properties(f.read()).items()}
    except (OSError, ConfigError) as exc:
        raise UsageError(f"{option} {path}: {exc}") from None


def _jaas_credentials(props: Mapping[str, str]) -> dict[str, str]:
    text = props.get("sasl.jaas.config")
    if not text:
        return {}
    from kwire.security.sasl import parse_jaas_config       # the broker's own JAAS parser
    try:
        entry = parse_jaas_config(text)
    except ValueError as exc:
        raise UsageError(f"--command-config: sasl.jaas.config: {exc}") from None
    module = entry.login_module.rsplit(".", 1)[-1]
    if module not in ("PlainLoginModule", "ScramLoginModule"):
        raise UsageError(f"--command-config: sasl.jaas.config: {module} is not supported by these "
                         "tools (PlainLoginModule and ScramLoginModule are)")
    out = {}
    if "username" in entry.options:
        out["sasl_plain_username"] = entry.options["username"]
    if "password" in entry.options:
        out["sasl_plain_password"] = entry.options["password"]
    return out


def _ssl_files(props: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for kind, keys in (("truststore", ("ssl_cafile",)), ("keystore", ("ssl_certfile", "ssl_keyfile"))):
        location = props.get(f"ssl.{kind}.location")
        if not location:
            continue
        store_type = props.get(f"ssl.{kind}.type", "PEM" if location.endswith((".pem", ".crt")) else "JKS")
        if store_type.upper() != "PEM":
            raise UsageError(f"--command-config: ssl.{kind}.type={store_type}: these tools read PEM "
                             f"files only (convert with: openssl pkcs12 -in {location} -out store.pem)")
        out.update({k: location for k in keys})      # a PEM keystore holds the key and the chain
    return out


# -- output ---------------------------------------------------------------------------------
def emit(args: argparse.Namespace, document: Any, columns: Sequence[str], rows: Iterable[Sequence[Any]],
         *, title: str | None = None, stream=None) -> None:
    """Print ``document`` as JSON with ``--output json``, else ``rows`` as a table under
    ``columns`` (Kafka's column names, so the output reads like Kafka's tools)."""
    stream = stream or sys.stdout
    if args.output == "json":
        json.dump(document, stream, indent=None, separators=(",", ":"), default=str)
        stream.write("\n")
        return
    print_table(columns, rows, title=title, stream=stream)


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None,
                stream=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich import box
    table = Table(*columns, title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  header_style="bold")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    # a pipe gets the whole width: scripts and tests read every column
    Console(file=stream or sys.stdout, width=None if (stream or sys.stdout).isatty() else 250,
            highlight=False, soft_wrap=True).print(table)


@contextlib.contextmanager
def progress(args: argparse.Namespace, description: str, total: int, *, at_least: int = 1000,
             stream=None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for long work; yields ``advance(n)``.  Shown only on a terminal,
    with ``--output table`` and for ``total >= at_least``, so short runs and scripts stay quiet."""
    stream = stream or sys.stderr
    if getattr(args, "output", "table") != "table" or total < at_least or not stream.isatty():
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import Progress
    with Progress(console=Console(file=stream), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)


def kafka_style(argv: Sequence[str], actions: Mapping[str, str]) -> list[str]:
    """Kafka's tools name their action with a flag (``kafka-topics.sh --describe --topic t``);
    here it is a subcommand.  ``actions`` maps each flag to its subcommand
    (``{"--describe": "describe"}``): exactly one such flag anywhere in ``argv`` moves to the
    front as its subcommand; anything else is returned unchanged for argparse to judge."""
    argv = list(argv)
    if argv and argv[0] in actions.values():
        return argv
    flags = [a for a in argv if a in actions]
    if len(flags) != 1:
        return argv
    argv.remove(flags[0])
    return [actions[flags[0]], *argv]


_COMMON_OPTIONS = ("--bootstrap-server", "--command-config", "--output")    # each takes a value


def options_first(argv: Sequence[str], parser: argparse.ArgumentParser, commands: Collection[str]) -> list[str]:
    """Kafka users type the connection options before the action (``kwire topics
    --bootstrap-server H:P create ...``); the subcommands take them, so leading common options
    move after the subcommand.  Options the tool itself takes before its subcommand stay; any
    other start is returned unchanged for argparse to judge."""
    argv, lead = list(argv), []
    while argv and argv[0] not in commands:
        name = argv[0].split("=", 1)[0]
        if name not in _COMMON_OPTIONS or name in parser._option_string_actions:
            return lead + argv
        taken = 1 if "=" in argv[0] else 2
        lead, argv = lead + argv[:taken], argv[taken:]
    return [argv[0], *lead, *argv[1:]] if argv else lead


def dispatch(argv: Sequence[str] | None, parser: argparse.ArgumentParser, actions: Mapping[str, str],
             commands: Mapping[str, Callable[[argparse.Namespace], int | None]]) -> int:
    """The ``main`` of a tool with subcommands: parse ``argv`` (default ``sys.argv[1:]``; Kafka's
    action flags ``actions`` accepted, see kafka_style) and ``run`` the subcommand's function of
    ``commands``.  Returns the exit code: 0 for ``--help``, 2 for argparse's usage errors."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser.parse_args(options_first(kafka_style(argv, actions), parser, commands))
    except SystemExit as exc:
        return int(exc.code or 0)
    return run(commands[args.command], args)


def run(main: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Call ``main(args)``; ToolError and kafka-python's errors -> a line on stderr and 1,
    UsageError -> 2.  Returns the exit code."""
    from kafka.errors import KafkaError
    try:
        return main(args) or 0
    except UsageError as exc:
        print(f"kwire: {exc}", file=sys.stderr)
        return 2
    except (ToolError, KafkaError) as exc:
        print(f"kwire: {exc}", file=sys.stderr)
        return 1
