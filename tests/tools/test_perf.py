"""``kwire perf produce|consume`` against an embedded kwire broker: exactly N records of S bytes
land (end offsets and sizes read back by confluent-kafka), the summaries have Kafka's formats and
parse, --throughput paces, and the JSON documents hold the same figures."""
from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition

from kwire.tools.common import UsageError
from kwire.tools.perf import CONSUMER_HEADER, Stats, date_formatter, java_float, main
from tests.support.roundtrip import read_messages
from tests.support.tool_output import run_tool, unique_name

clients = pytest.mark.clients      # these start a broker; the pure ones below stay in the fast lane
PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg latency, "
    r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.")
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"


def name(prefix: str = "perf") -> str:
    return unique_name(prefix)


def perf(broker, capsys, *argv: str) -> tuple[int, str, str]:
    return run_tool(main, broker.bootstrap, capsys, *argv)


def end_offsets(broker, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("watermarks")})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


# -- without a broker ------------------------------------------------------------------------------
def test_window_and_summary_lines_have_kafkas_formats():
    stats = Stats(num_records=4, start_ms=0)
    assert stats.record(10, 100, now_ms=1000) is None
    assert stats.record(30, 100, now_ms=2000) is None
    assert stats.record(20, 100, now_ms=5000) == \
        "3 records sent, 0.6 records/sec (0.00 MB/sec), 20.0 ms avg latency, 30.0 ms max latency."
    assert stats.record(40, 1024 * 1024, now_ms=6000) is None
    assert stats.total_line(now_ms=8000) == (
        "4 records sent, 0.500000 records/sec (0.13 MB/sec), 25.00 ms avg latency, 40.00 ms max latency, "
        "30 ms 50th, 40 ms 95th, 40 ms 99th, 40 ms 99.9th.")
    assert Stats(num_records=1, start_ms=0).total_line(now_ms=0).startswith(
        "0 records sent, NaN records/sec (NaN MB/sec), NaN ms avg latency, 0.00 ms max latency, 0 ms 50th")


def test_java_float_prints_what_javas_format_prints():
    assert [java_float(v, 4) for v in (1 / 3, float("inf"), float("-inf"), float("nan"))] == \
        ["0.3333", "Infinity", "-Infinity", "NaN"]


def test_date_format_takes_simpledateformat_letters():
    ms = int(datetime.datetime(2024, 1, 2, 3, 4, 5, 678000).timestamp() * 1000)     # local time, as Java
    assert date_formatter("yyyy-MM-dd HH:mm:ss:SSS")(ms) == "2024-01-02 03:04:05:678"
    assert date_formatter("yy/MM/dd'T'HH 'o''clock' ''")(ms) == "24/01/02T03 o'clock '"
    with pytest.raises(UsageError, match="'Z' is not supported"):
        date_formatter("HH:mm Z")


@pytest.mark.parametrize("argv, complaint", [
    (["produce", "--topic", "t", "--num-records", "0", "--record-size", "1", "--throughput", "-1"],
     "--num-records should be greater than zero"),
    (["produce", "--topic", "t", "--num-records", "5", "--record-size", "0", "--throughput", "-1"],
     "--record-size should be greater than zero"),
    (["produce", "--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1",
      "--warmup-records", "5"], "--warmup-records must be strictly fewer"),
    (["produce", "--topic", "t", "--num-records", "5", "--payload-file", "/nonexistent", "--throughput", "-1"],
     "File does not exist or empty file provided."),
    (["consume", "--messages", "5"], "Exactly one of --topic or --include"),
])
def test_kafkas_argument_checks_exit_2(capsys, argv, complaint):
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert complaint in capsys.readouterr().err


def test_record_size_and_payload_file_exclude_each_other(capsys):
    assert main(["produce", "--topic", "t", "--num-records", "5", "--record-size", "1", "--payload-monotonic",
                 "--throughput", "-1"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


# -- against a broker ------------------------------------------------------------------------------
@clients
def test_produce_writes_exactly_n_records_of_size_s(broker, capsys):
    topic = broker.create_topic(name(), partitions=3)
    code, out, err = perf(broker, capsys, "produce", "--topic", topic, "--num-records", "3000", "--record-size", "100",
                          "--throughput", "-1", "--producer-props", "acks=all", "linger.ms=2")
    assert code == 0, err
    summary = PRODUCER_SUMMARY.fullmatch(out.splitlines()[-1])
    assert summary and summary.group(1) == "3000", out
    assert float(summary.group(2)) > 0
    assert sum(end_offsets(broker, topic, 3)) == 3000
    values = [m.value() for m in read_messages(broker.bootstrap, topic, 3000)]
    assert len(values) == 3000
    assert all(len(v) == 100 and re.fullmatch(rb"[A-Z]+", v) for v in values)
    assert len(set(values)) > 1000          # not one payload over and over


@clients
def test_produce_json_and_throughput_pacing(broker, capsys):
    topic = broker.create_topic(name(), partitions=1)
    code, out, err = perf(broker, capsys, "produce", "--topic", topic, "--num-records", "150", "--record-size", "10",
                          "--throughput", "100", "--output", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["records_sent"], doc["bytes"], doc["records_failed"]) == (150, 1500, 0)
    assert doc["elapsed_ms"] >= 1400 and doc["records_per_sec"] <= 110     # 150 records at 100/s take ~1.5 s
    assert set(doc["latency_percentiles_ms"]) == {"50th", "95th", "99th", "99.9th"}
    assert end_offsets(broker, topic, 1) == [150]


@clients
def test_payload_file_and_monotonic_payloads(broker, capsys, tmp_path):
    topic = broker.create_topic(name(), partitions=1)
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha|beta|gamma|")
    code, out, err = perf(broker, capsys, "produce", "--topic", topic, "--num-records", "60", "--payload-file",
                          str(payloads), "--payload-delimiter", "[|]", "--throughput", "-1")
    assert code == 0, err
    assert out.splitlines()[:2] == [f"Reading payloads from: {payloads}", "Number of messages read: 3"]
    assert {m.value() for m in read_messages(broker.bootstrap, topic, 60)} == {b"alpha", b"beta", b"gamma"}
    topic = broker.create_topic(name(), partitions=1)
    code, _, err = perf(broker, capsys, "produce", "--topic", topic, "--num-records", "20", "--payload-monotonic",
                        "--throughput", "-1")
    assert code == 0, err
    assert [m.value() for m in read_messages(broker.bootstrap, topic, 20)] == [b"%d" % i for i in range(20)]


@clients
def test_produce_in_transactions(broker, capsys):
    topic = broker.create_topic(name("txn"), partitions=1)
    code, out, err = perf(broker, capsys, "produce", "--topic", topic, "--num-records", "400", "--record-size", "20",
                          "--throughput", "800", "--transaction-duration-ms", "100")
    assert code == 0, err
    assert PRODUCER_SUMMARY.fullmatch(out.splitlines()[-1]).group(1) == "400"
    # confluent-kafka reads read_committed: every record was committed; the log holds commit markers too
    assert len(read_messages(broker.bootstrap, topic, 400)) == 400
    assert end_offsets(broker, topic, 1)[0] > 401


@clients
def test_consume_reads_n_and_prints_kafkas_csv(broker, capsys):
    topic = broker.create_topic(name(), partitions=2)
    assert perf(broker, capsys, "produce", "--topic", topic, "--num-records", "2000", "--record-size", "512",
                "--throughput", "-1")[0] == 0
    code, out, err = perf(broker, capsys, "consume", "--topic", topic, "--messages", "2000")
    assert code == 0, err
    assert len(out.splitlines()) == 2, out
    header, line = out.splitlines()
    assert header == CONSUMER_HEADER
    fields = line.split(", ")
    assert re.fullmatch(DATE, fields[0]) and re.fullmatch(DATE, fields[1])
    assert fields[2] == "0.9766" and fields[4] == "2000"          # 2000 x 512 bytes = 0.9766 MB
    assert all(re.fullmatch(r"\d+\.\d{4}", fields[i]) for i in (3, 5, 8, 9))
    assert int(fields[6]) >= 0 and int(fields[7]) >= 0
    code, out, err = perf(broker, capsys, "consume", "--topic", topic, "--messages", "1500", "--output", "json",
                          "--group", name("g"))
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["messages"], doc["expected"], doc["timed_out"]) == (1500, 1500, False)
    assert doc["data_consumed_mb"] == 1500 * 512 / 1024 / 1024


@clients
def test_consume_warns_like_kafka_when_the_timeout_passes(broker, capsys):
    topic = broker.create_topic(name(), partitions=1)
    assert perf(broker, capsys, "produce", "--topic", topic, "--num-records", "10", "--record-size", "8",
                "--throughput", "-1")[0] == 0
    code, out, _ = perf(broker, capsys, "consume", "--topic", topic, "--messages", "50", "--timeout", "1000",
                        "--hide-header")
    assert code == 0
    warning, line = out.splitlines()
    assert warning == ("WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms) "
                       "exceeded. You can use the --timeout option to increase the timeout.")
    assert line.split(", ")[4] == "10"


@clients
def test_perf_through_python_dash_m(broker):
    topic = broker.create_topic(name(), partitions=1)
    result = subprocess.run([sys.executable, "-m", "kwire.tools.perf", "produce", "--topic", topic,
                             "--num-records", "500", "--record-size", "50", "--throughput", "-1",
                             "--producer-props", f"bootstrap.servers={broker.bootstrap}"],
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert PRODUCER_SUMMARY.fullmatch(result.stdout.decode().splitlines()[-1]).group(1) == "500"
    assert result.stderr == b""
