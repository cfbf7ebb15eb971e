"""The MCP surface's cost per call: claim_next + complete over Streamable HTTP against the same
work done in-process through the store, and (with --against REV) against another revision's
server on the same Postgres, in one run with interleaved slices.

Cases, each on its own endpoint and queue with a backlog of pending todos:

  store         N coroutines in this process calling Store.todo_claim_next and todo_complete
                (one pool, sized as the server's)
  SERVER/GEN/CLIENT
                N clients calling the claim_next and complete tools on a real server:
                SERVER  this tree ("this") or the revision named by --against;
                GEN     modern (2026-07-28, sessionless) or legacy (2025-11-25, a session);
                CLIENT  sdk (mcp.Client, what a Python agent runs) or raw (a minimal
                        keep-alive HTTP/1.1 JSON-RPC client, so the server rather than the
                        load generator is what is measured on a small machine)

Every server is the real app (board.app.create_app) under uvicorn in a child process, with
the loop and HTTP parser its revision's board.app.serve uses, and the rate limiter off.
The run is cut into slices; each slice runs every case once, in an order that rotates, so a
slow spell of a shared machine lands on every case alike. For each case it prints calls per
second, p50 and p99 of a single call, the ratio to the in-process store, and the server's
CPU time per call; with --against, this tree's calls/s over the other revision's per
(generation, client), with a 95% interval over the slices.

    python bench/mcp_roundtrip.py                               # 1 and 8 clients, this tree
    python bench/mcp_roundtrip.py --against HEAD~3 --clients 8  # side by side with a revision

Uses DATABASE_URL when set (it needs CREATE DATABASE), else an embedded Postgres under
./.switchboard/bench. Timings are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.claim_contention import ratio_interval  # noqa: E402
from board.store import store as st  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store.db import EmbeddedPostgres, migrate, open_pool  # noqa: E402

PENDING_SQL = """
INSERT INTO todos (endpoint_id, queue, title, created_at)
SELECT %(ep)s, %(queue)s, 'job ' || g, now() + g * interval '1 us' FROM generate_series(1, %(n)s) g
"""

# The server, as a child process: `python -c SERVE ROOT URL PORT`. It imports board from
# ROOT (a git worktree for --against), and runs uvicorn the way that revision's `serve` does
# (board.app.UVICORN_LOOP and UVICORN_HTTP; a revision without them ran asyncio and h11).
SERVE = """
import logging, sys
sys.path.insert(0, sys.argv[1])
import uvicorn
from board import app
from board.config import Settings
for name in ("switchboard", "mcp", "litestar", "uvicorn"):
    logging.getLogger(name).setLevel(logging.WARNING)
settings = Settings(database_url=sys.argv[2], secret_key="bench-secret-key-0123456789",
                    rate_limit_per_second=0, doorbell_heartbeat_seconds=0)
uvicorn.run(app.create_app(settings), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning",
            loop=getattr(app, "UVICORN_LOOP", "asyncio"), http=getattr(app, "UVICORN_HTTP", "h11"),
            timeout_graceful_shutdown=2)
"""


def _url(admin: str, db: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = db
    return psycopg.conninfo.make_conninfo(**info)


@contextlib.contextmanager
def scratch_database(prefix: str):
    """A database of its own for one run, on DATABASE_URL's server (it needs CREATE
    DATABASE), else on an embedded one under ./.switchboard/bench; dropped afterwards, and
    an embedded server stopped. Yields (its URL, the server's version)."""
    embedded = None
    admin = os.environ.get("DATABASE_URL")
    if not admin:
        embedded = EmbeddedPostgres(ROOT / ".switchboard" / "bench", database="postgres")
        admin = embedded.start()
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        version = conn.execute("SHOW server_version").fetchone()[0]
    try:
        yield _url(admin, name), version
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if embedded:
            embedded.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server_process(root: Path, url: str):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(root), url, str(port)], cwd=root)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server from {root} exited during startup")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in 60 s")
            time.sleep(0.1)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def worktree(rev: str):
    """A detached git worktree of `rev`, removed afterwards."""
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.strip()
    path = ROOT / ".switchboard" / "bench-worktrees" / sha
    if path.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["git", "worktree", "add", "--detach", str(path), sha], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield sha, path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process, or of `pid` (Linux /proc), in seconds."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


# -- clients -----------------------------------------------------------------------------

class RawClient:
    """One keep-alive HTTP/1.1 connection speaking JSON-RPC to /mcp, nothing more: it builds
    request bytes by hand and reads Content-Length bodies (the server answers JSON)."""

    def __init__(self, port: int, token: str, generation: str):
        self.port, self.token, self.generation = port, token, generation
        self.session: str | None = None
        self.ids = itertools.count(1)

    async def __aenter__(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        if self.generation == "legacy":
            _, headers = await self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}}, {})
            self.session = headers["mcp-session-id"]
            await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, {})
        return self

    async def __aexit__(self, *exc):
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    async def _post(self, message: dict, extra: dict) -> tuple[dict | None, dict]:
        body = json.dumps(message, separators=(",", ":")).encode()
        headers = {"Host": f"127.0.0.1:{self.port}", "Authorization": f"Bearer {self.token}",
                   "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "Content-Length": str(len(body)), **extra}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = "2025-11-25"
        head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        got: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            got[name.strip().lower()] = value.strip()
        data = await self.reader.readexactly(int(got.get("content-length", "0")))
        if status >= 300:
            raise RuntimeError(f"HTTP {status}: {data[:200]!r}")
        return (json.loads(data) if data else None), got

    async def call_tool(self, name: str, arguments: dict) -> dict:
        params: dict = {"name": name, "arguments": arguments}
        extra = {}
        if self.generation == "modern":
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                               "io.modelcontextprotocol/clientCapabilities": {}}
            extra = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
        reply, _ = await self._post({"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call",
                                     "params": params}, extra)
        result = reply["result"]
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result['content'][0]['text']}")
        return result["structuredContent"]


class SdkClient:
    """mcp.Client over Streamable HTTP, as a Python agent runs it."""

    def __init__(self, port: int, token: str, generation: str):
        self.port, self.token, self.generation = port, token, generation

    async def __aenter__(self):
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        self.stack = contextlib.AsyncExitStack()
        http = await self.stack.enter_async_context(httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.token}"}, timeout=httpx2.Timeout(60.0)))
        kwargs = {"mode": "legacy"} if self.generation == "legacy" else {}
        self.client = await self.stack.enter_async_context(
            Client(streamable_http_client(f"http://127.0.0.1:{self.port}/mcp", http_client=http), **kwargs))
        await self.client.list_tools()  # what a real agent does first
        return self

    async def __aexit__(self, *exc):
        await self.stack.aclose()

    async def call_tool(self, name: str, arguments: dict) -> dict:
        result = await self.client.call_tool(name, arguments)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content[0].text}")
        return result.structured_content


class StoreClient:
    """The same two calls in this process, through the store: what the MCP surface adds to."""

    def __init__(self, store: st.Store, agent: st.Agent):
        self.store, self.agent = store, agent

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None

    async def call_tool(self, name: str, arguments: dict) -> dict:
        if name == "claim_next":
            return await self.store.todo_claim_next(self.agent)
        return await self.store.todo_complete(self.agent, arguments["id"], result=arguments["result"])


# -- cases -------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    server: str | None  # "this", a revision, or None for the store
    generation: str | None
    client: str | None
    token: str = ""
    calls: int = 0
    elapsed: float = 0.0
    server_cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)
    slice_rates: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed if self.elapsed else 0.0


async def run_slice(case: Case, clients: int, seconds: float, open_client) -> None:
    latencies = case.latencies

    async def worker(client) -> int:
        n = 0
        stop_at = time.perf_counter() + seconds
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            claim = await client.call_tool("claim_next", {})
            t1 = time.perf_counter()
            if claim["todo"] is None:
                raise RuntimeError(f"{case.name}: the backlog ran out; raise --backlog")
            await client.call_tool("complete", {"id": claim["todo"]["id"], "result": {"ok": True}})
            t2 = time.perf_counter()
            latencies.extend((t1 - t0, t2 - t1))
            n += 2
        return n

    async with contextlib.AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(open_client()) for _ in range(clients)]
        started = time.perf_counter()
        calls = sum(await asyncio.gather(*(worker(c) for c in opened)))
        elapsed = time.perf_counter() - started
    case.calls += calls
    case.elapsed += elapsed
    case.slice_rates.append(calls / elapsed)


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--slices", type=int, default=6, help="rounds of every case, in rotating order")
    ap.add_argument("--seconds", type=float, default=1.5, help="length of one case in one slice")
    ap.add_argument("--generations", nargs="+", choices=["modern", "legacy"], default=["modern", "legacy"])
    ap.add_argument("--client", nargs="+", choices=["sdk", "raw"], default=["raw", "sdk"], dest="kinds")
    ap.add_argument("--against", metavar="REV", help="also run REV's server (a git worktree) side by side")
    ap.add_argument("--backlog", type=int, help="pending todos per case (default: enough for 1,500 cycles/s)")
    args = ap.parse_args()
    backlog = args.backlog or int(1500 * args.slices * args.seconds) + 1000

    results: list[tuple[int, list[Case]]] = []
    with scratch_database("bench_mcp") as (url, version):
        await migrate(url)
        pool = await open_pool(url, min_size=1, max_size=4)
        store = st.Store(pool, Settings())
        user = await store.user_insert("bench", "not-a-real-hash")
        run_pool = await open_pool(url)  # the store case's pool, sized as the server's
        run_store = st.Store(run_pool, Settings())

        async def new_token() -> str:
            queue = "b" + uuid.uuid4().hex[:10]
            row, token = await store.endpoint_vend(user["id"], name=queue, agent_id="bench", queues=[queue],
                                                   scope=list(vocabulary.VERBS))
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(PENDING_SQL, {"ep": row["id"], "queue": queue, "n": backlog})
                await conn.execute("ANALYZE todos")
            return token

        async with contextlib.AsyncExitStack() as stack:
            servers: dict[str, tuple[int, int]] = {"this": stack.enter_context(server_process(ROOT, url))}
            if args.against:
                sha, path = stack.enter_context(worktree(args.against))
                servers[sha] = stack.enter_context(server_process(path, url))
            for clients in args.clients:
                cases = [Case("store", None, None, None)]
                for kind, generation, server in itertools.product(args.kinds, args.generations, servers):
                    cases.append(Case(f"{server}/{generation}/{kind}", server, generation, kind))
                for case in cases:
                    case.token = await new_token()
                for i in range(args.slices):
                    order = cases[i % len(cases):] + cases[:i % len(cases)]
                    for case in order:
                        if case.server is None:
                            agent = await run_store.endpoint_authenticate(case.token)
                            opener = lambda: StoreClient(run_store, agent)  # noqa: E731
                            await run_slice(case, clients, args.seconds, opener)
                            continue
                        port, pid = servers[case.server]
                        factory = RawClient if case.client == "raw" else SdkClient
                        opener = lambda f=factory, p=port, c=case: f(p, c.token, c.generation)  # noqa: E731
                        before = cpu_seconds(pid)
                        calls_before = case.calls
                        await run_slice(case, clients, args.seconds, opener)
                        case.server_cpu += cpu_seconds(pid) - before
                        assert case.calls > calls_before
                    print(f"  {clients} clients: slice {i + 1}/{args.slices} done", flush=True)
                results.append((clients, cases))
        await run_pool.close()
        await pool.close()

    print()
    print(f"claim_next + complete; {args.slices} slices of {args.seconds:g} s per case, interleaved; "
          f"{backlog:,} pending todos per case; {os.cpu_count()} CPUs; PostgreSQL {version}")
    print(f"{'clients':>7} {'case':<28} | {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} | {'vs store':>8} | "
          f"{'server CPU/call':>15}")
    print("-" * 92)
    for clients, cases in results:
        base = cases[0].rate
        for case in cases:
            cpu = f"{case.server_cpu * 1000 / max(case.calls, 1):>12.2f} ms" if case.server else f"{'-':>15}"
            print(f"{clients:>7} {case.name:<28} | {case.rate:>8.0f} {pct(case.latencies, 0.5):>7.2f} "
                  f"{pct(case.latencies, 0.99):>7.2f} | {case.rate / base:>8.2f} | {cpu}")
    if args.against:
        print()
        print("this tree's calls/s over the other revision's, per slice pair (geometric mean, 95% interval):")
        for clients, cases in results:
            by_name = {c.name: c for c in cases}
            for case in cases:
                if case.server != "this":
                    continue
                other = next(c for c in cases if c.server not in (None, "this") and
                             (c.generation, c.client) == (case.generation, case.client))
                mean, lo, hi = ratio_interval([a / b for a, b in zip(case.slice_rates, other.slice_rates)])
                label = f"{case.generation}/{case.client}"
                print(f"{clients:>7} clients {label:<14} {mean:5.2f}x ({lo:.2f}-{hi:.2f})  "
                      f"{by_name[case.name].rate:>6.0f} vs {other.rate:>6.0f} calls/s")
    print("vs store = calls/s over in-process store calls/s at the same concurrency; server CPU/call = "
          "the server process's CPU time per call")


if __name__ == "__main__":
    asyncio.run(main())
