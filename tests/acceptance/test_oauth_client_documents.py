"""OAuth clients named by a client ID metadata document (an https URL), end to end: the MCP
Python SDK's client connects with one, served by the test over https with a test CA the
server is told to trust; a document that is too large, not https, redirected off https or
naming another client id is refused at /oauth/authorize with its reason, and no grant is
made."""

from __future__ import annotations

import httpx
import pytest

from tests.acceptance.mcp_helpers import call
from tests.acceptance.oauth_helpers import HttpConsent, MemoryStorage, authorize, authorize_params, pkce, sdk_provider, sdk_session
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import sql_rows
from tests.oauth_documents import DocumentServer


@pytest.fixture(scope="module")
def docs():
    with DocumentServer() as server:
        yield server


@pytest.fixture
def server_settings(server_settings, docs):
    return server_settings.with_(oauth_client_metadata_ca_file=docs.ca_pem_path,
                                 oauth_client_metadata_allow_private=True)


async def no_grants(server) -> bool:
    return await sql_rows(server.settings.database_url, "SELECT 1 FROM endpoints WHERE kind = 'oauth'") == []


async def test_the_python_sdk_client_connects_with_a_client_id_metadata_document_and_is_shown_verified(
        live_server, docs):
    client_id = docs.serve_client("/hosts/sdk-host.json", client_name="SDK Host",
                                  headers={"Cache-Control": "max-age=300"})
    ada = await make_human(live_server.store, "ada")
    async with client_for(live_server) as board:
        await sign_in(board, "ada")
        consent = HttpConsent(board, verbs=("list_todos", "claim_next"), queues="builds")
        storage = MemoryStorage()
        provider = sdk_provider(live_server.url, storage, consent, client_metadata_url=client_id)
        async with sdk_session(live_server.url, provider) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"list_todos", "get_todo", "claim_next"}
            assert (await call(client, "claim_next", {"queue": "builds"}))["todo"] is None
        assert storage.client_info.client_id == client_id  # no registration: the URL is the id
        listing = (await board.get("/endpoints")).text
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM oauth_clients") == []
    [grant] = [e for e in await live_server.store.endpoints_of_user(ada.user_id) if e["kind"] == "oauth"]
    assert (grant["client_id"], grant["client_name"], grant["client_verified"]) == (client_id, "SDK Host", True)
    assert "SDK Host" in listing and "unverified" not in listing
    assert docs.hits("/hosts/sdk-host.json") == 1  # cached as its Cache-Control says


async def test_the_consent_screen_marks_a_document_client_unverified_when_it_redirects_to_another_host(
        live_server, docs):
    client_id = docs.serve_client("/hosts/elsewhere.json", client_name="Elsewhere",
                                  redirect_uris=["https://elsewhere.example/cb"])
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as board, httpx.AsyncClient(base_url=live_server.url) as c:
        await sign_in(board, "ada")
        r = await authorize(c, authorize_params(client_id, pkce(), redirect_uri="https://elsewhere.example/cb"))
        page = (await board.get(r.headers["location"])).text
    assert "unverified: Switchboard cannot confirm who made it" in page
    assert "<code>elsewhere.example</code>" in page


@pytest.mark.parametrize("case", ["too_large", "not_https", "redirected_to_http", "another_client_id"])
async def test_a_bad_client_metadata_document_is_refused_at_authorize_with_its_reason_and_no_grant(
        live_server, docs, case):
    path = f"/bad/{case}.json"
    if case == "too_large":
        client_id = docs.serve_client(path, client_name="x" * 70_000)
        reason = "64"
    elif case == "not_https":
        client_id = docs.url(path).replace("https://", "http://")
        reason = None
    elif case == "redirected_to_http":
        docs.redirect(path, docs.url("/bad/target.json").replace("https://", "http://"))
        client_id = docs.url(path)
        reason = "https"
    else:
        docs.serve(path, json_body=docs.document("/someone/else.json"))
        client_id = docs.url(path)
        reason = "names another client id"
    async with httpx.AsyncClient(base_url=live_server.url) as c:
        r = await authorize(c, authorize_params(client_id, pkce()))
    assert r.status_code == 400 and "location" not in r.headers
    body = r.json()
    if reason is None:  # not a document id at all, and no client registered by that id
        assert body["error"] == "invalid_request" and "not found" in body["error_description"]
    else:
        assert body["error"] == "invalid_client" and reason in body["error_description"], body
    assert await no_grants(live_server)
