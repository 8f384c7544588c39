"""Kafka's UpdateFeatures rules (kwire.admin.features), without a broker."""
from __future__ import annotations

import pytest

from kwire.admin import features as f
from kwire.admin.features import FeatureUpdate, UpgradeType as U
from kwire.codecs.errors import ErrorCode, KafkaApiError

DEFAULTS = f.default_levels()


def refused(updates, current=DEFAULTS) -> str:
    with pytest.raises(KafkaApiError) as caught:
        f.apply_updates(current, updates, node_id=1)
    assert caught.value.code == ErrorCode.INVALID_UPDATE_VERSION
    prefix = "The update failed for all features since the following feature had an error: "
    assert caught.value.message.startswith(prefix)
    return caught.value.message[len(prefix):]


def test_defaults_never_finalize_transactions_v2():
    assert DEFAULTS == {"metadata.version": 27, "transaction.version": 1, "group.version": 1, "share.version": 1}
    assert f.SUPPORTED["transaction.version"].max_version == 2
    assert f.level_name("metadata.version", 27) == "4.1-IV1" and f.metadata_level("4.0") == 25


def test_upgrade_downgrade_and_disable():
    assert f.apply_updates(DEFAULTS, [FeatureUpdate("transaction.version", 2)], 1)["transaction.version"] == 2
    lowered = f.apply_updates({**DEFAULTS, "transaction.version": 2},
                              [FeatureUpdate("transaction.version", 1, U.SAFE_DOWNGRADE)], 1)
    assert lowered["transaction.version"] == 1
    gone = f.apply_updates(DEFAULTS, [FeatureUpdate("share.version", 0, U.UNSAFE_DOWNGRADE)], 1)
    assert "share.version" not in gone
    # a safe metadata.version downgrade across levels that did not change the metadata format
    assert f.apply_updates(DEFAULTS, [FeatureUpdate("metadata.version", 24, U.SAFE_DOWNGRADE)], 1)[
        "metadata.version"] == 24


@pytest.mark.parametrize("update, message", [
    (FeatureUpdate("transaction.version", 3), "Invalid update version 3 for feature transaction.version. "
     "Local controller 1 only supports versions 0-2"),
    (FeatureUpdate("no.such.version", 1), "Invalid update version 1 for feature no.such.version. "
     "Local controller 1 does not support this feature."),
    (FeatureUpdate("group.version", -1, U.SAFE_DOWNGRADE), "Invalid update version -1 for feature group.version. "
     "A feature version cannot be less than 0."),
    (FeatureUpdate("group.version", 0), "Invalid update version 0 for feature group.version. Can't downgrade "
     "the version of this feature without setting the upgrade type to either safe or unsafe downgrade."),
    (FeatureUpdate("transaction.version", 2, U.SAFE_DOWNGRADE),
     "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version."),
    (FeatureUpdate("group.version", 1, U.UNKNOWN), "Invalid update version 1 for feature group.version. "
     "The controller does not support the given upgrade type."),
    (FeatureUpdate("metadata.version", 6), "Invalid update version 6 for feature metadata.version. "
     "Local controller 1 only supports versions 7-27"),
    (FeatureUpdate("metadata.version", 22, U.SAFE_DOWNGRADE), "Invalid metadata.version 22. Refusing to "
     "perform the requested downgrade because it might delete metadata information."),
    (FeatureUpdate("metadata.version", 22, U.UNSAFE_DOWNGRADE),
     "Invalid metadata.version 22. Unsafe metadata downgrade is not supported in this version."),
])
def test_refusals_carry_kafkas_messages(update, message):
    assert refused([update]) == message


def test_all_or_nothing_and_dependencies(monkeypatch):
    # one bad update refuses the good one with it
    refused([FeatureUpdate("transaction.version", 2), FeatureUpdate("group.version", 5)])
    # a level that depends on another feature's level (Kafka's FeatureVersion.dependencies)
    needy = f.SupportedFeature("needy.version", 0, 1, 0, {1: {"transaction.version": 2}})
    monkeypatch.setitem(f.SUPPORTED, "needy.version", needy)
    assert refused([FeatureUpdate("needy.version", 1)]) == ("Invalid update version 1 for feature needy.version. "
                                                            "needy.version could not be set to 1 because it "
                                                            "depends on transaction.version level 2")
    both = [FeatureUpdate("needy.version", 1), FeatureUpdate("transaction.version", 2)]
    assert f.apply_updates(DEFAULTS, both, 1)["needy.version"] == 1


def test_the_feature_znode_format():
    data = f.encode({"transaction.version": 2, "share.version": 0})
    assert data == b'{"version":2,"status":1,"features":{"transaction.version":{"max_version_level":2}}}'
    assert f.decode(data) == ({"transaction.version": 2}, None)
    assert f.decode(f.encode({"group.version": 1}, epoch=4)) == ({"group.version": 1}, 4)
    # version 1 (Kafka before 3.3) also held min_version_level; a disabled znode finalizes nothing
    v1 = b'{"version":1,"status":1,"features":{"group.version":{"min_version_level":1,"max_version_level":1}}}'
    assert f.decode(v1) == ({"group.version": 1}, None)
    assert f.decode(b'{"version":2,"status":0,"features":{}}') == ({}, None)
    for bad in (b"nope", b'{"version":3,"status":1,"features":{}}',
                b'{"version":2,"status":1,"features":{"x":{"max_version_level":0}}}'):
        with pytest.raises(f.FeatureFormatError):
            f.decode(bad)
