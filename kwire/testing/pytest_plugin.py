"""pytest fixtures for an embedded kwire broker (registered as the ``kwire`` pytest11 plugin).

Fixtures:

``kwire_broker`` (session)
    one broker shared by the whole run; ``kwire_broker.bootstrap`` is "127.0.0.1:PORT".
``kwire_broker_function`` (function)
    a broker of its own for one test (fresh data, its own configuration).
``kwire_topic`` (function)
    a freshly created, uniquely named topic on ``kwire_broker``
    (``kwire_topic_partitions`` partitions; default: the broker's ``num.partitions``).
``kwire_broker_properties`` (session)
    server properties (Kafka keys) for both brokers; override it in a conftest.py::

        @pytest.fixture(scope="session")
        def kwire_broker_properties():
            return {"num.partitions": 3, "auto.create.topics.enable": False}

Both brokers run in-process on a background thread, so they work from sync
tests, asyncio tests and trio tests; clients connect over real sockets.
Without the entry point, load the plugin with ``pytest_plugins = ["kwire.testing.pytest_plugin"]``.
"""
from __future__ import annotations

import pytest

from kwire.testing import EmbeddedBroker


@pytest.fixture(scope="session")
def kwire_broker_properties() -> dict:
    """Server properties for ``kwire_broker``/``kwire_broker_function``; override to configure."""
    return {}


@pytest.fixture(scope="session")
def kwire_broker(kwire_broker_properties):
    """A kwire broker shared by the session (topics persist between tests: use unique names)."""
    with EmbeddedBroker(kwire_broker_properties) as b:
        yield b


@pytest.fixture
def kwire_broker_function(kwire_broker_properties):
    """A kwire broker for this test only, stopped and deleted afterwards."""
    with EmbeddedBroker(kwire_broker_properties) as b:
        yield b


@pytest.fixture
def kwire_topic_partitions() -> int | None:
    """Partitions for ``kwire_topic``; None means the broker's ``num.partitions``."""
    return None


@pytest.fixture
def kwire_topic(kwire_broker, kwire_topic_partitions) -> str:
    """A new topic with a unique name on the session broker."""
    return kwire_broker.create_topic(partitions=kwire_topic_partitions)
