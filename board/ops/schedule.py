"""The due timer: scheduled todos made claimable when their run_at comes, and schedules'
ticks taken (migration 0017: each adds a todo).

One task per server process. It sweeps (store.sweep_due, one batch at a time until a batch
takes nothing; each todo taken is notified "due", which rings the doorbell), then asks when
the next scheduled todo falls due (store.next_due) and sleeps until then, at most
DUE_SLEEP_MAX_SECONDS. No polling while nothing is due, and no task per todo: however deep the
schedule, a process holds one sleep.

A scheduled add or a snooze may come due before that sleep ends: its "scheduled"
notification, heard on the process's LISTEN fan-out, wakes the timer, which sweeps and asks
again (a scheduled add or snooze notifies whether or not anyone watches its human; the
timer also hears this process's own adds and releases from the store's observers). A resync (the LISTEN connection came back, or the timer fell behind its events) wakes
it too, since a notification may have been missed. The sweep's statement takes due todos
with SKIP LOCKED, so every server process runs the timer against one database at once; each
todo falls due once. While the database is away the timer tries again every
DUE_RETRY_SECONDS, quietly: the store has said so already.

Schedules ride the same loop: each round also sweeps due schedules (store.sweep_schedules,
SKIP LOCKED as well, so each tick is taken by one process) and the sleep ends at the
earlier of the next run_at and the next tick. A schedule added, paused, resumed or removed
anywhere notifies "schedules", which wakes the timer like "scheduled".
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone

from board.errors import Unavailable
from board.ops.sweeps import run_batches
from board.store.store import Store, Transition
from board.store.vocabulary import DUE_SLEEP_MAX_SECONDS, SCHEDULE_KINDS
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.schedule")

DUE_RETRY_SECONDS = 0.5  # the database away, or a sweep failed: try again this soon
# A run_at passed by this process's clock that the database's sweep did not take (its clock
# a little behind, or another process's sweep holding the row): looked at again this soon.
DUE_RECHECK_SECONDS = 0.05
WAKE_KINDS = frozenset({"scheduled", "resync"}) | frozenset(SCHEDULE_KINDS)  # SCHEDULE_KINDS: a schedule changed
WAKE = {"kind": "scheduled"}  # put on the timer's own subscription by an add or release of this process


class DueTimer:
    def __init__(self, store: Store, fanout, *, sleep_max: float = DUE_SLEEP_MAX_SECONDS):
        self.store = store
        self.fanout = fanout  # board/live/fanout.py's Fanout (ops does not import live)
        self.sleep_max = sleep_max
        self.rounds = 0  # sweeps run so far (tests wait on it, not on a clock)
        self.next_at: datetime | None = None  # what the timer sleeps until (None: nothing scheduled)
        self._task: asyncio.Task | None = None
        self._sub = None

    def start(self) -> None:
        self._sub = self.fanout.subscribe(stream=False)
        self.store.observers.append(self.observe)
        self._task = asyncio.create_task(self._run(self._sub), name="due-timer")

    def observe(self, t: Transition) -> None:
        """The store's committed-transition observer: wake for a todo of this process's that
        falls due before the timer would look (another's adds arrive as notifications)."""
        if t.run_at is None or self._sub is None or t.kind not in ("added", "released"):
            return
        if t.run_at > datetime.now(timezone.utc) and (self.next_at is None or t.run_at < self.next_at):
            self._sub.put(WAKE)

    async def stop(self) -> None:
        if self.observe in self.store.observers:
            self.store.observers.remove(self.observe)
        await cancel_and_wait([self._task])
        self._task = None
        if self._sub is not None:
            self.fanout.unsubscribe(self._sub)
            self._sub = None

    async def sweep(self) -> float:
        """Make every due todo claimable; returns how long to sleep before the next falls due."""
        try:
            await run_batches(self.store.sweep_due)
            await run_batches(self.store.sweep_schedules)
            times = [t for t in (await self.store.next_due(), await self.store.next_schedule_at()) if t is not None]
            self.next_at = min(times, default=None)
        except Unavailable:  # the store already said so; a traceback each retry adds nothing
            return DUE_RETRY_SECONDS
        except Exception:
            log.exception("the due timer's sweep failed; retrying in %.1f s", DUE_RETRY_SECONDS)
            return DUE_RETRY_SECONDS
        finally:
            self.rounds += 1
        if self.next_at is None:
            return self.sleep_max
        left = (self.next_at - datetime.now(timezone.utc)).total_seconds()
        return min(max(left, DUE_RECHECK_SECONDS), self.sleep_max)

    async def _run(self, sub) -> None:
        loop = asyncio.get_running_loop()
        while True:
            deadline = loop.time() + await self.sweep()
            while (event := await sub.get(deadline)) is not None:
                if event.get("kind") in WAKE_KINDS:
                    while await sub.get(0) is not None:  # what queued meanwhile, one sweep covers
                        pass
                    break
