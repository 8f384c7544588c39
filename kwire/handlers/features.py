"""UpdateFeatures (57): change the finalized feature levels (kafka-features.sh upgrade and
downgrade).  Kafka's rules are ``kwire.admin.features``; where the levels are kept is
``broker.features`` (a file on one node, the ``/feature`` znode in a cluster, written by
whichever broker takes the request).  ALTER on the cluster is checked before dispatch
(``kwire.admin.acl_operations``)."""
from __future__ import annotations

from kwire.admin.features import FeatureUpdate, UpgradeType
from kwire.codecs.errors import KafkaApiError

from kwire.handlers.registry import handles


def feature_updates(request, version: int) -> list[FeatureUpdate]:
    """The request's updates; v0's ``allow_downgrade`` is a safe downgrade (Kafka's
    UpdateFeaturesRequest.getFeature)."""
    if version == 0:
        return [FeatureUpdate(u.feature, u.max_version_level,
                              UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE)
                for u in request.feature_updates or ()]
    return [FeatureUpdate(u.feature, u.max_version_level, UpgradeType.of(u.upgrade_type))
            for u in request.feature_updates or ()]


@handles(57, 0, 2)
async def handle_update_features(ctx, request):
    """All or nothing, as Kafka's controller: a refusal is the top-level error (v0-1 then carry
    no per-feature results); success lists each feature with no error up to v1."""
    version = ctx.api_version
    updates = feature_updates(request, version)
    try:
        await ctx.broker.features.alter(updates, validate_only=version >= 1 and bool(request.validate_only))
    except KafkaApiError as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code), "error_message": exc.message, "results": []}
    results = [{"feature": name, "error_code": 0, "error_message": None}
               for name in dict.fromkeys(u.feature for u in updates)] if version <= 1 else []
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}
