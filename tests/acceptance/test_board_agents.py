"""The Agents page over HTTP: each endpoint of the signed-in human, vended or connected, with
its queues, the todos it holds now with each open attempt's liveness in words, and its last
activity; another human's endpoints and todos never appear."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from tests.acceptance.test_board_auth import client_for, make_human, sign_in
from tests.conftest import make_agent, run_server


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
        # Interrupted with no answer yet: waiting for ada, not judged by its lease.
        assert "Asks a human (input required, attempt 1): waiting for a person , no question asked" in row, row
        assert "1 waiting for a person, 1 live, 1 quiet" in row
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


@pytest.fixture
async def server_without_reaper(server_settings):
    """A lease claimed in the past has lapsed in real time too: the live reaper would end it
    between the claim and the interrupt."""
    async with run_server(server_settings.with_(reaper_interval_seconds=0)) as srv:
        yield srv


async def test_a_question_left_unanswered_reads_waiting_for_a_person_everywhere_never_lapsed(server_without_reaper):
    """Its lease ended 9 minutes ago, but an unanswered interrupt is never reaped: the list
    row, the drawer and the Agents page say whom it waits for, with the times in words (the
    exact times in datetime and a tooltip); once answered, its holder has a lease to resume
    in and is judged by it again."""
    live_server = server_without_reaper
    store = live_server.store
    ada = await make_human(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="deployer", queues=("deploys",))
    now = datetime.now(timezone.utc)
    todo = await store.todo_add(agent, queue="deploys", title="Ship build 418", now=now - timedelta(minutes=20))
    await store.todo_claim(agent, todo["id"], lease_seconds=60, now=now - timedelta(minutes=10))
    await store.todo_interrupt(agent, todo["id"], question="Deploy now?", expires_in_seconds=30 * 60,
                               now=now - timedelta(minutes=3))
    words = re.compile(r"waiting for a person , asked 3 min ago , expires in 27 min")
    async with client_for(live_server) as c:
        await sign_in(c, "ada")
        board, drawer, agents = [(await c.get(path)).text for path in ("/", f"/todos/{todo['id']}", "/agents")]
        places = {"list row": re.search(rf'<tr id="todo-{todo["id"]}".*?</tr>', board, re.S).group(0),
                  "drawer": re.search(r'<section id="drawer-details".*?</section>', drawer, re.S).group(0),
                  "agents": re.search(rf'<tr id="agent-{agent.endpoint_id}">.*?</tr>', agents, re.S).group(0)}
        for where, html in places.items():
            text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
            assert words.search(text), (where, text)
            assert "lapsed" not in text and "lease ends" not in text, (where, text)
            asked_at = re.search(r'asked <time datetime="([^"]+)" title="([^"]+)" data-relative>', html)
            assert asked_at and asked_at.group(2).endswith(" UTC"), (where, html)
        assert "1 waiting for a person" in places["agents"]

        await store.todo_answer(ada, todo["id"], text="yes")
        board, agents = [(await c.get(path)).text for path in ("/", "/agents")]
        assert "waiting for a person" not in re.search(rf'<tr id="todo-{todo["id"]}".*?</tr>', board, re.S).group(0)
        row = agent_row(agents, agent.endpoint_id)
        assert "waiting for a person" not in row and "1 live" in row, row
