"""The fallback error response used when a handler raises instead of answering."""
from __future__ import annotations

from kwire.codecs import messages


def error_response(api_key: int, request, code, message) -> dict | None:
    """A response carrying ``code`` at top level, or None if the API has no such field
    at this version (the caller then closes the connection)."""
    cls = messages.response_class(api_key)
    version = request.API_VERSION
    fields = cls._struct.fields
    err = fields.get("error_code")
    if err is None or not err.for_version_q(version):
        return None
    out = {"error_code": int(code)}
    msg = fields.get("error_message")
    if msg is not None and msg.for_version_q(version):
        out["error_message"] = message
    return out
