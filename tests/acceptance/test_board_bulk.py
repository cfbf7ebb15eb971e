"""Bulk actions on the Board over HTTP: the confirmation page's counts, each todo through its
single action's own transition (REQ-12 for retry), skips when a state moved on, and another
human's todos never touched, even by a forged form."""

from __future__ import annotations

import html
import re
from datetime import datetime, timezone

import httpx
import pytest

from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.conftest import make_agent


@pytest.fixture
def server_settings(server_settings):
    """The sweeps stay off, so only the tests move the todos."""
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


async def dead_letter(store, agent, title: str, summary: str = "gave up") -> dict:
    todo = await store.todo_add(agent, queue=agent.queues[0], title=title, max_attempts=1)
    await store.todo_claim(agent, todo["id"], claimant=f"run-{title}")
    await store.todo_fail(agent, todo["id"], summary=summary)
    return todo


def form_fields(page: str, action: str) -> list[tuple[str, str]]:
    """The hidden fields of the page's form that posts to `action`, as a browser sends them."""
    form = re.search(r'<form method="post" action="%s".*?</form>' % re.escape(action), page, re.S)
    assert form, f"no form posting to {action}"
    return [(html.unescape(n), html.unescape(v))
            for n, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.group(0))]


def counts_table(page: str) -> list[tuple[str, int, str]]:
    """The confirmation's rows: (state now, how many, what happens)."""
    table = re.search(r'<table class="bulk-counts".*?</table>', page, re.S).group(0)
    return [(html.unescape(s), int(n), w) for s, n, w in
            re.findall(r'<th scope="row">([^<]+)</th><td>(\d+)</td><td>([^<]+)</td>', table)]


def as_form(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Fields in order, repeated names kept (httpx takes a dict of lists)."""
    out: dict[str, list[str]] = {}
    for name, value in fields:
        out.setdefault(name, []).append(value)
    return out


def heading(page: str) -> str:
    return html.unescape(re.search(r"<h1[^>]*>(.*?)</h1>", page, re.S).group(1).strip())


def flash(page: str) -> str:
    m = re.search(r'<p class="flash[^"]*"[^>]*>(.*?)</p>', page, re.S)
    return html.unescape(m.group(1)) if m else ""


async def confirm(c: httpx.AsyncClient, token: str, action: str, ids=(), *, every=False, view="") -> httpx.Response:
    data = [("csrf_token", token), ("action", action), ("filter", view)] + [("ids", i) for i in ids]
    if every:
        data.append(("scope", "filter"))
    return await c.post("/todos/bulk", data=as_form(data))


async def apply(c: httpx.AsyncClient, fields: list[tuple[str, str]]) -> str:
    """Posts the confirmation's form; returns the Board page it lands on."""
    r = await c.post("/todos/bulk/apply", data=as_form(fields))
    assert r.status_code == 303, r.text
    return (await c.get(r.headers["location"])).text


async def test_bulk_retry_of_200_dead_letters_keeps_each_history_and_the_next_claim_opens_the_next_seq(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    bob_agent = await make_agent(store, user=bob, agent_id="w2", queues=("builds",))
    dead = [await dead_letter(store, agent, f"dead {i}", summary=f"failed run {i}") for i in range(200)]
    pending = await store.todo_add(agent, queue="builds", title="still pending")
    theirs = await dead_letter(store, bob_agent, "bob's dead letter")
    async with httpx.AsyncClient(base_url=live_server.url, timeout=120) as c:
        token = await sign_in(c, "ada")
        board = (await c.get("/?dead_letter=1")).text
        assert "All todos in this view, on every page" in board  # more than one page
        assert 'form="bulk-form"' in board and 'name="ids"' in board
        page = await confirm(c, token, "retry", every=True, view="?dead_letter=1")
        assert page.status_code == 200
        assert heading(page.text) == "Retry 200 todos?"
        assert counts_table(page.text) == [("dead letter", 200, "retried")]
        fields = form_fields(page.text, "/todos/bulk/apply")
        assert ("scope", "filter") in fields and not [v for n, v in fields if n == "ids"]  # resolved on the server
        landed = await apply(c, fields)
    assert flash(landed) == "Retried 200 todos."
    assert 'data-focus-on-load' in re.search(r'<p class="flash[^>]*>', landed).group(0)
    for i, todo in enumerate(dead):
        got = await store.todo_get(ada, todo["id"])
        assert (got["state"], got["attempt"], got["attempts_total"]) == ("pending", 0, 1)
        assert [(a["seq"], a["outcome"], a["summary"]) for a in got["attempts"]] == [(1, "failed", f"failed run {i}")]
    claimed = set()
    for _ in dead:
        claim = await store.todo_claim_next(agent)
        assert claim["attempt_seq"] == 2 and [a["seq"] for a in claim["prior_attempts"]] == [1]
        claimed.add(claim["todo"]["id"])
    assert claimed == {t["id"] for t in dead}  # the pending todo is newer: every retried one came first
    assert (await store.todo_get(ada, pending["id"]))["state"] == "pending"
    assert (await store.todo_get(bob, theirs["id"]))["dead_letter"]


async def test_a_forged_bulk_form_naming_another_humans_todos_changes_nothing_of_theirs(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    bob_agent = await make_agent(store, user=bob, agent_id="w2")
    mine = await dead_letter(store, agent, "ada's dead letter")
    bob_dead = await dead_letter(store, bob_agent, "bob's dead letter")
    bob_pending = await store.todo_add(bob_agent, queue="q", title="bob's pending")
    bob_held = await store.todo_add(bob_agent, queue="q", title="bob's held")
    await store.todo_claim(bob_agent, bob_held["id"], claimant="bob-run")
    theirs = [bob_dead["id"], bob_pending["id"], bob_held["id"]]
    at = datetime.now(timezone.utc)  # one clock for both reads: the open attempt's liveness is derived
    before = [await store.todo_get(bob, i, now=at) for i in theirs]
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        page = await confirm(c, token, "retry", [*theirs, mine["id"]])
        assert heading(page.text) == "Retry 1 todo?"
        assert counts_table(page.text) == [("dead letter", 1, "retried"),
                                           ("not found (gone, or not yours)", 3, "skipped")]
        assert "bob" not in page.text
        assert [v for n, v in form_fields(page.text, "/todos/bulk/apply") if n == "ids"] == [mine["id"]]
        every = await confirm(c, token, "retry", every=True)  # all of Ada's todos: never Bob's
        assert counts_table(every.text) == [("dead letter", 1, "retried")] and "bob" not in every.text
        # The apply step posted by hand, naming only Bob's todos, for every action.
        for action, done in (("retry", "Retried"), ("cancel", "Canceled"), ("release", "Released")):
            landed = await apply(c, [("csrf_token", token), ("action", action), ("filter", "")]
                                 + [("ids", i) for i in theirs])
            assert flash(landed) == f"{done} 0 todos. 3 were skipped because their state had moved on."
    assert [await store.todo_get(bob, i, now=at) for i in theirs] == before
    assert (await store.todo_get(ada, mine["id"]))["dead_letter"]


async def test_the_confirmation_counts_each_state_and_what_each_action_would_skip(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    dead = [await dead_letter(store, agent, f"dead {i}") for i in range(2)]
    pending = await store.todo_add(agent, queue="q", title="pending")
    held = await store.todo_add(agent, queue="q", title="held")
    await store.todo_claim(agent, held["id"])
    retrying = await store.todo_add(agent, queue="q", title="retrying", max_attempts=3)
    await store.todo_claim(agent, retrying["id"])
    await store.todo_fail(agent, retrying["id"], summary="once")
    done = await store.todo_add(agent, queue="q", title="done")
    await store.todo_claim(agent, done["id"])
    await store.todo_complete(agent, done["id"])
    ids = [t["id"] for t in (*dead, pending, held, retrying, done)] + ["5b1c7f1e-0000-4000-8000-000000000000"]
    states = {i: (await store.todo_get(ada, i))["updated_at"] for i in ids[:-1]}
    missing = ("not found (gone, or not yours)", 1, "skipped")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        retry = (await confirm(c, token, "retry", ids)).text
        assert heading(retry) == "Retry 2 todos?"
        assert "You selected 7 todos. 2 will be retried; 5 will be skipped." in " ".join(retry.split())
        assert counts_table(retry) == [("dead letter", 2, "retried"), ("claimed", 1, "skipped"),
                                       ("done", 1, "skipped"), ("failed, retry scheduled", 1, "skipped"),
                                       ("pending", 1, "skipped"), missing]
        cancel = (await confirm(c, token, "cancel", ids)).text
        assert heading(cancel) == "Cancel 3 todos?" and 'class="danger">Cancel 3 todos</button>' in cancel
        assert counts_table(cancel) == [("claimed", 1, "canceled"), ("failed, retry scheduled", 1, "canceled"),
                                        ("pending", 1, "canceled"), ("dead letter", 2, "skipped"),
                                        ("done", 1, "skipped"), missing]
        release = (await confirm(c, token, "release", ids)).text
        assert heading(release) == "Release 1 todo?"
        assert [v for n, v in form_fields(release, "/todos/bulk/apply") if n == "ids"] == [held["id"]]
        nothing = (await confirm(c, token, "release", [done["id"]])).text
        assert heading(nothing) == "Nothing to release" and "/todos/bulk/apply" not in nothing
        # No selection at all: back to the Board, saying so.
        r = await confirm(c, token, "retry", [], view="?dead_letter=1")
        assert r.status_code == 303 and r.headers["location"] == "/?dead_letter=1"
        assert "Select at least one todo" in flash((await c.get("/?dead_letter=1")).text)
        # Without the CSRF token neither step does anything.
        assert (await c.post("/todos/bulk", data={"action": "retry", "ids": ids[0]})).status_code == 403
        r = await c.post("/todos/bulk/apply", data={"action": "cancel", "ids": ids[:-1]})
        assert r.status_code == 403
    assert {i: (await store.todo_get(ada, i))["updated_at"] for i in ids[:-1]} == states  # nothing changed


async def test_a_bulk_action_skips_the_todos_whose_state_moved_on_since_the_confirmation(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    dead = [await dead_letter(store, agent, f"dead {i}") for i in range(3)]
    held = []
    for i in range(3):
        t = await store.todo_add(agent, queue="q", title=f"held {i}")
        await store.todo_claim(agent, t["id"], claimant=f"worker-{i}")
        held.append(t)
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        retry = form_fields((await confirm(c, token, "retry", [t["id"] for t in dead])).text, "/todos/bulk/apply")
        release = form_fields((await confirm(c, token, "release", [t["id"] for t in held])).text,
                              "/todos/bulk/apply")
        # Meanwhile: one dead letter is retried and claimed, another retried; a held todo completes.
        await store.todo_retry(ada, dead[0]["id"])
        await store.todo_claim(agent, dead[0]["id"], claimant="quick")
        await store.todo_retry(ada, dead[1]["id"])
        await store.todo_complete(agent, held[0]["id"])
        assert flash(await apply(c, retry)) == "Retried 1 todo. 2 were skipped because their state had moved on."
        assert flash(await apply(c, release)) == "Released 2 todos. 1 was skipped because its state had moved on."
        cancel = form_fields((await confirm(c, token, "cancel", [dead[0]["id"]])).text, "/todos/bulk/apply")
        assert flash(await apply(c, cancel)) == "Canceled 1 todo."
    got = await store.todo_get(ada, dead[2]["id"])
    assert (got["state"], got["attempts_total"]) == ("pending", 1)
    got = await store.todo_get(ada, dead[0]["id"])  # claimed by "quick", then canceled in bulk
    assert got["state"] == "canceled" and [a["outcome"] for a in got["attempts"]] == ["canceled", "failed"]
    assert (await store.todo_get(ada, held[0]["id"]))["state"] == "done"
    for t in held[1:]:
        got = await store.todo_get(ada, t["id"])
        assert got["state"] == "pending" and got["attempts"][0]["outcome"] == "released"


async def test_more_ids_than_a_bulk_action_takes_are_refused_whole(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await dead_letter(store, agent, "dead")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        ids = [todo["id"]] + [f"00000000-0000-4000-8000-{i:012d}" for i in range(1000)]
        for path in ("/todos/bulk", "/todos/bulk/apply"):
            r = await c.post(path, data={"csrf_token": token, "action": "retry", "ids": ids})
            assert r.status_code == 400 and "at most 1000 todos" in r.text
    assert (await store.todo_get(ada, todo["id"]))["dead_letter"]


async def test_bad_text_in_the_bulk_and_add_forms_is_a_4xx_page_and_changes_nothing(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    todo = await dead_letter(store, agent, "dead")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        for path, data in (("/todos/bulk", {"action": "retry", "ids": [todo["id"], "x\x00"]}),
                           ("/todos/bulk/apply", {"action": "retry", "ids": [todo["id"]], "filter": "q\x00"}),
                           ("/todos/bulk", {"action": "retry", "scope": "filter", "filter": "?queue=%00"}),
                           ("/todos/bulk/apply", {"action": "retry", "scope": "filter", "filter": "?state=%00"}),
                           ("/todos/new", {"target": "x", "title": "t\x00", "payload": "{}"})):
            r = await c.post(path, data={"csrf_token": token, **data})
            assert r.status_code == 400 and "<h1>" in r.text, (path, data, r.status_code)
        assert (await c.get("/todos/new?queue=%00")).status_code == 400
        assert (await c.get("/todos/%00/confirm-cancel")).status_code == 404
    assert (await store.todo_get(ada, todo["id"]))["dead_letter"]
    assert len((await store.todo_list(ada))["todos"]) == 1
