"""The claim's order on the Board over HTTP and SSE: the overview counts scheduled todos apart
from ready ones and says each queue's limit ("2 of 2 running"), set from its own field; the
list filters scheduled and ready todos, says when a scheduled one starts, and finds a todo by
its key; the drawer sets a pending todo's priority and starts a scheduled one now; the add
form takes a priority, a start time in the browser's zone and a key; a bulk action sets the
priority of many; and every new notification (scheduled, due, reprioritized, queue_limited)
reaches an open Board."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from tests.acceptance.test_bad_input import assert_error_page
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_bulk import as_form, flash
from tests.acceptance.test_board_live import open_stream
from tests.acceptance.test_board_overview import cell, overview_of
from tests.acceptance.test_board_search import rows_of
from tests.conftest import make_agent


def limit_of(page: str, queue: str) -> str:
    m = re.search(rf'<div class="status-line" id="queue-{re.escape(queue)}-limit">(.*?)</div>', page, re.S)
    assert m, f"no limit for {queue}"
    return " ".join(re.sub("<[^>]+>", " ", m.group(1)).split())


async def next_overview(stream) -> str:
    while True:
        event, data = await stream.next()
        if event == "overview":
            return data["overview"]


async def test_the_overview_counts_scheduled_apart_from_ready_and_says_a_limit_apart_from_a_pause(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    ready = [await store.todo_add(agent, queue="builds", title=f"ready {i}") for i in range(3)]
    await store.todo_add(agent, queue="builds", title="later", delay_seconds=3600)
    for todo in ready[:2]:
        await store.todo_claim(agent, todo["id"])
    await store.todo_interrupt(agent, ready[1]["id"])  # waiting for a person: still held
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        overview = overview_of((await c.get("/")).text)
        assert cell(overview, "builds", "ready").startswith('<a href="/?queue=builds&amp;start=ready">1<')
        assert cell(overview, "builds", "scheduled").startswith('<a href="/?queue=builds&amp;start=scheduled">1<')
        assert "1 scheduled in builds" in re.sub("<[^>]+>", "", cell(overview, "builds", "scheduled"))
        assert limit_of(overview, "builds") == "No limit"

        r = await c.post("/queues/builds/limit", data={"csrf_token": token, "limit": "2", "next": "/?state=pending"})
        assert r.status_code == 303 and r.headers["location"] == "/?state=pending#queue-limit-builds"
        assert flash((await c.get("/")).text) == "Queue builds: at most 2 of its todos may be held at once."
        await c.post("/queues/builds/pause", data={"csrf_token": token})
        page = (await c.get("/")).text
        limit, status = limit_of(page, "builds"), cell(overview_of(page), "builds", "status")
        assert limit == "Limit: 2 of 2 running At its limit" and 'name="limit" value="2"' in status
        assert re.search(r'<strong id="queue-builds-state" class="badge badge-paused">Paused</strong>', status)

        await store.todo_release(agent, ready[0]["id"])
        assert limit_of((await c.get("/")).text, "builds") == "Limit: 1 of 2 running"

        r = await c.post("/queues/builds/limit", data={"csrf_token": token, "limit": "0"})
        assert r.status_code == 303
        page = (await c.get("/")).text
        assert flash(page) == "Queue builds has no limit: agents may hold any number of its todos."
        assert limit_of(page, "builds") == "No limit"


async def test_a_bad_limit_says_what_a_limit_must_be_and_changes_nothing(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    await store.queue_limit_set(ada.user_id, "builds", 3)
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        for bad in ("-1", "abc", "2.5", "100001", "1e3", "99999999999999999999999"):
            r = await c.post("/queues/builds/limit", data={"csrf_token": token, "limit": bad})
            assert r.status_code == 303, bad
            page = (await c.get("/")).text
            assert flash(page) == ("Could not set the limit of queue builds: the limit must be a whole number "
                                   "from 0 (no limit) to 100000."), bad
            assert limit_of(page, "builds") == "Limit: 0 of 3 running"
        # Not a queue name: the not-found page, as for a pause.
        r = await c.post("/queues/b%20d/limit", data={"csrf_token": token, "limit": "2"})
        assert r.status_code == 404
        r = await c.post("/queues/builds/limit", data={"limit": "2"})  # no CSRF token
        assert r.status_code == 403


async def test_the_list_filters_scheduled_and_ready_says_when_one_starts_and_finds_a_todo_by_key(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    await store.todo_add(agent, queue="builds", title="now", priority=0)
    later = await store.todo_add(agent, queue="builds", title="later", delay_seconds=3 * 3600, key="nightly-2026-12-05")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        scheduled = rows_of((await c.get("/?start=scheduled")).text)
        assert list(scheduled) == ["later"]
        words = re.sub(r"\s+", " ", re.sub("<[^>]+>", "", scheduled["later"]))
        starts = later["run_at"].astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        assert f"pending priority P2, scheduled, starts in 3 h (at {starts})" in words
        assert f'title="{starts}"' in scheduled["later"]
        ready = rows_of((await c.get("/?start=ready")).text)
        assert list(ready) == ["now"] and "priority </span>P0<" in ready["now"] and "scheduled" not in ready["now"]
        assert list(rows_of((await c.get("/?title=nightly-2026")).text)) == ["later"]
        assert_error_page(await c.get("/?start=soon"), 400, "start")


async def test_the_drawer_sets_a_pending_todos_priority_and_starts_a_scheduled_one_now(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    later = await store.todo_add(agent, queue="builds", title="later", delay_seconds=3600, key="k-1")
    held = await store.todo_add(agent, queue="builds", title="held")
    await store.todo_claim(agent, held["id"])
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        drawer = (await c.get(f"/todos/{later['id']}")).text
        assert "<dt>Priority</dt><dd>P2</dd>" in drawer and "<code>k-1</code>" in drawer
        assert 'id="drawer-starts">starts <time' in drawer and ">Start now<" in drawer and ">Claim<" not in drawer

        r = await c.post(f"/todos/{later['id']}/priority", data={"csrf_token": token, "priority": "0"})
        assert r.status_code == 303 and r.headers["location"] == f"/todos/{later['id']}"
        assert flash((await c.get(r.headers["location"])).text) == "Priority set to P0."
        assert (await store.todo_get(ada, later["id"]))["priority"] == 0
        for bad, said in (("7", "priority must be a whole number from 0 to 4"), ("0", "it is already P0")):
            await c.post(f"/todos/{later['id']}/priority", data={"csrf_token": token, "priority": bad})
            assert flash((await c.get(f"/todos/{later['id']}")).text) == f"Could not set the priority: {said}."
        await c.post(f"/todos/{held['id']}/priority", data={"csrf_token": token, "priority": "1"})
        assert flash((await c.get(f"/todos/{held['id']}")).text) == (
            "Could not set the priority: the todo is claimed; only a pending todo's priority can change.")
        assert (await store.todo_get(ada, held["id"]))["priority"] == 2
        assert "action-priority" not in (await c.get(f"/todos/{held['id']}")).text

        r = await c.post(f"/todos/{later['id']}/start-now", data={"csrf_token": token})
        page = (await c.get(r.headers["location"])).text
        assert flash(page).startswith("Started.") and "drawer-starts" not in page and ">Claim<" in page
        await store.todo_claim(agent, later["id"])  # claimable now (a scheduled todo's claim is a Conflict)
        await c.post(f"/todos/{later['id']}/start-now", data={"csrf_token": token})
        assert flash((await c.get(f"/todos/{later['id']}")).text) == (
            "Could not start it now: the todo is not scheduled (it is claimed).")


async def test_the_add_form_takes_a_priority_a_start_time_in_the_browsers_zone_and_a_key(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    ep = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    target = f"{ep.endpoint_id}:builds"
    start = (datetime.now(timezone.utc) + timedelta(hours=5)).replace(second=0, microsecond=0)
    local = (start + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")  # as a browser two hours east shows it
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        form = (await c.get("/todos/new")).text
        assert re.search(r'<option value="2" selected>P2[^<]*</option>', form)
        fields = {"csrf_token": token, "target": target, "title": "Nightly", "priority": "1", "start_at": local,
                  "start_offset": "+02:00", "key": "nightly", "max_attempts": "3"}
        r = await c.post("/todos/new", data=fields)
        assert r.status_code == 303, r.text
        [todo] = (await store.todo_list(ada))["todos"]
        assert (todo["priority"], todo["run_at"], todo["key"]) == (1, start, "nightly")
        said = flash((await c.get("/")).text)
        assert said.startswith('<span id="flash-text">Added “Nightly” to queue builds. It is scheduled to '
                               f"start in 5 h, at {start.strftime('%Y-%m-%d %H:%M:%S UTC')}. "
                               "Its priority is P1.</span>")

        r = await c.post("/todos/new", data=dict(fields, title="Nightly again"))
        assert r.status_code == 303
        assert flash((await c.get("/")).text).startswith(
            '<span id="flash-text">Nothing was added: the key “nightly” already names a live todo in queue builds, '
            '“Nightly”.</span>')
        assert len((await store.todo_list(ada))["todos"]) == 1

        r = await c.post("/todos/new", data=dict(fields, key="x" * 300, start_at="tomorrow", priority="7"))
        assert r.status_code == 400
        errors = dict(re.findall(r'<p class="field-error" id="add-([a-z_]+)-error">'
                                 r'<span class="visually-hidden">Error: </span>(.*?)</p>', r.text))
        assert errors == {"priority": "The priority must be a whole number from 0 to 4.",
                          "start_at": "The start time must be a date and time, like 2026-12-05T18:30.",
                          "key": "The key must be a string of 1 to 200 bytes."}
        assert 'value="tomorrow"' in r.text  # what was typed stays
        assert len((await store.todo_list(ada))["todos"]) == 1


async def test_a_bulk_set_priority_changes_the_pending_todos_selected_and_says_what_it_skipped(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a = await store.todo_add(agent, queue="builds", title="a")
    b = await store.todo_add(agent, queue="builds", title="b", priority=1)
    held = await store.todo_add(agent, queue="builds", title="held")
    await store.todo_claim(agent, held["id"])
    ids = [a["id"], b["id"], held["id"]]
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        data = [("csrf_token", token), ("action", "priority"), ("priority", "1"), ("filter", "")]
        r = await c.post("/todos/bulk", data=as_form(data + [("ids", i) for i in ids]))
        assert r.status_code == 200
        assert re.search(r"<h1[^>]*>Set the priority of 1 todo to P1\?</h1>", r.text)
        assert '<input type="hidden" name="priority" value="1">' in r.text
        r = await c.post("/todos/bulk/apply", data=as_form(data + [("ids", i) for i in ids]))
        assert r.status_code == 303
        assert flash((await c.get("/")).text) == ("Set 1 todo to P1. 2 were skipped "
                                                  "(not pending, or already at P1).")
        assert [(await store.todo_get(ada, i))["priority"] for i in ids] == [1, 1, 2]
        r = await c.post("/todos/bulk", data={"csrf_token": token, "action": "priority", "priority": "9",
                                              "filter": "", "ids": a["id"]})
        assert r.status_code == 303
        assert flash((await c.get("/")).text) == "Could not set the priority: Choose a priority from P0 to P4."


async def test_scheduled_due_reprioritized_and_queue_limited_reach_an_open_board(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        async with open_stream(c) as stream:
            later = await store.todo_add(agent, queue="builds", title="later", delay_seconds=3600)
            row = (await stream.next_todo(later["id"]))["row"]
            assert "scheduled, starts" in row and "priority </span>P2<" in row  # "scheduled"
            await store.todos_set_priority(ada, [later["id"]], 4)
            assert "priority </span>P4<" in (await stream.next_todo(later["id"]))["row"]  # "reprioritized"
            await store.todo_start_now(ada, later["id"])
            assert "scheduled" not in (await stream.next_todo(later["id"]))["row"]  # "due"
            await store.queue_limit_set(ada.user_id, "builds", 5)
            while limit_of(await next_overview(stream), "builds") != "Limit: 0 of 5 running":
                pass  # a refresh for the todos' changes may come first; the limit's comes at once
