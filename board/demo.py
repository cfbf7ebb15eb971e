"""`switchboard demo`: the whole product, live, on one machine, in about a minute.

What it does, in order:

1. Binds the port (a busy port fails at once, before anything starts).
2. Starts the real server in this process (uvicorn, `board.app.create_app`): the Board at
   `/`, MCP at `/mcp`, `/metrics`, on an embedded Postgres in the demo's own data dir, migrated.
3. Creates, idempotently, a demo human (user `demo`) and one demo endpoint (agent id `demo`,
   every verb, the demo queues), and prints the sign-in URL, the user and password, the MCP
   URL, the endpoint token and a ready-to-paste MCP client configuration.
4. Runs a planner that seeds a few queues with todos over MCP, and seeds a queue again
   whenever nothing in it is pending, so a long demo keeps moving (the ingest queue gets one
   todo at a time, so that a lapsed lease there is what `claim_next` finds).
5. Runs simulated agents, each with its own MCP SDK client against the real `/mcp`. They all
   use the one demo endpoint (todos belong to an endpoint, so workers that share work share
   a credential) and tell themselves apart by claimant labels such as `demo/fixer-1/run-1`:

   - `fixer-1`, `fixer-2` (queues builds, docs): claim, heartbeat, then complete, fail (a
     retry is scheduled) or release mid-work, in a fixed rotation, with summaries and https
     or `mcp://cairn/` artifacts.
   - `reviewer-1` (triage): claims with `require_fence` and passes its `lease_token` on every
     call; sometimes pauses for input (interrupt, resume), sometimes fails.
   - `flaky-1` (flaky): fails as the todo's payload scripts it; some todos succeed on their
     retry, others reach their last attempt and become dead letters.
   - `crasher-1` (ops): sometimes dies mid-work (stops heartbeating on a 3 s lease), so the
     reaper closes the attempt `reaped`; it restarts as the next run and reports what the
     reaper did. Three deaths on one todo dead-letter it.
   - `hung-1` (ingest): claims fenced on a 3 s lease and sometimes hangs; `rescuer-1` watches
     the queue and takes the lapsed lease over with `claim_next` the moment it lapses (the
     hung attempt closes `lease_expired`). When `hung-1` wakes up, its stale lease token is
     refused with `conflict`: the fence at work.

   Within the first minute the Board shows attempts with every outcome: completed, failed,
   released, reaped and lease_expired, and dead letters.
6. Prints one line per agent action: the time, the agent, the action, the queue, the todo's
   title and what came of it. It never prints a lease token, a summary or an artifact (the
   endpoint token is printed once, in the banner, because it is what you paste into a client).

Stopping: Ctrl-C (SIGINT), SIGTERM or `--duration SECONDS` stop the agents (each releases
what it holds, "released on shutdown"; agents that are playing dead leave theirs to the
reaper), then the server, then the embedded Postgres, and the command exits 0. A second
Ctrl-C only cancels the agents' goodbyes: Postgres is always stopped cleanly.

Where the data lives: `<data dir>/demo`, where the data dir is `SWITCHBOARD_DATA_DIR` or
`./.switchboard` (so `./.switchboard/demo` by default). The demo never uses the database
`switchboard serve` uses: `DATABASE_URL` is ignored and the embedded Postgres lives in
`<data dir>/demo/pgdata`. `<data dir>/demo/demo.json` (mode 0600) keeps the demo password, the
endpoint token, the session secret and the planner's seeding rounds, so a second run signs in
with the same password, reuses the token and starts from the same data. Delete the directory
to start over.

Settings the demo overrides so that things happen within a minute (environment values for
these are ignored here): reaper every 1 s, retry scheduler every 0.5 s, retry backoff 2 s
growing to at most 10 s, default lease 10 s, no notify hooks (demo todos are not real work).
The session secret is `SWITCHBOARD_SECRET_KEY` when set, else a random one kept in demo.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import secrets
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, AsyncIterator

from board.config import Settings

log = logging.getLogger("switchboard.demo")

DEMO_USER = "demo"
DEMO_AGENT_ID = "demo"
STATE_FILE = "demo.json"
SHUTDOWN_SUMMARY = "Demo stopping: released unfinished for the next worker."


@dataclass(frozen=True)
class Seed:
    title: str
    payload: dict = field(default_factory=dict)
    max_attempts: int = 5


# The queues the planner keeps stocked, in the order they are seeded. A queue is topped up
# with its whole list when nothing in it is pending, except the TRICKLE queues, which get one
# todo at a time and only when nothing in them is open: the rescuer's claim_next must find a
# lapsed lease there, not a pending todo.
QUEUES: dict[str, tuple[Seed, ...]] = {
    "builds": (
        Seed("Fix the flaky login test", {"repo": "web", "test": "test_login_redirect"}),
        Seed("Bump the base image to Debian 12", {"image": "python:3.11-bookworm"}),
        Seed("Cache wheels in CI", {"pipeline": "ci.yml"}),
        Seed("Pin the Node toolchain", {"node": "20.x"}),
        Seed("Speed up the lint job", {"job": "lint"}),
    ),
    "docs": (
        Seed("Document the retry backoff", {"page": "operations"}),
        Seed("Explain lease tokens in the guide", {"page": "agents"}),
        Seed("Fix broken links in the API reference", {"page": "api"}),
        Seed("Write the upgrade notes for 0.2", {"page": "changelog"}),
    ),
    "triage": (
        Seed("Triage: checkout page returns 500", {"ticket": 4211}),
        Seed("Triage: search is slow on mobile", {"ticket": 4217}),
        Seed("Triage: CSV export drops accents", {"ticket": 4230}),
        Seed("Triage: duplicate welcome emails", {"ticket": 4233}),
    ),
    "flaky": (
        Seed("Run the nightly integration suite", {"fails": "always"}, max_attempts=2),
        Seed("Rebuild the search index", {"fails": 1}, max_attempts=3),
        Seed("Sync billing with the ledger", {"fails": "always"}, max_attempts=2),
        Seed("Refresh the currency rates", {"fails": 1}, max_attempts=3),
    ),
    "ops": (
        Seed("Rotate the staging TLS certificate", {"host": "staging"}, max_attempts=3),
        Seed("Vacuum the analytics database", {"db": "analytics"}, max_attempts=3),
        Seed("Restart the stuck queue consumer", {"service": "consumer"}, max_attempts=3),
    ),
    "ingest": (
        Seed("Import the March sales export", {"file": "sales-2025-03.csv"}),
        Seed("Ingest yesterday's webhook backlog", {"source": "webhooks"}),
        Seed("Parse the vendor price list", {"file": "vendor-prices.xlsx"}),
    ),
}

# What the agents write when they close an attempt. Stored with the attempt and shown on the
# Board; never printed on the terminal.
SUMMARIES = {
    "complete": (
        "Done: the change is in and three clean runs back it up.",
        "Fixed at the root; left a note on why the old approach failed.",
        "Finished. Reviewed the edge cases listed in the payload.",
    ),
    "fail": (
        "Tests still red after the fix; the failure looks environmental.",
        "The upstream service timed out twice; giving this attempt up.",
        "Could not reproduce locally; failing so it is retried later.",
    ),
    "release": (
        "Needs a maintainer decision on the approach; handing it back.",
        "Blocked on credentials I do not have; released for someone who does.",
    ),
    "flaky": (
        "Integration suite timed out at the database step.",
        "Two shards failed with connection resets; retrying is the best bet.",
    ),
    "rescue": (
        "Took over from a worker that stopped heartbeating; finished the import.",
    ),
}

TRICKLE = frozenset({"ingest"})

ARTIFACTS = (
    "https://ci.example.com/builds/{n}/log",
    "https://github.com/example/app/pull/{n}",
    "mcp://cairn/note-{n}",
)


def demo_data_dir(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("SWITCHBOARD_DATA_DIR") or ".switchboard") / "demo"


def demo_settings(settings: Settings, data_dir: Path, secret_key: str) -> Settings:
    return settings.with_(
        database_url=None, data_dir=data_dir, secret_key=settings.secret_key or secret_key,
        reaper_interval_seconds=1.0, retry_interval_seconds=0.5, retry_base_seconds=2.0,
        retry_max_seconds=10.0, lease_seconds=10.0, hook_urls=(), hook_secret=None,
    )


# -- the demo's state file -----------------------------------------------------------------

@dataclass
class DemoState:
    path: Path
    data: dict

    @classmethod
    def load(cls, path: Path) -> "DemoState":
        data: dict = {}
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                data = {}
        state = cls(path, data if isinstance(data, dict) else {})
        state.data.setdefault("secret_key", secrets.token_urlsafe(32))
        state.data.setdefault("seed_rounds", {})
        return state

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, indent=2)
        os.replace(tmp, self.path)


# -- output ----------------------------------------------------------------------------------

_OUT_CLOSED = False


def _out(text: str = "") -> None:
    """Print a demo line. When whoever reads our output has gone (`switchboard demo | head`),
    stop printing instead of failing: the demo must still stop cleanly, Postgres included."""
    global _OUT_CLOSED
    if _OUT_CLOSED:
        return
    try:
        print(text, flush=True)
    except (BrokenPipeError, ValueError):
        _OUT_CLOSED = True
        try:  # the interpreter flushes stdout again at exit; point it somewhere harmless
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass


def _short(title: str, limit: int = 44) -> str:
    return title if len(title) <= limit else title[: limit - 1] + "…"


def _when(iso: str | None) -> float | None:
    """A server timestamp as Unix seconds (server and demo share a clock)."""
    return datetime.fromisoformat(iso).timestamp() if iso else None


class ToolError(Exception):
    def __init__(self, tool: str, code: str, message: str):
        super().__init__(f"{tool}: {code}: {message}")
        self.tool, self.code, self.message = tool, code, message


class Stopping(Exception):
    """The demo is stopping: unwind the agent's current step."""


@dataclass
class Held:
    todo: dict
    attempt_seq: int
    lease_token: str | None = None  # never printed
    interrupted: bool = False

    @property
    def id(self) -> str:
        return self.todo["id"]


# -- the simulated agents ----------------------------------------------------------------------

class SimAgent:
    """One simulated worker: its own MCP SDK client on the demo endpoint, a claimant label
    demo/<name>/run-<n>, and a step() that plays its role once."""

    queues: tuple[str, ...] = ()
    lease: float = 8.0
    fenced: bool = False
    plan: tuple[str, ...] = ("complete",)

    def __init__(self, demo: "Demo", name: str):
        self.demo = demo
        self.name = name
        self.run = 1
        self.held: Held | None = None
        self.client = None
        self._plan = itertools.cycle(self.plan)
        self._queue_cycle = itertools.cycle(self.queues)
        self._idle = False
        self.leaving = False  # saying goodbye: calls still go out while the demo stops
        self.rng = random.Random(f"{name}")

    @property
    def claimant(self) -> str:
        return f"demo/{self.name}/run-{self.run}"

    # output

    def say(self, action: str, todo: dict | None = None, detail: str = "") -> None:
        queue = todo["queue"] if todo else ""
        title = f'"{_short(todo["title"])}"' if todo else ""
        line = f"{time.strftime('%H:%M:%S')}  {self.name:<10} {action:<11} {queue:<7} {title}"
        if detail:
            line += f"  {detail}"
        _out(line.rstrip())

    # plumbing

    async def pause(self, seconds: float) -> None:
        if self.demo.stop.is_set():
            raise Stopping()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.demo.stop.wait(), timeout=max(0.0, seconds))
        if self.demo.stop.is_set():
            raise Stopping()

    async def call(self, tool: str, **args: Any) -> dict:
        if self.demo.stop.is_set() and not self.leaving:
            raise Stopping()
        result = await self.client.call_tool(tool, {k: v for k, v in args.items() if v is not None})
        if result.is_error:  # the error body is the JSON text; errors carry no structured content
            try:
                err = json.loads(result.content[0].text).get("error") or {}
            except (IndexError, AttributeError, ValueError):
                err = {}
            raise ToolError(tool, err.get("code", "error"), err.get("message", ""))
        return result.structured_content or {}

    def _fence(self, held: Held | None = None) -> dict:
        held = held or self.held
        return {"lease_token": held.lease_token} if held and held.lease_token else {}

    def artifact(self) -> str:
        return self.rng.choice(ARTIFACTS).format(n=self.rng.randint(1000, 9999))

    # the verbs

    async def claim_next(self, queue: str, *, lease: float | None = None, fenced: bool | None = None) -> Held | None:
        fenced = self.fenced if fenced is None else fenced
        r = await self.call("claim_next", queue=queue, claimant=self.claimant, lease_seconds=lease or self.lease,
                            require_fence=True if fenced else None)
        todo = r.get("todo")
        if todo is None:
            if not self._idle:
                self.say("idle", None, f"nothing to claim in {queue}")
            self._idle = True
            return None
        self._idle = False
        self.held = Held(todo, r["attempt_seq"], r.get("lease_token"))
        prior = r.get("prior_attempts") or []
        took_over = bool(prior) and prior[0].get("outcome") == "lease_expired" and \
            prior[0].get("seq") == r["attempt_seq"] - 1
        detail = f"attempt {todo['attempt']} of {todo['max_attempts']}"
        if fenced:
            detail += ", fenced"
        if took_over:
            detail += "; its lapsed attempt closed lease_expired"
        elif prior:
            last = prior[0]
            detail += f"; last attempt {last['outcome']}"
        self.say("took over" if took_over else "claimed", todo, detail)
        return self.held

    async def heartbeat(self) -> None:
        held = self.held
        r = await self.call("heartbeat", id=held.id, lease_seconds=self.lease, **self._fence())
        left = (_when(r.get("lease_expires_at")) or time.time()) - time.time()
        self.say("heartbeat", held.todo, f"lease {max(0, round(left))} s")

    async def work(self, seconds: float, beats: int = 1) -> None:
        """Work for about `seconds`, heartbeating `beats` times along the way."""
        beats = max(1, beats)
        for _ in range(beats):
            await self.pause(seconds / beats)
            await self.heartbeat()

    async def complete(self, summary_kind: str = "complete") -> None:
        held = self.held
        await self.call("complete", id=held.id, summary=self.rng.choice(SUMMARIES[summary_kind]),
                        artifact=self.artifact(), result={"ok": True, "by": self.claimant},
                        **self._fence())
        self.held = None
        self.say("completed", held.todo, "done")

    async def fail(self, summary_kind: str = "fail") -> None:
        held = self.held
        r = await self.call("fail", id=held.id, summary=self.rng.choice(SUMMARIES[summary_kind]),
                            artifact=self.artifact(), result={"ok": False}, **self._fence())
        self.held = None
        closed = r.get("closed_attempt") or {}
        if closed.get("disposition") == "dead_lettered":
            detail = f"dead letter (attempt {closed.get('attempt')} of {r['max_attempts']})"
        else:
            wait = (_when(r.get("next_retry_at")) or time.time()) - time.time()
            detail = f"retry scheduled in {max(0.0, wait):.0f} s"
        self.say("failed", held.todo, detail)

    async def release(self, summary: str, detail: str) -> None:
        held = self.held
        await self.call("release", id=held.id, summary=summary, artifact=self.artifact(), **self._fence())
        self.held = None
        self.say("released", held.todo, detail)

    # the loop

    async def step(self) -> None:
        raise NotImplementedError

    async def idle(self) -> None:
        await self.pause(1.0)

    async def main(self) -> None:
        async with self.demo.connect() as client:
            self.client = client
            try:
                while True:
                    try:
                        await self.step()
                    except ToolError as e:
                        self.say("error", self.held.todo if self.held else None, f"{e.tool}: {e.code}")
                        await self.pause(2.0 if e.code == "rate_limited" else 1.0)
                    except (Stopping, asyncio.CancelledError):
                        raise
                    except Exception as e:  # the server is away, a transport error: try again
                        if self.demo.stop.is_set():
                            raise Stopping() from None
                        self.say("error", None, f"{type(e).__name__}; retrying")
                        await self.pause(2.0)
            except Stopping:
                await self.goodbye()

    async def goodbye(self) -> None:
        """Release on shutdown: what this agent holds goes back to pending."""
        held = self.held
        if held is None:
            return
        self.leaving = True
        try:
            if held.interrupted:
                await self.call("resume", id=held.id, **self._fence())
            await self.release(SHUTDOWN_SUMMARY, "on shutdown: back to pending")
        except Exception as e:
            self.say("error", held.todo, f"release on shutdown: {getattr(e, 'code', type(e).__name__)}")


class Fixer(SimAgent):
    queues = ("builds", "docs")
    lease = 8.0

    def __init__(self, demo: "Demo", name: str, plan: tuple[str, ...]):
        self.plan = plan
        super().__init__(demo, name)

    async def step(self) -> None:
        queue = next(self._queue_cycle)
        if await self.claim_next(queue) is None:
            return await self.idle()
        what = next(self._plan)
        if what == "release":
            await self.work(self.rng.uniform(1.5, 2.5))
            await self.release(self.rng.choice(SUMMARIES["release"]), "mid-work: back to pending")
        elif what == "fail":
            await self.work(self.rng.uniform(1.5, 3.0))
            await self.fail()
        else:
            await self.work(self.rng.uniform(2.0, 4.0), beats=2)
            await self.complete()
        await self.pause(0.3)


class Reviewer(SimAgent):
    """Claims fenced, and passes its lease_token on every holder call."""

    queues = ("triage",)
    lease = 8.0
    fenced = True
    plan = ("complete", "ask", "complete", "fail")

    async def step(self) -> None:
        if await self.claim_next("triage") is None:
            return await self.idle()
        what = next(self._plan)
        if what == "ask":
            await self.work(1.0)
            held = self.held
            await self.call("interrupt", id=held.id, state="input_required", **self._fence())
            held.interrupted = True
            self.say("interrupt", held.todo, "waiting for input; the attempt stays open")
            await self.pause(2.5)
            await self.call("resume", id=held.id, lease_seconds=self.lease, **self._fence())
            held.interrupted = False
            self.say("resumed", held.todo, "input arrived")
            await self.work(1.5)
            await self.complete()
        elif what == "fail":
            await self.work(2.0)
            await self.fail()
        else:
            await self.work(self.rng.uniform(2.0, 3.5), beats=2)
            await self.complete()
        await self.pause(0.3)


class Flaky(SimAgent):
    """Fails as the todo's payload says: `fails: N` fails the first N attempts, "always" every one."""

    queues = ("flaky",)
    lease = 6.0

    async def step(self) -> None:
        held = await self.claim_next("flaky")
        if held is None:
            return await self.idle()
        fails = (held.todo.get("payload") or {}).get("fails", 0)
        await self.work(self.rng.uniform(1.0, 2.0))
        if fails == "always" or (isinstance(fails, int) and held.todo["attempt"] <= fails):
            await self.fail("flaky")
        else:
            await self.complete()
        await self.pause(0.3)


class Crasher(SimAgent):
    """Sometimes dies mid-work: stops heartbeating on a short lease. The reaper closes the
    attempt reaped; the agent restarts as the next run and looks up what happened."""

    queues = ("ops",)
    lease = 3.0
    plan = ("die", "complete", "die", "die", "die", "complete")

    async def step(self) -> None:
        if await self.claim_next("ops") is None:
            return await self.idle()
        if next(self._plan) != "die":
            await self.work(2.0, beats=2)
            await self.complete()
            await self.pause(0.5)
            return
        await self.work(1.0)
        dead, self.held = self.held, None  # from here on nobody holds it: no release, ever
        self.say("died", dead.todo, f"stopped heartbeating; its {self.lease:g} s lease will lapse")
        await self.pause(self.lease + 2.5)  # the lease lapses and the reaper (every 1 s) closes it
        self.run += 1
        todo = await self.call("get_todo", id=dead.id, attempts_limit=10)
        mine = next((a for a in todo.get("attempts", []) if a.get("seq") == dead.attempt_seq), None)
        if mine and mine.get("outcome"):
            detail = f"now run {self.run}; its last attempt was {mine['outcome']}, todo {mine['disposition']}"
        else:
            detail = f"now run {self.run}; its last attempt is still open"
        self.say("restarted", todo, detail)


class Hung(SimAgent):
    """Claims fenced on a short lease and sometimes hangs. When it wakes up, the lease has
    been taken over (or reaped) and its stale lease token is refused."""

    queues = ("ingest",)
    lease = 3.0
    fenced = True
    plan = ("hang", "hang", "complete")

    async def step(self) -> None:
        if await self.claim_next("ingest") is None:
            return await self.idle()
        if next(self._plan) != "hang":
            await self.work(2.0, beats=2)
            await self.complete()
            await self.pause(0.5)
            return
        await self.work(1.0)
        stale, self.held = self.held, None
        self.say("hung", stale.todo, "stuck on a network call: no more heartbeats")
        await self.pause(self.lease + 2.0)
        try:
            await self.call("complete", id=stale.id, summary=self.rng.choice(SUMMARIES["complete"]),
                            artifact=self.artifact(), **self._fence(stale))
            self.say("completed", stale.todo, "done (its lease was never taken)")
        except ToolError as e:
            self.say("woke up", stale.todo, f"its stale lease token was refused ({e.code})")
        self.run += 1
        await self.pause(0.5)


class Rescuer(SimAgent):
    """Watches the ingest queue and takes over a lease with claim_next the moment it lapses."""

    queues = ("ingest",)
    lease = 8.0

    async def step(self) -> None:
        r = await self.call("list_todos", queue="ingest", state="claimed", limit=50)
        expiries = [_when(t.get("lease_expires_at")) for t in r.get("todos", [])]
        expiries = [e for e in expiries if e is not None]
        if not expiries:
            return await self.pause(0.5)
        wait = min(expiries) - time.time()
        if wait > 0.5:
            return await self.pause(min(wait - 0.3, 1.0))
        await self.pause(max(0.0, wait) + 0.05)
        if await self.claim_next("ingest") is None:
            return
        await self.work(2.0, beats=2)
        await self.complete("rescue")
        await self.pause(0.3)


class Planner(SimAgent):
    """Keeps the queues stocked: adds a round of todos to a queue with nothing pending."""

    def __init__(self, demo: "Demo", name: str):
        super().__init__(demo, name)
        self.seeded = asyncio.Event()

    async def step(self) -> None:
        for queue, seeds in QUEUES.items():
            if queue in TRICKLE:
                if not await self.has(queue, "pending", "claimed", "input_required", "auth_required"):
                    await self.trickle(queue, seeds)
            elif not await self.has(queue, "pending"):
                await self.seed(queue, seeds)
        self.seeded.set()
        await self.pause(1.0)

    async def has(self, queue: str, *states: str) -> bool:
        for state in states:
            if (await self.call("list_todos", queue=queue, state=state, limit=1)).get("todos"):
                return True
        return False

    async def add(self, queue: str, seed: Seed, n: int) -> dict:
        title = seed.title if n == 1 else f"{seed.title} (round {n})"
        return await self.call("add_todo", queue=queue, title=title, payload=seed.payload,
                               max_attempts=seed.max_attempts)

    async def seed(self, queue: str, seeds: tuple[Seed, ...]) -> None:
        rounds = self.demo.state.data["seed_rounds"]
        n = int(rounds.get(queue, 0)) + 1
        for s in seeds:
            await self.add(queue, s, n)
        rounds[queue] = n
        self.demo.state.save()
        line = f"{time.strftime('%H:%M:%S')}  {self.name:<10} {'added':<11} {queue:<7} {len(seeds)} todos"
        _out(line + (f" (round {n})" if n > 1 else ""))

    async def trickle(self, queue: str, seeds: tuple[Seed, ...]) -> None:
        counts = self.demo.state.data.setdefault("trickled", {})
        i = int(counts.get(queue, 0))
        todo = await self.add(queue, seeds[i % len(seeds)], i // len(seeds) + 1)
        counts[queue] = i + 1
        self.demo.state.save()
        self.say("added", todo)


# -- the demo ----------------------------------------------------------------------------------

class _Server:
    """uvicorn's Server without its own signal handling: the demo owns SIGINT and SIGTERM,
    and stops the agents before the server."""

    def __new__(cls, config):
        import uvicorn

        class QuietServer(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):
                yield

        return QuietServer(config)


@dataclass
class Credentials:
    username: str
    password: str
    token: str


class Demo:
    def __init__(self, settings: Settings, *, host: str, port: int, duration: float | None):
        self.data_dir = demo_data_dir().resolve()
        self.state = DemoState.load(self.data_dir / STATE_FILE)
        self.settings = demo_settings(settings, self.data_dir, self.state.data["secret_key"])
        self.ignored_database_url = bool(settings.database_url)
        self.host, self.port, self.duration = host, port, duration
        public_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        if ":" in public_host:
            public_host = f"[{public_host}]"
        self.base_url = f"http://{public_host}:{port}"
        self.local_url = f"http://127.0.0.1:{port}" if host in ("0.0.0.0", "127.0.0.1", "") else self.base_url
        self.stop = asyncio.Event()
        self.signals = 0
        self.tasks: list[asyncio.Task] = []
        self.token: str | None = None

    # signals

    def _on_signal(self, signum: int) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            _out(f"\n{name}: stopping the agents, then the server and Postgres ...")
            self.stop.set()
        else:
            _out(f"{name} again: skipping the agents' goodbyes; Postgres still stops cleanly ...")
            for task in self.tasks:
                task.cancel()

    def _on_duration(self) -> None:
        if not self.stop.is_set():
            _out(f"\n--duration {self.duration:g} s is up: stopping the agents, then the server and Postgres ...")
            self.stop.set()

    # MCP

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(15.0, read=30.0)) as http:
            async with Client(streamable_http_client(self.local_url + "/mcp", http_client=http)) as client:
                yield client

    # the human and the endpoint

    async def ensure_credentials(self, store) -> Credentials:
        from board.auth import hash_password, verify_password
        from board.store import VERBS

        data = self.state.data
        username = data.get("username") or DEMO_USER
        password = data.get("password") or secrets.token_urlsafe(12)
        user = await store.user_by_name(username)
        if user is not None:
            ok = await asyncio.to_thread(verify_password, user["password_hash"], password)
            if not ok:  # the state file was lost or edited: make a fresh demo user
                username, password = f"{DEMO_USER}-{secrets.token_hex(2)}", secrets.token_urlsafe(12)
                user = None
        if user is None:
            user = await store.user_insert(username, await asyncio.to_thread(hash_password, password))
        token = data.get("token")
        agent = await store.endpoint_authenticate(token) if token else None
        if agent is None or agent.user_id != user["id"] or not set(QUEUES) <= set(agent.queues):
            _, token = await store.endpoint_vend(user["id"], name="demo agents", agent_id=DEMO_AGENT_ID,
                                                 queues=list(QUEUES), scope=list(VERBS))
        data.update(username=username, password=password, token=token)
        self.state.save()
        return Credentials(username, password, token)

    def banner(self, creds: Credentials) -> None:
        from board.web_context import client_snippet

        mcp_url = f"{self.base_url}/mcp"
        snippet = client_snippet(mcp_url, creds.token, "switchboard-demo")
        _out()
        _out("Switchboard demo is running.")
        _out()
        _out(f"  Board     {self.base_url}/login")
        _out(f"  user      {creds.username}")
        _out(f"  password  {creds.password}")
        _out()
        _out(f"  MCP       {mcp_url}")
        _out(f"  token     {creds.token}")
        _out("  MCP client configuration (paste into your client's MCP settings):")
        for line in snippet.splitlines():
            _out("    " + line)
        _out()
        _out(f"  data      {self.data_dir}  (a second run reuses it; delete it to start over)")
        stop = "Ctrl-C stops it" if self.duration is None else f"stops in {self.duration:g} s, or on Ctrl-C"
        _out(f"  agents    fixer-1, fixer-2, reviewer-1, flaky-1, crasher-1, hung-1, rescuer-1; {stop}.")
        _out()

    # running

    async def run_agents(self) -> None:
        planner = Planner(self, "planner")
        planner_task = asyncio.create_task(planner.main(), name="demo-planner")
        self.tasks.append(planner_task)
        waiter = asyncio.create_task(planner.seeded.wait())
        stopper = asyncio.create_task(self.stop.wait())
        await asyncio.wait({waiter, stopper, planner_task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not self.stop.is_set() and not planner_task.done():
            agents = [
                Fixer(self, "fixer-1", ("complete", "release", "complete", "fail", "complete")),
                Fixer(self, "fixer-2", ("complete", "fail", "complete", "complete", "release")),
                Reviewer(self, "reviewer-1"),
                Flaky(self, "flaky-1"),
                Crasher(self, "crasher-1"),
                Hung(self, "hung-1"),
                Rescuer(self, "rescuer-1"),
            ]
            for agent in agents:
                self.tasks.append(asyncio.create_task(agent.main(), name=f"demo-{agent.name}"))
        await stopper
        # Every agent sees the stop, releases what it holds and disconnects.
        done, pending = await asyncio.wait(self.tasks, timeout=10)
        for task in pending:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.warning("agent %s ended with %r", task.get_name(), task.exception())

    def _bind(self) -> socket.socket | None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as e:
            sock.close()
            print(f"switchboard demo: cannot listen on {self.host}:{self.port}: {e.strerror or e}; "
                  "try another port with --port", file=sys.stderr, flush=True)
            return None
        sock.listen(128)
        sock.setblocking(False)
        return sock

    async def main(self) -> int:
        import uvicorn

        from board.app import create_app

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)
        sock = self._bind()
        if sock is None:
            return 2
        if self.ignored_database_url:
            _out("Note: the demo ignores DATABASE_URL; it always runs its own embedded Postgres.")
        fresh = not (self.data_dir / "pgdata" / "PG_VERSION").exists()
        _out(f"Starting Postgres in {self.data_dir / 'pgdata'}" + (" (first run: creating it)" if fresh else "")
             + " and the server ...")
        app = create_app(self.settings)
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False,
                                timeout_graceful_shutdown=3)
        server = _Server(config)

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            except SystemExit as e:  # uvicorn exits on a failed startup; keep it a plain error
                raise RuntimeError(f"the server did not start (exit {e.code})") from None

        serve_task = asyncio.create_task(serve(), name="demo-server")
        while not server.started:
            if serve_task.done():
                sock.close()
                try:
                    serve_task.result()
                except Exception as e:
                    print(f"switchboard demo: {e}", file=sys.stderr, flush=True)
                return 1
            await asyncio.sleep(0.05)
        if self.duration is not None:
            loop.call_later(self.duration, self._on_duration)
        try:
            if not self.stop.is_set():  # Ctrl-C while starting: straight to the shutdown
                creds = await self.ensure_credentials(app.state.runtime.store)
                self.token = creds.token
                self.banner(creds)
                await self.run_agents()
        finally:
            server.should_exit = True
            with contextlib.suppress(Exception):
                await serve_task
            sock.close()
        _out("Stopped: agents, server and Postgres. Run `switchboard demo` again to pick up where it left off.")
        return 0


def run_demo(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, duration: float | None = None) -> int:
    """Run the demo until Ctrl-C, SIGTERM or `duration` seconds; returns the exit code."""
    # The terminal is for the agents' lines: only warnings from the server and libraries.
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("switchboard", "uvicorn", "uvicorn.error", "mcp", "httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("uvicorn.access").disabled = True
    demo = Demo(settings, host=host, port=port, duration=duration)
    return asyncio.run(demo.main())
