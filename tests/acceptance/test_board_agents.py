"""The Agents page over HTTP: each endpoint of the signed-in human, vended or connected, with
its queues, the todos it holds now with each open attempt's liveness in words, and its last
activity; another human's endpoints and todos never appear."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import make_agent


def agent_row(page: str, endpoint_id: str) -> str:
    m = re.search(rf'<tr id="agent-{endpoint_id}">(.*?)</tr>', page, re.S)
    assert m, f"no row for {endpoint_id}"
    return " ".join(re.sub(r"<[^>]+>", " ", m.group(1)).split())


async def test_the_agents_page_shows_each_endpoint_with_what_it_holds_and_how_alive(live_server):
    store = live_server.store
    ada, bob = await make_human(store, "ada"), await make_human(store, "bob")
    builder = await make_agent(store, user=ada, agent_id="builder", queues=("builds", "deploys"))
    idle = await make_agent(store, user=ada, agent_id="idle", queues=("docs",))
    gone = await make_agent(store, user=ada, agent_id="gone", queues=("docs",))
    await store.endpoint_revoke(gone.endpoint_id, user_id=ada.user_id)
    bobs = await make_agent(store, user=bob, agent_id="bobs", queues=("builds",))
    now = datetime.now(timezone.utc)
    fresh = await store.todo_add(builder, queue="builds", title="Fresh build")
    await store.todo_claim(builder, fresh["id"], claimant="box/run-1", lease_seconds=600)
    stuck = await store.todo_add(builder, queue="deploys", title="Stuck deploy")
    # silent for six minutes of a ten-minute lease: quiet (a lapsed one the server's reaper would close)
    await store.todo_claim(builder, stuck["id"], lease_seconds=600, now=now - timedelta(minutes=6))
    asked = await store.todo_add(builder, queue="builds", title="Asks a human")
    await store.todo_claim(builder, asked["id"], lease_seconds=600)
    await store.todo_interrupt(builder, asked["id"])
    await store.todo_add(builder, queue="builds", title="Waiting")  # pending: held by nobody
    theirs = await store.todo_add(bobs, queue="builds", title="Bob's build")
    await store.todo_claim(bobs, theirs["id"])

    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/agents")).text
        assert "<title>Agents · Switchboard</title>" in page and 'href="/agents" aria-current="page"' in page
        row = agent_row(page, builder.endpoint_id)
        assert "agent:builder" in row and "vended token" in row and "builds, deploys" in row
        assert "3 todos:" in row and "Fresh build" in row and "Stuck deploy" in row and "Asks a human" in row
        assert "Waiting" not in row and "box/run-1" in row
        assert re.search(r"Fresh build \(claimed, attempt 1, box/run-1\): live , claimed, no heartbeat yet, \d+ s ago",
                         row), row
        assert re.search(r"Stuck deploy \(claimed, attempt 1\): quiet , claimed, no heartbeat yet, 6 min ago", row), row
        assert "2 live, 1 quiet" in row
        assert agent_row(page, idle.endpoint_id).count("nothing") == 2  # holds nothing, no liveness
        assert "revoked" in agent_row(page, gone.endpoint_id)
        assert page.index(f"agent-{idle.endpoint_id}") < page.index(f"agent-{gone.endpoint_id}")  # active first
        assert bobs.endpoint_id not in page and "Bob's build" not in page and "bobs" not in page
        assert f'href="/todos/{fresh["id"]}"' in page


async def test_a_human_with_no_endpoints_is_told_how_to_get_an_agent(live_server):
    await make_human(live_server.store, "ada")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        page = (await c.get("/agents")).text
        assert "You have no agents yet." in page and 'href="/endpoints"' in page
