"""Spark tests: one local[2] SparkSession for the whole session (JVM start-up is the
dominant cost), against the shared kwire broker process from tests/conftest.py.

The session has Spark's own Kafka connector (``format("kafka")``) on ``spark.jars``
whenever ../shared/jars holds it, so tests of both connectors share the one JVM; the
``jvm_spark`` fixture is that session, and skips saying why when the jars are absent."""
import itertools
import os
import subprocess
from pathlib import Path

import pytest

from kwire.spark.session import connector_jars, java_available

SHARED_JARS = Path(__file__).resolve().parents[2].parent / "shared" / "jars"


def shared_connector_jars() -> tuple[list[str], str]:
    """(jars for spark.jars, "") from ../shared/jars, or ([], why not)."""
    if not SHARED_JARS.is_dir():
        return [], (f"Spark's Kafka connector is read from {SHARED_JARS} (the shared jars folder "
                    "next to the project; see its README.md), which is absent")
    try:
        return connector_jars(str(SHARED_JARS)), ""
    except ValueError as exc:
        return [], str(exc)

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
    from kwire.spark.session import KafkaConnector, build_session
    jars, _ = shared_connector_jars()
    connector = KafkaConnector("kwire-kafka", jars=",".join(jars)) if jars else None
    session = build_session(app_name="kwire-tests", connector=connector)
    yield session
    session.stop()
    stop_the_jvm()


def stop_the_jvm() -> None:
    """End the JVM this session started: a Kafka producer Spark caches there would otherwise
    go on retrying the (by then stopped) test broker until the interpreter exits."""
    from pyspark import SparkContext
    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            # its shutdown hooks can hang on a Kafka producer still retrying the stopped broker:
            # in CI this wait used to run out its 15 s at the end of every session
            proc.wait(3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def jvm_spark(spark):
    """The shared session, when Spark's JVM connector is on its ``spark.jars``."""
    jars, why = shared_connector_jars()
    if not jars:
        pytest.skip(why)
    assert "spark-sql-kafka" in spark.conf.get("spark.jars", ""), \
        "the session was built before the connector's jars were known"
    return spark


@pytest.fixture
def topic_name(request):
    """A fresh topic name per call: tests share one broker."""
    def make(prefix="t"):
        return f"spark-{prefix}-{os.getpid()}-{next(_names)}"
    return make
