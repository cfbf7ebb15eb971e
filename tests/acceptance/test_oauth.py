"""OAuth for MCP hosts over HTTP: the metadata a host discovers from /mcp's 401, dynamic
registration, the authorization code with PKCE through the Board's consent screen, rotating
refresh tokens, revocation, and every way a request is refused with its OAuth error and no
grant created."""

from __future__ import annotations

import asyncio
import logging
import hashlib
import re
from urllib.parse import urlencode

import httpx
import pytest

from tests.acceptance.mcp_helpers import auth, call, connect
from tests.acceptance.oauth_helpers import (
    REDIRECT, approve, authorize, authorize_params, code_for, consent_form, exchange, pkce, public_client, query_of,
    refresh, register)
from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from board.store.vocabulary import VERBS
from tests.acceptance.mcp_helpers import vend
from tests.conftest import run_server, sql_rows


async def grants(server) -> list[dict]:
    return await sql_rows(server.settings.database_url,
                          "SELECT id::text, client_name, scope, queues, revoked_at FROM endpoints WHERE kind = 'oauth'")


async def past_the_grace(server) -> None:
    """Every rotation so far moved back past SWITCHBOARD_OAUTH_REFRESH_GRACE_SECONDS (rather
    than waiting it out)."""
    grace = server.settings.oauth_refresh_grace_seconds
    await sql_rows(server.settings.database_url,
                   "UPDATE oauth_tokens SET rotated_at = rotated_at - make_interval(secs => %s + 1) "
                   "WHERE rotated_at IS NOT NULL RETURNING 1", (grace,))


async def signed_in_board(server, name="ada"):
    await make_human(server.store, name)
    board = client_for(server)
    await board.__aenter__()
    await sign_in(board, name)
    return board


@pytest.fixture
async def board(live_server):
    b = await signed_in_board(live_server)
    try:
        yield b
    finally:
        await b.__aexit__(None, None, None)


@pytest.fixture
async def c(live_server):
    async with httpx.AsyncClient(base_url=live_server.url, follow_redirects=False) as client:
        yield client


async def test_an_unauthenticated_mcp_request_names_the_resource_metadata_which_names_the_authorization_server(
        live_server, c):
    r = await c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    prm_url = f"{live_server.url}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{prm_url}"' in challenge
    assert 'scope="claim_next heartbeat note complete fail release get_todo"' in challenge  # a worker's verbs
    prm = (await c.get(prm_url)).json()
    assert prm["resource"] == f"{live_server.url}/mcp"
    assert prm["authorization_servers"] == [live_server.url]
    assert "release" in prm["scopes_supported"]
    meta = (await c.get("/.well-known/oauth-authorization-server")).json()
    assert meta["issuer"] == live_server.url
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["client_id_metadata_document_supported"] is True
    assert meta["registration_endpoint"] == f"{live_server.url}/oauth/register"
    assert meta["revocation_endpoint"] == f"{live_server.url}/oauth/revoke"
    assert set(meta["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert "none" in meta["token_endpoint_auth_methods_supported"]


async def test_a_registered_client_approved_on_the_board_gets_tokens_that_list_exactly_the_granted_tools(
        live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    code = await code_for(c, board, client_id, p, verbs=("list_todos", "claim_next", "complete"), queues="builds")
    r = await exchange(c, client_id, code, p)
    assert r.status_code == 200, r.text
    tokens = r.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] <= 3600
    assert tokens["access_token"].startswith("sba_") and tokens["refresh_token"].startswith("sbr_")
    assert set(tokens["scope"].split()) == {"list_todos", "claim_next", "complete"}
    [grant] = await grants(live_server)
    assert grant["client_name"] == "Test Host" and grant["queues"] == ["builds"]
    async with connect(live_server, tokens["access_token"]) as session:
        listed = {t.name for t in (await session.list_tools()).tools}
    assert listed == {"list_todos", "get_todo", "claim_next", "complete", "complete_todos"}  # list_todos allows get_todo, complete its batch
    stored = await sql_rows(live_server.settings.database_url, "SELECT token_hash FROM oauth_tokens")
    assert all(tokens["access_token"].encode() not in bytes(r["token_hash"]) for r in stored)


async def test_a_refresh_rotates_both_tokens_and_the_old_refresh_token_used_again_after_the_grace_revokes_the_grant(
        live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    first = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    r = await refresh(c, client_id, first["refresh_token"])
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["refresh_token"] != first["refresh_token"] and second["access_token"] != first["access_token"]
    ok = await c.post("/mcp", headers={**auth(second["access_token"]), "accept": "application/json, text/event-stream",
                                       "mcp-protocol-version": "2025-11-25"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert ok.status_code != 401
    await past_the_grace(live_server)
    reused = await refresh(c, client_id, first["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is not None
    for token in (first["access_token"], second["access_token"]):
        r = await c.post("/mcp", headers=auth(token), json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    assert (await refresh(c, client_id, second["refresh_token"])).json()["error"] == "invalid_grant"


async def test_revoking_a_token_at_the_revocation_endpoint_ends_the_grant(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    r = await c.post("/oauth/revoke", data={"token": tokens["access_token"], "client_id": client_id})
    assert r.status_code == 200
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is not None
    r = await c.post("/mcp", headers=auth(tokens["access_token"]), json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401


async def test_deny_sends_access_denied_back_to_the_client_and_creates_nothing(live_server, c, board):
    client_id = await public_client(c)
    r = await authorize(c, authorize_params(client_id, pkce()))
    done = await approve(board, r.headers["location"], verbs=["claim"], decision="deny")
    assert done.status_code == 303
    back = query_of(done.headers["location"])
    assert done.headers["location"].startswith(REDIRECT)
    assert back["error"] == "access_denied" and back["state"] == "st-1" and "code" not in back
    assert await grants(live_server) == []


# -- refused, each with its OAuth error and no grant ---------------------------------------

async def test_an_authorization_request_without_pkce_is_refused(live_server, c):
    client_id = await public_client(c)
    params = authorize_params(client_id, pkce())
    del params["code_challenge"]
    r = await authorize(c, params)
    assert r.status_code == 302 and query_of(r.headers["location"])["error"] == "invalid_request"
    params = authorize_params(client_id, pkce(), code_challenge_method="plain")
    r = await authorize(c, params)
    assert query_of(r.headers["location"])["error"] == "invalid_request"


async def test_a_wrong_code_verifier_is_refused_and_creates_no_grant(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    code = await code_for(c, board, client_id, p)
    r = await exchange(c, client_id, code, pkce())
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert await grants(live_server) == []


async def test_a_redirect_uri_not_registered_is_refused_without_a_redirect(live_server, c):
    client_id = await public_client(c)
    r = await authorize(c, authorize_params(client_id, pkce(), redirect_uri="https://evil.example/cb"))
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"
    assert "location" not in r.headers


async def test_a_code_used_twice_is_refused_and_revokes_the_grant_it_made(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    code = await code_for(c, board, client_id, p)
    tokens = (await exchange(c, client_id, code, p)).json()
    again = await exchange(c, client_id, code, p)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is not None
    r = await c.post("/mcp", headers=auth(tokens["access_token"]), json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401


async def test_a_token_for_another_resource_is_refused_at_authorize_and_at_token(live_server, c, board):
    client_id = await public_client(c)
    r = await authorize(c, authorize_params(client_id, pkce(), resource="https://elsewhere.example/mcp"))
    assert r.status_code == 302 and query_of(r.headers["location"])["error"] == "invalid_target"
    p = pkce()
    code = await code_for(c, board, client_id, p, resource=f"{live_server.url}/mcp")
    r = await exchange(c, client_id, code, p, resource="https://elsewhere.example/mcp")
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"
    assert await grants(live_server) == []


async def test_a_token_is_refused_at_a_resource_it_was_not_issued_for(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    # The same server under another public name is another resource.
    r = await c.post("/mcp", headers={**auth(tokens["access_token"]), "host": "localhost:%s" % live_server.url.rsplit(":", 1)[1]},
                     json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


async def test_an_expired_access_token_is_refused(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    headers = {**auth(tokens["access_token"]), "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-11-25"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert (await c.post("/mcp", headers=headers, json=ping)).status_code != 401  # cached as good
    await sql_rows(live_server.settings.database_url,
                   "UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'access' RETURNING 1")
    live_server.app.state.mcp.endpoints._entries.clear()
    r = await c.post("/mcp", headers=headers, json=ping)
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


async def test_dynamic_registration_refuses_a_redirect_uri_that_is_not_https_or_loopback(live_server, c):
    r = await register(c, redirect_uris=["http://example.com/cb"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri"
    r = await register(c, redirect_uris=["javascript:alert(1)"])
    assert r.status_code == 400
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM oauth_clients") == []


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(oauth_registrations_per_minute=5)


async def test_dynamic_registration_is_rate_limited_per_address(live_server, c):
    codes = [(await register(c)).status_code for _ in range(6)]
    assert codes == [201] * 5 + [429]


async def test_a_consent_post_without_csrf_or_from_another_human_is_refused_and_creates_nothing(live_server, c, board):
    client_id = await public_client(c)
    r = await authorize(c, authorize_params(client_id, pkce()))
    consent = r.headers["location"]
    _, fields = await consent_form(board, consent)
    base = {"decision": "approve", "queues": "q", "agent_id": "a", "verbs": "claim"}
    no_csrf = await board.post("/consent", data={**base, "request": fields["request"], "binding": fields["binding"]})
    assert no_csrf.status_code == 403
    bob = await signed_in_board(live_server, "bob")
    try:
        _, bobs = await consent_form(bob, consent)
        stolen = await bob.post("/consent", data={**base, "csrf_token": bobs["csrf_token"],
                                                  "request": fields["request"], "binding": fields["binding"]})
        assert stolen.status_code == 403 and "someone else" in stolen.text
    finally:
        await bob.__aexit__(None, None, None)
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM oauth_codes") == []


async def test_the_consent_screen_needs_the_board_session_and_returns_to_it_after_sign_in(live_server, c):
    client_id = await public_client(c)
    consent = (await authorize(c, authorize_params(client_id, pkce()))).headers["location"]
    r = await c.get(consent)
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=%2Fconsent")


def ticked_verbs(page: str) -> set[str]:
    return set(re.findall(r'name="verbs" value="([a-z_]+)"[^>]*checked', page))


async def test_the_consent_screen_ticks_the_verbs_asked_for_and_the_person_may_narrow_or_add(live_server, c, board):
    client_id = await public_client(c)
    consent = (await authorize(c, authorize_params(client_id, pkce(), scope="claim complete"))).headers["location"]
    page, _ = await consent_form(board, consent)
    assert ticked_verbs(page) == {"claim", "complete"}
    assert 'value="release"' in page and "implied by no other verb; not asked for by Test Host" in page
    p = pkce()
    code = await code_for(c, board, client_id, p, verbs=("claim", "release"), scope="claim complete")
    tokens = (await exchange(c, client_id, code, p)).json()
    assert set(tokens["scope"].split()) == {"claim", "release"}  # narrowed by one, added one on purpose


async def test_a_read_only_request_reads_as_read_only_and_a_working_one_as_work(live_server, c, board):
    client_id = await public_client(c)
    reading = (await authorize(c, authorize_params(client_id, pkce(), scope="list_todos get_todo"))).headers["location"]
    page, _ = await consent_form(board, reading)
    assert "asks only to read" in page and "will do work as you" not in page
    assert ticked_verbs(page) == {"list_todos", "get_todo"}
    working = (await authorize(c, authorize_params(client_id, pkce(), scope="get_todo claim_next"))).headers["location"]
    page, _ = await consent_form(board, working)
    assert "asks only to read" not in page and "will do work as you" in page


async def test_the_consent_screen_offers_the_persons_queues_to_tick_and_new_ones_to_name(live_server, c, board):
    ada = await live_server.store.user_by_name("ada")
    await vend(live_server.store, user_id=ada["id"], queues=("builds", "docs"))
    client_id = await public_client(c)
    consent = (await authorize(c, authorize_params(client_id, pkce()))).headers["location"]
    page, fields = await consent_form(board, consent)
    assert re.findall(r'name="queue" value="([^"]+)"', page) == ["builds", "docs"]
    assert not re.findall(r'name="queue" value="[^"]+" checked', page)
    data = [*fields.items(), ("decision", "approve"), ("queue", "docs"), ("queues", "fresh, other"),
            ("agent_id", "host"), ("verbs", "get_todo")]
    done = await board.post("/consent", content=urlencode(data),
                            headers={"content-type": "application/x-www-form-urlencoded"})
    assert done.status_code == 303, done.text
    p_code = query_of(done.headers["location"])["code"]
    [row] = await sql_rows(live_server.settings.database_url, "SELECT queues FROM oauth_codes WHERE used_at IS NULL")
    assert row["queues"] == ["docs", "fresh", "other"] and p_code
    _, fields = await consent_form(board, consent)
    nothing = await board.post("/consent", content=urlencode([*fields.items(), ("decision", "approve"),
                                                              ("agent_id", "host"), ("verbs", "get_todo")]),
                               headers={"content-type": "application/x-www-form-urlencoded"})
    assert nothing.status_code == 400 and "grant at least one queue" in nothing.text.lower()


async def test_disconnecting_a_connected_agent_dead_letters_what_it_holds_and_closes_the_attempt_revoked(
        live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    code = await code_for(c, board, client_id, p, verbs=("add_todo", "claim", "get_todo"), scope=None)
    tokens = (await exchange(c, client_id, code, p)).json()
    async with connect(live_server, tokens["access_token"], "legacy") as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "held when revoked"})
        await call(client, "claim", {"id": todo["id"]})
    drawer = (await board.get(f"/todos/{todo['id']}/drawer")).text
    assert "<dt>Connected through</dt><dd>OAuth client Test Host (unverified)</dd>" in drawer
    [grant] = await grants(live_server)
    listing = (await board.get("/endpoints")).text
    assert "Connected agents" in listing and f'href="/endpoints/{grant["id"]}/revoke"' in listing
    page = await board.get(f"/endpoints/{grant['id']}/revoke")
    assert "Disconnect Test Host?" in page.text
    r = await board.post(f"/endpoints/{grant['id']}/revoke", data={"csrf_token": csrf_of(page.text)})
    assert r.status_code == 303
    assert "Revoked connected agent Test Host; 1 held todo became dead letter." in (await board.get("/endpoints")).text
    [row] = await sql_rows(live_server.settings.database_url,
                           "SELECT t.state::text, t.next_retry_at, a.outcome::text, a.disposition::text "
                           "FROM todos t JOIN attempts a ON a.todo_id = t.id WHERE t.id = %s", (todo["id"],))
    assert row == {"state": "failed", "next_retry_at": None, "outcome": "revoked", "disposition": "dead_lettered"}
    r = await c.post("/mcp", headers=auth(tokens["access_token"]), json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401


async def test_a_client_asking_for_every_verb_gets_only_a_workers_loop_ticked_at_first(live_server, c, board):
    client_id = await public_client(c)
    consent = (await authorize(c, authorize_params(client_id, pkce(), scope=None))).headers["location"]
    page, _ = await consent_form(board, consent)
    ticked = set(re.findall(r'name="verbs" value="([a-z_]+)"[^>]*checked', page))
    offered = set(re.findall(r'name="verbs" value="([a-z_]+)"', page))
    assert offered == set(VERBS)
    assert ticked == {"list_todos", "get_todo", "claim_next", "heartbeat", "complete", "fail"}  # never release


async def test_with_oauth_off_there_is_no_metadata_no_sign_in_and_vended_tokens_still_work(server_settings):
    async with run_server(server_settings.with_(oauth_enabled=False)) as server:
        ep = await vend(server.store)
        await make_human(server.store, "ada")
        async with httpx.AsyncClient(base_url=server.url) as c, client_for(server) as board:
            r = await c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert r.status_code == 401 and r.headers["www-authenticate"] == 'Bearer realm="switchboard"'
            for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
                assert (await c.get(path)).status_code == 404, path
            assert (await c.post("/oauth/register", json={})).status_code == 404
            await sign_in(board, "ada")
            assert (await board.get("/consent?request=x")).status_code == 404
            assert "OAuth is turned off on this server." in (await board.get("/endpoints")).text
        async with connect(server, ep.token) as client:
            assert (await client.list_tools()).tools


async def test_a_confidential_client_authenticates_with_its_secret_which_is_stored_only_as_a_hash(
        live_server, c, board):
    r = await register(c, token_endpoint_auth_method="client_secret_post")
    assert r.status_code == 201, r.text
    client_id, secret = r.json()["client_id"], r.json()["client_secret"]
    [row] = await sql_rows(live_server.settings.database_url, "SELECT metadata::text, secret_hash FROM oauth_clients")
    assert secret not in row["metadata"] and bytes(row["secret_hash"]) == hashlib.sha256(secret.encode()).digest()
    p = pkce()
    code = await code_for(c, board, client_id, p)
    wrong = await exchange(c, client_id, code, p, client_secret="not-" + secret)
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    missing = await exchange(c, client_id, code, p)
    assert missing.status_code == 401 and missing.json()["error"] == "invalid_client"
    r = await exchange(c, client_id, code, p, client_secret=secret)
    assert r.status_code == 200 and r.json()["access_token"].startswith("sba_")


BAD_REQUESTS = [
    ("GET", "/oauth/authorize", {"params": {}}),
    ("GET", "/oauth/authorize", {"params": {"client_id": "\x00", "response_type": "code", "code_challenge": "x"}}),
    ("GET", "/oauth/authorize", {"params": {"client_id": "https://[::1", "response_type": "code",
                                            "code_challenge": "x"}}),
    ("GET", "/oauth/authorize", {"params": {"client_id": "x" * 5000, "response_type": "token",
                                            "code_challenge": "x"}}),
    ("POST", "/oauth/token", {"data": {}}),
    ("POST", "/oauth/token", {"data": {"grant_type": "password", "client_id": "nope"}}),
    ("POST", "/oauth/token", {"data": {"grant_type": "authorization_code", "client_id": "nope", "code": "x",
                                       "code_verifier": "y"}}),
    ("POST", "/oauth/token", {"content": b"\xff\xfe\x00garbage",
                              "headers": {"content-type": "application/x-www-form-urlencoded"}}),
    ("POST", "/oauth/register", {"content": b"{not json"}),
    ("POST", "/oauth/register", {"json": {"redirect_uris": "not-a-list"}}),
    ("POST", "/oauth/register", {"json": {"redirect_uris": ["https://a.example/cb"], "client_name": "\x00"}}),
    ("POST", "/oauth/revoke", {"data": {"token": "x"}}),
    ("POST", "/oauth/revoke", {"data": {"token": "x", "client_id": "nope"}}),
    ("GET", "/.well-known/oauth-protected-resource/other", {}),
]


@pytest.mark.parametrize(("method", "path", "kw"), BAD_REQUESTS)
async def test_bad_oauth_requests_get_a_4xx_oauth_error_never_a_500(live_server, c, method, path, kw):
    r = await c.request(method, path, **kw)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    if r.headers.get("content-type", "").startswith("application/json") and r.status_code != 404:
        assert "error" in r.json()
    assert await grants(live_server) == []


async def test_a_forged_or_stale_consent_link_is_a_clear_400_page(live_server, c, board):
    for link in ("/consent", "/consent?request=forged", "/consent?request=" + "A" * 9000):
        r = await board.get(link)
        assert r.status_code == 400 and "not valid or has expired" in r.text, link


async def test_two_refreshes_racing_with_one_token_both_get_the_same_new_pair_and_the_grant_stays_live(
        live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    async with httpx.AsyncClient(base_url=live_server.url) as c2:  # its own connection: two windows
        answers = await asyncio.gather(refresh(c, client_id, tokens["refresh_token"]),
                                       refresh(c2, client_id, tokens["refresh_token"]))
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    first, second = (r.json() for r in answers)
    assert (first["access_token"], first["refresh_token"]) == (second["access_token"], second["refresh_token"])
    assert first["refresh_token"] != tokens["refresh_token"] and first["scope"] == second["scope"]
    rotated = await sql_rows(live_server.settings.database_url,
                             "SELECT count(*) AS n FROM oauth_tokens WHERE kind = 'refresh' AND rotated_at IS NOT NULL")
    assert rotated == [{"n": 1}]
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is None
    headers = {**auth(first["access_token"]), "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-11-25"}
    r = await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code != 401
    again = await refresh(c, client_id, first["refresh_token"])  # the pair's refresh token rotates as any
    assert again.status_code == 200 and again.json()["refresh_token"] != first["refresh_token"]


async def test_a_refresh_token_presented_again_gets_the_same_pair_within_the_grace_and_revokes_the_grant_after(
        live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    new = await refresh(c, client_id, tokens["refresh_token"])
    assert new.status_code == 200
    within = await refresh(c, client_id, tokens["refresh_token"])
    assert within.status_code == 200 and within.json()["refresh_token"] == new.json()["refresh_token"]
    await past_the_grace(live_server)
    after = await refresh(c, client_id, tokens["refresh_token"])
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant"
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is not None


async def test_a_rotated_refresh_token_presented_after_its_own_expiry_still_revokes_the_grant(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    assert (await refresh(c, client_id, tokens["refresh_token"])).status_code == 200
    await past_the_grace(live_server)
    await sql_rows(live_server.settings.database_url,
                   "UPDATE oauth_tokens SET expires_at = now() - interval '1 second' "
                   "WHERE kind = 'refresh' AND rotated_at IS NOT NULL RETURNING 1")
    reused = await refresh(c, client_id, tokens["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is not None  # expired or not, a rotated token came back: a stolen copy


async def test_an_expired_refresh_token_never_rotated_is_refused_and_revokes_nothing(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    await sql_rows(live_server.settings.database_url,
                   "UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'refresh' RETURNING 1")
    r = await refresh(c, client_id, tokens["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is None


# -- a second consent is the same connection -------------------------------------------------

async def test_a_second_consent_by_the_same_client_updates_its_grant_and_ends_the_earlier_tokens(
        live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    first = (await exchange(c, client_id, await code_for(c, board, client_id, p, queues="builds"), p)).json()
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    used = await c.post("/mcp", headers={**headers, **auth(first["access_token"])}, json=ping)
    assert used.status_code != 401  # and cached as good in this process
    consent = (await authorize(c, authorize_params(client_id, pkce()))).headers["location"]
    page, _ = await consent_form(board, consent)
    page = " ".join(page.split())
    assert "Test Host is connected already" in page and "Allowing updates that connection" in page
    assert re.findall(r'name="queue" value="([^"]+)" checked', page) == ["builds"]  # its queues, ticked
    p = pkce()
    code = await code_for(c, board, client_id, p, verbs=("get_todo", "claim_next"), queues="docs")
    second = (await exchange(c, client_id, code, p)).json()
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is None and sorted(grant["scope"]) == ["claim_next", "get_todo"]
    assert grant["queues"] == ["docs"]
    old = await c.post("/mcp", headers={**headers, **auth(first["access_token"])}, json=ping)
    assert old.status_code == 401
    assert (await refresh(c, client_id, first["refresh_token"])).json()["error"] == "invalid_grant"
    [grant] = await grants(live_server)
    assert grant["revoked_at"] is None  # an ended token is unknown, not a reuse
    async with connect(live_server, second["access_token"]) as session:
        assert {t.name for t in (await session.list_tools()).tools} == {"get_todo", "claim_next"}
    listing = (await board.get("/endpoints")).text
    assert listing.count(f'href="/endpoints/{grant["id"]}/revoke"') == 1 and listing.count("<th scope=\"row\">Test Host") == 1


async def test_consent_after_a_revoke_makes_a_new_grant_and_the_screen_says_so(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    await exchange(c, client_id, await code_for(c, board, client_id, p), p)
    [old] = await grants(live_server)
    page = await board.get(f"/endpoints/{old['id']}/revoke")
    assert (await board.post(f"/endpoints/{old['id']}/revoke", data={"csrf_token": csrf_of(page.text)})).status_code == 303
    consent = (await authorize(c, authorize_params(client_id, pkce()))).headers["location"]
    page, _ = await consent_form(board, consent)
    page = " ".join(page.split())
    assert "You disconnected Test Host on" in page and "allowing makes a new connection" in page
    assert "connected already" not in page
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    assert tokens["access_token"].startswith("sba_")
    rows = {g["id"]: g for g in await grants(live_server)}
    assert len(rows) == 2 and rows[old["id"]]["revoked_at"] is not None
    [new] = [g for g in rows.values() if g["id"] != old["id"]]
    assert new["revoked_at"] is None


async def test_two_exchanges_racing_for_one_person_and_client_leave_one_live_grant(live_server, c, board):
    client_id = await public_client(c)
    pairs = [pkce(), pkce()]
    codes = [await code_for(c, board, client_id, p) for p in pairs]
    async with httpx.AsyncClient(base_url=live_server.url) as c2:
        answers = await asyncio.gather(exchange(c, client_id, codes[0], pairs[0]),
                                       exchange(c2, client_id, codes[1], pairs[1]))
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    live = [g for g in await grants(live_server) if g["revoked_at"] is None]
    assert len(live) == 1 and len(await grants(live_server)) == 1


async def test_a_refresh_token_is_not_an_access_token_at_mcp(live_server, c, board):
    client_id = await public_client(c)
    p = pkce()
    tokens = (await exchange(c, client_id, await code_for(c, board, client_id, p), p)).json()
    r = await c.post("/mcp", headers=auth(tokens["refresh_token"]), json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


# -- desktop and IDE hosts' redirects (RFC 8252) -------------------------------------------

PRIVATE_USE = ["cursor://anysphere.cursor-retrieval/oauth/callback",
               "vscode://vscode.github-authentication/did-authenticate", "com.example.app:/cb"]


@pytest.mark.parametrize("redirect", PRIVATE_USE)
async def test_a_private_use_redirect_registers_and_authorizes_to_the_consent_screen(live_server, c, redirect):
    r = await register(c, redirect_uris=[redirect])
    assert r.status_code == 201, r.text
    assert r.json()["redirect_uris"] == [redirect]
    r = await authorize(c, authorize_params(r.json()["client_id"], pkce(), redirect_uri=redirect))
    assert r.status_code == 302 and "/consent?request=" in r.headers["location"], r.text


@pytest.mark.parametrize("redirect", [
    "javascript:alert(1)", "JavaScript://x/%0aalert(1)", "data:text/html,<script>alert(1)</script>",
    "file:///etc/passwd", "vbscript:msgbox(1)", "about:blank", "http://example.com/cb", "http://10.0.0.5/cb",
    "cursor://evil@host/cb", "not a uri at all"])
async def test_a_redirect_a_browser_would_run_or_a_plain_http_host_is_refused_at_registration(
        live_server, c, redirect):
    r = await register(c, redirect_uris=[redirect])
    assert r.status_code == 400, r.text
    assert r.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM oauth_clients") == []


@pytest.mark.parametrize(("registered", "asked", "matches"), [
    ("http://127.0.0.1:9/callback", "http://127.0.0.1:53682/callback", True),
    ("http://127.0.0.1/callback", "http://127.0.0.1:53682/callback", True),
    ("http://[::1]:9/callback", "http://[::1]:61000/callback", True),
    ("http://localhost:9/callback", "http://localhost:61000/callback", True),
    ("http://127.0.0.1:9/callback", "http://localhost:9/callback", False),  # another host
    ("http://127.0.0.1:9/callback", "http://[::1]:9/callback", False),
    ("http://127.0.0.1:9/callback", "https://127.0.0.1:9/callback", False),  # another scheme
    ("http://127.0.0.1:9/callback", "http://127.0.0.1:9/other", False),  # another path
    ("http://127.0.0.1:9/callback", "http://127.0.0.1:9/callback?x=1", False),
    ("https://host.example/cb", "https://host.example:8443/cb", False),  # not loopback: exact
    ("cursor://anysphere.cursor-retrieval/oauth/callback", "cursor://anysphere.cursor-retrieval/other", False),
])
async def test_a_loopback_redirect_matches_whatever_its_port_and_nothing_else_does(
        live_server, c, registered, asked, matches):
    client_id = await public_client(c, redirect_uris=[registered])
    r = await authorize(c, authorize_params(client_id, pkce(), redirect_uri=asked))
    if matches:
        assert r.status_code == 302 and "/consent?request=" in r.headers["location"], r.text
    else:
        assert r.status_code == 400 and "not registered" in r.json()["error_description"], r.text


async def test_a_code_sent_to_a_new_loopback_port_is_exchanged_with_that_port(live_server, c, board):
    client_id = await public_client(c)  # REDIRECT: http://127.0.0.1:9/callback
    p = pkce()
    code = await code_for(c, board, client_id, p, redirect_uri="http://127.0.0.1:40404/callback")
    r = await exchange(c, client_id, code, p, redirect_uri=REDIRECT)  # not the port it was sent to
    assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
    code = await code_for(c, board, client_id, p, redirect_uri="http://127.0.0.1:40404/callback")
    r = await exchange(c, client_id, code, p, redirect_uri="http://127.0.0.1:40404/callback")
    assert r.status_code == 200 and r.json()["access_token"].startswith("sba_")


# -- registration that cannot grow the database --------------------------------------------

@pytest.mark.parametrize(("extra", "error", "field"), [
    ({"name": "n" * 2_000_000}, "invalid_client_metadata", "16 KiB"),
    ({"software_statement": "s" * (16 * 1024)}, "invalid_client_metadata", "16 KiB"),
    ({"name": "n" * 201}, "invalid_client_metadata", "client_name"),
    ({"redirect_uris": [f"http://127.0.0.1:{port}/cb" for port in range(9000, 9011)]}, "invalid_redirect_uri",
     "redirect_uris"),
    ({"redirect_uris": ["https://host.example/" + "a" * 2048]}, "invalid_redirect_uri", "redirect URI"),
    ({"client_uri": "https://host.example/" + "a" * 2048}, "invalid_client_metadata", "client_uri"),
    ({"software_id": "a\x00b"}, "invalid_client_metadata", "software_id"),
])
async def test_a_registration_past_a_limit_is_refused_naming_the_field_and_stores_nothing(
        live_server, c, extra, error, field):
    r = await register(c, **extra)
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"] == error and field in r.json()["error_description"], r.json()
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM oauth_clients") == []


async def test_a_registration_at_the_limits_is_stored(live_server, c):
    r = await register(c, name="n" * 200, redirect_uris=[f"http://127.0.0.1:{port}/cb" for port in range(9000, 9010)],
                       client_uri="https://host.example/" + "a" * (2048 - len("https://host.example/")))
    assert r.status_code == 201, r.text[:300]


async def test_bidi_and_invisible_characters_are_taken_out_of_a_client_name_before_it_is_stored(live_server, c):
    r = await register(c, name="Evil\u202e Host\u200b\u2066 \ufeff")
    assert r.status_code == 201 and r.json()["client_name"] == "Evil Host"
    [row] = await sql_rows(live_server.settings.database_url, "SELECT metadata->>'client_name' AS name FROM oauth_clients")
    assert row["name"] == "Evil Host"


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_nul_in_an_authorization_request_is_a_clean_400_with_no_error_logged(live_server, c, method, caplog):
    caplog.set_level(logging.INFO)
    params = {"client_id": "\x00", "response_type": "code", "code_challenge": "x" * 43, "redirect_uri": REDIRECT}
    client_id = await public_client(c)
    for bad in (params, {**params, "client_id": client_id, "code_challenge": "a\x00b"},
                {**params, "client_id": client_id, "state": "\x00"}):
        if method == "GET":
            r = await c.get("/oauth/authorize", params=bad)
        else:
            r = await c.post("/oauth/authorize", data=bad)
        assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
        assert "NUL" in r.json()["error_description"]
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR], [
        rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR]
