"""The Board's delete in the store: the owning human deletes their ended todos (done,
canceled, dead letters) with their attempts, notes and successor links, one locking
statement; every other id is skipped, never an error, and nothing of it is touched."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from board.errors import Forbidden, Invalid
from board.store.vocabulary import NOTIFY_CHANNEL
from tests.conftest import make_agent, make_user, sql_rows, until, watch


async def ended(store, agent, title: str, how: str) -> dict:
    """A todo of the agent's that ended `how` (done, canceled, dead), with a note on its attempt."""
    todo = await store.todo_add(agent, queue=agent.queues[0], title=title, max_attempts=1)
    await store.todo_claim(agent, todo["id"], claimant=f"run-{title}")
    await store.todo_note(agent, todo["id"], text=f"working on {title}")
    if how == "done":
        await store.todo_complete(agent, todo["id"], summary="done it")
    elif how == "canceled":
        await store.todo_cancel(agent, todo["id"])
    else:
        await store.todo_fail(agent, todo["id"], summary="gave up")
    return todo


async def rows_of(db_url, ids: list[str]) -> dict[str, int]:
    """How many rows of todos, attempts and attempt_notes the ids have, straight from the tables."""
    out = {}
    for table in ("todos", "attempts", "attempt_notes"):
        column = "id" if table == "todos" else "todo_id"
        got = await sql_rows(db_url, f"SELECT count(*) AS n FROM {table} WHERE {column} = ANY(%s)", (ids,))
        out[table] = got[0]["n"]
    return out


async def test_a_human_deletes_their_ended_todos_with_attempts_and_notes_and_every_other_id_is_skipped(
        store, db_url):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    bobs = await make_agent(store, user=bob, agent_id="w2")
    mine = [await ended(store, agent, f"mine {how}", how) for how in ("done", "canceled", "dead")]
    pending = await store.todo_add(agent, queue="q", title="pending")
    held = await store.todo_add(agent, queue="q", title="held")
    await store.todo_claim(agent, held["id"])
    retrying = await store.todo_add(agent, queue="q", title="retrying", max_attempts=3)
    await store.todo_claim(agent, retrying["id"])
    await store.todo_fail(agent, retrying["id"], summary="once")
    theirs = [await ended(store, bobs, f"bob {how}", how) for how in ("done", "canceled", "dead")]
    kept = [pending["id"], held["id"], retrying["id"]]
    their_ids = [t["id"] for t in theirs]
    before_theirs = await rows_of(db_url, their_ids)
    assert before_theirs == {"todos": 3, "attempts": 3, "attempt_notes": 3}
    seen = []
    store.observers.append(lambda t: seen.append((t.kind, t.todo_id, t.state)))
    for human in (ada, bob):  # both watched: a notification for bob's todos would be heard
        await watch(store, human.user_id)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        asked = [*[t["id"] for t in mine], *kept, *their_ids, "no-such-id", "", "x\x00y", mine[0]["id"]]
        out = await store.todos_delete(ada, asked)
        notified = []

        async def read():
            async for n in listener.notifies():
                notified.append(json.loads(n.payload))
                if len(notified) == 3:
                    return

        await asyncio.wait_for(read(), timeout=5)
    assert sorted((d["title"], d["state"], d["dead_letter"], d["attempts_total"]) for d in out["deleted"]) == [
        ("mine canceled", "canceled", False, 1), ("mine dead", "failed", True, 1), ("mine done", "done", False, 1)]
    assert out["skipped"] == [*kept, *their_ids, "no-such-id", "", "x\x00y"]
    assert await rows_of(db_url, [t["id"] for t in mine]) == {"todos": 0, "attempts": 0, "attempt_notes": 0}
    assert await rows_of(db_url, their_ids) == before_theirs
    assert [(await store.todo_get(ada, i))["state"] for i in kept] == ["pending", "claimed", "failed"]
    assert sorted(seen) == sorted(("deleted", t["id"], "deleted") for t in mine)
    assert sorted((n["todo"], n["kind"]) for n in notified) == sorted((t["id"], "deleted") for t in mine)


async def test_only_a_human_deletes_and_at_most_a_bulk_at_once(store):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    done = await ended(store, agent, "done", "done")
    with pytest.raises(Forbidden):
        await store.todos_delete(agent, [done["id"]])
    with pytest.raises(Invalid) as e:
        await store.todos_delete(ada, [f"id-{i}" for i in range(1001)])
    assert e.value.argument == "ids"
    assert await store.todos_delete(ada, []) == {"deleted": [], "skipped": [], "refused": []}
    assert (await store.todo_get(ada, done["id"]))["state"] == "done"


async def test_deleting_a_link_of_a_chain_drops_its_successor_links_and_the_chain_closes_over_it(store, db_url):
    """A -> B -> C, B deleted: as retention does, both links go; C keeps naming B and reads
    as the root of what is left, A can be continued again, and a claim of a pending
    continuation of a deleted todo carries no predecessor."""
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    a = await ended(store, agent, "a", "done")
    b = await store.todo_add(agent, queue="q", title="b", continues=a["id"])
    await store.todo_claim(agent, b["id"])
    await store.todo_complete(agent, b["id"])
    c = await store.todo_add(agent, queue="q", title="c", continues=b["id"])
    await store.todo_claim(agent, c["id"])
    await store.todo_complete(agent, c["id"])
    out = await store.todos_delete(ada, [b["id"]])
    assert [d["id"] for d in out["deleted"]] == [b["id"]]
    assert await sql_rows(db_url, "SELECT * FROM todo_successors WHERE %s IN (todo_id, successor_id)", (b["id"],)) == []
    got_a, got_c = await store.todo_get(ada, a["id"]), await store.todo_get(ada, c["id"])
    assert [link["id"] for link in got_a["chain"]] == [a["id"]] and got_a["continued_by_id"] is None
    assert [link["id"] for link in got_c["chain"]] == [c["id"]] and got_c["continues_id"] == b["id"]
    again = await store.todo_add(ada, queue="q", title="a again", continues=a["id"])
    assert (await store.todo_get(ada, a["id"]))["continued_by_id"] == again["id"]
    # A pending continuation of a todo deleted since: its claim says nothing of the predecessor.
    await store.todos_delete(ada, [a["id"]])
    assert "continues" not in await store.todo_claim(agent, again["id"])


async def test_a_todo_retried_while_the_delete_waits_for_its_lock_is_skipped(store, db_url):
    """The statement locks each todo and checks again that it has ended once the lock is
    its: a dead letter retried by a transaction the delete waited for stays, pending."""
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, agent_id="w1")
    dead = await ended(store, agent, "dead", "dead")
    done = await ended(store, agent, "done", "done")
    async with await psycopg.AsyncConnection.connect(db_url) as other:
        await other.execute("UPDATE todos SET state = 'pending', attempt = 0 WHERE id = %s", (dead["id"],))
        task = asyncio.create_task(store.todos_delete(ada, [done["id"], dead["id"]]))
        waiting = []

        async def blocked():
            waiting[:] = await sql_rows(db_url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                                "AND wait_event_type = 'Lock'")
            return bool(waiting)

        for _ in range(500):
            if await blocked():
                break
            await asyncio.sleep(0.01)
        assert waiting, "the delete never waited for the row lock"
        assert not task.done()
        await other.commit()
    out = await asyncio.wait_for(task, timeout=10)
    assert [d["id"] for d in out["deleted"]] == [done["id"]] and out["skipped"] == [dead["id"]]
    assert (await store.todo_get(ada, dead["id"]))["state"] == "pending"


async def test_a_bulk_delete_runs_one_statement_a_batch_and_counts_what_it_skipped(store):
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    agent = await make_agent(store, user=ada, agent_id="w1")
    bobs = await make_agent(store, user=bob, agent_id="w2")
    mine = [(await ended(store, agent, f"d{i}", "done"))["id"] for i in range(5)]
    pending = (await store.todo_add(agent, queue="q", title="pending"))["id"]
    theirs = (await ended(store, bobs, "theirs", "done"))["id"]
    counts = await store.todos_bulk(ada, "delete", [*mine, pending, theirs, mine[0]], batch=2)
    assert counts == {"changed": 5, "skipped": 2, "not_tried": 0, "refused": []}
    assert [t["id"] for t in (await store.todo_list(ada))["todos"]] == [pending]
    assert (await store.todo_get(bob, theirs))["state"] == "done"
