"""Background tasks of the server: one way to stop them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None]) -> None:
    """Cancel every task, then wait for each to finish; a task's own error is not ours to raise
    at shutdown (each loop logs its failures as they happen)."""
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
