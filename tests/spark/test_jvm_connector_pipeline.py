"""The activity pipeline of spark/ end to end on Spark's JVM connector (``format("kafka")``
for its three sources and the update-mode topic sink), with exact windowed aggregates and a
rerun from the checkpoint; and ``kwire spark-demo --source kafka --kafka-jars <folder>`` as
a user runs it, in a process of its own."""
import os
import subprocess
import sys

import pytest

from kwire.spark import activity as A
from kwire.spark.session import choose_connector, expand_kafka_jars

from .conftest import SHARED_JARS, shared_connector_jars
from .test_activity import MINUTE, T0, assert_exact, assert_topic_then_resume, config, produce

pytestmark = pytest.mark.clients


def test_pipeline_on_the_jvm_connector_exact_then_resumed(jvm_spark, broker, topic_name, tmp_path):
    cfg = config(broker.bootstrap, topic_name, tmp_path, fmt="kafka", max_offsets_per_trigger=250)
    events, logs = produce(cfg, 0)
    A.run_available_now(jvm_spark, cfg, timeout_s=150)
    views = assert_exact(jvm_spark, cfg, events, logs)
    assert {w for w, _ in views} == {T0 + m * MINUTE for m in range(4)}   # minute 4 still open
    assert_topic_then_resume(jvm_spark, cfg, events, logs)


def test_kafka_jars_takes_a_folder_or_a_list():
    jars, why = shared_connector_jars()
    if not jars:
        pytest.skip(why)
    assert expand_kafka_jars(str(SHARED_JARS)) == ",".join(jars)
    assert [os.path.basename(j).split("-")[0] for j in jars[:4]] == ["spark", "spark", "kafka", "commons"]
    assert expand_kafka_jars(",".join(jars[:4])) == ",".join(jars[:4])
    assert choose_connector("auto", kafka_jars=str(SHARED_JARS)).fmt == "kafka"
    with pytest.raises(ValueError, match="no such jar"):
        expand_kafka_jars("/nonexistent/spark-sql-kafka.jar")
    with pytest.raises(ValueError, match="spark-sql-kafka"):
        expand_kafka_jars(str(SHARED_JARS / "deps"))


def test_spark_demo_source_kafka_with_kafka_jars(jvm_spark, broker, topic_name, tmp_path):
    """The CLI in its own process (its own JVM, built with the jars it was given): --once
    over topics already filled, then the Parquet output checked from the test's session."""
    cfg = config(broker.bootstrap, topic_name, tmp_path)
    events, logs = produce(cfg, 0, n_events=300, n_logs=100)
    args = [sys.executable, "-m", "kwire", "spark-demo", "--source", "kafka",
            "--kafka-jars", str(SHARED_JARS), "--bootstrap", cfg.bootstrap, "--dir", str(tmp_path),
            "--once", "--activity-topic", cfg.activity_topic, "--logs-topic", cfg.logs_topic,
            "--output-topic", cfg.output_topic]
    run = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "source format('kafka')" in run.stdout, run.stdout
    assert "top pages:" in run.stdout, run.stdout
    # Spark's own warnings (AQE disabled, a trigger falling behind, ...) stay out of the demo's
    # output unless asked for with --spark-log-level; only the JVM's start-up lines come first
    spark_lines = run.stderr.split('Setting Spark log level to "ERROR".', 1)
    assert len(spark_lines) == 2 and " WARN " not in spark_lines[1], run.stderr[-3000:]
    assert_exact(jvm_spark, cfg, events, logs)
    bad = subprocess.run([sys.executable, "-m", "kwire", "spark-demo", "--source", "kafka",
                          "--kafka-jars", str(tmp_path / "nothing-here.jar"), "--once"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no such jar" in bad.stderr, bad.stderr
