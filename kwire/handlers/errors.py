"""The fallback error response used when a handler raises instead of answering."""
from __future__ import annotations

from kwire.codecs import messages


def error_response(api_key: int, request, code, message) -> dict | None:
    """A response carrying ``code`` at top level, or in every entry for the APIs whose
    responses have one result per request entry and no top-level error (CreateAcls,
    DeleteAcls, AlterUserScramCredentials); None otherwise (the caller then closes the
    connection)."""
    version = request.API_VERSION
    per_entry = _PER_ENTRY.get(api_key)
    if per_entry is not None:
        return per_entry(request, int(code), message)
    if not messages.response_has_field(api_key, version, "error_code"):
        return None
    out = {"error_code": int(code)}
    if messages.response_has_field(api_key, version, "error_message"):
        out["error_message"] = message
    return out


def _scram_users(request) -> list[str]:
    users = [u.name for u in (request.deletions or [])] + [u.name for u in (request.upsertions or [])]
    return list(dict.fromkeys(users))


_PER_ENTRY = {
    30: lambda r, code, msg: {"throttle_time_ms": 0, "results": [
        {"error_code": code, "error_message": msg} for _ in r.creations]},
    31: lambda r, code, msg: {"throttle_time_ms": 0, "filter_results": [
        {"error_code": code, "error_message": msg, "matching_acls": []} for _ in r.filters]},
    51: lambda r, code, msg: {"throttle_time_ms": 0, "results": [
        {"user": user, "error_code": code, "error_message": msg} for user in _scram_users(r)]},
}
