"""The MCP doorbell (SPEC-0011, SPEC-0034 REQ-16): tell an endpoint's live MCP sessions
that a todo became ready in a queue they may drain, or that the person who owns a todo
answered the question its agent waits on.

URIs (the doorbell's scheme, also served by resources/read):
  switchboard://todos        the collection; subscribe to it to hear every ring
  switchboard://todos/{id}   one todo; a ring is notifications/resources/updated for it

Two protocol generations, one doorbell:
  2025-11-25 (sessions): a ring goes out on the session's standalone GET stream, so a
    session is ringable while its GET stream is open. The ASGI wrapper in board/mcp/server.py
    opens a Doorway for each such stream; the ServerSession used to send is captured from
    the session's own requests (notifications/initialized first).
  2026-07-28 (sessionless): a client sends subscriptions/listen with
    resource_subscriptions ["switchboard://todos"] (or single todo URIs); the response is
    the stream, and each ring is a notifications/resources/updated on it.

One task per process consumes the LISTEN fan-out (board/live/fanout.py). A todo is ready when it
is added, released, re-queued by the retry scheduler, retried by hand, reaped back to
pending, or falls due ("due": the due timer of board/ops/schedule.py reached its run_at, or
its human started it now). A todo added with a run_at ahead or released with a delay (a
snooze) is "scheduled": it never rings, and the heartbeat and the re-rings pass over it
until it falls due. So is a todo waiting for the todos named in its after ("waiting"): it
rings when the last of them completes, or its human drops the last one it waits for
("unblocked", which opens its gate as falling due does). When a human resumes a paused queue (queue_resumed), every process rings that
queue's pending todos on the doorways of that human's endpoints, gate or not; the heartbeat
passes over paused queues (nothing in them can be claimed). Rings go only to doorways of the todo's own endpoint whose queues include the
todo's queue and whose scope may drain (claim or claim_next): never to another endpoint.
With SWITCHBOARD_A2UI on, the same doorways carry the A2UI todo detail resource's changes:
a session subscribed to switchboard://todos/{id}/a2ui (2025-11-25: resources/subscribe; 2026-07-28:
that URI in subscriptions/listen) hears notifications/resources/updated for it on every event of
that todo (an attempt opened, closed, noted, its lease extended, the todo moved), with no gate,
only when the todo is its own endpoint's, in a granted queue, and its scope allows get_todo.
When the owning human answers an interrupted todo's question (the "answered" event of
todo_answer_human in board/store/sql/holds.sql), the waiting agent is told at once:
notifications/resources/updated for switchboard://todos/{id} on the todo's endpoint's
doorways whose queues include the todo's queue and that want that URI or the collection (a
legacy session's GET stream hears every todo of its queues), in both generations, with no
gate (and the gate is left as it was). The agent then calls resume, which returns the
answers. A ring is a hint to re-read: another worker of the same endpoint that hears it
spends one claim_next that finds nothing.
A ready todo rings only 1 + doorbell_ring_margin of the doorways that listen to the whole
collection, taken in turn per endpoint (a doorway listening for that todo alone is always
rung): with a hundred agents listening, one todo wakes two, not a hundred racing for it. If
it is still pending doorbell_rering_seconds later (one read of the todos waiting), the next
ones in turn are rung, until it is claimed or every doorway has been rung once; the
heartbeat rings it again after that. So no ready todo waits while an agent listens.
A per-todo gate (doorbell_gate_seconds) suppresses a second ring of the same todo inside
its window; a re-queue by the retry scheduler clears the todo's gate entry, so it rings
again (REQ-16), and so does a todo falling due: it waited on purpose, so a ring before its
wait does not gate the ring that says it may be claimed now. The doorbell heartbeat (doorbell_heartbeat_seconds, 0 = off) rings pending
todos nobody has claimed, under the same gate, so sessions that connected after the first
ring still hear about old work. A LISTEN reconnect (resync) clears the gate and triggers one
heartbeat sweep, so every ready todo rings again; a sweep that finds the database still away
is tried again shortly.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from board.config import Settings
from board.errors import Unavailable
from board.store.store import Agent, Store
from board.tasks import cancel_and_wait

log = logging.getLogger("switchboard.mcp.doorbell")

TODOS_URI = "switchboard://todos"
TODO_URI_PREFIX = TODOS_URI + "/"
A2UI_SUFFIX = "/a2ui"  # switchboard://todos/{id}/a2ui, the A2UI todo detail resource
READY_KINDS = frozenset({"added", "released", "requeued", "retried", "due", "unblocked"})  # never "scheduled", "waiting"
REGATED_KINDS = frozenset({"requeued", "due", "unblocked"})  # ready again after a wait: the gate opens
OUTBOX_SIZE = 256
SWEEP_RETRY_SECONDS = 0.5
SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId"
RERINGS_MAX = 10000  # todos waiting for a re-ring; past it the oldest is left to the heartbeat


def todo_uri(todo_id: str) -> str:
    return TODO_URI_PREFIX + todo_id


def a2ui_uri(todo_id: str) -> str:
    return TODO_URI_PREFIX + todo_id + A2UI_SUFFIX


def may_drain(agent: Agent) -> bool:
    return agent.allows("claim") or agent.allows("claim_next")


@dataclass(eq=False)
class Doorway:
    """One live push channel of one endpoint: a legacy session's GET stream or a listen stream."""

    endpoint_id: str
    queues: frozenset[str]
    uris: frozenset[str] | None = None  # None: every todo; else only rings for these URIs (or the collection)
    read_queues: frozenset[str] = frozenset()  # queues whose todos it may read (get_todo): A2UI changes
    session_id: str | None = None  # a legacy session's GET stream: its subscriptions say what changes it hears
    outbox: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(maxsize=OUTBOX_SIZE))
    seq: int = 0  # the order doorways opened in: the turn order of the endpoint's rings
    user_id: int | None = None  # the endpoint's human, held in presence while it is open

    def wants_all(self) -> bool:
        """Listens to the whole collection (its share of rings is budgeted), not to chosen todos."""
        return self.uris is None or TODOS_URI in self.uris

    def wants(self, queue: str, uri: str) -> bool:
        if queue not in self.queues:
            return False
        return self.uris is None or TODOS_URI in self.uris or uri in self.uris

    def wake(self) -> None:
        """Wake the consumer without a ring (an empty URI is never sent)."""
        with contextlib.suppress(asyncio.QueueEmpty):
            if self.outbox.full():
                self.outbox.get_nowait()
        self.outbox.put_nowait("")

    def ring(self, uri: str) -> None:
        try:
            self.outbox.put_nowait(uri)
        except asyncio.QueueFull:  # a level trigger: the heartbeat rings it again later
            log.debug("doorway outbox full; ring dropped")


@dataclass
class Rering:
    """A ready todo rung on some of its endpoint's doorways, to ring on more if still pending."""

    endpoint_id: str
    queue: str
    due: float
    rung: set[int]  # the seq of each doorway rung for it


@dataclass(eq=False)
class LegacySession:
    """A 2025-11-25 session: its endpoint and the ServerSession its requests arrived on."""

    endpoint_id: str
    session: Any  # mcp.server.session.ServerSession
    last_seen: float
    streams: int = 0
    watching: set[str] = field(default_factory=set)  # A2UI resource URIs it subscribed to


class Doorbell:
    def __init__(self, settings: Settings, store: Store, fanout, *, session_idle_seconds: float):
        self.settings = settings
        self.store = store
        self.fanout = fanout
        self.session_idle_seconds = session_idle_seconds
        self.gate: dict[str, float] = {}
        self.considered = 0  # fan-out events handled so far (tests wait on it, not on a clock)
        self._doorways: dict[str, set[Doorway]] = {}
        self._endpoint_user: dict[str, int] = {}  # the owning human of each endpoint with a doorway
        self._resumes: set[asyncio.Task] = set()
        self._sessions: dict[str, LegacySession] = {}
        self._session_noted = asyncio.Event()
        self._sweep_now = asyncio.Event()
        self.closing = asyncio.Event()
        self._last_prune = time.monotonic()
        self._tasks: list[asyncio.Task] = []
        self._seq = itertools.count()
        self._turn: dict[str, int] = {}  # endpoint -> where its next ring starts in the turn order
        self._rerings: dict[str, Rering] = {}  # todo id -> its rings so far, while it may need more
        self._rering_now = asyncio.Event()
        # The process's Presence: a doorway holds its human, so their transitions notify.
        self.presence = getattr(fanout, "presence", None)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._consume(), name="doorbell-listen"),
                       asyncio.create_task(self._heartbeat(), name="doorbell-heartbeat"),
                       asyncio.create_task(self._rering_loop(), name="doorbell-rering")]

    async def stop(self) -> None:
        self.closing.set()
        for ways in list(self._doorways.values()):
            for doorway in list(ways):
                doorway.wake()  # listen streams end gracefully
        await cancel_and_wait([*self._tasks, *self._resumes])
        self._tasks.clear()

    # -- doorways ----------------------------------------------------------------------

    def open(self, agent: Agent, uris: frozenset[str] | None = None, session_id: str | None = None) -> Doorway:
        # Keyed by the endpoint that owns the todos it hears of: a team endpoint's is the
        # team's space endpoint (migration 0018).
        doorway = Doorway(agent.space, frozenset(agent.queues) if may_drain(agent) else frozenset(), uris,
                          frozenset(agent.queues) if agent.allows("get_todo") else frozenset(), session_id,
                          seq=next(self._seq))
        self._doorways.setdefault(agent.space, set()).add(doorway)
        self._endpoint_user[agent.space] = agent.user_id
        doorway.user_id = agent.user_id
        if self.presence is not None:
            self.presence.hold(agent.user_id)
        if doorway.queues:
            self._sweep_now.set()  # tell a new listener about work already waiting (under the gate)
        return doorway

    def close(self, doorway: Doorway) -> None:
        ways = self._doorways.get(doorway.endpoint_id)
        if ways is not None and doorway in ways:
            ways.discard(doorway)
            if self.presence is not None:
                self.presence.release(doorway.user_id)
            if not ways:
                del self._doorways[doorway.endpoint_id]
                self._endpoint_user.pop(doorway.endpoint_id, None)

    def live_doorways(self, endpoint_id: str | None = None) -> int:
        if endpoint_id is None:
            return sum(len(w) for w in self._doorways.values())
        return len(self._doorways.get(endpoint_id, ()))

    # -- ringing -----------------------------------------------------------------------

    def on_event(self, event: dict) -> None:
        kind = event.get("kind")
        if kind == "shutdown":  # the server is stopping: end every listen stream now
            self.closing.set()
            for ways in list(self._doorways.values()):
                for doorway in list(ways):
                    doorway.wake()
            return
        if kind == "resync":  # notifications were missed: ring every ready todo again, gate or not
            self.gate.clear()
            self._sweep_now.set()
            return
        if kind == "queue_resumed":
            self._on_resumed(event.get("user"), event.get("queue"))
            return
        todo_id, endpoint_id, queue = event.get("todo"), event.get("endpoint"), event.get("queue")
        if not (isinstance(todo_id, str) and isinstance(endpoint_id, str) and isinstance(queue, str)):
            return
        if self.settings.a2ui_enabled:
            self.ring_changed(todo_id, endpoint_id, queue)
        if kind in REGATED_KINDS:
            self.gate.pop(todo_id, None)  # REQ-16: a retry-scheduler re-queue rings again; so does falling due
        if kind in READY_KINDS or (kind == "reaped" and event.get("state") == "pending"):
            self.ring(todo_id, endpoint_id, queue)
        elif kind == "answered":
            self.ring_answered(todo_id, endpoint_id, queue)

    def ring(self, todo_id: str, endpoint_id: str, queue: str) -> bool:
        """Ring the endpoint's doorways for a ready todo, unless its gate is closed."""
        ways = self._doorways.get(endpoint_id)
        if not ways:
            return False  # nobody heard it, so the gate stays open for whoever connects next
        uri = todo_uri(todo_id)
        targets = [d for d in ways if d.wants(queue, uri)]
        if not targets:
            return False
        now = time.monotonic()
        if self.gate.get(todo_id, 0.0) > now:
            return False
        self.gate[todo_id] = now + self.settings.doorbell_gate_seconds
        budgeted = sorted((d for d in targets if d.wants_all()), key=lambda d: d.seq)
        chosen = self._next_in_turn(endpoint_id, budgeted, set())
        for doorway in [d for d in targets if not d.wants_all()] + chosen:
            doorway.ring(uri)
        if len(chosen) < len(budgeted) and self.settings.doorbell_rering_seconds > 0:
            self._rerings.pop(todo_id, None)
            self._rerings[todo_id] = Rering(endpoint_id, queue, now + self.settings.doorbell_rering_seconds,
                                            {d.seq for d in chosen})
            if len(self._rerings) > RERINGS_MAX:
                del self._rerings[next(iter(self._rerings))]
            self._rering_now.set()
        self._prune_gate(now)
        return True

    def _next_in_turn(self, endpoint_id: str, doorways: list[Doorway], rung: set[int]) -> list[Doorway]:
        """The next 1 + doorbell_ring_margin of these doorways (in the order they opened) not
        rung yet for this todo, starting where the endpoint's last ring stopped."""
        candidates = [d for d in doorways if d.seq not in rung]
        if not candidates:
            return []
        start = self._turn.get(endpoint_id, 0) % len(candidates)
        chosen = (candidates[start:] + candidates[:start])[:1 + self.settings.doorbell_ring_margin]
        self._turn[endpoint_id] = start + len(chosen)
        return chosen

    async def rering_due(self, now: float | None = None) -> int:
        """Ring more doorways for each todo due whose rung agents have not claimed it (still
        pending); returns how many doorways were rung."""
        now = time.monotonic() if now is None else now
        due = [t for t, r in self._rerings.items() if r.due <= now]
        if not due:
            return 0
        try:
            pending = await self.store.todos_still_pending(due)
        except Unavailable:  # asked again a period later
            for todo_id in due:
                self._rerings[todo_id].due = now + self.settings.doorbell_rering_seconds
            return 0
        rung = 0
        for todo_id in due:
            entry = self._rerings.pop(todo_id, None)
            if entry is None or todo_id not in pending:
                continue  # claimed, canceled or gone: nobody else needs waking
            uri = todo_uri(todo_id)
            budgeted = sorted((d for d in self._doorways.get(entry.endpoint_id, ())
                               if d.wants_all() and d.wants(entry.queue, uri)), key=lambda d: d.seq)
            chosen = self._next_in_turn(entry.endpoint_id, budgeted, entry.rung)
            if not chosen:
                continue  # every doorway has heard it once: the heartbeat rings it again
            for doorway in chosen:
                doorway.ring(uri)
            rung += len(chosen)
            entry.rung.update(d.seq for d in chosen)
            entry.due = now + self.settings.doorbell_rering_seconds
            self._rerings[todo_id] = entry
        return rung

    async def _rering_loop(self) -> None:
        while True:
            if not self._rerings:
                await self._rering_now.wait()
            self._rering_now.clear()
            wait = min(r.due for r in self._rerings.values()) - time.monotonic() if self._rerings else 0.0
            if wait > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._rering_now.wait(), timeout=wait)
                continue
            try:
                await self.rering_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # one failed pass never stops the re-rings
                log.exception("doorbell re-ring failed")
                await asyncio.sleep(self.settings.doorbell_rering_seconds)

    def ring_answered(self, todo_id: str, endpoint_id: str, queue: str) -> int:
        """Tell the endpoint's doorways that a person answered this todo's question: at once,
        gate or not (an answer is not a ready todo, and the agent waits on it)."""
        uri = todo_uri(todo_id)
        rung = 0
        for doorway in self._doorways.get(endpoint_id, ()):
            if doorway.wants(queue, uri):
                doorway.ring(uri)
                rung += 1
        return rung

    def ring_changed(self, todo_id: str, endpoint_id: str, queue: str) -> int:
        """Tell the endpoint's doorways subscribed to this todo's A2UI resource that it changed."""
        uri = a2ui_uri(todo_id)
        rung = 0
        for doorway in self._doorways.get(endpoint_id, ()):
            if queue not in doorway.read_queues:
                continue
            if doorway.session_id is not None:
                entry = self._sessions.get(doorway.session_id)
                wanted = entry is not None and uri in entry.watching
            else:
                wanted = doorway.uris is not None and uri in doorway.uris
            if wanted:
                doorway.ring(uri)
                rung += 1
        return rung

    def watch(self, session_id: str, agent: Agent, uri: str, on: bool = True) -> None:
        """A legacy session's resources/subscribe (on) or unsubscribe of an A2UI resource URI."""
        entry = self._sessions.get(session_id)
        if entry is None or entry.endpoint_id != agent.endpoint_id:
            return
        if on:
            entry.watching.add(uri)
        else:
            entry.watching.discard(uri)

    def _on_resumed(self, user_id: Any, queue: Any) -> None:
        endpoints = [e for e, u in self._endpoint_user.items() if u == user_id]
        if not endpoints or not isinstance(queue, str):
            return  # none of that human's endpoints listens here
        task = asyncio.create_task(self.ring_resumed(endpoints, queue), name="doorbell-resumed")
        self._resumes.add(task)
        task.add_done_callback(self._resumes.discard)

    async def ring_resumed(self, endpoint_ids: list[str], queue: str) -> int:
        """Ring a resumed queue's pending todos (oldest first) on these endpoints' doorways,
        opening the gate of each first: while paused they were rung for nothing."""
        rung = 0
        try:
            for row in await self.store.ready_todos(endpoint_ids, limit=500, queue=queue):
                self.gate.pop(row["id"], None)
                rung += self.ring(row["id"], str(row["endpoint_id"]), row["queue"])
        except Unavailable:  # the heartbeat rings them once the database is back
            log.warning("doorbell: the database is unavailable; a resumed queue rings on the next sweep")
        return rung

    def _prune_gate(self, now: float) -> None:
        if now - self._last_prune < max(self.settings.doorbell_gate_seconds, 1.0):
            return
        self._last_prune = now
        for todo_id in [t for t, until in self.gate.items() if until <= now]:
            del self.gate[todo_id]

    async def _consume(self) -> None:
        async with self.fanout.subscription(stream=False) as sub:
            while True:
                event = await sub.get()
                try:
                    self.on_event(event)
                except Exception:  # one bad event never stops the doorbell
                    log.exception("doorbell failed on a %s event", event.get("kind"))
                self.considered += 1  # events decided on, rung or not

    async def _heartbeat(self) -> None:
        period = self.settings.doorbell_heartbeat_seconds
        beating = bool(period and period > 0)
        while True:
            asked = True
            try:
                # With the heartbeat off, still wake now and then to forget idled-out sessions.
                await asyncio.wait_for(self._sweep_now.wait(), timeout=period if beating else 60.0)
            except asyncio.TimeoutError:
                asked = False
            self._sweep_now.clear()
            self._prune_sessions()
            if not self._doorways or not (asked or beating):
                continue
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Unavailable:  # the database is still coming back: try again shortly
                log.warning("doorbell sweep: the database is unavailable; trying again in %.1f s",
                            SWEEP_RETRY_SECONDS)
                asyncio.get_running_loop().call_later(SWEEP_RETRY_SECONDS, self._sweep_now.set)
            except Exception:
                log.exception("doorbell heartbeat failed; trying again next period")

    async def sweep(self) -> int:
        """Ring every pending todo (ids only, oldest first) under the gate, once the doorways'
        humans are notifying (presence), so a todo added meanwhile is rung by one or the other."""
        if self.presence is not None:
            await self.presence.settled(self.settings.db_wait_seconds)
        rung = 0
        for row in await self.store.ready_todos(list(self._doorways), limit=500):
            if self.ring(row["id"], str(row["endpoint_id"]), row["queue"]):
                rung += 1
        return rung

    # -- 2025-11-25 sessions -------------------------------------------------------------

    def note_session(self, session_id: str, agent: Agent, server_session: Any) -> None:
        """Remember the ServerSession of a session id (from the session's own requests)."""
        entry = self._sessions.get(session_id)
        now = time.monotonic()
        if entry is None:
            self._sessions[session_id] = LegacySession(agent.endpoint_id, server_session, now)
            self._session_noted.set()
            self._session_noted = asyncio.Event()
        elif entry.endpoint_id == agent.endpoint_id:
            entry.session = server_session
            entry.last_seen = now

    def touch_session(self, session_id: str) -> None:
        entry = self._sessions.get(session_id)
        if entry is not None:
            entry.last_seen = time.monotonic()

    def forget_session(self, session_id: str, endpoint_id: str) -> None:
        entry = self._sessions.get(session_id)
        if entry is not None and entry.endpoint_id == endpoint_id:
            del self._sessions[session_id]

    def _prune_sessions(self) -> None:
        """Drop sessions the SDK has idled out: no open stream and no request for longer
        than its idle timeout (the same rule the session manager applies)."""
        horizon = time.monotonic() - self.session_idle_seconds - 5
        for session_id in [s for s, e in self._sessions.items() if e.streams == 0 and e.last_seen < horizon]:
            del self._sessions[session_id]

    async def _session_for(self, session_id: str, endpoint_id: str, wait: float = 5.0) -> LegacySession | None:
        deadline = time.monotonic() + wait
        while True:
            entry = self._sessions.get(session_id)
            if entry is not None:
                return entry if entry.endpoint_id == endpoint_id else None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._session_noted.wait(), timeout=remaining)

    async def pump_session(self, session_id: str, agent: Agent, doorway: Doorway) -> None:
        """Deliver a legacy session's rings on its standalone stream while its GET is open."""
        entry = None
        while True:
            uri = await doorway.outbox.get()
            if not uri:
                continue
            if entry is None:
                # The GET can open a moment before the session's notifications/initialized is handled.
                entry = await self._session_for(session_id, agent.endpoint_id)
                if entry is None:
                    continue
            try:
                await asyncio.wait_for(entry.session.send_resource_updated(uri), timeout=5)
            except asyncio.TimeoutError:
                log.debug("doorbell ring to a slow session dropped")
            except Exception:
                log.debug("doorbell ring to a closed session dropped", exc_info=True)

    @contextlib.asynccontextmanager
    async def session_stream(self, session_id: str, agent: Agent):
        """While a legacy session's GET stream is open, it is a doorway of its endpoint."""
        doorway = self.open(agent, session_id=session_id)
        entry = self._sessions.get(session_id)
        if entry is not None and entry.endpoint_id == agent.endpoint_id:
            entry.streams += 1
        pump = asyncio.create_task(self.pump_session(session_id, agent, doorway), name="doorbell-session-pump")
        try:
            yield doorway
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
            self.close(doorway)
            entry = self._sessions.get(session_id)
            if entry is not None and entry.endpoint_id == agent.endpoint_id:
                entry.streams = max(0, entry.streams - 1)
                entry.last_seen = time.monotonic()

    # -- 2026-07-28 subscriptions/listen -------------------------------------------------

    async def listen(self, ctx, params: types.SubscriptionsListenRequestParams, *, agent: Agent,
                     still_authorized) -> types.SubscriptionsListenResult:
        """Serve one listen stream: acknowledge the honored filter, then ring until the
        client leaves, the server stops, or the credential is revoked."""
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        requested = params.notifications.resource_subscriptions or []
        ours = [u for u in dict.fromkeys(requested)
                if u == TODOS_URI or (u.startswith(TODO_URI_PREFIX) and len(u) > len(TODO_URI_PREFIX)
                                      and (self.settings.a2ui_enabled or not u.endswith(A2UI_SUFFIX)))]
        # Only the doorbell URIs are honored; list-changed kinds never fire here, so they are not promised.
        honored = types.SubscriptionFilter(resource_subscriptions=ours or None)
        meta = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        doorway = self.open(agent, frozenset(ours)) if ours else None
        recheck = max(self.settings.mcp_auth_recheck_seconds, 0.05)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
                related_request_id=subscription_id)
            next_check = time.monotonic() + recheck
            while not self.closing.is_set():
                timeout = max(0.0, next_check - time.monotonic())
                uri = None
                try:
                    if doorway is None:
                        await asyncio.wait_for(self.closing.wait(), timeout=timeout)
                    else:
                        uri = await asyncio.wait_for(doorway.outbox.get(), timeout=timeout)
                except asyncio.TimeoutError:
                    pass
                if self.closing.is_set():
                    break
                if uri:
                    await ctx.session.send_notification(
                        types.ResourceUpdatedNotification(
                            params=types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta)),
                        related_request_id=subscription_id)
                if time.monotonic() >= next_check:
                    if not await still_authorized():
                        raise MCPError(types.INVALID_REQUEST, "the credential is no longer valid")
                    next_check = time.monotonic() + recheck
        finally:
            if doorway is not None:
                self.close(doorway)
        return types.SubscriptionsListenResult(_meta=meta)
