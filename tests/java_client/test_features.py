"""Apache Kafka's Admin.describeFeatures (ApiVersions) and updateFeatures against kwire."""
from __future__ import annotations

import pytest

from tests.java_client.conftest import run_checks


@pytest.fixture(scope="module")
def checks(kwire_broker, tmp_path_factory):
    return run_checks(tmp_path_factory, "JcFeatures", kwire_broker.bootstrap, timeout=90)


def test_describe_features_reads_the_supported_and_finalized_levels(checks):
    described = checks["describe"]
    assert described["supported"] == {"group.version": "0-1", "metadata.version": "7-27",
                                       "share.version": "0-1", "transaction.version": "0-2"}
    assert described["finalized"] == {"group.version": 1, "metadata.version": 27, "share.version": 1,
                                      "transaction.version": 1}
    assert described["epoch"] == 0


def test_update_features_validates_and_refuses(checks):
    checks["dry_run"]
    assert checks["refused"]["thrown"] == "InvalidUpdateVersionException"
