"""Endpoints of a team over MCP, through the Python SDK's own client in both protocol
generations: every endpoint of a team reads and claims the team's todos in its granted queues
(a planner adds, a pool of workers claims), each holds only what it claimed, a person of the
team answers what one asks, the doorbell rings the team's listeners when another of its
endpoints adds, and revoking one dead-letters only what it held. A personal endpoint and a
team endpoint never see each other's todos (REQ-10's scenarios themselves run over both in
test_mcp_attempts.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.acceptance.mcp_helpers import (CREDENTIALS, GENERATIONS, Inbox, call, call_error, connect, credential,
                                          doorbell, make_team, space_of, vend, wait_until)
from tests.conftest import LOAD_SLACK_SECONDS, sql_rows

TODOS = "switchboard://todos"


def uri(todo_id: str) -> str:
    return f"{TODOS}/{todo_id}"


@pytest.fixture
def server_settings(server_settings):
    return server_settings.with_(a2ui_enabled=True)


async def team_of(server, *, kinds=("vended", "vended", "vended"), name: str | None = None):
    """A team and its planner (adds only) and two workers (drain), of the credential kinds given."""
    team = await make_team(server.store, name)
    planner = await credential(server, kinds[0], user_id=team, agent_id="planner",
                               scope=["add_todo", "list_todos", "get_todo"])
    workers = [await credential(server, kind, user_id=team, agent_id=f"worker-{i}")
               for i, kind in enumerate(kinds[1:], 1)]
    return team, planner, workers


@pytest.mark.parametrize("kinds", [("vended", "vended", "vended"), ("oauth", "vended", "oauth")],
                         ids=["vended", "oauth-grants"])
@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_planners_todos_are_drained_by_the_teams_pool_each_holding_what_it_claimed(live_server, generation,
                                                                                        kinds):
    team, planner, (w1, w2) = await team_of(live_server, kinds=kinds)
    async with connect(live_server, planner.token, generation) as p, \
            connect(live_server, w1.token, generation) as a, connect(live_server, w2.token, generation) as b:
        first = await call(p, "add_todo", {"queue": "q", "title": "first"})
        second = await call(p, "add_todo", {"queue": "q", "title": "second", "after": [first["id"]]})
        third = await call(p, "add_todo", {"queue": "q", "title": "third"})
        listed = await call(a, "list_todos", {})
        assert {t["id"] for t in listed["todos"]} == {first["id"], second["id"], third["id"]}
        space = await space_of(live_server, planner.endpoint_id)
        assert {t["endpoint_id"] for t in listed["todos"]} == {space} != {planner.endpoint_id}  # the team's todos

        held_a = await call(a, "claim_next", {"require_fence": True})
        held_b = await call(b, "claim_next", {"require_fence": True})
        assert {held_a["todo"]["id"], held_b["todo"]["id"]} == {first["id"], third["id"]}  # second waits for first
        assert await call(b, "claim_next", {}) == {"todo": None}
        # each endpoint holds only what it claimed: the other's verbs are refused, nothing changes
        theirs = held_b["todo"]["id"]
        assert (await call_error(a, "complete", {"id": theirs}))["code"] == "conflict"
        assert (await call_error(a, "release", {"id": theirs, "lease_token": held_a["lease_token"]}))["code"] == \
            "conflict"
        await call(a, "note", {"id": held_a["todo"]["id"], "text": "halfway", "lease_token": held_a["lease_token"]})
        await call(b, "release", {"id": theirs, "lease_token": held_b["lease_token"], "summary": "b hands it back"})
        await call(a, "complete", {"id": held_a["todo"]["id"], "lease_token": held_a["lease_token"],
                                   "summary": "a did it"})

        # what one worker did, the others and the planner read
        read = await call(p, "get_todo", {"id": held_a["todo"]["id"]})
        assert read["state"] == "done" and read["attempts"][0]["summary"] == "a did it"
        assert [n["text"] for n in read["attempts"][0]["notes"]] == ["halfway"]
        again = await call(a, "claim", {"id": theirs})
        assert again["prior_attempts"][0]["summary"] == "b hands it back"
        await call(a, "fail", {"id": theirs, "summary": "a could not"})
        assert (await call(p, "get_todo", {"id": theirs}))["attempts"][0]["summary"] == "a could not"  # newest first
        # the plan: second became claimable once first was done, by any worker of the team
        nxt = await call(b, "claim", {"id": second["id"]})
        assert nxt["todo"]["id"] == second["id"] if "todo" in nxt else nxt["id"] == second["id"]
        plan = await call(p, "get_todo", {"id": second["id"]})
        assert plan["after"] == [first["id"]] and plan["state"] == "claimed"
        # the continuation of a team todo is the team's, read by every endpoint of the team
        follow = await call(p, "add_todo", {"queue": "q", "title": "follow-up", "continues": first["id"]})
        assert (await call(b, "get_todo", {"id": follow["id"]}))["continues_id"] == first["id"]

    rows = await sql_rows(live_server.settings.database_url,
                          "SELECT todo_id, claimer_endpoint_id::text AS claimer FROM attempts ORDER BY claimed_at")
    claimers = {(r["todo_id"], r["claimer"]) for r in rows if r["todo_id"] in (first["id"], third["id"], second["id"])}
    assert (held_a["todo"]["id"], w1.endpoint_id) in claimers and (theirs, w2.endpoint_id) in claimers
    assert (second["id"], w2.endpoint_id) in claimers  # an attempt names the endpoint that claimed


@pytest.mark.parametrize("kind", CREDENTIALS)
async def test_a_team_endpoint_and_a_personal_endpoint_never_see_each_others_todos(live_server, kind):
    team = await make_team(live_server.store)
    ours = await credential(live_server, kind, user_id=team)
    mine = await credential(live_server, kind)
    async with connect(live_server, ours.token) as t, connect(live_server, mine.token) as m:
        team_todo = await call(t, "add_todo", {"queue": "q", "title": "the team's"})
        my_todo = await call(m, "add_todo", {"queue": "q", "title": "mine"})
        assert [x["id"] for x in (await call(t, "list_todos", {}))["todos"]] == [team_todo["id"]]
        assert [x["id"] for x in (await call(m, "list_todos", {}))["todos"]] == [my_todo["id"]]
        assert (await call_error(t, "get_todo", {"id": my_todo["id"]}))["code"] == "not_found"
        assert (await call_error(m, "get_todo", {"id": team_todo["id"]}))["code"] == "not_found"
        assert (await call(t, "claim_next", {}))["todo"]["id"] == team_todo["id"]
        assert (await call(m, "claim_next", {}))["todo"]["id"] == my_todo["id"]
        assert await call(t, "claim_next", {}) == {"todo": None}


async def test_an_agent_id_names_one_live_endpoint_of_a_team(live_server):
    """A team's endpoints tell their holders apart by agent id (owner agent:<id>): a second
    live one with the same agent id is refused; a person's endpoints keep theirs as before."""
    from board.errors import Conflict

    team = await make_team(live_server.store)
    first = await vend(live_server.store, user_id=team, agent_id="same")
    with pytest.raises(Conflict):
        await vend(live_server.store, user_id=team, agent_id="same")
    await vend(live_server.store, user_id=first.user_id, agent_id="other")
    person = await vend(live_server.store, agent_id="same")
    await vend(live_server.store, user_id=person.user_id, agent_id="same")  # a person's two: allowed, as before
    await live_server.store.endpoint_revoke(first.endpoint_id, user_id=team)
    await vend(live_server.store, user_id=team, agent_id="same")  # revoked: the agent id is free again


async def test_a_team_endpoint_sees_only_its_granted_queues_of_the_teams_todos(live_server):
    team = await make_team(live_server.store)
    wide = await vend(live_server.store, user_id=team, agent_id="wide", queues=("q", "r"))
    narrow = await vend(live_server.store, user_id=team, agent_id="narrow", queues=("q",))
    async with connect(live_server, wide.token) as w, connect(live_server, narrow.token) as n:
        in_r = await call(w, "add_todo", {"queue": "r", "title": "r's"})
        assert (await call_error(n, "get_todo", {"id": in_r["id"]}))["code"] == "not_found"
        assert await call(n, "claim_next", {}) == {"todo": None}
        assert (await call(w, "claim_next", {}))["todo"]["id"] == in_r["id"]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_team_endpoints_question_is_answered_by_a_person_of_the_team_and_rings_it(live_server, generation):
    store = live_server.store
    team = await make_team(store, f"answering-{generation}")
    worker = await vend(store, user_id=team, agent_id="asker")
    space = await space_of(live_server, worker.endpoint_id)
    inbox = Inbox()
    async with connect(live_server, worker.token, "legacy", inbox=inbox) as client:
        await wait_until(lambda: doorbell(live_server).live_doorways(space) > 0)
        todo = await call(client, "add_todo", {"queue": "q", "title": "deploy?"})
        await inbox.wait_for(uri(todo["id"]))
        await call(client, "claim", {"id": todo["id"]})
        await call(client, "interrupt", {"id": todo["id"], "question": "Deploy now?", "choices": ["yes", "no"]})
        operator = await store.team_space(f"answering-{generation}")
        await store.todo_answer(operator, todo["id"], choice="yes")
        await wait_until(lambda: inbox.uris.count(uri(todo["id"])) == 2)  # the add, then the answer
        resumed = await call(client, "resume", {"id": todo["id"]})
        assert [a["choice"] for a in resumed["answers"]] == ["yes"]


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_todo_one_team_endpoint_adds_rings_another_team_endpoints_listener(live_server, generation):
    team, planner, (worker, _) = await team_of(live_server)
    space = await space_of(live_server, worker.endpoint_id)
    outsider = await vend(live_server.store)
    rings: list[str] = []
    inbox = Inbox()
    async with connect(live_server, planner.token) as p, connect(live_server, outsider.token) as o:
        if generation == "legacy":
            async with connect(live_server, worker.token, "legacy", inbox=inbox):
                await wait_until(lambda: doorbell(live_server).live_doorways(space) > 0)
                await call(o, "add_todo", {"queue": "q", "title": "not the team's"})
                todo = await call(p, "add_todo", {"queue": "q", "title": "for the pool"})
                await inbox.wait_for(uri(todo["id"]))
            rings = inbox.uris
        else:
            async with connect(live_server, worker.token) as w, w.listen(resource_subscriptions=[TODOS]) as sub:
                await call(o, "add_todo", {"queue": "q", "title": "not the team's"})
                todo = await call(p, "add_todo", {"queue": "q", "title": "for the pool"})

                async def heard() -> None:
                    async for event in sub:
                        rings.append(event.uri)
                        if event.uri == uri(todo["id"]):
                            return
                await asyncio.wait_for(heard(), timeout=5 + LOAD_SLACK_SECONDS)
    assert rings == [uri(todo["id"])]  # the outsider's todo never rang the team's listener


async def test_a_team_todos_a2ui_resource_reads_for_every_team_endpoint_and_not_for_others(live_server):
    team, planner, (worker, _) = await team_of(live_server)
    outsider = await vend(live_server.store)
    async with connect(live_server, planner.token) as p, connect(live_server, worker.token) as w, \
            connect(live_server, outsider.token) as o:
        todo = await call(p, "add_todo", {"queue": "q", "title": "viewed"})
        watched = f"{uri(todo['id'])}/a2ui"
        # the planner watches the view; the worker's claim (another endpoint of the team) rings it
        async with connect(live_server, planner.token) as watcher, \
                watcher.listen(resource_subscriptions=[watched]) as sub:
            await call(w, "claim", {"id": todo["id"]})

            async def heard() -> str:
                async for event in sub:
                    return event.uri
            assert await asyncio.wait_for(heard(), timeout=5 + LOAD_SLACK_SECONDS) == watched
        for client in (p, w):
            [content] = (await client.read_resource(f"{uri(todo['id'])}/a2ui")).contents
            assert "viewed" in content.text
            [plain] = (await client.read_resource(uri(todo["id"]))).contents
            assert json.loads(plain.text)["state"] == "claimed"
        with pytest.raises(Exception) as foreign:
            await o.read_resource(f"{uri(todo['id'])}/a2ui")
        with pytest.raises(Exception) as never:
            await o.read_resource(f"{TODOS}/never-minted-0000/a2ui")
        assert str(foreign.value) == str(never.value)


async def test_revoking_a_team_endpoint_dead_letters_only_what_it_held(live_server):
    store = live_server.store
    team, planner, (w1, w2) = await team_of(live_server)
    async with connect(live_server, planner.token) as p, connect(live_server, w1.token) as a, \
            connect(live_server, w2.token) as b:
        todos = [await call(p, "add_todo", {"queue": "q", "title": f"t{i}"}) for i in range(3)]
        mine = (await call(a, "claim_next", {}))["todo"]["id"]
        theirs = (await call(b, "claim_next", {}))["todo"]["id"]
        assert await store.endpoint_revoke(w1.endpoint_id, user_id=team) == 1
        assert (await call(p, "get_todo", {"id": mine}))["state"] == "failed"
        assert (await call(p, "get_todo", {"id": theirs}))["state"] == "claimed"
        left = next(t["id"] for t in todos if t["id"] not in (mine, theirs))
        assert (await call(p, "get_todo", {"id": left}))["state"] == "pending"
        await call(b, "complete", {"id": theirs})
    # a new grant after the revoke still sees the team's work
    again = await credential(live_server, "oauth", user_id=team, agent_id="worker-1")
    async with connect(live_server, again.token) as c:
        assert (await call(c, "claim_next", {}))["todo"]["id"] == left
