"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the ACLs of kwire.security.acl_store.

Without an authorizer they answer SECURITY_DISABLED, as Kafka does.  The
cluster checks (DESCRIBE for DescribeAcls, ALTER for the others) are made
before dispatch (kwire.server.connection).  Creations and deletions are durable before
the response; one that cannot be written fails with UNKNOWN_SERVER_ERROR and
changes nothing.
"""
from __future__ import annotations

import logging

from kwire.admin.acls import AclBinding, AclBindingFilter, check_creation, check_filter, group_by_pattern
from kwire.codecs.errors import ErrorCode

from kwire.handlers.registry import handles

logger = logging.getLogger("kwire.acls")
DISABLED = "No Authorizer is configured."


def _filter(f, prefix: str) -> AclBindingFilter:
    def field(name):
        return getattr(f, name + prefix)
    return AclBindingFilter.from_wire(field("resource_type"), field("resource_name"), field("pattern_type"),
                                      field("principal"), field("host"), f.operation, f.permission_type)


@handles(29, 0, 3)
async def handle_describe_acls(ctx, request):
    acls = ctx.broker.acls
    if not acls.enabled:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": DISABLED,
                "resources": []}
    acl_filter = _filter(request, "_filter")
    error = check_filter(acl_filter)
    if error.code != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": int(error.code), "error_message": error.message,
                "resources": []}
    resources = [{"resource_type": int(pattern.resource_type), "resource_name": pattern.name,
                  "pattern_type": int(pattern.pattern_type),
                  "acls": [{"principal": e.principal, "host": e.host, "operation": int(e.operation),
                            "permission_type": int(e.permission_type)} for e in entries]}
                 for pattern, entries in group_by_pattern(acls.describe(acl_filter))]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}


@handles(30, 0, 3)
async def handle_create_acls(ctx, request):
    acls = ctx.broker.acls
    if not acls.enabled:
        return {"throttle_time_ms": 0, "results": [
            {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": DISABLED} for _ in request.creations]}
    bindings = [AclBinding.from_wire(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                                     c.host, c.operation, c.permission_type) for c in request.creations]
    invalid = [check_creation(b) for b in bindings]
    valid = [b for b, error in zip(bindings, invalid) if error.code == ErrorCode.NONE]
    try:
        created = iter(await acls.create(valid))
    except OSError as exc:
        logger.error("CreateAcls: the ACL file could not be written: %s", exc)
        return {"throttle_time_ms": 0, "results": [
            {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": "the ACLs could not be stored"}
            for _ in bindings]}
    results = []
    for error in invalid:
        if error.code == ErrorCode.NONE:
            error = next(created)
        results.append({"error_code": int(error.code), "error_message": error.message})
    if valid:
        logger.info("%s created %d ACL(s)", ctx.principal, len(valid))
    return {"throttle_time_ms": 0, "results": results}


@handles(31, 0, 3)
async def handle_delete_acls(ctx, request):
    acls = ctx.broker.acls
    if not acls.enabled:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": int(ErrorCode.SECURITY_DISABLED), "error_message": DISABLED, "matching_acls": []}
            for _ in request.filters]}
    filters = [_filter(f, "_filter") for f in request.filters]
    try:
        results = await acls.delete(filters)
    except OSError as exc:
        logger.error("DeleteAcls: the ACL file could not be written: %s", exc)
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": "the ACLs could not be stored",
             "matching_acls": []} for _ in filters]}
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": int(r.error.code), "error_message": r.error.message, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": int(b.resource_type),
             "resource_name": b.resource_name, "pattern_type": int(b.pattern_type), "principal": b.principal,
             "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission_type)}
            for b in r.bindings]} for r in results]}
