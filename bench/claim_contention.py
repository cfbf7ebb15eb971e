"""REQ-18: claim throughput under contention, with attempt history vs the pre-change baseline.

Runs claim_next + complete cycles through the store at several worker counts (one pooled
connection each), side by side in one run:

  attempts  - board.store as shipped: each claim opens an attempt, each complete closes it
  baseline  - the same transitions as they were before SPEC-0034 (no attempt writes, no
              prior_attempts read), through the same Store plumbing

Every case starts from its own copy of one database that already holds a realistic
history (finished todos with their attempts, analysed), so a claim that walked past
finished rows or a close that scanned attempts would show. The plans of the claim and
close statements are printed first. The machines here are shared and noisy, so each worker
count runs several alternating rounds and the table reports medians and the per-round range.

    python bench/claim_contention.py                 # 1, 8, 32 workers, 3 rounds of 10 s a case
    python bench/claim_contention.py --seconds 20 --rounds 5 --workers 8 32

Uses DATABASE_URL when set (it needs CREATE DATABASE), else an embedded Postgres under
./.switchboard/bench. Prints a table and the ratio attempts/baseline (floor 0.90).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from board import store as st  # noqa: E402
from board.config import Settings  # noqa: E402
from board.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402

# The pre-SPEC-0034 statements, kept here only as the benchmark's baseline: the claim and
# the complete exactly as SPEC-0003 had them (compare-and-set, SKIP LOCKED, pg_notify).
BASELINE_CLAIM_NEXT = st._sql("""
WITH {cand},
upd AS (
  UPDATE todos t SET state = 'claimed', owner = %(owner)s,
         lease_expires_at = {NOW} + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, updated_at = {NOW}
    FROM cand WHERE t.id = cand.id
  RETURNING t.*
)
SELECT {todo_cols}, {notify} FROM upd
""", cand=st._CAND_NEXT.replace("{scope}", "t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)"),
   todo_cols=st._TODO_COLS.format(r="upd"), notify=st._NOTIFY.format(r="upd", kind="'claimed'")).replace("{NOW}", st.NOW)

BASELINE_COMPLETE = st._sql("""
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s, updated_at = {NOW}
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
   AND t.state = 'claimed' AND t.owner = %(owner)s
RETURNING {todo_cols}, {notify}
""", todo_cols=st._TODO_COLS.format(r="t"), notify=st._NOTIFY.format(r="t", kind="'complete'"))


class BaselineStore(st.Store):
    async def todo_claim_next(self, caller, **kw):
        params = self._params(caller, claim_queues=list(caller.queues), lease_seconds=60.0)
        row = await self._fetch(BASELINE_CLAIM_NEXT, params, op="claim_next", one=True)
        return {"todo": None} if row is None else {"todo": st.todo_out(row)}

    async def todo_complete(self, caller, todo_id, **kw):
        params = self._params(caller, id=todo_id, result=None)
        row = await self._fetch(BASELINE_COMPLETE, params, op="complete", one=True)
        return st.todo_out(row)


HISTORY_SQL = """

WITH ins AS (
  INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, attempts_total, created_at, updated_at)
  SELECT 'h' || g, %(ep)s, 'work', 'old job ' || g, 'done', 1 + (g %% 2), 1 + (g %% 2),
         now() - interval '2 days' + g * interval '1 ms', now() - interval '1 day'
    FROM generate_series(1, %(history)s) g
  RETURNING id, attempts_total
)
INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant, claimed_at,
                      lease_expires_at, ended_at, outcome, disposition, summary)
SELECT ins.id, s, s, 'endpoint', %(ep)s, 'agent:bench', 'bench', now() - interval '1 day',
       now() - interval '1 day', now() - interval '1 day',
       CASE WHEN s = ins.attempts_total THEN 'completed' ELSE 'failed' END::attempt_outcome,
       CASE WHEN s = ins.attempts_total THEN 'done' ELSE 'retry_scheduled' END::attempt_disposition,
       'history'
  FROM ins, generate_series(1, ins.attempts_total) s
"""

PENDING_SQL = """
INSERT INTO todos (endpoint_id, queue, title, created_at)
SELECT %(ep)s, 'work', 'job ' || g, now() + g * interval '1 us' FROM generate_series(1, %(pending)s) g
"""


def _url(admin: str, db: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = db
    return psycopg.conninfo.make_conninfo(**info)


async def prepare_template(admin: str, name: str, history: int, pending: int) -> tuple[str, str]:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = _url(admin, name)
    await migrate(url)
    pool = await open_pool(url, min_size=1, max_size=2)
    store = st.Store(pool, Settings())
    user = await store.user_insert("bench", "x")
    _, token = await store.endpoint_vend(user["id"], name="bench", agent_id="bench", queues=["work"],
                                         scope=list(st.VERBS))
    agent = await store.endpoint_authenticate(token)
    await pool.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(HISTORY_SQL, {"ep": agent.endpoint_id, "history": history})
        conn.execute(PENDING_SQL, {"ep": agent.endpoint_id, "pending": pending})
        conn.execute("VACUUM ANALYZE")
    return url, token


def clone(admin: str, template: str) -> tuple[str, str]:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
    return name, _url(admin, name)


def drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def show_plans(url: str, token: str) -> None:
    pool = await open_pool(url, min_size=1, max_size=2)
    store = st.Store(pool, Settings())
    agent = await store.endpoint_authenticate(token)
    claim = store._params(agent, claim_queues=["work"], claimant=None, lease_seconds=60.0, history_max=50,
                          claimer_kind="endpoint", claimer_endpoint_id=agent.endpoint_id, claimer_session=None,
                          token_hash=None)
    close = store._params(agent, id="h1", summary=None, summary_truncated=False, artifact=None, result=None,
                          from_states=["claimed"])
    async with pool.connection() as conn:
        for title, text, params in (("claim_next", st.SQL_CLAIM_NEXT, claim),
                                    ("complete", st.SQL_CLOSE_AGENT[("complete", False)], close)):
            cur = await conn.execute("EXPLAIN (COSTS OFF) " + text, params)
            lines = [r["QUERY PLAN"] for r in await cur.fetchall()]
            scans = [ln.strip() for ln in lines if "Scan" in ln]
            print(f"plan of {title}: " + "; ".join(scans))
            if any(ln.startswith("Seq Scan") or "-> Seq Scan" in ln for ln in lines):
                print(f"  WARNING: {title} has a sequential scan")
        await conn.rollback()
    await pool.close()


async def run_case(url: str, token: str, variant: str, workers: int, seconds: float) -> dict:
    pool = await open_pool(url, min_size=workers + 1, max_size=workers + 2)
    cls = BaselineStore if variant == "baseline" else st.Store
    store = cls(pool, Settings())
    agent = await store.endpoint_authenticate(token)
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def worker(i: int) -> int:
        me = agent.on_session(f"w{i}")
        n = 0
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            res = await store.todo_claim_next(me)
            if res["todo"] is None:
                break
            await store.todo_complete(me, res["todo"]["id"])
            latencies.append(time.perf_counter() - t0)
            n += 1
        return n

    started = time.perf_counter()
    cycles = sum(await asyncio.gather(*(worker(i) for i in range(workers))))
    elapsed = time.perf_counter() - started
    await pool.close()
    latencies.sort()
    return {
        "cycles": cycles, "rate": cycles / elapsed,
        "p50": statistics.median(latencies) * 1000 if latencies else 0,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else 0,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per worker count; medians reported")
    ap.add_argument("--history", type=int, default=100_000, help="finished todos (with attempts) already there")
    ap.add_argument("--pending", type=int, default=120_000, help="pending todos each case starts with")
    args = ap.parse_args()

    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(Path(".switchboard/bench"), database="postgres")
        admin = embedded.start()
    try:
        template = "bench_template"
        print(f"preparing {args.history:,} finished todos of history and {args.pending:,} pending ...", flush=True)
        url, token = await prepare_template(admin, template, args.history, args.pending)
        await show_plans(url, token)
        rows = []
        for workers in args.workers:
            runs: dict[str, list[dict]] = {"baseline": [], "attempts": []}
            for r in range(args.rounds):
                # Alternate the order each round so neither variant always runs second.
                order = ("baseline", "attempts") if (workers + r) % 2 else ("attempts", "baseline")
                for variant in order:
                    name, case_url = clone(admin, template)
                    try:
                        runs[variant].append(await run_case(case_url, token, variant, workers, args.seconds))
                    finally:
                        drop(admin, name)
                    print(f"  round {r + 1}: {variant:9} {workers:3} workers: {runs[variant][-1]['rate']:8.0f} cycles/s",
                          flush=True)
            rows.append((workers, {v: median_run(rs) for v, rs in runs.items()}, runs))
        drop(admin, template)
    finally:
        if embedded:
            embedded.stop()

    print()
    print(f"claim_next + complete, {args.rounds} rounds of {args.seconds:g} s a case (medians), "
          f"{args.history:,} finished todos of history")
    print(f"{'workers':>7} | {'baseline/s':>10} {'p50 ms':>7} {'p99 ms':>7} | {'attempts/s':>10} {'p50 ms':>7} "
          f"{'p99 ms':>7} | {'ratio':>5} | {'ratio range':>11}")
    print("-" * 98)
    for workers, r, runs in rows:
        b, a = r["baseline"], r["attempts"]
        ratios = sorted(x["rate"] / y["rate"] for x, y in zip(runs["attempts"], runs["baseline"]))
        print(f"{workers:>7} | {b['rate']:>10.0f} {b['p50']:>7.2f} {b['p99']:>7.2f} | {a['rate']:>10.0f} "
              f"{a['p50']:>7.2f} {a['p99']:>7.2f} | {a['rate'] / b['rate']:>5.2f} | "
              f"{ratios[0]:>5.2f}-{ratios[-1]:<5.2f}")
    print("ratio = median attempts / median baseline throughput (range: per round); SPEC-0034 REQ-18 floor is 0.90")


def median_run(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda x: x["rate"])[len(runs) // 2]


if __name__ == "__main__":
    asyncio.run(main())
