"""A small history against a million finished todos, side by side.

Two databases on one Postgres server: one whose endpoint has --small finished todos (10,000)
and one with --big (1,000,000), each finished todo with --attempts closed attempts (5: five
million at the big size), both with the same --pending backlog. --old of the big one's
finished todos are past retention. A `python -m board serve` runs against each database
(its retention sweep off: this bench drives retention), and one human is signed in to each.

Then, in rounds whose order rotates:

  claims     - --workers workers drain claim_next + complete through the store for --seconds
  get_todo   - --requests get_todo calls through the store, for finished todos picked at random
  board      - --requests GETs of the Board's / (overview and first page) over HTTP
  reads      - the same page's reads (its overview, its first page of todos) through the
               bench's own store, --requests times: whether what grows is the database's
               part of the page or the server's
  retention  - then, on the big database only, after the rounds above (its deletes leave work
               to autovacuum): the claims while the store's retention sweep deletes the
               old todos beside them, in its bounded batches, paced as the server paces it
               (board/ops/sweeps.py: RETENTION_DUTY), interleaved with the claims without

and prints each measure at both sizes with the ratio, and the claims during retention beside
the claims without it, and each database's todos and attempts as the size rounds left them
(dead tuples, autovacuum runs). It asserts nothing.

    python bench/million.py                                  # 10,000 against 1,000,000 (about 8 minutes)
    python bench/million.py --small 1000 --big 100000 --old 50000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import claim_contention as cc  # noqa: E402
import live_latency as ll  # noqa: E402
from board.config import Settings  # noqa: E402
from board.ops.sweeps import RETENTION_DUTY, run_batches  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.auth import hash_password  # noqa: E402
from board.store.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402
from board.store.store import Human, Store  # noqa: E402
from board.web.overview import overview_data  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RETENTION_DAYS = 30

# Finished todos, each with `attempts` closed attempts (the last completed), the first `old`
# of them last touched past retention; then the pending backlog.
HISTORY_SQL = """
WITH ins AS (
  INSERT INTO todos (id, endpoint_id, queue, title, state, attempt, attempts_total, created_at, updated_at)
  SELECT 'h' || g, %(ep)s, 'work', 'old job ' || g, 'done', %(attempts)s, %(attempts)s,
         now() - interval '500 days' + g * interval '1 ms',
         CASE WHEN g <= %(old)s THEN now() - interval '400 days' ELSE now() - interval '1 day' END
    FROM generate_series(1, %(history)s) g
  RETURNING id
)
INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant, claimed_at,
                      lease_expires_at, ended_at, outcome, disposition, summary)
SELECT ins.id, s, s, 'endpoint', %(ep)s, 'agent:bench', 'bench', now() - interval '400 days',
       now() - interval '400 days', now() - interval '400 days',
       CASE WHEN s = %(attempts)s THEN 'completed' ELSE 'failed' END::attempt_outcome,
       CASE WHEN s = %(attempts)s THEN 'done' ELSE 'retry_scheduled' END::attempt_disposition,
       'history'
  FROM ins, generate_series(1, %(attempts)s) s
"""
PENDING_SQL = """
INSERT INTO todos (endpoint_id, queue, title, created_at)
SELECT %(ep)s, 'work', 'job ' || g, now() + g * interval '1 us' FROM generate_series(1, %(pending)s) g
"""


class Side:
    """One database, its pool and store, its server and a signed-in human."""

    def __init__(self, label: str, admin: str, history: int):
        self.label, self.admin, self.history = label, admin, history
        self.name = f"bench_million_{label}"
        self.url = cc._url(admin, self.name)
        self.claims: list[tuple[int, float]] = []
        self.retention_claims: list[tuple[int, float]] = []
        self.claims_beside_retention: list[tuple[int, float]] = []
        self.deleted = self.old = 0
        self.get_ms: list[float] = []
        self.board_ms: list[float] = []
        self.reads_ms: list[float] = []

    async def build(self, args) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        await migrate(self.url)
        self.pool = await open_pool(self.url, min_size=2, max_size=args.workers + 4)
        self.store = Store(self.pool, Settings(retention_days=RETENTION_DAYS))
        user = await self.store.user_insert("bench", hash_password(ll.PASSWORD))
        _, token = await self.store.endpoint_vend(user["id"], name="bench", agent_id="bench", queues=["work"],
                                                  scope=list(vocabulary.VERBS))
        self.agent = await self.store.endpoint_authenticate(token)
        self.human = Human(user["id"], user["username"])
        self.old = old = args.old if self.history == args.big else 0
        started = time.perf_counter()
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(HISTORY_SQL, {"ep": self.agent.endpoint_id, "history": self.history,
                                             "attempts": args.attempts, "old": old})
            await conn.execute(PENDING_SQL, {"ep": self.agent.endpoint_id, "pending": args.pending})
        await self.store.sweep_counts()  # the counts' deltas folded, as the server's counts sweep leaves them
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute("VACUUM ANALYZE")
        print(f"  {self.label}: {self.history:,} finished todos ({old:,} past retention), "
              f"{self.history * args.attempts:,} attempts, {args.pending:,} pending in "
              f"{time.perf_counter() - started:.0f} s", flush=True)

    async def serve(self, scratch: Path) -> None:
        port = ll.free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = scratch / f"server-{self.label}.log"
        env = dict(os.environ, DATABASE_URL=self.url, SWITCHBOARD_SECRET_KEY=secrets.token_urlsafe(32),
                   SWITCHBOARD_RETENTION_INTERVAL_SECONDS="0")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "board", "serve", "--host", "127.0.0.1",
                                          "--port", str(port)], cwd=ROOT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT)
        await ll.wait_for_server(self.base, self.proc, self.log)
        self.client = await ll.sign_in(self.base)

    async def close(self) -> None:
        if getattr(self, "client", None) is not None:
            await self.client.aclose()
        if getattr(self, "proc", None) is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if getattr(self, "pool", None) is not None:
            await self.pool.close()
        cc.drop(self.admin, self.name)

    async def drain(self, seconds: float, workers: int) -> tuple[int, float]:
        stop_at = time.perf_counter() + seconds

        async def worker(i: int) -> int:
            me = self.agent.on_session(f"w{i}")
            n = 0
            while time.perf_counter() < stop_at:
                res = await self.store.todo_claim_next(me)
                if res["todo"] is None:
                    raise SystemExit("the bench ran out of pending todos: raise --pending")
                await self.store.todo_complete(me, res["todo"]["id"])
                n += 1
            return n

        started = time.perf_counter()
        done = sum(await asyncio.gather(*(worker(i) for i in range(workers))))
        return done, time.perf_counter() - started

    async def claims_slice(self, args) -> None:
        self.claims.append(await self.drain(args.seconds, args.workers))

    async def claims_without_slice(self, args) -> None:
        """The claims without retention, interleaved with retention_slice."""
        self.claims_beside_retention.append(await self.drain(args.seconds, args.workers))

    async def retention_slice(self, args) -> None:
        """The claims while the retention sweep deletes old todos, batch after batch, beside them."""
        stop = asyncio.Event()

        async def retention() -> None:
            while not stop.is_set():  # paced as the server's retention sweep is
                self.deleted += await run_batches(self.store.sweep_retention, RETENTION_DUTY, stop)
                await asyncio.sleep(0.05)

        sweeper = asyncio.create_task(retention())
        try:
            self.retention_claims.append(await self.drain(args.seconds, args.workers))
        finally:
            stop.set()
            await sweeper

    async def get_slice(self, args) -> None:
        me = self.agent.on_session("reader")
        for _ in range(args.requests):
            todo_id = f"h{random.randint(self.old + 1, self.history)}"  # never one retention deletes
            t0 = time.perf_counter()
            await self.store.todo_get(me, todo_id)
            self.get_ms.append((time.perf_counter() - t0) * 1000)

    async def reads_slice(self, args) -> None:
        """The reads the Board's / makes (its overview and its first page of todos), through
        the bench's own store: with the page's time over HTTP, whether what grows is the
        database's part or the server's."""
        for _ in range(args.requests):
            t0 = time.perf_counter()
            await overview_data(self.store, self.human)
            await self.store.todo_list(self.human, limit=50)
            self.reads_ms.append((time.perf_counter() - t0) * 1000)

    async def vacuum_state(self) -> str:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            rows = await (await conn.execute(
                "SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count FROM pg_stat_user_tables"
                " WHERE relname IN ('todos', 'attempts') ORDER BY relname")).fetchall()
        return "; ".join(f"{r[0]} {r[1]:,} live, {r[2]:,} dead, autovacuumed {r[3]}x, autoanalyzed {r[4]}x"
                         for r in rows)

    async def board_slice(self, args) -> None:
        for _ in range(args.requests):
            t0 = time.perf_counter()
            r = await self.client.get("/")
            self.board_ms.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"the Board's / answered {r.status_code}")


def rate(slices: list[tuple[int, float]]) -> float:
    return sum(n for n, _ in slices) / max(1e-9, sum(s for _, s in slices))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def bench(args) -> None:
    embedded = None
    admin = os.environ.get("DATABASE_URL")
    scratch = Path(tempfile.mkdtemp(prefix="bench-million-", dir=ROOT / ".switchboard"))
    if not admin:
        embedded = EmbeddedPostgres(ROOT / ".switchboard" / "bench-million", database="postgres")
        admin = await asyncio.to_thread(embedded.start)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '512MB'")
            conn.execute("ALTER SYSTEM SET max_wal_size = '4GB'")
        await asyncio.to_thread(embedded.stop)
        admin = await asyncio.to_thread(embedded.start)
    sides = [Side("small", admin, args.small), Side("big", admin, args.big)]
    small, big = sides
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
        load = os.getloadavg()
        print(f"building, PostgreSQL {version} (load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
              f"on {os.cpu_count()} cores) ...", flush=True)
        for side in sides:
            await side.build(args)
            await side.serve(scratch)
        # Retention's deletes leave the big tables to autovacuum for a while, which would weigh
        # on every later measure of the big side: the sizes are compared first, then retention.
        steps = [(small, "claims"), (big, "claims"), (small, "get"), (big, "get"), (small, "board"), (big, "board"),
                 (small, "reads"), (big, "reads")]
        for r in range(args.rounds):
            k = r % len(steps)
            for side, what in steps[k:] + steps[:k]:
                await getattr(side, f"{what}_slice")(args)
            print(f"  round {r + 1}: claims/s small {rate(small.claims):.0f} big {rate(big.claims):.0f}", flush=True)
        vacuumed = [f"  {side.label}: {await side.vacuum_state()}" for side in sides]
        for r in range(args.rounds):
            pair = [big.retention_slice, big.claims_without_slice]
            for step in (pair if r % 2 == 0 else pair[::-1]):
                await step(args)
            print(f"  retention round {r + 1}: claims/s big {rate(big.claims_beside_retention):.0f}, during retention "
                  f"{rate(big.retention_claims):.0f} ({big.deleted:,} deleted so far)", flush=True)
        load = os.getloadavg()
    finally:
        for side in sides:
            await side.close()
        if embedded:
            await asyncio.to_thread(embedded.stop)
        shutil.rmtree(scratch, ignore_errors=True)

    print()
    print(f"{args.small:,} against {args.big:,} finished todos ({args.attempts} attempts each), {args.pending:,} "
          f"pending, {args.rounds} rotating rounds, PostgreSQL {version}; load average after "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    head = f"{'measure':<44} | {f'{args.small:,}':>10} | {f'{args.big:,}':>10} | {'ratio':>5} | goal"
    print(head)
    print("-" * len(head))
    rs, rb = rate(small.claims), rate(big.claims)
    print(f"{f'claim_next + complete, {args.workers} workers, /s':<44} | {rs:>10.0f} | {rb:>10.0f} | "
          f"{rb / rs:>5.2f} | at least 0.9")
    for label, attr in (("get_todo through the store", "get_ms"), ("the Board's / over HTTP", "board_ms"),
                        ("the page's reads through the store", "reads_ms")):
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            a, b = pct(getattr(small, attr), q), pct(getattr(big, attr), q)
            print(f"{f'{label}, {name} ms':<44} | {a:>10.1f} | {b:>10.1f} | {b / a:>5.2f} | "
                  f"{'at most 1.5' if name == 'p99' and attr != 'reads_ms' else ''}")
    rr, rw = rate(big.retention_claims), rate(big.claims_beside_retention)
    print(f"{'claims during retention (big), /s':<44} | {'':>10} | {rr:>10.0f} | {rr / rw:>5.2f} | at least 0.8 "
          f"of the big side's claims without ({rw:.0f}/s, interleaved)")
    print(f"retention deleted {big.deleted:,} of the {args.old:,} old todos during its slices "
          f"({len(big.retention_claims)} of {args.seconds:g} s); ratio = the big side over the small one.")
    print("the tables after the size rounds, before retention:")
    print("\n".join(vacuumed))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=10_000, help="finished todos on the small side")
    ap.add_argument("--big", type=int, default=1_000_000, help="finished todos on the big side")
    ap.add_argument("--attempts", type=int, default=5, help="closed attempts per finished todo")
    ap.add_argument("--old", type=int, default=500_000, help="of the big side's finished todos, past retention")
    ap.add_argument("--pending", type=int, default=60_000, help="pending todos on each side")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of a claims slice")
    ap.add_argument("--requests", type=int, default=50, help="get_todo calls and Board GETs per slice")
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
