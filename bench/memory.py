"""Memory one serve process spends per idle connection, with many of each held open:

  sse            a Board live-update stream (GET /events of a signed-in human), its snapshot
                 read, then idle
  mcp-session    a 2025-11-25 MCP session (initialize, notifications/initialized), no stream
  mcp-get        the same with its standalone GET stream open (a doorway: ringable)
  listen         a 2026-07-28 agent listening (subscriptions/listen for switchboard://todos,
                 the response stream held open, acknowledged), the sessionless generation's
                 idle agent

One real server (`python -m board serve`) per kind, started afresh on the one database
(so memory one kind freed is not reused by the next and under-counted); the clients are
raw asyncio connections in this process, so the client's memory is not counted. For each
kind: warm up (50 opened and closed, so what the first connection of a kind loads is not
counted), read the server's memory (PSS and RSS from /proc/PID/smaps_rollup), open N
connections of the kind, wait until every one is established and then --settle seconds,
read it again, close them, and wait for the server to let them go. Prints, per kind, the
memory before and after and the difference per connection; a table, nothing asserted.

    python bench/memory.py                       # 1,000 of each kind
    python bench/memory.py --connections 200 --kinds sse listen

Uses DATABASE_URL when set (it needs CREATE DATABASE), else an embedded Postgres under
./.switchboard/bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mcp_roundtrip import free_port, scratch_database  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store import store as st  # noqa: E402
from board.store import vocabulary  # noqa: E402
from board.store.auth import hash_password  # noqa: E402
from board.store.db import migrate, open_pool  # noqa: E402

PASSWORD = "bench-password-123"
KINDS = ("sse", "mcp-session", "mcp-get", "listen")
GOALS = {"sse": 32, "mcp-session": 64, "mcp-get": 64}  # KB per idle connection
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def memory_kb(pid: int) -> tuple[int, int]:
    """The process's (PSS, RSS) in KB."""
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    pss = int(re.search(r"^Pss:\s+(\d+) kB", text, re.M).group(1))
    rss = int(re.search(r"^Rss:\s+(\d+) kB", text, re.M).group(1))
    return pss, rss


class Conn:
    """One raw HTTP/1.1 connection to the server."""

    def __init__(self, port: int):
        self.port = port

    async def open(self) -> "Conn":
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    def send(self, method: str, path: str, headers: dict, body: bytes = b"") -> None:
        headers = {"Host": f"127.0.0.1:{self.port}", **headers}
        if body:
            headers["Content-Length"] = str(len(body))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.writer.write(head.encode() + body)

    async def head(self) -> tuple[int, dict]:
        status = int((await self.reader.readline()).split()[1])
        got = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            got[name.strip().lower()] = value.strip()
        return status, got

    async def body(self, headers: dict) -> bytes:
        return await self.reader.readexactly(int(headers.get("content-length", "0")))

    async def until(self, marker: bytes) -> None:
        """Read the (chunked) stream until marker has been seen."""
        seen = b""
        while marker not in seen:
            chunk = await self.reader.read(65536)
            if not chunk:
                raise RuntimeError("the stream ended before " + marker.decode())
            seen = (seen + chunk)[-65536:]

    def close(self) -> None:
        self.writer.close()


def mcp_headers(token: str, protocol: str, method: str, session: str | None = None) -> dict:
    out = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "MCP-Protocol-Version": protocol}
    if protocol == MODERN:
        out["Mcp-Method"] = method
    if session:
        out["Mcp-Session-Id"] = session
    return out


async def open_sse(port: int, cookie: str) -> Conn:
    c = await Conn(port).open()
    c.send("GET", "/events", {"Cookie": cookie, "Accept": "text/event-stream"})
    status, _ = await c.head()
    if status != 200:
        raise RuntimeError(f"/events answered {status}")
    await c.until(b"event: snapshot")
    return c


async def legacy_session(port: int, token: str) -> str:
    c = await Conn(port).open()
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
        c.send("POST", "/mcp", mcp_headers(token, LEGACY, "initialize"), json.dumps(init).encode())
        status, headers = await c.head()
        await c.body(headers)
        if status != 200:
            raise RuntimeError(f"initialize answered {status}")
        session = headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        c.send("POST", "/mcp", mcp_headers(token, LEGACY, "notifications/initialized", session), json.dumps(done).encode())
        status, headers = await c.head()
        await c.body(headers)
        return session
    finally:
        c.close()


async def open_mcp_session(port: int, token: str) -> str:
    return await legacy_session(port, token)


async def open_mcp_get(port: int, token: str) -> Conn:
    session = await legacy_session(port, token)
    c = await Conn(port).open()
    headers = mcp_headers(token, LEGACY, "", session)
    headers["Accept"] = "text/event-stream"
    c.send("GET", "/mcp", headers)
    status, _ = await c.head()
    if status != 200:
        raise RuntimeError(f"the session's GET stream answered {status}")
    c.session = session
    return c


async def open_listen(port: int, token: str) -> Conn:
    c = await Conn(port).open()
    message = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"resource_subscriptions": ["switchboard://todos"]},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}}
    c.send("POST", "/mcp", mcp_headers(token, MODERN, "subscriptions/listen"), json.dumps(message).encode())
    status, _ = await c.head()
    if status != 200:
        raise RuntimeError(f"subscriptions/listen answered {status}")
    await c.until(b"subscriptions/acknowledged")
    return c


async def delete_session(port: int, token: str, session: str) -> None:
    c = await Conn(port).open()
    try:
        c.send("DELETE", "/mcp", mcp_headers(token, LEGACY, "", session))
        _, headers = await c.head()
        await c.body(headers)
    finally:
        c.close()


async def open_many(kind: str, n: int, port: int, token: str, cookie: str) -> list:
    opener = {"sse": lambda: open_sse(port, cookie), "mcp-session": lambda: open_mcp_session(port, token),
              "mcp-get": lambda: open_mcp_get(port, token), "listen": lambda: open_listen(port, token)}[kind]
    gate = asyncio.Semaphore(50)  # a steady ramp, not a thundering herd: this measures idle cost

    async def one():
        async with gate:
            return await opener()

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def close_all(kind: str, held: list, port: int, token: str) -> None:
    for h in held:
        if isinstance(h, Conn):
            h.close()
    sessions = [h for h in held if isinstance(h, str)] + [h.session for h in held if hasattr(h, "session")]
    gate = asyncio.Semaphore(50)

    async def gone(session: str) -> None:
        async with gate:
            with contextlib.suppress(Exception):
                await delete_session(port, token, session)

    await asyncio.gather(*(gone(s) for s in sessions))


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def signed_in(base: str) -> str:
    """Waits for the server, signs the bench's human in; returns the session's cookie header."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as web:
        for _ in range(300):
            with contextlib.suppress(httpx.TransportError):
                if (await web.get("/login")).status_code == 200:
                    break
            await asyncio.sleep(0.1)
        page = await web.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        r = await web.post("/login", data={"username": "bench", "password": PASSWORD, "csrf_token": csrf})
        if r.status_code != 303:
            raise RuntimeError(f"sign-in failed: {r.status_code}")
        return "; ".join(f"{k}={v}" for k, v in web.cookies.items())


async def bench(args) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, args.connections * 2 + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # the server inherits it
    port = free_port()
    proc = None
    rows = []
    with scratch_database("bench_memory") as (url, _), contextlib.ExitStack() as cleanup:
        cleanup.callback(lambda: proc is not None and stop(proc))
        await migrate(url)
        pool = await open_pool(url, min_size=1, max_size=2)
        store = st.Store(pool, Settings())
        user = await store.user_insert("bench", hash_password(PASSWORD))
        _, token = await store.endpoint_vend(user["id"], name="bench", agent_id="bench", queues=["q"],
                                             scope=list(vocabulary.VERBS))
        agent = await store.endpoint_authenticate(token)
        for i in range(20):  # a Board with something on it
            await store.todo_add(agent, queue="q", title=f"todo {i}")
        await pool.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        env.update(DATABASE_URL=url, SWITCHBOARD_SECRET_KEY=secrets.token_urlsafe(32),
                   SWITCHBOARD_RATE_LIMIT_PER_SECOND="0")
        for kind in args.kinds:
            proc = subprocess.Popen([sys.executable, "-m", "board", "serve", "--host", "127.0.0.1", "--port",
                                     str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            cookie = await signed_in(f"http://127.0.0.1:{port}")
            held = await open_many(kind, 50, port, token, cookie)  # warm-up
            await close_all(kind, held, port, token)
            await asyncio.sleep(args.settle)
            before = memory_kb(proc.pid)
            started = time.monotonic()
            held = await open_many(kind, args.connections, port, token, cookie)
            opened = time.monotonic() - started
            await asyncio.sleep(args.settle)
            after = memory_kb(proc.pid)
            await close_all(kind, held, port, token)
            await asyncio.sleep(args.settle)
            released = memory_kb(proc.pid)
            rows.append((kind, before, after, released, opened))
            print(f"  {kind}: {args.connections} open in {opened:.1f} s, PSS {before[0]:,} -> {after[0]:,} KB",
                  flush=True)
            stop(proc)
            proc = None
    n = args.connections
    print()
    print(f"a fresh serve process per kind, {n:,} idle connections of the kind held open (after a warm-up of 50), "
          f"memory in KB, settled {args.settle:g} s")
    head = (f"{'kind':<12} | {'PSS before':>10} {'after':>9} | {'per conn':>8} | {'RSS per conn':>12} | "
            f"{'after close':>11} | {'goal':>5}")
    print(head)
    print("-" * len(head))
    for kind, before, after, released, _ in rows:
        goal = f"{GOALS[kind]}" if kind in GOALS else "-"
        print(f"{kind:<12} | {before[0]:>10,} {after[0]:>9,} | {(after[0] - before[0]) / n:>8.1f} | "
              f"{(after[1] - before[1]) / n:>12.1f} | {released[0]:>11,} | {goal:>5}")
    print("per conn: (after - before) / connections; goal: KB per idle connection (an SSE subscriber 32, an MCP "
          "session 64); after close: PSS once they are closed (Python keeps freed memory for reuse)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=1000, help="idle connections of each kind")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to wait before each reading")
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
