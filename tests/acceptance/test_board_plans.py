"""Plans on the Board over HTTP and SSE: the drawer shows the plan around a todo (what it
waits for, what waits for it, each a link with its state and last outcome), flags a todo
that waits on a canceled todo or a dead letter, and drops a dependency; the list says how
many todos a waiting one waits for and filters waiting todos; the overview counts them apart
from ready ones; a delete keeps a todo others wait on and names them; and "waiting" and
"unblocked" reach an open Board."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

from tests.acceptance.test_bad_input import assert_error_page
from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_bulk import as_form, flash
from tests.acceptance.test_board_live import open_stream
from tests.acceptance.test_board_overview import cell, overview_of
from tests.acceptance.test_board_search import rows_of
from tests.conftest import make_agent


def words(fragment: str) -> str:
    return " ".join(html.unescape(re.sub("<[^>]+>", " ", fragment)).split())


def spoken(fragment: str) -> str:
    """The text as read out: tags gone, no space added where there was none."""
    return " ".join(html.unescape(re.sub("<[^>]+>", "", fragment)).split())


def plan_of(page: str) -> str:
    start = page.index('<div id="drawer-plan"')
    return page[start:page.index("</section>", start)] if "plan-heading" in page[start:] else ""


async def a_plan(store, agent, *titles: str):
    """a (done), b (claimed), x waiting on both of them, and y waiting on x (or the titles given)."""
    ta, tb, tx, ty = titles or ("a", "b", "x", "y")
    a = await store.todo_add(agent, queue="builds", title=ta)
    b = await store.todo_add(agent, queue="builds", title=tb)
    x = await store.todo_add(agent, queue="builds", title=tx, after=[a["id"], b["id"]])
    y = await store.todo_add(agent, queue="builds", title=ty, after=[x["id"]])
    await store.todo_claim(agent, a["id"])
    await store.todo_complete(agent, a["id"], summary="built")
    await store.todo_claim(agent, b["id"], lease_seconds=3600)
    return a, b, x, y


async def test_the_drawer_shows_what_a_todo_waits_for_and_what_waits_for_it_as_linked_lists(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a, b, x, y = await a_plan(store, agent)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        plan = plan_of((await c.get(f"/todos/{x['id']}")).text)
        assert '<h3 id="plan-heading">Plan</h3>' in plan
        after = re.search(r'<ul class="plan-items" aria-labelledby="plan-after-heading">(.*?)</ul>', plan, re.S).group(1)
        assert [words(li) for li in re.findall(r'<li class="plan-item".*?</li>', after, re.S)] == [
            "a done, last attempt completed", "b claimed Drop this dependency… b"]
        assert f'href="/todos/{a["id"]}" data-id="{a["id"]}">a</a>' in after
        assert words(plan).count("Drop this dependency") == 1  # not for a, done
        waited = re.search(r'aria-labelledby="plan-dependents-heading">(.*?)</ul>', plan, re.S).group(1)
        assert words(waited) == "y pending, waiting" and f'href="/todos/{y["id"]}"' in waited
        assert "waits on a" not in plan
        # b is waited on by x; a todo with no plan has none
        assert "x pending, waiting" in words(plan_of((await c.get(f"/todos/{b['id']}")).text))
        lone = await store.todo_add(agent, queue="builds", title="lone")
        assert plan_of((await c.get(f"/todos/{lone['id']}")).text) == ""


async def test_the_drawer_flags_a_todo_waiting_on_a_canceled_todo_or_a_dead_letter(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    gone = await store.todo_add(agent, queue="builds", title="gone")
    dead = await store.todo_add(agent, queue="builds", title="dead", max_attempts=1)
    x = await store.todo_add(agent, queue="builds", title="x", after=[gone["id"]])
    y = await store.todo_add(agent, queue="builds", title="y", after=[dead["id"]])
    await store.todo_cancel(ada, gone["id"])
    await store.todo_claim(agent, dead["id"])
    await store.todo_fail(agent, dead["id"], summary="no")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        plan = plan_of((await c.get(f"/todos/{x['id']}")).text)
        assert "waits on a canceled todo" in plan and "waits on a dead letter" not in plan
        plan = plan_of((await c.get(f"/todos/{y['id']}")).text)
        assert "waits on a dead letter" in plan and "waits on a canceled todo" not in plan
        assert "dead dead letter, last attempt failed" in words(plan)


async def test_dropping_a_dependency_says_the_todo_can_be_claimed_now(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a, b, x, y = await a_plan(store, agent)
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        # the drawer's link asks first, changing nothing
        assert f'href="/todos/{x["id"]}/confirm-drop?after_id={b["id"]}"' in (await c.get(f"/todos/{x['id']}")).text
        confirm = (await c.get(f"/todos/{x['id']}/confirm-drop?after_id={b['id']}")).text
        assert "“x” will no longer wait for “b” (claimed). It waits for nothing else" in spoken(confirm)
        assert f'name="after_id" value="{b["id"]}"' in confirm and (await store.todo_get(ada, x["id"]))["waiting"]
        assert (await c.get(f"/todos/{b['id']}x/confirm-drop?after_id={b['id']}")).status_code == 404
        r = await c.get(f"/todos/{x['id']}/confirm-drop?after_id={a['id']}")  # done: nothing to drop
        assert flash((await c.get(r.headers["location"])).text) == (
            "Could not drop the dependency: the todo does not wait on it (any more).")
        r = await c.post(f"/todos/{x['id']}/drop-dependency", data={"csrf_token": token, "after_id": b["id"]})
        assert r.status_code == 303 and r.headers["location"] == f"/todos/{x['id']}"
        page = (await c.get(r.headers["location"])).text
        assert flash(page) == "“x” no longer waits for “b”; it can be claimed now."
        assert "Drop this dependency" not in plan_of(page)
        assert (await store.todo_get(ada, x["id"]))["waiting"] is False
        # a todo it does not wait on, a dependency done, and an unknown id say why
        await c.post(f"/todos/{x['id']}/drop-dependency", data={"csrf_token": token, "after_id": b["id"]})
        assert flash((await c.get(f"/todos/{x['id']}")).text) == (
            f"Could not drop the dependency: the todo does not wait on {b['id']}.")
        r = await c.post(f"/todos/{x['id']}/drop-dependency", data={"csrf_token": token, "after_id": "nope"})
        assert flash((await c.get(r.headers["location"])).text) == (
            "Could not drop the dependency: the todo does not wait on nope.")
        r = await c.post(f"/todos/{x['id']}/drop-dependency", data={"csrf_token": "bad", "after_id": a["id"]})
        assert r.status_code in (400, 403) and (await store.todo_get(ada, x["id"]))["after"] == [a["id"]]


async def test_dropping_one_of_two_dependencies_says_the_todo_still_waits(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a = await store.todo_add(agent, queue="builds", title="a")
    b = await store.todo_add(agent, queue="builds", title="b")
    x = await store.todo_add(agent, queue="builds", title="x", after=[a["id"], b["id"]])
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post(f"/todos/{x['id']}/drop-dependency", data={"csrf_token": token, "after_id": a["id"]})
        assert flash((await c.get(r.headers["location"])).text) == (
            "“x” no longer waits for “a”; it still waits for other todos.")


async def test_the_list_says_how_many_a_todo_waits_for_and_filters_waiting_todos(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a, b, x, y = await a_plan(store, agent)
    c2 = await store.todo_add(agent, queue="builds", title="c")
    z = await store.todo_add(agent, queue="builds", title="z", after=[b["id"], c2["id"]])
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/?start=waiting")).text
        waiting = rows_of(page)
        assert sorted(waiting) == ["x", "y", "z"]
        assert "pending, waiting for 2 todos priority P2" in spoken(waiting["z"])
        assert "pending, waiting for 1 todo priority P2" in spoken(waiting["x"])  # a is done
        assert '<option value="waiting" selected>waiting</option>' in page and ", waiting for other todos." in page
        assert sorted(rows_of((await c.get("/?start=ready")).text)) == ["c"]
        assert "waiting for" not in rows_of((await c.get("/")).text)["c"]
        assert sorted(rows_of((await c.get("/?start=waiting&title=z")).text)) == ["z"]
        assert_error_page(await c.get("/?start=blocked"), 400, "start")


async def test_the_overview_counts_waiting_todos_apart_from_ready_ones(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    await a_plan(store, agent)
    await store.todo_add(agent, queue="builds", title="ready")
    await store.todo_add(agent, queue="builds", title="later", delay_seconds=3600)
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        overview = overview_of((await c.get("/")).text)
        assert cell(overview, "builds", "waiting").startswith('<a href="/?queue=builds&amp;start=waiting">2<')
        assert "2 waiting for other todos in builds" in words(cell(overview, "builds", "waiting"))
        assert cell(overview, "builds", "ready").startswith('<a href="/?queue=builds&amp;start=ready">1<')
        assert cell(overview, "builds", "scheduled").startswith('<a href="/?queue=builds&amp;start=scheduled">1<')


async def test_a_delete_keeps_a_todo_others_wait_on_and_names_them(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a = await store.todo_add(agent, queue="builds", title="a")
    x = await store.todo_add(agent, queue="builds", title="x", after=[a["id"]])
    y = await store.todo_add(agent, queue="builds", title="y", after=[a["id"]])
    await store.todo_cancel(ada, a["id"])
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        r = await c.post(f"/todos/{a['id']}/delete", data={"csrf_token": token})
        assert r.status_code == 303 and r.headers["location"] == f"/todos/{a['id']}"
        assert flash((await c.get(r.headers["location"])).text) == (
            "Could not delete: Kept “a”: “x” and “y” wait on it; drop the dependency or delete them with it.")
        assert (await store.todo_get(ada, a["id"]))["state"] == "canceled"
        # in bulk: the kept one is named, the other deleted
        done = await store.todo_add(agent, queue="builds", title="done")
        await store.todo_cancel(ada, done["id"])
        r = await c.post("/todos/bulk/apply", data=as_form([("csrf_token", token), ("action", "delete"), ("filter", ""),
                                                            ("ids", a["id"]), ("ids", done["id"])]))
        said = flash((await c.get(r.headers["location"])).text)
        assert said.startswith("Deleted 1 todo") and said.endswith(
            "Kept “a”: “x” and “y” wait on it; drop the dependency or delete them with it."), said
        await store.todo_cancel(ada, y["id"])
        await store.todo_drop_dependency(ada, x["id"], a["id"])
        r = await c.post(f"/todos/{a['id']}/delete", data={"csrf_token": token})
        assert flash((await c.get(r.headers["location"])).text) == (
            "Could not delete: Kept “a”: “y” waits on it; drop the dependency or delete that todo with it.")
        r = await c.post("/todos/bulk/apply", data=as_form([("csrf_token", token), ("action", "delete"), ("filter", ""),
                                                            ("ids", a["id"]), ("ids", y["id"])]))
        assert flash((await c.get(r.headers["location"])).text) == "Deleted 2 todos."


async def test_waiting_and_unblocked_reach_an_open_board_and_its_drawer(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    a = await store.todo_add(agent, queue="builds", title="a")
    b = await store.todo_add(agent, queue="builds", title="b")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        x = await store.todo_add(agent, queue="builds", title="x", after=[a["id"], b["id"]])
        async with open_stream(c, f"?todo={x['id']}") as stream:
            await store.todo_drop_dependency(ada, x["id"], a["id"])  # "waiting": still waits for b
            data = await stream.next_todo(x["id"])
            assert "pending, waiting for 1 todo" in spoken(data["row"])
            assert 'id="plan-after-' + b["id"] + '"' in data["drawer"] and a["id"] not in data["drawer"]
            await store.todo_claim(agent, b["id"])
            await store.todo_complete(agent, b["id"])  # "unblocked", from the complete's release
            while "waiting for" in spoken((data := await stream.next_todo(x["id"]))["row"]):
                pass  # b's own changes may ring x's row first
            assert "b done, last attempt completed" in words(data["drawer"])


async def test_a_todo_added_by_a_schedule_links_to_its_schedule(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    made = await store.schedule_add(ada.user_id, queue="builds", title="nightly", every_seconds=600, now=start)
    assert await store.sweep_schedules() == 1  # its missed ticks caught up with one todo
    schedule = made["id"]
    todo = (await store.todo_list(agent, queue="builds"))["todos"][0]
    assert todo["schedule_id"] == schedule
    plain = await store.todo_add(agent, queue="builds", title="by hand")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get(f"/todos/{todo['id']}")).text
        assert f'Added by a schedule: <a href="/schedules#schedule-{schedule}">' in page
        assert "Added by a schedule" not in (await c.get(f"/todos/{plain['id']}")).text
