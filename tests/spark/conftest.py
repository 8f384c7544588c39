"""Spark tests: one local[2] SparkSession for the whole session (JVM start-up is the
dominant cost), against the shared kwire broker process from tests/conftest.py."""
import itertools
import os

import pytest

from kwire.spark.session import java_available

_names = itertools.count()


def pytest_collection_modifyitems(config, items):
    if java_available():
        return
    skip = pytest.mark.skip(reason="PySpark needs Java 17+ and no `java` is on PATH or under "
                                   "JAVA_HOME (./scripts/test installs openjdk-17-jre-headless "
                                   "when run as root)")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and "spark" in item.fixturenames:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark():
    from kwire.spark.session import build_session
    session = build_session(app_name="kwire-tests")
    yield session
    session.stop()


@pytest.fixture
def topic_name(request):
    """A fresh topic name per call: tests share one broker."""
    def make(prefix="t"):
        return f"spark-{prefix}-{os.getpid()}-{next(_names)}"
    return make
