"""``kwire produce`` / ``kwire consume`` against an embedded kwire broker, checked with stock clients:
what confluent-kafka reads back from the console producer, the exact lines the console consumer
prints for Kafka's print.* properties and formatters, and where it starts and stops."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from kwire.tools.console import LineReader, consumer_main, producer_main
from tests.support.roundtrip import read_messages
from tests.support.tool_output import run_tool, unique_name

clients = pytest.mark.clients      # these start a broker; the pure ones below stay in the fast lane
T0 = 1704067200000                 # 2024-01-01T00:00:00Z


def name(prefix: str = "t") -> str:
    return unique_name(prefix)


def produce(broker, monkeypatch, capsys, data: bytes, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``kwire produce argv`` with ``data`` on stdin."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    return run_tool(producer_main, broker.bootstrap, capsys, *argv)


def consume(broker, capsysbinary, *argv: str, timeout_ms: int = 10000) -> tuple[int, bytes, str]:
    """(exit code, stdout bytes, stderr) of ``kwire consume argv``; ``timeout_ms`` without records ends it."""
    code, out, err = run_tool(consumer_main, broker.bootstrap, capsysbinary, *argv, "--timeout-ms", str(timeout_ms))
    return code, out, err.decode()


def fill(broker, topic: str) -> None:
    """Three records on partition 0: keyed with headers, a null key, a null value."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"v0", b"k0", headers=[("h1", b"a"), ("h2", b"b")], timestamp=T0)
    producer.produce(topic, b"v1", None, timestamp=T0 + 1)
    producer.produce(topic, None, b"k2", headers=[("h", b"\x00\xff")], timestamp=T0 + 2)
    assert producer.flush(10) == 0


@pytest.fixture(scope="module")
def filled(broker):
    topic = broker.create_topic(name("filled"), partitions=1)
    fill(broker, topic)
    return topic


# -- the producer --------------------------------------------------------------------------------
@clients
def test_lines_with_headers_and_keys_are_read_back_by_confluent_kafka(broker, monkeypatch, capsys):
    topic = broker.create_topic(name(), partitions=1)
    lines = ("h1:v1,h2:v2\tk1:first\n"
             "h3:x\tk2:second:with:colons\n"
             "NULL\tNULL:no headers, no key\n"
             "h4:NULL,h5:\tk4:NULL\n").encode()
    code, out, err = produce(broker, monkeypatch, capsys, lines, "--topic", topic, "--property", "parse.key=true",
                             "--property", "key.separator=:", "--property", "parse.headers=true",
                             "--property", "null.marker=NULL")
    assert (code, out, err) == (0, "", "")
    got = read_messages(broker.bootstrap, topic, 4)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (b"k1", b"first", [("h1", b"v1"), ("h2", b"v2")]),
        (b"k2", b"second:with:colons", [("h3", b"x")]),
        (None, b"no headers, no key", None),
        # kafka-python writes a null header value as an empty one
        (b"k4", None, [("h4", b""), ("h5", b"")]),
    ]


@clients
def test_plain_lines_with_kafkas_defaults_and_a_json_summary(broker, monkeypatch, capsys):
    topic = broker.create_topic(name(), partitions=3)
    lines = "".join(f"line {i}\tstill the value\r\n" for i in range(30)).encode()
    code, out, err = produce(broker, monkeypatch, capsys, lines, "--topic", topic, "--output", "json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["topic"] == topic and summary["records_sent"] == 30 and summary["records_failed"] == 0
    assert sum(p["records"] for p in summary["partitions"]) == 30
    for p in summary["partitions"]:
        assert (p["first_offset"], p["last_offset"]) == (0, p["records"] - 1)
    got = read_messages(broker.bootstrap, topic, 30)
    assert sorted(m.value() for m in got) == sorted(f"line {i}\tstill the value".encode() for i in range(30))
    assert {m.key() for m in got} == {None}


@clients
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec(broker, monkeypatch, capsys, codec):
    topic = broker.create_topic(name(codec), partitions=1)
    code, _, err = produce(broker, monkeypatch, capsys, b"".join(b"%d\n" % i for i in range(50)),
                           "--topic", topic, "--compression-codec", codec, "--sync")
    assert code == 0, err
    assert [m.value() for m in read_messages(broker.bootstrap, topic, 50)] == [b"%d" % i for i in range(50)]


@clients
@pytest.mark.parametrize("sync", [False, True])
def test_a_refused_record_prints_kafkas_error_and_exits_1(broker, monkeypatch, capsys, sync):
    topic = broker.create_topic(name("small"), partitions=1, configs={"max.message.bytes": 200})
    lines = b"fits\n" + b"x" * 1000 + b"\nafter\n"
    code, _, err = produce(broker, monkeypatch, capsys, lines, "--topic", topic, *(["--sync"] if sync else []))
    assert code == 1
    assert f"Error when sending message to topic {topic} with key: null, value: 1000 bytes with error:" in err
    assert "MessageSizeTooLarge" in err
    # --sync stops at the refusal; kafka-python's idempotent producer treats it as fatal and
    # fails the records after it too
    assert [m.value() for m in read_messages(broker.bootstrap, topic, 2, seconds=2)] == [b"fits"]


@clients
def test_a_line_without_its_key_separator_stops_with_kafkas_message(broker, monkeypatch, capsys):
    topic = broker.create_topic(name(), partitions=1)
    code, _, err = produce(broker, monkeypatch, capsys, b"k\tv\nno separator\n", "--topic", topic,
                           "--property", "parse.key=true")
    assert code == 1
    assert "No key separator found on line number 2: 'no separator'" in err
    code, _, err = produce(broker, monkeypatch, capsys, b"k\tv\nno separator\n", "--topic", topic,
                           "--property", "parse.key=true", "--property", "ignore.error=true")
    assert code == 0, err
    got = read_messages(broker.bootstrap, topic, 3, seconds=10)
    assert [(m.key(), m.value()) for m in got] == [(b"k", b"v"), (b"k", b"v"), (None, b"no separator")]


@clients
def test_producer_through_python_dash_m(broker):
    topic = broker.create_topic(name(), partitions=1)
    result = subprocess.run([sys.executable, "-m", "kwire.tools.console", "produce", "--topic", topic,
                             "--bootstrap-server", broker.bootstrap, "--producer-property", "linger.ms=5",
                             "--request-required-acks", "1", "--output", "json"],
                            input=b"one\ntwo\n\xffbinary\n", capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["records_sent"] == 3
    assert [m.value() for m in read_messages(broker.bootstrap, topic, 3)] == [b"one", b"two", b"\xffbinary"]


def test_separators_that_clash_are_refused_like_kafka():
    for props, complaint in (({"headers.delimiter": ",", }, "headers.delimiter and headers.separator"),
                             ({"null.marker": "\t"}, "null.marker and key.separator"),
                             ({"headers.key.separator": ","}, "headers.separator and headers.key.separator")):
        with pytest.raises(Exception, match=complaint):
            LineReader(props)
    reader = LineReader({"parse.headers": "true", "headers.separator": "[,;]"})     # a regex, as in Kafka
    assert reader.parse("a:1;b:2,c:3\tv", 1).headers == [("a", b"1"), ("b", b"2"), ("c", b"3")]


# -- the consumer --------------------------------------------------------------------------------
@clients
@pytest.mark.parametrize("props, expected", [
    ([], b"v0\nv1\nnull\n"),
    (["print.key=true"], b"k0\tv0\nnull\tv1\nk2\tnull\n"),
    (["print.key=true", "key.separator=|", "line.separator=;"], b"k0|v0;null|v1;k2|null;"),
    (["print.timestamp=true"], b"CreateTime:%d\tv0\nCreateTime:%d\tv1\nCreateTime:%d\tnull\n" % (T0, T0 + 1, T0 + 2)),
    (["print.partition=true", "print.offset=true"],
     b"Partition:0\tOffset:0\tv0\nPartition:0\tOffset:1\tv1\nPartition:0\tOffset:2\tnull\n"),
    (["print.headers=true", "headers.separator=;"], b"h1:a;h2:b\tv0\nNO_HEADERS\tv1\nh:\x00\xff\tnull\n"),
    (["print.value=false", "print.offset=true", "null.literal=-"], b"Offset:0\nOffset:1\nOffset:2\n"),
    (["print.key=true", "null.literal=(none)"], b"k0\tv0\n(none)\tv1\nk2\t(none)\n"),
])
def test_print_properties_give_kafkas_lines(broker, filled, capsysbinary, props, expected):
    argv = ["--topic", filled, "--from-beginning", "--max-messages", "3"]
    for prop in props:
        argv += ["--property", prop]
    code, out, err = consume(broker, capsysbinary, *argv)
    assert (code, out) == (0, expected), err
    assert err.splitlines()[-1] == "Processed a total of 3 messages"


@clients
def test_hex_and_json_formatters(broker, filled, capsysbinary):
    code, out, _ = consume(broker, capsysbinary, "--topic", filled, "--from-beginning", "--max-messages", "3",
                           "--formatter", "hex", "--property", "print.key=true", "--property", "print.headers=true")
    assert code == 0
    assert out == b"h1:61,h2:62\t6b30\t7630\nNO_HEADERS\tnull\t7631\nh:00ff\t6b32\tnull\n"
    for argv in (["--formatter", "json"], ["--output", "json"]):
        code, out, err = consume(broker, capsysbinary, "--topic", filled, "--from-beginning", "--max-messages", "3",
                                 *argv)
        assert code == 0 and err.splitlines()[-1] == "Processed a total of 3 messages"
        docs = [json.loads(line) for line in out.splitlines()]
        assert docs == [
            {"topic": filled, "partition": 0, "offset": 0, "timestamp": T0, "timestamp_type": "CreateTime",
             "key": "k0", "value": "v0", "headers": [{"key": "h1", "value": "a"}, {"key": "h2", "value": "b"}]},
            {"topic": filled, "partition": 0, "offset": 1, "timestamp": T0 + 1, "timestamp_type": "CreateTime",
             "key": None, "value": "v1", "headers": []},
            {"topic": filled, "partition": 0, "offset": 2, "timestamp": T0 + 2, "timestamp_type": "CreateTime",
             "key": "k2", "value": None, "headers": [{"key": "h", "value_base64": "AP8="}]},
        ]


@clients
def test_max_messages_and_partition_offsets(broker, capsysbinary):
    topic = broker.create_topic(name(), partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, b"p%d-%d" % (i % 2, i // 2), partition=i % 2)
    assert producer.flush(10) == 0
    code, out, err = consume(broker, capsysbinary, "--topic", topic, "--from-beginning", "--max-messages", "4")
    assert code == 0 and len(out.splitlines()) == 4
    assert err.splitlines()[-1] == "Processed a total of 4 messages"
    for offset, expected in (("3", b"p1-3\np1-4\n"), ("earliest", b"p1-0\np1-1\np1-2\np1-3\np1-4\n"), ("latest", b"")):
        code, out, err = consume(broker, capsysbinary, "--topic", topic, "--partition", "1", "--offset", offset,
                                 timeout_ms=1500)
        assert (code, out) == (0, expected), err
    code, out, _ = consume(broker, capsysbinary, "--topic", topic, "--partition", "0", "--from-beginning",
                           "--max-messages", "2")
    assert out == b"p0-0\np0-1\n"


@clients
def test_a_group_commits_what_was_printed_so_a_second_run_continues(broker, filled, capsysbinary):
    group = name("g")
    outs = []
    for _ in range(3):
        code, out, err = consume(broker, capsysbinary, "--topic", filled, "--group", group, "--from-beginning",
                                 "--max-messages", "2", timeout_ms=2000)
        assert code == 0, err
        outs.append(out)
    assert outs == [b"v0\nv1\n", b"null\n", b""]


@clients
def test_read_committed_prints_only_committed_transactions(broker, capsysbinary):
    topic = broker.create_topic(name("txn"), partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name("tx")})
    producer.init_transactions(10)
    for values, commit in (([b"aborted-1", b"aborted-2"], False), ([b"committed-1", b"committed-2"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, v)
        producer.flush(10)
        (producer.commit_transaction if commit else producer.abort_transaction)(10)
    code, out, _ = consume(broker, capsysbinary, "--topic", topic, "--from-beginning",
                           "--isolation-level", "read_committed", timeout_ms=2000)
    assert (code, out) == (0, b"committed-1\ncommitted-2\n")
    code, out, _ = consume(broker, capsysbinary, "--topic", topic, "--from-beginning", "--max-messages", "4")
    assert out == b"aborted-1\naborted-2\ncommitted-1\ncommitted-2\n"


@clients
def test_consumer_through_python_dash_m(broker, filled):
    result = subprocess.run([sys.executable, "-m", "kwire.tools.console", "consume", "--topic", filled,
                             "--bootstrap-server", broker.bootstrap, "--from-beginning", "--max-messages", "3",
                             "--property", "print.offset=true"], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"Offset:0\tv0\nOffset:1\tv1\nOffset:2\tnull\n"
    assert result.stderr.decode().splitlines()[-1] == "Processed a total of 3 messages"


@pytest.mark.parametrize("argv, complaint", [
    (["--topic", "t", "--offset", "3"], "The partition is required when offset is specified."),
    (["--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"],
     "Options from-beginning and offset cannot be specified together."),
    (["--topic", "t", "--partition", "0", "--group", "g"], "Options group and partition cannot be specified together."),
    (["--topic", "t", "--partition", "0", "--offset", "-1"], "The provided offset value '-1' is incorrect."),
    (["--include", "t.*", "--partition", "0"], "The topic is required when partition is specified."),
    (["--group", "g"], "Exactly one of --topic or --include"),
    (["--topic", "t", "--group", "a", "--consumer-property", "group.id=b"], "Detected group ids: 'a', 'b'"),
    (["--topic", "t", "--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
     "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest'"),
])
def test_kafkas_option_checks_exit_2_before_connecting(capsys, argv, complaint):
    assert consumer_main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert complaint in capsys.readouterr().err
