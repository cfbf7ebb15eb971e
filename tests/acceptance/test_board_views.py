"""The Board's list as peer consoles offer it: every column sorts both ways (aria-sort on
the sorted heading, its link saying what a click does) and pages through ties without
repeating or skipping a todo; a page size of 25, 50 or 100; the search box takes a todo's
id and goes to it, while an id of no todo of the human's is a 404 that says so."""

from __future__ import annotations

import html
import re
from datetime import timezone

from tests.acceptance.test_bad_input import assert_error_page
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import make_agent, sql_rows
from board.store.vocabulary import BOARD_SORTS, STATES

ROW_ID = re.compile(r'<tr id="todo-([^"]+)"')


def iso(at) -> str:
    return "" if at is None else at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")


async def thirty_todos(store, human):
    """30 todos in two queues with many ties: five titles (two differing only in case), five
    priorities, some claimed, failed, done or canceled, some never claimed."""
    agent = await make_agent(store, user=human, agent_id="w", queues=("alpha", "beta"))
    titles = ("Deploy", "deploy", "Build", "Zip", "apple")
    for i in range(30):
        todo = await store.todo_add(agent, queue=("alpha", "beta")[i % 2], title=titles[i % 5], max_attempts=3,
                                    priority=(i * 3) % 5)
        if i % 3 == 0:
            await store.todo_claim(agent, todo["id"], lease_seconds=600 + i)
            if i % 2 == 0:
                await store.todo_fail(agent, todo["id"], summary="red")  # retry later
            elif i % 9 == 0:
                await store.todo_complete(agent, todo["id"])
        elif i % 7 == 0:
            await store.todo_cancel(agent, todo["id"])
    return agent


def expected_order(rows: list[dict], sort: str) -> list[str]:
    column, descending = BOARD_SORTS[sort]
    key = {
        "title": lambda r: r["title"].lower(),
        "queue": lambda r: r["queue"],
        "state": lambda r: f"{STATES.index(r['state']) + 1:02d}",
        "attempt": lambda r: f"{r['attempt']:010d}",
        "last": lambda r: r["last_outcome"] or "",
        "holder": lambda r: r["owner"] or "",
        "deadline": lambda r: iso(r["lease_expires_at"] or r["next_retry_at"]),
        "created": lambda r: iso(r["created_at"]),
        "updated": lambda r: iso(r["updated_at"]),
        "priority": lambda r: f"{r['priority']}{iso(r['created_at'])}",  # oldest first within a priority
    }[column]
    return [r["id"] for r in sorted(rows, key=lambda r: (key(r).encode(), r["id"].encode()), reverse=descending)]


async def test_every_column_sorts_both_ways_and_pages_through_ties_without_repeats_or_gaps(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await thirty_todos(store, ada)
    bob = await make_agent(store, user=await make_human(store, "bob"), agent_id="b", queues=("alpha",))
    await store.todo_add(bob, queue="alpha", title="Bob's")  # never in Ada's list
    rows = await sql_rows(live_server.settings.database_url, """
        SELECT t.*, t.state::text AS state, a.outcome::text AS last_outcome FROM todos t
          LEFT JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total
         WHERE t.title <> 'Bob''s'""")
    assert len(rows) == 30
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        for sort in BOARD_SORTS:
            seen, url, pages = [], f"/?sort={sort}&page_size=25", 0
            while url:
                page = (await c.get(url)).text
                pages += 1
                seen += ROW_ID.findall(page)
                more = re.search(r'<p id="older-todos-line"><a id="older-todos" href="(/\?[^"]*cursor=[^"]+)">(?:Older todos|Next page)</a></p>', page)
                url = html.unescape(more.group(1)) if more else None
            assert pages == 2, sort
            assert seen == expected_order(rows, sort), sort


async def test_a_column_heading_says_its_sort_and_links_to_the_other_order(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await thirty_todos(store, ada)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/?queue=alpha")).text
        heading = r'<th scope="col"([^>]*)><a class="sort-link" href="([^"]+)" aria-describedby="sort-help" title="([^"]+)">Title'
        title = re.search(heading, page)
        assert title.group(1) == "" and html.unescape(title.group(2)) == "/?queue=alpha&sort=title"
        assert title.group(3) == "Sort A to Z"
        page = (await c.get("/?queue=alpha&sort=title")).text
        title = re.search(heading, page)
        assert title.group(1) == ' aria-sort="ascending"' and title.group(3) == "Sort Z to A"
        assert html.unescape(title.group(2)) == "/?queue=alpha&sort=title_desc"
        assert re.search(r'<p id="sort-help" class="visually-hidden">A column heading sorts the list', page)
        assert len(re.findall("aria-sort=", page)) == 1
        assert "Sorted by Title, A to Z." in page
        assert '<option value="title" selected>Title, A to Z</option>' in page


async def test_the_page_size_is_25_50_or_100_and_kept_by_paging(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await thirty_todos(store, ada)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        assert len(ROW_ID.findall((await c.get("/")).text)) == 30
        page = (await c.get("/?page_size=25")).text
        assert len(ROW_ID.findall(page)) == 25 and 'data-page-size="25"' in page
        assert '<option value="25" selected>25</option>' in page
        older = html.unescape(re.search(r'<p id="older-todos-line"><a id="older-todos" href="([^"]+)">Older todos</a></p>', page).group(1))
        assert "page_size=25" in older and len(ROW_ID.findall((await c.get(older)).text)) == 5
        for bad in ("30", "0", "all"):
            assert_error_page(await c.get(f"/?page_size={bad}"), 400, "page_size", "25, 50 or 100")


async def test_the_search_box_goes_to_a_todo_by_its_id_and_a_foreign_or_unknown_id_is_not_found(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    bob_agent = await make_agent(store, user=bob, agent_id="b", queues=("q",))
    mine = await store.todo_add(agent, queue="q", title="Mine")
    await store.todo_add(agent, queue="q", title="deploy the thing")
    theirs = await store.todo_add(bob_agent, queue="q", title="Theirs")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        r = await c.get("/", params={"title": f"  {mine['id']} "})
        assert r.status_code == 303 and r.headers["location"] == f"/todos/{mine['id']}"
        foreign = await c.get("/", params={"title": theirs["id"]})
        unknown = await c.get("/", params={"title": "0b7e6a52-3d1c-4b8e-9f5a-6c2d1e0f9a8b"})
        for r, todo_id in ((foreign, theirs["id"]), (unknown, "0b7e6a52-3d1c-4b8e-9f5a-6c2d1e0f9a8b")):
            assert r.status_code == 404
            assert f"No todo of yours has the id <code>{todo_id}</code>" in r.text
        assert foreign.text.replace(theirs["id"], "X") == unknown.text.replace("0b7e6a52-3d1c-4b8e-9f5a-6c2d1e0f9a8b", "X")
        assert "Theirs" not in foreign.text
        found = await c.get("/", params={"title": "deploy"})  # a title is still searched for
        assert found.status_code == 200 and ROW_ID.findall(found.text) and "deploy the thing" in found.text
