"""What an agent host shows its human of a todo, over real MCP connections of both
generations: the A2UI todo detail resource (behind SWITCHBOARD_A2UI) and the MCP App
(ui://switchboard/todo), both the one todo detail view (board/view/todo_detail.py), scoped
like get_todo (REQ-10), never showing claimer_session or lease_token_hash (REQ-13)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from mcp.shared.exceptions import MCPError

from board.store.store import Human
from board.view.todo_detail import todo_detail
from tests.a2ui_schema import problems
from tests.acceptance.mcp_helpers import (GENERATIONS, Inbox, McpApps, call, connect, doorbell, mcp_server,  # noqa: F401
                                          vend, wait_until)
from tests.todo_history import todo_with_every_kind_of_attempt

A2UI_MIME = "application/json+a2ui"
APP_URI = "ui://switchboard/todo"
APP_MIME = "text/html;profile=mcp-app"
VIEW_KEY = "switchboard/todo_detail"
NEVER_MINTED = "01960000-0000-7000-8000-000000000000"


def a2ui(todo_id: str) -> str:
    return f"switchboard://todos/{todo_id}/a2ui"


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(a2ui_enabled=True, reaper_interval_seconds=0, retry_interval_seconds=0)


async def history(server, ep):
    human = Human(ep.user_id, "owner")
    agent = await server.store.endpoint_authenticate(ep.token)
    return await todo_with_every_kind_of_attempt(server.store, agent, human), agent


def assert_no_secrets(text: str) -> None:
    assert "claimer_session" not in text and "lease_token" not in text


async def read_error(client, uri: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return caught.value.error.model_dump_json()


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_a2ui_template_is_listed_only_with_switchboard_a2ui_on(live_server, mcp_server, generation):
    on, off = await vend(live_server.store), await vend(mcp_server.store)
    async with connect(live_server, on.token, generation) as client:
        templates = {t.uri_template: t for t in (await client.list_resource_templates()).resource_templates}
        assert templates["switchboard://todos/{id}/a2ui"].mime_type == A2UI_MIME
    async with connect(mcp_server, off.token, generation) as client:
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert templates == ["switchboard://todos/{id}"]
        todo = await call(client, "add_todo", {"queue": "q", "title": "t"})
        assert "Resource not found" in await read_error(client, a2ui(todo["id"]))


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_a2ui_resource_is_the_todo_view_as_valid_a2ui_v0_9_messages(live_server, generation):
    ep = await vend(live_server.store)
    tid, agent = await history(live_server, ep)
    async with connect(live_server, ep.token, generation) as client:
        result = await client.read_resource(a2ui(tid))
    [content] = result.contents
    assert content.mime_type == A2UI_MIME and str(content.uri) == a2ui(tid)
    assert_no_secrets(content.text)
    messages = json.loads(content.text)
    assert problems(messages, "server_to_client_list.json") == []
    for message in messages:
        assert problems(message) == [], message
    model = messages[2]["updateDataModel"]["value"]["todo"]
    assert model == todo_detail(await live_server.store.todo_get(agent, tid))
    assert [a["seq"] for a in model["attempts"]] == [6, 5, 4, 3, 2, 1]
    assert [a["seq"] for a in model["attempts"] if a["died_marker"]] == [4, 3]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_a2ui_resource_is_scoped_like_get_todo(live_server, generation):
    store = live_server.store
    mine, theirs = await vend(store), await vend(store)
    reader = await vend(store, user_id=mine.user_id, scope=("get_todo",))
    producer = await vend(store, user_id=mine.user_id, scope=("add_todo",))
    async with connect(live_server, theirs.token, generation) as client:
        foreign = (await call(client, "add_todo", {"queue": "q", "title": "theirs"}))["id"]
    async with connect(live_server, mine.token, generation) as client:
        never = await read_error(client, a2ui(NEVER_MINTED))
        assert await read_error(client, a2ui(foreign)) == never  # byte for byte: nothing told
        assert json.loads(never)["data"]["code"] == "not_found"
    async with connect(live_server, reader.token, generation) as client:
        assert await read_error(client, a2ui(foreign)) == never
    async with connect(live_server, producer.token, generation) as client:
        own = (await call(client, "add_todo", {"queue": "q", "title": "mine"}))["id"]
        denied = await read_error(client, a2ui(own))
        assert denied == await read_error(client, f"switchboard://todos/{own}")  # as get_todo's resource
        assert json.loads(denied)["data"]["code"] == "forbidden"


@contextlib.asynccontextmanager
async def legacy_session(server, token, endpoint_id):
    inbox = Inbox()
    before = doorbell(server).live_doorways(endpoint_id)
    async with connect(server, token, "legacy", inbox=inbox) as client:
        await wait_until(lambda: doorbell(server).live_doorways(endpoint_id) > before)
        yield client, inbox


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_subscribed_session_hears_each_attempt_open_and_close_and_only_the_data_model_changes(
        live_server, generation):
    store = live_server.store
    ep, other = await vend(store), await vend(store)
    async with connect(live_server, ep.token) as client:
        tid = (await call(client, "add_todo", {"queue": "q", "title": "watched"}))["id"]
        before = json.loads((await client.read_resource(a2ui(tid))).contents[0].text)
    async with contextlib.AsyncExitStack() as stack:
        if generation == "legacy":
            client, inbox = await stack.enter_async_context(legacy_session(live_server, ep.token, ep.endpoint_id))
            await client.subscribe_resource(a2ui(tid))
            rings = inbox.uris
        else:
            client = await stack.enter_async_context(connect(live_server, ep.token, "modern"))
            sub = await stack.enter_async_context(client.listen(resource_subscriptions=[a2ui(tid)]))
            rings: list[str] = []

            async def collect():
                async for event in sub:
                    rings.append(event.uri)
            task = asyncio.create_task(collect())
            stack.callback(task.cancel)
            await wait_until(lambda: doorbell(live_server).live_doorways(ep.endpoint_id) == 1)
        # Another endpoint's subscription to the same URI hears nothing (its read is not_found).
        their_rings: list[str] = []
        async with connect(live_server, other.token, "modern") as theirs:
            async with theirs.listen(resource_subscriptions=[a2ui(tid)]) as their_sub:
                async def collect_theirs():
                    async for event in their_sub:
                        their_rings.append(event.uri)
                listener = asyncio.create_task(collect_theirs())
                await call(client, "claim", {"id": tid, "claimant": "run-1"})
                await wait_until(lambda: rings.count(a2ui(tid)) == 1)  # the attempt opened
                await call(client, "complete", {"id": tid, "summary": "done"})
                await wait_until(lambda: rings.count(a2ui(tid)) == 2)  # and closed
                listener.cancel()
        assert their_rings == []
        after = json.loads((await client.read_resource(a2ui(tid))).contents[0].text)
    assert after[:2] == before[:2]  # the same surface and components
    assert after[2] != before[2]
    assert after[2]["updateDataModel"]["value"]["todo"]["attempts"][0]["sentence"].startswith("Attempt 1, completed")


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_todo_tools_name_the_mcp_app_and_its_page_reads_with_its_mime_type_and_csp(live_server,
                                                                                          generation):
    ep = await vend(live_server.store)
    async with connect(live_server, ep.token, generation) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("get_todo", "claim", "claim_next"):
            assert tools[name].meta == {"ui": {"resourceUri": APP_URI}}, name
        assert tools["complete"].meta is None
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert listed[APP_URI].mime_type == APP_MIME
        [page] = (await client.read_resource(APP_URI)).contents
    assert page.mime_type == APP_MIME
    csp = page.meta["ui"]["csp"]
    assert csp == {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
    html = page.text
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "src=" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_an_mcp_apps_host_gets_the_view_with_get_todo_and_any_other_client_todays_result(live_server,
                                                                                             generation):
    ep = await vend(live_server.store)
    tid, agent = await history(live_server, ep)
    async with connect(live_server, ep.token, generation, extensions=[McpApps()]) as host:
        shown = await host.call_tool("get_todo", {"id": tid})
    async with connect(live_server, ep.token, generation) as plain:
        today = await plain.call_tool("get_todo", {"id": tid})
    assert VIEW_KEY not in (today.meta or {})
    assert shown.structured_content == today.structured_content
    assert shown.content == today.content
    view = shown.meta[VIEW_KEY]
    assert_no_secrets(json.dumps(view))
    assert view == todo_detail(await live_server.store.todo_get(agent, tid))


# -- the official TypeScript SDK client (what most agent hosts embed) -------------------------

APPS_CAPABILITIES = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [APP_MIME]}}}


async def test_the_typescript_client_reads_the_app_and_the_a2ui_resource_and_hears_an_attempt_close(live_server):
    from tests.acceptance.third_party import ok, ts_client

    ep = await vend(live_server.store)
    tid, agent = await history(live_server, ep)
    async with ts_client(live_server, ep.token, capabilities=APPS_CAPABILITIES) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        for name in ("get_todo", "claim", "claim_next"):
            assert tools[name]["_meta"]["ui"]["resourceUri"] == APP_URI, name
        templates = (await client.request("listResourceTemplates"))["resourceTemplates"]
        assert {"uriTemplate": "switchboard://todos/{id}/a2ui", "mimeType": A2UI_MIME} .items() <= \
            next(t for t in templates if t["name"] == "todo-a2ui").items()
        [page] = (await client.request("readResource", uri=APP_URI))["contents"]
        assert page["mimeType"] == APP_MIME and page["_meta"]["ui"]["csp"]["connectDomains"] == []
        shown = await client.call_tool("get_todo", {"id": tid})  # validated against the output schema
        ok(shown)
        assert shown["_meta"][VIEW_KEY] == todo_detail(await live_server.store.todo_get(agent, tid))
        [content] = (await client.request("readResource", uri=a2ui(tid)))["contents"]
        assert content["mimeType"] == A2UI_MIME
        assert_no_secrets(content["text"])
        for message in json.loads(content["text"]):
            assert problems(message) == []
        await client.request("subscribe", uri=a2ui(tid))
        await wait_until(lambda: doorbell(live_server).live_doorways(ep.endpoint_id) >= 1)  # its GET stream
        ok(await client.call_tool("complete", {"id": tid, "summary": "finished"}))  # attempt 6 closes
        deadline = asyncio.get_running_loop().time() + 10
        while a2ui(tid) not in await client.request("updated"):
            assert asyncio.get_running_loop().time() < deadline, "no notifications/resources/updated"
            await asyncio.sleep(0.05)
