"""The Board's search over HTTP: every filter in the URL (bookmarkable, the form filled in
from it), keyset pages that keep the filters and the sort, the 400 page for a bad value, the
columns that say why (newest attempt, claimant, relative times), the dead-letter view's
narrower table, and the live stream's rows matched and rendered like the page's."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode

import pytest

from tests.acceptance.test_bad_input import assert_error_page
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.conftest import make_agent


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


def rows_of(page: str) -> dict[str, str]:
    """Each row of the list by its title."""
    found = {}
    for row in re.findall(r'<tr id="todo-.*?</tr>', page, re.S):
        found[html.unescape(re.search(r'class="todo-link"[^>]*>(.*?)</a>', row).group(1))] = row
    return found


def timeless(row: str) -> str:
    """A row without its relative times' words (they move on between two renderings)."""
    return re.sub(r"(<time [^>]*>)[^<]*(</time>)", r"\1\2", row)


def header_cells(page: str) -> list[str]:
    """The list's column headings (a row-selection column, if any, left out; the overview's
    table above it is not the list)."""
    thead = re.search(r'<table class="todos">.*?(<thead>.*?</thead>)', page, re.S).group(1)
    return [re.sub(r"<[^>]+>", "", re.sub(r'<span class="sort-mark".*?</span>', "", c)).strip()
            for c in re.findall(r"<th scope=\"col\"(?! class=\"select\")[^>]*>.*?</th>", thead, re.S)]


def data_cells(row: str) -> int:
    """How many data cells a row has (a row-selection cell, if any, left out)."""
    return len(re.findall(r"<td(?! class=\"select\")", row))


async def seed(store):
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    now = datetime.now(timezone.utc)
    for user, name in ((ada, "builder"), (bob, "bobs")):
        agent = await make_agent(store, user=user, agent_id=name, queues=("builds", "docs"))
        await store.todo_add(agent, queue="builds", title="Deploy to staging", payload={"env": "staging"},
                             now=now - timedelta(minutes=40))
        held = await store.todo_add(agent, queue="builds", title="Fix the flaky build", payload={"env": "prod"},
                                    now=now - timedelta(days=3))
        await store.todo_claim(agent, held["id"], claimant="harness/box/fixer/run-7", lease_seconds=600)
        dead = await store.todo_add(agent, queue="builds", title="Deploy to production", max_attempts=1,
                                    payload={"env": "prod"}, now=now - timedelta(minutes=20))
        await store.todo_claim(agent, dead["id"], claimant="harness/box/deployer/run-1")
        await store.todo_fail(agent, dead["id"], summary="<b>tests red</b>: " + "the suite failed again " * 10)
    return ada, bob


async def test_every_filter_is_in_the_url_and_fills_in_the_form(live_server):
    await seed(live_server.store)
    query = {"title": "DEPLOY", "claimant": "deployer", "payload_key": "env", "payload_value": "prod",
             "state": "failed", "queue": "builds", "dead_letter": "1", "sort": "updated"}
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        r = await c.get("/?" + urlencode(query))
        assert r.status_code == 200
        page = r.text
        assert list(rows_of(page)) == ["Deploy to production"]  # Ada's; Bob's matches too and is not here
        form = re.search(r'<form method="get" action="/" class="filters" role="search".*?</form>', page, re.S).group(0)
        for name in ("title", "claimant", "payload_key", "payload_value"):
            field = re.search(r'<input [^>]*name="%s"[^>]*>' % name, form).group(0)
            assert f'value="{query[name]}"' in field, name
            assert re.search(r'<label for="%s">' % re.search(r'id="([^"]+)"', field).group(1), form), name
        assert re.search(r'<option value="failed" selected>', form) and re.search(r'<option value="builds" selected>', form)
        assert re.search(r'<option value="updated" selected>', form) and 'name="dead_letter" value="1" checked' in form
        caption = re.search(r"<caption>(.*?)</caption>", page, re.S).group(1)
        for words in ("Dead letters", "title contains &ldquo;DEPLOY&rdquo;", "claimant contains &ldquo;deployer&rdquo;",
                      "payload env is &ldquo;prod&rdquo;", "state failed", "queue builds", "Sorted by Updated, latest first"):
            assert words in caption, words
        assert 'id="results-heading"' in page and "data-focus-on-load" in page
        assert 'data-live="/events?' in page and "payload_key=env" in page

        everything = await c.get("/")
        assert set(rows_of(everything.text)) == {"Deploy to staging", "Fix the flaky build", "Deploy to production"}
        assert "data-focus-on-load" not in everything.text  # nothing searched: focus stays put
        assert list(rows_of((await c.get("/?payload_key=env&payload_value=staging")).text)) == ["Deploy to staging"]
        assert list(rows_of((await c.get("/?claimant=FIXER")).text)) == ["Fix the flaky build"]


async def test_older_pages_keep_the_filters_and_the_sort(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("q",))
    now = datetime.now(timezone.utc)
    for i in range(55):
        await store.todo_add(agent, queue="q", title=f"match {i:02d}", now=now - timedelta(minutes=100 - i))
        await store.todo_add(agent, queue="q", title=f"other {i:02d}", now=now - timedelta(minutes=100 - i))
    old = (await store.todo_list(ada, title="match 00"))["todos"][0]
    await store.todo_claim(agent, old["id"])  # the oldest match is the latest updated
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        first = (await c.get("/?title=match&sort=updated")).text
        shown = list(rows_of(first))
        assert len(shown) == 50 and shown[0] == "match 00" and shown[1] == "match 54"
        older = re.search(r'<a id="older-todos" href="(/\?[^"]+)">Older todos</a>', first).group(1)
        older = html.unescape(older)
        assert "title=match" in older and "sort=updated" in older and "cursor=" in older
        second = (await c.get(older)).text
        assert list(rows_of(second)) == [f"match {i:02d}" for i in range(5, 0, -1)]
        assert '<p id="older-todos-line" hidden>' in second
        # The cursor carries the sort: used with the other sort it is refused, not misread.
        cursor = re.search(r"cursor=([^&]+)", older).group(1)
        assert_error_page(await c.get(f"/?title=match&cursor={cursor}"), 400, "cursor", "updated")


@pytest.mark.parametrize("query,words", [
    ("state=bogus", ("state", "pending")),
    ("sort=titel", ("sort", "created", "title_desc")),
    ("dead_letter=maybe", ("dead_letter",)),
    ("queue=no%20such%20queue!", ("queue",)),
    ("payload_value=prod", ("payload_value", "payload_key")),
    ("title=" + "x" * 501, ("title", "500")),
    ("cursor=nonsense", ("cursor",)),
])
async def test_a_bad_filter_value_gets_the_400_page_naming_it(live_server, query, words):
    await seed(live_server.store)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        for path in ("/", "/events"):
            assert_error_page(await c.get(f"{path}?{query}"), 400, *words)


async def test_the_list_says_why_with_the_newest_attempt_the_claimant_and_relative_times(live_server):
    await seed(live_server.store)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/")).text
        assert header_cells(page) == ["Title", "Queue", "State", "Attempt", "Last attempt", "Holder", "Lease or retry",
                                      "Created", "Updated"]
        assert re.search(r'<th scope="col" aria-sort="descending"><a class="sort-link" href="/\?sort=created_asc" '
                         r'aria-describedby="sort-help" title="Sort oldest first">Created', page)
        rows = rows_of(page)
        dead = re.search(r'<td class="last-attempt"[^>]*>(.*?)</td>', rows["Deploy to production"], re.S).group(1)
        start = re.search(r'<span class="summary-start">(.*?)</span>', dead).group(1)
        assert "failed" in dead and start.startswith("&lt;b&gt;tests red&lt;/b&gt;: the suite failed again")
        assert html.unescape(start).endswith("\u2026") and len(html.unescape(start)) <= 81
        held = rows["Fix the flaky build"]
        assert re.search(r'<span class="outcome">open</span>', held)
        assert "agent:builder" in held and "harness/box/fixer/run-7" in held  # the holder's claimant beside it
        assert "none yet" in rows["Deploy to staging"]
        times = re.findall(r'<time datetime="([^"]+)" title="([^"]+)" data-relative[^>]*>([^<]+)</time>', held)
        lease, created, updated = (t[2] for t in times)
        assert re.fullmatch(r"in \d+ min", lease) and created == "3 days ago"
        assert re.fullmatch(r"just now|\d+ s ago", updated)
        assert all(t[0].endswith("Z") and t[1].endswith("UTC") for t in times)

        dead_view = (await c.get("/?dead_letter=1")).text
        assert header_cells(dead_view) == ["Title", "Queue", "State", "Attempt", "Last attempt", "Created", "Updated"]
        assert data_cells(rows_of(dead_view)["Deploy to production"]) == 6  # and the title's th
        updated = (await c.get("/?sort=updated")).text
        assert re.search(r'<th scope="col" aria-sort="descending"><a class="sort-link" href="/\?sort=updated_asc" '
                         r'[^>]*>Updated', updated)
        assert len(re.findall(r"aria-sort=", updated)) == 1


async def test_the_live_stream_matches_rows_by_every_filter_and_renders_them_as_the_page_does(live_server):
    store = live_server.store
    ada, _ = await seed(store)
    agent = await make_agent(store, user=ada, agent_id="late", queues=("builds",))
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c, "?title=deploy&dead_letter=1") as stream:
            assert list(rows_of(stream.snapshot["rows"])) == ["Deploy to production"]
            todo = await store.todo_add(agent, queue="builds", title="Deploy the docs", max_attempts=1)
            added = await stream.next_todo(todo["id"])
            assert added["matches"] is False  # pending: not a dead letter
            await store.todo_claim(agent, todo["id"], claimant="late-runner")
            await stream.next_todo(todo["id"])
            await store.todo_fail(agent, todo["id"], summary="no docs host")
            died = await stream.next_todo(todo["id"])
            assert died["matches"] is True
            page = (await c.get("/?title=deploy&dead_letter=1")).text
            live_row, page_row = rows_of(died["row"])["Deploy the docs"], rows_of(page)["Deploy the docs"]
            assert timeless(live_row) == timeless(page_row)  # the same columns, from the same partial
            assert "no docs host" in live_row and data_cells(live_row) == 6
        async with open_stream(c, "?claimant=late") as stream:
            assert list(rows_of(stream.snapshot["rows"])) == ["Deploy the docs"]


async def test_a_bulk_action_on_all_in_a_searched_view_takes_only_the_todos_the_search_shows(live_server):
    from tests.acceptance.test_board_bulk import apply, confirm, form_fields, heading

    store = live_server.store
    ada, bob = await seed(store)
    agent = await make_agent(store, user=ada, agent_id="more", queues=("builds",))
    for title in ("Deploy the docs", "Rebuild the cache"):
        todo = await store.todo_add(agent, queue="builds", title=title, max_attempts=1)
        await store.todo_claim(agent, todo["id"], claimant="harness/box/deployer/run-2")
        await store.todo_fail(agent, todo["id"], summary="no luck")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        view = "?title=deploy&claimant=deployer&dead_letter=1"
        assert set(rows_of((await c.get("/" + view)).text)) == {"Deploy the docs", "Deploy to production"}
        page = await confirm(c, token, "retry", every=True, view=view)
        assert heading(page.text) == "Retry 2 todos?"
        await apply(c, form_fields(page.text, "/todos/bulk/apply"))
    states = {t["title"]: t["state"] for t in (await store.todo_list(ada, limit=50))["todos"]}
    assert states["Deploy the docs"] == states["Deploy to production"] == "pending"
    assert states["Rebuild the cache"] == "failed"  # a dead letter the search did not show
    assert [t["state"] for t in (await store.todo_list(bob, title="production"))["todos"]] == ["failed"]
