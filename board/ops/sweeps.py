"""Background sweeps: the reaper, the retry scheduler, the counts roll-ups and retention.

Each is a loop calling one store function. The statements use SKIP LOCKED, so every server
process can run every sweep against one database at once. An interval of 0 turns a sweep
off. A failing sweep logs and tries again next period; it never stops the server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from board.config import Settings
from board.errors import Unavailable
from board.store.store import Store
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.sweeps")

# Retention deletes history beside live work: after each batch it waits three times as long
# as the batch took, so it holds the database at most a quarter of the time and claims keep
# the rest (bench/million.py measures claims while it runs). The other sweeps drain at once.
RETENTION_DUTY = 0.25


async def run_batches(fn: Callable[[], Awaitable[int]], duty: float = 1.0,
                      stop: asyncio.Event | None = None) -> int:
    """Runs a sweep batch after batch until one takes nothing (or stop is set), pausing
    after each so the sweep's share of the time stays at most `duty`; returns the rows taken."""
    taken = 0
    while stop is None or not stop.is_set():
        started = time.monotonic()
        n = await fn()
        taken += n
        if n == 0:
            break
        if duty < 1.0:
            await asyncio.sleep((time.monotonic() - started) * (1 - duty) / duty)
    return taken


class Sweeps:
    def __init__(self, store: Store, settings: Settings):
        self.store = store
        self.settings = settings
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        plan: list[tuple[str, float, Callable[[], Awaitable[int]], float]] = [
            ("reaper", self.settings.reaper_interval_seconds, self.store.sweep_reap, 1.0),
            # Expired questions release their todos on the reaper's period.
            ("questions", self.settings.reaper_interval_seconds, self.store.sweep_questions, 1.0),
            ("retry", self.settings.retry_interval_seconds, self.store.sweep_retry, 1.0),
            # The todos' counts folded, on the reaper's period too.
            ("counts", self.settings.reaper_interval_seconds, self.store.sweep_counts, 1.0),
            # The charts' closed attempts folded into counts (migration 0012), on it too.
            ("outcomes", self.settings.reaper_interval_seconds, self.store.sweep_outcomes, 1.0),
            ("retention", self.settings.retention_interval_seconds, self.store.sweep_retention, RETENTION_DUTY),
        ]
        for name, interval, fn, duty in plan:
            if interval and interval > 0:
                self._tasks.append(asyncio.create_task(self._loop(name, interval, fn, duty), name=f"sweep-{name}"))

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()

    async def _loop(self, name: str, interval: float, fn: Callable[[], Awaitable[int]], duty: float) -> None:
        while True:
            try:
                # Drain in batches: a backlog is worked off now, not one batch a period.
                await run_batches(fn, duty)
            except asyncio.CancelledError:
                raise
            except Unavailable:  # the store already said so; a traceback every period adds nothing
                pass
            except Exception:
                log.exception("sweep %s failed; retrying next period", name)
            await asyncio.sleep(interval)
