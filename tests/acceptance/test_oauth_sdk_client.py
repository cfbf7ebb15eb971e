"""The MCP Python SDK's own OAuth client against Switchboard: it meets /mcp's 401, discovers the
protected resource and authorization server metadata, registers (dynamically, or by naming a
client ID metadata document), sends the person to the consent screen, and then works with
exactly what was approved; its token refreshes, and after the person revokes the grant it is
refused."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from board.store.vocabulary import WORKER_SCOPE
from tests.acceptance.mcp_helpers import GENERATIONS, auth, call, call_error
from tests.acceptance.oauth_helpers import HttpConsent, MemoryStorage, query_of, sdk_provider, sdk_session
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.conftest import sql_rows

GRANTED = ("add_todo", "get_todo", "claim_next", "heartbeat", "complete")
ACCESS_SECONDS = 2


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(oauth_access_token_seconds=ACCESS_SECONDS)


async def fenced_cycle(client) -> dict:
    added = await call(client, "add_todo", {"queue": "builds", "title": "Rebuild the index"})
    claimed = await call(client, "claim_next", {"queue": "builds", "require_fence": True, "claimant": "sdk-host/1"})
    assert claimed["todo"]["id"] == added["id"]
    fence = claimed["lease_token"]
    await call(client, "heartbeat", {"id": added["id"], "lease_token": fence})
    done = await call(client, "complete", {"id": added["id"], "lease_token": fence, "summary": "Rebuilt the index."})
    assert done["state"] == "done"
    return done


async def revoke_on_the_board(board: httpx.AsyncClient, endpoint_id: str) -> None:
    page = await board.get(f"/endpoints/{endpoint_id}/revoke")
    assert page.status_code == 200 and "Disconnect SDK Host" in page.text
    r = await board.post(f"/endpoints/{endpoint_id}/revoke", data={"csrf_token": csrf_of(page.text)})
    assert r.status_code == 303


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_python_sdk_client_registers_consents_works_refreshes_and_is_refused_after_revocation(
        live_server, generation):
    ada = await make_human(live_server.store, "ada")
    async with client_for(live_server) as board:
        await sign_in(board, "ada")
        consent = HttpConsent(board, verbs=GRANTED, queues="builds")
        storage = MemoryStorage()
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent), generation) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {*GRANTED, "note", "add_todos", "complete_todos"}  # narrowed on consent; a verb allows its companions
            done = await fenced_cycle(client)
            # Access tokens live ACCESS_SECONDS here: once it has passed, the client refreshes
            # before its next call, and both tokens rotate.
            first = storage.tokens
            await asyncio.sleep(ACCESS_SECONDS + 0.2)
            await call(client, "get_todo", {"id": done["id"]})
            assert storage.tokens.refresh_token != first.refresh_token
            assert storage.tokens.access_token != first.access_token
        assert len(consent.redirects) == 1 and "/oauth/authorize?" in consent.redirects[0]  # one consent
        [attempt] = (await live_server.store.todo_get(ada, done["id"]))["attempts"]
        assert attempt["via"] == {"kind": "oauth", "name": "SDK Host", "verified": False}
        [grant] = await sql_rows(live_server.settings.database_url,
                                 "SELECT id::text, agent_id, scope, queues FROM endpoints WHERE kind = 'oauth'")
        assert grant["agent_id"] == "sdk-host" and sorted(grant["scope"]) == sorted(GRANTED)
        assert grant["queues"] == ["builds"]
        await revoke_on_the_board(board, grant["id"])
    async with httpx.AsyncClient(base_url=live_server.url) as c:
        r = await c.post("/mcp", headers=auth(storage.tokens.access_token),
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


async def test_the_python_sdk_client_registered_on_one_loopback_port_signs_in_again_listening_on_another(
        live_server):
    """A desktop host listens on a new ephemeral port each sign-in and keeps its registration
    (RFC 8252 section 7.3): the redirect matches whatever its port."""
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as board:
        await sign_in(board, "ada")
        storage = MemoryStorage()
        first = HttpConsent(board, verbs=GRANTED, queues="builds")
        provider = sdk_provider(live_server.url, storage, first, redirect_uri="http://127.0.0.1:41001/callback")
        async with sdk_session(live_server.url, provider) as client:
            await call(client, "add_todo", {"queue": "builds", "title": "first port"})
        registered = storage.client_info
        assert [str(u) for u in registered.redirect_uris] == ["http://127.0.0.1:41001/callback"]

        storage.tokens = None  # signed out; the registration is kept
        again = HttpConsent(board, verbs=GRANTED, queues="builds")
        provider = sdk_provider(live_server.url, storage, again, redirect_uri="http://127.0.0.1:52002/callback")
        async with sdk_session(live_server.url, provider) as client:
            await call(client, "add_todo", {"queue": "builds", "title": "second port"})
        assert storage.client_info.client_id == registered.client_id  # no second registration
        [asked] = again.redirects
        assert query_of(asked)["redirect_uri"] == "http://127.0.0.1:52002/callback"
        assert again.back.startswith("http://127.0.0.1:52002/callback?")  # the code went to the new port
    clients = await sql_rows(live_server.settings.database_url, "SELECT client_id FROM oauth_clients")
    assert [c["client_id"] for c in clients] == [registered.client_id]


async def test_a_second_consent_by_the_same_python_sdk_client_sees_the_first_grants_todo_and_after_a_revoke_a_new_one_does_not(
        live_server):
    await make_human(live_server.store, "ada")
    grants = "SELECT id::text, revoked_at FROM endpoints WHERE kind = 'oauth' ORDER BY created_at"
    async with client_for(live_server) as board:
        await sign_in(board, "ada")
        consent = HttpConsent(board, verbs=("add_todo", *WORKER_SCOPE), queues="builds")
        storage = MemoryStorage()  # the host keeps its registration (its client id) throughout
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent)) as client:
            todo = await call(client, "add_todo", {"queue": "builds", "title": "Left for the next window"})
        # The SDK asked for exactly the scope /mcp's 401 named; the person added add_todo.
        assert query_of(consent.redirects[0])["scope"] == " ".join(WORKER_SCOPE)
        assert "is connected already" not in consent.pages[0] and "You disconnected" not in consent.pages[0]
        storage.tokens = None  # lost, or its refresh token expired: the host signs in again
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent)) as client:
            assert (await call(client, "get_todo", {"id": todo["id"]}))["id"] == todo["id"]
        assert query_of(consent.redirects[1])["client_id"] == query_of(consent.redirects[0])["client_id"]
        assert "SDK Host is connected already" in consent.pages[1]
        [grant] = await sql_rows(live_server.settings.database_url, grants)
        listing = (await board.get("/endpoints")).text
        assert listing.count(f'href="/endpoints/{grant["id"]}/revoke"') == 1
        await revoke_on_the_board(board, grant["id"])
        storage.tokens = None
        async with sdk_session(live_server.url, sdk_provider(live_server.url, storage, consent)) as client:
            assert (await call_error(client, "get_todo", {"id": todo["id"]}))["code"] == "not_found"
        assert "You disconnected SDK Host on" in consent.pages[2]
        assert "allowing makes a new connection, which cannot see the todos" in consent.pages[2]
        old, new = await sql_rows(live_server.settings.database_url, grants)
        assert old["id"] == grant["id"] and old["revoked_at"] is not None and new["revoked_at"] is None
