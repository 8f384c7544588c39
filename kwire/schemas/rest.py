"""Confluent Schema Registry's REST API as a Starlette app over a ``SchemaRegistryService``
(kwire.schemas.service): the paths, bodies, answers and error codes confluent-kafka's
``SchemaRegistryClient`` and its serializers, Confluent's Java client and ``curl`` use.

Every answer is JSON (``application/vnd.schemaregistry.v1+json``); every failure is
``{"error_code": <Confluent code>, "message": ...}`` with its HTTP status, never a stack
trace: bad input is a 4xx, a registry that cannot reach its log a 5xx (50001-50003).
Reads are served from this broker's copy of ``_schemas``; writes run on the primary (the
leader of ``_schemas`` partition 0), and a broker that is not the primary forwards them, as
Confluent's registry forwards to its primary.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kwire.schemas import types
from kwire.schemas.records import Reference, SchemaValue, config_record, mode_record
from kwire.schemas.state import RegistryError, RegistryState, parse_version, schema_not_found

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 16 * 1024 * 1024       # a schema body; larger ones are refused before being read


class Answer(JSONResponse):
    media_type = CONTENT_TYPE


def error(exc: RegistryError) -> Answer:
    return Answer({"error_code": exc.error_code, "message": exc.message}, status_code=exc.status)


def flag(request: Request, name: str, default: bool = False) -> bool:
    value = request.query_params.get(name)
    return default if value is None else value.strip().lower() == "true"


def version_json(value: SchemaValue, schema: str | None = None) -> dict:
    """A version as GET /subjects/{s}/versions/{v} shows it (schemaType left out for AVRO)."""
    obj: dict = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        obj["schemaType"] = value.schema_type
    if value.references:
        obj["references"] = [r.as_json() for r in value.references]
    obj["schema"] = value.schema if schema is None else schema
    return obj


async def body(request: Request) -> dict:
    """The JSON object of a request, read only up to MAX_BODY_BYTES.  Raises RegistryError
    (400 for a body that is not one, 413 for one too large)."""
    too_large = RegistryError(413, 413, f"HTTP 413 the request body is over {MAX_BODY_BYTES} bytes")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        obj = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise RegistryError(400, 400, "Unrecognized request body: not JSON") from None
    if not isinstance(obj, dict):
        raise RegistryError(400, 400, "Unrecognized request body: not a JSON object")
    return obj


def schema_request(obj: dict) -> tuple[str, str, tuple[Reference, ...]]:
    """(schemaType, schema, references) of a register/lookup/compatibility body.  Raises
    RegistryError 42201."""
    schema, schema_type = obj.get("schema"), obj.get("schemaType") or "AVRO"
    if not isinstance(schema, str) or not schema:
        raise RegistryError(422, 42201, "Invalid schema: the body has no \"schema\" string")
    if schema_type not in types.SCHEMA_TYPES:
        raise RegistryError(422, 42201, f"Invalid schema: unknown schemaType {schema_type!r}")
    try:
        refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                     for r in obj.get("references") or ())
    except (KeyError, TypeError, ValueError):
        raise RegistryError(422, 42201, "Invalid schema: a reference needs name, subject and version") from None
    return schema_type, schema, refs


class RegistryApi:
    """The routes; ``service`` gives the state to read and runs writes (kwire.schemas.service)."""

    def __init__(self, service):
        self.service = service

    def app(self, middleware=()) -> Starlette:
        routes = [
            Route("/", self.root),
            Route("/schemas/types", self.schema_types),
            Route("/schemas", self.list_schemas),
            Route("/schemas/ids/{id}", self.by_id),
            Route("/schemas/ids/{id}/schema", self.by_id_raw),
            Route("/schemas/ids/{id}/subjects", self.id_subjects),
            Route("/schemas/ids/{id}/versions", self.id_versions),
            Route("/subjects", self.subjects),
            Route("/subjects/{subject:path}/versions", self.versions, methods=["GET"]),
            Route("/subjects/{subject:path}/versions", self.register, methods=["POST"]),
            Route("/subjects/{subject:path}/versions/{version}", self.version, methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}", self.delete_version, methods=["DELETE"]),
            Route("/subjects/{subject:path}/versions/{version}/schema", self.version_raw),
            Route("/subjects/{subject:path}/versions/{version}/referencedby", self.referenced_by),
            Route("/subjects/{subject:path}", self.lookup, methods=["POST"]),
            Route("/subjects/{subject:path}", self.delete_subject, methods=["DELETE"]),
            Route("/compatibility/subjects/{subject:path}/versions/{version}", self.compatibility, methods=["POST"]),
            Route("/compatibility/subjects/{subject:path}/versions", self.compatibility, methods=["POST"]),
            Route("/config", self.config, methods=["GET", "PUT", "DELETE"]),
            Route("/config/{subject:path}", self.config, methods=["GET", "PUT", "DELETE"]),
            Route("/mode", self.mode, methods=["GET", "PUT", "DELETE"]),
            Route("/mode/{subject:path}", self.mode, methods=["GET", "PUT", "DELETE"]),
        ]
        return Starlette(routes=[Route(r.path, _guarded(r.endpoint, self.service), methods=r.methods)
                                 for r in routes],
                         middleware=list(middleware), exception_handlers={HTTPException: _http_error})

    # -- reads ----------------------------------------------------------------------------
    async def root(self, request: Request, state: RegistryState):
        return Answer({})

    async def schema_types(self, request: Request, state: RegistryState):
        return Answer(list(types.SCHEMA_TYPES))

    async def list_schemas(self, request: Request, state: RegistryState):
        deleted, prefix = flag(request, "deleted"), request.query_params.get("subjectPrefix", "")
        latest_only = flag(request, "latestOnly")
        found = []
        for subject in state.subjects(deleted=deleted, prefix=prefix):
            values = state.live_versions(subject, deleted=deleted)
            found.extend(version_json(v) for v in (values[-1:] if latest_only else values))
        return Answer(found)

    def _id(self, request: Request, state: RegistryState) -> SchemaValue:
        try:
            schema_id = int(request.path_params["id"])
        except ValueError:
            raise schema_not_found(f"Schema {request.path_params['id']} not found") from None
        value = state.schema_by_id(schema_id)
        subject = request.query_params.get("subject")
        if value is None or (subject and subject not in {s for s, _ in state.holders(schema_id, deleted=True)}):
            raise schema_not_found(f"Schema {schema_id} not found")
        return value

    @staticmethod
    def _formatted(state: RegistryState, value: SchemaValue, fmt: str | None) -> str:
        if not fmt:
            return value.schema
        try:
            return state.parsed(value.id).formatted(fmt)
        except types.SchemaError:
            return value.schema

    async def by_id(self, request: Request, state: RegistryState):
        value = self._id(request, state)
        obj = version_json(value, self._formatted(state, value, request.query_params.get("format")))
        for key in ("subject", "version", "id"):
            obj.pop(key)
        return Answer(obj)

    async def by_id_raw(self, request: Request, state: RegistryState):
        value = self._id(request, state)
        return Response(self._formatted(state, value, request.query_params.get("format")), media_type=CONTENT_TYPE)

    async def id_subjects(self, request: Request, state: RegistryState):
        value = self._id(request, state)
        return Answer(sorted({s for s, _ in state.holders(value.id, deleted=flag(request, "deleted"))}))

    async def id_versions(self, request: Request, state: RegistryState):
        value = self._id(request, state)
        return Answer([{"subject": s, "version": v}
                       for s, v in state.holders(value.id, deleted=flag(request, "deleted"))])

    async def subjects(self, request: Request, state: RegistryState):
        return Answer(state.subjects(deleted=flag(request, "deleted"),
                                     prefix=request.query_params.get("subjectPrefix", "")))

    async def versions(self, request: Request, state: RegistryState):
        return Answer(state.version_numbers(request.path_params["subject"], deleted=flag(request, "deleted")))

    async def version(self, request: Request, state: RegistryState):
        value = state.get_version(request.path_params["subject"], request.path_params["version"],
                                  deleted=flag(request, "deleted"))
        return Answer(version_json(value, self._formatted(state, value, request.query_params.get("format"))))

    async def version_raw(self, request: Request, state: RegistryState):
        value = state.get_version(request.path_params["subject"], request.path_params["version"],
                                  deleted=flag(request, "deleted"))
        return Response(self._formatted(state, value, request.query_params.get("format")), media_type=CONTENT_TYPE)

    async def referenced_by(self, request: Request, state: RegistryState):
        value = state.get_version(request.path_params["subject"], request.path_params["version"])
        return Answer(state.referenced_by(value.subject, value.version))

    async def lookup(self, request: Request, state: RegistryState):
        subject = request.path_params["subject"]
        schema_type, schema, refs = schema_request(await body(request))
        deleted = flag(request, "deleted")
        if not state.live_versions(subject, deleted=deleted):
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        parsed = state.parse_request(schema_type, schema, refs)
        if flag(request, "normalize", state.normalize_default(subject)):
            parsed = state.parse_request(schema_type, parsed.normalized(), refs)
        value = state.lookup(subject, parsed, refs, deleted=deleted)
        if value is None:
            raise schema_not_found("Schema not found")
        return Answer(version_json(value))

    async def compatibility(self, request: Request, state: RegistryState):
        subject = request.path_params["subject"]
        schema_type, schema, refs = schema_request(await body(request))
        parsed = state.parse_request(schema_type, schema, refs)
        if "version" in request.path_params:
            against = [state.get_version(subject, request.path_params["version"])]
            level = state.compatibility(subject).replace("_TRANSITIVE", "")
        else:
            against, level = None, None
        messages = state.incompatibilities(subject, parsed, against, level)
        answer = {"is_compatible": not messages}
        if flag(request, "verbose"):
            answer["messages"] = messages
        return Answer(answer)

    # -- writes (run on the primary by the service) -----------------------------------------
    async def register(self, request: Request, state: RegistryState):
        subject = request.path_params["subject"]
        obj = await body(request)
        schema_type, schema, refs = schema_request(obj)
        schema_id, version = obj.get("id"), obj.get("version")
        if (schema_id is not None and not isinstance(schema_id, int)) or (
                version is not None and not isinstance(version, int)):
            raise RegistryError(422, 42201, "Invalid schema: id and version must be integers")
        normalize = flag(request, "normalize", state.normalize_default(subject))

        def command(current: RegistryState):
            parsed = current.parse_request(schema_type, schema, refs)
            if normalize:
                parsed = current.parse_request(schema_type, parsed.normalized(), refs)
            return current.register(subject, parsed, refs, schema_id=schema_id or None,
                                    version=version if schema_id else None)
        return Answer({"id": await self.service.execute(command)})

    async def delete_version(self, request: Request, state: RegistryState):
        subject, version = request.path_params["subject"], request.path_params["version"]
        parse_version(version)
        permanent = flag(request, "permanent")
        return Answer(await self.service.execute(lambda s: s.delete_version(subject, version, permanent)))

    async def delete_subject(self, request: Request, state: RegistryState):
        subject, permanent = request.path_params["subject"], flag(request, "permanent")
        return Answer(await self.service.execute(lambda s: s.delete_subject(subject, permanent)))

    async def config(self, request: Request, state: RegistryState):
        subject = request.path_params.get("subject")
        current = state.configs.get(subject)
        if request.method == "GET":
            if current is None and subject is not None and not flag(request, "defaultToGlobal"):
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                                f"compatibility configured")
            answer = {"compatibilityLevel": state.compatibility(subject)}
            if (current or {}).get("normalize") is not None:
                answer["normalize"] = current["normalize"]
            return Answer(answer)
        if request.method == "DELETE":
            if subject is not None and current is None:
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                                f"compatibility configured")
            previous = {"compatibilityLevel": state.compatibility(subject)}
            await self.service.execute(lambda s: ([config_record(subject, None)], None))
            return Answer(previous)
        obj = await body(request)
        level = str(obj.get("compatibility") or obj.get("compatibilityLevel") or "").upper()
        normalize = obj.get("normalize")
        await self.service.execute(lambda s: (s.set_config(subject, level, normalize), None))
        answer = {"compatibility": level}
        if normalize is not None:
            answer["normalize"] = normalize
        return Answer(answer)

    async def mode(self, request: Request, state: RegistryState):
        subject = request.path_params.get("subject")
        current = state.modes.get(subject)
        if request.method == "GET":
            if current is None and subject is not None and not flag(request, "defaultToGlobal"):
                raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
            return Answer({"mode": state.mode(subject)})
        if request.method == "DELETE":
            previous = {"mode": state.mode(subject)}
            await self.service.execute(lambda s: ([mode_record(subject, None)], None))
            return Answer(previous)
        mode = str((await body(request)).get("mode") or "").upper()
        force = flag(request, "force")
        await self.service.execute(lambda s: (s.set_mode(subject, mode, force), None))
        return Answer({"mode": mode})


class BasicAuth:
    """ASGI middleware: HTTP Basic credentials checked by ``check(user, password)`` (async);
    a request without good ones gets 401 with Confluent's body.  Good answers are cached for
    CACHE_S so a client does not pay a PBKDF2 per request."""
    CACHE_S = 60.0

    def __init__(self, app, check):
        self.app, self.check = app, check
        self._good: dict[bytes, float] = {}

    @classmethod
    def middleware(cls, check):
        from starlette.middleware import Middleware
        return Middleware(cls, check=check)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or await self._allowed(dict(scope["headers"]).get(b"authorization", b"")):
            return await self.app(scope, receive, send)
        response = Answer({"error_code": 401, "message": "Unauthorized"}, status_code=401,
                          headers={"WWW-Authenticate": 'Basic realm="kwire"'})
        await response(scope, receive, send)

    async def _allowed(self, header: bytes) -> bool:
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        key = hashlib.sha256(token.strip()).digest()
        now = time.monotonic()
        if self._good.get(key, 0.0) > now:
            return True
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        if not sep or not await self.check(user, password):
            return False
        if len(self._good) > 1000:
            self._good.clear()
        self._good[key] = now + self.CACHE_S
        return True


async def _http_error(request: Request, exc: HTTPException) -> Answer:
    """Starlette's own refusals (unknown path 404, wrong method 405, body too large 413) in
    Confluent's JSON error body."""
    return Answer({"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {exc.detail}"},
                  status_code=exc.status_code, headers=getattr(exc, "headers", None))


def _guarded(endpoint, service):
    """The endpoint with this broker's state (or the request forwarded to the primary) and
    every failure mapped to Confluent's error body."""
    async def run(request: Request):
        try:
            forward = await service.forward_target(request.method)
            if forward is not None:
                return await service.forward(request, forward)
            state = await service.state()
            return await endpoint(request, state)
        except RegistryError as exc:
            return error(exc)
        except types.SchemaError as exc:
            return error(RegistryError(422, 42201, f"Invalid schema: {exc}"))
        except HTTPException:
            raise                                  # _http_error answers it
        except Exception:                          # a bug: logged, answered without its trace
            logger.exception("schema registry: %s %s failed", request.method, request.url.path)
            return error(RegistryError(500, 50001, "Error in the backend data store"))
    return run
