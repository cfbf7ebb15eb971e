"""The simulated agents: each its own `switchboard_worker.Worker` (the MCP SDK client every
Python agent can use) on the one demo endpoint, told apart by claimant labels such as
`demo/fixer-1/run-1`, each playing its role in a loop.

Every agent reports the outcomes it brings about to the demo (`Stage.saw`), which settles
once all of them have been shown; from then on the agents take a break between todos
(`SimAgent.rest`), so the Board changes at a pace a newcomer can follow."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from datetime import datetime
from typing import Any

from switchboard_worker import Todo, ToolError, Worker

from board.demo import banner
from board.demo.seeding import ARTIFACTS, SHUTDOWN_SUMMARY, SUMMARIES
from board.demo.stage import Stage


def when(iso: str | None) -> float | None:
    """A server timestamp as Unix seconds (server and demo share a clock)."""
    return datetime.fromisoformat(iso).timestamp() if iso else None


class Stopping(Exception):
    """The demo is stopping: unwind the agent's current step."""


class SimAgent:
    """One simulated worker: a `switchboard_worker.Worker` (its own MCP SDK client) on the demo
    endpoint, a claimant label demo/<name>/run-<n>, and a step() that plays its role once.
    The Worker heartbeats a held todo in the background, reconnects when the server is away
    and replays a fenced close; the agent decides what to do with each todo."""

    queues: tuple[str, ...] = ()
    lease: float = 8.0
    fenced: bool = False
    plan: tuple[str, ...] = ("complete",)

    def __init__(self, demo: Stage, name: str):
        self.demo = demo
        self.name = name
        self.run = 1
        self.held: Todo | None = None
        self.worker: Worker | None = None
        self._plan = itertools.cycle(self.plan)
        self._queue_cycle = itertools.cycle(self.queues)
        self._idle = False
        self.leaving = False  # saying goodbye: calls still go out while the demo stops
        self.rng = random.Random(f"{name}")
        self.usage_rng = random.Random(f"{name}/usage")  # apart, so the plan's choices stay as they were

    @property
    def claimant(self) -> str:
        return f"demo/{self.name}/run-{self.run}"

    # output

    def say(self, action: str, todo: dict | None = None, detail: str = "") -> None:
        banner.todo_action(self.name, action, todo, detail)

    def heard(self, todo: Todo, r: dict) -> None:
        """The Worker's background heartbeat went through: one line, as before."""
        left = (when(r.get("lease_expires_at")) or time.time()) - time.time()
        self.say("heartbeat", todo.data, f"lease {max(0, round(left))} s")

    # plumbing

    async def pause(self, seconds: float) -> None:
        if self.demo.stop.is_set():
            raise Stopping()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.demo.stop.wait(), timeout=max(0.0, seconds))
        if self.demo.stop.is_set():
            raise Stopping()

    async def rest(self, seconds: float) -> None:
        """Between todos (holding nothing): `seconds` while the demo fills the Board, plus a
        break once it has settled."""
        await self.pause(seconds + self.demo.breather(self.rng))

    async def call(self, tool: str, **args: Any) -> dict:
        if self.demo.stop.is_set() and not self.leaving:
            raise Stopping()
        return await self.worker.call(tool, **args)

    def artifact(self) -> str:
        return self.rng.choice(ARTIFACTS).format(n=self.rng.randint(1000, 9999))

    # the verbs

    async def claim_next(self, queue: str, *, lease: float | None = None, fenced: bool | None = None) -> Todo | None:
        if self.demo.stop.is_set():
            raise Stopping()
        fenced = self.fenced if fenced is None else fenced
        held = await self.worker.claim(queue=queue, claimant=self.claimant, lease_seconds=lease or self.lease,
                                       fenced=fenced, wait=False)
        if held is None:
            if not self._idle:
                self.say("idle", None, f"nothing to claim in {queue}")
            self._idle = True
            return None
        self._idle = False
        self.held = held
        todo, prior = held.data, held.prior_attempts
        took_over = bool(prior) and prior[0].get("outcome") == "lease_expired" and \
            prior[0].get("seq") == held.attempt_seq - 1
        detail = f"attempt {todo['attempt']} of {todo['max_attempts']}"
        if fenced:
            detail += ", fenced"
        if took_over:
            detail += "; its lapsed attempt closed lease_expired"
            self.demo.saw("lease_expired")
        elif prior:
            last = prior[0]
            detail += f"; last attempt {last['outcome']}"
        self.say("took over" if took_over else "claimed", todo, detail)
        return self.held

    async def work(self, seconds: float) -> None:
        """Work for about `seconds`; the Worker heartbeats meanwhile."""
        await self.pause(seconds)

    def usage(self) -> dict:
        """What a model-driven worker would report about its attempt (made up, plausible)."""
        tokens_in, tokens_out = self.usage_rng.randint(800, 12000), self.usage_rng.randint(50, 1500)
        return {"input_tokens": tokens_in, "output_tokens": tokens_out, "model": "demo-model-1",
                "cost_usd": round(tokens_in * 3e-6 + tokens_out * 15e-6, 6)}

    async def complete(self, summary_kind: str = "complete") -> None:
        held = self.held
        await held.complete({"ok": True, "by": self.claimant}, summary=self.rng.choice(SUMMARIES[summary_kind]),
                            artifact=self.artifact(), usage=self.usage())
        self.held = None
        self.demo.saw("completed")
        self.say("completed", held.data, "done")

    async def fail(self, summary_kind: str = "fail") -> None:
        held = self.held
        r = await held.fail({"ok": False}, summary=self.rng.choice(SUMMARIES[summary_kind]),
                            artifact=self.artifact(), usage=self.usage())
        self.held = None
        self.demo.saw("failed")
        closed = r.get("closed_attempt") or {}
        if closed.get("disposition") == "dead_lettered":
            self.demo.saw("dead_lettered")
            detail = f"dead letter (attempt {closed.get('attempt')} of {r['max_attempts']})"
        else:
            wait = (when(r.get("next_retry_at")) or time.time()) - time.time()
            detail = f"retry scheduled in {max(0.0, wait):.0f} s"
        self.say("failed", held.data, detail)

    async def release(self, summary: str, detail: str) -> None:
        held = self.held
        await held.release(summary=summary, artifact=self.artifact())
        self.held = None
        if not self.leaving:
            self.demo.saw("released")
        self.say("released", held.data, detail)

    # the loop

    async def step(self) -> None:
        raise NotImplementedError

    async def idle(self) -> None:
        await self.pause(1.0)

    async def main(self) -> None:
        async with Worker(self.demo.local_url, self.demo.token, lease_seconds=self.lease, fenced=self.fenced,
                          shutdown_summary=SHUTDOWN_SUMMARY, on_heartbeat=self.heard) as worker:
            self.worker = worker
            try:
                while True:
                    try:
                        await self.step()
                    except ToolError as e:
                        self.say("error", self.held.data if self.held else None, f"{e.tool}: {e.code}")
                        if self.held is not None and not self.held.open:
                            self.held = None  # the lease is gone (conflict, not_found): nothing to hold
                        await self.pause(1.0)
                    except (Stopping, asyncio.CancelledError):
                        raise
                    except Exception as e:  # anything else: say so and go on
                        if self.demo.stop.is_set():
                            raise Stopping() from None
                        self.say("error", None, f"{type(e).__name__}; retrying")
                        await self.pause(2.0)
            except Stopping:
                await self.goodbye()

    async def goodbye(self) -> None:
        """Release on shutdown: what this agent holds goes back to pending."""
        held = self.held
        if held is None or not held.open:
            return
        self.leaving = True
        try:
            await self.release(SHUTDOWN_SUMMARY, "on shutdown: back to pending")
        except Exception as e:
            self.say("error", held.data, f"release on shutdown: {getattr(e, 'code', type(e).__name__)}")


class Fixer(SimAgent):
    """Claims, heartbeats, then completes, fails (a retry is scheduled) or releases mid-work,
    in a fixed rotation."""

    queues = ("builds", "docs")
    lease = 8.0

    def __init__(self, demo: Stage, name: str, plan: tuple[str, ...]):
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
            await self.work(self.rng.uniform(2.0, 4.0))
            await self.complete()
        await self.rest(0.3)


# How long the reviewer waits for a person to answer its question once the demo has settled.
ASK_WAIT_SECONDS = 45.0


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
            self.say("asks", held.data, "merge or hold? (answer in the todo's drawer on the Board)")
            # Waits for a person only once the demo has settled; before, it goes on at once.
            answers = await held.ask("Merge this change as it is?", choices=["merge", "hold"],
                                     timeout=ASK_WAIT_SECONDS if self.demo.settled else 2.5)
            if answers:
                self.say("resumed", held.data, f"{answers[-1]['who']} answered {answers[-1]['text'][:40]!r}")
            else:
                self.say("resumed", held.data, "no answer in time; going on without one")
            await self.work(1.5)
            await self.complete()
        elif what == "fail":
            await self.work(2.0)
            await self.fail()
        else:
            await self.work(self.rng.uniform(2.0, 3.5))
            await self.complete()
        await self.rest(0.3)


class Flaky(SimAgent):
    """Fails as the todo's payload says: `fails: N` fails the first N attempts, "always" every one."""

    queues = ("flaky",)
    lease = 6.0

    async def step(self) -> None:
        held = await self.claim_next("flaky")
        if held is None:
            return await self.idle()
        fails = (held.payload or {}).get("fails", 0)
        await self.work(self.rng.uniform(1.0, 2.0))
        if fails == "always" or (isinstance(fails, int) and held.attempt <= fails):
            await self.fail("flaky")
        else:
            await self.complete()
        await self.rest(0.3)


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
            await self.work(2.0)
            await self.complete()
            await self.rest(0.5)
            return
        await self.work(1.0)
        # A working note before it dies: the next claimer reads it in prior_attempts.
        await self.held.note(f"run {self.run}: trying the slow path; the cache looks stale")
        dead, self.held = self.held, None  # from here on nobody holds it: no release, ever
        dead.abandon()  # no more heartbeats: the lease lapses
        self.say("died", dead.data, f"stopped heartbeating; its {self.lease:g} s lease will lapse")
        await self.pause(self.lease + 2.5)  # the lease lapses and the reaper (every 1 s) closes it
        self.run += 1
        todo = await self.call("get_todo", id=dead.id, attempts_limit=10)
        mine = next((a for a in todo.get("attempts", []) if a.get("seq") == dead.attempt_seq), None)
        if mine and mine.get("outcome"):
            self.demo.saw(mine["outcome"])
            if mine.get("disposition") == "dead_lettered":
                self.demo.saw("dead_lettered")
            detail = f"now run {self.run}; its last attempt was {mine['outcome']}, todo {mine['disposition']}"
        else:
            detail = f"now run {self.run}; its last attempt is still open"
        self.say("restarted", todo, detail)
        await self.rest(0.0)


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
            await self.work(2.0)
            await self.complete()
            await self.rest(0.5)
            return
        await self.work(1.0)
        stale, self.held = self.held, None
        stale.abandon()  # no more heartbeats while it hangs
        self.say("hung", stale.data, "stuck on a network call: no more heartbeats")
        await self.pause(self.lease + 2.0)
        try:
            await stale.complete(summary=self.rng.choice(SUMMARIES["complete"]), artifact=self.artifact())
            self.demo.saw("completed")
            self.say("completed", stale.data, "done (its lease was never taken)")
        except ToolError as e:
            self.say("woke up", stale.data, f"its stale lease token was refused ({e.code})")
        self.run += 1
        await self.rest(0.5)


class Rescuer(SimAgent):
    """Watches the ingest queue and takes over a lease with claim_next the moment it lapses."""

    queues = ("ingest",)
    lease = 8.0

    async def step(self) -> None:
        r = await self.call("list_todos", queue="ingest", state="claimed", limit=50)
        expiries = [when(t.get("lease_expires_at")) for t in r.get("todos", [])]
        expiries = [e for e in expiries if e is not None]
        if not expiries:
            return await self.pause(0.5)
        wait = min(expiries) - time.time()
        if wait > 0.5:
            return await self.pause(min(wait - 0.3, 1.0))
        await self.pause(max(0.0, wait) + 0.05)
        if await self.claim_next("ingest") is None:
            return
        await self.work(2.0)
        await self.complete("rescue")
        await self.pause(0.3)  # no break: it must be watching when hung-1 next hangs


def workers(demo: Stage) -> list[SimAgent]:
    """The agents the banner names, in its order."""
    return [
        Fixer(demo, "fixer-1", ("complete", "release", "complete", "fail", "complete")),
        Fixer(demo, "fixer-2", ("complete", "fail", "complete", "complete", "release")),
        Reviewer(demo, "reviewer-1"),
        Flaky(demo, "flaky-1"),
        Crasher(demo, "crasher-1"),
        Hung(demo, "hung-1"),
        Rescuer(demo, "rescuer-1"),
    ]
