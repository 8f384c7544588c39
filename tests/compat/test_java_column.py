"""The `java` column of the matrix (Apache Kafka's Java client through
compat_tests/java/CompatClient.java): `kwire compat --clients java --java-jars DIR` from the
CLI, and a skip naming the folder when the jars are not there.  The full java column and
the spark-jvm row run in test_matrix_kwire.py with every other client."""
import json
import subprocess
import sys

import pytest

import kwire.testing
from kwire.compat_tests import java
from kwire.compat_tests.runner import run_matrix

pytestmark = pytest.mark.clients


def test_java_column_from_the_cli(tmp_path, monkeypatch):
    why = java.unavailable()
    if why:
        pytest.skip(why)
    jars = java.jars_dir()
    monkeypatch.delenv(java.JARS_ENV, raising=False)
    out = tmp_path / "r.json"
    with kwire.testing.broker() as b:
        run = subprocess.run([sys.executable, "-m", "kwire", "compat", "-q", "--bootstrap", b.bootstrap,
                              "--clients", "java", "--java-jars", str(jars),
                              "--scenarios", "round_trip,commit_resume,bad_frames", "--json", str(out)],
                             capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    cells = {r["scenario"]: r["status"] for r in json.loads(out.read_text())["results"]}
    assert cells == {"round_trip": "pass", "commit_resume": "pass", "bad_frames": "skip"}
    assert "java" in run.stdout.splitlines()[1]


def test_java_column_skips_without_the_jars(tmp_path, monkeypatch):
    monkeypatch.setenv(java.JARS_ENV, str(tmp_path / "no-jars"))
    with kwire.testing.broker() as b:
        results = run_matrix(b.bootstrap, ["java"], ["round_trip", "spark-jvm"])
    assert [r["status"] for r in results] == ["skip", "skip"]
    assert all(str(tmp_path / "no-jars") in r["reason"] for r in results), results
