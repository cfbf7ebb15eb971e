"""The LISTEN fan-out: one dedicated LISTEN connection per process, fanned out in-process to
one queue per subscriber (SSE streams, the MCP doorbell). A Board stream does not hear
todos' notifications itself: the Board's one consumer of them hands it its rows ready.

A notification is a hint carrying ids only; subscribers re-read through the store. When the
LISTEN connection drops, it reconnects with jittered backoff (waits of at most 2 s) and
every subscriber receives a `resync` event, so it refreshes fully and misses nothing.
Control events (an endpoint revoked) go to control listeners instead, such as the cache of
authenticated endpoints.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import random
from typing import AsyncIterator, Callable

from board.store.db import listening
from board.store.vocabulary import CONTROL_KINDS, QUEUE_KINDS
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.live")

RESYNC = {"kind": "resync"}
# Kinds about endpoints rather than todos go to the control listeners only.
# Published when the server begins to shut down: every long-lived stream ends on it, so a
# graceful shutdown never waits out open SSE or MCP listen streams.
SHUTDOWN = {"kind": "shutdown"}
# Reconnect backoff of the LISTEN connection: doubling from the first delay up to the cap,
# each wait a random 50-100 % of it; so it is back at most 2 s after Postgres is.
RECONNECT_FIRST_SECONDS = 0.2
RECONNECT_MAX_SECONDS = 2.0
# Events a subscriber may fall behind by before it is told to resync instead.
SUBSCRIPTION_MAX = 1000


class Subscription:
    """One subscriber's events, in order, for its one consumer task. Bounded: a consumer that
    falls SUBSCRIPTION_MAX behind has what is queued dropped and is sent RESYNC instead. The
    buffer exists only while events wait, so an idle subscriber (most live streams, most of
    the time) holds no queue, only a future while its consumer waits."""

    __slots__ = ("stream", "todos", "overflowed", "overflows", "_events", "_waiter", "_timer")

    def __init__(self, *, stream: bool = True, todos: bool = True):
        self.stream = stream  # a live stream's (counted in subscriber_count), not the process's own consumer's
        # Whether it hears todos' notifications; a Board stream does not, it is handed its
        # rows ready by the process's one consumer of them (board/web/events.py's BoardRows).
        self.todos = todos
        self.overflowed = False
        self.overflows = 0  # how many times it fell behind: tells its consumer which RESYNC was its own
        self._events: collections.deque | None = None
        self._waiter: asyncio.Future | None = None
        self._timer: asyncio.TimerHandle | None = None

    def _push(self, event: dict) -> None:
        if self._events is None:
            self._events = collections.deque()
        self._events.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def put(self, event: dict) -> None:
        if event is SHUTDOWN:  # always delivered, even to a consumer that fell behind
            self._push(event)
            return
        if self.overflowed:
            return
        if self._events is not None and len(self._events) >= SUBSCRIPTION_MAX:
            # A slow consumer: drop what is queued and ask it to refresh fully instead.
            self.overflowed = True
            self.overflows += 1
            self._events.clear()
            self._push(RESYNC)
            return
        self._push(event)

    async def get(self, deadline: float | None = None) -> dict | None:
        """The next event; None once the loop's clock reaches `deadline` (loop.time()) with
        none. One timer per subscription, kept while the deadline only moves later (a stream
        pushes its ping on with every event): it wakes the consumer early at worst, which
        then waits on, so an event costs no timer of its own."""
        loop = asyncio.get_running_loop()
        while not self._events:
            if deadline is not None:
                if loop.time() >= deadline:
                    return None
                timer = self._timer
                if timer is None or timer.when() > deadline:
                    if timer is not None:
                        timer.cancel()
                    self._timer = loop.call_at(deadline, self._wake)
            self._waiter = loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event = self._events.popleft()
        if not self._events:
            self._events = None
        if event is RESYNC:
            self.overflowed = False
        return event

    def _wake(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Fanout:
    def __init__(self, url: str):
        self.url = url
        self._subs: set[Subscription] = set()
        # Called synchronously, in the LISTEN task, with every control event and with RESYNC
        # after a reconnect (what was missed meanwhile is unknown).
        self._control: list[Callable[[dict], None]] = []
        self._task: asyncio.Task | None = None
        self.connected = asyncio.Event()
        self.reconnects = 0
        self.closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # The process's Presence (board/live/presence.py): the humans its listeners watch.
        self.presence = None
        # Moves with every notification received, every event published, and every human
        # presence records anew: a read begun at an unchanged generation misses nothing a
        # subscriber of now would not be told of (board/tasks.py's FreshReads).
        self.generation = 0

    def subscribe(self, *, stream: bool = True, todos: bool = True) -> Subscription:
        sub = Subscription(stream=stream, todos=todos)
        self._subs.add(sub)
        if self.closing:  # subscribed after the shutdown announcement: told at once
            sub.put(SHUTDOWN)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        sub.close()

    def on_control(self, listener: Callable[[dict], None]) -> None:
        self._control.append(listener)

    def _tell_control(self, event: dict) -> None:
        for listener in self._control:
            try:
                listener(event)
            except Exception:
                log.exception("a control listener failed on a %s event", event.get("kind"))

    @contextlib.asynccontextmanager
    async def subscription(self, *, stream: bool = True, todos: bool = True) -> AsyncIterator[Subscription]:
        sub = self.subscribe(stream=stream, todos=todos)
        try:
            yield sub
        finally:
            self.unsubscribe(sub)

    @property
    def subscriber_count(self) -> int:
        """The live streams subscribed (the doorbell's own consumer is not one)."""
        return sum(1 for s in self._subs if s.stream)

    def advance(self) -> None:
        """Something a snapshot shows may have changed unannounced: reads begun before now
        are not shared with streams that subscribe from now on."""
        self.generation += 1

    def publish(self, event: dict) -> None:
        self.generation += 1
        if "todo" in event:  # a todo's change: not for the subscribers that do not hear those
            for sub in list(self._subs):
                if sub.todos:
                    sub.put(event)
        else:
            for sub in list(self._subs):
                sub.put(event)

    def resync(self) -> None:
        """Tell every subscriber to refresh fully: notifications may have been skipped."""
        self.publish(RESYNC)

    def shutdown(self) -> None:
        """Tell every subscriber the server is stopping (on the loop's thread)."""
        self.closing = True
        log.info("shutting down: ending %d live stream(s)", self.subscriber_count)
        self.publish(SHUTDOWN)

    def shutdown_threadsafe(self) -> None:
        """The same, callable from a signal handler."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.shutdown)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="switchboard-listen")
        try:
            await asyncio.wait_for(self.connected.wait(), timeout=30)
        except asyncio.TimeoutError:
            log.warning("LISTEN connection not up after 30 s; continuing, it keeps retrying")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None
        self.connected.clear()

    async def _run(self) -> None:
        delay = RECONNECT_FIRST_SECONDS
        first = True
        while True:
            try:
                async with listening(self.url) as payloads:
                    self.connected.set()
                    if not first:
                        self.reconnects += 1
                        self._tell_control(RESYNC)
                        self.publish(RESYNC)
                    first = False
                    delay = RECONNECT_FIRST_SECONDS
                    async for payload in payloads:
                        self.generation += 1
                        try:
                            event = json.loads(payload)
                        except ValueError:
                            continue
                        kind = event.get("kind")
                        if kind in CONTROL_KINDS or kind in QUEUE_KINDS:
                            self._tell_control(event)  # the caches first: no subscriber acts on a stale one
                        if kind not in CONTROL_KINDS:
                            self.publish(event)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the database went away: back off, reconnect, resync
                self.connected.clear()
                # Jittered, so the processes of a deployment do not reconnect in step.
                wait = delay * random.uniform(0.5, 1.0)
                log.warning("LISTEN connection lost (%s); reconnecting in %.1f s", type(err).__name__, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, RECONNECT_MAX_SECONDS)
