"""Plans through MCP, as agents call them: add_todo and add_todos with after (an add_todos
item naming an earlier item of the call as "#k"), the waiting todo passed over by claim_next
and refused by claim naming what it waits for, get_todo's waiting_for and blocking (a
dead-lettered dependency says so), list_todos' waiting filter, claim results carrying after
and schedule_id; and each bad after refused as `invalid` or `not_found` naming the argument,
with nothing added (another endpoint's todo answered exactly as an id never minted).

Each scenario runs through the Python SDK's client in both protocol generations and through
the TypeScript SDK's client, which validates every result against the tool's output schema."""

from __future__ import annotations

import pytest

from tests.acceptance.mcp_helpers import vend, mcp_server  # noqa: F401
from tests.acceptance.test_mcp_claim_order import CLIENTS, agent


def ids(todos: list[dict]) -> list[str]:
    return [t["id"] for t in todos]


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_three_step_plan_filed_with_add_todos_is_claimed_in_order(mcp_server, kind):
    """Step 1, then step 2 (after "#0"), then step 3 (after "#1", and the most urgent): only
    the step whose predecessor is done can be claimed, whatever its priority."""
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        plan = (await a.ok("add_todos", {"todos": [
            {"queue": "q", "title": "fetch the data"},
            {"queue": "q", "title": "build the report", "after": ["#0"]},
            {"queue": "q", "title": "ship it", "after": ["#1"], "priority": 0},
        ]}))["todos"]
        fetch, build, ship = plan
        assert [t["after"] for t in plan] == [[], [fetch["id"]], [build["id"]]]
        assert [t["waiting"] for t in plan] == [False, True, True]
        assert [t["schedule_id"] for t in plan] == [None, None, None]

        for step in plan:
            claim = await a.ok("claim_next", {})
            assert claim["todo"]["id"] == step["id"]
            assert (claim["todo"]["after"], claim["todo"]["waiting"], claim["todo"]["schedule_id"]) == (
                step["after"], False, None)
            assert await a.ok("claim_next", {}) == {"todo": None}  # the next step waits for this one
            await a.ok("complete", {"id": step["id"]})
        assert await a.ok("claim_next", {}) == {"todo": None}
        assert [t["state"] for t in (await a.ok("list_todos", {}))["todos"]] == ["done"] * 3


@pytest.mark.parametrize("kind", CLIENTS)
async def test_add_todo_with_after_waits_until_every_todo_named_is_done(mcp_server, kind):
    """The waiting todo is listed by waiting=true (and not by waiting=false), passed over by
    claim_next and refused by claim naming each todo it still waits for, until the last one
    completes."""
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        first = await a.ok("add_todo", {"queue": "q", "title": "first"})
        second = await a.ok("add_todo", {"queue": "q", "title": "second"})
        last = await a.ok("add_todo", {"queue": "q", "title": "last", "priority": 0,
                                       "after": [first["id"], second["id"], first["id"]]})
        assert (last["after"], last["waiting"], last["state"]) == ([first["id"], second["id"]], True, "pending")
        assert ids((await a.ok("list_todos", {"waiting": True}))["todos"]) == [last["id"]]
        assert ids((await a.ok("list_todos", {"waiting": False}))["todos"]) == [second["id"], first["id"]]

        refused = await a.error("claim", {"id": last["id"]})
        assert refused["code"] == "conflict", refused
        assert f"{first['id']} (pending)" in refused["message"] and f"{second['id']} (pending)" in refused["message"]
        assert (await a.ok("claim_next", {}))["todo"]["id"] == first["id"]  # the P0 waits; the oldest P2 goes
        await a.ok("complete", {"id": first["id"]})
        refused = await a.error("claim", {"id": last["id"]})
        assert second["id"] in refused["message"] and first["id"] not in refused["message"], refused
        assert (await a.ok("get_todo", {"id": last["id"]}))["waiting"] is True

        await a.ok("claim", {"id": second["id"]})
        await a.ok("complete", {"id": second["id"]})
        assert (await a.ok("list_todos", {"waiting": True}))["todos"] == []
        claim = await a.ok("claim", {"id": last["id"]})
        assert (claim["todo"]["after"], claim["todo"]["waiting"], claim["todo"]["schedule_id"]) == (
            [first["id"], second["id"]], False, None)


@pytest.mark.parametrize("kind", CLIENTS)
async def test_get_todo_shows_waiting_for_and_blocking_and_a_dead_lettered_dependency(mcp_server, kind):
    """waiting_for lists what is not done yet, in the order named, a dead letter flagged;
    blocking lists the live todos waiting on this one, and is empty once it is done."""
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        flaky = await a.ok("add_todo", {"queue": "q", "title": "flaky", "max_attempts": 1})
        steady = await a.ok("add_todo", {"queue": "q", "title": "steady"})
        waiter = await a.ok("add_todo", {"queue": "q", "title": "waiter", "after": [flaky["id"], steady["id"]]})
        got = await a.ok("get_todo", {"id": waiter["id"]})
        assert got["waiting_for"] == [
            {"id": flaky["id"], "title": "flaky", "state": "pending", "dead_letter": False},
            {"id": steady["id"], "title": "steady", "state": "pending", "dead_letter": False}]
        assert got["blocking"] == []
        for dependency in (flaky, steady):
            got = await a.ok("get_todo", {"id": dependency["id"]})
            assert (got["waiting_for"], got["blocking"]) == (
                [], [{"id": waiter["id"], "title": "waiter", "state": "pending"}])

        await a.ok("claim", {"id": flaky["id"]})
        assert (await a.ok("fail", {"id": flaky["id"], "summary": "broke"}))["dead_letter"] is True
        await a.ok("claim", {"id": steady["id"]})
        await a.ok("complete", {"id": steady["id"]})
        got = await a.ok("get_todo", {"id": waiter["id"]})
        assert (got["waiting"], got["waiting_for"]) == (
            True, [{"id": flaky["id"], "title": "flaky", "state": "failed", "dead_letter": True}])
        assert (await a.ok("get_todo", {"id": steady["id"]}))["blocking"] == []  # done: it blocks nothing
        assert (await a.ok("get_todo", {"id": flaky["id"]}))["blocking"] == [
            {"id": waiter["id"], "title": "waiter", "state": "pending"}]
        refused = await a.error("claim", {"id": waiter["id"]})
        assert refused["code"] == "conflict" and f"{flaky['id']} (dead-lettered)" in refused["message"], refused


@pytest.mark.parametrize("kind", CLIENTS)
async def test_complete_todos_closing_every_dependency_makes_the_waiting_todo_claimable(mcp_server, kind):
    ep = await vend(mcp_server.store)
    async with agent(mcp_server, ep.token, kind) as a:
        plan = (await a.ok("add_todos", {"todos": [
            {"queue": "q", "title": "one"}, {"queue": "q", "title": "two"},
            {"queue": "q", "title": "both", "after": ["#0", "#1"]}]}))["todos"]
        claims = (await a.ok("claim_next", {"limit": 3}))["claims"]
        assert ids([c["todo"] for c in claims]) == ids(plan[:2])
        await a.ok("complete_todos", {"todos": [{"id": t["id"]} for t in plan[:2]]})
        claim = await a.ok("claim_next", {})
        assert (claim["todo"]["id"], claim["todo"]["after"]) == (plan[2]["id"], ids(plan[:2]))


# (tool, the bad after, the argument the error names, its code); "#k" items stand as they are.
BAD_AFTER = [
    ("add_todo", ["x"] * 21, "after", "invalid"),
    ("add_todo", "not-an-array", "after", "invalid"),
    ("add_todo", {"id": "x"}, "after", "invalid"),
    ("add_todo", [42], "after", "invalid"),
    ("add_todo", [""], "after", "invalid"),
    ("add_todo", ["#0"], "after", "invalid"),
    ("add_todos", ["#5"], "todos[1].after", "invalid"),
    ("add_todos", ["#1"], "todos[1].after", "invalid"),  # itself
    ("add_todos", ["#-1"], "todos[1].after", "invalid"),
    ("add_todos", ["x"] * 21, "todos[1].after", "invalid"),
    ("add_todos", "#0", "todos[1].after", "invalid"),
    ("add_todo", ["never-minted"], "after", "not_found"),
    ("add_todos", ["never-minted"], "todos[1].after", "not_found"),
]


def with_after(tool: str, after) -> dict:
    if tool == "add_todo":
        return {"queue": "q", "title": "bad", "after": after}
    return {"todos": [{"queue": "q", "title": "fine"}, {"queue": "q", "title": "bad", "after": after}]}


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_bad_after_is_invalid_or_not_found_naming_it_and_adds_nothing(mcp_server, kind):
    """Too many ids, not an array, "#k" naming no earlier item, an unknown id: refused naming
    after (or the item's after); another endpoint's todo is answered byte for byte as an id
    never minted; nothing is added."""
    store = mcp_server.store
    ep, stranger = await vend(store), await vend(store)
    async with agent(mcp_server, stranger.token, kind) as s:
        theirs = (await s.ok("add_todo", {"queue": "q", "title": "someone else's"}))["id"]
    async with agent(mcp_server, ep.token, kind) as a:
        mine = (await a.ok("add_todo", {"queue": "q", "title": "mine"}))["id"]
        wrong = []
        for tool, after, argument, code in BAD_AFTER:
            error = await a.error(tool, with_after(tool, after))
            if (error["code"], error.get("argument")) != (code, argument):
                wrong.append((tool, after, error))
        assert wrong == []
        for tool in ("add_todo", "add_todos"):
            foreign = await a.error_text(tool, with_after(tool, [mine, theirs]))
            assert foreign == await a.error_text(tool, with_after(tool, [mine, "never-minted-id"])), tool
            assert foreign == await a.error_text(tool, with_after(tool, [mine, "nul\x00id"])), tool
        assert ids((await a.ok("list_todos", {}))["todos"]) == [mine]
        waiting = await a.error("list_todos", {"waiting": "yes"})
        assert (waiting["code"], waiting["argument"]) == ("invalid", "waiting")
        assert (await a.ok("get_todo", {"id": mine}))["blocking"] == []
