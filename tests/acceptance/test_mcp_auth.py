"""/mcp authentication, DNS-rebinding protection, session binding and JSON-RPC hygiene,
over raw HTTP and the SDK's own client."""

from __future__ import annotations

import json

import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.acceptance.mcp_helpers import GENERATIONS, auth, call, connect, mcp_server, vend  # noqa: F401 (mcp_server is a fixture)

MODERN = "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def modern_body(method: str, params: dict | None = None, request_id=1) -> dict:
    params = dict(params or {})
    params["_meta"] = {types.PROTOCOL_VERSION_META_KEY: MODERN, types.CLIENT_CAPABILITIES_META_KEY: {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def modern_headers(method: str, name: str | None = None) -> dict:
    h = {**ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    return h


async def post(server, body, headers: dict, token: str | None = None) -> httpx2.Response:
    hdrs = dict(headers)
    if token:
        hdrs.update(auth(token))
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx2.AsyncClient() as http:
        return await http.post(server.url + "/mcp", content=content, headers=hdrs)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}


async def test_a_request_without_a_token_gets_401_with_a_bearer_challenge(mcp_server):
    r = await post(mcp_server, modern_body("tools/list"), modern_headers("tools/list"))
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert set(r.json()) == {"error", "error_description"}
    r = await post(mcp_server, INITIALIZE, ACCEPT, token="")
    assert r.status_code == 401


async def test_an_unknown_and_a_revoked_token_get_byte_identical_401s(mcp_server):
    store = mcp_server.store
    ep = await vend(store)
    ok = await post(mcp_server, modern_body("tools/list"), modern_headers("tools/list"), ep.token)
    assert ok.status_code == 200
    await store.endpoint_revoke(ep.endpoint_id)
    revoked = await post(mcp_server, modern_body("tools/list"), modern_headers("tools/list"), ep.token)
    unknown = await post(mcp_server, modern_body("tools/list"), modern_headers("tools/list"), "sb_" + "x" * 43)
    assert revoked.status_code == unknown.status_code == 401
    assert revoked.content == unknown.content
    assert revoked.headers["www-authenticate"] == unknown.headers["www-authenticate"]
    assert 'error="invalid_token"' in unknown.headers["www-authenticate"]
    assert ep.token not in revoked.text


def mcp_errors(exc: BaseException) -> list[MCPError]:
    """The MCPErrors inside (possibly nested) exception groups."""
    if isinstance(exc, MCPError):
        return [exc]
    if isinstance(exc, BaseExceptionGroup):
        return [e for sub in exc.exceptions for e in mcp_errors(sub)]
    return []


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_sdk_client_cannot_connect_with_a_bad_token(mcp_server, generation):
    with pytest.raises(BaseException) as caught:
        async with connect(mcp_server, "sb_not-a-token", generation) as client:
            await client.list_tools()
    assert mcp_errors(caught.value), repr(caught.value)


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_revoked_endpoint_is_refused_on_its_next_call(mcp_server, generation):
    store = mcp_server.store
    ep = await vend(store)
    added = []
    with pytest.raises(BaseException) as caught:
        async with connect(mcp_server, ep.token, generation) as client:
            added.append(await call(client, "add_todo", {"queue": "q", "title": "before"}))
            await store.endpoint_revoke(ep.endpoint_id)
            await client.call_tool("list_todos", {})
    assert added and mcp_errors(caught.value), repr(caught.value)


async def test_a_forged_host_or_origin_is_refused_before_authentication(mcp_server):
    ep = await vend(mcp_server.store)
    hdrs = modern_headers("tools/list")
    r = await post(mcp_server, modern_body("tools/list"), {**hdrs, "Host": "evil.example:80"}, ep.token)
    assert r.status_code == 421
    r = await post(mcp_server, modern_body("tools/list"), {**hdrs, "Host": "evil.example:80"})
    assert r.status_code == 421  # no token lookup for a rebinding attempt
    r = await post(mcp_server, modern_body("tools/list"), {**hdrs, "Origin": "http://evil.example"}, ep.token)
    assert r.status_code == 403
    port = mcp_server.url.rsplit(":", 1)[1]
    r = await post(mcp_server, modern_body("tools/list"), {**hdrs, "Origin": f"http://127.0.0.1:{port}"}, ep.token)
    assert r.status_code == 200


async def test_allowed_hosts_are_configurable(server_settings):
    from tests.conftest import run_server

    async with run_server(server_settings.with_(allowed_hosts=("switchboard.test:*",))) as server:
        ep = await vend(server.store)
        port = server.url.rsplit(":", 1)[1]
        hdrs = modern_headers("tools/list")
        r = await post(server, modern_body("tools/list"), hdrs, ep.token)  # Host: 127.0.0.1:port
        assert r.status_code == 421
        r = await post(server, modern_body("tools/list"), {**hdrs, "Host": f"switchboard.test:{port}"}, ep.token)
        assert r.status_code == 200


async def test_another_endpoint_cannot_use_a_session_it_did_not_open(mcp_server):
    store = mcp_server.store
    a = await vend(store)
    b = await vend(store, user_id=a.user_id, agent_id="b")
    r = await post(mcp_server, INITIALIZE, ACCEPT, a.token)
    assert r.status_code == 200
    session_id = r.headers["mcp-session-id"]
    hdrs = {**ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    await post(mcp_server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, hdrs, a.token)
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert (await post(mcp_server, listing, hdrs, a.token)).status_code == 200
    stolen = await post(mcp_server, listing, hdrs, b.token)
    assert stolen.status_code == 404


MALFORMED = [
    b"{not json",
    b"[]",
    b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
    b'{"jsonrpc":"2.0"}',
    b'{"jsonrpc":"2.0","id":1,"method":42}',
    b'"just a string"',
]


@pytest.mark.parametrize("body", MALFORMED)
@pytest.mark.parametrize("generation", GENERATIONS)
async def test_malformed_json_rpc_gets_a_json_rpc_error_never_a_500(mcp_server, generation, body):
    ep = await vend(mcp_server.store)
    hdrs = modern_headers("tools/list") if generation == "modern" else ACCEPT
    r = await post(mcp_server, body, hdrs, ep.token)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    reply = r.json()
    assert reply["jsonrpc"] == "2.0" and "error" in reply and isinstance(reply["error"]["code"], int)


async def test_malformed_tool_call_params_get_a_json_rpc_error(mcp_server):
    ep = await vend(mcp_server.store)
    body = modern_body("tools/call", {"name": "claim", "arguments": "not an object"})
    r = await post(mcp_server, body, modern_headers("tools/call", "claim"), ep.token)
    assert r.status_code == 400 and r.json()["error"]["code"] == types.INVALID_PARAMS
    body = modern_body("tools/call", {"name": "no_such_tool", "arguments": {}})
    r = await post(mcp_server, body, modern_headers("tools/call", "no_such_tool"), ep.token)
    assert r.json()["error"]["code"] == types.INVALID_PARAMS
