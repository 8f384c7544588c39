"""The fallback error response used when a handler raises instead of answering."""
from __future__ import annotations

from kwire.codecs import messages


def error_response(api_key: int, request, code, message) -> dict | None:
    """A response carrying ``code`` at top level, or None if the API has no such field
    at this version (the caller then closes the connection)."""
    version = request.API_VERSION
    if not messages.response_has_field(api_key, version, "error_code"):
        return None
    out = {"error_code": int(code)}
    if messages.response_has_field(api_key, version, "error_message"):
        out["error_message"] = message
    return out
