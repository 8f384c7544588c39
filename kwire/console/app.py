"""The console's Starlette application: pages, login, read-only mode and the audit of writes.

Each page module in ``kwire.console.pages`` has ``NAV`` (its menu entries, ``(label, path)``)
and ``routes(console)`` (its Starlette routes).  A handler renders with
``console.render(request, "page.html", **context)``; a write handler starts with
``user, form = await console.write_form(request)`` (login, read-only and CSRF checked there)
and reports with ``console.audit(user, action, target, ...)``.

Errors never show a traceback: a broker's refusal is shown with its Kafka error name
(``access.error_text``), anything unexpected as a short message (and logged).
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kwire.console.access import KafkaAccess, error_text
from kwire.console.auth import ANONYMOUS, SESSION_COOKIE, SESSION_TTL_S, Auth, audit, read_users_file
from kwire.console.sampler import Sampler

logger = logging.getLogger("kwire.console")
HERE = os.path.dirname(os.path.abspath(__file__))

# the page modules, in menu order
PAGES = ["overview", "topics", "messages", "groups", "security"]


@dataclass
class ConsoleSettings:
    """What ``kwire console`` (or ``console.listener`` in ``kwire serve``) was given."""
    client_config: dict[str, Any]                 # kafka-python keywords: bootstrap_servers, security
    read_only: bool = False
    users_file: str | None = None
    registry_url: str | None = None               # a Schema Registry, for decoding Avro/Protobuf/JSON
    metrics_urls: list[str] = field(default_factory=list)   # kwire /metrics endpoints, for rates
    sample_interval_s: float = 5.0                # lag and offsets sampling (history, rates)
    title: str = "kwire console"


class WriteRefused(HTTPException):
    """A write the console itself refuses (read-only mode, a bad CSRF token)."""


class Console:
    """What every page handler uses: clients, templates, the sampler and the user's rights."""

    def __init__(self, settings: ConsoleSettings):
        self.settings = settings
        self.access = KafkaAccess(settings.client_config)
        users = read_users_file(settings.users_file) if settings.users_file else None
        self.auth = Auth(users, read_only=settings.read_only)
        self.templates = Jinja2Templates(directory=os.path.join(HERE, "templates"))
        self.templates.env.globals["console_title"] = settings.title
        self.templates.env.filters["number"] = _number
        self.templates.env.filters["bytes"] = _bytes
        self.templates.env.filters["clock"] = _clock
        # the sampler has clients of its own: a slow sample (a broker down) does not hold up pages
        self.sampler = Sampler(KafkaAccess(settings.client_config), settings.sample_interval_s, settings.metrics_urls)
        self.nav: list[tuple[str, str]] = []

    # -- who -------------------------------------------------------------------------------
    def user(self, request: Request) -> str:
        return request.scope.get("console_user") or ANONYMOUS

    @property
    def read_only(self) -> bool:
        return self.auth.read_only

    # -- pages -----------------------------------------------------------------------------
    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        user = self.user(request)
        context.update(request=request, user=user, read_only=self.read_only, nav=self.nav,
                       login_required=self.auth.login_required, csrf=self.auth.csrf_token(user),
                       path=request.url.path, registry_url=self.settings.registry_url)
        return self.templates.TemplateResponse(request, template, context, status_code=status_code)

    def error_page(self, request: Request, message: str, status_code: int = 502) -> HTMLResponse:
        return self.render(request, "error.html", status_code=status_code, message=message)

    # -- writes ----------------------------------------------------------------------------
    async def write_form(self, request: Request) -> tuple[str, Any]:
        """(user, form) of a write request.  Raises WriteRefused (403) in read-only mode or
        without the session's CSRF token."""
        user = self.user(request)
        if self.read_only:
            raise WriteRefused(403, "The console is read-only: writes are disabled.")
        form = await request.form()
        token = request.headers.get("x-csrf-token") or form.get("csrf")
        if not self.auth.check_csrf(user, token):
            raise WriteRefused(403, "The form has expired or did not come from this console: reload the page.")
        return user, form

    def audit(self, user: str, action: str, target: str, **details: Any) -> None:
        audit(user, action, target, **details)

    @staticmethod
    def error_text(exc: BaseException) -> str:
        return error_text(exc)


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console as an ASGI application (served by ``kwire.console.server``)."""
    console = Console(settings)
    async def healthz(request: Request) -> Response:
        """200 once a sample of the cluster was taken without error, else 503 (for scripts)."""
        sample = console.sampler.latest
        ok = bool(sample.at) and sample.error is None
        return Response("ok" if ok else (sample.error or "no sample yet"), status_code=200 if ok else 503,
                        media_type="text/plain")

    routes: list = [Route("/healthz", healthz),
                    Route("/login", _login_page(console), methods=["GET", "POST"]),
                    Route("/logout", _logout(console), methods=["POST"]),
                    Mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static")]
    for name in PAGES:
        module = importlib.import_module(f"kwire.console.pages.{name}")
        console.nav.extend(module.NAV)
        routes.extend(module.routes(console))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        console.sampler.start()
        try:
            yield
        finally:
            console.sampler.stop()
            await console.access.run(console.access.close)
            await console.access.run(console.sampler.access.close)

    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            return console.error_page(request, "No such page.", 404)
        return console.error_page(request, str(exc.detail), exc.status_code)

    async def unexpected(request: Request, exc: Exception) -> Response:
        logger.exception("console page %s failed", request.url.path)
        return console.error_page(request, f"The console failed: {error_text(exc)}", 500)

    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(_SessionMiddleware, console=console)],
                    exception_handlers={HTTPException: http_error, Exception: unexpected})
    app.state.console = console
    return app


class _SessionMiddleware:
    """Puts the session's user in ``scope["console_user"]``; without a valid session (when
    login is required) a page redirects to /login and an htmx request gets 401."""

    def __init__(self, app, console: Console):
        self.app, self.console = app, console

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        path = scope["path"]
        user = self.console.auth.session_user(request.cookies.get(SESSION_COOKIE))
        if not self.console.auth.login_required:
            user = user or ANONYMOUS
        if user is None and not path.startswith(("/login", "/static/", "/healthz")):
            if request.headers.get("hx-request"):
                response: Response = Response("login required", status_code=401, headers={"HX-Redirect": "/login"})
            else:
                target = path + (f"?{scope['query_string'].decode()}" if scope.get("query_string") else "")
                response = RedirectResponse("/login?next=" + urllib.parse.quote(target), status_code=303)
            return await response(scope, receive, send)
        scope["console_user"] = user
        return await self.app(scope, receive, send)


def _login_page(console: Console):
    async def login(request: Request) -> Response:
        target = request.query_params.get("next", "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"
        if not console.auth.login_required:
            return RedirectResponse(target, status_code=303)
        if request.method == "GET":
            return console.render(request, "login.html", next=target, failed=False)
        form = await request.form()
        name, password = str(form.get("username", "")), str(form.get("password", ""))
        ok = await console.access.run(console.auth.check_password, name, password)
        logger.info("console login %s for %r", "accepted" if ok else "refused", name)
        if not ok:
            return console.render(request, "login.html", status_code=401, next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, console.auth.session_cookie(name), max_age=SESSION_TTL_S,
                            httponly=True, samesite="strict")
        return response
    return login


def _logout(console: Console):
    async def logout(request: Request) -> Response:
        form = await request.form()
        user = console.user(request)
        if not console.auth.check_csrf(user, request.headers.get("x-csrf-token") or form.get("csrf")):
            raise WriteRefused(403, "The form has expired: reload the page.")
        console.auth.revoke(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login" if console.auth.login_required else "/", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response
    return logout


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _bytes(value: Any) -> str:
    if value is None:
        return "–"
    n = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(value)


def _clock(seconds: Any) -> str:
    """A time.time() (or epoch milliseconds, when large) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    import datetime as dt
    if not seconds:
        return "–"
    value = float(seconds)
    if value > 1e11:
        value /= 1000.0
    return dt.datetime.fromtimestamp(value, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
