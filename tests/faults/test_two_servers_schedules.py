"""Two `switchboard serve` processes on one database, both running the schedules' timer, and
a schedule of every 2 seconds: each tick adds exactly one todo (distinct keys, as many todos
as ticks taken), and /metrics of either process reads the same ticks added; ticks missed while
no process ran add one todo (the latest), and a tick while it is live is skipped and counted."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

from tests.conftest import LOAD_SLACK_SECONDS, make_agent, sql_rows
from tests.faults import harness as h


async def test_two_servers_add_exactly_one_todo_per_tick_of_an_every_2_seconds_schedule(db_url, store, tmp_path):
    agent = await make_agent(store, queues=("ticks",))
    async with h.serving(db_url, tmp_path / "a.log") as a, h.serving(db_url, tmp_path / "b.log") as b:
        s = await store.schedule_add(agent.user_id, queue="ticks", title="every 2 s", every_seconds=2, overlap=True)
        deadline = time.monotonic() + 30 + LOAD_SLACK_SECONDS
        while (await store.schedules_list(agent.user_id))[0]["ticks_added"] < 4:  # a condition, not a clock
            assert time.monotonic() < deadline, "the schedule did not tick 4 times"
            await asyncio.sleep(0.05)
        await store.schedule_pause(agent.user_id, s["id"])
        scraped = [await a.metrics(), await b.metrics()]
        assert "ERROR" not in a.log_text() + b.log_text()
    row = (await store.schedules_list(agent.user_id))[0]
    todos = await sql_rows(db_url, "SELECT key, schedule_id::text AS schedule_id FROM todos WHERE queue = 'ticks'")
    ticks = sorted(datetime.fromisoformat(t["key"].split(":", 2)[2]) for t in todos)
    assert len(todos) == row["ticks_added"] >= 4 and row["ticks_skipped"] == 0
    assert len(set(ticks)) == len(ticks), "a tick added two todos"
    assert all((t - s["created_at"]) % timedelta(seconds=2) == timedelta(0) for t in ticks), ticks
    assert {t["schedule_id"] for t in todos} == {s["id"]}
    for text in scraped:
        assert h.metric_sums(text, "switchboard_schedule_ticks_added", "queue") == {"ticks": row["ticks_added"]}


async def test_ticks_missed_while_no_server_ran_add_one_todo_and_a_live_todo_skips_the_next(db_url, store, tmp_path):
    agent = await make_agent(store, queues=("ticks",))
    down_since = datetime.now(timezone.utc) - timedelta(seconds=60)  # thirty ticks missed, every process down
    s = await store.schedule_add(agent.user_id, queue="ticks", title="every 2 s", every_seconds=2, now=down_since)
    started = datetime.now(timezone.utc)
    async with h.serving(db_url, tmp_path / "a.log") as a:
        deadline = time.monotonic() + 30 + LOAD_SLACK_SECONDS
        while (await store.schedules_list(agent.user_id))[0]["ticks_skipped"] < 1:  # a condition, not a clock
            assert time.monotonic() < deadline, "no later tick was skipped"
            await asyncio.sleep(0.05)
        scraped = await a.metrics()
    row = (await store.schedules_list(agent.user_id))[0]
    todos = await sql_rows(db_url, "SELECT key FROM todos WHERE queue = 'ticks'")
    assert len(todos) == row["ticks_added"] == 1  # the catch-up: one todo; then its being live skips the rest
    tick = datetime.fromisoformat(todos[0]["key"].split(":", 2)[2])
    assert started - timedelta(seconds=2) <= tick  # the latest missed tick, not the first
    assert h.metric_sums(scraped, "switchboard_schedule_ticks_skipped", "queue")["ticks"] >= 1
