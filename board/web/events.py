"""Live updates for the Board over SSE (/events).

Each stream is one subscription to the process's single LISTEN fan-out (board/live/fanout.py).
A notification carries ids only. The stream maps its endpoint to the owning user (cached:
an endpoint never changes owner) and drops anything that is not its own human's; for its
own, it re-reads the todo through the store with the human as the caller (the owning-human
predicate in the same statement as the read) and renders the same partials the pages use.

The overview of the human's queues (board/web/overview.py) comes with every snapshot and is
sent again, as an `overview` event, when the human's todos change (coalesced: at most one
refresh per stream every OVERVIEW_MIN_SECONDS, one read shared by the human's streams), when
one of their queues is paused or resumed, and every OVERVIEW_IDLE_SECONDS regardless.

On connect, and whenever the fan-out asks for a resync (its LISTEN connection came back,
or this stream fell behind), the stream sends a full snapshot of what the page shows, so a
reconnecting browser and a reconnecting database both end in a full refresh. Streams that
connect together (a restart's reconnects, many tabs) share snapshots, but only ones that
miss nothing they will not be told of (begun after they subscribed, or shortly before with
nothing announced in between): one snapshot per human and view (SnapshotReads), rendered
with CSRF_SLOT and sent to each session with its own form token, one overview read per
human. A read that finds the database away ends the stream cleanly with a `retry:`
hint; the browser's reconnect starts with a snapshot again.

A notification about a todo does not wake every stream: one task per process (BoardRows)
consumes them, maps each endpoint to its space (a person's own, or a team's: every member's
streams of it are keyed by the space), reads the changed row once per (filters, watched)
among that space's streams, renders it per viewer, and hands each of those streams its
frame ready. A stream then only writes it; another space's streams never hear of it.

A space's `activity` notification (a person's action, recorded) is announced by its other
members' streams ("Bob canceled todo Fix the build"), never the actor's, who had their own
flash; a `member_removed` one ends the removed person's streams of the team, in every process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import AsyncIterator

from litestar import Request, get
from litestar.response import ServerSentEvent, ServerSentEventMessage

from board.errors import Invalid, NotFound, Unavailable
from board.store.store import Human, call_deadline, deadline_after
from board.store.vocabulary import QUEUE_KINDS
from board.live.fanout import RESYNC
from board.tasks import FreshReads, cancel_and_wait, shared_future
from board.web.context import Filters, app_single, drawer_todo, require_human, runtime, web_state
from board.view.records import activity_sentence
from board.web.overview import RefreshSchedule, chart_window_of, overview_reads, render_overview
from board.web.templating import render

PING_SECONDS = 15.0
# An open drawer is re-read this often even when nothing is announced, so the open
# attempt's liveness (derived at read time: live, quiet, overdue) moves on by itself.
WATCH_REFRESH_SECONDS = 5.0
# How long a browser waits before it reconnects a stream that ended (the `retry:` field):
# short, so a stream that ended in an outage is back within 2 s of Postgres.
RETRY_MS = 1000
# The same when the process stops (a restart): shorter, so the browser is back, on another
# process, well within a second, and its snapshot there makes up for whatever it missed.
STOPPING_RETRY_MS = 250

log = logging.getLogger("switchboard.live")

# Spelled as Litestar's ServerSentEvent spells them, so its default (no-cache) does not add a
# second Cache-Control; it sets X-Accel-Buffering: no itself.
SSE_HEADERS = {"Cache-Control": "no-store"}


@dataclass
class FramedMessage(ServerSentEventMessage):
    """An event already encoded for the wire: sent as it is by every stream it goes to."""

    frame: bytes = b""

    def encode(self) -> bytes:
        return self.frame


# Stands for a session's CSRF token in a drawer rendered once for all of a human's
# sessions; each stream's frame carries its own token in its place. Random per process, so
# no todo's text can contain it.
CSRF_SLOT = secrets.token_hex(16)


class Encoded:
    """A read's fragments shared by many streams, turned into an event once: a thousand
    streams of one human send one encoded frame per session, not a thousand encodings."""

    __slots__ = ("data", "_text", "_frames")

    def __init__(self, data: dict):
        self.data = data
        self._text: str | None = None
        self._frames: dict[tuple[str, str | None], FramedMessage] = {}

    def message(self, event: str, csrf: str | None = None) -> ServerSentEventMessage:
        """The event's frame; with csrf, the CSRF_SLOT in it replaced by that token."""
        framed = self._frames.get((event, csrf))
        if framed is None:
            if self._text is None:
                self._text = json.dumps(self.data, separators=(",", ":"))
            text = self._text if csrf is None else self._text.replace(CSRF_SLOT, csrf)
            # One data line: json.dumps escapes every line break (and, ASCII only, U+2028).
            framed = FramedMessage(frame=f"event: {event}\r\ndata: {text}\r\n\r\n".encode())
            if len(self._frames) < 256:  # a human's sessions; past that, framed per stream
                self._frames[(event, csrf)] = framed
        return framed


async def encoded(read) -> Encoded:
    return Encoded(await read)


class OverviewRenders:
    """The overview's fragment per (overview read, back link), shared by every stream that
    shows the same read: rendered once with CSRF_SLOT for the form token, each session's
    frame carrying its own token (Encoded.message)."""

    def __init__(self, size: int = 256):
        self.size = size
        self._entries: OrderedDict[tuple, tuple[object, Encoded]] = OrderedDict()

    def get(self, data, back: str, admin: bool) -> Encoded:
        key = (id(data), back, admin)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is data:  # the same read, not a reused id
            return entry[1]
        out = Encoded({"overview": render_overview(data, csrf=CSRF_SLOT, back=back, admin=admin)})
        self._entries[key] = (data, out)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return out


def row_read(make) -> asyncio.Future:
    """A changed row's read, shared by every stream of the space and view it goes to: a
    failure other than the database being away is logged once, never left unretrieved."""
    return shared_future(make(), log, "a live update's read", (Unavailable,))


# What BoardRows hands a stream: its row's frame ready ("encoded", for the watched drawer
# with CSRF_SLOT), or word that the read met the database away.
ROW = "board-row"
ROW_UNAVAILABLE = {"kind": "board-row-unavailable"}


@dataclass(eq=False, slots=True)
class RowStream:
    """A live stream as BoardRows sees it: whose, which rows it shows, which drawer is open."""

    human: Human
    row_key: Filters  # the stream's filters without its page: what a row's rendering depends on
    watching: str | None
    sub: object  # its fan-out Subscription


class BoardRows:
    """The one consumer of todos' notifications for a process's Board streams.

    For each notification it finds the endpoint's space (cached: a person's own, or a team's),
    and if that space has live streams here, whichever members' they are, reads the todo's
    row (and drawer, for streams that have it open) once per (filters, watched) among them,
    renders it once per viewer (the person and their role), then puts the frame into each of
    those streams' subscriptions, where it waits behind what they were sent before. Reads start
    at once; frames of one endpoint are handed over in the order of its notifications. A
    read that meets the database away ends the streams it was for (they come back)."""

    def __init__(self, app, store, fanout):
        self.app, self.store, self.fanout = app, store, fanout
        self._streams: dict[int, set[RowStream]] = {}
        self._last: dict[str, asyncio.Task] = {}  # per endpoint: its latest notification's delivery
        self._task: asyncio.Task | None = None

    def add(self, stream: RowStream) -> None:
        self._streams.setdefault(stream.human.user_id, set()).add(stream)

    def discard(self, stream: RowStream) -> None:
        streams = self._streams.get(stream.human.user_id)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self._streams[stream.human.user_id]

    @contextlib.asynccontextmanager
    async def streaming(self, stream: RowStream) -> AsyncIterator[RowStream]:
        """stream handed its human's rows while inside."""
        self.add(stream)
        try:
            yield stream
        finally:
            self.discard(stream)

    def start(self) -> None:
        # Subscribed now, not when the task first runs: nothing published from here on is missed.
        sub = self.fanout.subscribe(stream=False)
        self._task = asyncio.create_task(self._run(sub), name="switchboard-board-rows")

    async def stop(self) -> None:
        await cancel_and_wait([self._task, *self._last.values()])
        self._task = None

    async def _run(self, sub) -> None:
        try:
            overflows = 0
            while True:
                event = await sub.get()
                if event is RESYNC:
                    if sub.overflows != overflows:  # this consumer fell behind: its streams may have missed rows
                        overflows = sub.overflows
                        for streams in list(self._streams.values()):
                            for stream in list(streams):
                                stream.sub.put(RESYNC)
                    continue  # a LISTEN reconnect's resync reaches every stream itself
                endpoint, todo_id = event.get("endpoint"), event.get("todo")
                if not endpoint or not todo_id or not self._streams:
                    continue
                endpoint = str(endpoint)
                task = asyncio.create_task(self._deliver(event, endpoint, str(todo_id), self._last.get(endpoint)))
                self._last[endpoint] = task
                task.add_done_callback(lambda done, key=endpoint: self._ended(key, done))
        finally:
            self.fanout.unsubscribe(sub)

    def _ended(self, endpoint: str, done: asyncio.Task) -> None:
        if self._last.get(endpoint) is done:
            del self._last[endpoint]
        if not done.cancelled() and done.exception() is not None:  # taken here, never left unretrieved
            log.error("a live row's delivery failed: %s", type(done.exception()).__name__, exc_info=done.exception())

    async def _deliver(self, event: dict, endpoint: str, todo_id: str, before: asyncio.Task | None) -> None:
        try:
            owner = await web_state(self.app).owner_of(self.store, endpoint)
        except Unavailable:  # whose change it is cannot be told: every stream ends, and comes back
            reads = None
            members = [(s, None) for group in self._streams.values() for s in group]
        except Exception:  # a fault of ours, logged once where the owner's read failed: this change is lost
            return
        else:
            # Each stream's key as it stands now: a drawer closed meanwhile still gets this frame.
            members = [(s, (s.row_key, s.watching == todo_id)) for s in self._streams.get(owner, ())]
            reads = {}  # one read per view among the space's streams, whoever's they are
            for stream, key in members:
                if key not in reads:
                    reads[key] = row_read(lambda f=key[0], w=key[1], h=stream.human:
                                          read_todo(self.store, h, todo_id, f, w))
        if reads:
            await asyncio.wait(reads.values())
        if before is not None and not before.done():
            await asyncio.wait([before])  # the endpoint's earlier frames first
        frames = {}
        for stream, key in members:
            # Rendered once per view and viewer: what a page shows may differ by the person
            # and their role in the space (who holds a todo, which actions they may take).
            frame_key = (key, viewer(stream.human))
            if frame_key not in frames:
                frames[frame_key] = self._frame(reads, key, stream.human, todo_id)
            frame = frames[frame_key]
            if frame is not None:  # None: the read or its rendering failed otherwise, and was logged
                stream.sub.put(frame)

    @staticmethod
    def _frame(reads: dict | None, key, human: Human, todo_id: str) -> dict | None:
        if key is None:
            return ROW_UNAVAILABLE
        read = reads[key]
        failed = read.exception() if not read.cancelled() else asyncio.CancelledError()
        if isinstance(failed, Unavailable):
            return ROW_UNAVAILABLE
        if failed:
            return None
        try:
            encoded_row = Encoded(render_read(read.result(), human, key[0], CSRF_SLOT))
        except Exception as err:  # a fault of ours: logged, and this change is lost for these streams
            log.error("a live update's rendering failed: %s", type(err).__name__, exc_info=err)
            return None
        return {"kind": ROW, "todo": todo_id, "watched": key[1], "encoded": encoded_row}


def viewer(human: Human) -> tuple[int, str]:
    """What of the person a page's rendering depends on, beyond the space: who they are and
    their role there."""
    return human.actor, human.role


class SnapshotReads:
    """A stream's first snapshot, shared by the streams of one human and view that
    subscribed before it began, or shortly after with nothing announced in between: a burst
    of connections (a restart's reconnects, many tabs) makes one read and rendering per
    view, not one per stream (each session's frame carries its own CSRF token in CSRF_SLOT's
    place). A stream never takes a snapshot that could miss
    what it will not be told of (board/tasks.py's FreshReads)."""

    def __init__(self, size: int = 1024, generation=None):
        self._reads = FreshReads(log, "a stream's snapshot", (Unavailable,), size, generation=generation)

    def stamp(self) -> tuple[float, float]:
        """Now, for get's `since`: taken by a stream once it has subscribed."""
        return self._reads.stamp()

    def get(self, key: tuple, since: tuple[float, float], make) -> asyncio.Future:
        """The shared snapshot for key that covers `since` (a stamp()), else the next one,
        from make()."""
        return self._reads.get(key, since, lambda: encoded(make()))


def _snapshots(app) -> SnapshotReads:
    return app_single(app, "board_snapshot_reads",
                      lambda: SnapshotReads(generation=lambda: app.state.runtime.fanout.generation))


def _overview_renders(app) -> OverviewRenders:
    return app_single(app, "board_overview_renders", OverviewRenders)


class ActivityWords:
    """What a Board announces of an `activity` notification ("Bob canceled todo Fix the
    build"): worked out once per notification, for every stream of its space that says it
    (one read of the todo's title, not one per member)."""

    def __init__(self, size: int = 256):
        self.size = size
        self._entries: OrderedDict[int, tuple[dict, asyncio.Future]] = OrderedDict()

    def get(self, store, human: Human, event: dict) -> asyncio.Future:
        entry = self._entries.get(id(event))
        if entry is not None and entry[0] is event:  # the same notification, not a reused id
            return entry[1]
        words = shared_future(self._sentence(store, human, event), log, "an activity's words", ())
        self._entries[id(event)] = (event, words)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return words

    @staticmethod
    async def _sentence(store, human: Human, event: dict) -> str:
        todos = event.get("todos") or []
        title = None
        if len(todos) == 1 and event.get("count") == 1 and event.get("action") != "delete":
            try:  # the todo's title, read in the space the stream shows; its short id when it cannot be
                row = await store.todo_list_row(human, todos[0])
                title = row["title"] if row else None
            except (NotFound, Invalid, Unavailable):
                pass
        return activity_sentence(event, title)


def _activity_words(app) -> ActivityWords:
    return app_single(app, "board_activity_words", ActivityWords)


def heard_from_another(event: dict, human: Human) -> bool:
    """Whether an `activity` notification is for this stream to announce: an action in the
    space it shows by someone else (the actor had their own flash)."""
    return event.get("space") == human.user_id and event.get("actor_id") != human.actor


def ends_for(event: dict, human: Human) -> bool:
    """Whether a member change ends this stream: the person it shows a team to was removed
    from it (or their role changed: the stream comes back with it)."""
    return event.get("team") == human.user_id and event.get("user") == human.actor


def message(event: str, data: dict) -> ServerSentEventMessage:
    return ServerSentEventMessage(event=event, data=json.dumps(data, separators=(",", ":")))


async def read_todo(store, human: Human, todo_id: str, filters: Filters, watched: bool) -> dict:
    """One changed todo as the space's streams of a view show it: its list row (with whether
    it still matches the filters), and its drawer's read when it is watched; None when it is
    gone (or not the space's)."""
    todo = None
    try:
        row = await store.todo_list_row(human, todo_id, **filters.store_filters())
        todo = await drawer_todo(store, human, todo_id) if watched and row else None
    except (NotFound, Invalid):
        row = None
    return {"id": todo_id, "row": row, "todo": todo, "watched": watched}


def render_read(read: dict, human: Human, filters: Filters, csrf: str) -> dict:
    """The fragments of a read_todo for one person: the row, and the drawer when watched."""
    row = read["row"]
    if row is None:
        return {"id": read["id"], "gone": True}
    out = {"id": read["id"], "gone": False, "matches": row["matches"],
           "row": render("_todo_row.html", todo=row, human=human, filters=filters)}
    if read["watched"]:
        out["drawer"] = render("_drawer.html", todo=read["todo"], human=human, csrf=csrf, flash=None)
    return out


async def render_todo(store, human: Human, todo_id: str, filters: Filters, watched: bool, csrf: str) -> dict:
    """The fragments for one changed todo, read and rendered for one stream."""
    return render_read(await read_todo(store, human, todo_id, filters, watched), human, filters, csrf)


async def snapshot(store, human: Human, filters: Filters, watched: str | None, csrf: str, overview) -> dict:
    listing = await store.todo_list(human, **filters.store_filters(), sort=filters.sort, limit=filters.page_size,
                                    cursor=filters.cursor)
    rows = "".join(render("_todo_row.html", todo=t, human=human, filters=filters) for t in listing["todos"])
    out = {"rows": rows, "has_more": listing["next_cursor"] is not None, "drawer": None, "watched": watched,
           "overview": render_overview(await asyncio.shield(overview), csrf=csrf, back="/" + filters.query(),
                                       admin=human.may("admin"))}
    if watched:
        changed = await render_todo(store, human, watched, filters, True, csrf)
        out["drawer"] = changed.get("drawer")
        out["gone"] = changed["gone"]
    return out


def unavailable_stream() -> ServerSentEvent:
    """The answer to a (re)connect that finds the database away: a stream, not a 503 page (a
    browser's EventSource gives up on any status but 200), that says so and ends, so the
    browser comes back after RETRY_MS and finds Postgres as soon as it is back."""

    async def once() -> AsyncIterator[ServerSentEventMessage]:
        yield ServerSentEventMessage(event="unavailable", data=json.dumps({"retry_ms": RETRY_MS}), retry=RETRY_MS)

    return ServerSentEvent(once(), retry_duration=RETRY_MS, headers=SSE_HEADERS)


@get("/events", name="events")
async def events(request: Request) -> ServerSentEvent:
    rt = runtime(request)
    try:  # the session lookup is bounded like a page's; the stream outlives any deadline
        with call_deadline(deadline_after(rt.settings.db_wait_seconds)):
            human, session = await require_human(request)
            watched = request.query_params.get("todo") or None
            if watched:  # a todo's page streams in the todo's space, as the page shows it
                human = await rt.store.human_for_todo(Human(human.actor, human.username), watched) or human
    except Unavailable:
        return unavailable_stream()
    store, fanout = rt.store, rt.fanout
    rows: BoardRows = request.app.state.board_rows
    filters = Filters.of(request.query_params)
    row_key = replace(filters, cursor=None)  # a changed row depends on the filters, not the page
    csrf = session.csrf

    overviews = overview_reads(request.app)
    snapshots = _snapshots(request.app)
    renders = _overview_renders(request.app)
    activity = _activity_words(request.app)
    window = chart_window_of(request)
    back = "/" + filters.query()

    def first_snapshot(watching: str | None) -> asyncio.Future:
        """Called once subscribed: a snapshot that misses nothing from now on, shared with
        the streams of this human and view (and its overview with every stream of the
        human's)."""
        since = snapshots.stamp()
        return snapshots.get((human.user_id, viewer(human), filters.query(), watching, window.key), since,
                             lambda: snapshot(store, human, filters, watching, CSRF_SLOT,
                                              overviews.get(store, human, window, since=since)))

    async def stream() -> AsyncIterator[ServerSentEventMessage]:
        # One generator for the whole stream: every frame passes through each generator of
        # the chain, and a thousand streams pay for each a transition.
        try:
            async with fanout.subscription(todos=False) as sub, \
                    rows.streaming(RowStream(human, row_key, watched, sub)) as me, \
                    fanout.presence.listening(human.user_id, rt.settings.db_wait_seconds):
                # Subscribed, handed rows, and this human's transitions notifying (presence), before
                # the snapshot: nothing committed in between is missed.
                first = await asyncio.shield(first_snapshot(me.watching))
                gone = first.data.get("gone")
                frame = first.message("snapshot", csrf)
                del first  # an idle stream keeps no snapshot alive (tens of KB each)
                yield frame
                del frame
                if gone:
                    me.watching = None  # absent, or not this human's: nothing more to watch
                loop = asyncio.get_running_loop()
                refresh_at = loop.time() + WATCH_REFRESH_SECONDS
                # The overview: refreshed when this human's todos change, coalesced (RefreshSchedule),
                # and now and then while nothing changes, so the chart's window moves on.
                overview = RefreshSchedule.starting(loop.time())
                while True:
                    now = loop.time()
                    if overview.due(now):  # checked first, so a stream of events cannot hold it off
                        overview.sent(now)
                        data = await asyncio.shield(overviews.get(store, human, window))
                        yield renders.get(data, back, human.may("admin")).message("overview", csrf)
                        continue
                    event = await sub.get(min(refresh_at if me.watching else now + PING_SECONDS, overview.at))
                    if event is None:
                        if overview.due(loop.time()):
                            continue
                        elif me.watching:
                            refresh_at = loop.time() + WATCH_REFRESH_SECONDS
                            data = await render_todo(store, human, me.watching, filters, True, csrf)
                            if data["gone"]:
                                me.watching = None
                            yield message("todo", data)
                        else:
                            yield ServerSentEventMessage(comment="ping")
                        continue
                    kind = event.get("kind")
                    if kind == ROW:  # one of this human's todos changed: its row (and drawer), ready
                        overview.changed(loop.time())
                        if event["watched"]:
                            refresh_at = loop.time() + WATCH_REFRESH_SECONDS
                        yield event["encoded"].message("todo", csrf if event["watched"] else None)
                    elif event is ROW_UNAVAILABLE:
                        raise Unavailable()
                    elif kind == "shutdown":  # the process is stopping: end the stream; the browser reconnects
                        yield ServerSentEventMessage(data=None, comment="stopping", retry=STOPPING_RETRY_MS)
                        return
                    elif kind == "resync":
                        yield (await asyncio.shield(first_snapshot(me.watching))).message("snapshot", csrf)
                        overview.sent(loop.time())
                    elif kind == "activity" and heard_from_another(event, human):
                        said = await asyncio.shield(activity.get(store, human, event))
                        yield message("activity", {"text": said, "todos": event.get("todos") or []})
                    elif kind == "member_removed" and ends_for(event, human):
                        # No longer a member: this stream of the team ends, and says why.
                        yield message("removed", {"team": human.space_name or ""})
                        return
                    elif kind == "member_changed" and ends_for(event, human):
                        return  # a new role: the browser reconnects and the stream shows it
                    elif kind in QUEUE_KINDS and event.get("user") == human.user_id:
                        # One of this human's queues paused or resumed.
                        overviews.forget(human.user_id)
                        overview.at_once(loop.time())
        except Unavailable:  # a read met the database away: end cleanly; the browser comes back
            yield ServerSentEventMessage(event="unavailable", data=json.dumps({"retry_ms": RETRY_MS}),
                                         retry=RETRY_MS)

    return ServerSentEvent(stream(), retry_duration=RETRY_MS, headers=SSE_HEADERS)


def handlers() -> list:
    return [events]

