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


async def test_a_credential_in_a_query_string_is_never_written_to_the_access_log(db_url, tmp_path):
    log_path = tmp_path / "serve.log"
    secrets = {"access_token": "sba_leaked-access-0123", "token": "sbr_leaked-refresh-4567", "code": "sbc_leaked-code",
               "client_secret": "leaked-secret-89ab", "refresh_token": "leaked-refresh-cdef", "api_key": "leaked-key"}
    async with serve_logging(db_url, log_path) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            r = await client.post("/mcp", params={"access_token": secrets["access_token"]}, json={})
            assert r.status_code == 401  # refused: a token goes in the Authorization header only
            r = await client.post("/oauth/token", params={k: v for k, v in secrets.items() if k != "access_token"},
                                  data={"grant_type": "nope"})
            assert r.status_code in (400, 401)
            assert (await client.get("/login", params={"next": "/", "ACCESS_TOKEN": "sba_upper-case-leak"})).status_code == 200
    text = log_path.read_text()
    lines = _access_lines(text)
    assert any('"POST /mcp?access_token=[redacted] HTTP/1.1" 401' in line for line in lines), lines
    assert any('"GET /login?next=%2F&ACCESS_TOKEN=[redacted] HTTP/1.1" 200' in line for line in lines), lines
    for value in [*secrets.values(), "sba_upper-case-leak"]:
        assert value not in text, value


async def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(db_url, tmp_path):
    """Without SWITCHBOARD_TRUSTED_PROXIES a loopback peer cannot pick its rate-limit bucket
    (nor the address the log names) by sending X-Forwarded-For; with the peer trusted, the
    right-most forwarded address that is not a trusted proxy is the client."""
    limit = {"SWITCHBOARD_OAUTH_REGISTRATIONS_PER_MINUTE": "2"}
    body = {"client_name": "Host", "redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}

    untrusted = tmp_path / "untrusted.log"
    async with serve_logging(db_url, untrusted, **limit) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            codes = [(await client.post("/oauth/register", json=body,
                                        headers={"X-Forwarded-For": f"203.0.113.{n}"})).status_code for n in range(3)]
    assert codes == [201, 201, 429]  # one bucket: the peer's own address
    lines = [line for line in _access_lines(untrusted.read_text()) if "/oauth/register" in line]
    assert len(lines) == 3 and all(" 127.0.0.1:" in line and "203.0.113." not in line for line in lines), lines

    trusted = tmp_path / "trusted.log"
    async with serve_logging(db_url, trusted, SWITCHBOARD_TRUSTED_PROXIES="10.0.0.0/8, 127.0.0.1",
                             **limit) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            codes = [(await client.post("/oauth/register", json=body, headers={
                "X-Forwarded-For": f"198.51.100.7, 203.0.113.{n}, 10.1.2.3"})).status_code for n in range(3)]
            again = (await client.post("/oauth/register", json=body,
                                       headers={"X-Forwarded-For": "203.0.113.0"})).status_code
            third = (await client.post("/oauth/register", json=body,
                                       headers={"X-Forwarded-For": "203.0.113.0"})).status_code
    assert codes == [201, 201, 201] and (again, third) == (201, 429)  # a bucket per forwarded client
    lines = [line for line in _access_lines(trusted.read_text()) if "/oauth/register" in line]
    assert sum(" 203.0.113.0:" in line for line in lines) == 3, lines
    assert not any("198.51.100.7" in line or "10.1.2.3" in line or " 127.0.0.1:" in line for line in lines), lines
