"""ApiVersions (18): advertised ranges come from the handler registry."""
from __future__ import annotations

from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode

from kwire.handlers.registry import HANDLERS, handles


def api_keys(config=None) -> list[dict]:
    """The advertised ranges: every handler this broker's ``config`` serves (all with None)."""
    return [{"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key) if h.serves(config)]


def unsupported_version_response(config=None) -> bytes:
    """A v0 body with UNSUPPORTED_VERSION and the supported ranges (clients then downgrade)."""
    return messages.encode_response(18, 0, {"error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                                            "api_keys": api_keys(config)})


@handles(18, 0, 4)
async def handle_api_versions(ctx, request):
    return {"error_code": 0, "api_keys": api_keys(ctx.broker.config), "throttle_time_ms": 0,
            "supported_features": [], "finalized_features_epoch": -1, "finalized_features": []}
