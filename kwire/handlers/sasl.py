"""SaslHandshake (17) and SaslAuthenticate (36): SASL on SASL_PLAINTEXT / SASL_SSL listeners.

The exchange itself is kwire.security.sasl_session.SaslSession with kwire.security.sasl's
mechanisms; these handlers only carry its tokens and answer SaslAuthenticate
v1+ with the session's lifetime (KIP-368).  On a listener without SASL both
answer ILLEGAL_SASL_STATE, as Kafka does, and so does an authenticated
connection not re-authenticating.  A failed exchange is answered with its
error and the connection then closes (kwire.server.connection)."""
from __future__ import annotations

import logging

from kwire.codecs.errors import ErrorCode

from kwire.handlers.registry import handles
from kwire.security.sasl import SaslError

logger = logging.getLogger("kwire.security.sasl")


@handles(17, 0, 1)
async def handle_sasl_handshake(ctx, request):
    session = ctx.sasl
    if session is None:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    code = session.handshake(request.mechanism, ctx.api_version, ctx.broker.clock.now_ms())
    if code != ErrorCode.NONE:
        logger.info("%s: SASL handshake for %r refused (%s); enabled: %s", ctx.peer, request.mechanism,
                    code.name, ", ".join(session.mechanisms))
    return {"error_code": int(code), "mechanisms": session.mechanisms}


@handles(36, 0, 2)
async def handle_sasl_authenticate(ctx, request):
    session = ctx.sasl
    if session is None:
        return failed(ErrorCode.ILLEGAL_SASL_STATE, "SASL authentication is not enabled on this listener")
    try:
        challenge = session.authenticate(request.auth_bytes or b"", ctx.broker.clock.now_ms())
    except SaslError as exc:
        log_failure(ctx.peer, exc)
        return failed(exc.code, exc.message)
    lifetime_ms = session.session_lifetime_ms if session.authenticated else 0
    return {"error_code": 0, "error_message": None, "auth_bytes": challenge, "session_lifetime_ms": lifetime_ms}


def failed(code: ErrorCode, message: str) -> dict:
    return {"error_code": int(code), "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}


def log_failure(peer: str, exc: SaslError) -> None:
    logger.info("%s: SASL authentication failed: %s", peer, exc.detail)
