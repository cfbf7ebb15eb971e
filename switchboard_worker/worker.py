"""`Worker`: claims todos from a Switchboard server over MCP and hands them out as `Todo`s
that heartbeat in the background while they are held.

    async with Worker(url, token, queue="builds") as worker:
        async for todo in worker:
            await todo.note("looking at " + todo.title)
            await todo.complete({"ok": True}, summary="built")

Claims are fenced (a lease token, never shown), so a close whose reply was lost is repeated
with the same token after reconnecting and the server answers it as a replay. When nothing is
ready the worker waits on the doorbell, with a slow safety poll. Stopping (`stop()`, or leaving
the `async with`) claims nothing more and releases what is still held, with a summary saying
why. `run(handler, concurrency=N)` drives N slots at once, each calling `handler(todo)`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from typing import Any, AsyncIterator, Awaitable, Callable

from switchboard_worker.connection import Closed, Connection, Lost, ToolError

log = logging.getLogger("switchboard_worker")

SAFETY_POLL_SECONDS = 30.0
SHUTDOWN_SUMMARY = "released on shutdown: the worker stopped before this todo was done"
HOLDER_GONE = ("conflict", "not_found")  # a heartbeat or close answered so: the lease is no longer ours
CLOSED = ("completed", "failed", "released")
# While ask() waits: how often it re-reads the todo when nothing rings.
ASK_POLL_SECONDS = 5.0


def default_name() -> str:
    """host/pid: the claimant prefix, so the Board tells workers apart."""
    return f"{socket.gethostname()}/{os.getpid()}"


class Todo:
    """One claimed todo and its open attempt. Close it once with complete, fail or release;
    until then a background task heartbeats every third of the lease."""

    def __init__(self, worker: "Worker", claim: dict, *, claimant: str, lease_seconds: float,
                 traceparent: str | None = None):
        todo = claim["todo"]
        self.worker = worker
        self.data: dict = todo
        self.id: str = todo["id"]
        self.queue: str = todo.get("queue", "")
        self.title: str = todo.get("title", "")
        self.payload: Any = todo.get("payload")
        self.routing: Any = todo.get("routing")
        self.attempt: int = todo.get("attempt", 0)
        self.max_attempts: int = todo.get("max_attempts", 0)
        self.priority: int = todo.get("priority", 2)  # 0, the most urgent, to 4
        self.run_at: str | None = todo.get("run_at")  # when it could first be claimed (RFC 3339), or None
        self.key: str | None = todo.get("key")
        self.after: list[str] = todo.get("after") or []  # the todos it waited for, all done by its claim
        self.schedule_id: str | None = todo.get("schedule_id")  # the schedule that added it, or None
        self.attempt_seq: int = claim.get("attempt_seq", 0)
        self.attempts_total: int = claim.get("attempts_total", 0)
        self.prior_attempts: list[dict] = claim.get("prior_attempts") or []
        self.continues: dict | None = claim.get("continues")
        # The attempt's W3C traceparent when the server traces (docs/tracing.md), else None.
        self.traceparent = traceparent
        self.claimant = claimant
        self.lease_seconds = lease_seconds
        self.claimed_at = time.monotonic()
        self.outcome: str | None = None  # completed, failed, released; lost when the lease was taken from us
        self.replayed = False  # the close went through before a lost reply: the server said so on the repeat
        self.heartbeats = 0
        self.lease_lost = asyncio.Event()  # set when a heartbeat finds the lease is no longer ours
        self.interrupted = False
        self._lease_token: str | None = claim.get("lease_token")  # never printed or logged
        self._beats: asyncio.Task | None = None
        self._start_heartbeats()

    def __repr__(self) -> str:
        return f"Todo(id={self.id!r}, queue={self.queue!r}, attempt_seq={self.attempt_seq})"

    @property
    def open(self) -> bool:
        return self.outcome is None

    # -- heartbeats ------------------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        self._beats = asyncio.create_task(self._heartbeat_loop(), name=f"heartbeat-{self.id}")

    async def _stop_heartbeats(self) -> None:
        if self._beats is not None:
            self._beats.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._beats
            self._beats = None

    async def _heartbeat_loop(self) -> None:
        every = max(0.2, self.lease_seconds / 3)  # well before the lease lapses, twice over
        while True:
            await asyncio.sleep(every)
            try:
                await self.heartbeat()
            except ToolError as e:
                if e.code in HOLDER_GONE:
                    self._lose()
                    return
                log.warning("heartbeat refused: %s", e.code)
                if e.code == "forbidden":  # the credential may not heartbeat: asking again cannot help
                    return
            except Closed:  # the worker is shutting down
                return

    def _lose(self) -> None:
        if self.outcome is None:
            self.outcome = "lost"
        self.lease_lost.set()
        self.worker._forget(self)

    async def heartbeat(self) -> dict:
        r = await self.worker.conn.call("heartbeat", self._fenced(lease_seconds=self.lease_seconds))
        self.heartbeats += 1
        if self.worker.on_heartbeat is not None:
            self.worker.on_heartbeat(self, r)
        return r

    # -- the verbs -------------------------------------------------------------------------

    def _fenced(self, **args: Any) -> dict:
        args["id"] = self.id
        if self._lease_token:
            args["lease_token"] = self._lease_token
        return args

    async def note(self, text: str) -> dict:
        """Add a note to the open attempt, for whoever works on the todo next."""
        return await self.worker.conn.call("note", self._fenced(text=text))

    async def complete(self, result: Any = None, *, summary: str | None = None, artifact: str | None = None,
                       usage: dict | None = None) -> dict:
        return await self._close("complete", "completed", result=result, summary=summary, artifact=artifact,
                                 usage=usage)

    async def fail(self, result: Any = None, *, summary: str | None = None, artifact: str | None = None,
                   usage: dict | None = None) -> dict:
        return await self._close("fail", "failed", result=result, summary=summary, artifact=artifact, usage=usage)

    async def release(self, *, summary: str | None = None, artifact: str | None = None,
                      usage: dict | None = None, delay_seconds: float | None = None) -> dict:
        """Give the todo back; with delay_seconds, snoozed: nobody claims it until then."""
        if self.interrupted:  # a release needs the todo claimed again
            await self.resume()
        return await self._close("release", "released", summary=summary, artifact=artifact, usage=usage,
                                 delay_seconds=delay_seconds)

    async def interrupt(self, state: str = "input_required", **args: Any) -> dict:
        """Wait for input (or auth): the attempt stays open, heartbeats pause until resume().
        args: the interrupt tool's others (question, choices, expires_in_seconds); ask()
        also waits for the answer."""
        await self._stop_heartbeats()
        r = await self.worker.conn.call("interrupt", self._fenced(**{**args, "state": state}))
        self.interrupted = True
        return r

    async def ask(self, question: str, *, choices: list[str] | None = None,
                  expires_in_seconds: float | None = None, state: str = "input_required",
                  timeout: float | None = None) -> list[dict]:
        """Ask the todo's owner and wait for the answer: interrupt with the question, wait
        for the doorbell (or the worker's safety poll), and once an answer is given resume
        and return the answers ([{text, choice, who, at}]). The attempt stays open
        throughout. Raises Lost when the todo stops waiting without an answer: the question
        expired, or the person released or canceled it (noticed within ASK_POLL_SECONDS).
        With `timeout`, it stops waiting after that many seconds: it resumes anyway and
        returns what resume returns (an answer given just before is still among them; none:
        []), so the caller goes on without one."""
        args: dict[str, Any] = {"question": question}
        if choices is not None:
            args["choices"] = choices
        if expires_in_seconds is not None:
            args["expires_in_seconds"] = expires_in_seconds
        await self.interrupt(state, **args)
        conn = self.worker.conn
        loop = asyncio.get_running_loop()
        give_up = None if timeout is None else loop.time() + timeout
        while True:
            seen = conn.rings
            got = await conn.call("get_todo", {"id": self.id, "attempts_limit": 1, "notes_limit": 0})
            attempt = (got.get("attempts") or [{}])[0]
            if got.get("state") not in ("input_required", "auth_required") or attempt.get("seq") != self.attempt_seq:
                self._lose()
                raise Lost(f"the todo stopped waiting for an answer (it is {got.get('state')})")
            if (attempt.get("question") or {}).get("answers"):
                break
            # An answer rings at once; a cancel or a release by the person does not ring, so
            # it is noticed by this poll.
            wait = min(self.worker.poll_seconds, ASK_POLL_SECONDS)
            if give_up is not None:
                if loop.time() >= give_up:
                    break
                wait = min(wait, give_up - loop.time())
            await conn.wait_ring(seen, wait)
        return (await self.resume()).get("answers", [])

    async def resume(self) -> dict:
        r = await self.worker.conn.call("resume", self._fenced(lease_seconds=self.lease_seconds))
        self.interrupted = False
        self._start_heartbeats()
        return r

    def abandon(self) -> None:
        """Stop heartbeating and forget the todo without closing it: its lease lapses and the
        reaper closes the attempt as died (what a crashed worker leaves behind)."""
        if self._beats is not None:
            self._beats.cancel()
            self._beats = None
        if self.outcome is None:
            self.outcome = "abandoned"
        self.worker._forget(self)

    async def _close(self, tool: str, outcome: str, **args: Any) -> dict:
        if self.outcome in CLOSED:  # a second close would only be answered as a replay of the first
            raise ToolError(tool, "conflict", f"this todo's attempt is already closed ({self.outcome})")
        await self._stop_heartbeats()
        try:
            # Repeated after a lost reply with the same lease token: the server applies it
            # once and answers the repeat with "replayed": true.
            r = await self.worker.conn.call(tool, self._fenced(**args))
        except ToolError as e:
            if e.code in HOLDER_GONE:
                self._lose()
            elif self.outcome is None and not self.interrupted:
                self._start_heartbeats()  # still ours (say, an invalid argument): keep the lease
            raise
        self.replayed = bool(r.get("replayed"))
        self.outcome = outcome
        self.worker._forget(self)
        return r


class Worker:
    """Claims todos over MCP (see the module docstring). `queue`: one queue, or any the
    credential may drain; `name`: the claimant prefix (host/pid by default), each claim labelled
    `<name>/slot-<n>`; `lease_seconds`: the lease each claim and heartbeat asks for;
    `poll_seconds`: the safety poll while the doorbell is quiet."""

    def __init__(self, url: str, token: str, *, queue: str | None = None, name: str | None = None,
                 lease_seconds: float = 60.0, poll_seconds: float = SAFETY_POLL_SECONDS, fenced: bool = True,
                 shutdown_summary: str = SHUTDOWN_SUMMARY, grace_seconds: float = 10.0,
                 on_heartbeat: Callable[[Todo, dict], None] | None = None, protocol: str = "modern"):
        if lease_seconds < 1:
            raise ValueError("lease_seconds must be at least 1")
        if poll_seconds <= 0:
            raise ValueError("poll_seconds must be positive")
        self.conn = Connection(url, token, protocol=protocol)
        self.queue = queue
        self.name = name or default_name()
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.fenced = fenced
        self.shutdown_summary = shutdown_summary
        self.grace_seconds = grace_seconds
        self.on_heartbeat = on_heartbeat
        self.held: set[Todo] = set()
        self.stopping = asyncio.Event()
        self._last: Todo | None = None

    async def __aenter__(self) -> "Worker":
        await self.conn.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.stop()
        await self.release_held(self.shutdown_summary)
        await self.conn.close()

    def stop(self) -> None:
        """Claim nothing more; a waiting claim returns None."""
        self.stopping.set()

    def _forget(self, todo: Todo) -> None:
        self.held.discard(todo)

    def claimant(self, slot: int = 0) -> str:
        return f"{self.name}/slot-{slot}"

    async def tools(self) -> set[str]:
        """The tools this credential may call: the server lists only the verbs its scope grants."""
        return await self.conn.tools()

    async def call(self, tool: str, **args: Any) -> dict:
        """Any other tool (list_todos, get_todo, add_todo...), with the same reconnect rules."""
        return await self.conn.call(tool, args)

    async def claim(self, *, slot: int = 0, queue: str | None = None, lease_seconds: float | None = None,
                    claimant: str | None = None, fenced: bool | None = None, wait: bool = True) -> Todo | None:
        """Claim the next ready todo. With `wait`, wait on the doorbell (and the safety poll)
        until there is one or the worker stops (then None); else one try."""
        lease = lease_seconds or self.lease_seconds
        label = claimant or self.claimant(slot)
        fence = self.fenced if fenced is None else fenced
        while not self.stopping.is_set():
            seen = self.conn.rings
            called = await self._unless_stopping(self.conn.call_with_meta("claim_next", {
                "queue": queue or self.queue, "claimant": label, "lease_seconds": lease,
                "require_fence": True if fence else None}))
            if called is None:  # stopped while the claim waited for the server: claim nothing
                return None
            r, meta = called
            if r.get("todo") is not None:
                traceparent = meta.get("traceparent")
                todo = Todo(self, r, claimant=label, lease_seconds=lease,
                            traceparent=traceparent if isinstance(traceparent, str) else None)
                self.held.add(todo)
                if self.stopping.is_set():  # stopped while the claim was on its way: hand it back
                    with contextlib.suppress(ToolError, Lost, Closed):
                        await todo.release(summary=self.shutdown_summary)
                    return None
                return todo
            if not wait:
                return None
            await self._wait_for_work(seen)
        return None

    async def _unless_stopping(self, call: Awaitable[Any]) -> Any | None:
        """The call's answer, or None when the worker stops first (say, while the server is
        away and the call waits to be sent again); a claim cut short that way lapses."""
        task = asyncio.ensure_future(call)
        stop = asyncio.create_task(self.stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()  # the call goes with its caller
            raise
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return None

    async def _wait_for_work(self, seen: int) -> None:
        """Until a ring newer than `seen`, the safety poll, or stop: whichever is first."""
        ring = asyncio.create_task(self.conn.wait_ring(seen, self.poll_seconds))
        stop = asyncio.create_task(self.stopping.wait())
        try:
            await asyncio.wait({ring, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (ring, stop):
                t.cancel()
            for t in (ring, stop):
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    def __aiter__(self) -> AsyncIterator[Todo]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Todo]:
        while True:
            last = self._last
            if last is not None and last.open and last in self.held:
                # The loop body moved on without closing it: give it back rather than let it lapse.
                with contextlib.suppress(ToolError, Lost, Closed):
                    await last.release(summary="released: the worker's loop moved on without closing it")
            todo = await self.claim()
            if todo is None:
                return
            self._last = todo
            yield todo

    async def run(self, handler: Callable[[Todo], Awaitable[None]], *, concurrency: int = 1) -> None:
        """Run `concurrency` slots until stop(): each claims a todo and awaits handler(todo).
        A handler that raises fails the todo with the exception as its summary; one that
        returns without closing it releases it. On stop, handlers get grace_seconds to finish,
        then are cancelled and their todos released."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        slots = [asyncio.create_task(self._slot(handler, n), name=f"worker-slot-{n}") for n in range(concurrency)]
        await self.stopping.wait()
        _, late = await asyncio.wait(slots, timeout=self.grace_seconds)
        for task in late:
            task.cancel()
        for task in slots:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.release_held(self.shutdown_summary)

    async def _slot(self, handler: Callable[[Todo], Awaitable[None]], slot: int) -> None:
        while not self.stopping.is_set():
            todo = await self.claim(slot=slot)
            if todo is None:
                return
            try:
                await handler(todo)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if todo.open and todo in self.held:
                    with contextlib.suppress(ToolError, Lost, Closed):
                        await todo.fail(summary=f"the handler raised {type(e).__name__}")
                log.warning("handler raised %s on %s", type(e).__name__, todo.id)
            else:
                if todo.open and todo in self.held and not self.stopping.is_set():
                    with contextlib.suppress(ToolError, Lost, Closed):
                        await todo.release(summary="released: the handler returned without closing it")

    async def release_held(self, summary: str) -> int:
        """Release every todo still held (on shutdown); returns how many went back."""
        released = 0
        for todo in list(self.held):
            try:
                await asyncio.wait_for(todo.release(summary=summary), timeout=10)
                released += 1
            except (ToolError, Lost, Closed, asyncio.TimeoutError) as e:
                log.warning("release on shutdown of %s: %s", todo.id, getattr(e, "code", type(e).__name__))
                await todo._stop_heartbeats()
                self._forget(todo)
        return released
