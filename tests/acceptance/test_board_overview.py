"""The Board's overview over HTTP and SSE: counts of the human's own todos linking to the
filtered list, Pause/Resume as CSRF-checked posts that return to the toggled control, another
human's queue out of reach, and the overview in every snapshot and refreshed live."""

from __future__ import annotations

import html
import re

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.acceptance.test_board_live import open_stream
from tests.conftest import make_agent


def overview_of(page: str) -> str:
    return page[page.index('<section id="overview"'):page.index("</section>", page.index('<section id="overview"'))]


def cell(page: str, queue: str, column: str) -> str:
    m = re.search(rf'<td id="queue-{re.escape(queue)}-{column}"[^>]*>(.*?)</td>', page, re.S)
    assert m, f"no {column} cell for {queue}"
    return " ".join(m.group(1).split())


async def test_the_overview_counts_the_humans_own_todos_each_count_linking_to_its_list(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds", "docs"))
    bob_agent = await make_agent(store, user=bob, agent_id="b1", queues=("builds",))
    for i in range(2):
        await store.todo_add(agent, queue="builds", title=f"pending {i}")
    for _ in range(5):
        await store.todo_add(bob_agent, queue="builds", title="bob's")
    dead = await store.todo_add(agent, queue="builds", title="dead one", max_attempts=1)
    await store.todo_claim(agent, dead["id"])
    await store.todo_fail(agent, dead["id"], summary="gave up")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/")).text
        overview = overview_of(page)
        assert 'id="queue-builds"' in overview and 'id="queue-docs"' in overview
        pending = cell(overview, "builds", "ready")
        assert pending.startswith('<a href="/?queue=builds&amp;start=ready">2<')  # Bob's 5 are not Ada's
        assert cell(overview, "builds", "dead_letter").startswith('<a href="/?queue=builds&amp;dead_letter=1">1<')
        assert cell(overview, "docs", "ready") == "0"
        assert "1 failed" in cell(overview, "builds", "chart")
        listed = (await c.get(html.unescape(re.search(r'href="([^"]+)"', pending).group(1)))).text
        assert "pending 0" in listed and "pending 1" in listed and "dead one" not in listed and "bob" not in listed


async def test_pause_and_resume_are_csrf_checked_posts_that_return_to_the_toggled_control(live_server):
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    await store.todo_add(agent, queue="builds", title="waits")
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        forged = await c.post("/queues/builds/pause", data={"next": "/"})
        assert forged.status_code == 403
        assert (await store.todo_claim_next(agent.on_session("s1"), queue="builds"))["todo"] is not None

        await store.todo_add(agent, queue="builds", title="waits too")
        r = await c.post("/queues/builds/pause", data={"csrf_token": token, "next": "/?state=pending"})
        assert r.status_code == 303 and r.headers["location"] == "/?state=pending#queue-toggle-builds"
        assert (await store.todo_claim_next(agent, queue="builds"))["todo"] is None
        page = (await c.get("/?state=pending")).text
        assert "Paused queue builds" in page and 'role="status"' in page
        status = cell(overview_of(page), "builds", "status")
        assert ">Paused</strong>" in status and "since <time" in status and 'action="/queues/builds/resume"' in status
        assert ('id="queue-toggle-builds" aria-describedby="queue-builds-state queue-builds-since">Resume'
                in status)

        r = await c.post("/queues/builds/resume", data={"csrf_token": token, "next": "https://evil.example/"})
        assert r.status_code == 303 and r.headers["location"] == "/#queue-toggle-builds"  # local paths only
        status = cell(overview_of((await c.get("/")).text), "builds", "status")
        assert "Active" in status and ">Pause<" in status
        assert (await store.todo_claim_next(agent, queue="builds"))["todo"] is not None


async def test_a_human_cannot_pause_a_queue_of_another_humans_endpoints(live_server):
    store = live_server.store
    ada, _ = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    await store.todo_add(agent, queue="builds", title="ada's")
    async with client_for(live_server) as c:
        token = await sign_in(c, "bob")
        for action in ("pause", "resume", "explode"):
            r = await c.post(f"/queues/builds/{action}", data={"csrf_token": token})
            assert r.status_code == 404
        r = await c.post("/queues/not%20a%20queue/pause", data={"csrf_token": token})
        assert r.status_code == 404
    assert (await store.todo_claim_next(agent))["todo"] is not None


async def test_the_live_stream_carries_the_overview_and_refreshes_it_when_todos_change(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds",))
    bob_agent = await make_agent(store, user=bob, agent_id="b1", queues=("builds",))
    async with client_for(live_server) as c:
        token = await sign_in(c, "ada")
        async with open_stream(c) as stream:
            assert cell(stream.snapshot["overview"], "builds", "ready") == "0"
            await store.todo_add(bob_agent, queue="builds", title="bob's")  # not Ada's: no refresh for it
            for i in range(3):
                await store.todo_add(agent, queue="builds", title=f"t{i}")

            async def next_overview() -> str:
                while True:
                    event, data = await stream.next()
                    if event == "overview":
                        return data["overview"]

            counts = []
            while not counts or counts[-1] != "3":  # the changes coalesce into one refresh or a few
                counts.append(re.match(r"(?:<a [^>]*>)?(\d+)", cell(await next_overview(), "builds", "ready")).group(1))
            assert counts[-1] == "3" and len(counts) <= 3
            await c.post("/queues/builds/pause", data={"csrf_token": token})
            assert "Paused" in cell(await next_overview(), "builds", "status")  # a pause refreshes at once
