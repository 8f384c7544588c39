"""Kafka's perf tools (``org.apache.kafka.tools.ProducerPerformance`` and
``ConsumerPerformance`` from ``../shared/jars``) run briefly against kwire: each finishes,
reports every record, and prints no error.  ``bench/java_perf.py`` runs them at size
against kwire and Tansu."""
from __future__ import annotations

import os
import re
import subprocess
import uuid

import pytest

from tests.support.java import JARS, client_classpath

TOOLS_JAR = JARS / "kafka-tools-perf-4.0.0-SNAPSHOT.jar"
COUNT = 20_000


@pytest.fixture(scope="module", autouse=True)
def require_tools():
    if not TOOLS_JAR.is_file():
        pytest.skip(f"no {TOOLS_JAR.name} in {JARS} (the shared jars folder next to the project)")


def run_tool(tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    command = ["java", f"-Djava.library.path={JARS / 'deps' / 'native'}",
               "-cp", os.pathsep.join([str(TOOLS_JAR), client_classpath()]),
               f"org.apache.kafka.tools.{tool}", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    problems = [line for line in result.stderr.splitlines() if "Exception" in line or "ERROR" in line]
    assert result.returncode == 0 and not problems, (
        f"{tool} exited {result.returncode}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-3000:]}")
    return result


def test_producer_performance_then_consumer_performance(kwire_broker):
    topic = f"jc-perf-{uuid.uuid4().hex[:8]}"
    produced = run_tool("ProducerPerformance", "--topic", topic, "--num-records", str(COUNT),
                        "--record-size", "100", "--throughput", "-1",
                        "--producer-props", f"bootstrap.servers={kwire_broker.bootstrap}", "acks=all",
                        "compression.type=lz4")
    summary = produced.stdout.strip().splitlines()[-1]
    print(f"\nProducerPerformance: {summary}")
    m = re.fullmatch(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency.*",
                     summary)
    assert m, summary
    assert int(m.group(1)) == COUNT and float(m.group(2)) > 0

    consumed = run_tool("ConsumerPerformance", "--bootstrap-server", kwire_broker.bootstrap, "--topic", topic,
                        "--messages", str(COUNT), "--timeout", "30000", "--group", f"{topic}-group")
    lines = consumed.stdout.strip().splitlines()
    header = [h.strip() for h in lines[-2].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(","))))
    print(f"ConsumerPerformance: {row}")
    assert "WARNING" not in consumed.stdout                  # e.g. "Exiting before consuming ..."
    assert int(row["data.consumed.in.nMsg"]) == COUNT
    assert float(row["data.consumed.in.MB"]) == pytest.approx(COUNT * 100 / 1024 / 1024, rel=1e-3)
    assert float(row["fetch.nMsg.sec"]) > 0
