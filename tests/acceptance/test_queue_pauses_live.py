"""A paused queue through the running app: over real MCP connections claim_next finds
nothing in it while a todo is pending and claim by id is a conflict naming the pause, the
doorbell heartbeat passes it over, and resuming rings its ready todos on the owner's live
sessions, gate or not; /metrics has the switchboard_queue_paused gauge; and the command line
pauses and resumes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from board.store.store import Human
from tests.acceptance.mcp_helpers import call, call_error, connect, doorbell, vend, wait_until
from tests.acceptance.test_mcp_doorbell import listening, rung, uri
from tests.acceptance.test_metrics import scrape, value
from tests.conftest import ROOT, make_agent, make_user


@pytest.fixture
def server_settings(server_settings):
    # A gate far longer than the test: only the resume itself can ring a todo a second time.
    return server_settings.with_(doorbell_gate_seconds=600)


async def recorded(server, owner: Human) -> None:
    """Waits until the database has recorded this process's listener of the owner. Before, an
    add does not notify, and the doorbell's catch-up sweep rings only todos outside paused
    queues: an add to a paused queue would not be rung at all."""
    presence = server.runtime.fanout.presence
    assert owner.user_id in presence.held()
    await presence.ready(owner.user_id, 10)


async def owner_of(store, ep) -> Human:
    user = await store.user_by_id(ep.user_id)
    return Human(user["id"], user["username"])


async def test_claim_next_over_mcp_finds_nothing_in_a_paused_queue_and_claim_names_the_pause(live_server):
    store = live_server.store
    ep = await vend(store, queues=("q",))
    owner = await owner_of(store, ep)
    async with connect(live_server, ep.token, "modern") as client:
        todo = await call(client, "add_todo", {"queue": "q", "title": "wait for it"})
        await store.queue_pause(owner, "q")
        assert (await call(client, "claim_next", {}))["todo"] is None
        assert (await call(client, "claim_next", {"queue": "q"}))["todo"] is None
        error = await call_error(client, "claim", {"id": todo["id"]})
        assert error["code"] == "conflict" and "paused" in error["message"]
        assert (await call(client, "get_todo", {"id": todo["id"]}))["state"] == "pending"
        await store.queue_resume(owner, "q")
        claimed = await call(client, "claim_next", {})
        assert claimed["todo"]["id"] == todo["id"]


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_resuming_a_paused_queue_rings_its_ready_todos(live_server, generation):
    store = live_server.store
    ep = await vend(store, queues=("q", "other"))
    owner = await owner_of(store, ep)
    async with rung(live_server, ep, generation) as (client, rings):
        await recorded(live_server, owner)
        await store.queue_pause(owner, "q")
        waiting = await call(client, "add_todo", {"queue": "q", "title": "added while paused"})
        elsewhere = await call(client, "add_todo", {"queue": "other", "title": "in a live queue"})
        await wait_until(lambda: uri(waiting["id"]) in rings and uri(elsewhere["id"]) in rings)
        assert (await call(client, "claim_next", {"queue": "q"}))["todo"] is None  # the ring was for nothing
        await store.queue_resume(owner, "q")
        # The gate (600 s) holds back every other ring: this one is the resume's.
        await wait_until(lambda: rings.count(uri(waiting["id"])) == 2)
        assert rings.count(uri(elsewhere["id"])) == 1
        assert (await call(client, "claim_next", {"queue": "q"}))["todo"]["id"] == waiting["id"]


async def test_another_humans_resume_rings_nothing_on_my_sessions(live_server):
    store = live_server.store
    mine = await vend(store, queues=("q",))
    theirs = await vend(store, queues=("q",), agent_id="theirs")
    me, them = await owner_of(store, mine), await owner_of(store, theirs)
    async with listening(live_server, mine.token) as (client, rings, _):
        await recorded(live_server, me)
        await store.queue_pause(me, "q")
        todo = await call(client, "add_todo", {"queue": "q", "title": "mine, paused"})
        await wait_until(lambda: uri(todo["id"]) in rings)
        bell = doorbell(live_server)
        seen = bell.considered
        await store.queue_pause(them, "q")
        await store.queue_resume(them, "q")
        await wait_until(lambda: bell.considered >= seen + 2 and not bell._resumes)  # both decided on
        assert rings.count(uri(todo["id"])) == 1
        await store.queue_resume(me, "q")
        await wait_until(lambda: rings.count(uri(todo["id"])) == 2)


async def test_the_doorbell_heartbeat_passes_over_a_paused_queue(live_server):
    store = live_server.store
    ep = await vend(store, queues=("q", "other"))
    owner = await owner_of(store, ep)
    agent = await store.endpoint_authenticate(ep.token)
    paused = await store.todo_add(agent, queue="q", title="paused")
    live = await store.todo_add(agent, queue="other", title="live")
    await store.queue_pause(owner, "q")
    ready = await store.ready_todos([ep.endpoint_id])
    assert [r["id"] for r in ready] == [live["id"]]
    assert [r["id"] for r in await store.ready_todos([ep.endpoint_id], queue="q")] == []
    await store.queue_resume(owner, "q")
    assert [r["id"] for r in await store.ready_todos([ep.endpoint_id], queue="q")] == [paused["id"]]


async def test_the_queue_paused_gauge_is_read_at_scrape_time(live_server):
    store = live_server.store
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    ada_agent = await make_agent(store, user=ada, agent_id="w1", queues=("builds", "docs"))
    bob_agent = await make_agent(store, user=bob, agent_id="b1", queues=("builds",))
    await store.todo_add(ada_agent, queue="docs", title="t")
    await store.todo_add(bob_agent, queue="builds", title="t")
    assert value(await scrape(live_server.url), "switchboard_queue_paused", queue="builds") == 0
    assert ("switchboard_queue_paused", (("queue", "docs"),)) in await scrape(live_server.url)
    await store.queue_pause(ada, "builds")
    await store.queue_pause(bob, "builds")
    await store.queue_pause(ada, "docs")
    samples = await scrape(live_server.url)
    assert value(samples, "switchboard_queue_paused", queue="builds") == 2  # two owners paused it
    assert value(samples, "switchboard_queue_paused", queue="docs") == 1
    await store.queue_resume(ada, "builds")
    await store.queue_resume(bob, "builds")
    samples = await scrape(live_server.url)
    assert value(samples, "switchboard_queue_paused", queue="builds") == 0
    assert ("switchboard_queue_paused", (("queue", "builds"),)) in samples


async def test_the_command_line_pauses_and_resumes_a_users_queue(store, db_url):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("builds",))
    await store.todo_add(agent, queue="builds", title="t")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}, "DATABASE_URL": db_url}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "board", "queue", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    ran = cli("pause", "--user", "ada", "builds")
    assert ran.returncode == 0 and ran.stdout.strip() == "paused queue builds of ada", ran.stderr
    assert (await store.todo_claim_next(agent))["todo"] is None
    assert cli("pause", "--user", "ada", "builds").stdout.strip() == "queue builds of ada was already paused"
    refused = cli("pause", "--user", "nobody", "builds")
    assert refused.returncode == 2 and "no user named 'nobody'" in refused.stderr
    refused = cli("pause", "--user", "ada", "docs")
    assert refused.returncode == 2 and "no endpoint of this user is granted that queue" in refused.stderr
    assert cli("resume", "--user", "ada", "docs").returncode == 2
    ran = cli("resume", "--user", "ada", "builds")
    assert ran.returncode == 0 and ran.stdout.strip() == "resumed queue builds of ada", ran.stderr
    assert (await store.todo_claim_next(agent))["todo"] is not None
