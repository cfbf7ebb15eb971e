"""The MCP surface's overhead: claim_next + complete through the MCP SDK's own client over
Streamable HTTP, against the same work done in-process through the store, in one run.

For each concurrency (1, 8 and 32 by default) it runs, each on its own fresh queue with the
same backlog of pending todos:

  store    - N coroutines in this process calling Store.todo_claim_next and todo_complete
             (one pool, sized as the server's: 2 to 20 connections)
  modern   - N mcp.Client instances (2026-07-28, sessionless) calling the claim_next and
             complete tools on a real server
  legacy   - N mcp.Client(mode="legacy") sessions (2025-11-25) doing the same

The server is the real app (board.app.create_app under uvicorn) in a child process, so the
clients and the server do not share an event loop; the per-endpoint rate limiter is off
for the run. Prints calls per second, p50 and p99 latency of a single call, and the ratio
of each MCP row's throughput to the store's at the same concurrency.

    python bench/mcp_roundtrip.py                      # 3 s a case, 1/8/32 clients, both generations
    python bench/mcp_roundtrip.py --seconds 10 --clients 8 32 --generations modern

Uses DATABASE_URL when set (it needs CREATE DATABASE), else an embedded Postgres under
./.switchboard/bench. Timings are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from board import store as st  # noqa: E402
from board.config import Settings  # noqa: E402
from board.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402

PENDING_SQL = """
INSERT INTO todos (endpoint_id, queue, title, created_at)
SELECT %(ep)s, %(queue)s, 'job ' || g, now() + g * interval '1 us' FROM generate_series(1, %(n)s) g
"""


def _url(admin: str, db: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = db
    return psycopg.conninfo.make_conninfo(**info)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the server, in a child process ------------------------------------------------------

def serve(url: str, port: int) -> None:
    import logging

    import uvicorn

    # No per-call log lines in the measurement (Litestar configures the root logger at INFO).
    for name in ("switchboard", "mcp", "litestar", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)

    from board.app import create_app

    settings = Settings(database_url=url, secret_key="bench-secret-key-0123456789", rate_limit_per_second=0,
                        doorbell_heartbeat_seconds=0)
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning",
                timeout_graceful_shutdown=2)


@contextlib.contextmanager
def server_process(url: str):
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", url, str(port)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError("the server process exited during startup")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in 60 s")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


# -- the cases ---------------------------------------------------------------------------

async def new_queue(store: st.Store, url: str, user_id: int, backlog: int) -> tuple[str, str]:
    """A fresh endpoint on a fresh queue, with `backlog` pending todos."""
    queue = "b" + uuid.uuid4().hex[:10]
    row, token = await store.endpoint_vend(user_id, name=queue, agent_id="bench", queues=[queue],
                                           scope=list(st.VERBS))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(PENDING_SQL, {"ep": row["id"], "queue": queue, "n": backlog})
        await conn.execute("ANALYZE todos")
    return queue, token


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process, or of `pid` (Linux /proc), in seconds."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def summarize(latencies: list[float], calls: int, elapsed: float) -> dict:
    latencies.sort()
    return {
        "calls": calls,
        "rate": calls / elapsed if elapsed else 0.0,
        "p50": statistics.median(latencies) * 1000 if latencies else 0.0,
        "p99": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000 if latencies else 0.0,
    }


async def run_store(url: str, token: str, clients: int, seconds: float) -> dict:
    pool = await open_pool(url)  # the server's pool size
    store = st.Store(pool, Settings())
    agent = await store.endpoint_authenticate(token)
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def worker() -> int:
        n = 0
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            res = await store.todo_claim_next(agent)
            t1 = time.perf_counter()
            if res["todo"] is None:
                break
            await store.todo_complete(agent, res["todo"]["id"], result={"ok": True})
            t2 = time.perf_counter()
            latencies.extend((t1 - t0, t2 - t1))
            n += 2
        return n

    started = time.perf_counter()
    calls = sum(await asyncio.gather(*(worker() for _ in range(clients))))
    elapsed = time.perf_counter() - started
    await pool.close()
    return summarize(latencies, calls, elapsed)


async def run_mcp(endpoint: str, token: str, clients: int, seconds: float, generation: str) -> dict:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for _ in range(clients):
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60.0)))
            kwargs = {"mode": "legacy"} if generation == "legacy" else {}
            client = await stack.enter_async_context(
                Client(streamable_http_client(endpoint, http_client=http), **kwargs))
            await client.list_tools()  # what a real agent does first; also warms the output schemas
            sessions.append(client)
        stop_at = time.perf_counter() + seconds

        async def worker(client) -> int:
            n = 0
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                res = await client.call_tool("claim_next", {})
                t1 = time.perf_counter()
                todo = res.structured_content["todo"]
                if res.is_error or todo is None:
                    break
                done = await client.call_tool("complete", {"id": todo["id"], "result": {"ok": True}})
                t2 = time.perf_counter()
                if done.is_error:
                    raise RuntimeError(f"complete failed: {done.structured_content}")
                latencies.extend((t1 - t0, t2 - t1))
                n += 2
            return n

        started = time.perf_counter()
        calls = sum(await asyncio.gather(*(worker(c) for c in sessions)))
        elapsed = time.perf_counter() - started
    return summarize(latencies, calls, elapsed)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each case")
    ap.add_argument("--generations", nargs="+", choices=["modern", "legacy"], default=["modern", "legacy"])
    ap.add_argument("--backlog", type=int, default=20_000, help="pending todos each case starts with")
    args = ap.parse_args()

    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(ROOT / ".switchboard" / "bench", database="postgres")
        admin = embedded.start()
    name = f"bench_mcp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = _url(admin, name)
    rows = []
    try:
        await migrate(url)
        pool = await open_pool(url, min_size=1, max_size=2)
        store = st.Store(pool, Settings())
        user = await store.user_insert("bench", "not-a-real-hash")
        with server_process(url) as (endpoint, server_pid):
            for clients in args.clients:
                result = {}
                for variant in ["store", *args.generations]:
                    _, token = await new_queue(store, url, user["id"], args.backlog)
                    here, there = cpu_seconds(), cpu_seconds(server_pid)
                    if variant == "store":
                        r = await run_store(url, token, clients, args.seconds)
                    else:
                        r = await run_mcp(endpoint, token, clients, args.seconds, variant)
                    calls = max(r["calls"], 1)
                    r["client_cpu"] = (cpu_seconds() - here) * 1000 / calls
                    r["server_cpu"] = 0.0 if variant == "store" else (cpu_seconds(server_pid) - there) * 1000 / calls
                    result[variant] = r
                    print(f"  {variant:6} {clients:3} clients: {r['rate']:8.0f} calls/s  p50 {r['p50']:6.2f} ms  "
                          f"p99 {r['p99']:6.2f} ms", flush=True)
                rows.append((clients, result))
        await pool.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if embedded:
            embedded.stop()

    print()
    print(f"claim_next + complete, {args.seconds:g} s a case, {args.backlog:,} pending todos per case, "
          f"{os.cpu_count()} CPUs; MCP rows: SDK client -> HTTP -> server process -> Postgres")
    print(f"{'clients':>7} {'path':>7} | {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} | {'vs store':>8} | "
          f"{'client CPU':>10} {'server CPU':>10}")
    print("-" * 82)
    for clients, result in rows:
        base = result["store"]["rate"]
        for variant, r in result.items():
            ratio = r["rate"] / base if base else 0.0
            server = f"{r['server_cpu']:>7.2f} ms" if variant != "store" else f"{'-':>10}"
            print(f"{clients:>7} {variant:>7} | {r['rate']:>8.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} | {ratio:>8.2f} | "
                  f"{r['client_cpu']:>7.2f} ms {server}")
    print("vs store = the path's calls/s divided by in-process store calls/s at the same concurrency;")
    print("CPU columns = CPU time per call of this (client) process and of the server process")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        asyncio.run(main())
