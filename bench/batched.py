"""The batched verbs through the store, side by side with one todo per call.

Drains through the store at several worker counts (one pooled connection each), in one run:

  single   - claim_next + complete, one todo per call (claim_contention.py's attempts variant)
  batched  - claim_next(limit=--limit) once, then complete each todo claimed, one call each
  batched-close - claim_next(limit=--limit) once, then complete_todos for all of them

and producers adding --produce todos: add_todo once per todo vs add_todos --batch at a time.

Each variant runs on its own copy of a database that already holds finished history, in
short slices taken in rotating order, as bench/claim_contention.py does (its helpers are
reused: the template, the clones, the ratio's confidence interval). The drain table prints
todos/s per variant, the ratio batched/single with its 95% interval, and where a batched
worker's time goes: the share spent in the claim and in the completes, which is what says
whether a batched close would matter.

    python bench/batched.py                       # 1 and 8 workers, 6 slices of 3 s
    python bench/batched.py --workers 1 8 32 --slices 10 --limit 10
    python bench/batched.py --statements base=/tmp/base/board/store/sql

--statements NAME=PATH adds the single and batched drains through the claim and complete
statements of PATH (another checkout's board/store/sql, see claim_contention.py), in the
same slices, and prints each against today's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import claim_contention as cc  # noqa: E402
from board.store.db import EmbeddedPostgres  # noqa: E402


class DrainCase(cc.Case):
    """A claim_contention Case whose workers claim `limit` at a time (1: claim_next as shipped)."""

    def __init__(self, *args, limit: int, close_together: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.limit, self.close_together = limit, close_together
        self.claim_seconds = self.complete_seconds = 0.0

    async def run_slice(self, seconds: float) -> float:
        stop_at = time.perf_counter() + seconds

        async def worker(i: int) -> int:
            me = self.agent.on_session(f"w{i}")
            n = 0
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                if self.limit == 1:
                    res = await self.store.todo_claim_next(me)
                    ids = [res["todo"]["id"]] if res["todo"] else []
                else:
                    res = await self.store.todo_claim_next(me, limit=self.limit)
                    ids = [c["todo"]["id"] for c in res["claims"]]
                if not ids:
                    raise SystemExit("the bench ran out of pending todos: raise --pending")
                t1 = time.perf_counter()
                if self.close_together:
                    await self.store.todos_complete(me, [{"id": todo_id} for todo_id in ids])
                else:
                    for todo_id in ids:
                        await self.store.todo_complete(me, todo_id)
                t2 = time.perf_counter()
                self.claim_seconds += t1 - t0
                self.complete_seconds += t2 - t1
                self.latencies.append((t2 - t0) / len(ids))
                n += len(ids)
            return n

        started = time.perf_counter()
        done = sum(await asyncio.gather(*(worker(i) for i in range(self.workers))))
        elapsed = time.perf_counter() - started
        self.slices.append((done, elapsed))
        return done / elapsed


async def produce(admin: str, template: str, token: str, todos: int, batch: int) -> dict[str, float]:
    """Producer rates, one after the other on two clones (short: a few seconds each)."""
    rates = {}
    for variant in ("add_todo", "add_todos"):
        case = cc.Case(admin, template, token, variant, 1)
        await case.open()
        try:
            items = [{"queue": "work", "title": f"produced {i}"} for i in range(todos)]
            started = time.perf_counter()
            if variant == "add_todo":
                for item in items:
                    await case.store.todo_add(case.agent, **item)
            else:
                for k in range(0, todos, batch):
                    await case.store.todos_add(case.agent, items[k:k + batch])
            rates[variant] = todos / (time.perf_counter() - started)
        finally:
            await case.close()
    return rates


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--slices", type=int, default=6, help="rotating slices per variant and worker count")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one slice")
    ap.add_argument("--limit", type=int, default=10, help="claim_next's limit in the batched variant")
    ap.add_argument("--history", type=int, default=20_000, help="finished todos (with attempts) already there")
    ap.add_argument("--pending", type=int, default=None, help="pending todos each case starts with")
    ap.add_argument("--produce", type=int, default=5_000, help="todos each producer variant adds (0: skip)")
    ap.add_argument("--batch", type=int, default=100, help="todos per add_todos call")
    ap.add_argument("--statements", metavar="NAME=PATH", default=None,
                    help="also drain through the claim and complete statements of PATH (claim_contention.py's)")
    args = ap.parse_args()
    if args.pending is None:
        args.pending = max(60_000, int(args.slices * args.seconds * 8_000))
    variants = {"single": 1, "batched": args.limit, "batched-close": args.limit}
    other = None
    if args.statements:
        other, _, path = args.statements.partition("=")
        other_store = cc.statements_store(other, path)
        variants |= {f"single@{other}": 1, f"batched@{other}": args.limit}

    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(Path(".switchboard/bench"), database="postgres")
        admin = embedded.start()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '512MB'")
            conn.execute(sql.SQL("ALTER SYSTEM SET max_connections = {}").format(
                sql.Literal(max(100, (max(args.workers) + 2) * len(variants) + 10))))
        embedded.stop()
        admin = embedded.start()
    rows, produced = [], {}
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
            load = os.getloadavg()
        print(f"preparing {args.history:,} finished todos and {args.pending:,} pending ... (load average "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores)", flush=True)
        url, token = await cc.prepare_template(admin, "bench_batched", args.history, args.pending)
        template = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        for workers in args.workers:
            cases = {v: DrainCase(admin, template, token, v, workers, limit=limit, close_together=v == "batched-close",
                                  store_class=other_store if "@" in v else None)
                     for v, limit in variants.items()}
            for case in cases.values():
                await case.open()
            try:
                ratios, close_ratios, against = [], [], {"single": [], "batched": []}
                names = list(variants)
                for i in range(args.slices):
                    order = names[i % len(names):] + names[:i % len(names)]
                    rate = {v: await cases[v].run_slice(args.seconds) for v in order}
                    ratios.append(rate["batched"] / rate["single"])
                    close_ratios.append(rate["batched-close"] / rate["single"])
                    for v in against if other else ():
                        against[v].append(rate[v] / rate[f"{v}@{other}"])
                    print(f"  {workers:3} workers, slice {i + 1:2}: " + "  ".join(f"{v} {rate[v]:6.0f}/s" for v in names)
                          + f"  ratios {ratios[-1]:.2f} {close_ratios[-1]:.2f}", flush=True)
            finally:
                for case in cases.values():
                    await case.close()
            rows.append((workers, cases, ratios, close_ratios, against))
        if args.produce:
            produced = await produce(admin, template, token, args.produce, args.batch)
        cc.drop(admin, template)
        with psycopg.connect(admin, autocommit=True) as conn:
            load = os.getloadavg()
    finally:
        if embedded:
            embedded.stop()

    print()
    print(f"drain through the store: claim_next + complete, {args.slices} rotating slices of {args.seconds:g} s, "
          f"{args.history:,} finished todos of history, PostgreSQL {version}; load average after "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'workers':>7} | {'single/s':>9} {'p50 ms':>7} | {'batched/s':>9} {'p50 ms':>7} {'ratio':>5} "
          f"{'95% CI':>11} {'claim':>5} {'close':>5} | {'+close/s':>9} {'p50 ms':>7} {'ratio':>5} {'95% CI':>11} "
          f"{'claim':>5} {'close':>5}")
    print("-" * 128)
    for workers, cases, ratios, close_ratios, _ in rows:
        s = cases["single"]
        line = f"{workers:>7} | {s.rate:>9.0f} {s.pct(0.5):>7.2f}"
        for name, rs in (("batched", ratios), ("batched-close", close_ratios)):
            b = cases[name]
            _, lo, hi = cc.ratio_interval(rs)
            busy = b.claim_seconds + b.complete_seconds
            line += (f" | {b.rate:>9.0f} {b.pct(0.5):>7.2f} {b.rate / s.rate:>5.2f} {lo:>4.2f} - {hi:<4.2f} "
                     f"{b.claim_seconds / busy:>5.0%} {b.complete_seconds / busy:>5.0%}")
        print(line)
    print(f"batched: claim_next limit {args.limit}, then one complete per todo; +close: the same claim, then one "
          "complete_todos for them all.")
    print("ratio = todos per second over all slices / single's; 95% CI of the slice pairs' ratio; p50 per todo; claim "
          "and close: shares of a worker's time in the store.")
    if other:
        print()
        print(f"today's statements against {other}'s ({args.statements.partition('=')[2]}), in the same slices:")
        for workers, cases, _, _, against in rows:
            for v, rs in against.items():
                _, lo, hi = cc.ratio_interval(rs)
                print(f"  {workers:3} workers, {v:8}: today {cases[v].rate:6.0f}/s, {other} {cases[f'{v}@{other}'].rate:6.0f}/s,"
                      f" today/{other} {cases[v].rate / cases[f'{v}@{other}'].rate:.3f} (95% CI of the slice pairs "
                      f"{lo:.3f}-{hi:.3f})")
    if produced:
        print()
        print(f"producers, {args.produce:,} todos each: add_todo {produced['add_todo']:,.0f}/s, add_todos "
              f"({args.batch} per call) {produced['add_todos']:,.0f}/s, ratio "
              f"{produced['add_todos'] / produced['add_todo']:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
