"""Background tasks of the server: one way to stop them."""

from __future__ import annotations

import asyncio
import logging
from typing import Iterable


log = logging.getLogger("switchboard.tasks")

STOP_WAIT_SECONDS = 5.0


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None], *, wait: float = STOP_WAIT_SECONDS) -> None:
    """Cancel every task, then wait for each to finish, at most `wait` seconds in all: a task
    that does not end when cancelled (one whose cancellation was swallowed) is named in the
    log and left, so a stopping server never hangs on it. A task's own error is not ours to
    raise at shutdown (each loop logs its failures as they happen)."""
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    if not running:
        return
    done, pending = await asyncio.wait(running, timeout=wait)
    for task in done:
        if not task.cancelled():
            task.exception()  # taken, so it is never reported as unretrieved
    for task in pending:
        log.warning("task %s did not stop within %.0f s of being cancelled; left behind", task.get_name(), wait)


def shared_future(coro, log: logging.Logger, what: str, expected: tuple[type[BaseException], ...] = ()) -> asyncio.Future:
    """A read that several streams await, or none: a stream that leaves before it finishes,
    or a newer read that replaces it, would leave its failure unretrieved (asyncio's "Task
    exception was never retrieved"). The failure is taken here once: an expected one (the
    streams report it to their browsers) silently, any other logged once."""
    fut = asyncio.ensure_future(coro)

    def taken(done: asyncio.Future) -> None:
        if done.cancelled():
            return
        err = done.exception()
        if err is not None and not isinstance(err, expected):
            log.error("%s failed: %s", what, type(err).__name__, exc_info=err)

    fut.add_done_callback(taken)
    return fut
