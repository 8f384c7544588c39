"""The compatibility matrix against a kwire process started by the test run: all green.

One run of the whole matrix (every client, every scenario, two clients at a
time), then one test per cell so a failure names its client and scenario.
A skip is fine only where FINDINGS.md says the scenario does not apply to
that client (e.g. kcat has no admin API); a client missing from this machine
skips with the reason.
"""
import pytest

from kwire.compat_tests import report
from kwire.compat_tests.runner import CLIENTS, run_matrix
from kwire.compat_tests.scenarios import SCENARIOS
from tests.support.broker import BrokerProcess

# the whole matrix runs in the first test's fixture setup, which pytest-timeout counts
pytestmark = [pytest.mark.clients, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def kwire_results():
    b = BrokerProcess().start()
    try:
        results = run_matrix(b.bootstrap, jobs=2)
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
