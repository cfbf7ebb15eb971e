"""Schedules (migration 0017) on Postgres through the store: every N seconds one todo a
tick, the catch-up after downtime adding one, a live todo's tick skipped and counted (or
added with overlap), a paused schedule adding nothing, cron in Europe/Berlin across both
2026 daylight-saving changes, concurrent sweeps never doubling a tick, and bad input."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from board.errors import Invalid, NotFound
from tests.conftest import LOAD_SLACK_SECONDS, make_agent, sql_rows

T0 = datetime(2026, 6, 1, 9, 0, 0, tzinfo=UTC)


async def _todos(store, schedule_id):
    return await _rows(store, "SELECT id, key, state::text AS state, created_at, schedule_id::text AS schedule_id"
                           " FROM todos WHERE schedule_id = %s ORDER BY created_at", (schedule_id,))


async def _rows(store, q, params=None):
    async with store.pool.connection() as conn:
        from psycopg.rows import dict_row
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(q, params)
        return await cur.fetchall()


async def _schedule(store, sid):
    return next(s for s in await store.schedules_list(None) if s["id"] == sid)


async def _every(store, agent, seconds=60, **kw):
    return await store.schedule_add(agent.user_id, queue="q", title="tick", every_seconds=seconds, now=T0, **kw)


async def test_every_n_seconds_adds_one_todo_per_tick(store):
    agent = await make_agent(store)
    s = await _every(store, agent, overlap=True)
    assert s["next_at"] == T0 + timedelta(seconds=60)
    assert await store.sweep_schedules(now=T0 + timedelta(seconds=59)) == 0
    for k in range(1, 4):
        assert await store.sweep_schedules(now=T0 + timedelta(seconds=60 * k)) == 1
        assert await store.sweep_schedules(now=T0 + timedelta(seconds=60 * k + 1)) == 0  # the tick is taken
    todos = await _todos(store, s["id"])
    assert len(todos) == 3 and len({t["key"] for t in todos}) == 3
    assert all(t["schedule_id"] == s["id"] for t in todos)
    got = await store.todo_get(agent, todos[0]["id"])
    assert got["schedule_id"] == s["id"]
    row = await _schedule(store, s["id"])
    assert (row["ticks_added"], row["ticks_skipped"]) == (3, 0)
    assert row["next_at"] == T0 + timedelta(seconds=240)


async def test_catch_up_after_downtime_adds_one_todo_for_the_latest_missed_tick(store):
    agent = await make_agent(store)
    s = await _every(store, agent)
    later = T0 + timedelta(seconds=60 * 50 + 30)  # fifty ticks missed while every process was down
    assert await store.sweep_schedules(now=later) == 1
    assert await store.sweep_schedules(now=later) == 0
    todos = await _todos(store, s["id"])
    assert len(todos) == 1
    assert todos[0]["key"] == f"schedule:{s['id']}:{(T0 + timedelta(seconds=3000)).isoformat()}"
    row = await _schedule(store, s["id"])
    assert row["last_tick_at"] == T0 + timedelta(seconds=3000)
    assert row["next_at"] == T0 + timedelta(seconds=3060)
    assert (row["ticks_added"], row["ticks_skipped"]) == (1, 0)


async def test_a_tick_whose_previous_todo_is_live_is_skipped_and_counted(store):
    agent = await make_agent(store)
    s = await _every(store, agent)
    await store.sweep_schedules(now=T0 + timedelta(seconds=60))
    await store.sweep_schedules(now=T0 + timedelta(seconds=120))  # the first is still pending
    assert len(await _todos(store, s["id"])) == 1
    row = await _schedule(store, s["id"])
    assert (row["ticks_added"], row["ticks_skipped"]) == (1, 1)
    first = (await _todos(store, s["id"]))[0]
    await store.todo_claim(agent, first["id"])
    await store.todo_complete(agent, first["id"])
    await store.sweep_schedules(now=T0 + timedelta(seconds=180))  # ended: the next tick adds
    assert len(await _todos(store, s["id"])) == 2
    assert {r["queue"]: (r["added"], r["skipped"]) for r in await store.queue_schedule_ticks()} == {"q": (2, 1)}


async def test_overlap_adds_a_tick_while_the_previous_todo_is_live(store):
    agent = await make_agent(store)
    s = await _every(store, agent, overlap=True)
    await store.sweep_schedules(now=T0 + timedelta(seconds=60))
    await store.sweep_schedules(now=T0 + timedelta(seconds=120))
    assert len(await _todos(store, s["id"])) == 2
    assert (await _schedule(store, s["id"]))["ticks_skipped"] == 0


async def test_a_paused_schedule_adds_nothing_and_resumes_after_now(store):
    agent = await make_agent(store)
    s = await _every(store, agent)
    assert await store.schedule_pause(agent.user_id, s["id"]) is True
    assert await store.schedule_pause(agent.user_id, s["id"]) is False
    assert await store.sweep_schedules(now=T0 + timedelta(seconds=600)) == 0
    assert await _todos(store, s["id"]) == []
    assert await store.schedule_resume(agent.user_id, s["id"], now=T0 + timedelta(seconds=610)) is True
    row = await _schedule(store, s["id"])
    assert not row["paused"] and row["next_at"] == T0 + timedelta(seconds=660)
    await store.sweep_schedules(now=T0 + timedelta(seconds=660))
    assert len(await _todos(store, s["id"])) == 1


async def test_a_tick_with_no_live_endpoint_granted_the_queue_is_skipped_and_counted(store):
    agent = await make_agent(store, queues=("other",))
    s = await _every(store, agent)
    await store.sweep_schedules(now=T0 + timedelta(seconds=60))
    row = await _schedule(store, s["id"])
    assert (row["ticks_added"], row["ticks_skipped"], row["endpoint_live"]) == (0, 1, False)


async def test_removing_a_schedule_leaves_its_todos_no_longer_naming_it(store):
    agent = await make_agent(store)
    s = await _every(store, agent)
    await store.sweep_schedules(now=T0 + timedelta(seconds=60))
    todo = (await _todos(store, s["id"]))[0]
    await store.schedule_remove(agent.user_id, s["id"])
    assert (await store.todo_get(agent, todo["id"]))["schedule_id"] is None
    with pytest.raises(NotFound):
        await store.schedule_remove(agent.user_id, s["id"])


async def test_another_humans_schedule_is_not_found(store):
    agent = await make_agent(store)
    other = await make_agent(store)
    s = await _every(store, agent)
    for verb in (store.schedule_pause, store.schedule_resume, store.schedule_remove):
        with pytest.raises(NotFound):
            await verb(other.user_id, s["id"])
    with pytest.raises(NotFound):
        await store.schedule_pause(agent.user_id, "not-a-uuid")


async def _ticks(store, sid):
    rows = await _rows(store, "SELECT key FROM todos WHERE schedule_id = %s ORDER BY created_at", (sid,))
    return [datetime.fromisoformat(r["key"].split(":", 2)[2]) for r in rows]


@pytest.mark.parametrize("day, expected_utc", [
    # spring: 02:30 does not exist on 2026-03-29; the run comes at 03:00 CEST (01:00 UTC), once
    (datetime(2026, 3, 28, 12, tzinfo=UTC),
     [datetime(2026, 3, 29, 1, 0, tzinfo=UTC), datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]),
    # fall: 02:30 happens twice on 2026-10-25; it runs once, on the first pass (00:30 UTC)
    (datetime(2026, 10, 24, 12, tzinfo=UTC),
     [datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 26, 1, 30, tzinfo=UTC)]),
])
async def test_a_daily_cron_runs_once_across_each_2026_daylight_saving_change(store, day, expected_utc):
    agent = await make_agent(store)
    s = await store.schedule_add(agent.user_id, queue="q", title="nightly", cron="30 2 * * *",
                                 timezone="Europe/Berlin", overlap=True, now=day)
    at = day
    while at <= day + timedelta(days=2):
        await store.sweep_schedules(now=at)
        at += timedelta(minutes=5)
    assert await _ticks(store, s["id"]) == expected_utc


async def test_an_hourly_cron_runs_each_real_hour_across_the_fall_change(store):
    agent = await make_agent(store)
    day = datetime(2026, 10, 24, 22, tzinfo=UTC)
    s = await store.schedule_add(agent.user_id, queue="q", title="hourly", cron="0 * * * *",
                                 timezone="Europe/Berlin", overlap=True, now=day)
    at = day
    while at <= datetime(2026, 10, 25, 4, tzinfo=UTC):
        await store.sweep_schedules(now=at)
        at += timedelta(minutes=10)
    assert await _ticks(store, s["id"]) == [datetime(2026, 10, 24, 23, tzinfo=UTC) + timedelta(hours=h)
                                            for h in range(6)]


async def test_preview_shows_the_next_three_run_times_in_the_zone(store):
    ticks = store.schedule_preview(queue="q", title="t", cron="0 9 * * 1-5", timezone="Europe/Berlin",
                                   now=datetime(2026, 3, 27, 12, tzinfo=UTC))  # a Friday
    assert [t.isoformat() for t in ticks] == ["2026-03-30T09:00:00+02:00", "2026-03-31T09:00:00+02:00",
                                              "2026-04-01T09:00:00+02:00"]


async def test_two_concurrent_sweeps_never_double_a_tick(store):
    agent = await make_agent(store)
    ids = [(await _every(store, agent, overlap=True))["id"] for _ in range(20)]
    for k in range(1, 4):
        at = T0 + timedelta(seconds=60 * k)
        taken = await asyncio.gather(*(store.sweep_schedules(now=at, batch=3) for _ in range(6)))
        assert sum(taken) <= 20
        while await store.sweep_schedules(now=at):
            pass
    rows = await _rows(store, "SELECT schedule_id::text AS s, count(*) AS n FROM todos"
                              " WHERE schedule_id = ANY(%s::uuid[]) GROUP BY 1", (ids,))
    assert {r["s"]: r["n"] for r in rows} == dict.fromkeys(ids, 3)


@pytest.mark.parametrize("fields, argument", [
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": "not cron"}, "cron"),
    ({"cron": "0 0 30 2 *"}, "cron"),
    ({"cron": "0 9 * * 1-5", "timezone": "Mars/Olympus"}, "timezone"),
    ({"every_seconds": 0}, "every_seconds"),
    ({"every_seconds": 10, "cron": "* * * * *"}, "cron"),
    ({}, "cron"),
    ({"every_seconds": 10, "queue": "bad queue"}, "queue"),
    ({"every_seconds": 10, "payload": [1]}, "payload"),
    ({"every_seconds": 10, "priority": 9}, "priority"),
    ({"every_seconds": 10, "max_attempts": 0}, "max_attempts"),
])
async def test_a_bad_schedule_is_invalid_naming_the_argument(store, fields, argument):
    agent = await make_agent(store)
    args = {"queue": "q", "title": "t"} | fields
    with pytest.raises(Invalid) as e:
        await store.schedule_add(agent.user_id, **args)
    assert e.value.argument == argument
    assert await store.schedules_list(agent.user_id) == []


async def test_a_tick_another_process_is_taking_is_skipped_not_taken_again(store, db_url):
    """Another process's sweep holds the schedule mid-transaction (its lock and its tick
    taken, not yet committed): this process's sweep passes it over rather than waiting to
    take the same tick again; once the other commits, the tick has one todo."""
    from psycopg.rows import dict_row

    from board.store.queries import execute, query

    agent = await make_agent(store)
    s = await _every(store, agent, overlap=True)
    at = T0 + timedelta(seconds=60)
    async with await psycopg.AsyncConnection.connect(db_url, row_factory=dict_row) as other:
        cur = await execute(other, query("schedules_due_lock"), {"now": at, "batch": 10})
        [due] = await cur.fetchall()
        await execute(other, query("schedule_tick"), {
            "id": due["id"], "user_id": due["user_id"], "queue": "q", "title": "tick", "payload": Jsonb({}),
            "max_attempts": 5, "priority": 2, "overlap": True, "tick": at, "next_at": at + timedelta(seconds=60),
            "key": f"schedule:{due['id']}:{at.isoformat()}", "hook_urls": [], "now": at})
        mine = asyncio.create_task(store.sweep_schedules(now=at))
        deadline = time.monotonic() + 10 + LOAD_SLACK_SECONDS
        while not mine.done():  # passed over at once, or (wrongly) waiting on the other's lock
            rows = await sql_rows(db_url, "SELECT count(*) AS n FROM pg_locks WHERE NOT granted")
            if rows[0]["n"]:
                break
            assert time.monotonic() < deadline, "the sweep neither finished nor waited"
            await asyncio.sleep(0.01)
        await other.commit()
    assert await mine == 0
    assert len(await _todos(store, s["id"])) == 1


async def test_a_ticks_todo_writes_its_ready_hook_naming_the_schedule(store):
    from board.config import Settings
    from board.store.store import Store

    hooked = Store(store.pool, Settings(hook_urls=("https://example.test/hook",)))
    agent = await make_agent(store)
    s = await _every(hooked, agent)
    await hooked.sweep_schedules(now=T0 + timedelta(seconds=60))
    [todo] = await _todos(store, s["id"])
    [event] = await _rows(store, "SELECT event, payload FROM hook_events WHERE todo_id = %s", (todo["id"],))
    assert event["event"] == "todo.ready"
    assert event["payload"]["todo"]["schedule_id"] == s["id"] and event["payload"]["todo"]["after"] == []
