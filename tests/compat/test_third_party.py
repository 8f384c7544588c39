"""kafka-python's own integration tests (its PyPI sdist) against an embedded kwire."""
import pytest

from kwire.compat_tests import third_party

# the whole matrix runs in the first test's fixture setup, which pytest-timeout counts
pytestmark = [pytest.mark.clients, pytest.mark.timeout(600)]


def test_kafka_python_integration_suite():
    try:
        result = third_party.run()
    except third_party.Unavailable as exc:
        pytest.skip(f"kafka-python sdist unavailable: {exc}")
    counts = result.get("counts", {})
    print(f"\n{result['suite']}: {counts}")
    failed = [t for t, s in result["tests"].items() if s in ("failed", "error")]
    assert not failed, f"{failed}\n{result.get('output_tail', '')[-2000:]}"
    assert result["ok"], result.get("error") or result.get("output_tail", "")[-2000:]
    assert counts["passed"] >= 40
