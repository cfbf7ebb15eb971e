"""Notes on the Board over HTTP: the drawer lists an attempt's notes (author kind shown, text
escaped), the owning human adds one through a CSRF-checked form with a refusal shown next
to the field, another human's todo is not found, and a note reaches a watched drawer live."""

from __future__ import annotations

import re

from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.conftest import make_agent, sql_rows


def attempt_html(page: str, seq: int) -> str:
    return re.search(rf'<li id="attempt-{seq}".*?</dl>.*?(?=<li id="attempt-|</ol>\s*</section>)', page, re.S).group(0)


async def test_the_drawer_lists_an_attempts_notes_with_their_author_kind_escaped(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="noted")
    await store.todo_claim(agent, todo["id"])
    await store.todo_note(agent, todo["id"], text="<script>alert(1)</script> tried X")
    await store.todo_note(ada, todo["id"], text="X is known broken")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get(f"/todos/{todo['id']}")).text
    a1 = attempt_html(page, 1)
    assert "Notes (2)" in a1
    assert '<li id="note-1-2"' in a1 and '<li id="note-1-1"' in a1
    assert a1.index("note-1-2") < a1.index("note-1-1")  # newest first
    assert "&lt;script&gt;alert(1)&lt;/script&gt; tried X" in a1 and "<script>alert" not in page
    assert re.search(r'note-author">owner<.*?X is known broken', a1, re.S)
    assert re.search(r'note-author">agent<.*?tried X', a1, re.S)
    assert 'data-announce="Note on attempt 1: X is known broken"' in a1


async def test_the_owner_adds_a_note_from_the_drawer_and_a_refusal_shows_next_to_the_field(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="held")
    await store.todo_claim(agent, todo["id"], require_fence=True)
    path = f"/todos/{todo['id']}/note"
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{todo['id']}")).text
        assert f'action="{path}"' in drawer and 'for="note-text"' in drawer
        assert (await c.post(path, data={"text": "no token"})).status_code == 403
        empty = await c.post(path, data={"csrf_token": token, "text": " \u0007 "})
        assert empty.status_code == 400
        field = re.search(r'<textarea id="note-text".*?</textarea>', empty.text, re.S).group(0)
        assert 'aria-invalid="true"' in field and "note-text-error" in field
        assert re.search(r'id="note-text-error"><span class="visually-hidden">Error: </span>The note must not be '
                         r'empty', empty.text)
        assert '<section id="drawer-note" class="drawer-note" aria-labelledby="note-heading">' in empty.text  # held
        r = await c.post(path, data={"csrf_token": token, "text": "paused CI for an hour"})
        assert r.status_code == 303
        after = (await c.get(r.headers["location"])).text
        assert "Note added to attempt 1." in after and "paused CI for an hour" in after
    rows = await sql_rows(live_server.settings.database_url,
                          "SELECT author_kind::text AS k, text FROM attempt_notes WHERE todo_id = %s", (todo["id"],))
    assert rows == [{"k": "owner", "text": "paused CI for an hour"}]


async def test_another_humans_note_form_post_is_not_found_and_writes_nothing(live_server):
    store = live_server.store
    await make_human(store, "ada")
    bob = await make_human(store, "bob")
    agent = await make_agent(store, user=bob, agent_id="w2")
    todo = await store.todo_add(agent, queue="q", title="bob's")
    await store.todo_claim(agent, todo["id"])
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        foreign = await c.post(f"/todos/{todo['id']}/note", data={"csrf_token": token, "text": "hi"})
        random = await c.post("/todos/never-minted-0000/note", data={"csrf_token": token, "text": "hi"})
    assert foreign.status_code == random.status_code == 404
    assert foreign.text == random.text
    assert await sql_rows(live_server.settings.database_url, "SELECT 1 FROM attempt_notes") == []


async def test_a_note_reaches_the_watched_drawer_live(live_server, monkeypatch):
    """By its own notification: the periodic re-read of an open drawer is put out of reach."""
    import board.web.events
    monkeypatch.setattr(board.web.events, "WATCH_REFRESH_SECONDS", 600)
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await store.todo_add(agent, queue="q", title="watch me")
    await store.todo_claim(agent, todo["id"])
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c, f"?todo={todo['id']}") as stream:
            assert "note-1-1" not in stream.snapshot["drawer"]
            await store.todo_note(agent, todo["id"], text="found the flaky test")
            data = await stream.next_todo(todo["id"], timeout=5)
    assert 'id="note-1-1"' in data["drawer"] and "found the flaky test" in data["drawer"]


async def test_the_vend_wizard_offers_note_and_says_heartbeat_implies_it(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/endpoints")).text
    assert 'id="verb-note"' in page and 'id="verb-note" name="verbs" value="note"' in page
    heartbeat_help = re.search(r'id="verb-heartbeat-help">([^<]*)<', page).group(1)
    assert "also allows note" in heartbeat_help
