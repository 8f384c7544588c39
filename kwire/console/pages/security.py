"""The security pages: the cluster's ACLs, SCRAM users and client quotas.

    /security               -> /security/acls
    /security/acls          list (filtered by resource type, name, pattern type, principal); create
    /security/acls/delete   GET: confirm one binding; POST: delete exactly that binding
    /security/users         SCRAM credentials: list; create or update (user, mechanism, password, iterations)
    /security/users/delete  GET: confirm; POST: delete one user's credential for one mechanism
    /security/quotas        client quotas (user, client id and IP entities): list; set one
    /security/quotas/delete GET: confirm; POST: remove one quota of one entity

They work as ``kwire acls``, ``kwire users`` and ``kwire quotas`` do (their functions, with the
console's admin client), so against any Kafka cluster.  A cluster without an authorizer
(SECURITY_DISABLED) or a console principal that may not describe (CLUSTER_AUTHORIZATION_FAILED)
gets a note saying so, not an error page, and no write controls.  A write is checked by
``console.write_form`` (read-only mode, CSRF), audited with its outcome (never a password),
and answered with the page and a line saying what happened; that page waits a moment
(``SETTLE_S``) for the cluster to show the change, as a write through one broker reaches the
others shortly after.
"""
from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Mapping

import anyio
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from kwire.codecs.errors import ErrorCode
from kwire.console.app import WriteRefused
from kwire.security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS
from kwire.tools import acls as acl_tool
from kwire.tools import quotas as quota_tool
from kwire.tools import users as user_tool
from kwire.tools.common import UsageError

NAV = [("Security", "/security")]
TABS = [("ACLs", "/security/acls"), ("SCRAM users", "/security/users"), ("Quotas", "/security/quotas")]

RESOURCE_TYPES = list(acl_tool.VALID_OPERATIONS)          # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...
OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"]
PATTERNS = ["LITERAL", "PREFIXED"]
FILTER_PATTERNS = ["ANY", "MATCH", *PATTERNS]
PERMISSIONS = ["ALLOW", "DENY"]
MECHANISMS = list(user_tool.MECHANISMS)
# (entity type on the wire, form field, label); user and client id together name a user's quota
# for one client, ip stands alone (connection_creation_rate)
ENTITY_TYPES = [("user", "user", "User"), ("client-id", "client_id", "Client id"), ("ip", "ip", "IP")]
QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate"]

SETTLE_S = 3.0          # how long a page answering a write waits for the cluster to show it


class BadInput(ValueError):
    """A form or filter value the console refuses before asking the cluster (answered 400)."""


def refusal_note(exc: BaseException, what: str) -> str | None:
    """A readable note for a cluster that cannot, or a principal that may not, ``what``
    (e.g. "describe ACLs"); None for any other failure (shown as an error)."""
    errno = getattr(exc, "errno", None)
    if errno == ErrorCode.SECURITY_DISABLED:
        return ("This cluster has no authorizer (SECURITY_DISABLED): it keeps no ACLs and lets every "
                "client do anything its listener allows. Set authorizer.class.name on the brokers to use ACLs.")
    if errno == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return (f"The console's principal may not {what} (CLUSTER_AUTHORIZATION_FAILED). Give it the "
                "cluster permissions, or start the console with --command-config as a principal that has them.")
    return None


# -- ACLs ---------------------------------------------------------------------------------------
def _choice(value: Any, choices: list[str], what: str, default: str | None = None) -> str:
    """The one of ``choices`` that ``value`` names (case, ``-`` and ``_`` aside; blank: ``default``)."""
    def norm(text: str) -> str:
        return text.strip().upper().replace("-", "_")
    wanted = norm(str(value or "")) or norm(default or "")
    for choice in choices:
        if norm(choice) == wanted:
            return choice
    raise BadInput(f"{what} {value!r} is not one of {', '.join(choices)}")


def _principal(value: Any) -> str:
    try:
        return acl_tool.principals([str(value)])[0]
    except UsageError as exc:
        raise BadInput(str(exc)) from None


def acl_filter(params: Mapping[str, Any]) -> acl_tool.Acl:
    """The DescribeAcls filter of the list's query (blank: any).  Raises BadInput."""
    kind = _choice(params.get("resource_type"), ["ANY", *RESOURCE_TYPES], "resource type", "ANY")
    pattern = _choice(params.get("pattern"), FILTER_PATTERNS, "pattern type", "ANY")
    name = str(params.get("name") or "").strip() or None
    principal = str(params.get("principal") or "").strip()
    return acl_tool.Acl(_principal(principal) if principal else None, None, "ANY", "ANY", kind, name, pattern)


def acl_binding(form: Mapping[str, Any]) -> acl_tool.Acl:
    """One concrete ACL binding from a create or delete form.  Raises BadInput."""
    kind = _choice(form.get("resource_type"), RESOURCE_TYPES, "resource type")
    name = acl_tool.CLUSTER_NAME if kind == "CLUSTER" else str(form.get("name") or "").strip()
    if not name:
        raise BadInput("a resource name is needed (* is every resource of the type)")
    operation = _choice(form.get("operation"), OPERATIONS, "operation")
    try:
        acl_tool.check_operations(kind, [operation])
    except UsageError as exc:
        raise BadInput(str(exc)) from None
    return acl_tool.Acl(_principal(form.get("principal", "")), str(form.get("host") or "").strip() or "*",
                        operation, _choice(form.get("permission"), PERMISSIONS, "permission"), kind, name,
                        _choice(form.get("pattern"), PATTERNS, "pattern type", "LITERAL"))


def describe_acl(acl: acl_tool.Acl) -> str:
    return (f"{acl.permission} {acl.principal} from host {acl.host} to {acl.operation} "
            f"{acl.resource_type} {acl.name!r} ({acl.pattern})")


def list_acls(admin, flt: acl_tool.Acl) -> list[acl_tool.Acl]:
    found, _ = admin.describe_acls(acl_tool.to_kafka_python(flt, concrete=False))
    return sorted({acl_tool.from_kafka_python(a) for a in found},
                  key=lambda a: (a.resource_type, a.name or "", a.pattern, a.principal or "", a.host or "",
                                 a.operation, a.permission))


def create_acl(admin, acl: acl_tool.Acl) -> None:
    """Raises the broker's Kafka error of a refused creation."""
    result = admin.create_acls([acl_tool.to_kafka_python(acl, concrete=True)])
    if result["failed"]:
        error = result["failed"][0]
        raise error(error.description)


def delete_acl(admin, acl: acl_tool.Acl) -> int:
    """Deletes exactly ``acl`` (every field given); returns how many bindings went (0 or 1)."""
    [(_, matched, error)] = admin.delete_acls([acl_tool.to_kafka_python(acl, concrete=False)])
    if error.errno:
        raise error(error.description)
    return len(matched)


# -- SCRAM users --------------------------------------------------------------------------------
def list_users(admin) -> tuple[list[dict], list[str]]:
    """([{user, mechanism, iterations}], per-user errors) of every SCRAM user."""
    rows, errors = [], []
    for user, described in sorted(admin.describe_user_scram_credentials(None).items()):
        if described["error"] is not None:
            errors.append(f"{user}: {described['error']}")
        rows += [{"user": user, "mechanism": mechanism, "iterations": iterations,
                  "query": urllib.parse.urlencode({"user": user, "mechanism": mechanism})}
                 for mechanism, iterations in user_tool.credentials(described)]
    return rows, errors


def alter_scram(admin, alteration) -> None:
    """AlterUserScramCredentials of one upsertion or deletion (kafka-python's objects).
    Raises the broker's Kafka error (kafka-python's own method keeps only its message)."""
    import kafka.errors as Errors
    from kafka.admin import UserScramCredentialUpsertion
    from kafka.protocol.admin import AlterUserScramCredentialsRequest
    a = alteration
    if isinstance(a, UserScramCredentialUpsertion):
        request = AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[(a.user, int(a.mechanism), a.iterations, a.salt, a.salted_password)])
    else:
        request = AlterUserScramCredentialsRequest(deletions=[(a.user, int(a.mechanism))], upsertions=[])
    for result in quota_tool.send(admin, request).results:
        if result.error_code:
            raise Errors.for_code(result.error_code)(result.error_message)


# -- quotas -------------------------------------------------------------------------------------
@dataclass
class QuotaRow:
    entity: list[tuple[str, str | None]]
    key: str
    value: float

    def cell(self, entity_type: str) -> tuple[str, str] | None:
        """(text, css class) of one entity type's column; None when the entity has none."""
        for t, n in self.entity:
            if t == entity_type:
                return ("default", "muted") if n is None else (n, "")
        return None

    @property
    def shown_value(self) -> float | int:
        return _plain(self.value)

    @property
    def query(self) -> str:
        return urllib.parse.urlencode(entity_params(self.entity) + [("key", self.key)])

    @property
    def who(self) -> str:
        return quota_tool.describe_entity(self.entity)


def entity_params(entity: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    fields = {t: field for t, field, _ in ENTITY_TYPES}
    return [(f"{fields[t]}_default", "1") if n is None else (fields[t], n) for t, n in entity if t in fields]


def quota_entity(form: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """[(entity type, name or None for the default)] of a quota form.  Raises BadInput."""
    entity = []
    for entity_type, field, label in ENTITY_TYPES:
        name = str(form.get(field) or "").strip()
        default = bool(form.get(f"{field}_default"))
        if name and default:
            raise BadInput(f"{label}: give a name or tick the default, not both")
        if name or default:
            entity.append((entity_type, None if default else name))
    if not entity:
        raise BadInput("a quota needs an entity: a user, a client id (or both), or an IP, each a name or the default")
    return entity


def quota_key(value: Any) -> str:
    key = str(value or "").strip()
    if not key:
        raise BadInput("choose the quota to set")
    return key


def list_quotas(admin) -> list[QuotaRow]:
    import kafka.errors as Errors
    code, message, entries = quota_tool.describe_quotas(admin)
    if code:
        raise Errors.for_code(code)(message)
    order = {t: i for i, (t, _, _) in enumerate(ENTITY_TYPES)}
    rows = [QuotaRow(sorted(entity, key=lambda c: order.get(c[0], len(order))), key, value)
            for entity, values in entries for key, value in values.items()]
    return sorted(rows, key=lambda r: ([(order.get(t, len(order)), n is not None, n or "") for t, n in r.entity],
                                       r.key))


def alter_quota(admin, entity, add: dict[str, float], delete: list[str]) -> None:
    import kafka.errors as Errors
    code, message = quota_tool.alter_quotas(admin, entity, add, delete)
    if code:
        raise Errors.for_code(code)(message)


# -- routes -------------------------------------------------------------------------------------
class SecurityPages:
    """The security pages' handlers, sharing the console and the refusals that become notes."""

    def __init__(self, console):
        from kafka.errors import KafkaError
        self.console = console
        self.failures = (KafkaError, OSError)


    def render(self, request: Request, template: str, status: int = 200, **context: Any):
        return self.console.render(request, template, status_code=status, tabs=TABS, **context)

    def confirm(self, request: Request, **context: Any):
        if self.console.read_only:
            raise WriteRefused(403, "The console is read-only: writes are disabled.")
        return self.render(request, "security_confirm.html", **context)

    async def fetch(self, fn, *args, expect=None):
        """``fn(admin, *args)``; after a write, again for a moment until ``expect(result)`` holds:
        a change made through one broker reaches the others shortly after (ZooKeeper), and the
        page answering the write should show it."""
        result = await self.console.access.admin_call(fn, *args)
        deadline = time.monotonic() + SETTLE_S
        while expect is not None and not expect(result) and time.monotonic() < deadline:
            await anyio.sleep(0.2)
            result = await self.console.access.admin_call(fn, *args)
        return result

    def audit_outcome(self, user: str, action: str, target: str, exc: BaseException | None, **details: Any) -> None:
        self.console.audit(user, action, target, **details, outcome="done" if exc is None else self.console.error_text(exc))

    # -- ACLs -----------------------------------------------------------------------------------
    async def acls_page(self, request: Request, *, status: int = 200, flash: str | None = None,
                        error: str | None = None, form: Mapping[str, Any] | None = None, expect=None):
        query = request.query_params if request.method == "GET" else {}
        shown = {"resource_type": query.get("resource_type", "ANY"), "name": query.get("name", ""),
                 "pattern": query.get("pattern", "ANY"), "principal": query.get("principal", "")}
        acls, note = [], None
        try:
            acls = await self.fetch(list_acls, acl_filter(shown), expect=expect)
        except BadInput as exc:
            error, status = str(exc), 400
        except self.failures as exc:
            note = refusal_note(exc, "describe ACLs")
            if note is None:
                error, status = error or self.console.error_text(exc), max(status, 502)
        filtered = any(shown[k] not in ("", "ANY") for k in shown)
        rows = [(a, urllib.parse.urlencode(a.document())) for a in acls]
        return self.render(request, "security_acls.html", status=status, acls=rows, note=note, error=error, flash=flash,
                      filter=shown, filtered=filtered, values=dict(form or {}), resource_types=RESOURCE_TYPES,
                      operations=OPERATIONS, patterns=PATTERNS, filter_patterns=FILTER_PATTERNS,
                      permissions=PERMISSIONS)

    async def acls(self, request: Request):
        if request.method == "GET":
            return await self.acls_page(request)
        user, form = await self.console.write_form(request)
        try:
            acl = acl_binding(form)
        except BadInput as exc:
            return await self.acls_page(request, status=400, error=str(exc), form=form)
        try:
            await self.console.access.admin_call(create_acl, acl)
        except self.failures as exc:
            self.audit_outcome(user, "acl-create", f"{acl.resource_type}:{acl.name}", exc, **_acl_details(acl))
            return await self.acls_page(request, status=502, error=f"The ACL was not created: {self.console.error_text(exc)}",
                                   form=form)
        self.audit_outcome(user, "acl-create", f"{acl.resource_type}:{acl.name}", None, **_acl_details(acl))
        return await self.acls_page(request, flash=f"Created the ACL: {describe_acl(acl)}.",
                               expect=lambda found: acl in found)

    async def acl_delete(self, request: Request):
        if request.method == "GET":
            try:
                acl = acl_binding(request.query_params)
            except BadInput as exc:
                return await self.acls_page(request, status=400, error=str(exc))
            return self.confirm(request, title="Delete an ACL", question="Delete this ACL binding?",
                           details=_acl_rows(acl), action="/security/acls/delete",
                           hidden=list(acl.document().items()), button="Delete the ACL", back="/security/acls")
        user, form = await self.console.write_form(request)
        try:
            acl = acl_binding(form)
        except BadInput as exc:
            return await self.acls_page(request, status=400, error=str(exc))
        try:
            deleted = await self.console.access.admin_call(delete_acl, acl)
        except self.failures as exc:
            self.audit_outcome(user, "acl-delete", f"{acl.resource_type}:{acl.name}", exc, **_acl_details(acl))
            return await self.acls_page(request, status=502, error=f"The ACL was not deleted: {self.console.error_text(exc)}")
        self.audit_outcome(user, "acl-delete", f"{acl.resource_type}:{acl.name}", None, deleted=deleted,
                      **_acl_details(acl))
        if not deleted:
            return await self.acls_page(request, status=404, error=f"No such ACL (deleted already?): {describe_acl(acl)}.")
        return await self.acls_page(request, flash=f"Deleted the ACL: {describe_acl(acl)}.",
                               expect=lambda found: acl not in found)

    # -- SCRAM users ----------------------------------------------------------------------------
    async def users_page(self, request: Request, *, status: int = 200, flash: str | None = None,
                         error: str | None = None, form: Mapping[str, Any] | None = None, expect=None):
        rows, user_errors, note = [], [], None
        try:
            rows, user_errors = await self.fetch(list_users, expect=expect and (lambda found: expect(found[0])))
        except self.failures as exc:
            note = refusal_note(exc, "describe SCRAM users")
            if note is None:
                error, status = error or self.console.error_text(exc), max(status, 502)
        values = {k: v for k, v in (form or {}).items() if k != "password"}       # never echoed
        return self.render(request, "security_users.html", status=status, users=rows, user_errors=user_errors,
                      note=note, error=error, flash=flash, values=values, mechanisms=MECHANISMS,
                      iterations=(MIN_ITERATIONS, DEFAULT_ITERATIONS, MAX_ITERATIONS))

    async def users(self, request: Request):
        if request.method == "GET":
            return await self.users_page(request)
        from kafka.admin import UserScramCredentialUpsertion
        user, form = await self.console.write_form(request)
        try:
            name, mechanism = _scram_user(form)
            password = str(form.get("password") or "")
            if not password:
                raise BadInput("a password is needed")
            text = str(form.get("iterations") or "").strip() or str(DEFAULT_ITERATIONS)
            if not text.isdigit():
                raise BadInput(f"iterations {text!r} is not a whole number")
            iterations = int(text)
        except BadInput as exc:
            return await self.users_page(request, status=400, error=str(exc), form=form)
        try:
            upsertion = UserScramCredentialUpsertion(name, mechanism, password, iterations=iterations)
            await self.console.access.admin_call(alter_scram, upsertion)
        except self.failures as exc:
            self.audit_outcome(user, "scram-set", name, exc, mechanism=mechanism, iterations=iterations)
            return await self.users_page(request, status=502, form=form,
                                    error=f"The credential of {name} was not set: {self.console.error_text(exc)}")
        self.audit_outcome(user, "scram-set", name, None, mechanism=mechanism, iterations=iterations)
        return await self.users_page(request, flash=f"Set the {mechanism} credential of {name} ({iterations} iterations).",
                                expect=lambda rows: {"user": name, "mechanism": mechanism, "iterations": iterations}
                                in [{k: r[k] for k in ("user", "mechanism", "iterations")} for r in rows])

    async def user_delete(self, request: Request):
        if request.method == "GET":
            try:
                name, mechanism = _scram_user(request.query_params)
            except BadInput as exc:
                return await self.users_page(request, status=400, error=str(exc))
            return self.confirm(request, title="Delete a SCRAM credential",
                           question=f"Delete the {mechanism} credential of {name}? Clients logging in as {name} "
                                    f"with {mechanism} will be refused.",
                           details=[("User", name), ("Mechanism", mechanism)], action="/security/users/delete",
                           hidden=[("user", name), ("mechanism", mechanism)], button="Delete the credential",
                           back="/security/users")
        from kafka.admin import UserScramCredentialDeletion
        user, form = await self.console.write_form(request)
        try:
            name, mechanism = _scram_user(form)
        except BadInput as exc:
            return await self.users_page(request, status=400, error=str(exc))
        try:
            await self.console.access.admin_call(alter_scram, UserScramCredentialDeletion(name, mechanism))
        except self.failures as exc:
            self.audit_outcome(user, "scram-delete", name, exc, mechanism=mechanism)
            return await self.users_page(request, status=502,
                                    error=f"The credential of {name} was not deleted: {self.console.error_text(exc)}")
        self.audit_outcome(user, "scram-delete", name, None, mechanism=mechanism)
        return await self.users_page(request, flash=f"Deleted the {mechanism} credential of {name}.",
                                expect=lambda rows: not any((r["user"], r["mechanism"]) == (name, mechanism)
                                                            for r in rows))

    # -- quotas ---------------------------------------------------------------------------------
    async def quotas_page(self, request: Request, *, status: int = 200, flash: str | None = None,
                          error: str | None = None, form: Mapping[str, Any] | None = None, expect=None):
        rows, note = [], None
        try:
            rows = await self.fetch(list_quotas, expect=expect)
        except self.failures as exc:
            note = refusal_note(exc, "describe client quotas")
            if note is None:
                error, status = error or self.console.error_text(exc), max(status, 502)
        return self.render(request, "security_quotas.html", status=status, quotas=rows, note=note, error=error,
                      flash=flash, values=dict(form or {}), entity_types=ENTITY_TYPES, quota_keys=QUOTA_KEYS)

    async def quotas(self, request: Request):
        if request.method == "GET":
            return await self.quotas_page(request)
        user, form = await self.console.write_form(request)
        try:
            entity, key = quota_entity(form), quota_key(form.get("key"))
            text = str(form.get("value") or "").strip()
            try:
                value = float(text)
            except ValueError:
                raise BadInput(f"the value {text!r} is not a number") from None
        except BadInput as exc:
            return await self.quotas_page(request, status=400, error=str(exc), form=form)
        who = quota_tool.describe_entity(entity)
        try:
            await self.console.access.admin_call(alter_quota, entity, {key: value}, [])
        except self.failures as exc:
            self.audit_outcome(user, "quota-set", who, exc, key=key, value=value)
            return await self.quotas_page(request, status=502, form=form,
                                     error=f"The quota was not set: {self.console.error_text(exc)}")
        self.audit_outcome(user, "quota-set", who, None, key=key, value=value)
        return await self.quotas_page(request, flash=f"Set {key}={_plain(value)} for {who}.",
                                 expect=lambda rows: any((r.entity, r.key, r.value) == (entity, key, value)
                                                         for r in rows))

    async def quota_delete(self, request: Request):
        params = request.query_params if request.method == "GET" else None
        if params is not None:
            try:
                entity, key = quota_entity(params), quota_key(params.get("key"))
            except BadInput as exc:
                return await self.quotas_page(request, status=400, error=str(exc))
            who = quota_tool.describe_entity(entity)
            return self.confirm(request, title="Remove a quota", question=f"Remove the {key} quota of {who}?",
                           details=[("Entity", who), ("Quota", key)], action="/security/quotas/delete",
                           hidden=entity_params(entity) + [("key", key)], button="Remove the quota",
                           back="/security/quotas")
        user, form = await self.console.write_form(request)
        try:
            entity, key = quota_entity(form), quota_key(form.get("key"))
        except BadInput as exc:
            return await self.quotas_page(request, status=400, error=str(exc))
        who = quota_tool.describe_entity(entity)
        try:
            await self.console.access.admin_call(alter_quota, entity, {}, [key])
        except self.failures as exc:
            self.audit_outcome(user, "quota-remove", who, exc, key=key)
            return await self.quotas_page(request, status=502, error=f"The quota was not removed: {self.console.error_text(exc)}")
        self.audit_outcome(user, "quota-remove", who, None, key=key)
        return await self.quotas_page(request, flash=f"Removed the {key} quota of {who}.",
                                 expect=lambda rows: not any((r.entity, r.key) == (entity, key) for r in rows))

    async def index(self, request: Request):
        return RedirectResponse("/security/acls", status_code=303)

    def routes(self) -> list:
        both = ["GET", "POST"]
        return [Route("/security", self.index),
                Route("/security/acls", self.acls, methods=both),
                Route("/security/acls/delete", self.acl_delete, methods=both),
                Route("/security/users", self.users, methods=both),
                Route("/security/users/delete", self.user_delete, methods=both),
                Route("/security/quotas", self.quotas, methods=both),
                Route("/security/quotas/delete", self.quota_delete, methods=both)]



def routes(console) -> list:
    return SecurityPages(console).routes()

def _acl_details(acl: acl_tool.Acl) -> dict[str, str | None]:
    return {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
            "permission": acl.permission, "pattern": acl.pattern}


def _acl_rows(acl: acl_tool.Acl) -> list[tuple[str, str | None]]:
    return [("Principal", acl.principal), ("Host", acl.host), ("Operation", acl.operation),
            ("Permission", acl.permission), ("Resource type", acl.resource_type), ("Resource name", acl.name),
            ("Pattern type", acl.pattern)]


def _plain(value: float) -> float | int:
    """A quota value as written: 1048576, not 1048576.0 (nor 1.04858e+06)."""
    return int(value) if float(value).is_integer() else value


def _scram_user(form: Mapping[str, Any]) -> tuple[str, str]:
    name = str(form.get("user") or "").strip()
    if not name:
        raise BadInput("a user name is needed")
    return name, _choice(form.get("mechanism"), MECHANISMS, "mechanism", "SCRAM-SHA-256")
