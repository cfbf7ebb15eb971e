"""Where the Board's forms return to, over HTTP: the bulk confirmation's Back leads to the
same view and page with the same boxes ticked (or "all in this view"), and the message after
adding a todo ends with a link to it that takes focus, without any script."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_bulk import as_form, confirm
from tests.conftest import make_agent


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


def back_link(page: str) -> str:
    m = re.search(r'<a href="([^"]*)">Back to the Board', page)
    assert m, "no Back link"
    return html.unescape(m.group(1))


def ticked(page: str) -> set[str]:
    return set(re.findall(r'<input type="checkbox" id="select-([^"]+)" name="ids" value="[^"]+" form="bulk-form" '
                          r'checked>', page))


async def test_back_from_the_bulk_confirmation_ticks_the_same_boxes_in_the_same_view_and_page(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    todos = [await store.todo_add(agent, queue="builds", title=f"todo {i:02d}") for i in range(55)]
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        first = (await c.get("/?queue=builds")).text
        older = html.unescape(re.search(r'<a id="older-todos" href="(/\?[^"]*cursor=[^"]+)">Older todos</a>', first).group(1))
        cursor = parse_qs(urlsplit(older).query)["cursor"][0]
        second = (await c.get(older)).text
        assert f'<input type="hidden" name="cursor" value="{html.escape(cursor)}">' in second
        on_page = [t["id"] for t in todos[:5]]  # the oldest: on the second page
        r = await c.post("/todos/bulk", data=as_form([("csrf_token", token), ("action", "cancel"),
                                                      ("filter", "?queue=builds"), ("cursor", cursor)]
                                                     + [("ids", i) for i in on_page[:2]]))
        back = back_link(r.text)
        query = parse_qs(urlsplit(back).query)
        assert (query["queue"], query["cursor"], query["selected"]) == (["builds"], [cursor], on_page[:2])
        landed = (await c.get(back)).text
        assert ticked(landed) == set(on_page[:2])
        assert 'name="scope" value="filter">' in landed  # "all in this view" stays unticked

        # "All in this view": Back ticks that box, and no row's.
        every = (await confirm(c, token, "cancel", every=True, view="?queue=builds")).text
        back = back_link(every)
        assert parse_qs(urlsplit(back).query) == {"queue": ["builds"], "every": ["1"]}
        landed = (await c.get(back)).text
        assert 'name="scope" value="filter" checked>' in landed and not ticked(landed)

        # A cursor that does not read is dropped (the first page), never an error.
        r = await c.post("/todos/bulk", data=as_form([("csrf_token", token), ("action", "cancel"),
                                                      ("filter", "?queue=builds"), ("cursor", "nonsense"),
                                                      ("ids", todos[-1]["id"])]))
        back = back_link(r.text)
        assert "cursor" not in back and (await c.get(back)).status_code == 200
    assert {(await store.todo_get(ada, t["id"]))["state"] for t in todos} == {"pending"}  # Back changed nothing


async def test_the_board_ticks_only_its_own_rows_named_in_the_query(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    mine = await store.todo_add(await make_agent(store, user=ada, agent_id="a"), queue="q", title="mine")
    theirs = await store.todo_add(await make_agent(store, user=bob, agent_id="b"), queue="q", title="theirs")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = await c.get("/", params=[("selected", mine["id"]), ("selected", theirs["id"]),
                                        ("selected", "<script>"), ("selected", "x\u0000y")])
        assert page.status_code == 200
        assert ticked(page.text) == {mine["id"]} and f'id="todo-{theirs["id"]}"' not in page.text
        assert "<script>" not in page.text


async def test_the_message_after_adding_a_todo_ends_with_a_focused_link_to_it(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="fixer", queues=("builds",))
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post("/todos/new", data={"csrf_token": token, "target": f"{agent.endpoint_id}:builds",
                                             "title": "Ship <it> & tell", "max_attempts": "3"})
        assert r.status_code == 303
        [todo] = (await store.todo_list(ada))["todos"]
        landed = (await c.get("/")).text
        again = (await c.get("/")).text
    message = re.search(r'<p class="flash flash-success"[^>]*>(.*?)</p>', landed, re.S).group(1)
    assert '<span id="flash-text">Added “Ship &lt;it&gt; &amp; tell” to queue builds. It is pending.</span>' in message
    link = re.search(r"<a [^>]*>[^<]*</a>", message).group(0)
    assert f'href="/todos/{todo["id"]}"' in link and 'aria-describedby="flash-text"' in link
    assert " autofocus" in link and "data-focus-on-load" in link  # focus, with and without script
    assert link.endswith(">Open “Ship &lt;it&gt; &amp; tell”</a>")
    assert "flash-link" not in again  # shown once
