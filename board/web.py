"""The Board: server-rendered pages for humans (SPEC-0013, SPEC-0012).

Skeleton: security headers, templates and error pages. The pages themselves are built in
the Board issue.
"""

from __future__ import annotations

from pathlib import Path

from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

ROOT = Path(__file__).resolve().parent.parent

SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def security_headers_middleware(app: ASGIApp) -> ASGIApp:
    """Every HTTP response carries the strict CSP and friends (SPEC-0012)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(SECURITY_HEADERS)]
                message = {**message, "headers": headers + SECURITY_HEADERS}
            await send(message)

        await app(scope, receive, send_with_headers)

    return middleware


def template_config() -> TemplateConfig:
    return TemplateConfig(directory=ROOT / "templates", engine=JinjaTemplateEngine)


def route_handlers() -> list:
    return []


def exception_handlers() -> dict:
    return {}
