import os
import pathlib

import pytest

from tests.support.broker import BrokerProcess

# Folders whose tests start broker processes or drive stock clients over sockets.  They are the
# slow lane; `pytest -m "not clients"` leaves them out and runs the in-process tests in seconds.
CLIENT_DIRS = ("integration", "compat", "spark", "testing", "cluster", "java_client", "faults", "console")
# Modules of a slow folder that start no process (pure functions, an in-process socket at most):
# they stay in the fast lane beside the harness they test.
FAST_MODULES = ("faults/test_schedule.py", "faults/test_checker.py", "faults/test_proxy_refuse.py",
                "faults/test_duplicates.py", "console/test_auth.py", "console/test_messages_units.py",
                "compat/test_report.py")
# Runs only with --reference (or KWIRE_REFERENCE=1): the differential matrix against Tansu checks
# compat_tests/FINDINGS.md against the reference broker, not kwire, and costs 1-1.5 min of CI.
REFERENCE_MODULES = ("compat/test_reference_tansu.py",)
_TESTS = pathlib.Path(__file__).parent


def pytest_addoption(parser):
    group = parser.getgroup("kwire-faults", "the nemesis suite (tests/faults)")
    group.addoption("--long", action="store_true",
                    help="run --fault-schedules schedules of random seeds instead of the fixed CI set "
                         "(or set KWIRE_FAULTS_LONG=N)")
    group.addoption("--fault-schedules", type=int, default=None, metavar="N",
                    help="how many schedules --long runs (default 200)")
    group.addoption("--fault-seed", type=int, action="append", default=[], metavar="S",
                    help="run exactly the schedule of seed S (repeatable); replays a failure")
    parser.getgroup("kwire-compat", "the compatibility matrix (tests/compat)").addoption(
        "--reference", action="store_true",
        help="also run the matrix against Tansu and check compat_tests/FINDINGS.md (or set KWIRE_REFERENCE=1)")


def pytest_collection_modifyitems(config, items):
    reference = config.getoption("--reference") or os.environ.get("KWIRE_REFERENCE") == "1"
    for item in items:
        try:
            relative = pathlib.Path(str(item.path)).relative_to(_TESTS)
        except ValueError:
            continue
        if relative.parts[0] in CLIENT_DIRS and relative.as_posix() not in FAST_MODULES:
            item.add_marker(pytest.mark.clients)
        if relative.as_posix() in REFERENCE_MODULES and not reference:
            item.add_marker(pytest.mark.skip(reason="the differential run against Tansu: pytest --reference "
                                                    "(or kwire compat --against tansu)"))


@pytest.fixture(scope="session")
def broker():
    """One kwire process shared by the client tests that do not restart it."""
    b = BrokerProcess().start()
    yield b
    assert b.alive(), "the shared broker died during the test session:\n" + b.log_text()[-5000:]
    b.close()


@pytest.fixture
def fresh_broker():
    """A broker of its own, for tests that restart, kill or reconfigure it."""
    made = []

    def make(**overrides):
        b = BrokerProcess(**overrides).start()
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
