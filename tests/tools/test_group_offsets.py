"""kwire groups without a broker: reset-offsets' arithmetic (Kafka's rules) and the arguments
refused before any connection is made."""
from __future__ import annotations

import pytest
from kafka.structs import TopicPartition

from kwire.tools.group_offsets import Scenario, parse_datetime, parse_duration, parse_topic_arg, plan_offsets
from kwire.tools.groups import main

T0 = 1704067200000          # 2024-01-01T00:00:00Z


@pytest.mark.parametrize("text, millis", [
    ("2024-01-01T00:05:00.000", T0 + 300_000),          # Kafka's documented format: UTC
    ("2024-01-01T00:05:00.000Z", T0 + 300_000),
    ("2024-01-01T01:05:00.000+01:00", T0 + 300_000),
    ("2024-01-01T01:05:00.000+0100", T0 + 300_000),
    ("2024-01-01T01:05:00.000+01", T0 + 300_000),
    ("2023-12-31T23:05:00.000-01:00", T0 + 300_000),
    ("2024-01-01T00:05:00.250", T0 + 300_250),
    ("2024-01-01T00:05:00.5", T0 + 300_500),            # a decimal fraction, not 5 ms
    ("2024-01-01T00:05:00", T0 + 300_000),              # kinder than Kafka: seconds or fraction may go
    ("2024-01-01T00:05", T0 + 300_000),
])
def test_to_datetime_reads_kafkas_formats(text, millis):
    assert parse_datetime(text) == millis


@pytest.mark.parametrize("text", ["2024-01-01", "yesterday", "2024-13-01T00:00:00.000",
                                  "2024-01-01T00:00:00.000+25:00", "2024-01-01T00:00:00.000 UTC"])
def test_to_datetime_refuses_other_text(text):
    with pytest.raises(ValueError, match="--to-datetime"):
        parse_datetime(text)


@pytest.mark.parametrize("text, millis", [
    ("PT1H", 3_600_000), ("P1DT2H30M", 95_400_000), ("PT45.5S", 45_500), ("pt15m", 900_000),
    ("P2D", 172_800_000), ("-PT1M", -60_000), ("PT-0.5S", -500), ("PT1H-10M", 3_000_000),
])
def test_by_duration_reads_javas_duration_format(text, millis):
    assert parse_duration(text) == millis


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "P1H", "1H", "PT1.5H", "PT1H2"])
def test_by_duration_refuses_other_text(text):
    with pytest.raises(ValueError, match="--by-duration"):
        parse_duration(text)


def test_topic_args_as_kafka_reads_them():
    assert parse_topic_arg("orders") == ("orders", None)
    assert parse_topic_arg("orders:0,2") == ("orders", [0, 2])
    for bad, complaint in (("orders:", "expected topic name and partitions"), ("orders:0:1", "expected"),
                           ("orders:a", "Invalid partition 'a'")):
        with pytest.raises(ValueError, match=complaint):
            parse_topic_arg(bad)


P0, P1, P2 = (TopicPartition("t", p) for p in range(3))
START = {P0: 2, P1: 0, P2: 0}
END = {P0: 10, P1: 10, P2: 0}
COMMITTED = {P0: 5, P1: 8}


def plan(kind, value=None, partitions=(P0, P1, P2), by_timestamp=None, committed=COMMITTED):
    return plan_offsets(Scenario(kind, value), list(partitions), committed=committed, log_start=START,
                        log_end=END, by_timestamp=by_timestamp)


def test_earliest_latest_and_current():
    assert plan("to_earliest").offsets == {P0: 2, P1: 0, P2: 0}
    assert plan("to_latest").offsets == {P0: 10, P1: 10, P2: 0}
    current = plan("to_current")
    assert current.offsets == {P0: 5, P1: 8, P2: 0} and current.warnings == []   # no offset: log end


def test_to_offset_and_shift_by_are_clamped_into_the_log_with_kafkas_warnings():
    assert plan("to_offset", 1).offsets == {P0: 2, P1: 1, P2: 0}
    shifted = plan("shift_by", 4, partitions=(P0, P1))
    assert shifted.offsets == {P0: 9, P1: 10}
    assert shifted.warnings == ["New offset (12) is higher than latest offset for topic partition t-1. "
                                "Value will be set to 10."]
    back = plan("shift_by", -4, partitions=(P0,))
    assert back.offsets == {P0: 2}
    assert back.warnings == ["New offset (1) is lower than earliest offset for topic partition t-0. "
                             "Value will be set to 2."]


def test_shift_by_needs_a_committed_offset():
    with pytest.raises(ValueError, match="Cannot shift offset for partition t-2 since there is no current "
                                         "committed offset"):
        plan("shift_by", 1)


def test_a_time_after_the_last_record_falls_back_to_the_log_end():
    result = plan("to_datetime", T0, by_timestamp={P0: 4, P1: -1, P2: -1})
    assert result.offsets == {P0: 4, P1: 10, P2: 0}
    assert result.warnings[0] == "Warn: Partition 1 from topic t is empty. Falling back to latest known offset."


NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]     # never reached: these are refused first


@pytest.mark.parametrize("argv, complaint", [
    (["describe"], "one of the arguments --group --all-groups is required"),
    (["--describe", "--list", "--group", "g"], "invalid choice"),     # Kafka: exactly one action
    (["describe", "--group", "g", "--members", "--state"], "not allowed with"),
    (["reset-offsets", "--group", "g", "--all-topics"], "--to-earliest"),
    (["reset-offsets", "--group", "g", "--to-latest"], "--topic --all-topics"),
    (["reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"], "not allowed with"),
    (["reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run", "--execute"], "not allowed"),
    (["reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "noon"], "--to-datetime 'noon'"),
    (["reset-offsets", "--group", "g", "--all-topics", "--by-duration", "1h"], "--by-duration '1h'"),
    (["reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"], "Invalid partition 'x'"),
    (["delete-offsets", "--group", "g", "--group", "h", "--topic", "t"], "one --group"),
    (["delete-offsets", "--group", "g"], "--topic"),
    (["list", "--state", "stable,sleepy"], "Invalid state list 'stable,sleepy'. Valid states are: "),
])
def test_bad_arguments_exit_2_before_connecting(capsys, argv, complaint):
    assert main(argv + NOWHERE) == 2
    assert complaint in capsys.readouterr().err


def test_an_unreachable_broker_exits_1_within_the_timeout(capsys):
    assert main(["list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "300"]) == 1
    assert "kwire: " in capsys.readouterr().err
