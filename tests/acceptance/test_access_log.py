"""The access log of a real `switchboard serve` names the whole path a client asked for,
mounted apps (/mcp, /oauth/*, /.well-known/*) included: a mounted app sees its path with
the mount's prefix cut off, and the log line must not."""

from __future__ import annotations

import httpx
import pytest

from board.app import ServerScope, create_app

from tests.acceptance.mcp_helpers import GENERATIONS, call, connect, vend
from tests.acceptance.test_mcp_logging import serve_logging


def _access_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if " uvicorn.access " in line]


async def test_the_access_log_names_the_full_path_of_requests_to_mounted_apps(db_url, store, tmp_path):
    ep = await vend(store)
    log_path = tmp_path / "serve.log"
    async with serve_logging(db_url, log_path) as server:
        for generation in GENERATIONS:  # a real MCP client's calls, in both protocol generations
            async with connect(server, ep.token, generation) as mcp:
                await call(mcp, "add_todo", {"queue": "q", "title": "t"})
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            assert (await client.post("/mcp", json={})).status_code == 401  # no bearer token
            assert (await client.post("/oauth/token", data={"grant_type": "nope"})).status_code == 401  # no client
            meta = await client.get("/.well-known/oauth-authorization-server?probe=1")
            assert meta.status_code == 200
            assert (await client.get("/login")).status_code == 200
    lines = _access_lines(log_path.read_text())
    assert any('"POST /mcp HTTP/1.1" 401' in line for line in lines), lines
    assert sum('"POST /mcp HTTP/1.1" 200' in line for line in lines) >= 2, lines
    assert any('"POST /oauth/token HTTP/1.1" 401' in line for line in lines), lines
    assert any('"GET /.well-known/oauth-authorization-server?probe=1 HTTP/1.1" 200' in line for line in lines), lines
    assert any('"GET /login HTTP/1.1" 200' in line for line in lines), lines  # an ordinary route, unchanged
    # No line shows a mount's stripped path.
    assert not any('"POST / HTTP/1.1"' in line or '"POST /token HTTP/1.1"' in line for line in lines), lines


@pytest.mark.parametrize("path", ["/mcp", "/oauth/token", "/.well-known/oauth-authorization-server", "/login"])
async def test_the_request_path_the_server_logs_from_is_left_whole_by_a_mounted_app(settings, path):
    """uvicorn before 0.55 (and other servers) build the access line from the scope's path
    when the response starts: the scope the server holds must still say the full path then."""
    app = ServerScope(create_app(settings))  # no lifespan: the mounts answer 503, enough to route
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}
    logged: list[str] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            method, full_path, status = scope["method"], scope["root_path"] + scope["path"], message["status"]
            logged.append(f'"{method} {full_path}" {status}')

    await app(scope, receive, send)
    assert len(logged) == 1 and logged[0].startswith(f'"POST {path}" '), logged
