import pytest

from tests.support.broker import BrokerProcess


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
