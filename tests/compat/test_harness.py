"""The harness itself: CLI, JSON, the HTML report, allow-list parsing, timeouts."""
import json

import pytest

import kwire.testing
from kwire.compat_tests import cli, report
from kwire.compat_tests.runner import CLIENTS, run_matrix
from kwire.compat_tests.scenarios import SCENARIOS


def test_list(capsys):
    assert cli.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(c in out for c in CLIENTS) and all(s in out for s in SCENARIOS)


def test_usage_errors(capsys):
    assert cli.main([]) == 2
    assert cli.main(["--bootstrap", "127.0.0.1:1", "--clients", "nope"]) == 2
    assert cli.main(["--bootstrap", "127.0.0.1:1", "--clients", "raw-socket"]) == 2   # nothing listening


def test_cli_table_and_json(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    with kwire.testing.broker() as b:
        rc = cli.main(["-q", "--bootstrap", b.bootstrap, "--clients", "raw-socket,kafka-python",
                       "--scenarios", "bad_frames,round_trip", "--json", str(out_json)])
    assert rc == 0
    table = capsys.readouterr().out
    assert "bad_frames" in table and "raw-socket" in table
    data = json.loads(out_json.read_text())
    cells = {(r["client"], r["scenario"]): r["status"] for r in data["results"]}
    assert cells == {("raw-socket", "bad_frames"): "pass", ("raw-socket", "round_trip"): "skip",
                     ("kafka-python", "bad_frames"): "skip", ("kafka-python", "round_trip"): "pass"}


def test_a_hung_scenario_is_a_timeout_and_the_next_one_runs():
    with kwire.testing.broker() as b:
        results = run_matrix(b.bootstrap, ["kafka-python"], ["group_queue", "round_trip"],
                             timeout_scale=0.001)
    assert results[0]["status"] == "fail" and results[0]["reason"].startswith("timeout")
    assert [r["scenario"] for r in results] == ["group_queue", "round_trip"]


def test_allow_list_parses_and_matches():
    rows = report.allow_list()
    assert any(r["broker"] == "tansu" for r in rows)
    assert all(r["reason"] for r in rows)
    fail = {"client": "kcat", "scenario": "round_trip", "status": "fail", "reason": "x"}
    assert report.unexpected("tansu", [fail]) == []
    assert report.unexpected("kwire", [fail]) == [fail]
    skip = {"client": "kcat", "scenario": "admin", "status": "skip", "reason": "x"}
    assert report.unexpected("kwire", [skip]) == []


def test_a_client_library_that_is_not_installed_is_a_skip_not_a_fail(tmp_path):
    # Hide confluent-kafka from every process of the run (the workers too), as on a machine
    # where kwire is installed without the [compat] extra.  (aiokafka is a dependency of kwire
    # itself: the record checks read records with its compiled reader.)
    import os
    import subprocess
    import sys
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['confluent_kafka'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    with kwire.testing.broker() as b:
        run = subprocess.run([sys.executable, "-m", "kwire", "compat", "-q", "--bootstrap", b.bootstrap,
                              "--clients", "confluent-kafka,aiokafka,kafka-python", "--scenarios", "round_trip",
                              "--json", str(tmp_path / "r.json")],
                             env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ModuleNotFoundError" not in run.stdout + run.stderr
    cells = {r["client"]: (r["status"], r["reason"]) for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert cells == {"confluent-kafka": ("skip", "confluent_kafka: not installed (pip install 'kwire[compat]')"),
                     "aiokafka": ("pass", None), "kafka-python": ("pass", None)}


def test_report_end_to_end_against_a_running_broker(tmp_path):
    """``kwire compat --against HOST:PORT --report out.html`` through the recording proxy."""
    out = tmp_path / "out.html"
    with kwire.testing.broker() as b:
        rc = cli.main(["-q", "--against", b.bootstrap, "--clients", "kafka-python",
                       "--scenarios", "round_trip", "--report", str(out)])
    assert rc == 0
    data = json.loads((tmp_path / "out.json").read_text())
    cell = data["results"][0]
    assert cell["status"] == "pass"
    assert {"Produce", "Fetch", "Metadata", "ApiVersions"} <= set(cell["apis"])   # sent through the proxy
    rows = {r["name"]: r for r in data["api_versions"]["rows"]}
    assert rows["Produce"]["broker"] and rows["Produce"]["kafka"] == [0, 13]
    assert data["client_versions"]["kafka-python"].startswith("kafka-python ")
    page = out.read_text()
    assert f"Produce v{cell['apis']['Produce'][0]}" in page and "Apache Kafka 4.2" in page


def test_report_against_tansu(tmp_path):
    """The report against the reference broker in every CI run (the whole differential matrix
    against Tansu runs with --reference): one client, one scenario, and the versions table."""
    from kwire.compat_tests import reference
    out = tmp_path / "tansu.html"
    try:
        with reference.tansu() as bootstrap:
            rc = cli.main(["-q", "--against", bootstrap, "--name", "tansu", "--clients", "kafka-python",
                           "--scenarios", "round_trip", "--report", str(out)])
    except reference.ReferenceUnavailable as exc:
        pytest.skip(f"Tansu unavailable: {exc}")
    data = json.loads((tmp_path / "tansu.json").read_text())
    assert rc == 0 and data["results"][0]["status"] == "pass", data["results"]
    rows = {r["name"]: r for r in data["api_versions"]["rows"]}
    assert rows["Produce"]["broker"] and rows["Produce"]["kafka"] == [0, 13]
    assert "tansu" in out.read_text()
