"""Two `switchboard serve` processes behind Debian's HAProxy with docs/scaling.md's
configuration, no affinity, every request on a new connection and so on the next process
in turn: the agents' MCP cycles in both protocol generations (the Python SDK, and the
TypeScript SDK for 2025-11-25 sessions), the doorbell, a Board stream and the OAuth sign-in
all work as against one process. Skips, naming the package, where HAProxy is not installed."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import httpx
import pytest

from board.mcp import todo_views
from board.mcp.doorbell import TODOS_URI, todo_uri
from board.config import Settings
from board.store import store as st
from board.store.db import open_pool
from tests import realparts
from tests.acceptance.mcp_helpers import Inbox, McpApps, call, connect, vend
from tests.acceptance.oauth_helpers import HttpConsent, MemoryStorage, sdk_provider, sdk_session
from tests.acceptance.test_board_auth import make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.acceptance.third_party import ok, ts_client
from tests.conftest import create_database, drop_database, free_port, make_agent
from tests.faults.harness import ServerProcess

DEADLINE = 20.0  # generous: two servers, a balancer and the suite share two cores


@pytest.fixture(scope="module")
async def balanced(pg_admin_url, template_url, tmp_path_factory):
    """Two serve processes on one database behind HAProxy (each request to the next process
    in turn); yields the balancer's url, the processes and a store on the database."""
    realparts.require("haproxy")
    folder = tmp_path_factory.mktemp("haproxy")
    name, url = create_database(pg_admin_url)
    lb_port = free_port()
    public = f"http://127.0.0.1:{lb_port}"
    servers = [ServerProcess(url, folder / f"serve{i}.log", SWITCHBOARD_PUBLIC_URL=public,
                             SWITCHBOARD_TRUSTED_PROXIES="127.0.0.1")
               for i in (1, 2)]
    pool = await open_pool(url, min_size=1, max_size=4)
    try:
        for server in servers:
            await server.start()
        with realparts.haproxy([s.port for s in servers], folder, per_request=True, port=lb_port) as lb:
            yield SimpleNamespace(url=lb.url, lb=lb, servers=servers, store=st.Store(pool, Settings()))
    finally:
        for server in servers:
            await server.stop()
        await pool.close()
        drop_database(pg_admin_url, name)


def assert_both_answered(balanced, endpoint_id: str) -> None:
    """Each process answered some of the endpoint's MCP tool calls (from its log)."""
    pattern = re.compile(r"mcp call tool=\S+ endpoint=" + re.escape(endpoint_id))
    seen = [len(pattern.findall(server.log_text())) for server in balanced.servers]
    assert all(seen), seen


async def fenced_cycle(call_tool, todo_id: str, **closing) -> None:
    """claim_next with a fence takes the todo, a heartbeat holds it and complete with its
    lease token closes it done; call_tool(name, arguments) returns a success's structured content."""
    claimed = await call_tool("claim_next", {"queue": "q", "require_fence": True})
    assert claimed["todo"]["id"] == todo_id and claimed["lease_token"]
    await call_tool("heartbeat", {"id": todo_id, "lease_token": claimed["lease_token"]})
    done = await call_tool("complete", {"id": todo_id, "lease_token": claimed["lease_token"], **closing})
    assert done["state"] == "done"


async def test_a_2025_session_whose_every_request_goes_to_the_next_process_works_on_each(balanced):
    ep = await vend(balanced.store, agent_id="roundrobin")
    inbox = Inbox()
    async with connect(balanced, ep.token, "legacy", inbox=inbox, extensions=[McpApps()]) as client:
        assert "claim_next" in {t.name for t in (await client.list_tools()).tools}
        await client.subscribe_resource(TODOS_URI)
        added = await call(client, "add_todo", {"queue": "q", "title": "heard anywhere"})
        await inbox.wait_for(todo_uri(added["id"]), timeout=DEADLINE)  # the doorbell, on the GET stream
        # The capabilities declared at initialize hold on both processes: an MCP Apps host
        # gets the todo's view with get_todo wherever the call lands.
        for _ in range(2):
            shown = await client.call_tool("get_todo", {"id": added["id"]})
            assert todo_views.VIEW_KEY in (shown.meta or {})
        await fenced_cycle(lambda name, args: call(client, name, args), added["id"],
                           summary="closed across processes")
    assert_both_answered(balanced, ep.endpoint_id)


async def test_the_sessionless_generation_cycles_and_hears_the_doorbell_through_the_balancer(balanced):
    ep = await vend(balanced.store, agent_id="modern")
    async with connect(balanced, ep.token) as client:
        async with client.listen(resource_subscriptions=[TODOS_URI]) as sub:
            added = await call(client, "add_todo", {"queue": "q", "title": "sessionless"})

            async def rung() -> None:
                async for event in sub:
                    if event.uri == todo_uri(added["id"]):
                        return
            await asyncio.wait_for(rung(), DEADLINE)
        await fenced_cycle(lambda name, args: call(client, name, args), added["id"])
    assert_both_answered(balanced, ep.endpoint_id)


async def test_the_typescript_sdk_keeps_its_session_and_hears_the_doorbell_across_processes(balanced):
    ep = await vend(balanced.store, agent_id="typescript")
    async with ts_client(balanced, ep.token) as client:
        assert client.info["protocolVersion"] == "2025-11-25" and client.info["sessionId"]
        await client.request("subscribe", uri=TODOS_URI)
        added = ok(await client.call_tool("add_todo", {"queue": "q", "title": "for the TypeScript host"}))
        await client.request("waitUpdated", uri=todo_uri(added["id"]), seen=0, timeoutMs=int(DEADLINE * 1000))

        async def call_tool(name: str, args: dict) -> dict:
            return ok(await client.call_tool(name, args))

        await fenced_cycle(call_tool, added["id"])
    assert_both_answered(balanced, ep.endpoint_id)


async def test_a_board_stream_through_the_balancer_shows_a_change_made_on_either_process(balanced):
    store = balanced.store
    agent = await make_agent(store, user=await make_human(store, "lb-ada"), agent_id="lb-worker")
    async with httpx.AsyncClient(base_url=balanced.url, timeout=DEADLINE) as board:
        await sign_in(board, "lb-ada")
        async with open_stream(board) as stream:
            todo = await store.todo_add(agent, queue="q", title="seen through the balancer")
            seen = await stream.next_todo(todo["id"], timeout=DEADLINE)
            assert "seen through the balancer" in seen["row"]


async def test_an_mcp_host_signs_in_with_oauth_and_works_through_the_balancer(balanced):
    await make_human(balanced.store, "lb-oauth")
    async with httpx.AsyncClient(base_url=balanced.url, timeout=DEADLINE) as board:
        await sign_in(board, "lb-oauth")
        consent = HttpConsent(board, verbs=("add_todo", "claim_next", "complete"))
        provider = sdk_provider(balanced.url, MemoryStorage(), consent)
        async with sdk_session(balanced.url, provider, "legacy") as client:
            added = await call(client, "add_todo", {"queue": "q", "title": "signed in behind a balancer"})
            claimed = await call(client, "claim_next", {"queue": "q"})
            assert claimed["todo"]["id"] == added["id"]
            assert (await call(client, "complete", {"id": claimed["todo"]["id"]}))["state"] == "done"
    assert consent.redirects, "the host never went through the consent screen"


def _rpc(method: str, id_: int | None = 1, **params) -> dict:
    body = {"jsonrpc": "2.0", "method": method, "params": params}
    return body | ({"id": id_} if id_ is not None else {})


async def test_a_session_id_is_refused_on_every_process_when_altered_or_presented_by_another_endpoint(balanced):
    ours, theirs = await vend(balanced.store, agent_id="owner"), await vend(balanced.store, agent_id="intruder")
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=balanced.url, timeout=DEADLINE) as http:
        r = await http.post("/mcp", headers=base | {"Authorization": f"Bearer {ours.token}"},
                            json=_rpc("initialize", protocolVersion="2025-11-25", capabilities={},
                                      clientInfo={"name": "raw", "version": "1"}))
        assert r.status_code == 200, r.text
        session = r.headers["mcp-session-id"]
        altered = session[:-1] + ("A" if session[-1] != "A" else "B")
        after = base | {"MCP-Protocol-Version": "2025-11-25"}

        async def tools_list(token: str, session_id: str) -> int:
            headers = after | {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
            r = await http.post("/mcp", headers=headers, json=_rpc("tools/list"))
            return r.status_code

        # Each case twice in a row: round robin sends one of the two to each process.
        assert [await tools_list(ours.token, altered) for _ in range(2)] == [404, 404]
        assert [await tools_list(theirs.token, session) for _ in range(2)] == [404, 404]
        assert [await tools_list(ours.token, session) for _ in range(2)] == [200, 200]


async def test_a_session_taken_up_by_several_requests_at_once_answers_every_one(balanced):
    """A client's requests may reach a process that has not seen its session together (a
    call beside its GET stream, calls in parallel): the first takes the session up and the
    others wait for it, so none meets a transport not yet connected."""
    ours = await vend(balanced.store, agent_id="parallel")
    opener, other = (server.url for server in balanced.servers)
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "Authorization": f"Bearer {ours.token}"}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        r = await http.post(f"{opener}/mcp", headers=base,
                            json=_rpc("initialize", protocolVersion="2025-11-25", capabilities={},
                                      clientInfo={"name": "raw", "version": "1"}))
        assert r.status_code == 200, r.text
        headers = base | {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": r.headers["mcp-session-id"]}
        answers = await asyncio.gather(*(http.post(f"{other}/mcp", headers=headers, json=_rpc("tools/list", id_=i))
                                         for i in range(8)))
    assert [a.status_code for a in answers] == [200] * 8, [a.text[:200] for a in answers]
