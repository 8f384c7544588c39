"""The fallback error response used when a handler raises instead of answering."""
from __future__ import annotations

from kwire.codecs import messages


def error_response(api_key: int, request, code, message) -> dict | None:
    """A response carrying ``code`` at top level, or in every entry for the APIs whose
    responses have one result per request entry and no top-level error (CreateAcls,
    DeleteAcls, AlterUserScramCredentials), or both where Kafka's ``getErrorResponse``
    answers both (ElectLeaders, DescribeUserScramCredentials); None otherwise (the caller
    then closes the connection)."""
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


def _partition_codes(topics, code: int, by_id: bool = False) -> list[dict]:
    """Each partition of ``topics`` answering ``code``; ``by_id``: topics named by id (OffsetCommit v10)."""
    return [{**({"topic_id": getattr(t, "topic_id", None)} if by_id else {"name": t.name}),
             "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
            for t in topics or ()]


def _elect_leaders(r, code: int, msg) -> dict:
    out = {"throttle_time_ms": 0, "replica_election_results": [
        {"topic": t.topic, "partition_result": [{"partition_id": p, "error_code": code, "error_message": msg}
                                                for p in t.partitions]}
        for t in r.topic_partitions or ()]}
    if r.API_VERSION >= 1:      # v0 has no top-level error
        out["error_code"] = code
    return out


_PER_ENTRY = {
    30: lambda r, code, msg: {"throttle_time_ms": 0, "results": [
        {"error_code": code, "error_message": msg} for _ in r.creations]},
    31: lambda r, code, msg: {"throttle_time_ms": 0, "filter_results": [
        {"error_code": code, "error_message": msg, "matching_acls": []} for _ in r.filters]},
    # Kafka answers a refused DescribeLogDirs with no log dirs; v1-2 have no place for the code
    35: lambda r, code, msg: {"throttle_time_ms": 0, "results": [],
                              **({"error_code": code} if r.API_VERSION >= 3 else {})},
    # OffsetCommit and TxnOffsetCommit: every partition carries the code (NOT_COORDINATOR,
    # COORDINATOR_NOT_AVAILABLE), as Kafka answers; clients then find the coordinator again
    8: lambda r, code, msg: {"throttle_time_ms": 0, "topics": _partition_codes(r.topics, code, r.API_VERSION >= 10)},
    28: lambda r, code, msg: {"throttle_time_ms": 0, "topics": _partition_codes(r.topics, code)},
    43: _elect_leaders,
    # one nameless result per user asked about, as Kafka answers (librdkafka 2.16 crashes
    # on a response with fewer results than users)
    50: lambda r, code, msg: {"throttle_time_ms": 0, "error_code": code, "error_message": msg, "results": [
        {"user": "", "error_code": code, "error_message": msg, "credential_infos": []} for _ in r.users or ()]},
    51: lambda r, code, msg: {"throttle_time_ms": 0, "results": [
        {"user": user, "error_code": code, "error_message": msg} for user in _scram_users(r)]},
    # DescribeClientQuotas: no entries (null); AlterClientQuotas: every entry answers the error
    # (Kafka's getErrorResponse)
    48: lambda r, code, msg: {"throttle_time_ms": 0, "error_code": code, "error_message": msg, "entries": None},
    49: lambda r, code, msg: {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": msg,
         "entity": [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in e.entity or ()]}
        for e in getattr(r, "entries", None) or ()]},
}
