"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554): what
``kafka-configs.sh --entity-type users`` and ``kwire scram`` use to manage SCRAM users.

The rules are ``kwire.security.scram_store``'s (Kafka's controller and metadata image).  Every
failure is a value in the response: per user for both APIs; Describe's top-level error
stays 0.  Neither handler raises.

ACLs (Kafka's KafkaApis): Describe needs DESCRIBE on the cluster, Alter needs ALTER on the
cluster.  Both are checked before dispatch (kwire.server.connection's cluster gate): a refused Describe
is answered with the top-level error CLUSTER_AUTHORIZATION_FAILED and no results, a refused
Alter with that error for every user it names (kwire.handlers.errors).
"""
from __future__ import annotations

from kwire.security.scram_store import ScramDeletion, ScramUpsertion

from kwire.handlers.registry import handles


@handles(50, 0, 0)
async def handle_describe_user_scram_credentials(ctx, request):
    users = None if request.users is None else [u.name for u in request.users]
    results = ctx.broker.scram.describe(users)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": [
        {"user": r.user, "error_code": r.error_code, "error_message": r.error_message,
         "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credentials]}
        for r in results]}


@handles(51, 0, 0)
async def handle_alter_user_scram_credentials(ctx, request):
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                  for u in request.upsertions]
    deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
    results = await ctx.broker.scram.alter(upsertions, deletions)
    return {"throttle_time_ms": 0, "results": [
        {"user": r.user, "error_code": r.error_code, "error_message": r.error_message} for r in results]}
