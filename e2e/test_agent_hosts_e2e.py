"""A todo drawn in an agent host, in Chromium: the A2UI todo detail resource rendered by
@a2ui/lit, and the MCP App inside a test host page built on @modelcontextprotocol/ext-apps'
host bridge. The renderer and the bridge come from tests/clients/node_modules (the versions
package-lock.json pins), bundled here with esbuild and served by a small HTTP server of the
test's own; the todo comes from the real server through a real MCP client. In both, in light
and dark: the attempts newest first, the died marker named "died: no report", a markup
summary as text with no dialog, an mcp:// artifact that is not a link, and no axe violation."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import json
import re
import subprocess
import threading
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from e2e.conftest import AXE_OPTIONS, make_human
from tests.acceptance.mcp_helpers import Inbox, McpApps, connect, doorbell, vend, wait_until
from tests.conftest import LOAD_SLACK_SECONDS
from tests.todo_history import HTTPS_ARTIFACT, MCP_ARTIFACT, XSS, todo_with_every_kind_of_attempt

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
ESBUILD = CLIENTS / "node_modules" / ".bin" / "esbuild"
APP_URI = "ui://switchboard/todo"
DIED = "died: no report"
SCHEMES = ("light", "dark")

HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><link rel="icon" href="data:,">
<style>
:root {{ color-scheme: light dark; }}
body {{ margin: 0; padding: 16px; font-family: system-ui, sans-serif; background: Canvas; color: CanvasText; }}
iframe {{ width: 100%; min-height: 600px; border: 1px solid GrayText; }}
</style></head>
<body><main><h1>{title}</h1><div id="host"></div></main>
<script type="module" src="/{script}"></script></body></html>
"""


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(a2ui_enabled=True)


@pytest.fixture(scope="session")
def host_site(tmp_path_factory):
    """The two test host pages and their bundles, on 127.0.0.1 (no other origin is used)."""
    site = tmp_path_factory.mktemp("agent-hosts")
    for entry in ("a2ui_host", "app_host"):
        subprocess.run([str(ESBUILD), f"hosts/{entry}.mjs", "--bundle", "--format=esm", "--log-level=warning",
                        f"--outfile={site / (entry + '.js')}"], cwd=CLIENTS, check=True, timeout=120)
    (site / "a2ui.html").write_text(HOST_PAGE.format(title="A2UI test host", script="a2ui_host.js"))
    (site / "app.html").write_text(HOST_PAGE.format(title="MCP Apps test host", script="app_host.js"))
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript"}

    def log_message(self, *args) -> None:  # the test's output stays readable
        pass


@contextlib.asynccontextmanager
async def host_page(browser, scheme: str):
    context = await browser.new_context(color_scheme=scheme, viewport={"width": 1000, "height": 900})
    page = await context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), asyncio.ensure_future(d.dismiss())))
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    try:
        yield page
    finally:
        await context.close()


async def no_violations(target, what: str) -> None:
    results = await Axe().run(target, options=AXE_OPTIONS)
    passed = [r["id"] for r in results.response["passes"]]
    assert "color-contrast" in passed, f"axe checked no text on {what}: {passed}"  # it ran where the text is
    assert results.violations_count == 0, f"axe found violations on {what}:\n{results.generate_report()}"


async def history(server):
    store = server.store
    human = await make_human(store, "ada")
    ep = await vend(store, user_id=human.user_id)
    agent = await store.endpoint_authenticate(ep.token)
    return ep, await todo_with_every_kind_of_attempt(store, agent, human)


NEWEST_FIRST = [re.compile(r"^Attempt 6, open"), re.compile(r"^Attempt 5, was handed back .* by board/ada"),
                re.compile(r"^Attempt 4, died"), re.compile(r"^Attempt 3, died"),
                re.compile(r"^Attempt 2, was handed back"), re.compile(r"^Attempt 1, failed .*: <script>")]


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a2ui_lit_draws_the_a2ui_resource_newest_first_with_inert_summaries(browser, live_server, host_site,
                                                                                 scheme):
    ep, tid = await history(live_server)
    uri = f"switchboard://todos/{tid}/a2ui"
    async with connect(live_server, ep.token, "legacy") as client:
        messages = json.loads((await client.read_resource(uri)).contents[0].text)
        async with host_page(browser, scheme) as page:
            await page.goto(host_site + "/a2ui.html")
            await page.wait_for_function("typeof window.renderA2ui === 'function'")
            await page.evaluate("messages => window.renderA2ui(messages)", messages)
            sentences = page.get_by_role("heading", level=4)
            await expect(sentences).to_have_text(NEWEST_FIRST)
            await expect(page.get_by_text(DIED, exact=True)).to_have_count(2)
            await expect(page.get_by_text(re.compile("^" + re.escape(XSS) + " then log line"))).to_have_count(1)
            await expect(page.get_by_text(MCP_ARTIFACT, exact=True)).to_be_visible()
            await expect(page.get_by_role("link", name=MCP_ARTIFACT)).to_have_count(0)
            await expect(page.get_by_role("button", name=MCP_ARTIFACT)).to_have_count(0)
            await no_violations(page, f"the A2UI surface ({scheme})")
            # A change reaches the drawn surface as its updateDataModel message alone.
            await client.call_tool("complete", {"id": tid, "summary": "finished"})
            changed = json.loads((await client.read_resource(uri)).contents[0].text)
            assert changed[:2] == messages[:2]
            await page.evaluate("messages => window.updateA2ui(messages)", changed[2:])
            await expect(sentences.first).to_have_text(re.compile(r"^Attempt 6, completed .*: finished$"))
            assert page.dialogs == [] and page.console_errors == [], (page.dialogs, page.console_errors)


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_the_mcp_app_draws_get_todo_in_the_host_theme_and_refreshes_through_the_host(browser, live_server,
                                                                                          host_site, scheme):
    ep, tid = await history(live_server)
    inbox = Inbox()
    a2ui_uri = f"switchboard://todos/{tid}/a2ui"
    async with connect(live_server, ep.token, "legacy", extensions=[McpApps()], inbox=inbox) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["get_todo"].meta["ui"]["resourceUri"] == APP_URI
        [app] = (await client.read_resource(APP_URI)).contents
        result = await client.call_tool("get_todo", {"id": tid})
        calls: list[dict] = []

        async def host_call_tool(params: dict) -> dict:
            """The app's tools/call, made by the host's own MCP client."""
            calls.append(params)
            answer = await client.call_tool(params["name"], params.get("arguments") or {})
            return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

        async with host_page(browser, scheme) as page:
            await page.expose_function("hostCallTool", host_call_tool)
            await page.goto(host_site + "/app.html")
            await page.wait_for_function("typeof window.startApp === 'function'")
            await page.evaluate("([html, theme]) => window.startApp(html, theme)", [app.text, scheme])
            await page.evaluate("result => window.sendResult(result)",
                                result.model_dump(by_alias=True, mode="json", exclude_none=True))
            frame = page.frame_locator("iframe")
            await expect(frame.get_by_role("heading", level=1)).to_have_text("Fix the flaky build")
            await expect(frame.get_by_role("heading", level=3)).to_have_text(NEWEST_FIRST)
            await expect(frame.locator("html")).to_have_attribute("data-theme", scheme)
            await expect(frame.get_by_role("img", name=DIED)).to_have_count(2)
            await expect(frame.locator(".summary").last).to_have_text(re.compile("^" + re.escape(XSS)))
            await expect(frame.get_by_role("link", name=MCP_ARTIFACT)).to_have_count(0)
            await expect(frame.get_by_text(MCP_ARTIFACT, exact=True)).to_be_visible()
            await expect(frame.get_by_role("link", name=HTTPS_ARTIFACT)).to_have_count(1)
            app_frame = next(f for f in page.frames if f != page.main_frame)
            await no_violations(app_frame, f"the MCP App ({scheme})")
            await no_violations(page, f"the MCP Apps test host ({scheme})")
            # The attempt closes; the host hears it from the server and relays it; the app reads
            # the todo again by asking the host to call get_todo.
            await wait_until(lambda: doorbell(live_server).live_doorways(ep.endpoint_id) >= 1)  # its GET stream
            await client.subscribe_resource(a2ui_uri)
            await client.call_tool("complete", {"id": tid, "summary": "finished"})
            await inbox.wait_for(a2ui_uri)
            await page.evaluate("uri => window.relayUpdated(uri)", a2ui_uri)
            await expect(frame.get_by_role("heading", level=3).first).to_have_text(
                re.compile(r"^Attempt 6, completed .*: finished$"))
            assert calls and calls[-1] == {"name": "get_todo", "arguments": {"id": tid}}
            assert page.dialogs == [], page.dialogs
            blocked = [e for e in page.console_errors if re.search(r"Content Security Policy|Refused to", e)]
            assert blocked == [] and page.console_errors == [], page.console_errors


async def test_the_mcp_app_given_a_claims_result_reads_the_todo_through_the_host(browser, live_server, host_site):
    store = live_server.store
    human = await make_human(store, "ada")
    ep = await vend(store, user_id=human.user_id)
    async with connect(live_server, ep.token, "legacy", extensions=[McpApps()]) as client:
        await client.call_tool("add_todo", {"queue": "q", "title": "Write the release notes"})
        [app] = (await client.read_resource(APP_URI)).contents
        claimed = await client.call_tool("claim_next", {"claimant": "run-1"})  # a claim carries no view

        async def host_call_tool(params: dict) -> dict:
            answer = await client.call_tool(params["name"], params.get("arguments") or {})
            return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

        async with host_page(browser, "light") as page:
            await page.expose_function("hostCallTool", host_call_tool)
            await page.goto(host_site + "/app.html")
            await page.wait_for_function("typeof window.startApp === 'function'")
            await page.evaluate("([html, theme]) => window.startApp(html, theme)", [app.text, "light"])
            await page.evaluate("result => window.sendResult(result)",
                                claimed.model_dump(by_alias=True, mode="json", exclude_none=True))
            frame = page.frame_locator("iframe")
            await expect(frame.get_by_role("heading", level=1)).to_have_text("Write the release notes")
            await expect(frame.get_by_role("heading", level=3)).to_have_text([re.compile(r"^Attempt 1, open")])
            await expect(frame.get_by_role("status")).to_have_text("Showing attempts of Write the release notes.")
            assert page.dialogs == [] and page.console_errors == [], page.console_errors


HOST_WAIT = 4.0  # seconds the MCP App waits for a host's answer to ui/initialize (HOST_WAIT_MS)


async def test_the_mcp_app_opened_with_no_host_says_it_needs_one_within_a_few_seconds(browser, live_server, host_site):
    """The page as the resource serves it, opened on its own in a tab: nobody answers its
    ui/initialize, and its live region says it needs an MCP host instead of waiting forever."""
    human = await make_human(live_server.store, "ada")
    ep = await vend(live_server.store, user_id=human.user_id)
    async with connect(live_server, ep.token, "legacy", extensions=[McpApps()]) as client:
        [app] = (await client.read_resource(APP_URI)).contents
    async with host_page(browser, "light") as page:
        url = host_site + "/todo-app.html"
        await page.route(url, lambda route: route.fulfill(body=app.text, content_type="text/html"))
        await page.goto(url)
        status = page.get_by_role("status")
        await expect(status).to_have_text(re.compile(r"^This view needs an MCP host that supports MCP Apps"),
                                          timeout=(HOST_WAIT + LOAD_SLACK_SECONDS) * 1000)
        await expect(page.locator("#todo")).to_be_hidden()
        await no_violations(page, "the MCP App with no host")
        assert page.dialogs == [] and page.console_errors == [], page.console_errors
