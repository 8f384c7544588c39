"""Building a local SparkSession and choosing the Kafka source behind it.

Two interchangeable sources, same options and schema:

* ``format("kafka")`` — Spark's own JVM connector (spark-sql-kafka-0-10), used when it is
  configured: a Maven coordinate (``kafka_packages`` / ``KWIRE_SPARK_KAFKA_PACKAGES``,
  e.g. ``org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0``; needs Maven Central) or
  local jars (``kafka_jars`` / ``KWIRE_SPARK_KAFKA_JARS``: comma-separated paths — the
  connector plus kafka-clients and commons-pool2 — or a folder laid out like
  ``../shared/jars``, see ``connector_jars``).
* ``format("kwire-kafka")`` — kwire's Python data source (source.py), registered on
  every session; the default because it needs nothing beyond PyPI.
"""
from __future__ import annotations

import glob
import os
import shutil
import sys
from dataclasses import dataclass

SPARK_KAFKA_COORDINATE = "org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"

# What format("kafka") needs beyond PySpark's own jars, as file-name patterns inside a jars
# folder: the connector, its token provider, the Java client and commons-pool2, and (for a
# Java client 3.7+: client telemetry) protobuf-java with OpenTelemetry's proto classes.
CONNECTOR_JAR_PATTERNS = ("spark-sql-kafka-0-10_*.jar", "spark-token-provider-kafka-0-10_*.jar",
                          "kafka-clients-*.jar", "commons-pool2-*.jar")
CONNECTOR_OPTIONAL_PATTERNS = ("protobuf-java-*.jar", "opentelemetry-proto-*.jar")


def connector_jars(folder: str) -> list[str]:
    """The jars of Spark's Kafka connector found in ``folder`` (and its ``deps/``), in
    ``spark.jars`` order.  Raises ValueError naming what is missing."""
    def find(pattern: str) -> list[str]:
        return sorted(glob.glob(os.path.join(folder, pattern))
                      + glob.glob(os.path.join(folder, "deps", pattern)))
    out, missing = [], []
    for pattern in CONNECTOR_JAR_PATTERNS:
        found = find(pattern)
        if found:
            out.append(found[-1])
        else:
            missing.append(pattern)
    if missing:
        raise ValueError(f"{folder}: no {', '.join(missing)} (Spark's Kafka connector needs them)")
    for pattern in CONNECTOR_OPTIONAL_PATTERNS:
        out.extend(find(pattern)[-1:])
    return [os.path.abspath(j) for j in out]


def expand_kafka_jars(value: str) -> str:
    """``--kafka-jars`` as ``spark.jars`` wants it: a comma-separated list is kept (each path
    must exist), a folder becomes the connector's jars found in it (``connector_jars``).
    Raises ValueError for a path that does not exist."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if len(parts) == 1 and os.path.isdir(parts[0]):
        return ",".join(connector_jars(parts[0]))
    missing = [p for p in parts if "://" not in p and not os.path.isfile(p)]
    if missing:
        raise ValueError(f"no such jar: {', '.join(missing)}")
    return ",".join(parts)


def java_available() -> bool:
    """PySpark needs a JVM: ``java`` on PATH or under JAVA_HOME."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


@dataclass(frozen=True)
class KafkaConnector:
    """Which connector a session uses; ``fmt`` goes into ``format(...)``."""
    fmt: str
    packages: str | None = None
    jars: str | None = None


def choose_connector(source: str = "auto", kafka_packages: str | None = None,
                     kafka_jars: str | None = None) -> KafkaConnector:
    """``source`` is "auto", "kafka" or "kwire-kafka". "auto" picks Spark's connector
    when packages or jars are configured (arguments, then environment), else kwire's.
    Jars are a comma-separated list or a folder (``expand_kafka_jars``).
    Raises ValueError for "kafka" without either, or for jars that are not there."""
    from .source import NAME
    packages = kafka_packages or os.environ.get("KWIRE_SPARK_KAFKA_PACKAGES") or None
    jars = kafka_jars or os.environ.get("KWIRE_SPARK_KAFKA_JARS") or None
    if jars and source != NAME:
        jars = expand_kafka_jars(jars)
    if source == NAME:
        return KafkaConnector(NAME)
    if source not in ("auto", "kafka"):
        raise ValueError(f"unknown source {source!r}: auto, kafka or {NAME}")
    if packages or jars:
        return KafkaConnector("kafka", packages, jars)
    if source == "kafka":
        raise ValueError('source "kafka" needs the spark-sql-kafka connector: pass its Maven '
                         "coordinate (e.g. " + SPARK_KAFKA_COORDINATE.format(version="4.3.0")
                         + ") or local jar paths")
    return KafkaConnector(NAME)


def build_session(app_name: str = "kwire-spark", master: str = "local[2]",
                  connector: KafkaConnector | None = None, shuffle_partitions: int = 2,
                  conf: dict | None = None, log_level: str = "WARN"):
    """A local SparkSession bound to 127.0.0.1, UI off, kwire's data source registered, Spark's
    own log at ``log_level``.  Raises RuntimeError when no JVM is available."""
    if not java_available():
        raise RuntimeError("PySpark needs Java 17+: install a JRE (Debian: "
                           "apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    from pyspark.sql import SparkSession

    from .source import register
    # executors' Python workers must import kwire.spark from this same environment
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    connector = connector or choose_connector()
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.log.level", log_level))      # from start-up on, not only once it is up
    if connector.packages:
        builder = builder.config("spark.jars.packages", connector.packages)
    if connector.jars:
        builder = builder.config("spark.jars", connector.jars)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark
