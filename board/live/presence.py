"""Presence: the humans this process has live listeners for, recorded in Postgres (migration
0011's watchers table) so that a transition, in any process, calls pg_notify only when
someone somewhere listens for its human's todos. A notifying commit waits on every other
notifying commit in the cluster, so a notification nobody hears is not free.

A listener (a Board stream, an MCP doorway) holds its human while it is open: hold() when it
subscribes to the fan-out, release() when it closes, and `await ready(user)` before it reads
its first snapshot. ready() returns once the human's row is committed and every transaction
that held watchers' lock at that moment has ended. The statements check watchers in their own
text, so they lock it while they are planned, before their snapshot: one that checked without
seeing the row has ended before the listener's snapshot begins, and the snapshot sees its
change; one that checks later sees the row and notifies. So a listener misses nothing between
its snapshot and its notifications. (That order, locks before snapshot, is read committed's,
which the pool's connections always run at: board/store/db.py.)

One task writes. Each round it records every human held since the last one in one
statement, waits those transactions out, and marks the humans ready. Every heartbeat it
renews the process's rows, drops the humans no listener holds any more (a reload within a
heartbeat keeps its row), and drops other processes' lapsed rows. A row found missing at
renewal (dropped while this process was cut off from the database) is added again, and
every subscriber is told to resync, since notifications may have been skipped meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

from board.errors import Unavailable
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.live.presence")

HEARTBEAT_SECONDS = 10.0
TTL_SECONDS = 60.0  # a row not renewed for this long belongs to a process that stopped
WAIT_OUT_SECONDS = 10.0  # past this, a listener goes on and the stragglers end in a resync
RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 2.0


class Presence:
    def __init__(self, store, fanout, *, heartbeat_seconds: float = HEARTBEAT_SECONDS,
                 ttl_seconds: float = TTL_SECONDS, wait_out_seconds: float = WAIT_OUT_SECONDS):
        self.store = store
        self.fanout = fanout
        self.process = str(uuid.uuid4())
        self.heartbeat_seconds = heartbeat_seconds
        self.ttl_seconds = ttl_seconds
        self.wait_out_seconds = wait_out_seconds
        self._refs: dict[int, int] = {}  # human -> open listeners
        self._ready: dict[int, asyncio.Future] = {}  # human -> done once recorded and waited out
        self._pending: set[int] = set()  # held, not yet recorded
        self._stragglers: list[str] = []  # transactions still running when a wait gave up
        self._wake = asyncio.Event()
        self._beat_now = False
        self._task: asyncio.Task | None = None
        if fanout is not None:
            fanout.on_control(self._on_control)

    # -- listeners ------------------------------------------------------------------------

    def hold(self, user_id: int) -> None:
        self._refs[user_id] = self._refs.get(user_id, 0) + 1
        if user_id not in self._ready:
            self._ready[user_id] = asyncio.get_running_loop().create_future()
            self._pending.add(user_id)
            self._wake.set()

    def release(self, user_id: int) -> None:
        left = self._refs.get(user_id, 0) - 1
        if left > 0:
            self._refs[user_id] = left
        else:  # the row stays until the next heartbeat
            self._refs.pop(user_id, None)

    @contextlib.asynccontextmanager
    async def listening(self, user_id: int, timeout: float):
        """Held for the block, entered once ready: a listener reads its snapshot inside."""
        self.hold(user_id)
        try:
            await self.ready(user_id, timeout)
            yield
        finally:
            self.release(user_id)

    async def ready(self, user_id: int, timeout: float) -> None:
        """Returns once a listener of this human may read its snapshot; Unavailable if the
        database does not let the row be recorded within timeout."""
        fut = self._ready.get(user_id)
        if fut is None or fut.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise Unavailable("the database did not record this listener in time") from None

    async def settled(self, timeout: float) -> None:
        """Returns once every human held so far is ready (the doorbell's sweep waits on it)."""
        waiting = [f for f in self._ready.values() if not f.done()]
        if not waiting:
            return
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*waiting)), timeout)
        except asyncio.TimeoutError:
            raise Unavailable("the database did not record the listeners in time") from None

    def held(self) -> frozenset[int]:
        return frozenset(self._refs)

    # -- the task -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="switchboard-presence")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        recorded = [u for u, f in self._ready.items() if f.done()]
        if recorded:  # best effort: a row left behind lapses after ttl_seconds
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.store.watchers_drop(self.process, recorded), 2.0)

    def beat_now(self) -> None:
        """Run the heartbeat now rather than at its period: renew, drop, expire."""
        self._beat_now = True
        self._wake.set()

    def _on_control(self, event: dict) -> None:
        if event.get("kind") == "resync":  # the LISTEN connection came back: check the rows now
            self.beat_now()

    async def _run(self) -> None:
        next_beat = time.monotonic() + self.heartbeat_seconds
        delay = RETRY_FIRST_SECONDS
        while True:
            wait = max(0.0, next_beat - time.monotonic())
            if not self._pending and not self._beat_now:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
            try:
                if self._pending:
                    await self._record()
                if self._beat_now or time.monotonic() >= next_beat:
                    self._beat_now = False
                    await self._heartbeat()
                    next_beat = time.monotonic() + self.heartbeat_seconds
                delay = RETRY_FIRST_SECONDS
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the database is away: the held humans are tried again
                log.warning("presence: could not record listeners (%s); trying again in %.1f s",
                            type(err).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def _record(self) -> None:
        users = sorted(self._pending)
        await self.store.watchers_hold(self.process, users, self.ttl_seconds)
        await self._wait_out()
        self._pending.difference_update(users)
        if self.fanout is not None:  # their transitions notified nobody until now
            self.fanout.advance()
        for u in users:
            fut = self._ready.get(u)
            if fut is not None and not fut.done():
                fut.set_result(None)

    async def _wait_out(self) -> None:
        """Wait until every transaction that held watchers' lock after the rows committed has
        ended; past wait_out_seconds, go on and resync once they have."""
        vxids = await self.store.watchers_in_flight()
        pause, deadline = 0.002, time.monotonic() + self.wait_out_seconds
        while vxids and await self.store.watchers_in_flight_left(vxids):
            if time.monotonic() >= deadline:
                log.warning("presence: %d transaction(s) still running after %.0f s; listeners go on "
                            "and resync when they end", len(vxids), self.wait_out_seconds)
                self._stragglers.extend(vxids)
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)

    async def _heartbeat(self) -> None:
        gone = [u for u, f in self._ready.items() if u not in self._refs and f.done()]
        for u in gone:
            del self._ready[u]
        if gone:
            await self.store.watchers_drop(self.process, gone)
        kept = [u for u, f in self._ready.items() if f.done()]
        if kept and await self.store.watchers_hold(self.process, kept, self.ttl_seconds):
            # A row had gone (this process was cut off past the ttl): what was not notified
            # meanwhile is unknown, so every subscriber refreshes once the checkers are out.
            await self._wait_out()
            log.warning("presence: this process's listener rows had lapsed; resyncing its subscribers")
            self.fanout.resync()
        await self.store.watchers_expire()
        if self._stragglers and not await self.store.watchers_in_flight_left(self._stragglers):
            self._stragglers.clear()
            self.fanout.resync()
