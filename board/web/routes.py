"""The Board: server-rendered pages for humans.

This module composes the Board for the app factory: its routes (pages and form posts in
pages, queues, bulk and todo_forms; the SSE stream in events; the vendored static files),
the security headers every response carries, the one Jinja environment (autoescape on,
templating) and the error pages. Sessions, CSRF and the sign-in throttle are in auth; what every
route shares (the signed-in human, filters, redirects) in context.
"""

from __future__ import annotations

import re
from pathlib import Path

from litestar import get
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import Redirect
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send





from board.errors import SwitchboardError
from board.web import activity, agents, bulk, consent, events, pages, queues, schedules, teams, todo_forms
from board.store.store import call_deadline, deadline_after
from board.resources import resource_dir
from board.web.templating import ENV


SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


FORM_ACTION = consent.FORM_ACTION_HEADER.encode()
_ORIGIN = re.compile(rb"https?://[A-Za-z0-9.\-\[\]:]{1,300}")


def security_headers_middleware(app: ASGIApp) -> ASGIApp:
    """Every HTTP response carries the strict CSP and friends (SPEC-0012)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = message.get("headers", [])
                headers = [(k, v) for k, v in raw if k.lower() not in dict(SECURITY_HEADERS)
                           and k.lower() != FORM_ACTION]
                # The consent screen's form ends at the client's redirect URI, which browsers
                # hold to form-action too: that one origin is added for that response only.
                extra = [v for k, v in raw if k.lower() == FORM_ACTION and _ORIGIN.fullmatch(v)]
                security = SECURITY_HEADERS if not extra else [
                    (k, v.replace(b"form-action 'self'", b"form-action 'self' " + extra[0])) for k, v in SECURITY_HEADERS]
                message = {**message, "headers": headers + security}
            await send(message)

        await app(scope, receive, send_with_headers)

    return middleware


def deadline_middleware(app: ASGIApp) -> ASGIApp:
    """A Board page, form post or /metrics read is answered within SWITCHBOARD_DB_WAIT_SECONDS
    while Postgres is away: its session lookup and its statements share one deadline
    (board/store/base.py's call_deadline). /mcp sets its own; /events bounds only its start, as
    its stream outlives any deadline."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith(("/mcp", "/events")):
            await app(scope, receive, send)
            return
        settings = scope["app"].state.get("settings")
        with call_deadline(deadline_after(settings.db_wait_seconds) if settings else None):
            await app(scope, receive, send)

    return middleware


def template_config() -> TemplateConfig:
    # The same environment renders pages and live fragments; autoescape is on in it.
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(ENV))


def _static_guard(directory):
    """Only the files the static directory holds are served; any other path under /static
    (a NUL, a name too long for the file system, a deep path) is a 404 before the file
    system is asked, whose errors for such names would otherwise reach the handler."""
    root = Path(directory)
    files = frozenset(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    def guard(request) -> None:
        if request.scope["path"].removeprefix("/static/") not in files:
            raise NotFoundException()

    return guard


@get("/favicon.ico", include_in_schema=False)
async def favicon() -> Redirect:
    """Browsers and tools that ask for /favicon.ico without reading the page's icon link are
    sent to the Board's one icon."""
    return Redirect("/static/favicon.svg", status_code=301)


def route_handlers() -> list:
    directory = resource_dir("static")
    static = create_static_files_router(path="/static", directories=[directory], name="static",
                                        before_request=_static_guard(directory))
    return [*pages.handlers(), *queues.handlers(), *bulk.handlers(), *todo_forms.handlers(),
            *events.handlers(), *consent.handlers(), *agents.handlers(), *activity.handlers(), *schedules.handlers(),
            *teams.handlers(), favicon, static]


def _with_security_headers(handler):
    """Litestar answers a path or method no route matches (404, 405) before any route's
    middleware runs, so its error responses get the headers here as well."""

    def wrapped(request, exc):
        response = handler(request, exc)
        for key, value in SECURITY_HEADERS:
            response.headers[key.decode()] = value.decode()
        return response

    return wrapped


def exception_handlers() -> dict:
    handlers = {
        pages.SignInRequired: pages.on_sign_in_required,
        SwitchboardError: pages.on_switchboard_error,
        HTTPException: pages.on_http_error,
        500: pages.on_http_error,
    }
    return {key: _with_security_headers(handler) for key, handler in handlers.items()}
