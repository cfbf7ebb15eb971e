"""The overview's and /metrics' counts read the live todos where they are and the rest from
todo_counts (migration 0010: the todos added, canceled and dead-lettered, done being what is
left): they must equal a plain count of the todos at every moment, through every way a todo
is added, ends, comes back (a dead letter retried) or goes (a human's delete, retention, an
endpoint's cascade), and while the counts sweep folds the deltas beside them."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import psycopg
from psycopg.rows import dict_row

from board.store.db import migrate, open_pool
from board.store import store as st
from board.store.queries import QUERIES
from board.config import Settings
from tests.conftest import ROOT, make_agent, make_user, sql_rows, watchers_lent

COLUMNS = ("pending", "claimed", "input_required", "auth_required", "retrying", "dead", "done", "canceled")

# The overview's figures, computed the plain way: every one of the human's todos counted.
PLAIN_OVERVIEW = """
SELECT t.queue,
       count(*) FILTER (WHERE t.state = 'pending') AS pending,
       count(*) FILTER (WHERE t.state = 'claimed') AS claimed,
       count(*) FILTER (WHERE t.state = 'input_required') AS input_required,
       count(*) FILTER (WHERE t.state = 'auth_required') AS auth_required,
       count(*) FILTER (WHERE t.state = 'failed' AND t.next_retry_at IS NOT NULL) AS retrying,
       count(*) FILTER (WHERE t.state = 'failed' AND t.next_retry_at IS NULL) AS dead,
       count(*) FILTER (WHERE t.state = 'done') AS done,
       count(*) FILTER (WHERE t.state = 'canceled') AS canceled
  FROM todos t JOIN endpoints e ON e.id = t.endpoint_id
 WHERE e.user_id = %(user_id)s
 GROUP BY 1
"""
PLAIN_METRICS = "SELECT queue, state::text AS state, count(*) AS n FROM todos GROUP BY 1, 2"


def figures(rows) -> dict:
    """queue -> the eight counts, leaving out queues with no todos (the overview lists those
    at zero)."""
    return {r["queue"]: tuple(int(r[c]) for c in COLUMNS) for r in rows if any(r[c] for c in COLUMNS)}


async def same_snapshot(conn, user_id: int) -> tuple[dict, dict, dict, dict]:
    """The overview and /metrics' statements and the plain counts, read in one snapshot."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        params = {"user_id": user_id}
        overview = figures(await (await conn.execute(QUERIES["overview_counts"].sql, params)).fetchall())
        plain = figures(await (await conn.execute(PLAIN_OVERVIEW, params)).fetchall())
        metrics = {(r["queue"], r["state"]): int(r["n"])
                   for r in await (await conn.execute(QUERIES["todos_count_by_queue_state"].sql)).fetchall()}
        plain_metrics = {(r["queue"], r["state"]): int(r["n"]) for r in await (await conn.execute(PLAIN_METRICS)).fetchall()}
    return overview, plain, metrics, plain_metrics


async def assert_exact(db_url: str, user_id: int) -> dict:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        overview, plain, metrics, plain_metrics = await same_snapshot(conn, user_id)
    assert overview == plain
    assert metrics == plain_metrics
    return overview


async def test_the_counts_equal_a_plain_count_through_every_ending_retry_and_delete(store, db_url):
    human = await make_user(store, "ada")
    agent = await make_agent(store, user=human, agent_id="w", queues=("a", "b"))
    other = await make_agent(store, agent_id="x", queues=("a",))  # another human's todos stay out
    await store.todo_add(other, queue="a", title="not ada's")

    async def ended(queue: str, how: str) -> str:
        todo = await store.todo_add(agent, queue=queue, title=how, max_attempts=1)
        if how == "canceled":
            await store.todo_cancel(agent, todo["id"])
            return todo["id"]
        await store.todo_claim(agent, todo["id"])
        await getattr(store, "todo_complete" if how == "done" else "todo_fail")(agent, todo["id"])
        return todo["id"]

    made = {how: [await ended(q, how) for q in ("a", "b", "a")] for how in ("done", "dead", "canceled")}
    await store.todo_add(agent, queue="b", title="waiting")
    held = await store.todo_add(agent, queue="a", title="held")
    await store.todo_claim(agent, held["id"])
    assert (await assert_exact(db_url, human.user_id))["a"] == (0, 1, 0, 0, 0, 2, 2, 2)

    # The other ways in and out: add_todos and a continuation, a held todo canceled by the human
    # and one by its agent, a pending one canceled by the human, a retrying one canceled, the
    # reaper's dead letter, the human's fail, a revocation's dead letters, the sweep's fold.
    await store.todos_add(agent, [{"queue": "a", "title": f"batch {i}"} for i in range(3)])
    await store.todo_add(agent, queue="b", title="next", continues=made["done"][1])
    for canceler in (human, agent):
        todo = await store.todo_add(agent, queue="b", title="held then canceled")
        await store.todo_claim(agent, todo["id"])
        await store.todo_cancel(canceler, todo["id"])
    await store.todo_cancel(human, (await store.todo_add(agent, queue="a", title="never held"))["id"])
    retrying = await store.todo_add(agent, queue="a", title="retrying", max_attempts=3)
    await store.todo_claim(agent, retrying["id"])
    await store.todo_fail(agent, retrying["id"])
    await assert_exact(db_url, human.user_id)
    await store.todo_cancel(agent, retrying["id"])
    lapsing = await store.todo_add(agent, queue="a", title="lapses", max_attempts=1)
    await store.todo_claim(agent, lapsing["id"], lease_seconds=1)
    await store.sweep_reap(now=datetime.now(timezone.utc) + timedelta(minutes=5))
    by_human = await store.todo_add(agent, queue="b", title="failed by the human", max_attempts=1)
    await store.todo_claim(human, by_human["id"])
    await store.todo_fail(human, by_human["id"])
    await assert_exact(db_url, human.user_id)
    await store.sweep_counts()
    await assert_exact(db_url, human.user_id)
    doomed = await make_agent(store, user=human, agent_id="doomed", queues=("a",))
    for i in range(2):
        await store.todo_claim(doomed, (await store.todo_add(doomed, queue="a", title=f"revoked {i}"))["id"])
    await store.endpoint_revoke(doomed.endpoint_id)
    await assert_exact(db_url, human.user_id)

    # Dead letters retried by the agent and by the human: pending again, their dead taken
    # back; failed again, counted again.
    await store.todo_retry(agent, made["dead"][0])
    await store.todo_retry(human, made["dead"][1])
    assert (await assert_exact(db_url, human.user_id))["b"][5] == 1  # the human's fail is left
    await store.todo_claim(agent, made["dead"][0])
    await store.todo_fail(agent, made["dead"][0])
    await assert_exact(db_url, human.user_id)

    # The human deletes ended todos; retention deletes the rest of them.
    await store.todos_delete(human, [made["done"][0], made["canceled"][1]])
    await assert_exact(db_url, human.user_id)
    await store.sweep_retention(now=datetime.now(timezone.utc) + timedelta(days=400))
    left = await assert_exact(db_url, human.user_id)
    assert left == {"a": (4, 0, 0, 0, 0, 0, 0, 0), "b": (3, 0, 0, 0, 0, 0, 0, 0)}  # the reaper released "held"

    # The deltas folded: one row per key still counted.
    await store.sweep_counts()
    rows = await sql_rows(db_url, "SELECT endpoint_id, queue, kind::text AS kind, count(*) AS n FROM todo_counts "
                                  "GROUP BY 1, 2, 3")
    assert rows and all(r["n"] == 1 for r in rows)
    await assert_exact(db_url, human.user_id)


async def test_an_endpoint_deleted_with_its_todos_leaves_no_counts_behind(store, db_url):
    human = await make_user(store, "bo")
    agent = await make_agent(store, user=human, queues=("q",))
    for i in range(3):
        todo = await store.todo_add(agent, queue="q", title=f"t{i}")
        await store.todo_claim(agent, todo["id"])
        await store.todo_complete(agent, todo["id"])
    await store.sweep_counts()
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("DELETE FROM users WHERE id = %s", (human.user_id,))  # cascades to endpoints and todos
    await store.sweep_counts()
    assert await sql_rows(db_url, "SELECT * FROM todo_counts") == []
    assert await store.queue_state_counts() == []


async def test_the_counts_stay_exact_while_agents_sweeps_retries_and_deletes_run_at_once(store, db_url):
    """Real parallel connections: workers claim and complete or fail (dead letters, at
    max_attempts 1), a retrier retries dead letters, a deleter deletes ended todos, and two
    counts sweeps fold the deltas at once. A reader compares the overview and
    /metrics with a plain count in one snapshot, again and again, while they run."""
    human = await make_user(store, "cy")
    agents = [await make_agent(store, user=human, agent_id=f"w{i}", queues=("a", "b")) for i in range(4)]
    for i in range(400):
        await store.todo_add(agents[0], queue="ab"[i % 2], title=f"t{i}", max_attempts=1)
    stop = asyncio.Event()
    mismatches: list = []
    reads = closes = 0

    async def worker(agent, seed: int):
        nonlocal closes
        rnd = random.Random(seed)
        while not stop.is_set():
            got = await store.todo_claim_next(agent)
            if got.get("todo") is None:
                await asyncio.sleep(0.005)
                continue
            verb = store.todo_complete if rnd.random() < 0.6 else store.todo_fail
            await verb(agent, got["todo"]["id"], lease_token=got.get("lease_token"))
            closes += 1

    async def retrier():
        while not stop.is_set():
            dead = await sql_rows(db_url, "SELECT id FROM todos WHERE state = 'failed' AND next_retry_at IS NULL "
                                          "ORDER BY random() LIMIT 3")
            for row in dead:
                try:
                    await store.todo_retry(human, row["id"])
                except Exception:  # raced: the deleter took it, or another retry
                    pass
            await asyncio.sleep(0.01)

    async def deleter():
        while not stop.is_set():
            gone = await sql_rows(db_url, "SELECT id FROM todos WHERE state IN ('done', 'canceled') "
                                          "ORDER BY random() LIMIT 4")
            await store.todos_delete(human, [r["id"] for r in gone])
            await asyncio.sleep(0.02)

    async def sweeper():
        while not stop.is_set():
            await store.sweep_counts()
            await asyncio.sleep(0.003)

    async def reader():
        nonlocal reads
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            while not stop.is_set():
                overview, plain, metrics, plain_metrics = await same_snapshot(conn, human.user_id)
                reads += 1
                if overview != plain or metrics != plain_metrics:
                    mismatches.append((overview, plain, metrics, plain_metrics))

    tasks = [asyncio.create_task(worker(a, i)) for i, a in enumerate(agents)]
    tasks += [asyncio.create_task(f()) for f in (retrier, deleter, sweeper, sweeper, reader)]
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
            if closes >= 350 and reads >= 30:
                break
    finally:
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert closes >= 350 and reads >= 30
    assert mismatches == []
    await assert_exact(db_url, human.user_id)
    await store.sweep_counts()
    await assert_exact(db_url, human.user_id)
    folded = await sql_rows(db_url, "SELECT count(*) AS n FROM todo_counts GROUP BY endpoint_id, queue, kind")
    assert all(r["n"] == 1 for r in folded)


async def test_after_the_upgrade_the_todos_there_before_it_are_counted(empty_db_url):
    await migrate(empty_db_url, target=9)
    pool = await open_pool(empty_db_url, min_size=1, max_size=2)
    try:
        store = st.Store(pool, Settings())
        async with watchers_lent(empty_db_url):  # today's statements read it
            human = await make_user(store, "di")
            agent = await make_agent(store, user=human, queues=("q",))
            for verb in ("complete", "complete", "fail"):
                todo = await store.todo_add(agent, queue="q", title=verb, max_attempts=1)
                await store.todo_claim(agent, todo["id"])
                if verb == "fail":  # today's fail counts in the table the upgrade adds: the old build's, as SQL
                    async with await psycopg.AsyncConnection.connect(empty_db_url, autocommit=True) as conn:
                        await conn.execute("UPDATE attempts SET ended_at = now(), outcome = 'failed', disposition = "
                                           "'dead_lettered' WHERE todo_id = %s", (todo["id"],))
                        await conn.execute("UPDATE todos SET state = 'failed', owner = NULL, lease_expires_at = NULL "
                                           "WHERE id = %s", (todo["id"],))
                else:
                    await store.todo_complete(agent, todo["id"])
            await store.todo_add(agent, queue="q", title="waiting")
        assert (await migrate(empty_db_url))[:3] == ["0010_todo_counts", "0011_watchers", "0012_outcomes_folded"]
        counts = await sql_rows(empty_db_url, "SELECT kind::text AS kind, n FROM todo_counts ORDER BY kind")
        assert [(r["kind"], r["n"]) for r in counts] == [("all", 4), ("dead", 1)]
        assert figures(await store.queue_overview(human)) == {"q": (1, 0, 0, 0, 0, 1, 2, 0)}
        await store.todo_add(agent, queue="q", title="after")
        assert figures(await store.queue_overview(human)) == {"q": (2, 0, 0, 0, 0, 1, 2, 0)}
    finally:
        await pool.close()


def test_every_counts_mutant_is_killed_by_these_tests():
    """Each statement's and trigger's count broken on purpose in a copy of the package
    (scripts/mutants.py --group counts) makes a test here fail."""
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutants.py"), "--group", "counts"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "survived" in ran.stdout and "SURVIVED" not in ran.stdout, ran.stdout
