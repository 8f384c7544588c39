"""The compatibility matrix against a kwire process started by the test run: all green.

One run of the whole matrix (every client, every scenario, two clients at a
time), then one test per cell so a failure names its client and scenario.
A skip is fine only where FINDINGS.md says the scenario does not apply to
that client (e.g. kcat has no admin API); a client missing from this machine
skips with the reason.  The run goes through the recording proxy and writes the readable
report, kwire.html and kwire.json (tests/compat/reporting.py).
"""
import pytest

from kwire.compat_tests import report
from kwire.compat_tests.runner import CLIENTS
from kwire.compat_tests.scenarios import SCENARIOS
from tests.compat.reporting import report_dir, run_with_report
from tests.support.broker import BrokerProcess

# the whole matrix runs in the first test's fixture setup, which pytest-timeout counts
pytestmark = [pytest.mark.clients, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def kwire_results(tmp_path_factory):
    b = BrokerProcess().start()
    try:
        results = run_with_report(b.bootstrap, "kwire", report_dir(tmp_path_factory), jobs=2)
        print("\n" + report.table(results, title=f"kwire at {b.bootstrap}"))
        assert b.alive(), "kwire died during the matrix:\n" + b.log_text()[-3000:]
        yield {(r["client"], r["scenario"]): r for r in results}
    finally:
        b.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_cell(kwire_results, client, scenario):
    r = kwire_results[(client, scenario)]
    if r["status"] == "fail":
        pytest.fail(f"{client} / {scenario}: {r['reason']}")
    if r["status"] == "skip" and report.unexpected("kwire", [r]):
        pytest.skip(f"not run here: {r['reason']}")


def test_every_client_library_cell_recorded_its_api_versions(kwire_results):
    """The recording proxy saw each client that ran (so the report's versions are real)."""
    ran = [r for r in kwire_results.values() if r["status"] == "pass" and r["client"] != "raw-socket"]
    missing = [f"{r['client']} / {r['scenario']}" for r in ran if not r.get("apis")]
    assert not missing, f"no requests recorded for {missing}"
    # the clients stayed behind the proxy after Metadata/FindCoordinator sent them elsewhere
    for r in ran:
        if r["scenario"] == "round_trip":
            assert {"Produce", "Fetch"} <= set(r["apis"]), (r["client"], r["apis"])
        if r["scenario"] == "group_queue":
            assert {"JoinGroup", "ConsumerGroupHeartbeat"} & set(r["apis"]), (r["client"], r["apis"])

