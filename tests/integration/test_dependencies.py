"""Todos that wait for other todos (migration 0016), on Postgres through the store: a plan
claimed in its order, the release in the last dependency's complete (concurrent completes
and adds racing a complete included), a dependency that ends badly and what a person does
about it, the deletes a plan refuses, and ids that are not the caller's."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from board.errors import Conflict, Invalid, NotFound
from board.store.vocabulary import Human
from tests.conftest import LOAD_SLACK_SECONDS, make_agent, make_user, sql_rows


@pytest.fixture
def human_of(store):
    async def owner(agent) -> Human:
        row = await store.user_by_id(agent.user_id)
        return Human(agent.user_id, row["username"])
    return owner


async def _claim_titles(store, agent, n=5):
    got = []
    for _ in range(n):
        c = (await store.todo_claim_next(agent))["todo"]
        if c is None:
            break
        got.append(c["title"])
        await store.todo_complete(agent, c["id"])
    return got


async def test_a_three_step_plan_is_claimed_in_its_order(store):
    agent = await make_agent(store)
    plan = await store.todos_add(agent, [
        {"queue": "q", "title": "review the fix", "priority": 0, "after": []},
        {"queue": "q", "title": "reproduce the bug"},
        {"queue": "q", "title": "write the fix", "after": ["#1"]},
        {"queue": "q", "title": "review it", "after": ["#1", "#2"]},
    ])
    first, repro, fix, review = plan["todos"]
    assert fix["after"] == [repro["id"]] and fix["waiting"] and not repro["waiting"]
    assert review["after"] == [repro["id"], fix["id"]]
    assert await _claim_titles(store, agent, 10) == ["review the fix", "reproduce the bug", "write the fix",
                                                      "review it"]


async def test_a_waiting_todo_of_the_highest_priority_is_passed_over_until_its_dependency_is_done(store):
    agent = await make_agent(store)
    plan = await store.todos_add(agent, [
        {"queue": "q", "title": "reproduce the bug", "priority": 4},
        {"queue": "q", "title": "ship the fix", "priority": 0, "after": ["#0"]},
    ])
    repro, ship = plan["todos"]
    assert (await store.todo_claim_next(agent))["todo"]["id"] == repro["id"]
    assert (await store.todo_claim_next(agent))["todo"] is None
    await store.todo_complete(agent, repro["id"])
    assert (await store.todo_claim_next(agent))["todo"]["id"] == ship["id"]


async def test_a_todo_waiting_on_two_is_claimable_only_after_both_complete(store):
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="a")
    b = await store.todo_add(agent, queue="q", title="b")
    x = await store.todo_add(agent, queue="q", title="x", after=[a["id"], b["id"]])
    assert x["waiting"] and x["after"] == [a["id"], b["id"]]
    await store.todo_claim(agent, a["id"])
    await store.todo_complete(agent, a["id"])
    with pytest.raises(Conflict, match=rf"waits for 1 todo\(s\) to be done first: {b['id']} \(pending\)"):
        await store.todo_claim(agent, x["id"])
    assert (await store.todo_claim_next(agent))["todo"]["id"] == b["id"]
    await store.todo_complete(agent, b["id"])
    got = await store.todo_claim_next(agent)
    assert got["todo"]["id"] == x["id"] and got["todo"]["after"] == [a["id"], b["id"]]


@pytest.mark.parametrize("round_", range(12))
async def test_two_dependencies_completing_at_once_release_their_dependent_exactly_once(store, db_url, round_):
    one = await make_agent(store)
    a = await store.todo_add(one, queue="q", title="a")
    b = await store.todo_add(one, queue="q", title="b")
    x = await store.todo_add(one, queue="q", title="x", after=[a["id"], b["id"]])
    await store.todo_claim(one, a["id"])
    await store.todo_claim(one, b["id"])
    await asyncio.gather(store.todo_complete(one, a["id"]), store.todo_complete(one, b["id"]))
    rows = await sql_rows(db_url, "SELECT waits, state::text FROM todos WHERE id = %s", [x["id"]])
    assert rows == [{"waits": 0, "state": "pending"}]
    assert (await store.todo_claim_next(one))["todo"]["id"] == x["id"]


@pytest.mark.parametrize("round_", range(12))
async def test_an_add_racing_its_dependencys_complete_never_waits_forever(store, db_url, round_):
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="a")
    await store.todo_claim(agent, a["id"])
    _, x = await asyncio.gather(store.todo_complete(agent, a["id"]),
                                store.todo_add(agent, queue="q", title="x", after=[a["id"]]))
    rows = await sql_rows(db_url, "SELECT waits FROM todos WHERE id = %s", [x["id"]])
    assert rows == [{"waits": 0}]
    assert (await store.todo_claim_next(agent))["todo"]["id"] == x["id"]


async def test_a_dead_lettered_dependency_blocks_until_a_person_retries_it_and_it_completes(store, human_of):
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="flaky", max_attempts=1)
    x = await store.todo_add(agent, queue="q", title="after flaky", after=[a["id"]])
    await store.todo_claim(agent, a["id"])
    await store.todo_fail(agent, a["id"], summary="boom")
    assert (await store.todo_claim_next(agent))["todo"] is None
    seen = await store.todo_get(agent, x["id"])
    assert seen["waiting_for"] == [{"id": a["id"], "title": "flaky", "state": "failed", "dead_letter": True}]
    assert (await store.todo_get(agent, a["id"]))["blocking"] == [{"id": x["id"], "title": "after flaky",
                                                                  "state": "pending"}]
    with pytest.raises(Conflict, match=r"\(dead-lettered\)"):
        await store.todo_claim(agent, x["id"])
    human = await human_of(agent)
    await store.todo_retry(human, a["id"])
    await store.todo_claim(agent, a["id"])
    await store.todo_complete(agent, a["id"])
    assert (await store.todo_claim_next(agent))["todo"]["id"] == x["id"]


async def test_dropping_the_dependency_a_todo_waits_on_makes_it_claimable(store, human_of):
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="a")
    b = await store.todo_add(agent, queue="q", title="b")
    x = await store.todo_add(agent, queue="q", title="x", after=[a["id"], b["id"]])
    human = await human_of(agent)
    await store.todo_cancel(human, a["id"])
    out = await store.todo_drop_dependency(human, x["id"], a["id"])
    assert out["after"] == [b["id"]] and out["waiting"] and not out["unblocked"]
    await store.todo_claim(agent, b["id"])
    await store.todo_complete(agent, b["id"])
    assert (await store.todo_claim_next(agent))["todo"]["id"] == x["id"]
    with pytest.raises(Conflict, match="does not wait on"):
        await store.todo_drop_dependency(human, x["id"], a["id"])


async def test_deleting_a_todo_others_wait_on_is_refused_with_its_waiters_unless_deleted_with_it(store, human_of):
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="a")
    x = await store.todo_add(agent, queue="q", title="x", after=[a["id"]])
    human = await human_of(agent)
    await store.todo_cancel(human, a["id"])
    refused = await store.todos_delete(human, [a["id"]])
    assert refused["deleted"] == [] and refused["refused"] == [
        {"id": a["id"], "title": a["title"], "waiters": [{"id": x["id"], "title": "x", "state": "pending"}]}]
    await store.todo_cancel(human, x["id"])
    both = await store.todos_delete(human, [a["id"], x["id"]])
    assert {d["id"] for d in both["deleted"]} == {a["id"], x["id"]} and both["refused"] == []


async def test_another_owners_todo_in_after_is_not_found_exactly_as_a_never_minted_id(store):
    mine = await make_agent(store, agent_id="mine")
    theirs = await make_agent(store, user=await make_user(store, "bob"), agent_id="theirs")
    other = await store.todo_add(theirs, queue="q", title="bob's")
    errors = []
    for missing in (other["id"], "00000000-0000-4000-8000-000000000000"):
        with pytest.raises(NotFound) as e:
            await store.todo_add(mine, queue="q", title="x", after=[missing])
        errors.append(e.value.wire())
        with pytest.raises(NotFound) as e2:
            await store.todos_add(mine, [{"queue": "q", "title": "y"}, {"queue": "q", "title": "z", "after": [missing]}])
        assert e2.value.argument == "todos[1].after"
    assert errors[0] == errors[1]
    assert (await store.todo_list(mine))["todos"] == []


async def test_after_that_names_no_earlier_item_or_too_many_is_invalid_naming_it(store):
    agent = await make_agent(store)
    with pytest.raises(Invalid, match=r"todos\[0\]\.after") as e:
        await store.todos_add(agent, [{"queue": "q", "title": "x", "after": ["#0"]}])
    assert e.value.argument == "todos[0].after"
    with pytest.raises(Invalid, match="at most 20") as e:
        await store.todo_add(agent, queue="q", title="x", after=[f"#{i}" for i in range(21)])
    assert e.value.argument == "after"


async def test_completing_a_todo_with_twenty_dependents_releases_them_all_in_its_one_statement(store, db_url):
    """The release runs inside the complete's statement: the moment it returns, all twenty are
    claimable, each with one todo.ready hook event written in that transaction."""
    store.settings = store.settings.with_(hook_urls=("http://127.0.0.1:9/hook",))
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="the one they wait on")
    waiting = (await store.todos_add(agent, [{"queue": "q", "title": f"w{i}", "after": [a["id"]]}
                                             for i in range(20)]))["todos"]
    assert all(w["waiting"] for w in waiting)
    ready = "SELECT count(*) AS n FROM hook_events WHERE event = 'todo.ready' AND todo_id = ANY(%s)"
    assert (await sql_rows(db_url, ready, [[w["id"] for w in waiting]]))[0]["n"] == 0
    await store.todo_claim(agent, a["id"])
    await store.todo_complete(agent, a["id"])
    rows = await sql_rows(db_url, "SELECT count(*) AS n FROM todos WHERE waits = 0 AND state = 'pending'"
                                  " AND id = ANY(%s)", [[w["id"] for w in waiting]])
    assert rows[0]["n"] == 20
    assert (await sql_rows(db_url, ready, [[w["id"] for w in waiting]]))[0]["n"] == 20
    payloads = await sql_rows(db_url, "SELECT payload FROM hook_events WHERE event = 'todo.ready' AND todo_id = %s",
                              [waiting[0]["id"]])
    assert payloads[0]["payload"]["todo"]["after"] == [a["id"]]
    claims = (await store.todo_claim_next(agent, limit=20))["claims"]
    assert sorted(c["todo"]["title"] for c in claims) == sorted(f"w{i}" for i in range(20))


async def _waiting_on_locks(db_url, n, timeout=10.0):
    """Until n other sessions of this database wait for a lock, or fail at the deadline."""
    deadline = asyncio.get_running_loop().time() + timeout + LOAD_SLACK_SECONDS
    while True:
        rows = await sql_rows(db_url, "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                      " AND datname = current_database()")
        if rows[0]["n"] >= n:
            return
        assert asyncio.get_running_loop().time() < deadline, f"{n} sessions never waited for a lock"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("first", ["add", "complete"])
async def test_an_add_and_its_dependencys_complete_queued_on_one_row_lock_release_the_todo_in_either_order(
        store, db_url, first):
    """The add and the complete take the dependency's row lock in turn: queued behind a
    third session holding it, whichever goes first, the new todo ends up claimable (the
    complete that goes second finds waited_on set and sees the add's link with a fresh
    snapshot; the add that goes second sees the dependency done)."""
    agent = await make_agent(store)
    a = await store.todo_add(agent, queue="q", title="a")
    await store.todo_claim(agent, a["id"])
    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        await holder.execute("SELECT 1 FROM todos WHERE id = %s FOR UPDATE", [a["id"]])
        calls = {"add": lambda: store.todo_add(agent, queue="q", title="x", after=[a["id"]]),
                 "complete": lambda: store.todo_complete(agent, a["id"])}
        second = "complete" if first == "add" else "add"
        one = asyncio.create_task(calls[first]())
        await _waiting_on_locks(db_url, 1)
        two = asyncio.create_task(calls[second]())
        await _waiting_on_locks(db_url, 2)
        await holder.commit()
        results = {first: await one, second: await two}
    x = results["add"]
    rows = await sql_rows(db_url, "SELECT waits FROM todos WHERE id = %s", [x["id"]])
    assert rows == [{"waits": 0}]
    assert (await store.todo_claim_next(agent))["todo"]["id"] == x["id"]
