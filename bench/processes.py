"""Several server processes on one Postgres: claim_next + complete over MCP through 1, 2 and
4 serve processes behind Debian's HAProxy, in one run with interleaved slices.

Each configuration is its own HAProxy (tests/realparts.py: docs/scaling.md's configuration,
round robin without affinity, so each request goes to the next process in turn, even on
a keep-alive client connection). Every process is the real app under uvicorn
(bench/mcp_roundtrip.py's server_process), on the same database; every configuration
drains its own endpoint's backlog with the same number of minimal raw JSON-RPC clients, so
the server rather than the load generator is what is measured. --generation legacy makes
each client a 2025-11-25 session, whose requests then land on every process (each takes
the session up once: board/mcp/sessions.py). The 1-process case goes through HAProxy too,
so the balancer's cost is in every figure alike.

For each configuration it prints calls/s, p50 and p99 of a single call, the servers' CPU
per call and the ratio to one process, with a 95% interval over the slice pairs. On a
machine with fewer cores than processes the extra processes share them with Postgres, the
balancer and the load generator: read the ratio with the core count beside it.

    python bench/processes.py                      # 1, 2 and 4 processes, 8 and 32 clients
    python bench/processes.py --processes 1 2 --clients 16 --slices 4 --generation legacy

Needs Debian's haproxy. Uses DATABASE_URL when set (it needs CREATE DATABASE), else an
embedded Postgres under ./.switchboard/bench. Timings are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.claim_contention import ratio_interval  # noqa: E402
from bench.mcp_roundtrip import (PENDING_SQL, RawClient, cpu_seconds, pct, run_slice,  # noqa: E402
                                 scratch_database, server_process)
from board.config import Settings  # noqa: E402
from board.store import store as st  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.db import migrate, open_pool  # noqa: E402
from tests.realparts import haproxy  # noqa: E402


@dataclass
class Case:
    processes: int
    port: int = 0
    pids: list[int] = field(default_factory=list)
    token: str = ""
    calls: int = 0
    elapsed: float = 0.0
    server_cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)
    slice_rates: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed if self.elapsed else 0.0


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--slices", type=int, default=6, help="rounds of every configuration, in rotating order")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of one configuration in one slice")
    ap.add_argument("--backlog", type=int, help="pending todos per case (default: enough for 2,000 cycles/s)")
    ap.add_argument("--generation", choices=["modern", "legacy"], default="modern",
                    help="modern: 2026-07-28, sessionless; legacy: 2025-11-25 sessions")
    args = ap.parse_args()
    backlog = args.backlog or int(2000 * args.slices * args.seconds) + 1000

    results: list[tuple[int, list[Case]]] = []
    with scratch_database("bench_procs") as (url, version):
        await migrate(url)
        pool = await open_pool(url, min_size=1, max_size=4)
        store = st.Store(pool, Settings())
        user = await store.user_insert("bench", "not-a-real-hash")

        async def new_token() -> str:
            queue = "p" + uuid.uuid4().hex[:10]
            row, token = await store.endpoint_vend(user["id"], name=queue, agent_id="bench", queues=[queue],
                                                   scope=list(vocabulary.VERBS))
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(PENDING_SQL, {"ep": row["id"], "queue": queue, "n": backlog})
                await conn.execute("ANALYZE todos")
            return token

        async with contextlib.AsyncExitStack() as stack:
            servers = [stack.enter_context(server_process(ROOT, url)) for _ in range(max(args.processes))]
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-haproxy-")))
            for clients in args.clients:
                cases = []
                for n in args.processes:
                    ports = [port for port, _ in servers[:n]]
                    balancer = stack.enter_context(haproxy(ports, folder / f"{clients}-{n}"))
                    cases.append(Case(n, balancer.port, [pid for _, pid in servers[:n]], await new_token()))
                for i in range(args.slices):
                    for case in cases[i % len(cases):] + cases[:i % len(cases)]:
                        before = sum(cpu_seconds(pid) for pid in case.pids)
                        opener = lambda c=case: RawClient(c.port, c.token, args.generation)  # noqa: E731
                        await run_slice(case, clients, args.seconds, opener)
                        case.server_cpu += sum(cpu_seconds(pid) for pid in case.pids) - before
                    print(f"  {clients} clients: slice {i + 1}/{args.slices} done", flush=True)
                results.append((clients, cases))
        await pool.close()

    print()
    protocol = "2026-07-28" if args.generation == "modern" else "2025-11-25 sessions"
    print(f"claim_next + complete over MCP (raw client, {protocol}) through HAProxy, round robin; "
          f"{args.slices} slices of {args.seconds:g} s per configuration, interleaved; {os.cpu_count()} CPUs; "
          f"PostgreSQL {version}")
    print(f"{'clients':>7} {'processes':>9} | {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} | {'CPU/call':>9} | "
          f"{'vs 1 process':>12} {'95% CI':>13}")
    print("-" * 84)
    for clients, cases in results:
        one = cases[0]
        for case in cases:
            mean, lo, hi = ratio_interval([a / b for a, b in zip(case.slice_rates, one.slice_rates)])
            print(f"{clients:>7} {case.processes:>9} | {case.rate:>8.0f} {pct(case.latencies, 0.5):>7.2f} "
                  f"{pct(case.latencies, 0.99):>7.2f} | {case.server_cpu * 1000 / max(case.calls, 1):>6.2f} ms | "
                  f"{mean:>12.2f} {lo:>6.2f}-{hi:<6.2f}")
    print("vs 1 process = calls/s over the first configuration's, per slice pair (geometric mean, 95% interval); "
          "CPU/call = the configuration's server processes' CPU time per call")


if __name__ == "__main__":
    asyncio.run(main())
