"""What taking up a 2025-11-25 session on another process costs (board/mcp/sessions.py): two
serve processes on one database; each round opens a session on the first (initialize) and
then sends tools/list three ways, interleaved in rotating order:

  opener     to the process that opened the session (today's only way: affinity)
  take-up    to the other process, for the first time (it checks the signature and starts
             the session's server loop)
  taken      to the other process again, once it holds the session

Each is a new connection, as a client behind a balancer without affinity makes. It prints
p50 and p99 of each request and the ratio of each p50 to opener's.

    python bench/sessions.py --rounds 300

Uses DATABASE_URL when set (it needs CREATE DATABASE), else an embedded Postgres under
./.switchboard/bench. Timings are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mcp_roundtrip import RawClient, pct, scratch_database, server_process  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store import store as st  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.db import migrate, open_pool  # noqa: E402

TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


async def tools_list(port: int, token: str, session: str) -> float:
    """One tools/list of `session` on a new connection to `port`; returns its seconds."""
    # A new connection that joins the session (RawClient initializes only as "legacy").
    async with RawClient(port, token, "modern") as client:
        client.session = session
        started = time.perf_counter()
        await client._post(TOOLS_LIST, {})
        return time.perf_counter() - started


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    args = ap.parse_args()
    times: dict[str, list[float]] = {"opener": [], "take-up": [], "taken": []}
    with scratch_database("bench_sessions") as (url, version):
        await migrate(url)
        pool = await open_pool(url, min_size=1, max_size=2)
        store = st.Store(pool, Settings())
        user = await store.user_insert("bench", "not-a-real-hash")
        _, token = await store.endpoint_vend(user["id"], name="s", agent_id="bench", queues=["s"],
                                             scope=list(vocabulary.VERBS))
        with server_process(ROOT, url) as (first, _), server_process(ROOT, url) as (second, _):
            for i in range(args.rounds):
                async with RawClient(first, token, "legacy") as opener:
                    session = opener.session
                # take-up must come before taken; opener's place in the order rotates
                order = [("take-up", second), ("taken", second)]
                order.insert(i % 3, ("opener", first))
                for name, port in order:
                    times[name].append(await tools_list(port, token, session))
        await pool.close()
    print(f"tools/list of a 2025-11-25 session on a new connection, {args.rounds} sessions; "
          f"{os.cpu_count()} CPUs; PostgreSQL {version}")
    print(f"{'request':>8} | {'p50 ms':>7} {'p99 ms':>7} | {'p50 ratio':>9}")
    print("-" * 44)
    base = pct(times["opener"], 0.5)
    for name, values in times.items():
        print(f"{name:>8} | {pct(values, 0.5):>7.2f} {pct(values, 0.99):>7.2f} | {pct(values, 0.5) / base:>9.2f}")
    print("p50 ratio = the request's p50 over opener's")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
