"""``kwire produce`` and ``kwire consume``: Kafka's console producer and consumer on kafka-python.

    kwire produce --topic T [--property parse.key=true ...] [--request-required-acks -1]
                  [--compression-codec [none|gzip|snappy|lz4|zstd]] [--sync] [--producer-property k=v ...]
    kwire consume --topic T|--include REGEX [--group G] [--from-beginning]
                  [--partition P [--offset earliest|latest|N]] [--max-messages N] [--timeout-ms MS]
                  [--isolation-level read_committed] [--property print.key=true ...] [--formatter text|hex|json]

Both take ``--bootstrap-server``, ``--command-config`` and ``--output table|json``
(kwire.tools.common) and Kafka's options and defaults (kafka-console-producer.sh /
kafka-console-consumer.sh, Kafka 4.x):

- produce reads lines from stdin as Kafka's LineMessageReader does (``parse.key``,
  ``key.separator`` tab, ``parse.headers``, ``headers.delimiter`` tab, ``headers.separator`` ``,``
  -- a regular expression, as in Kafka -- ``headers.key.separator`` ``:``, ``null.marker``,
  ``ignore.error``), with acks -1, linger 1000 ms (``--timeout``), 3 retries and compression
  none (``--compression-codec`` alone means gzip).  It flushes and exits 0 at the end of input;
  a refused record prints Kafka's "Error when sending message ..." and the exit code is 1.
  ``--output json`` prints one document at the end: records sent and failed, and for each
  partition the records and their first and last offsets.
- consume prints records as Kafka's DefaultMessageFormatter does (``print.timestamp``,
  ``print.partition``, ``print.offset``, ``print.headers``, ``print.key``, ``print.value``,
  ``key.separator``, ``line.separator``, ``headers.separator``, ``null.literal``) and
  "Processed a total of N messages" on stderr at the end.  ``--formatter hex`` prints keys,
  values and header values in hex; ``--formatter json`` (or ``--output json``) prints each
  record as one JSON object per line.  Without ``--group`` nothing is committed (Kafka uses a
  throw-away group); with one, what was printed is committed, so a second run continues.

Differences from Kafka's tools: property values are kafka-python's (a Java property without a
kafka-python counterpart, such as ``buffer.memory``, is reported and ignored); input bytes that are
not UTF-8 pass through unchanged instead of becoming U+FFFD; a record refused in async mode
makes the exit code 1 (Kafka logs it and exits 0).  kafka-python sends a null header value
(``null.marker``) as an empty one and cannot send a record whose key and value are both null:
such a line is reported as refused.
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from kwire.tools.common import (DEFAULT_BOOTSTRAP, ToolError, UsageError, add_common_arguments, client_config, emit,
                     java_client_keywords, key_value_args, read_properties_file, run)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# (argparse dest, producer property, Kafka's default) merged as Kafka's maybeMergeOptions does:
# the option if given, else a --producer-property / --producer.config value, else the default
PRODUCER_OPTIONS = (
    ("timeout", "linger.ms", "1000"),
    ("request_required_acks", "acks", "-1"),
    ("request_timeout_ms", "request.timeout.ms", "1500"),
    ("message_send_max_retries", "retries", "3"),
    ("retry_backoff_ms", "retry.backoff.ms", "100"),
    ("socket_buffer_size", "send.buffer.bytes", "102400"),
    ("batch_size", "batch.size", "16384"),
    ("max_partition_memory_bytes", "batch.size", "16384"),
    ("metadata_expiry_ms", "metadata.max.age.ms", "300000"),
    ("max_block_ms", "max.block.ms", "60000"),
)
DEFAULT_FORMATTERS = ("kafka.tools.DefaultMessageFormatter", "org.apache.kafka.tools.consumer.DefaultMessageFormatter")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


# -- reading lines (Kafka's LineMessageReader) ------------------------------------------------
@dataclass
class LineRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")       # undecodable input bytes pass through


class LineReader:
    """Kafka's LineMessageReader rules, without I/O: ``parse(line, number)`` -> LineRecord.

    Raises UsageError for separators that clash (as Kafka refuses them at start) and
    ToolError for a line without its separator, unless ``ignore.error=true``."""

    def __init__(self, props: Mapping[str, str]):
        def flag(name):
            return props.get(name, "false").strip().lower() == "true"
        self.parse_key, self.parse_headers, self.ignore_error = flag("parse.key"), flag("parse.headers"), \
            flag("ignore.error")
        self.key_separator = props.get("key.separator", "\t")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        pairs = (("headers.delimiter", "headers.separator"), ("headers.delimiter", "headers.key.separator"),
                 ("headers.separator", "headers.key.separator"), ("null.marker", "key.separator"),
                 ("null.marker", "headers.separator"), ("null.marker", "headers.delimiter"),
                 ("null.marker", "headers.key.separator"))
        for a, b in pairs:
            if self._setting(a) is not None and self._setting(a) == self._setting(b):
                raise UsageError(f"{a} and {b} may not be equal")
        try:
            self._split_headers = re.compile(self.headers_separator)
        except re.error as exc:
            raise UsageError(f"headers.separator {self.headers_separator!r}: {exc}") from None

    def _setting(self, name: str) -> str | None:
        return {"key.separator": self.key_separator, "headers.delimiter": self.headers_delimiter,
                "headers.separator": self.headers_separator, "headers.key.separator": self.headers_key_separator,
                "null.marker": self.null_marker}[name]

    def parse(self, line: str, number: int) -> LineRecord:
        headers = self._field(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", number)
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._field(self.parse_key, line, start, self.key_separator, "key separator", number)
        start += 0 if key is None else len(key) + len(self.key_separator)
        record = LineRecord(self._bytes(key), self._bytes(line[start:]))
        if headers is not None and headers != self.null_marker:
            record.headers = [self._header(pair, number) for pair in self._pairs(headers)]
        return record

    def _field(self, enabled: bool, line: str, start: int, separator: str, name: str, number: int) -> str | None:
        if not enabled:
            return None
        end = line.find(separator, start)
        if end == -1:
            if self.ignore_error:
                return None
            raise ToolError(f"No {name} found on line number {number}: '{line}'")
        return line[start:end]

    def _bytes(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else _utf8(text)

    def _pairs(self, headers: str) -> list[str]:
        parts = self._split_headers.split(headers)
        while len(parts) > 1 and parts[-1] == "":        # Java's String.split drops trailing empties
            parts.pop()
        return parts

    def _header(self, pair: str, number: int) -> tuple[str, bytes | None]:
        cut = pair.find(self.headers_key_separator)
        if cut == -1:
            if self.ignore_error:
                return pair, None
            raise ToolError(f"No header key separator found in pair '{pair}' on line number {number}")
        key = pair[:cut]
        if key == self.null_marker:
            raise ToolError(f"Header keys should not be equal to the null marker '{self.null_marker}' "
                            "as they can't be null")
        return key, self._bytes(pair[cut + len(self.headers_key_separator):])


def _input_lines(prompt: Callable[[], None]) -> Iterator[str]:
    """stdin's lines without their end (\\n, \\r\\n or \\r, as Java's readLine)."""
    raw = getattr(sys.stdin, "buffer", None)
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline=None) if raw else sys.stdin
    try:
        while True:
            prompt()
            line = stream.readline()
            if not line:
                return
            yield line[:-1] if line.endswith("\n") else line
    finally:
        if raw is not None:
            stream.detach()                 # leave sys.stdin open


# -- the producer ----------------------------------------------------------------------------
class SendLog:
    """What the producer's callbacks report (they run on kafka-python's I/O thread)."""

    def __init__(self, topic: str):
        self.topic = topic
        self.lock = threading.Lock()
        self.offsets: dict[int, list[int]] = {}      # partition -> [records, first, last]
        self.failed = 0

    def sent(self, metadata) -> None:
        with self.lock:
            entry = self.offsets.setdefault(metadata.partition, [0, metadata.offset, metadata.offset])
            entry[0] += 1
            entry[1], entry[2] = min(entry[1], metadata.offset), max(entry[2], metadata.offset)

    def refused(self, record: LineRecord, exc: BaseException | str) -> None:
        with self.lock:
            self.failed += 1
        key = "null" if record.key is None else f"{len(record.key)} bytes"
        value = "null" if record.value is None else f"{len(record.value)} bytes"
        print(f"kwire: Error when sending message to topic {self.topic} with key: {key}, value: {value} "
              f"with error: {exc}", file=sys.stderr)

    def document(self) -> dict[str, Any]:
        with self.lock:
            parts = [{"partition": p, "records": n, "first_offset": first, "last_offset": last}
                     for p, (n, first, last) in sorted(self.offsets.items())]
            return {"topic": self.topic, "records_sent": sum(p["records"] for p in parts),
                    "records_failed": self.failed, "partitions": parts}


def producer_config(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python KafkaProducer keywords for the console producer's options."""
    from kafka import KafkaProducer
    props = {**read_properties_file(args.command_config, "--command-config"),
             **read_properties_file(args.producer_config, "--producer.config"),
             **key_value_args(args.producer_property, "--producer-property")}
    props.setdefault("client.id", "console-producer")
    for dest, key, default in PRODUCER_OPTIONS:
        given = getattr(args, dest)
        if given is not None:
            props[key] = str(given)
        else:
            props.setdefault(key, default)
    props["compression.type"] = args.compression_codec
    args.bootstrap_server = args.bootstrap_server or props.get("bootstrap.servers") or DEFAULT_BOOTSTRAP
    keywords, unknown = java_client_keywords(props, KafkaProducer.DEFAULT_CONFIG)
    _warn_unknown(unknown)
    return client_config(args, **keywords)


def _warn_unknown(names: Sequence[str]) -> None:
    for name in names:
        print(f"kwire: the configuration '{name}' was supplied but kafka-python has no such setting; "
              "ignored", file=sys.stderr)


def produce(args: argparse.Namespace) -> int:
    """Send stdin's lines; returns 0, or 1 when a record was refused.  Raises ToolError for a
    line that does not parse, UsageError for bad properties, KafkaError when unreachable."""
    from kafka import KafkaProducer
    reader_props = {**read_properties_file(args.reader_config, "--reader-config"),
                    **key_value_args(args.property, "--property")}
    reader = LineReader(reader_props)
    config = producer_config(args)
    log = SendLog(args.topic)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()

    def prompt():
        if interactive:
            sys.stdout.write(">")
            sys.stdout.flush()

    producer = KafkaProducer(**config)
    try:
        for number, line in enumerate(_input_lines(prompt), 1):
            record = reader.parse(line, number)
            if record.key is None and record.value is None:
                log.refused(record, "kafka-python cannot send a record whose key and value are both null")
                continue
            # kafka-python takes no null header value: it is sent empty
            headers = [(k, b"" if v is None else v) for k, v in record.headers]
            future = producer.send(args.topic, key=record.key, value=record.value, headers=headers)
            if args.sync:
                producer.flush()            # do not wait out linger.ms for a batch of one
                try:
                    log.sent(future.get())
                except Exception as exc:            # the broker's refusal (a KafkaError)
                    log.refused(record, exc)
                    break
            else:
                future.add_callback(log.sent).add_errback(lambda exc, r=record: log.refused(r, exc))
        producer.flush()
    finally:
        producer.close()
    if args.output == "json":
        emit(args, log.document(), [], [])
    return 1 if log.failed else 0


# -- the consumer ------------------------------------------------------------------------------
def _null_or(data: bytes | None, null: bytes, encode: Callable[[bytes], bytes]) -> bytes:
    return null if data is None else encode(data)


class TextFormatter:
    """Kafka's DefaultMessageFormatter: ``formatter(record) -> bytes``.  ``hex`` prints the key,
    value and header values in hex.  Raises nothing; unknown properties are ignored as Kafka does."""

    def __init__(self, props: Mapping[str, str], hex_bytes: bool = False):
        def flag(name, default):
            return props[name].strip().lower() == "true" if name in props else default
        self.timestamp, self.partition, self.offset = flag("print.timestamp", False), \
            flag("print.partition", False), flag("print.offset", False)
        self.headers, self.key, self.value = flag("print.headers", False), flag("print.key", False), \
            flag("print.value", True)
        self.key_separator = _utf8(props.get("key.separator", "\t"))
        self.line_separator = _utf8(props.get("line.separator", "\n"))
        self.headers_separator = _utf8(props.get("headers.separator", ","))
        self.null = _utf8(props.get("null.literal", "null"))
        self.encode: Callable[[bytes], bytes] = (lambda b: b.hex().encode()) if hex_bytes else bytes

    def __call__(self, record) -> bytes:
        fields = []
        if self.timestamp:
            kind = TIMESTAMP_TYPES.get(record.timestamp_type)
            fields.append(f"{kind}:{record.timestamp}".encode() if kind else b"NO_TIMESTAMP")
        if self.partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.headers:
            fields.append(self.headers_separator.join(
                _utf8(k) + b":" + _null_or(v, self.null, self.encode) for k, v in record.headers)
                if record.headers else b"NO_HEADERS")
        if self.key:
            fields.append(_null_or(record.key, self.null, self.encode))
        if self.value:
            fields.append(_null_or(record.value, self.null, self.encode))
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator


def _text_or_base64(name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(data).decode("ascii")}


def record_document(record) -> dict[str, Any]:
    """One record as JSON: key, value and header values as text, or as ``<name>_base64`` when
    they are not UTF-8."""
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp, "timestamp_type": TIMESTAMP_TYPES.get(record.timestamp_type),
            **_text_or_base64("key", record.key), **_text_or_base64("value", record.value),
            "headers": [{"key": k, **_text_or_base64("value", v)} for k, v in record.headers]}


def json_formatter(record) -> bytes:
    return json.dumps(record_document(record), separators=(",", ":")).encode() + b"\n"


def formatter_for(args: argparse.Namespace) -> Callable[[Any], bytes]:
    props = {**read_properties_file(args.formatter_config, "--formatter-config"),
             **key_value_args(args.property, "--property"),
             **key_value_args(args.formatter_property, "--formatter-property")}
    name = "json" if args.output == "json" else args.formatter
    if name == "json":
        return json_formatter
    return TextFormatter(props, hex_bytes=name == "hex")


def _parse_offset(text: str | None, from_beginning: bool) -> int | str:
    if text is None:
        return "earliest" if from_beginning else "latest"
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    if re.fullmatch(r"\d+", text.strip()):
        return int(text)
    raise UsageError(f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', 'latest', "
                     "or a non-negative long.")


def check_consumer_args(args: argparse.Namespace, props: dict[str, str]) -> None:
    """Kafka's ConsoleConsumerOptions checks, as UsageErrors."""
    if (args.topic is None) == (args.include is None):
        raise UsageError("Exactly one of --topic or --include must be given.")
    if args.partition is not None:
        if args.topic is None:
            raise UsageError("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise UsageError("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise UsageError("The partition is required when offset is specified.")
    groups = {g for g in (args.group, props.get("group.id")) if g is not None}
    if len(groups) > 1:
        raise UsageError("The group ids provided in different places (directly using '--group', via "
                         "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
                         + ", ".join(f"'{g}'" for g in sorted(groups)))
    if groups and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    reset = props.get("auto.offset.reset")
    if args.from_beginning and reset is not None and reset != "earliest":
        raise UsageError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                         "please remove one option")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must not be negative")


def consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python KafkaConsumer keywords for the console consumer's options."""
    from kafka import KafkaConsumer
    props = {**read_properties_file(args.command_config, "--command-config"),
             **read_properties_file(args.consumer_config, "--consumer.config"),
             **key_value_args(args.consumer_property, "--consumer-property")}
    check_consumer_args(args, props)
    props.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    props.setdefault("client.id", "console-consumer")
    if args.isolation_level is not None:
        props["isolation.level"] = args.isolation_level
    if args.group is not None:
        props["group.id"] = args.group
    if "group.id" not in props:          # Kafka's throw-away group: no commits
        props["enable.auto.commit"] = "false"
    args.bootstrap_server = args.bootstrap_server or props.get("bootstrap.servers") or DEFAULT_BOOTSTRAP
    keywords, unknown = java_client_keywords(props, KafkaConsumer.DEFAULT_CONFIG)
    _warn_unknown(unknown)
    return client_config(args, **keywords)


def _place(consumer, args: argparse.Namespace) -> None:
    from kafka.structs import TopicPartition
    if args.partition is None:
        if args.include is not None:
            consumer.subscribe(pattern=args.include)
        else:
            consumer.subscribe([args.topic])
        return
    tp = TopicPartition(args.topic, args.partition)
    consumer.assign([tp])
    offset = _parse_offset(args.offset, args.from_beginning)
    if offset == "earliest":
        consumer.seek_to_beginning(tp)
    elif offset == "latest":
        consumer.seek_to_end(tp)
    else:
        consumer.seek(tp, offset)


def _records(consumer, max_messages: int | None, timeout_ms: int | None) -> Iterator[list]:
    """Batches of records, at most ``max_messages`` in all, until ``timeout_ms`` passes without one.

    Each poll may take all the time left: kafka-python 3.0 loses an assignment whose join
    completes after a short poll has given up waiting for it (the group is joined, nothing is
    fetched), and a poll returns as soon as records arrive anyway."""
    count, last = 0, time.monotonic()
    while max_messages is None or count < max_messages:
        wait = 60_000 if timeout_ms is None else max(0, timeout_ms - int((time.monotonic() - last) * 1000))
        batches = consumer.poll(timeout_ms=wait, max_records=None if max_messages is None else max_messages - count)
        records = [r for batch in batches.values() for r in batch]
        if records:
            count += len(records)
            last = time.monotonic()
            yield records
        elif timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
            return


def consume(args: argparse.Namespace) -> int:
    """Print records until --max-messages, --timeout-ms or Ctrl-C; returns 0 (130 on Ctrl-C).
    Raises UsageError for bad options and kafka-python's errors when unreachable."""
    from kafka import KafkaConsumer
    config = consumer_config(args)
    _parse_offset(args.offset, args.from_beginning)          # refuse a bad --offset before connecting
    formatter = formatter_for(args)
    out = getattr(sys.stdout, "buffer", None)
    write = out.write if out is not None else (lambda b: sys.stdout.write(b.decode("utf-8", "replace")))
    consumer = KafkaConsumer(**config)
    count, code = 0, 0
    try:
        _place(consumer, args)
        for records in _records(consumer, args.max_messages, args.timeout_ms):
            for record in records:
                write(formatter(record))
                count += 1
            (out or sys.stdout).flush()
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        print("Unable to write to standard out, closing consumer.", file=sys.stderr)
    finally:
        consumer.close()             # commits what was printed when there is a group
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return code


# -- arguments ---------------------------------------------------------------------------------
def _no_default_bootstrap(parser: argparse.ArgumentParser) -> None:
    # None until the end: bootstrap.servers in a properties file may name the brokers instead
    add_common_arguments(parser)
    parser.set_defaults(bootstrap_server=None)


def producer_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kwire produce", description="Read lines from stdin and send them to a "
                                "topic, as kafka-console-producer.sh does.")
    _no_default_bootstrap(p)
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="line reader settings: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error")
    p.add_argument("--reader-config", metavar="FILE", help="line reader settings from a file (--property wins)")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="a producer setting by its Java name (linger.ms=5)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="producer settings from a file (--producer-property wins)")
    p.add_argument("--request-required-acks", "--acks", dest="request_required_acks", metavar="ACKS",
                   help="acks: -1/all (default), 1 or 0")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none", choices=CODECS,
                   help="none (default), gzip (the value when none is given), snappy, lz4 or zstd")
    p.add_argument("--sync", action="store_true", help="send each record and wait for its acknowledgement")
    p.add_argument("--timeout", type=int, metavar="MS", help="linger.ms (default 1000)")
    for name, key in (("batch-size", "batch.size"), ("max-partition-memory-bytes", "batch.size"),
                      ("message-send-max-retries", "retries"), ("retry-backoff-ms", "retry.backoff.ms"),
                      ("request-timeout-ms", "request.timeout.ms"), ("metadata-expiry-ms", "metadata.max.age.ms"),
                      ("max-block-ms", "max.block.ms"), ("socket-buffer-size", "send.buffer.bytes")):
        default = next(d for _, k, d in PRODUCER_OPTIONS if k == key)
        p.add_argument(f"--{name}", type=int, metavar="N", help=f"{key} (default {default})")
    return p


def consumer_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kwire consume", description="Print a topic's records, as "
                                "kafka-console-consumer.sh does.")
    _no_default_bootstrap(p)
    p.add_argument("--topic", help="the topic to consume")
    p.add_argument("--include", metavar="REGEX", help="consume every topic whose name matches")
    p.add_argument("--group", help="consumer group: offsets are committed, a second run continues")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one")
    p.add_argument("--partition", type=int, help="read this partition only (from its end unless --offset)")
    p.add_argument("--offset", help="with --partition: earliest, latest (default) or an offset")
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    p.add_argument("--timeout-ms", type=int, metavar="MS", help="stop when no record came for MS milliseconds")
    p.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"),
                   help="read_committed skips aborted and open transactions (default read_uncommitted)")
    p.add_argument("--formatter", default="text", type=lambda v: "text" if v in DEFAULT_FORMATTERS else v,
                   choices=("text", "hex", "json"),
                   help="text (default, Kafka's DefaultMessageFormatter), hex, or json: one object per record")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="formatter settings: print.timestamp, print.partition, print.offset, print.headers, "
                        "print.key, print.value, key.separator, line.separator, headers.separator, null.literal")
    p.add_argument("--formatter-property", action="append", metavar="KEY=VALUE", help="the same as --property")
    p.add_argument("--formatter-config", metavar="FILE", help="formatter settings from a file")
    p.add_argument("--consumer-property", "--command-property", dest="consumer_property", action="append",
                   metavar="KEY=VALUE", help="a consumer setting by its Java name (max.poll.records=100)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="consumer settings from a file (--consumer-property wins)")
    return p


def _main(parser: argparse.ArgumentParser, command, argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:           # --help, or argparse's usage error (2)
        return int(exc.code or 0)
    return run(command, args)


def producer_main(argv: Sequence[str] | None = None) -> int:
    """``kwire produce ...``; returns the exit code (0, 1 refused/unreachable, 2 bad arguments)."""
    return _main(producer_parser(), produce, argv)


def consumer_main(argv: Sequence[str] | None = None) -> int:
    """``kwire consume ...``; returns the exit code (0, 1 unreachable, 2 bad arguments, 130 Ctrl-C)."""
    return _main(consumer_parser(), consume, argv)


if __name__ == "__main__":
    # python -m kwire.tools.console produce|consume ...
    commands = {"produce": producer_main, "consume": consumer_main}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print("usage: python -m kwire.tools.console produce|consume [options]", file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]](sys.argv[2:]))
