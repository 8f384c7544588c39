"""Feature levels (KIP-584, KIP-778, KIP-1022): which features this broker supports, their
default finalized levels, and Kafka's rules for UpdateFeatures.

The finalized levels are stored as the ZooKeeper-era ``/feature`` znode's JSON (Kafka's
``FeatureZNode``, format version 2, which dropped ``min_version_level``)::

    {"version": 2, "status": 1,
     "features": {"transaction.version": {"max_version_level": 1}, ...}}

``status`` is 1 (enabled) or 0 (disabled: nothing finalized).  Version 1 of the format also
carried ``min_version_level`` per feature; it is read, never written.  A level 0 feature is not
finalized and is left out.  In a cluster the epoch is the znode's version; the single-node file
(``finalized-features.json`` in the first log dir) is the same JSON with an ``"epoch"`` key.

Validation follows Kafka 4's controller (``FeatureControlManager.updateFeatures``): all or
nothing, the first bad update fails the request with INVALID_UPDATE_VERSION.  Nothing here
does I/O.
"""
from __future__ import annotations

import dataclasses
import enum
import json
from typing import Iterable, Mapping

from kwire.codecs.errors import ErrorCode, KafkaApiError

METADATA_VERSION = "metadata.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
FEATURE_ZNODE = "/feature"            # Kafka's FeatureZNode.path

# metadata.version levels kwire supports: Kafka 4's minimum (3.3-IV3) to Kafka 4.1's latest
# production level.  (name, whether the level changed the metadata format: a downgrade across
# such a level could lose metadata, so Kafka refuses it)
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True), 14: ("3.6-IV2", True),
    15: ("3.7-IV0", True), 16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False), 26: ("4.1-IV0", False),
    27: ("4.1-IV1", False),
}


@dataclasses.dataclass(frozen=True)
class SupportedFeature:
    name: str
    min_version: int
    max_version: int
    default: int                       # finalized when nothing was stored yet
    # level -> {feature: the level it needs at least} (Kafka's FeatureVersion.dependencies)
    dependencies: Mapping[int, Mapping[str, int]] = dataclasses.field(default_factory=dict)


# Left out, as kwire does not implement them: kraft.version (KRaft controllers),
# eligible.leader.replicas.version (KIP-966), streams.version (KIP-1071).  transaction.version 2
# (KIP-890 part 2) is supported but not the default: it is finalized only by an upgrade.
SUPPORTED: dict[str, SupportedFeature] = {f.name: f for f in (
    SupportedFeature(METADATA_VERSION, min(METADATA_VERSIONS), max(METADATA_VERSIONS), max(METADATA_VERSIONS)),
    SupportedFeature(TRANSACTION_VERSION, 0, 2, 1),
    SupportedFeature(GROUP_VERSION, 0, 1, 1),
    SupportedFeature(SHARE_VERSION, 0, 1, 1),
)}


class UpgradeType(enum.IntEnum):
    """UpdateFeatures' ``upgrade_type`` (v1+); v0's ``allow_downgrade`` means SAFE_DOWNGRADE."""
    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> "UpgradeType":
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclasses.dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclasses.dataclass(frozen=True)
class FinalizedFeatures:
    """The finalized levels (features at level 0 left out) and their epoch (-1: unknown)."""
    levels: Mapping[str, int]
    epoch: int

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)


def default_levels() -> dict[str, int]:
    return {name: f.default for name, f in SUPPORTED.items() if f.default > 0}


def level_name(feature: str, level: int) -> str:
    """A level as Kafka's tools print it: metadata.version by release (``4.0-IV3``)."""
    if feature == METADATA_VERSION:
        return METADATA_VERSIONS[level][0] if level in METADATA_VERSIONS else f"UNKNOWN {level}"
    return str(level)


def metadata_level(name: str) -> int:
    """The metadata.version level of a release name (``4.0-IV3``, or ``4.0`` for its last
    level).  Raises ValueError."""
    found = [lvl for lvl, (n, _) in METADATA_VERSIONS.items() if n == name or n.split("-")[0] == name]
    if not found:
        raise ValueError(f"Unknown metadata.version {name}. Supported metadata.version are "
                         f"{', '.join(n for n, _ in METADATA_VERSIONS.values())}")
    return max(found)


# -- UpdateFeatures --------------------------------------------------------------------------------
def apply_updates(current: Mapping[str, int], updates: Iterable[FeatureUpdate], node_id: int) -> dict[str, int]:
    """The finalized levels after ``updates`` (level 0: not finalized), all or none.  Raises
    KafkaApiError(INVALID_UPDATE_VERSION) naming the first update Kafka would refuse, with
    Kafka's message.  A later update of the same feature wins, as in Kafka's controller."""
    updates = {u.feature: u for u in updates}
    proposed = {**current, **{name: u.level for name, u in updates.items()}}
    for name, update in updates.items():
        reason = _refusal(name, update, current.get(name, 0), proposed, node_id)
        if reason is not None:
            raise KafkaApiError(ErrorCode.INVALID_UPDATE_VERSION,
                                "The update failed for all features since the following feature had "
                                f"an error: {reason}")
    return {name: level for name, level in proposed.items() if level > 0}


def _refusal(name: str, update: FeatureUpdate, current: int, proposed: Mapping[str, int],
             node_id: int) -> str | None:
    level, kind = update.level, update.upgrade_type

    def invalid(message: str) -> str:
        return f"Invalid update version {level} for feature {name}. {message}"
    if kind is UpgradeType.UNKNOWN:
        return invalid("The controller does not support the given upgrade type.")
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    supported = SUPPORTED.get(name)
    if supported is None:
        return invalid(f"Local controller {node_id} does not support this feature.")
    if not supported.min_version <= level <= supported.max_version:
        return invalid(f"Local controller {node_id} only supports versions "
                       f"{supported.min_version}-{supported.max_version}")
    if level < current and kind is UpgradeType.UPGRADE:
        return invalid("Can't downgrade the version of this feature without setting the upgrade type "
                       "to either safe or unsafe downgrade.")
    if level > current and kind is not UpgradeType.UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        return _metadata_refusal(level, current, kind)
    return _dependency_refusal(name, level, proposed)


def _metadata_refusal(level: int, current: int, kind: UpgradeType) -> str | None:
    if level >= current or not _metadata_changed(level, current):
        return None
    reason = ("Unsafe metadata downgrade is not supported in this version." if kind is UpgradeType.UNSAFE_DOWNGRADE
              else "Refusing to perform the requested downgrade because it might delete metadata information.")
    return f"Invalid metadata.version {level}. {reason}"


def _metadata_changed(low: int, high: int) -> bool:
    """Whether a level in (low, high] changed the metadata format (MetadataVersion.checkIfMetadataChanged)."""
    return any(METADATA_VERSIONS.get(v, ("", True))[1] for v in range(low + 1, high + 1))


def _dependency_refusal(name: str, level: int, proposed: Mapping[str, int]) -> str | None:
    for needed, at_least in SUPPORTED[name].dependencies.get(level, {}).items():
        if proposed.get(needed, 0) < at_least:
            return (f"Invalid update version {level} for feature {name}. {name} could not be set to {level} "
                    f"because it depends on {needed} level {at_least}")
    return None


# -- the stored form ----------------------------------------------------------------------------
class FeatureFormatError(ValueError):
    """Bytes that are not Kafka's feature znode JSON."""


def encode(levels: Mapping[str, int], epoch: int | None = None) -> bytes:
    """The /feature znode's JSON (format version 2, enabled); with ``epoch`` for the file."""
    doc = {"version": 2, "status": 1,
           "features": {n: {"max_version_level": lvl} for n, lvl in sorted(levels.items()) if lvl > 0}}
    if epoch is not None:
        doc["epoch"] = epoch
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(data: bytes) -> tuple[dict[str, int], int | None]:
    """(finalized levels, the file's epoch or None) of a feature znode's JSON, versions 1 and 2
    (FeatureZNode.decode's checks).  Raises FeatureFormatError."""
    try:
        doc = json.loads(data)
        version, status, features = doc["version"], doc["status"], doc["features"]
    except (ValueError, KeyError, TypeError) as exc:
        raise FeatureFormatError(f"not a feature znode: {data[:200]!r}: {exc}") from None
    if version not in (1, 2) or status not in (0, 1) or not isinstance(features, dict):
        raise FeatureFormatError(f"unsupported feature znode version {version} or status {status}")
    levels = {}
    for name, info in features.items():
        level = info.get("max_version_level") if isinstance(info, dict) else None
        if not isinstance(level, int) or level < 1:
            raise FeatureFormatError(f"feature {name}: expected max_version_level >= 1, found {info}")
        levels[name] = level
    epoch = doc.get("epoch")
    return (levels if status == 1 else {}), (epoch if isinstance(epoch, int) else None)
