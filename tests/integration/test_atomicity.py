"""REQ-18: opening and closing an attempt commit with the todo update, or not at all."""

from __future__ import annotations

import psycopg
import pytest

from board.errors import Internal
from tests.conftest import sql_rows, watch


async def _install_failing_trigger(db_url, table: str):
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$")
        await conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON {table} "
                           "FOR EACH ROW EXECUTE FUNCTION refuse()")


async def test_rollback_leaves_no_orphan_when_the_todo_update_fails(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t")
    await _install_failing_trigger(db_url, "todos")
    with pytest.raises(Internal):
        await store.todo_claim(agent, todo["id"])
    assert await sql_rows(db_url, "SELECT * FROM attempts") == []
    assert (await sql_rows(db_url, "SELECT state FROM todos"))[0]["state"] == "pending"


async def test_rollback_leaves_the_todo_pending_when_the_attempt_insert_fails(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t")
    await _install_failing_trigger(db_url, "attempts")
    with pytest.raises(Internal):
        await store.todo_claim(agent, todo["id"])
    row = (await sql_rows(db_url, "SELECT state, attempt, attempts_total, owner FROM todos"))[0]
    assert row == {"state": "pending", "attempt": 0, "attempts_total": 0, "owner": None}


async def test_a_close_that_fails_leaves_the_todo_claimed(store, agent, db_url):
    todo = await store.todo_add(agent, queue="q", title="t")
    await store.todo_claim(agent, todo["id"])
    await _install_failing_trigger(db_url, "attempts")
    with pytest.raises(Internal):
        await store.todo_complete(agent, todo["id"], summary="would be lost")
    assert (await sql_rows(db_url, "SELECT state FROM todos"))[0]["state"] == "claimed"
    assert (await sql_rows(db_url, "SELECT ended_at, summary FROM attempts"))[0] == {"ended_at": None, "summary": None}


async def test_a_rolled_back_transition_is_never_announced(store, agent, db_url):
    import asyncio
    import json

    from board.store.vocabulary import NOTIFY_CHANNEL
    todo = await store.todo_add(agent, queue="q", title="t")
    await _install_failing_trigger(db_url, "attempts")
    await watch(store, agent.user_id)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {NOTIFY_CHANNEL}")

        async def first_notification():
            return [n async for n in listener.notifies(stop_after=1, timeout=10)]

        # LISTEN is registered above, so notifications queue on the connection from here on.
        heard = asyncio.create_task(first_notification())
        with pytest.raises(Internal):
            await store.todo_claim(agent, todo["id"])
        await store.todo_cancel(agent, todo["id"])  # a committed change, announced
        (first,) = await heard
        assert json.loads(first.payload) == {"todo": todo["id"], "endpoint": agent.endpoint_id, "queue": "q",
                                             "state": "canceled", "kind": "canceled"}
