"""ApiVersions (18): advertised ranges come from the handler registry; from v3 the supported
and finalized feature levels (``kwire.admin.features``, ``broker.features``), which is what
Kafka's ``Admin.describeFeatures`` and kafka-features.sh read."""
from __future__ import annotations

from kwire.admin.features import SUPPORTED, FinalizedFeatures
from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode

from kwire.handlers.registry import HANDLERS, handles
from kwire.handlers.transactions import version_caps


def api_keys(config=None, caps: dict[int, int] | None = None, features=None) -> list[dict]:
    """The advertised ranges: every handler this broker's ``config`` and finalized ``features``
    serve (all with None), each maximum held to ``caps`` (what the finalized features leave out)."""
    caps = caps or {}
    return [{"api_key": h.api_key, "min_version": h.min_version, "max_version": min(h.max_version,
                                                                                    caps.get(h.api_key, h.max_version))}
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key) if h.serves(config, features)]


def unsupported_version_response(config=None) -> bytes:
    """A v0 body with UNSUPPORTED_VERSION and the supported ranges (clients then downgrade)."""
    return messages.encode_response(18, 0, {"error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                                            "api_keys": api_keys(config)})


def feature_fields(finalized: FinalizedFeatures, version: int) -> dict:
    """The v3+ feature fields.  Below v4 a supported feature whose minimum is 0 is left out, as
    Kafka does (KAFKA-17492: older clients cannot read it); a finalized level is its own min
    and max, and a feature at level 0 is not finalized."""
    return {"supported_features": [{"name": f.name, "min_version": f.min_version, "max_version": f.max_version}
                                   for f in SUPPORTED.values() if version >= 4 or f.min_version > 0],
            "finalized_features_epoch": finalized.epoch,
            "finalized_features": [{"name": name, "max_version_level": level, "min_version_level": level}
                                   for name, level in sorted(finalized.levels.items()) if level > 0]}


@handles(18, 0, 4)
async def handle_api_versions(ctx, request):
    return {"error_code": 0, "api_keys": api_keys(ctx.broker.config, version_caps(ctx.broker), ctx.broker.features), "throttle_time_ms": 0,
            **feature_fields(ctx.broker.features.finalized, ctx.api_version)}
