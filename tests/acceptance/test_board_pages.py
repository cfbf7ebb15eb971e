"""The Board's pages over HTTP: the list and its filters, the drawer (REQ-13) and its
scoping (REQ-10), the actions with their attempt outcomes, and the vend wizard."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

import pytest

from tests.acceptance.test_board_auth import client_for, csrf_of, make_human, sign_in
from tests.conftest import make_agent


@pytest.fixture
def server_settings(server_settings):
    """These tests move time by hand (now=...); the sweeps stay off so they do not race them."""
    return server_settings.with_(reaper_interval_seconds=0, retry_interval_seconds=0)


async def test_the_board_lists_only_the_humans_todos_with_filters_and_dead_letters(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds", "docs"))
    other = await make_agent(store, user=bob, agent_id="w2")
    await store.todo_add(other, queue="q", title="bob only")
    pending = await store.todo_add(agent, queue="builds", title="pending one")
    dead = await store.todo_add(agent, queue="docs", title="dead one", max_attempts=1)
    await store.todo_claim(agent, dead["id"])
    await store.todo_fail(agent, dead["id"], summary="gave up")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/")).text
        assert "pending one" in page and "dead one" in page and "bob only" not in page
        assert "dead letter" in page and 'href="/?dead_letter=1"' in page
        row = re.search(r'<tr id="todo-%s".*?</tr>' % dead["id"], page, re.S).group(0)
        assert "docs" in row and "failed" in row and "1 of 1" in row
        dead_page = (await c.get("/?dead_letter=1")).text
        assert "dead one" in dead_page and "pending one" not in dead_page
        by_queue = (await c.get("/?queue=builds")).text
        assert "pending one" in by_queue and "dead one" not in by_queue
        by_state = (await c.get("/?state=pending")).text
        assert "pending one" in by_state and "dead one" not in by_state
        for bad in ("/?state=bogus", "/?cursor=nonsense"):  # a bad filter value: the 400 page
            assert (await c.get(bad)).status_code == 400, bad
        assert pending["id"] in by_state


async def test_another_humans_drawer_is_the_same_not_found_as_a_random_id(live_server):
    store = live_server.store
    await make_human(store, "ada")
    bob = await make_human(store, "bob")
    agent = await make_agent(store, user=bob, agent_id="w2")
    todo = await store.todo_add(agent, queue="q", title="bob's secret")
    await store.todo_claim(agent, todo["id"], claimant="bob-claimant")
    await store.todo_fail(agent, todo["id"], summary="bob's summary")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        foreign = await c.get(f"/todos/{todo['id']}")
        random = await c.get("/todos/5b1c7f1e-0000-4000-8000-000000000000")
        assert foreign.status_code == random.status_code == 404
        assert foreign.content == random.content
        assert "bob" not in foreign.text and "attempt" not in foreign.text.lower()
        for path in (f"/todos/{todo['id']}/drawer", f"/todos/{todo['id']}/claim"):
            r = await (c.get(path) if path.endswith("drawer") else c.post(path, data={"csrf_token": csrf_of(random.text)}))
            assert r.status_code == 404 and "bob" not in r.text


async def test_the_drawer_shows_every_attempt_as_escaped_data_newest_first(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = (await make_agent(store, user=ada, agent_id="w1")).on_session("mcp-session-SECRET")
    todo = await store.todo_add(agent, queue="q", title="<b>title</b>", payload={"html": "<img src=x>"},
                                routing={"to": "fixer"}, max_attempts=10)
    t0 = datetime.now(timezone.utc) - timedelta(minutes=30)
    tid = todo["id"]
    # 1: a fenced claim (the Board is exempt from the fence), failed with markup as its summary
    await store.todo_claim(agent, tid, require_fence=True, now=t0)
    await store.todo_fail(ada, tid, summary="<script>alert(1)</script>", now=t0 + timedelta(minutes=1))
    await store.sweep_retry(now=t0 + timedelta(days=1))
    # 2: released with a long summary (truncated) and an mcp:// artifact
    await store.todo_claim(agent, tid, claimant="run-2", now=t0 + timedelta(minutes=2))
    await store.todo_release(agent, tid, summary="x" * 3000, artifact="mcp://cairn/abc-1",
                             now=t0 + timedelta(minutes=3))
    # 3: claimed, heartbeat, then reaped: died
    await store.todo_claim(agent, tid, claimant="run-3", lease_seconds=60, now=t0 + timedelta(minutes=4))
    await store.todo_heartbeat(agent, tid, lease_seconds=60, now=t0 + timedelta(minutes=4, seconds=30))
    await store.sweep_reap(now=t0 + timedelta(minutes=6))
    # 4: completed with an https artifact
    await store.todo_claim(agent, tid, claimant="run-4", now=t0 + timedelta(minutes=7))
    await store.todo_complete(agent, tid, result={"ok": "<yes>"}, summary="done",
                              artifact="https://example.com/report?a=1&b=2", now=t0 + timedelta(minutes=8))
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        r = await c.get(f"/todos/{tid}")
        assert r.status_code == 200
        page = r.text
    drawer = re.search(r"<dialog.*?</dialog>", page, re.S).group(0)
    assert 'aria-labelledby="drawer-title"' in drawer and "&lt;b&gt;title&lt;/b&gt;" in drawer
    assert "&lt;img src=x&gt;" in drawer and "&#34;to&#34;: &#34;fixer&#34;" in drawer
    assert "&lt;yes&gt;" in drawer
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in drawer
    seqs = [int(s) for s in re.findall(r'<li id="attempt-(\d+)"', drawer)]
    assert seqs == [4, 3, 2, 1]
    # A live change is announced as one line in a log, never by re-reading the list's cards.
    news = re.search(r'<div id="attempts-news"[^>]*>', drawer).group(0)
    assert 'role="log"' in news and 'aria-live="polite"' in news
    assert '<ol id="attempts-list"' in drawer and 'id="attempts-heading">Attempts</h3>' in drawer
    assert re.search(r'aria-live="polite">\s*<ol', drawer) is None
    a3 = re.search(r'<li id="attempt-3".*?</li>', drawer, re.S).group(0)
    assert 'aria-label="died: no report"' in a3 and "Died: no report" in a3 and "reaped" in a3
    assert 'data-announce="Attempt 3 reaped: died, no report"' in a3
    assert "heartbeat" in a3.lower() and "<time datetime=" in a3
    a2 = re.search(r'<li id="attempt-2".*?</li>', drawer, re.S).group(0)
    assert "Truncated" in a2 and "<code>mcp://cairn/abc-1</code>" in a2 and "<a href" not in a2
    a4 = re.search(r'<li id="attempt-4".*?</li>', drawer, re.S).group(0)
    assert '<a href="https://example.com/report?a=1&amp;b=2" rel="noopener noreferrer">' in a4
    assert "died" not in a4.lower()
    a1 = re.search(r'<li id="attempt-1".*?</li>', drawer, re.S).group(0)
    assert "failed" in a1 and "owner" not in a1
    assert "mcp-session-SECRET" not in page and "lease_token" not in page and "claimer_session" not in page


async def test_an_open_attempt_shows_its_liveness_derived_at_read_time(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    now = datetime.now(timezone.utc)
    todos = []
    for title, claimed_ago, lease in (("live one", 5, 60), ("quiet one", 50, 60)):
        t = await store.todo_add(agent, queue="q", title=title)
        await store.todo_claim(agent, t["id"], lease_seconds=lease, now=now - timedelta(seconds=claimed_ago))
        todos.append(t)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        live = (await c.get(f"/todos/{todos[0]['id']}")).text
        quiet = (await c.get(f"/todos/{todos[1]['id']}")).text
        assert "liveness-live" in live and "lease ends in" in live
        assert "liveness-quiet" in quiet


async def test_board_actions_close_attempts_with_their_outcomes(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    a = await store.todo_add(agent, queue="q", title="a", max_attempts=1)
    b = await store.todo_add(agent, queue="q", title="b")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")

        async def act(todo, action, **extra):
            r = await c.post(f"/todos/{todo['id']}/{action}", data={"csrf_token": token, **extra})
            assert r.status_code == 303 and r.headers["location"] == f"/todos/{todo['id']}"
            return (await c.get(r.headers["location"])).text

        page = await act(a, "claim")
        assert "Claimed." in page and ">Complete</button>" in page
        got = await store.todo_get(ada, a["id"])
        assert got["owner"] == f"human:{ada.user_id}" and got["attempts"][0]["claimer_kind"] == "owner"
        await act(a, "release", summary="not now")
        got = await store.todo_get(ada, a["id"])
        assert got["state"] == "pending" and got["attempts"][0]["outcome"] == "released"
        assert got["attempts"][0]["summary"] == "not now"
        # An agent holds it, fenced; the owning human may still fail it (REQ-6).
        await store.todo_claim(agent, a["id"], require_fence=True)
        page = await act(a, "fail", summary="stuck")
        got = await store.todo_get(ada, a["id"])
        assert got["dead_letter"] and got["attempts"][0]["outcome"] == "failed"
        assert ">Retry</button>" in page
        await act(a, "retry")
        assert (await store.todo_get(ada, a["id"]))["state"] == "pending"
        await act(a, "claim")
        await act(a, "complete", summary="by hand")
        got = await store.todo_get(ada, a["id"])
        assert got["state"] == "done" and got["attempts"][0]["outcome"] == "completed"
        # A conflict is explained, not a crash.
        page = await act(a, "claim")
        assert "Could not claim" in page and 'role="alert"' in page
        await store.todo_claim(agent, b["id"])
        await act(b, "cancel")
        got = await store.todo_get(ada, b["id"])
        assert got["state"] == "canceled" and got["attempts"][0]["outcome"] == "canceled"
        r = await c.post(f"/todos/{b['id']}/explode", data={"csrf_token": token})
        assert r.status_code == 404


async def test_the_vend_wizard_shows_the_token_once_and_revokes_with_confirmation(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        wizard = (await c.get("/endpoints")).text
        assert 'type="checkbox" id="verb-release" name="verbs" value="release"' in wizard
        assert re.search(r"<legend>Release</legend>\s*<div class=\"check\">\s*<input[^>]*verb-release[^>]*>", wizard)
        assert "verb-release" in wizard and 'value="release" aria-describedby="verb-release-help" checked' not in wizard
        r = await c.post("/endpoints", data={"csrf_token": token, "name": "Fixer", "agent_id": "fixer-1",
                                             "queues": "builds, docs", "verbs": ["add_todo", "claim", "heartbeat", "complete"]})
        assert r.status_code == 201
        secret = re.search(r'<code class="token" id="new-token">([^<]+)</code>', r.text).group(1)
        assert f"{live_server.url}/mcp" in r.text and html.escape(f"Bearer {secret}", quote=True) in r.text
        assert r.headers["cache-control"] == "no-store" and secret not in r.headers.get("set-cookie", "")
        agent = await store.endpoint_authenticate(secret)
        assert agent.agent_id == "fixer-1" and agent.queues == ("builds", "docs")
        assert agent.scope == frozenset({"add_todo", "claim", "heartbeat", "complete"})  # release is implied by nothing
        listing = (await c.get("/endpoints")).text
        assert secret not in listing and "Fixer" in listing and "add_todo, claim, heartbeat, complete" in listing
        # An invalid request keeps what was typed and names the problem.
        bad = await c.post("/endpoints", data={"csrf_token": token, "agent_id": "fixer 2", "queues": "q",
                                               "verbs": ["claim"]})
        assert bad.status_code == 400 and 'role="alert"' in bad.text and 'aria-invalid="true"' in bad.text
        # Revoke: a confirmation page, then the cascade.
        todo = await store.todo_add(agent, queue="builds", title="held")
        await store.todo_claim(agent, todo["id"])
        confirm = await c.get(f"/endpoints/{agent.endpoint_id}/revoke")
        assert confirm.status_code == 200 and "Revoke endpoint Fixer?" in confirm.text
        assert await store.endpoint_authenticate(secret) is not None
        r = await c.post(f"/endpoints/{agent.endpoint_id}/revoke", data={"csrf_token": csrf_of(confirm.text)})
        assert r.status_code == 303
        assert await store.endpoint_authenticate(secret) is None
        listing = (await c.get("/endpoints")).text
        assert "1 held todo became dead letter" in listing and "revoked" in listing


async def test_a_human_cannot_revoke_another_humans_endpoint(live_server):
    store = live_server.store
    await make_human(store, "ada")
    bob = await make_human(store, "bob")
    agent = await make_agent(store, user=bob, agent_id="w2")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        assert (await c.get(f"/endpoints/{agent.endpoint_id}/revoke")).status_code == 404
        r = await c.post(f"/endpoints/{agent.endpoint_id}/revoke", data={"csrf_token": token})
        assert r.status_code == 404
    assert (await store.endpoints_of_user(bob.user_id))[0]["revoked_at"] is None


async def test_a_static_path_that_names_no_file_is_a_404_however_long_or_deep(live_server, caplog):
    """Names past the file system's limit (255 bytes a name), deep paths and traversal are
    a plain 404 with no error logged, signed in or not; the real files are still served."""
    paths = ["/static/" + "a" * 255, "/static/" + "a" * 256, "/static/" + "é" * 200, "/static/" + "b" * 5000,
             "/static/" + "d/" * 3000 + "board.css", "/static/../pyproject.toml", "/static/%2e%2e/pyproject.toml",
             "/static/", "/static/nope.js"]
    async with client_for(live_server) as c:
        answers = {path[:60]: (await c.get(path)).status_code for path in paths}
        served = [(await c.get(f"/static/{name}")).status_code for name in ("board.css", "board.js")]
    assert {k: v for k, v in answers.items() if v != 404} == {}
    assert served == [200, 200]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_the_page_title_names_the_view_and_the_open_todo(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w", queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="Ship it")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        titles = {path: re.search(r"<title>(.*?)</title>", (await c.get(path)).text).group(1)
                  for path in ("/", "/?dead_letter=1", "/?title=ship", f"/todos/{todo['id']}",
                               f"/todos/{todo['id']}?dead_letter=1")}
    assert titles == {"/": "Board · Switchboard", "/?dead_letter=1": "Dead letters · Board · Switchboard",
                      "/?title=ship": "Search results · Board · Switchboard",
                      f"/todos/{todo['id']}": "Ship it · Board · Switchboard",
                      f"/todos/{todo['id']}?dead_letter=1": "Ship it · Dead letters · Board · Switchboard"}


async def test_an_empty_cell_of_the_list_reads_as_none(live_server):
    ada = await make_human(live_server.store, "ada")
    agent = await make_agent(live_server.store, user=ada, agent_id="w", queues=("q",))
    todo = await live_server.store.todo_add(agent, queue="q", title="Waiting")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/")).text
    row = re.search(r'<tr id="todo-%s".*?</tr>' % todo["id"], page, re.S).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert all(cell.strip() for cell in cells), cells  # no bare cell
    assert row.count('<span class="visually-hidden">none</span>') == 2  # nobody holds it, no deadline
