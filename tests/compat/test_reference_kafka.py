"""Apache Kafka through testcontainers' Kafka module, when a Docker engine is reachable."""
import pytest

from kwire.compat_tests import reference, report
from kwire.compat_tests.runner import run_matrix

# the whole matrix runs in the first test's fixture setup, which pytest-timeout counts
pytestmark = [pytest.mark.clients, pytest.mark.timeout(600)]


def test_matrix_against_apache_kafka():
    why = reference.docker_unavailable()
    if why:
        pytest.skip(f"Apache Kafka reference skipped: {why}")
    try:
        with reference.apache_kafka() as bootstrap:
            results = run_matrix(bootstrap, ["kafka-python", "confluent-kafka", "raw-socket"], jobs=2,
                                 timeout_scale=2)
    except reference.ReferenceUnavailable as exc:
        pytest.skip(str(exc))
    print("\n" + report.table(results, title="apache kafka"))
    assert not report.unexpected("kafka", results)


def test_docker_probe_says_why_when_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    assert "does not exist" in reference.docker_unavailable()
    with pytest.raises(reference.ReferenceUnavailable, match="does not exist"):
        with reference.apache_kafka():
            pass
