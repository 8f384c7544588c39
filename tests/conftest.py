import pathlib

import pytest

from tests.support.broker import BrokerProcess

# Folders whose tests start broker processes or drive stock clients over sockets.  They are the
# slow lane; `pytest -m "not clients"` leaves them out and runs the in-process tests in seconds.
CLIENT_DIRS = ("integration", "compat", "spark", "testing", "cluster", "java_client")
_TESTS = pathlib.Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            folder = pathlib.Path(str(item.path)).relative_to(_TESTS).parts[0]
        except ValueError:
            continue
        if folder in CLIENT_DIRS:
            item.add_marker(pytest.mark.clients)


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
