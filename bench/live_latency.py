"""Live-update latency of the Board: from a committed transition to its fragment arriving
at every one of many concurrent SSE subscribers.

Runs by itself: it starts an embedded Postgres in a scratch data dir, starts
`python -m board serve` against it in a subprocess, signs in one human per --sessions
(subscribers share those sessions round-robin, like tabs), opens --subscribers SSE streams
on /events (--watchers of them with the todo's drawer open, so they receive the drawer
fragment with its attempts too), and then drives --transitions transitions of one todo
through the store (an agent claiming and releasing it, one at a time). For each transition
it waits until every subscriber has received the `todo` fragment for it.

Latency is measured from the moment the committing store call starts (so it includes the
transaction itself, an upper bound on commit -> fragment) to the moment the fragment's
event is read by the subscriber. Prints p50 and p99 (and more), over every transition and
over all but the first (whose endpoint's owner lookup and row statements run cold), and the
time the last stream got each transition's fragment. With --processes N, N serve
processes share the database and the sessions are signed in on them in turn, so the
subscribers spread over the processes; each hears the transition through its own LISTEN
connection.

    .venv/bin/python bench/live_latency.py [--subscribers 100] [--transitions 60] [--processes 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from board.store.auth import hash_password  # noqa: E402
from board.config import Settings  # noqa: E402
from board.store.db import EmbeddedPostgres, open_pool  # noqa: E402
from board.store.store import Human, Store  # noqa: E402

PASSWORD = "bench-password-123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Tally:
    """How many streams still wait for the current transition's fragment: one event for the
    whole round, not a waiting task per stream (which would cost the client more than it
    measures)."""

    def __init__(self):
        self.expected = 0
        self.waiting = 0
        self.done = asyncio.Event()

    def start(self, expected: int, subscribers: list) -> None:
        self.expected = expected
        self.waiting = sum(1 for s in subscribers if len(s.arrivals) < expected)
        self.done.clear()
        if not self.waiting:
            self.done.set()

    def arrived(self, before: int, after: int) -> None:
        if before < self.expected <= after:
            self.waiting -= 1
            if not self.waiting:
                self.done.set()


class Subscriber(asyncio.Protocol):
    """One SSE stream; records when each `todo` event about the watched todo arrives.

    A bare HTTP/1.1 connection read in the loop's read callback, not an HTTP client library
    nor a task per stream: with 1,000 streams on the same two cores as the server, a client
    that wakes a task and parses every line costs as much CPU per transition as the server,
    and the bench would time itself. The arrival is stamped as the loop hands over the bytes;
    it only looks for the few events it needs (the server sends each event in one chunk, so
    a pattern is split only by a read)."""

    def __init__(self, n: int, client: httpx.AsyncClient, query: str, tally: Tally):
        self.n = n
        self.tally = tally
        self.client = client
        self.query = query
        self.arrivals: list[float] = []
        self.ready = asyncio.Event()
        self.unavailable = 0  # streams the server ended as unavailable (a browser would come back)
        self.task: asyncio.Task | None = None
        self._closed: asyncio.Future | None = None
        self._head = b""
        self._tail = b""
        self._patterns: tuple[bytes, ...] = ()

    async def run(self, todo_id: str) -> None:
        url = self.client.base_url
        cookie = "; ".join(f"{k}={v}" for k, v in self.client.cookies.items())
        loop = asyncio.get_running_loop()
        self._closed = loop.create_future()
        mine = b'event: todo\r\ndata: {"id":"' + todo_id.encode() + b'"'
        self._patterns = (mine, b"event: snapshot\r\n", b"event: unavailable\r\n")
        transport, _ = await loop.create_connection(lambda: self, url.host, url.port)
        try:
            transport.write(f"GET /events{self.query} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
                            f"Accept: text/event-stream\r\nCookie: {cookie}\r\n\r\n".encode())
            await self._closed
        finally:
            transport.close()

    def data_received(self, chunk: bytes) -> None:
        now = time.perf_counter()
        if self._head is not None:  # the response's head first
            self._head += chunk
            if b"\r\n\r\n" not in self._head:
                return
            head, chunk = self._head.split(b"\r\n\r\n", 1)
            self._head = None
            if not head.startswith(b"HTTP/1.1 200"):
                status = head.split(b"\r\n", 1)[0].decode()
                self._end(RuntimeError(f"/events answered {status}"))
                return
        mine, snapshot, unavailable = self._patterns
        tail = self._tail
        buf = tail + chunk

        def new(pattern: bytes) -> int:  # occurrences not wholly in the tail already seen
            return buf.count(pattern, max(0, len(tail) - len(pattern) + 1))

        if new(snapshot):
            self.ready.set()
        self.unavailable += new(unavailable)
        found = new(mine)
        if found:
            before = len(self.arrivals)
            self.arrivals.extend([now] * found)
            self.tally.arrived(before, len(self.arrivals))
        self._tail = buf[-(len(mine) - 1):]

    def connection_lost(self, exc) -> None:
        self._end(exc)

    def _end(self, exc) -> None:
        if self._closed is not None and not self._closed.done():
            if exc is None:
                self._closed.set_result(None)
            else:
                self._closed.set_exception(exc)


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sign_in(base: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=base, timeout=30)
    page = await client.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    r = await client.post("/login", data={"username": "bench", "password": PASSWORD, "csrf_token": token})
    if r.status_code != 303:
        raise RuntimeError(f"sign-in failed: {r.status_code}")
    return client


async def wait_for_server(base: str, proc: subprocess.Popen, log: Path) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=2) as client:
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError("the server exited:\n" + log.read_text()[-3000:])
            try:
                if (await client.get("/login")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the server did not come up:\n" + log.read_text()[-3000:])


async def bench(args) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / ".switchboard"))
    pg = EmbeddedPostgres(scratch / "pg")
    url = await asyncio.to_thread(pg.start)
    env = dict(os.environ, DATABASE_URL=url, SWITCHBOARD_SECRET_KEY=secrets.token_urlsafe(32),
               SWITCHBOARD_REAPER_INTERVAL_SECONDS="0")
    bases, procs, logs = [], [], []
    for k in range(args.processes):
        port = free_port()
        bases.append(f"http://127.0.0.1:{port}")
        logs.append(scratch / f"server{k}.log")
        with open(logs[-1], "w") as out:
            procs.append(subprocess.Popen([sys.executable, "-m", "board", "serve", "--host", "127.0.0.1", "--port",
                                           str(port)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
        if k == 0:  # the first migrates; the others start on the migrated database
            await wait_for_server(bases[0], procs[0], logs[0])
    clients: list[httpx.AsyncClient] = []
    subscribers: list[Subscriber] = []
    pool = None
    try:
        for base, proc, log in zip(bases, procs, logs):
            await wait_for_server(base, proc, log)
        pool = await open_pool(url, min_size=1, max_size=4)
        store = Store(pool, Settings(database_url=url))
        user = await store.user_insert("bench", hash_password(PASSWORD))
        human = Human(user["id"], user["username"])
        row, token = await store.endpoint_vend(human.user_id, name="bench", agent_id="bench-agent",
                                               queues=["bench"], scope=["add_todo", "claim", "release"])
        agent = await store.endpoint_authenticate(token)
        todo = await store.todo_add(agent, queue="bench", title="latency probe", max_attempts=1000)
        for i in range(args.filler):
            await store.todo_add(agent, queue="bench", title=f"filler {i}")

        clients = list(await asyncio.gather(*(sign_in(bases[i % len(bases)]) for i in range(args.sessions))))
        tally = Tally()
        for n in range(args.subscribers):
            query = f"?todo={todo['id']}" if n < args.watchers else ""
            subscribers.append(Subscriber(n, clients[n % len(clients)], query, tally))
        for s in subscribers:
            s.task = asyncio.create_task(s.run(todo["id"]))
        connecting = time.perf_counter()
        try:
            await asyncio.wait_for(asyncio.gather(*(s.ready.wait() for s in subscribers)),
                                   timeout=args.connect_timeout)
        except asyncio.TimeoutError:
            ready = sum(s.ready.is_set() for s in subscribers)
            ended = sum(1 for s in subscribers if s.task.done() and not s.ready.is_set())
            told = sum(1 for s in subscribers if s.unavailable)
            raise SystemExit(f"after {args.connect_timeout:g} s: {ready} streams had their snapshot, {ended} had "
                             f"ended without one ({told} told unavailable), {args.subscribers - ready - ended} "
                             "were still waiting") from None
        print(f"all {args.subscribers} streams had their snapshot {time.perf_counter() - connecting:.1f} s after "
              "connecting at once", flush=True)

        await asyncio.sleep(args.settle)
        latencies: list[list[float]] = []  # per transition
        statement: list[float] = []
        missing = 0
        cpu_before = [cpu_seconds(p.pid) for p in procs], resource.getrusage(resource.RUSAGE_SELF)
        for i in range(args.transitions):
            expected = i + 1
            tally.start(expected, subscribers)
            start = time.perf_counter()
            if i % 2 == 0:
                await store.todo_claim(agent, todo["id"], claimant=f"bench-{i}")
            else:
                await store.todo_release(agent, todo["id"], summary=f"bench release {i}")
            statement.append(time.perf_counter() - start)

            try:
                await asyncio.wait_for(tally.done.wait(), timeout=args.timeout)
            except asyncio.TimeoutError:
                pass
            latencies.append([])
            for s in subscribers:
                if len(s.arrivals) >= expected:
                    latencies[-1].append(s.arrivals[expected - 1] - start)
                else:
                    missing += 1
                    s.arrivals.extend([float("nan")] * (expected - len(s.arrivals)))

        servers_cpu = sum(cpu_seconds(p.pid) for p in procs) - sum(cpu_before[0])
        after = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = (after.ru_utime + after.ru_stime) - (cpu_before[1].ru_utime + cpu_before[1].ru_stime)
        ms = [x * 1000 for one in latencies for x in one]
        warm = [x * 1000 for one in latencies[1:] for x in one]
        last = [max(one) * 1000 for one in latencies if one]
        print(f"live_latency: {args.subscribers} concurrent SSE subscribers ({args.watchers} with the drawer open, "
              f"{args.sessions} sessions of one human) on {args.processes} process(es), {args.transitions} transitions, "
              f"{len(ms)} fragments, {missing} missing")
        print(f"  commit -> fragment latency (ms): p50 {percentile(ms, 50):.1f}  p90 {percentile(ms, 90):.1f}  "
              f"p99 {percentile(ms, 99):.1f}  max {max(ms):.1f}  mean {statistics.fmean(ms):.1f}")
        if warm:  # the first change of a stream's endpoint meets cold caches and first executions
            print(f"  after the first transition (ms): p50 {percentile(warm, 50):.1f}  p90 {percentile(warm, 90):.1f}  "
                  f"p99 {percentile(warm, 99):.1f}")
        print(f"  the last stream's fragment, per transition (ms): first {last[0]:.1f}, median of the rest "
              f"{statistics.median(last[1:] or last):.1f}, slowest of the rest {max(last[1:] or last):.1f}")
        print(f"  the committing store call itself (ms): p50 {percentile([x * 1000 for x in statement], 50):.1f}, "
              f"the first {statement[0] * 1000:.1f}")
        print(f"  CPU per transition: the server(s) {servers_cpu / args.transitions * 1000:.1f} ms "
              f"({servers_cpu / args.transitions / args.subscribers * 1e6:.0f} us a stream), this bench's "
              f"{args.subscribers} SSE clients {client_cpu / args.transitions * 1000:.1f} ms")
        return 1 if missing else 0
    finally:
        for s in subscribers:
            if s.task:
                s.task.cancel()
        await asyncio.gather(*(s.task for s in subscribers if s.task), return_exceptions=True)
        for c in clients:
            await c.aclose()
        if pool is not None:
            await pool.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        await asyncio.to_thread(pg.stop)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subscribers", type=int, default=100, help="concurrent SSE streams (default 100)")
    p.add_argument("--watchers", type=int, default=None, help="how many have the drawer open (default: half)")
    p.add_argument("--sessions", type=int, default=20, help="signed-in sessions the streams share (default 20)")
    p.add_argument("--transitions", type=int, default=60, help="transitions to time (default 60)")
    p.add_argument("--processes", type=int, default=1, help="serve processes the sessions spread over (default 1)")
    p.add_argument("--filler", type=int, default=40, help="other todos on the Board (default 40)")
    p.add_argument("--connect-timeout", type=float, default=60.0,
                   help="seconds to wait for every stream's first snapshot (default 60)")
    p.add_argument("--settle", type=float, default=0.0,
                   help="seconds to wait after the last snapshot before the first transition (default 0)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for one fragment everywhere")
    args = p.parse_args()
    if args.watchers is None:
        args.watchers = args.subscribers // 2
    args.sessions = max(1, min(args.sessions, args.subscribers))
    import uvloop  # the server's loop too: the client's share of the two cores kept small

    return uvloop.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
