"""``kwire perf produce`` and ``kwire perf consume``: kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh on kafka-python, with their options and output lines.

    kwire perf produce --topic T --num-records N (--record-size S | --payload-file F | --payload-monotonic)
                       --throughput R [--producer-props k=v ...] [--producer.config F]
                       [--transactional-id ID] [--transaction-duration-ms MS] [--warmup-records W]
    kwire perf consume --topic T|--include REGEX --messages N [--group G] [--timeout MS] [--from-latest]
                       [--fetch-size B] [--show-detailed-stats] [--reporting-interval MS] [--hide-header]

Both take ``--bootstrap-server``, ``--command-config`` and ``--output table|json``
(kwire.tools.common); ``bootstrap.servers`` in ``--producer-props`` or a config file works too.

produce prints Kafka's line every 5 s ("N records sent, R records/sec (M MB/sec), A ms avg
latency, X ms max latency.") and at the end its summary with the latency percentiles;
``--throughput`` paces the sends as Kafka's ThroughputThrottler does (-1: as fast as possible).
consume prints Kafka's CSV header and line (start.time, end.time, data.consumed.in.MB, MB.sec,
data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec,
fetch.nMsg.sec).  On a terminal a progress bar runs on stderr; ``--output json`` prints the same
figures as one document instead.

Differences from Kafka's tools: record payloads are slices of one random upper-case buffer
rather than fresh random bytes per record (Python could not fill them fast enough); consume
stops at exactly ``--messages`` records (Kafka counts the whole last poll); failed sends make
the exit code 1 (Kafka prints each stack trace and exits 0); ``--print-metrics`` prints
kafka-python's metrics, which are fewer than the Java client's.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import random
import re
import sys
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from kwire.tools.common import (DEFAULT_BOOTSTRAP, UsageError, add_common_arguments, client_config, emit,
                     java_client_keywords, key_value_args, options_first, print_table, progress,
                     read_properties_file, run)

REPORTING_INTERVAL_MS = 5000
MAX_LATENCY_SAMPLES = 500_000
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
MB = 1024 * 1024


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def java_float(value: float, digits: int) -> str:
    """``String.format("%.<digits>f")`` as Java prints it, Infinity and NaN included."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.{digits}f}"


def _ratio(a: float, b: float) -> float:
    """a / b with Java's double division: x/0 is +-Infinity, 0/0 NaN."""
    if b:
        return a / b
    return math.nan if a == 0 else math.copysign(math.inf, a)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


# -- producer statistics (Kafka's ProducerPerformance.Stats) -------------------------------------
class Stats:
    """Latencies and sizes of acknowledged sends; time is passed in.  ``record`` returns Kafka's
    5-second window line when one is due.  Thread-safe: kafka-python calls back on its I/O thread."""

    def __init__(self, num_records: int, start_ms: int, steady_state: bool = False):
        self.start_ms = start_ms
        self.steady_state = steady_state
        self.sampling = max(1, num_records // min(num_records, MAX_LATENCY_SAMPLES))
        self.latencies: list[int] = []
        self.iteration = self.count = self.bytes = self.total_latency = self.max_latency = 0
        self._lock = threading.Lock()
        self._new_window(start_ms)

    def _new_window(self, now_ms: int) -> None:
        self.window_start = now_ms
        self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0

    def record(self, latency_ms: int, size: int, now_ms: int) -> str | None:
        with self._lock:
            self.count += 1
            self.bytes += size
            self.total_latency += latency_ms
            self.max_latency = max(self.max_latency, latency_ms)
            self.window_count += 1
            self.window_bytes += size
            self.window_total_latency += latency_ms
            self.window_max_latency = max(self.window_max_latency, latency_ms)
            if self.iteration % self.sampling == 0:
                self.latencies.append(latency_ms)
            self.iteration += 1
            if now_ms - self.window_start < REPORTING_INTERVAL_MS:
                return None
            line = self.window_line(now_ms)
            self._new_window(now_ms)
            return line

    def window_line(self, now_ms: int) -> str:
        elapsed = now_ms - self.window_start
        return (f"{self.window_count} records sent, {java_float(_ratio(1000.0 * self.window_count, elapsed), 1)} "
                f"records/sec ({java_float(_ratio(1000.0 * self.window_bytes, elapsed) / MB, 2)} MB/sec), "
                f"{java_float(_ratio(self.window_total_latency, self.window_count), 1)} ms avg latency, "
                f"{java_float(self.window_max_latency, 1)} ms max latency.")

    def percentiles(self) -> list[int]:
        ordered = sorted(self.latencies)
        return [ordered[int(p * len(ordered))] if ordered else 0 for p in (0.5, 0.95, 0.99, 0.999)]

    def total(self, now_ms: int) -> dict[str, Any]:
        elapsed = now_ms - self.start_ms
        p50, p95, p99, p999 = self.percentiles()
        return {"records_sent": self.count, "records_per_sec": _ratio(1000.0 * self.count, elapsed),
                "mb_per_sec": _ratio(1000.0 * self.bytes, elapsed) / MB, "bytes": self.bytes,
                "avg_latency_ms": _ratio(self.total_latency, self.count), "max_latency_ms": self.max_latency,
                "latency_percentiles_ms": {"50th": p50, "95th": p95, "99th": p99, "99.9th": p999},
                "elapsed_ms": elapsed}

    def total_line(self, now_ms: int) -> str:
        t = self.total(now_ms)
        p = t["latency_percentiles_ms"]
        steady = " steady state" if self.steady_state else ""
        return (f"{t['records_sent']}{steady} records sent, {java_float(t['records_per_sec'], 6)} records/sec "
                f"({java_float(t['mb_per_sec'], 2)} MB/sec), {java_float(t['avg_latency_ms'], 2)} ms avg latency, "
                f"{java_float(t['max_latency_ms'], 2)} ms max latency, {p['50th']} ms 50th, {p['95th']} ms 95th, "
                f"{p['99th']} ms 99th, {p['99.9th']} ms 99.9th.")


class Throttler:
    """Kafka's ThroughputThrottler: sleep between sends so the average rate stays near
    ``target`` per second (< 0: never; 0: block)."""
    MIN_SLEEP_NS = 2_000_000

    def __init__(self, target: float, start_ms: int, sleep: Callable[[float], None] = time.sleep):
        self.target, self.start_ms, self.sleep = target, start_ms, sleep
        self.sleep_ns = int(1e9 / target) if target > 0 else None
        self.deficit_ns = 0

    def should_throttle(self, amount_so_far: int, send_start_ms: int) -> bool:
        if self.target < 0:
            return False
        elapsed_s = (send_start_ms - self.start_ms) / 1000
        return elapsed_s > 0 and amount_so_far / elapsed_s > self.target

    def throttle(self) -> None:
        if self.sleep_ns is None:            # a target of 0 sends nothing more
            while True:
                self.sleep(3600)
        self.deficit_ns += self.sleep_ns
        if self.deficit_ns >= self.MIN_SLEEP_NS:
            self.sleep(self.deficit_ns / 1e9)
            self.deficit_ns = 0


# -- payloads ------------------------------------------------------------------------------------
def payload_source(args: argparse.Namespace) -> Callable[[int], bytes]:
    """``payload(i)`` for record i: random upper-case letters of --record-size, a random entry of
    --payload-file, or ``str(i)`` for --payload-monotonic.  Raises UsageError."""
    rng = random.Random(0)
    if args.record_size is not None:
        if args.record_size <= 0:
            raise UsageError("--record-size should be greater than zero")
        spread, size = 4096, args.record_size
        pool = bytes(rng.choices(range(65, 91), k=size + spread))

        def random_letters(_i: int) -> bytes:
            start = rng.randrange(spread)
            return pool[start:start + size]
        return random_letters
    if args.payload_file is not None:
        payloads = read_payload_file(args.payload_file, args.payload_delimiter, args.output == "table")
        return lambda i: payloads[rng.randrange(len(payloads))]
    return lambda i: str(i).encode()


def read_payload_file(path: str, delimiter: str, say: bool) -> list[bytes]:
    """The file's UTF-8 text split at ``delimiter`` (a regular expression, as Java's Scanner
    reads it).  Raises UsageError for a missing or empty file."""
    if say:
        print(f"Reading payloads from: {os.path.abspath(path)}")
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        raise UsageError("File does not exist or empty file provided.")
    with open(path, encoding="utf-8") as f:
        pieces = re.split(delimiter, f.read())
    if pieces and pieces[-1] == "":
        pieces.pop()
    if say:
        print(f"Number of messages read: {len(pieces)}")
    return [p.encode() for p in pieces]


# -- perf produce --------------------------------------------------------------------------------
def _bootstrap(args: argparse.Namespace, props: dict[str, str]) -> None:
    args.bootstrap_server = args.bootstrap_server or props.get("bootstrap.servers") or DEFAULT_BOOTSTRAP


def _producer_config(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    from kafka import KafkaProducer
    props = {**read_properties_file(args.command_config, "--command-config"),
             **read_properties_file(args.producer_config, "--producer.config"),
             **key_value_args(args.producer_props, "--producer-props")}
    props.setdefault("client.id", "perf-producer-client")
    transactions = bool(args.transaction_duration_ms is not None or args.transactional_id
                        or "transactional.id" in props)
    if transactions:
        props["transactional.id"] = (args.transactional_id or props.get("transactional.id")
                                     or f"performance-producer-{uuid.uuid4()}")
    _bootstrap(args, props)
    keywords, unknown = java_client_keywords(props, KafkaProducer.DEFAULT_CONFIG)
    for name in unknown:
        print(f"kwire: the configuration '{name}' was supplied but kafka-python has no such setting; ignored",
              file=sys.stderr)
    return client_config(args, **keywords), transactions


def _check_produce_args(args: argparse.Namespace) -> None:
    if args.num_records <= 0:
        raise UsageError("--num-records should be greater than zero")
    if args.warmup_records >= args.num_records:
        raise UsageError("The value for --warmup-records must be strictly fewer than the number of records in the "
                         "test, --num-records.")
    if args.transaction_duration_ms is not None and args.transaction_duration_ms <= 0:
        raise UsageError("--transaction-duration-ms should be greater than zero")


class _Run:
    """One produce run's statistics, fed by kafka-python's callbacks."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.stats = Stats(args.num_records, _now_ms())
        self.steady: Stats | None = None
        self.failed = 0
        self.quiet = args.output == "json"

    def acknowledged(self, send_start_ms: int, size: int, steady: Stats | None, _metadata) -> None:
        now = _now_ms()
        line = self.stats.record(now - send_start_ms, size, now)
        if steady is not None:          # past the warm-up only the steady-state windows print
            line = steady.record(now - send_start_ms, size, now)
        if line and not self.quiet:
            print(line, flush=True)

    def refused(self, exc: BaseException) -> None:
        self.failed += 1
        if self.failed <= 10:
            print(f"kwire: a send failed: {exc}", file=sys.stderr)


def perf_produce(args: argparse.Namespace) -> int:
    """Send --num-records records and print Kafka's summary; 1 when some failed.
    Raises UsageError for bad options, KafkaError when the broker cannot be reached."""
    from kafka import KafkaProducer
    _check_produce_args(args)
    payload = payload_source(args)
    config, transactions = _producer_config(args)
    duration_ms = args.transaction_duration_ms or 3000
    producer = KafkaProducer(**config)
    if transactions:
        producer.init_transactions()
    if args.warmup_records and not args.output == "json":
        print(f"Warmup first {args.warmup_records} records. Steady state results will print after the complete "
              "test summary.")
    state = _Run(args)
    throttler = Throttler(args.throughput, state.stats.start_ms)
    in_transaction, transaction_start = 0, 0
    with progress(args, "producing", args.num_records) as advance:
        shown = 0
        for i in range(args.num_records):
            value = payload(i)
            if transactions and in_transaction == 0:
                producer.begin_transaction()
                transaction_start = _now_ms()
            send_start = _now_ms()
            if args.warmup_records and i == args.warmup_records:
                state.steady = Stats(args.num_records - args.warmup_records, send_start, steady_state=True)
            producer.send(args.topic, value=value) \
                .add_callback(state.acknowledged, send_start, len(value), state.steady).add_errback(state.refused)
            in_transaction += 1
            if transactions and duration_ms <= send_start - transaction_start:
                producer.commit_transaction()
                in_transaction = 0
            if throttler.should_throttle(i, send_start):
                throttler.throttle()
            if i % 1000 == 999:
                advance(state.stats.count - shown)
                shown = state.stats.count
        if transactions and in_transaction:
            producer.commit_transaction()
        metrics = producer.metrics() if args.print_metrics else None
        producer.close()
        advance(state.stats.count - shown)
    _report_produce(args, state, _now_ms(), metrics)
    return 1 if state.failed else 0


def _report_produce(args: argparse.Namespace, state: _Run, now_ms: int, metrics) -> None:
    if state.failed:
        print(f"kwire: {state.failed} of {args.num_records} records were not acknowledged", file=sys.stderr)
    if args.output == "json":
        document = {**_json_safe(state.stats.total(now_ms)), "records_failed": state.failed}
        if state.steady is not None:
            document["steady_state"] = _json_safe(state.steady.total(now_ms))
        if metrics is not None:
            document["metrics"] = metrics
        emit(args, document, [], [])
        return
    print(state.stats.total_line(now_ms))
    if state.steady is not None:
        print(state.steady.total_line(now_ms))
    if metrics is not None:
        print_metrics(metrics)


def _json_safe(document: dict[str, Any]) -> dict[str, Any]:
    return {k: _finite(v) if isinstance(v, float) else v for k, v in document.items()}


def print_metrics(metrics: dict[str, dict[str, Any]]) -> None:
    rows = [(f"{group}:{name}", java_float(float(value), 3) if isinstance(value, (int, float)) else value)
            for group, values in sorted(metrics.items()) for name, value in sorted(values.items())]
    print_table(["Metric Name", "Value"], rows)


# -- perf consume --------------------------------------------------------------------------------
_DATE_FIELDS = {"y": ("%Y", "%y"), "M": ("%m",), "d": ("%d",), "H": ("%H",), "m": ("%M",), "s": ("%S",)}


def date_formatter(pattern: str) -> Callable[[int], str]:
    """Java's SimpleDateFormat for the letters y M d H m s S and quoted text, in local time.
    Raises UsageError for other letters."""
    parts: list[Callable[[datetime.datetime], str]] = []
    for token in re.finditer(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", pattern):
        text = token.group(0)
        if text.startswith("'"):            # quoted text; '' is a quote, inside or out
            parts.append(lambda _d, t=text[1:-1].replace("''", "'") or "'": t)
        elif text[0] == "S":
            parts.append(lambda d, n=len(text): f"{d.microsecond // 1000:0{n}d}")
        elif text[0] in _DATE_FIELDS:
            codes = _DATE_FIELDS[text[0]]
            code = codes[1] if len(codes) > 1 and len(text) == 2 else codes[0]
            parts.append(lambda d, c=code: d.strftime(c))
        elif text[0].isalpha():
            raise UsageError(f"--date-format {pattern!r}: the letter {text[0]!r} is not supported "
                             "(y, M, d, H, m, s and S are)")
        else:
            parts.append(lambda _d, t=text: t)

    def format_ms(ms: int) -> str:
        moment = datetime.datetime.fromtimestamp(ms / 1000)
        return "".join(part(moment) for part in parts)
    return format_ms


class _JoinTimer:
    """Kafka's ConsumerPerfRebListener: time from losing the last partition (or the start) to
    the next assignment counts as rebalance time."""

    def __init__(self, start_ms: int):
        self.join_start = start_ms
        self.join_ms = self.join_ms_in_round = 0
        self.assigned: set = set()

    def listener(self):
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        timer = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                timer.assigned.difference_update(revoked)
                if not timer.assigned:
                    timer.join_start = _now_ms()

            def on_partitions_assigned(self, assigned):
                if not timer.assigned:
                    elapsed = _now_ms() - timer.join_start
                    timer.join_ms += elapsed
                    timer.join_ms_in_round += elapsed
                timer.assigned.update(assigned)
        return Listener()


def _consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    from kafka import KafkaConsumer
    props = {**read_properties_file(args.command_config, "--command-config"),
             **read_properties_file(args.consumer_config, "--consumer.config")}
    props.update({"group.id": args.group, "receive.buffer.bytes": str(args.socket_buffer_size),
                  "max.partition.fetch.bytes": str(args.fetch_size), "check.crcs": "false",
                  "auto.offset.reset": "latest" if args.from_latest else "earliest"})
    props.setdefault("client.id", "perf-consumer-client")
    _bootstrap(args, props)
    keywords, _unknown = java_client_keywords(props, KafkaConsumer.DEFAULT_CONFIG)
    return client_config(args, **keywords)


def _consume_figures(start_ms: int, end_ms: int, messages: int, size: int, join_ms: int) -> dict[str, Any]:
    elapsed_s = (end_ms - start_ms) / 1000.0
    fetch_ms = end_ms - start_ms - join_ms
    mb = size / MB
    return {"start_time_ms": start_ms, "end_time_ms": end_ms, "data_consumed_mb": mb,
            "mb_per_sec": _ratio(mb, elapsed_s), "messages": messages, "messages_per_sec": _ratio(messages, elapsed_s),
            "rebalance_time_ms": join_ms, "fetch_time_ms": fetch_ms, "fetch_mb_per_sec": _ratio(mb, fetch_ms / 1000.0),
            "fetch_messages_per_sec": _ratio(messages, fetch_ms / 1000.0)}


def consumer_line(figures: dict[str, Any], date: Callable[[int], str]) -> str:
    f = figures
    return ", ".join([date(f["start_time_ms"]), date(f["end_time_ms"]), java_float(f["data_consumed_mb"], 4),
                      java_float(f["mb_per_sec"], 4), str(f["messages"]), java_float(f["messages_per_sec"], 4),
                      str(f["rebalance_time_ms"]), str(f["fetch_time_ms"]), java_float(f["fetch_mb_per_sec"], 4),
                      java_float(f["fetch_messages_per_sec"], 4)])


def _detailed_line(date, now_ms, last_ms, size, last_size, messages, last_messages, join_in_round) -> str:
    elapsed = now_ms - last_ms
    interval_mb = (size - last_size) / MB
    fetch_ms = elapsed - join_in_round
    return ", ".join([date(now_ms), "0", java_float(size / MB, 4), java_float(_ratio(1000.0 * interval_mb, elapsed), 4),
                      str(messages), java_float(_ratio(1000.0 * (messages - last_messages), elapsed), 4),
                      str(join_in_round), str(fetch_ms),
                      java_float(0.0 if fetch_ms <= 0 else 1000.0 * interval_mb / fetch_ms, 4),
                      java_float(0.0 if fetch_ms <= 0 else 1000.0 * (messages - last_messages) / fetch_ms, 4)])


def perf_consume(args: argparse.Namespace) -> int:
    """Read --messages records in a group and print Kafka's CSV summary.  Raises UsageError for
    bad options, KafkaError when the broker cannot be reached."""
    from kafka import KafkaConsumer
    if (args.topic is None) == (args.include is None):
        raise UsageError("Exactly one of --topic or --include must be given.")
    if args.reporting_interval <= 0:
        raise UsageError("Reporting interval must be greater than 0.")
    date = date_formatter(args.date_format)
    table = args.output == "table"
    if table and not args.hide_header:
        print(DETAILED_HEADER if args.show_detailed_stats else CONSUMER_HEADER)
    consumer = KafkaConsumer(**_consumer_config(args))
    start_ms = _now_ms()
    timer = _JoinTimer(start_ms)
    if args.topic is not None:
        consumer.subscribe([args.topic], listener=timer.listener())
    else:
        consumer.subscribe(pattern=args.include, listener=timer.listener())
    messages = size = last_messages = last_size = 0
    now = last_report = last_consumed = _now_ms()
    with progress(args, "consuming", args.messages) as advance:
        while messages < args.messages and now - last_consumed <= args.timeout:
            # all the time left, not Kafka's 100 ms: kafka-python 3.0 loses an assignment whose
            # join completes after a short poll gave up on it (joined, nothing fetched)
            batches = consumer.poll(timeout_ms=max(0, args.timeout - (now - last_consumed)),
                                    max_records=args.messages - messages)
            now = _now_ms()
            records = [r for batch in batches.values() for r in batch]
            if records:
                last_consumed = now
                advance(len(records))
            for record in records:
                messages += 1
                size += (len(record.key) if record.key is not None else 0) + \
                    (len(record.value) if record.value is not None else 0)
                if now - last_report >= args.reporting_interval:
                    if args.show_detailed_stats and table:
                        print(_detailed_line(date, now, last_report, size, last_size, messages, last_messages,
                                             timer.join_ms_in_round))
                    timer.join_ms_in_round = 0
                    last_report, last_messages, last_size = now, messages, size
    end_ms = _now_ms()
    metrics = consumer.metrics() if args.print_metrics else None
    consumer.close()
    return _report_consume(args, _consume_figures(start_ms, end_ms, messages, size, timer.join_ms), date, metrics)


def _report_consume(args: argparse.Namespace, figures: dict[str, Any], date, metrics) -> int:
    timed_out = figures["messages"] < args.messages
    if args.output == "json":
        document = {**_json_safe(figures), "expected": args.messages, "timed_out": timed_out}
        if metrics is not None:
            document["metrics"] = metrics
        emit(args, document, [], [])
        return 0
    if timed_out:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
              "exceeded. You can use the --timeout option to increase the timeout.")
    if not args.show_detailed_stats:
        print(consumer_line(figures, date))
    if metrics is not None:
        print_metrics(metrics)
    return 0


# -- arguments ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kwire perf", description="Measure producing and consuming, as "
                                     "kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh do.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce", help="produce N records as fast as allowed and report rates and latencies")
    add_common_arguments(p)
    p.set_defaults(bootstrap_server=None)       # bootstrap.servers may come from --producer-props
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True, metavar="N")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="BYTES", help="random upper-case letters of this size")
    payload.add_argument("--payload-file", metavar="FILE", help="payloads from this UTF-8 file, picked at random")
    payload.add_argument("--payload-monotonic", action="store_true", help="payloads 0, 1, 2, ...")
    p.add_argument("--payload-delimiter", default="\n", help="between --payload-file's payloads (default newline)")
    p.add_argument("--throughput", type=float, required=True, help="records/sec at most; -1: no limit")
    p.add_argument("--producer-props", nargs="+", metavar="KEY=VALUE", help="producer settings by Java name")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer settings file")
    p.add_argument("--print-metrics", action="store_true", help="print kafka-python's producer metrics at the end")
    p.add_argument("--transactional-id", help="produce in transactions with this id")
    p.add_argument("--transaction-duration-ms", type=int, metavar="MS", help="commit every MS (default 3000)")
    p.add_argument("--warmup-records", type=int, default=0, metavar="N",
                   help="leave the first N records out of a second, steady-state summary")
    c = sub.add_parser("consume", help="consume N records in a group and report the rates")
    add_common_arguments(c)
    c.set_defaults(bootstrap_server=None)
    c.add_argument("--topic")
    c.add_argument("--include", metavar="REGEX")
    c.add_argument("--messages", type=int, required=True, metavar="N")
    c.add_argument("--group", default=f"perf-consumer-{random.randrange(100_000)}")
    c.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                   help="the longest wait between records (default 10000)")
    c.add_argument("--from-latest", action="store_true", help="start at the end when the group has no offsets")
    c.add_argument("--fetch-size", type=int, default=1024 * 1024, help="max.partition.fetch.bytes (default 1 MiB)")
    c.add_argument("--socket-buffer-size", type=int, default=2 * 1024 * 1024, help="receive.buffer.bytes")
    c.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="consumer settings file")
    c.add_argument("--print-metrics", action="store_true", help="print kafka-python's consumer metrics at the end")
    c.add_argument("--show-detailed-stats", action="store_true", help="a line every --reporting-interval")
    c.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    c.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS",
                   help="Java SimpleDateFormat letters y M d H m s S")
    c.add_argument("--hide-header", action="store_true")
    return parser


COMMANDS = {"produce": perf_produce, "consume": perf_consume}


def main(argv: Sequence[str] | None = None) -> int:
    """``kwire perf produce|consume ...``; returns the exit code (0, 1 failed sends or unreachable,
    2 bad arguments)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        args = parser.parse_args(options_first(argv, parser, COMMANDS))
    except SystemExit as exc:       # --help, or argparse's usage error (2)
        return int(exc.code or 0)
    return run(COMMANDS[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
