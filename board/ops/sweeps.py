"""Background sweeps: the reaper, the retry scheduler, the counts roll-up and retention.

Each is a loop calling one store function. The statements use SKIP LOCKED, so every server
process can run every sweep against one database at once. An interval of 0 turns a sweep
off. A failing sweep logs and tries again next period; it never stops the server.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from board.config import Settings
from board.errors import Unavailable
from board.store.store import Store
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.sweeps")


class Sweeps:
    def __init__(self, store: Store, settings: Settings):
        self.store = store
        self.settings = settings
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        plan: list[tuple[str, float, Callable[[], Awaitable[int]]]] = [
            ("reaper", self.settings.reaper_interval_seconds, self.store.sweep_reap),
            # Expired questions release their todos on the reaper's period.
            ("questions", self.settings.reaper_interval_seconds, self.store.sweep_questions),
            ("retry", self.settings.retry_interval_seconds, self.store.sweep_retry),
            # Ended todos rolled up into the overview's counts, on the reaper's period too.
            ("counts", self.settings.reaper_interval_seconds, self.store.sweep_counts),
            ("retention", self.settings.retention_interval_seconds, self.store.sweep_retention),
        ]
        for name, interval, fn in plan:
            if interval and interval > 0:
                self._tasks.append(asyncio.create_task(self._loop(name, interval, fn), name=f"sweep-{name}"))

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()

    async def _loop(self, name: str, interval: float, fn: Callable[[], Awaitable[int]]) -> None:
        while True:
            try:
                # Drain in batches: a backlog is worked off now, not one batch a period.
                while await fn() > 0:
                    pass
            except asyncio.CancelledError:
                raise
            except Unavailable:  # the store already said so; a traceback every period adds nothing
                pass
            except Exception:
                log.exception("sweep %s failed; retrying next period", name)
            await asyncio.sleep(interval)
