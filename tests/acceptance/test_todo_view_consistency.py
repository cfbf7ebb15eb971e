"""One todo with every kind of attempt, shown three ways: the Board's drawer (HTML), the A2UI
todo detail resource's data model and the MCP App's input (get_todo's _meta for an apps
host). All three are the one todo detail view (board/view/todo_detail.py) computed from a
store read, so none can drift from the others."""

from __future__ import annotations

import html
import json
import re

import pytest

from board.view.todo_detail import todo_detail
from tests.acceptance.mcp_helpers import McpApps, connect, vend
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.todo_history import HTTPS_ARTIFACT, MCP_ARTIFACT, XSS, todo_with_every_kind_of_attempt


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(a2ui_enabled=True, reaper_interval_seconds=0, retry_interval_seconds=0)


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def drawer_attempts(page: str) -> dict[int, str]:
    """Each attempt's HTML in the drawer, by seq, in page order."""
    parts = re.split(r'(?=<li id="attempt-\d+")', page)
    return {int(re.match(r'<li id="attempt-(\d+)"', p).group(1)): p for p in parts if p.startswith('<li id="attempt-')}


async def test_the_drawer_the_a2ui_data_model_and_the_mcp_app_show_one_view(live_server):
    store = live_server.store
    human = await make_human(store, "ada")
    ep = await vend(store, user_id=human.user_id)
    agent = await store.endpoint_authenticate(ep.token)
    tid = await todo_with_every_kind_of_attempt(store, agent, human)

    # The MCP App's input and the A2UI data model, over MCP.
    async with connect(live_server, ep.token, "legacy", extensions=[McpApps()]) as host:
        app_input = (await host.call_tool("get_todo", {"id": tid})).meta["switchboard/todo_detail"]
        messages = json.loads((await host.read_resource(f"switchboard://todos/{tid}/a2ui")).contents[0].text)
    a2ui_model = messages[2]["updateDataModel"]["value"]["todo"]
    # The drawer, over HTTP as the owner sees it; and the view from the owner's own read.
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get(f"/todos/{tid}/drawer")).text
    view = todo_detail(await store.todo_get(human, tid))

    assert app_input == view
    assert a2ui_model == view
    assert view == todo_detail(await store.todo_get(agent, tid))  # the owner's read and the agent's agree
    for shown in (json.dumps(view), page, json.dumps(messages)):
        assert "claimer_session" not in shown and "lease_token" not in shown

    kinds = {a["outcome"] for a in view["attempts"]}
    assert kinds == {None, "failed", "released", "lease_expired", "reaped"}
    items = drawer_attempts(page)
    assert list(items) == [a["seq"] for a in view["attempts"]] == [6, 5, 4, 3, 2, 1]
    for a in view["attempts"]:
        item = items[a["seq"]]
        plain = html.unescape(item)  # Jinja and html.escape spell quotes differently
        assert text(re.search(r'<h4 class="attempt-title">(.*?)</h4>', item, re.S).group(1)) == a["sentence"]
        assert ('aria-label="died: no report"' in item) == bool(a["died_marker"]), a["seq"]
        assert f"<dd>{a['counted_text']}</dd>" in plain
        if not a["open"]:
            assert f"<dd>{a['disposition_words']}</dd>" in plain
            summary = re.search(r'<span class="summary">(.*?)</span>', item, re.S)
            assert (html.unescape(summary.group(1)) if summary else None) == a["summary"], a["seq"]
            assert ("Truncated: the summary was cut" in item) == bool(a["truncated_mark"])
            links = re.findall(r'<a href="([^"]*)"', item)
            assert [html.unescape(u) for u in links] == [x["url"] for x in a["artifact_link"]]
    by_seq = {a["seq"]: a for a in view["attempts"]}
    assert by_seq[1]["summary"].startswith(XSS) and by_seq[1]["truncated_mark"] and "<script>" not in page
    assert by_seq[1]["artifact_text"] == MCP_ARTIFACT and f"<code>{MCP_ARTIFACT}</code>" in items[1]
    assert by_seq[2]["artifact_link"] == [{"url": HTTPS_ARTIFACT}]
    assert by_seq[5]["claimer_kind"] == "owner"
    [current] = view["current"]
    assert f'<span class="liveness liveness-{current["level"]}">{current["level"]}</span> ' \
           f'{current["explanation"]}.' in html.unescape(page)
    assert view["attempts_count_text"] in html.unescape(page)
    assert f"<dd>{view['attempt_text']}</dd>" in page
