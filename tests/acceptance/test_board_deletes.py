"""Deleting ended todos on the Board over HTTP: from the drawer (a confirmation page, then back
to the list view it came from with the result), in bulk (the bulk confirmation saying what
is deleted and what is skipped and why), the live list told, /metrics' counters and the
chart's counts unchanged, and another human's todos, or a todo that has not ended, never
deleted, even by a forged form."""

from __future__ import annotations

import html
import re

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_bulk import apply, confirm, counts_table, dead_letter, flash, form_fields, heading
from tests.acceptance.test_board_live import open_stream
from tests.acceptance.test_board_overview import cell
from tests.acceptance.test_metrics import scrape, value
from tests.conftest import make_agent, sql_rows


async def finished(store, agent, title: str, *, note: str | None = None) -> dict:
    todo = await store.todo_add(agent, queue=agent.queues[0], title=title)
    await store.todo_claim(agent, todo["id"], claimant=f"run-{title}")
    if note:
        await store.todo_note(agent, todo["id"], text=note)
    await store.todo_complete(agent, todo["id"], summary="finished")
    return todo


async def rows_of(db_url: str, ids: list[str]) -> dict[str, int]:
    """The rows of todos, attempts and attempt notes the ids have, read from the tables."""
    out = {}
    for table, column in (("todos", "id"), ("attempts", "todo_id"), ("attempt_notes", "todo_id")):
        rows = await sql_rows(db_url, f"SELECT count(*) AS n FROM {table} WHERE {column} = ANY(%s)", (ids,))
        out[table] = rows[0]["n"]
    return out


def form_action(page: str, path: str) -> str:
    """The action of the page's post form whose address starts with path."""
    m = re.search(r'<form method="post" action="(%s[^"]*)"' % re.escape(path), page)
    assert m, f"no form posting to {path}"
    return html.unescape(m.group(1))


async def test_deleting_from_the_drawer_asks_first_then_returns_to_the_view_with_the_result(live_server):
    store, db_url = live_server.store, live_server.settings.database_url
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    done = await finished(store, agent, "ship the release notes", note="halfway")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{done['id']}?state=done&sort=updated")).text
        ask = form_action(drawer, f"/todos/{done['id']}/confirm-delete")
        assert ask == f"/todos/{done['id']}/confirm-delete?state=done&sort=updated"
        page = await c.post(ask, data={"csrf_token": token})
        assert page.status_code == 200
        assert heading(page.text) == "Delete todo ship the release notes?"
        assert "with its 1 attempt and their notes, for good" in page.text
        go = form_action(page.text, f"/todos/{done['id']}/delete")
        assert go == f"/todos/{done['id']}/delete?state=done&sort=updated"
        assert f'href="/todos/{done["id"]}?state=done&amp;sort=updated">Keep it</a>' in page.text
        assert await rows_of(db_url, [done["id"]]) == {"todos": 1, "attempts": 1, "attempt_notes": 1}  # asked only
        r = await c.post(go, data={"csrf_token": token})
        assert r.status_code == 303 and r.headers["location"] == "/?state=done&sort=updated"
        landed = (await c.get(r.headers["location"])).text
    assert flash(landed) == "Deleted “ship the release notes” and its 1 attempt."
    assert "data-focus-on-load" in re.search(r'<p class="flash[^>]*>', landed).group(0)
    assert await rows_of(db_url, [done["id"]]) == {"todos": 0, "attempts": 0, "attempt_notes": 0}


async def test_a_todo_that_has_not_ended_has_no_delete_and_a_forged_one_deletes_nothing(live_server):
    store, db_url = live_server.store, live_server.settings.database_url
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    bob_agent = await make_agent(store, user=bob, agent_id="w2")
    pending = await store.todo_add(agent, queue="q", title="pending")
    held = await store.todo_add(agent, queue="q", title="held")
    await store.todo_claim(agent, held["id"])
    await store.todo_note(agent, held["id"], text="busy")
    bobs = await finished(store, bob_agent, "bob's done", note="bob's note")
    before = await rows_of(db_url, [pending["id"], held["id"], bobs["id"]])
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        for todo, state in ((pending, "pending"), (held, "claimed")):
            drawer = (await c.get(f"/todos/{todo['id']}")).text
            assert "confirm-delete" not in drawer and "Delete todo" not in drawer
            for step in ("confirm-delete", "delete"):
                r = await c.post(f"/todos/{todo['id']}/{step}?queue=q", data={"csrf_token": token})
                assert r.status_code == 303 and r.headers["location"] == f"/todos/{todo['id']}?queue=q"
                shown = flash((await c.get(r.headers["location"])).text)
                assert shown.startswith(f"Could not delete: the todo is {state}.")
        for step in ("confirm-delete", "delete"):  # another human's todo, or none at all: not found
            for todo_id in (bobs["id"], "no-such-todo"):
                r = await c.post(f"/todos/{todo_id}/{step}", data={"csrf_token": token})
                assert r.status_code == 404 and "bob" not in r.text
        # Without the CSRF token neither step does anything.
        assert (await c.post(f"/todos/{bobs['id']}/delete", data={})).status_code == 403
    assert await rows_of(db_url, [pending["id"], held["id"], bobs["id"]]) == before
    assert before == {"todos": 3, "attempts": 2, "attempt_notes": 2}


async def test_the_bulk_delete_confirmation_says_what_is_deleted_and_what_is_skipped_and_why(live_server):
    store, db_url = live_server.store, live_server.settings.database_url
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    dead = await dead_letter(store, agent, "dead")
    done = await finished(store, agent, "done")
    canceled = await store.todo_add(agent, queue="q", title="canceled")
    await store.todo_cancel(agent, canceled["id"])
    pending = await store.todo_add(agent, queue="q", title="pending")
    held = await store.todo_add(agent, queue="q", title="held")
    await store.todo_claim(agent, held["id"])
    retrying = await store.todo_add(agent, queue="q", title="retrying", max_attempts=3)
    await store.todo_claim(agent, retrying["id"])
    await store.todo_fail(agent, retrying["id"], summary="once")
    ended = [dead["id"], done["id"], canceled["id"]]
    kept = [pending["id"], held["id"], retrying["id"]]
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        board = (await c.get("/")).text
        assert '<button type="submit" name="action" value="delete">Delete selected…</button>' in board
        page = (await confirm(c, token, "delete", [*ended, *kept, "5b1c7f1e-0000-4000-8000-000000000000"],
                              view="?queue=q")).text
        assert heading(page) == "Delete 3 todos?"
        assert "You selected 7 todos. 3 will be deleted; 4 will be skipped." in " ".join(page.split())
        assert counts_table(page) == [("canceled", 1, "deleted"), ("dead letter", 1, "deleted"), ("done", 1, "deleted"),
                                      ("claimed", 1, "skipped"), ("failed, retry scheduled", 1, "skipped"),
                                      ("pending", 1, "skipped"), ("not found (gone, or not yours)", 1, "skipped")]
        assert "Only a done, canceled or dead-letter todo can be deleted: the others are skipped" in page
        assert 'class="danger">Delete 3 todos</button>' in page
        fields = form_fields(page, "/todos/bulk/apply")
        assert sorted(v for n, v in fields if n == "ids") == sorted(ended)
        landed = await apply(c, fields)
        assert flash(landed) == "Deleted 3 todos."
        # "Every todo in this view": the ended ones of the view, resolved again on the server.
        again = await finished(store, agent, "done later")
        every = (await confirm(c, token, "delete", every=True, view="?state=done")).text
        assert heading(every) == "Delete 1 todo?"
        assert "bulk-skips" not in every  # nothing skipped, nothing to explain
        assert flash(await apply(c, form_fields(every, "/todos/bulk/apply"))) == "Deleted 1 todo."
    assert await rows_of(db_url, [*ended, again["id"]]) == {"todos": 0, "attempts": 0, "attempt_notes": 0}
    assert [(await store.todo_get(ada, i))["state"] for i in kept] == ["pending", "claimed", "failed"]


async def test_a_forged_bulk_delete_naming_another_humans_todos_deletes_nothing_of_theirs(live_server):
    store, db_url = live_server.store, live_server.settings.database_url
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    bob_agent = await make_agent(store, user=bob, agent_id="w2")
    theirs = [(await finished(store, bob_agent, f"bob {i}", note=f"bob's note {i}"))["id"] for i in range(2)]
    theirs.append((await dead_letter(store, bob_agent, "bob's dead letter"))["id"])
    mine_pending = (await store.todo_add(agent, queue="q", title="mine pending"))["id"]
    before = await rows_of(db_url, theirs)
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        page = (await confirm(c, token, "delete", theirs)).text
        assert heading(page) == "Nothing to delete" and "/todos/bulk/apply" not in page and "bob" not in page
        landed = await apply(c, [("csrf_token", token), ("action", "delete"), ("filter", "")]
                             + [("ids", i) for i in [*theirs, mine_pending]])
        assert flash(landed) == "Deleted 0 todos. 4 were skipped because their state had moved on."
    assert await rows_of(db_url, theirs) == before == {"todos": 3, "attempts": 3, "attempt_notes": 2}
    assert (await store.todo_get(ada, mine_pending))["state"] == "pending"


def chart_text(page: str, queue: str) -> str:
    """What the overview's chart cell says of the queue's closed attempts."""
    return cell(page, queue, "chart")


async def test_deleting_leaves_the_closed_attempt_counters_and_the_chart_and_drops_the_todos_from_the_gauge(
        live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    done = [await finished(store, agent, f"done {i}") for i in range(3)]
    dead = await dead_letter(store, agent, "dead")
    before = await scrape(live_server.url)
    closed = {o: value(before, "switchboard_todo_attempts_closed_total", queue="builds", outcome=o)
              for o in ("completed", "failed")}
    assert closed == {"completed": 3, "failed": 1}
    assert value(before, "switchboard_todos", queue="builds", state="done") == 3
    counters = {k: v for k, v in before.items() if k[0].endswith("_total")}
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        chart = chart_text((await c.get("/")).text, "builds")
        assert "3 completed" in chart and "1 failed" in chart
        landed = await apply(c, [("csrf_token", token), ("action", "delete"), ("filter", "")]
                             + [("ids", t["id"]) for t in (*done[:2], dead)])
        assert flash(landed) == "Deleted 3 todos."
        assert chart_text(landed, "builds") == chart  # the counts written at close stay
    after = await scrape(live_server.url)
    assert {k: v for k, v in after.items() if k in counters} == counters  # no counter went down
    assert value(after, "switchboard_todos", queue="builds", state="done") == 1
    assert value(after, "switchboard_todos", queue="builds", state="failed") == 0


async def test_a_deleted_todo_leaves_every_open_list_of_its_human(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    done = await finished(store, agent, "to delete")
    async with client_for(live_server) as c, client_for(live_server) as watcher:
        token = await sign_in(c, "ada")
        await sign_in(watcher, "ada")
        async with open_stream(watcher) as stream:
            assert f'id="todo-{done["id"]}"' in stream.snapshot["rows"]
            r = await c.post(f"/todos/{done['id']}/delete", data={"csrf_token": token})
            assert r.status_code == 303
            data = await stream.next_todo(done["id"])
            assert data["gone"] is True and "row" not in data
