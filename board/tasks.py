"""Background tasks of the server: one way to stop them."""

from __future__ import annotations

import asyncio
import logging
import time
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


# How long a finished read stays shareable by callers that came after it began, while
# nothing moved the generation: a reconnect storm's streams share a few reads, and what a
# read shows that moves with time alone (liveness, the chart's window) is at most this old.
QUIET_SHARE_SECONDS = 5.0


class FreshReads:
    """Reads shared by callers that each need one that misses nothing since a moment of their
    own (a live stream's subscription): a caller shares the read in flight if it covers that
    moment, else the next read of its key, which begins once the one in flight has ended and
    is shared by every caller that comes meanwhile. So a burst of callers makes one read per
    key at a time, not one per caller, and none shares a read that could miss what it asked.

    Moments are stamps, (time.monotonic(), generation): the generation is a count that moves
    whenever something a read shows may have changed unseen by a subscriber (the fan-out's,
    Fanout.generation). A read covers a stamp if it began at or after it, or began at most
    quiet_seconds before it with no move of the generation in between: whatever committed
    after such a read's statements is announced after the caller subscribed, so it is told.
    """

    def __init__(self, log: logging.Logger, what: str, expected: tuple[type[BaseException], ...] = (),
                 size: int = 1024, *, generation=None, quiet_seconds: float = QUIET_SHARE_SECONDS):
        self.log, self.what, self.expected, self.size = log, what, expected, size
        self.generation = generation or (lambda: 0)
        self.quiet_seconds = quiet_seconds if generation else 0.0  # no generation: begun after, only
        self._begun: dict = {}  # key -> (the stamp it began at, its future)
        self._next: dict = {}  # key -> the read that begins when the one in flight ends

    def stamp(self) -> tuple[float, float]:
        """Now, as a stamp to ask for a read that misses nothing from now on."""
        return time.monotonic(), self.generation()

    def covers(self, begun: tuple[float, float], since: tuple[float, float]) -> bool:
        return begun[0] >= since[0] or (begun[1] >= since[1] and since[0] - begun[0] <= self.quiet_seconds)

    def get(self, key, since: tuple[float, float], make) -> asyncio.Future:
        """The shared read for key that covers `since` (a stamp() taken once the caller had
        subscribed), made by make() (a coroutine function) when none is."""
        entry = self._begun.get(key)
        if entry is not None and self.covers(entry[0], since):
            return entry[1]
        waiting = self._next.get(key)
        if waiting is not None:
            return waiting
        prior = entry[1] if entry is not None and not entry[1].done() else None
        begun = self.stamp()  # before the read starts: the entry never claims a later start
        fut = shared_future(self._read(key, prior, make), self.log, self.what, self.expected)
        if prior is None:
            self._begun[key] = (begun, fut)
        else:
            self._next[key] = fut
        if len(self._begun) > self.size:  # bound memory: forget the reads already done
            for k in [k for k, (_, f) in self._begun.items() if f.done()]:
                del self._begun[k]
        return fut

    async def _read(self, key, prior: asyncio.Future | None, make):
        if prior is not None:
            await asyncio.wait([prior])  # its outcome is its own callers'
            me = asyncio.current_task()
            if self._next.get(key) is me:  # begins now; later callers that need it may share it
                del self._next[key]
                self._begun[key] = (self.stamp(), me)
        return await make()

    def forget(self, key) -> None:
        """The next caller reads anew (what the key's reads show has changed)."""
        self._begun.pop(key, None)
        self._next.pop(key, None)
