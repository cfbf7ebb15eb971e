"""The charts' fold (migration 0012): a sweep counts the attempts closed before a watermark
into attempt_outcome_counts, and a chart reads those counts plus the attempts closed since.
A human's chart says the same before and after any fold, whatever was pruned or deleted
around it; a close still committing when the fold runs and a delete racing it are each
counted once. The races are made with real connections held open in a transaction."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from board.store import store as st
from board.store.sweeps import FOLD_MARGIN_SECONDS
from board.store.queries import execute, query
from board.web.overview import WINDOWS
from tests.conftest import make_agent, make_user, sql_rows

WEEK, DAY, HOUR = WINDOWS["week"], WINDOWS["day"], WINDOWS["hour"]


def bucket(t: datetime) -> datetime:
    """The start of the five-minute bucket holding t (outcome_bucket)."""
    return t.replace(minute=t.minute - t.minute % 5, second=0, microsecond=0)


async def chart(store: st.Store, human, now: datetime, window=WEEK) -> dict:
    rows = await store.queue_outcomes(human, buckets=window.buckets, bucket_seconds=window.bucket_seconds, now=now)
    return {(r["queue"], r["outcome"], r["bucket"]): r["n"] for r in rows}


async def fold_all(store: st.Store, *, now: datetime | None, margin_seconds: float = FOLD_MARGIN_SECONDS) -> int:
    """Folds until the watermark stays (a pass moves it at most an hour); returns the passes."""
    passes = 0
    while await store.sweep_outcomes(now=now, margin_seconds=margin_seconds):
        passes += 1
        assert passes < 500, "the fold never stopped moving"
    return passes


async def folded_before(url) -> datetime:
    return (await sql_rows(url, "SELECT before FROM attempt_outcomes_folded"))[0]["before"]


async def test_the_charts_are_the_same_after_the_fold_and_after_pruning_and_retention(store, db_url):
    capped = st.Store(store.pool, store.settings.with_(attempt_history_max_per_todo=5, retention_days=1))
    ada, bob = await make_user(store, "ada"), await make_user(store, "bob")
    agent = await make_agent(capped, user=ada, queues=("builds", "docs"))
    bob_agent = await make_agent(capped, user=bob, agent_id="bob", queues=("builds",))
    now = datetime.now(timezone.utc)

    async def closed(a, queue, how, ago: timedelta, **kw):
        at = now - ago
        todo = await capped.todo_add(a, queue=queue, title=how, now=at - timedelta(seconds=2), **kw)
        await capped.todo_claim(a, todo["id"], lease_seconds=1, now=at - timedelta(seconds=1))
        await getattr(capped, f"todo_{how}")(a, todo["id"], now=at)
        return todo

    await closed(agent, "builds", "complete", timedelta(days=9))  # before every window
    await closed(agent, "builds", "complete", timedelta(days=3))
    await closed(agent, "builds", "fail", timedelta(days=2, hours=5), max_attempts=1)
    await closed(agent, "docs", "complete", timedelta(hours=7))
    await closed(agent, "docs", "complete", timedelta(hours=9))
    twelve = (now - timedelta(hours=12)).replace(minute=0, second=0, microsecond=0)
    for minute in (10, 40):  # two five-minute buckets of one hour, merged into one row
        await closed(agent, "docs", "complete", now - twelve - timedelta(minutes=minute))
    await closed(agent, "docs", "complete", timedelta(minutes=50))
    await closed(agent, "builds", "complete", timedelta(seconds=5))  # inside the fold's margin
    await closed(bob_agent, "builds", "complete", timedelta(hours=1))  # never in Ada's chart
    # Released five times over the last two days (the cap: nothing pruned yet).
    flaky = await capped.todo_add(agent, queue="builds", title="flaky", max_attempts=10, now=now - timedelta(days=2))
    for i in range(5):
        at = now - timedelta(days=2) + timedelta(hours=6 * i)
        await capped.todo_claim(agent, flaky["id"], lease_seconds=60, now=at)
        await capped.todo_release(agent, flaky["id"], now=at + timedelta(seconds=1))

    def by_outcome(c: dict) -> dict:
        return {o: sum(n for (_, oo, _), n in c.items() if oo == o) for o in ("completed", "failed", "released")}

    async def charts() -> tuple[dict, dict, dict]:
        return await chart(store, ada, now), await chart(store, ada, now, DAY), await chart(store, ada, now, HOUR)

    week, day, hour = before = await charts()
    assert by_outcome(week) == {"completed": 7, "failed": 1, "released": 5} and sum(hour.values()) == 2

    passes = await fold_all(store, now=now)
    assert passes > 100  # eight days, an hour a pass
    assert await folded_before(db_url) == now - timedelta(seconds=FOLD_MARGIN_SECONDS)
    assert await charts() == before
    # The counts no chart needs at five minutes are merged: of six hours past a day, of
    # hours past an hour.
    for r in await sql_rows(db_url, "SELECT bucket FROM attempt_outcome_counts"):
        b = r["bucket"]
        if b < now - timedelta(days=1, hours=6):
            assert b.hour % 6 == 0 and b.minute == 0, b
        elif b < now - timedelta(hours=2):
            assert b.minute == 0, b

    # Two more releases and a completion since the watermark: the three claims past the cap
    # prune the three oldest attempts, folded already, so the deletion trigger leaves them.
    for at in (now - timedelta(seconds=9), now - timedelta(seconds=7)):
        await capped.todo_claim(agent, flaky["id"], lease_seconds=60, now=at)
        await capped.todo_release(agent, flaky["id"], now=at + timedelta(seconds=1))
    await capped.todo_claim(agent, flaky["id"], lease_seconds=60, now=now - timedelta(seconds=4))
    await capped.todo_complete(agent, flaky["id"], now=now - timedelta(seconds=3))
    assert (await capped.todo_get(agent, flaky["id"]))["attempts_pruned"] == 3
    week, day, hour = after = await charts()
    assert by_outcome(week) == {"completed": 8, "failed": 1, "released": 7} and sum(hour.values()) == 5

    # Retention deletes every ended todo a day old (Ada's ten, Bob's one) with its attempts:
    # those closed before the watermark are counted already, the rest are counted now.
    deleted = await capped.sweep_retention(now=now + timedelta(days=1, minutes=1))
    assert deleted == 11
    assert await sql_rows(db_url, "SELECT todo_id FROM attempts") == []
    assert await charts() == after

    # And the fold that follows finds nothing left to count twice.
    await fold_all(store, now=now + timedelta(minutes=10))
    assert await charts() == after


async def waiting(db_url, what: str, *, unless: asyncio.Task | None = None) -> None:
    """Until a session of the test's database waits on a lock (or the task has ended: the
    wait did not happen, and the assertions after say what that cost)."""
    deadline = asyncio.get_running_loop().time() + 20
    sql = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    while not (unless is not None and unless.done()):
        if (await sql_rows(db_url, sql))[0]["n"]:
            return
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


async def test_a_close_still_committing_when_the_fold_runs_is_counted_once(store, db_url):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("q",))
    todo = await store.todo_add(agent, queue="q", title="slow close")
    await store.todo_claim(agent, todo["id"])
    # The close starts its transaction (its ended_at) and waits on the todo's row lock.
    lock = await psycopg.AsyncConnection.connect(db_url)
    await lock.execute("SELECT 1 FROM todos WHERE id = %s FOR UPDATE", (todo["id"],))
    closing = asyncio.create_task(store.todo_complete(agent, todo["id"]))
    await waiting(db_url, "the close never waited on the row lock")
    # Ten minutes on, with no margin: only the running transactions hold the watermark back.
    later = datetime.now(timezone.utc) + timedelta(minutes=10)
    await fold_all(store, now=later, margin_seconds=0)
    await lock.rollback()
    await lock.close()
    closed = await closing
    assert await folded_before(db_url) <= closed["updated_at"]
    assert await chart(store, ada, later, HOUR) == {("q", "completed", 2): 1}
    await fold_all(store, now=later, margin_seconds=0)  # nothing runs now: it folds the close
    assert await folded_before(db_url) == later
    assert await sql_rows(db_url, "SELECT outcome::text, n::int FROM attempt_outcome_counts") == [
        {"outcome": "completed", "n": 1}]
    assert await chart(store, ada, later, HOUR) == {("q", "completed", 2): 1}


@pytest.mark.parametrize("first", ["delete", "fold"])
async def test_a_delete_racing_the_fold_is_counted_once(store, db_url, first):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("q",))
    closed_at = datetime.now(timezone.utc) - timedelta(minutes=20)  # a bucket before any transaction here
    todo = await store.todo_add(agent, queue="q", title="done", now=closed_at - timedelta(seconds=2))
    await store.todo_claim(agent, todo["id"], now=closed_at - timedelta(seconds=1))
    await store.todo_complete(agent, todo["id"], now=closed_at)
    later = closed_at + timedelta(minutes=30)
    await fold_all(store, now=closed_at - timedelta(minutes=1), margin_seconds=0)  # up to just before the close
    deleter = await psycopg.AsyncConnection.connect(db_url)
    folder = await psycopg.AsyncConnection.connect(db_url)
    try:
        if first == "delete":
            # The delete (its trigger counts the attempt) is in flight; the fold must wait for it.
            await deleter.execute("DELETE FROM todos WHERE id = %s", (todo["id"],))
            folding = asyncio.create_task(fold_all(store, now=later, margin_seconds=0))
            await waiting(db_url, "the fold did not wait for the delete", unless=folding)
            await deleter.commit()
            await folding
            # The fold may have read the delete's transaction as still running (a backend
            # releases its locks before it clears its start): the next one moves past it.
            await fold_all(store, now=later, margin_seconds=0)
        else:
            # The fold has counted the attempt and not committed; the delete must wait for it.
            locked = await execute(folder, query("attempt_outcomes_fold_lock"), {})
            running_since = (await locked.fetchone())[1]
            await execute(folder, query("attempt_outcomes_fold"),
                          {"now": later, "margin_seconds": 0, "running_since": running_since})
            deleting = asyncio.create_task(deleter.execute("DELETE FROM todos WHERE id = %s", (todo["id"],)))
            await waiting(db_url, "the delete did not wait for the fold", unless=deleting)
            await folder.commit()
            await deleting
            await deleter.commit()
            await fold_all(store, now=later, margin_seconds=0)
    finally:
        await deleter.close()
        await folder.close()
    assert await sql_rows(db_url, "SELECT count(*)::int AS n FROM todos") == [{"n": 0}]
    assert await folded_before(db_url) == later
    assert await sql_rows(db_url, "SELECT outcome::text, n::int FROM attempt_outcome_counts") == [
        {"outcome": "completed", "n": 1}]
    assert await chart(store, ada, later, HOUR) == {("q", "completed", 6): 1}


async def test_a_pass_moves_the_watermark_at_most_an_hour_and_never_into_the_margin(store, db_url):
    now = datetime.now(timezone.utc)
    assert await store.sweep_outcomes(now=now) == 1  # nothing closed, but it moved
    assert await folded_before(db_url) == bucket(now - timedelta(days=8)) + timedelta(hours=1)
    await fold_all(store, now=now)
    assert await folded_before(db_url) == now - timedelta(seconds=FOLD_MARGIN_SECONDS)
    assert await store.sweep_outcomes(now=now) == 0
    # On the database's clock, caught up: the watermark follows now, and the sweep loop,
    # which repeats a sweep while it returns more than 0, waits for its next period.
    assert await store.sweep_outcomes() == 0
    assert await store.sweep_outcomes() == 0
    assert await folded_before(db_url) > now - timedelta(seconds=FOLD_MARGIN_SECONDS)


async def test_merged_buckets_keep_the_sum_of_their_counts(store, db_url):
    ada = await make_user(store, "ada")
    agent = await make_agent(store, user=ada, queues=("q",))
    now = datetime.now(timezone.utc)
    hour = (now - timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)
    six = (now - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = [(hour + timedelta(minutes=10), 2), (hour + timedelta(minutes=40), 3),
            (six + timedelta(hours=1, minutes=5), 4), (six + timedelta(hours=5, minutes=55), 5), (six, 6)]
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for at, n in rows:
            await conn.execute("INSERT INTO attempt_outcome_counts (endpoint_id, bucket, queue, outcome, n) "
                               "VALUES (%s, %s, 'q', 'completed', %s)", (agent.endpoint_id, at, n))
    before = [await chart(store, ada, now, w) for w in (WEEK, DAY, HOUR)]
    assert await store.sweep_outcomes(now=now) == 1  # it moved, so it merged
    assert [(r["bucket"], r["n"]) for r in await sql_rows(db_url, "SELECT bucket, n::int FROM attempt_outcome_counts "
                                                                  "ORDER BY bucket")] == [(six, 15), (hour, 5)]
    assert [await chart(store, ada, now, w) for w in (WEEK, DAY, HOUR)] == before
