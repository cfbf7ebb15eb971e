"""The Board's chart read against the closes in its window, folded and not, side by side.

The overview's chart (the last hour, day or week of closed attempts, by queue and outcome)
reads the closed-attempt counts plus the attempts closed since the fold's watermark
(migration 0012). This bench builds, for --small and --big closes spread over the last
week, two databases on one Postgres server:

  before - never folded, read by the statement as it was before the fold
           (bench/variants/overview_outcomes_before_fold.sql): every attempt closed in the
           window, joined to its todo as the planner chooses;
  folded - folded by the store's sweep (Store.sweep_outcomes, as the server runs it), timed
           (the first fold of a week of closes), and read through the store
           (Store.queue_outcomes);

then reads each database's chart for the week's and the hour's windows, --requests reads a
slice, in rounds whose order rotates, and prints the p50 and p99 of each with the ratios. Each database has one human with one endpoint and
three queues; every close is one todo's one attempt. It asserts nothing.

    python bench/chart_read.py                          # 10,000 against 1,000,000 (about 3 minutes)
    python bench/chart_read.py --small 1000 --big 100000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import claim_contention as cc  # noqa: E402
from million import pct  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.auth import hash_password  # noqa: E402
from board.store.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402
from board.store.store import Human, Store  # noqa: E402
from board.web.overview import WINDOWS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEFORE_FOLD = (ROOT / "bench" / "variants" / "overview_outcomes_before_fold.sql").read_text()

# `closes` done todos, each with its one attempt closed at a moment spread evenly over the
# week before the bench started (the newest a minute before), outcomes and queues mixed:
# the same moments on every database, so their charts must count the same.
CLOSES_SQL = """
WITH ins AS (
  INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, attempts_total, created_at, updated_at)
  SELECT 'c' || g, %(ep)s, (ARRAY['build', 'test', 'deploy'])[1 + g %% 3], 'job ' || g, 'done', 1, 1,
         %(anchor)s - interval '1 minute' - g * (interval '7 days' / %(closes)s),
         %(anchor)s - interval '1 minute' - g * (interval '7 days' / %(closes)s)
    FROM generate_series(1, %(closes)s) g
  RETURNING id, updated_at
)
INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant, claimed_at,
                      lease_expires_at, ended_at, outcome, disposition)
SELECT id, 1, 1, 'endpoint', %(ep)s, 'agent:bench', 'bench', updated_at - interval '1 second',
       updated_at, updated_at,
       o.outcome::attempt_outcome, o.disposition::attempt_disposition
  FROM ins CROSS JOIN LATERAL (SELECT * FROM (VALUES (0, 'released', 'requeued'), (1, 'failed', 'retry_scheduled'))
                                 v(k, outcome, disposition) WHERE v.k = substr(ins.id, 2)::int %% 5
                               UNION ALL SELECT 2, 'completed', 'done' WHERE substr(ins.id, 2)::int %% 5 > 1) o
"""


class Side:
    def __init__(self, admin: str, closes: int, folded: bool, anchor: datetime):
        self.closes, self.folded, self.anchor = closes, folded, anchor
        self.label = f"{'folded' if folded else 'before'} {closes:,}"
        self.name = f"bench_chart_{'folded' if folded else 'before'}_{closes}"
        self.admin, self.url = admin, cc._url(admin, self.name)
        self.ms: dict[str, list[float]] = {"week": [], "hour": []}
        self.fold_seconds = self.passes = 0

    async def build(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        await migrate(self.url)
        self.pool = await open_pool(self.url, min_size=1, max_size=2)
        self.store = Store(self.pool, Settings())
        user = await self.store.user_insert("bench", hash_password(secrets.token_urlsafe(16)))
        _, token = await self.store.endpoint_vend(user["id"], name="bench", agent_id="bench",
                                                  queues=["build", "test", "deploy"], scope=list(vocabulary.VERBS))
        agent = await self.store.endpoint_authenticate(token)
        self.human = Human(user["id"], user["username"])
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(CLOSES_SQL, {"ep": agent.endpoint_id, "closes": self.closes, "anchor": self.anchor})
            await conn.execute("VACUUM ANALYZE")
        if self.folded:
            started = time.perf_counter()
            while await self.store.sweep_outcomes():
                self.passes += 1
            self.fold_seconds = time.perf_counter() - started
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                await conn.execute("VACUUM ANALYZE attempt_outcome_counts")

    async def chart(self, w) -> list[dict]:
        if self.folded:
            return await self.store.queue_outcomes(self.human, buckets=w.buckets, bucket_seconds=w.bucket_seconds)
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(BEFORE_FOLD, {"user_id": self.human.user_id, "now": None, "buckets": w.buckets,
                                            "bucket_seconds": w.bucket_seconds})
            return await cur.fetchall()

    async def read_slice(self, requests: int) -> None:
        for key in ("week", "hour"):
            for _ in range(requests):
                t0 = time.perf_counter()
                await self.chart(WINDOWS[key])
                self.ms[key].append((time.perf_counter() - t0) * 1000)

    async def total(self) -> int:
        return sum(r["n"] for r in await self.chart(WINDOWS["week"]))

    async def close(self) -> None:
        if getattr(self, "pool", None) is not None:
            await self.pool.close()
        cc.drop(self.admin, self.name)


async def bench(args) -> None:
    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(ROOT / ".switchboard" / "bench-chart", database="postgres")
        admin = await asyncio.to_thread(embedded.start)
    anchor = datetime.now(timezone.utc)
    sides = [Side(admin, n, folded, anchor) for n in (args.small, args.big) for folded in (False, True)]
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
        load = os.getloadavg()
        print(f"building, PostgreSQL {version} (load average {load[0]:.1f} on {os.cpu_count()} cores) ...", flush=True)
        for side in sides:
            await side.build()
        totals = {side.label: await side.total() for side in sides}
        for r in range(args.rounds):
            k = r % len(sides)
            for side in sides[k:] + sides[:k]:
                await side.read_slice(args.requests)
        load = os.getloadavg()
    finally:
        for side in sides:
            await side.close()
        if embedded:
            await asyncio.to_thread(embedded.stop)

    print()
    print(f"The chart's read, {args.rounds} rotating rounds of {args.requests} reads a window; "
          f"PostgreSQL {version}; load average after {load[0]:.1f}")
    head = (f"{'closes in the week':>18} | {'window':>6} | {'before p50':>10} | {'p99':>7} | {'folded p50':>10} | "
            f"{'p99':>7} | {'p99 ratio folded/before':>23}")
    print(head)
    print("-" * len(head))
    for n in (args.small, args.big):
        plain, folded = (s for s in sides if s.closes == n)
        for key in ("week", "hour"):
            a, f = plain.ms[key], folded.ms[key]
            print(f"{n:>18,} | {key:>6} | {pct(a, .5):>10.2f} | {pct(a, .99):>7.2f} | {pct(f, .5):>10.2f} | "
                  f"{pct(f, .99):>7.2f} | {pct(f, .99) / pct(a, .99):>23.2f}")
    small_f, big_f = sides[1], sides[3]
    for key in ("week", "hour"):
        print(f"the {key}'s read folded, p99 at {args.big:,} over at {args.small:,}: "
              f"{pct(big_f.ms[key], .99) / pct(small_f.ms[key], .99):.2f} (before the fold: "
              f"{pct(sides[2].ms[key], .99) / pct(sides[0].ms[key], .99):.2f})")
    for side in (small_f, big_f):
        print(f"the first fold of {side.closes:,} closes: {side.fold_seconds:.1f} s in {side.passes} passes")
    print("the week's chart counts the same closes either way: "
          + ", ".join(f"{label} {n:,}" for label, n in totals.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=10_000, help="closes in the week on the small side")
    ap.add_argument("--big", type=int, default=1_000_000, help="closes in the week on the big side")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=25, help="reads of each window a slice")
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
