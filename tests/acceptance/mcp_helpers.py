"""Helpers for the MCP acceptance tests: real endpoint tokens, and the SDK's own client over
HTTP in either protocol generation.

- `modern`: `mcp.Client` in its default mode, which negotiates 2026-07-28 (sessionless).
- `legacy`: `mcp.Client(mode="legacy")`, the initialize handshake at 2025-11-25, with a
  session id and a standalone GET stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import AsyncIterator

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.client.streamable_http import streamable_http_client

from board.config import Settings
from board.store.vocabulary import VERBS
from tests.conftest import create_database, drop_database, run_server

GENERATIONS = ("modern", "legacy")


@pytest.fixture(scope="module")
async def mcp_server(pg_admin_url, template_url):
    """One real server per test module, for tests that need no settings of their own and
    isolate themselves by vending their own endpoints (every read is scoped to the caller's
    endpoint, so they cannot see each other's todos). Same settings as `live_server`."""
    name, url = create_database(pg_admin_url)
    settings = Settings(database_url=url, secret_key="test-secret-key-0123456789", reaper_interval_seconds=0.2,
                        retry_interval_seconds=0.2, retention_interval_seconds=0, doorbell_heartbeat_seconds=0)
    try:
        async with run_server(settings) as server:
            yield server
    finally:
        drop_database(pg_admin_url, name)


@dataclass
class Vended:
    endpoint_id: str
    token: str
    user_id: int


_names = iter(range(1, 10**9))


async def vend(store, *, user_id: int | None = None, agent_id: str = "worker", queues=("q",), scope=VERBS) -> Vended:
    if user_id is None:
        user_id = (await store.user_insert(f"mcpuser{next(_names)}", "not-a-real-hash"))["id"]
    row, token = await store.endpoint_vend(user_id, name=agent_id, agent_id=agent_id, queues=list(queues),
                                           scope=list(scope))
    return Vended(row["id"], token, user_id)


# The two kinds of credential an agent calls with: a vended endpoint's token, and an OAuth
# access token of a grant approved on the consent screen. Every check must treat them alike.
CREDENTIALS = ("vended", "oauth")


async def credential(server, kind: str = "vended", *, user_id: int | None = None, agent_id: str = "worker",
                     queues=("q",), scope=VERBS) -> Vended:
    """A credential of either kind. An OAuth grant is made as the consent screen and the token
    endpoint make it (the store's code, then its exchange; the HTTP flow has tests of its own),
    for the server's own /mcp."""
    store = server.store
    if kind == "vended":
        return await vend(store, user_id=user_id, agent_id=agent_id, queues=queues, scope=scope)
    if user_id is None:
        user_id = (await store.user_insert(f"mcpuser{next(_names)}", "not-a-real-hash"))["id"]
    code = await store.oauth_code_issue(
        user_id, client_id="test-client", client_name="Test Host", client_verified=False, agent_id=agent_id,
        scope=list(scope), queues=list(queues), redirect_uri="http://127.0.0.1:9/callback",
        redirect_uri_explicit=True, code_challenge="unused-here", resource=server.url + "/mcp")
    tokens = await store.oauth_code_exchange(code, access_seconds=3600, refresh_seconds=86400)
    return Vended(tokens["endpoint_id"], tokens["access_token"], user_id)


async def make_team(store, name: str | None = None) -> int:
    """A new team (its first admin a new person); returns its id, the user id its endpoints
    are vended for: every endpoint vended with it reads and claims the team's todos."""
    n = next(_names)
    owner = await store.user_insert(f"teamadmin{n}", "not-a-real-hash")
    return (await store.team_create(name or f"team{n}", owner=owner["username"]))["id"]


async def space_of(server, endpoint_id: str) -> str:
    """The endpoint whose todos an endpoint reads: a team endpoint's team space, else itself
    (the doorbell keys doorways by it)."""
    from tests.conftest import sql_rows
    [row] = await sql_rows(server.settings.database_url,
                           "SELECT coalesce(space_id, id)::text AS space FROM endpoints WHERE id = %s", (endpoint_id,))
    return row["space"]


class McpApps(ClientExtension):
    """A client that says it is an MCP Apps host (the io.modelcontextprotocol/ui extension)."""

    identifier = "io.modelcontextprotocol/ui"

    def settings(self) -> dict:
        return {"mimeTypes": ["text/html;profile=mcp-app"]}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Inbox:
    """Doorbell rings a legacy session received (notifications/resources/updated URIs)."""

    uris: list[str] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handler(self, message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._changed.set()

    async def wait_for(self, uri: str, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while uri not in self.uris:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no ring for {uri} within {timeout} s; rings: {self.uris}")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=remaining)


@contextlib.asynccontextmanager
async def connect(server, token: str | None, generation: str = "modern", *, inbox: Inbox | None = None,
                  headers: dict | None = None, extensions=None) -> AsyncIterator[Client]:
    hdrs = dict(headers or {})
    if token is not None:
        hdrs.update(auth(token))
    async with httpx2.AsyncClient(headers=hdrs, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        transport = streamable_http_client(server.url + "/mcp", http_client=http)
        kwargs = {"message_handler": inbox.handler} if inbox is not None else {}
        if generation == "legacy":
            kwargs["mode"] = "legacy"
        if extensions:
            kwargs["extensions"] = list(extensions)
        async with Client(transport, **kwargs) as client:
            yield client


async def call(client: Client, tool: str, args: dict | None = None) -> dict:
    """Call a tool that must succeed; returns its structured content."""
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, f"{tool} failed: {result.structured_content or result.content}"
    return result.structured_content


async def call_error(client: Client, tool: str, args: dict | None = None) -> dict:
    """Call a tool that must fail; returns the error object of its JSON text body. An error
    carries no structured content (it would not match the tool's output schema)."""
    result = await client.call_tool(tool, args or {})
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return error_body(result)["error"]


def error_body(result) -> dict:
    """The body of an error result: its single text content, parsed; no structured content."""
    assert result.structured_content is None, result.structured_content
    assert [c.type for c in result.content] == ["text"], result.content
    return json.loads(result.content[0].text)


async def wait_until(predicate, timeout: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


def doorbell(server):
    return server.app.state.mcp.doorbell
