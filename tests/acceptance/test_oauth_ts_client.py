"""The official TypeScript MCP SDK's OAuth client (what agent hosts built on it run) against
Switchboard: from /mcp's 401 it discovers the metadata, registers, and sends the person to the
consent screen; with the code it gets tokens, works with what was approved, refreshes when its
access token is refused, and after the person disconnects it is refused for good."""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from board.store.vocabulary import WORKER_SCOPE
from tests.acceptance.mcp_helpers import call, connect, vend
from tests.acceptance.oauth_helpers import REDIRECT, approve, consent_form, query_of
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.acceptance.third_party import CLIENTS, DRIVER, Threw, TsClient, node, ok
from tests.conftest import sql_rows


@contextlib.asynccontextmanager
async def ts_process():
    proc = await asyncio.create_subprocess_exec(
        node(), str(DRIVER), cwd=CLIENTS, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, limit=1 << 22)
    client = TsClient(proc)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.request("close"), timeout=10)
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_the_typescript_sdk_client_signs_in_through_the_consent_screen_refreshes_and_is_refused_after_revocation(
        live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as board, ts_process() as ts:
        await sign_in(board, "ada")
        started = await ts.request("connectOAuth", url=live_server.url + "/mcp", redirectUrl=REDIRECT)
        url = started["authorizationUrl"]
        assert url and url.startswith(live_server.url + "/oauth/authorize?")
        assert query_of(url)["resource"].rstrip("/") == live_server.url + "/mcp"
        assert query_of(url)["code_challenge_method"] == "S256"
        assert query_of(url)["scope"] == " ".join(WORKER_SCOPE)  # what /mcp's 401 named
        r = await board.get(url)
        assert r.status_code == 302
        done = await approve(board, r.headers["location"], verbs=["add_todo", "claim", "get_todo", "complete"],
                             queues="ts", agent_id="ts-host")
        assert done.status_code == 303
        await ts.request("finishAuth", code=query_of(done.headers["location"])["code"])
        tools = {t["name"] for t in (await ts.request("listTools"))["tools"]}
        assert tools == {"add_todo", "add_todos", "claim", "get_todo", "complete", "complete_todos"}
        todo = ok(await ts.call_tool("add_todo", {"queue": "ts", "title": "From a TypeScript host"}))
        held = ok(await ts.call_tool("claim", {"id": todo["id"], "require_fence": True, "claimant": "ts-host/1"}))
        first = await ts.request("tokens")

        # The access token is refused (expired); the SDK refreshes and retries by itself.
        await sql_rows(live_server.settings.database_url,
                       "UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'access' "
                       "RETURNING 1")
        live_server.app.state.mcp.endpoints._entries.clear()
        closed = ok(await ts.call_tool("complete", {"id": todo["id"], "lease_token": held["lease_token"],
                                                     "summary": "done from TypeScript"}))
        assert closed["state"] == "done"
        second = await ts.request("tokens")
        assert second["refresh_token"] != first["refresh_token"] and second["access_token"] != first["access_token"]

        [grant] = await sql_rows(live_server.settings.database_url,
                                 "SELECT id::text FROM endpoints WHERE kind = 'oauth' AND client_name = 'TS Host'")
        page = await board.get(f"/endpoints/{grant['id']}/revoke")
        assert (await board.post(f"/endpoints/{grant['id']}/revoke",
                                 data={"csrf_token": csrf_of(page.text)})).status_code == 303
    async with httpx.AsyncClient(base_url=live_server.url) as c:
        r = await c.post("/mcp", headers={"Authorization": f"Bearer {second['access_token']}"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert r.status_code == 401
        r = await c.post("/oauth/token", data={"grant_type": "refresh_token", "client_id": query_of(url)["client_id"],
                                               "refresh_token": second["refresh_token"]})
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


async def test_the_typescript_sdk_client_registered_on_one_loopback_port_signs_in_again_listening_on_another(
        live_server):
    """The host keeps its registration and listens on a new port: the redirect matches
    whatever its port (RFC 8252 section 7.3), and the code goes to the new one."""
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as board:
        await sign_in(board, "ada")
        async with ts_process() as ts:
            await ts.request("connectOAuth", url=live_server.url + "/mcp", redirectUrl="http://127.0.0.1:41001/callback")
            registered = await ts.request("clientInformation")
        assert registered["redirect_uris"] == ["http://127.0.0.1:41001/callback"]
        async with ts_process() as ts:
            started = await ts.request("connectOAuth", url=live_server.url + "/mcp",
                                       redirectUrl="http://127.0.0.1:52002/callback", clientInformation=registered)
            url = started["authorizationUrl"]
            assert query_of(url)["client_id"] == registered["client_id"]
            assert query_of(url)["redirect_uri"] == "http://127.0.0.1:52002/callback"
            r = await board.get(url)
            assert r.status_code == 302, r.text
            done = await approve(board, r.headers["location"], verbs=["add_todo", "get_todo"], queues="ts")
            assert done.status_code == 303
            assert done.headers["location"].startswith("http://127.0.0.1:52002/callback?")
            await ts.request("finishAuth", code=query_of(done.headers["location"])["code"])
            ok(await ts.call_tool("add_todo", {"queue": "ts", "title": "From a new port"}))
    clients = await sql_rows(live_server.settings.database_url, "SELECT client_id FROM oauth_clients")
    assert [c["client_id"] for c in clients] == [registered["client_id"]]


async def test_a_second_consent_by_the_same_typescript_sdk_client_updates_its_grant_which_keeps_its_todo(live_server):
    await make_human(live_server.store, "ada")

    async def sign_in_with(ts, board, **kw) -> tuple[str, str]:
        url = (await ts.request("connectOAuth", url=live_server.url + "/mcp", redirectUrl=REDIRECT, **kw))["authorizationUrl"]
        consent = (await board.get(url)).headers["location"]
        page, _ = await consent_form(board, consent)
        done = await approve(board, consent, verbs=["add_todo", "get_todo"], queues="ts", agent_id="ts-host")
        await ts.request("finishAuth", code=query_of(done.headers["location"])["code"])
        return query_of(url)["client_id"], " ".join(page.split())

    async with client_for(live_server) as board, ts_process() as ts:
        await sign_in(board, "ada")
        first_client, first_page = await sign_in_with(ts, board)
        assert "is connected already" not in first_page
        todo = ok(await ts.call_tool("add_todo", {"queue": "ts", "title": "Seen by the next sign-in"}))
        second_client, second_page = await sign_in_with(ts, board, keepClient=True)
        assert second_client == first_client and "TS Host is connected already" in second_page
        assert ok(await ts.call_tool("get_todo", {"id": todo["id"]}))["id"] == todo["id"]
    rows = await sql_rows(live_server.settings.database_url,
                          "SELECT revoked_at FROM endpoints WHERE kind = 'oauth' AND client_name = 'TS Host'")
    assert rows == [{"revoked_at": None}]


async def test_the_typescript_sdk_client_consented_for_a_team_claims_what_the_teams_planner_added(live_server):
    await make_human(live_server.store, "tina")
    team = (await live_server.store.team_create("ts-team", owner="tina"))["id"]
    planner = await vend(live_server.store, user_id=team, agent_id="planner", queues=("ts",))
    mine = await vend(live_server.store, user_id=None, agent_id="planner", queues=("ts",))  # someone else's
    async with connect(live_server, planner.token) as p, connect(live_server, mine.token) as o:
        todo = await call(p, "add_todo", {"queue": "ts", "title": "for the team's pool"})
        await call(o, "add_todo", {"queue": "ts", "title": "not the team's"})
    async with client_for(live_server) as board, ts_process() as ts:
        await sign_in(board, "tina")
        started = await ts.request("connectOAuth", url=live_server.url + "/mcp", redirectUrl=REDIRECT)
        r = await board.get(started["authorizationUrl"])
        done = await approve(board, r.headers["location"], verbs=["list_todos", "claim_next", "complete"],
                             queues="ts", agent_id="ts-host", space=team)
        assert done.status_code == 303
        await ts.request("finishAuth", code=query_of(done.headers["location"])["code"])
        assert [t["id"] for t in ok(await ts.call_tool("list_todos", {}))["todos"]] == [todo["id"]]
        held = ok(await ts.call_tool("claim_next", {"require_fence": True}))
        assert held["todo"]["id"] == todo["id"]
        ok(await ts.call_tool("complete", {"id": todo["id"], "lease_token": held["lease_token"]}))
    [grant] = await sql_rows(live_server.settings.database_url,
                             "SELECT user_id, space_id IS NOT NULL AS team FROM endpoints WHERE kind = 'oauth'")
    assert grant == {"user_id": team, "team": True}
