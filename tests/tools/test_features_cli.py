"""``kwire features`` against an embedded broker: kafka-python's describe_features (ApiVersions),
upgrade, downgrade and their refusals, and a restart that keeps the finalized levels."""
from __future__ import annotations

import json
import os

import pytest
from kafka.admin import KafkaAdminClient

import kwire.testing
from kwire.tools.features import main


@pytest.fixture
def run(capsys):
    def call(broker, *argv):
        capsys.readouterr()
        code = main([*argv, "--bootstrap-server", broker.bootstrap])
        out = capsys.readouterr()
        return code, out.out, out.err
    return call


def described(run, broker) -> dict[str, str]:
    code, out, _ = run(broker, "describe")
    assert code == 0
    return {line.split("\t")[0]: line for line in out.splitlines()}


def test_describe_upgrade_downgrade_and_restart(run, tmp_path):
    data_dir = str(tmp_path / "data")
    with kwire.testing.broker(partitions=1, data_dir=data_dir) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            features = admin.describe_features()
        finally:
            admin.close()
        assert features["transaction.version"] == {"supported": (0, 2), "finalized": (1, 1), "finalized_epoch": 0}
        assert features["metadata.version"]["supported"] == (7, 27)
        lines = described(run, b)
        assert lines["Feature: transaction.version"] == ("Feature: transaction.version\tSupportedMinVersion: 0\t"
                                                         "SupportedMaxVersion: 2\tFinalizedVersionLevel: 1\tEpoch: 0")
        assert "SupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1\tFinalizedVersionLevel: 4.1-IV1" in \
            lines["Feature: metadata.version"]

        assert run(b, "upgrade", "--feature", "transaction.version=2", "--dry-run")[:2] == (
            0, "transaction.version can be upgraded to 2.\n")
        assert "FinalizedVersionLevel: 1\tEpoch: 0" in described(run, b)["Feature: transaction.version"]
        assert run(b, "upgrade", "--feature", "transaction.version=2")[:2] == (0, "transaction.version was upgraded to 2.\n")
        code, out, err = run(b, "downgrade", "--metadata", "4.0-IV0")
        assert code == 1 and "Refusing to perform the requested downgrade" in out and "1 out of 1" in err
        code, out, _ = run(b, "upgrade", "--feature", "group.version=1", "--feature", "share.version=7")
        assert code == 1 and "Could not upgrade share.version to 7" in out and "only supports versions 0-1" in out
        assert run(b, "downgrade", "--feature", "group.version=0")[0] == 0
        assert run(b, "upgrade", "--feature", "transaction.version=x")[0] == 2
        assert "FinalizedVersionLevel: 2\tEpoch: 2" in described(run, b)["Feature: transaction.version"]

    stored = json.loads(open(os.path.join(data_dir, "finalized-features.json")).read())
    assert stored["features"]["transaction.version"] == {"max_version_level": 2} and stored["epoch"] == 2
    with kwire.testing.broker(partitions=1, data_dir=data_dir) as b:
        lines = described(run, b)
        assert "FinalizedVersionLevel: 2\tEpoch: 2" in lines["Feature: transaction.version"]
        assert "FinalizedVersionLevel: 0" in lines["Feature: group.version"]
        assert b.broker.features.level("transaction.version") == 2     # the accessor the broker uses


def advertised(broker) -> set[int]:
    from kafka.protocol.metadata import ApiVersionsRequest
    from kwire.testing.cluster import send_request
    response = send_request(broker.bootstrap, ApiVersionsRequest[3](client_software_name="t",
                                                                     client_software_version="1"))
    return {k.api_key for k in response.api_keys}


def test_group_and_share_versions_turn_their_apis_on_and_off(run, tmp_path):
    # as Kafka 4.x: the KIP-848 APIs need group.version 1, the share-group APIs share.version 1
    kip848, share = {68, 69}, {76, 77, 78, 79, 90, 91, 92}
    with kwire.testing.broker(partitions=1, data_dir=str(tmp_path / "data")) as b:
        assert kip848 | share <= advertised(b)
        assert run(b, "downgrade", "--feature", "share.version=0", "--feature", "group.version=0")[0] == 0
        assert not (kip848 | share) & advertised(b)
        assert run(b, "upgrade", "--feature", "share.version=1")[0] == 0
        assert share <= advertised(b) and not kip848 & advertised(b)
