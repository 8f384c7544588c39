"""``kwire serve --log-format text|json``: what an operator's log shipper reads."""
from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest

from kwire.runtime.logging_setup import configure
from kwire.testing.process import BrokerProcess


def test_json_lines_from_a_running_broker_parse_one_by_one(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic
    with BrokerProcess(tmp_path, args=["--log-format", "json"]) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("logged", 1, 1)])["logged"].result(30)
    lines = [line for line in broker.log_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]          # every line is one JSON document
    assert entries and all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    assert all(e["time"].endswith("Z") and e["level"] in ("DEBUG", "INFO", "WARNING", "ERROR") for e in entries)
    assert any(e["logger"].startswith("kwire") and "logged" in e["message"] for e in entries), lines


def test_text_is_one_line_per_event_with_its_traceback_indented():
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    out = io.StringIO()
    configure("INFO", "text", stream=out)
    log = logging.getLogger("kwire.test")
    try:
        try:
            raise ValueError("bad thing")
        except ValueError:
            log.exception("it failed: %s", "topic t")
        log.debug("not shown at INFO")
        lines = out.getvalue().splitlines()
        assert lines[0].split(" ", 2)[2] == "ERROR kwire.test: it failed: topic t"
        assert all(line.startswith("    ") for line in lines[1:]) and "ValueError: bad thing" in lines[-1]
        out.truncate(0), out.seek(0)
        configure("DEBUG", "json", stream=out)
        try:
            raise KeyError("k")
        except KeyError:
            log.error("with %d%%", 5, exc_info=True)
        entry = json.loads(out.getvalue())
        assert entry["message"] == "with 5%" and entry["level"] == "ERROR" and "KeyError" in entry["exception"]
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.mark.parametrize("args, complaint", [(["--log-format", "xml"], "invalid choice"),
                                             (["--log-level", "LOUD"], "unknown log level")])
def test_a_bad_log_option_stops_kwire_serve_with_exit_code_2(args, complaint):
    run = subprocess.run([sys.executable, "-m", "kwire", "serve", *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and complaint in run.stderr


def test_log_request_debug_logs_every_request_even_at_info(tmp_path):
    from confluent_kafka import Producer
    for enabled in (True, False):
        with BrokerProcess(tmp_path / str(enabled), properties={"log.request.debug": enabled}) as broker:
            producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "audited-app"})
            producer.produce("audited", b"x")
            assert producer.flush(30) == 0
        completed = [line for line in broker.log_text().splitlines() if "Completed request:" in line]
        if not enabled:
            assert completed == []
            continue
        produce = [line for line in completed if "Completed request: Produce v" in line]
        assert len(produce) == 1 and "client_id='audited-app'" in produce[0] and " DEBUG kwire.request: " in produce[0]
        assert any("Completed request: Metadata v" in line for line in completed)
        assert all(line.rstrip().endswith(" ms") and "principal=User:ANONYMOUS" in line for line in completed)
