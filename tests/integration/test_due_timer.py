"""The due timer (board/ops/schedule.py) against Postgres and a real LISTEN fan-out: it sleeps
until the next run_at and then makes the todo claimable; a new earlier scheduled add wakes it
early, through its notification from another process or, watched or not, through the store's
observer in its own; and a resync makes it sweep again."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import psycopg

from board.live.fanout import Fanout
from board.store.db import open_pool
from board.store.store import Store
from board.ops.schedule import DueTimer
from tests.conftest import LOAD_SLACK_SECONDS, make_agent, sql_rows, until, watch

DUE_BOUND = 1.0  # a scheduled todo is claimable within a second of its run_at
LONG_SLEEP = 3600.0  # the timer's cap in these tests: only a wake can make it look sooner


async def _claimable_at(db_url, todo_id: str, timeout: float) -> datetime:
    """When the todo stopped being scheduled, as seen by polling (the timer, not the test, moves it)."""
    async def scheduled() -> bool:
        return (await sql_rows(db_url, "SELECT scheduled FROM todos WHERE id = %s", (todo_id,)))[0]["scheduled"]

    deadline = time.monotonic() + timeout
    while await scheduled():
        assert time.monotonic() < deadline, f"the todo was still scheduled after {timeout} s"
        await asyncio.sleep(0.01)  # a poll within the deadline above
    return datetime.now(timezone.utc)


async def _running_timer(store, db_url):
    fanout = Fanout(db_url)
    await fanout.start()
    timer = DueTimer(store, fanout, sleep_max=LONG_SLEEP)
    timer.start()
    return fanout, timer


async def test_the_timer_sleeps_until_the_next_run_at_and_makes_the_todo_claimable(store, db_url):
    agent = await make_agent(store)
    todo = await store.todo_add(agent, queue="q", title="later", delay_seconds=1.5)
    fanout, timer = await _running_timer(store, db_url)
    try:
        await until(lambda: timer.next_at == todo["run_at"], "the timer looking at the todo's run_at")
        assert (await store.todo_claim_next(agent))["todo"] is None  # not before its time
        became = await _claimable_at(db_url, todo["id"], timeout=DUE_BOUND + LOAD_SLACK_SECONDS + 2)
        late = (became - todo["run_at"]).total_seconds()
        print(f"claimable {late:.3f} s after its run_at; {timer.rounds} sweeps")
        assert late <= DUE_BOUND + LOAD_SLACK_SECONDS
        assert timer.rounds <= 4, "the timer polled instead of sleeping until the run_at"
        claimed = (await store.todo_claim_next(agent))["todo"]
        assert claimed is not None and claimed["id"] == todo["id"]
        await until(lambda: timer.next_at is None, "the timer finding nothing more scheduled")
    finally:
        await timer.stop()
        await fanout.stop()


async def test_an_earlier_scheduled_add_in_another_process_wakes_the_sleeping_timer(store, db_url, settings):
    agent = await make_agent(store)
    await watch(store, agent.user_id)  # someone listens for the human's todos, so the add notifies
    far = await store.todo_add(agent, queue="q", title="in an hour", delay_seconds=3600)
    fanout, timer = await _running_timer(store, db_url)
    other_pool = await open_pool(db_url)
    try:
        await until(lambda: timer.next_at == far["run_at"], "the timer sleeping until the far run_at")
        other = Store(other_pool, settings)  # another process: only its notification reaches the timer
        soon = await other.todo_add(agent, queue="q", title="in a second", delay_seconds=1)
        await until(lambda: timer.next_at == soon["run_at"], "the timer woken by the earlier add", timeout=5)
        became = await _claimable_at(db_url, soon["id"], timeout=DUE_BOUND + LOAD_SLACK_SECONDS + 2)
        late = (became - soon["run_at"]).total_seconds()
        print(f"the earlier todo claimable {late:.3f} s after its run_at")
        assert late <= DUE_BOUND + LOAD_SLACK_SECONDS
        assert (await store.todo_claim_next(agent))["todo"]["id"] == soon["id"]
        await until(lambda: timer.next_at == far["run_at"], "the timer back to sleeping until the far run_at")
    finally:
        await timer.stop()
        await fanout.stop()
        await other_pool.close()


async def test_an_earlier_scheduled_add_or_snooze_here_wakes_the_timer_with_nobody_watching(store, db_url):
    agent = await make_agent(store)  # nobody watches the human: these transitions notify nothing
    far = await store.todo_add(agent, queue="q", title="in an hour", delay_seconds=3600)
    held = await store.todo_add(agent, queue="q", title="to snooze")
    fanout, timer = await _running_timer(store, db_url)
    try:
        await until(lambda: timer.next_at == far["run_at"], "the timer sleeping until the far run_at")
        soon = await store.todo_add(agent, queue="q", title="in a second", delay_seconds=1)
        await until(lambda: timer.next_at == soon["run_at"], "the timer woken by this process's add", timeout=5)
        became = await _claimable_at(db_url, soon["id"], timeout=DUE_BOUND + LOAD_SLACK_SECONDS + 2)
        print(f"the unwatched add claimable {(became - soon['run_at']).total_seconds():.3f} s after its run_at")
        assert (became - soon["run_at"]).total_seconds() <= DUE_BOUND + LOAD_SLACK_SECONDS
        await until(lambda: timer.next_at == far["run_at"], "the timer back to sleeping until the far run_at")
        await store.todo_claim(agent, held["id"])
        snoozed = await store.todo_release(agent, held["id"], delay_seconds=1)
        await until(lambda: timer.next_at == snoozed["run_at"], "the timer woken by this process's snooze", timeout=5)
        became = await _claimable_at(db_url, held["id"], timeout=DUE_BOUND + LOAD_SLACK_SECONDS + 2)
        assert (became - snoozed["run_at"]).total_seconds() <= DUE_BOUND + LOAD_SLACK_SECONDS
    finally:
        await timer.stop()
        await fanout.stop()


async def test_a_resync_makes_the_timer_sweep_what_it_was_not_told_of(store, db_url):
    agent = await make_agent(store)
    fanout, timer = await _running_timer(store, db_url)
    try:
        await until(lambda: timer.rounds >= 1, "the timer's first sweep")
        # a scheduled todo whose notification was lost (written here without one)
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
            cur = await conn.execute(
                "INSERT INTO todos (endpoint_id, queue, title, run_at, scheduled)"
                " VALUES (%s, 'q', 'missed', now() - interval '4 minutes', true) RETURNING id", (agent.endpoint_id,))
            missed = {"id": (await cur.fetchone())[0]}
        assert (await store.todo_claim_next(agent))["todo"] is None  # scheduled, its time passed unseen
        fanout.resync()  # as after a LISTEN reconnect
        await _claimable_at(db_url, missed["id"], timeout=DUE_BOUND + LOAD_SLACK_SECONDS)
        assert (await store.todo_claim_next(agent))["todo"]["id"] == missed["id"]
    finally:
        await timer.stop()
        await fanout.stop()
