"""The Board's overview of a human's queues: todos counted by state in each queue, each count
a link to the filtered list (pending ones apart: ready, scheduled and waiting), and each queue's limit
on the todos held at once ("4 of 4 running"); the outcomes of the last hour, day or week (the human's choice)
as a small server-rendered SVG chart with its figures as text; and the Pause/Resume control
and limit field of each queue (their form posts, and the chart window's, are board/web/queues.py's). Shared by the pages and the live stream; no routes here.

Both reads go through the store with the signed-in human as the caller (scoped in the
statements). Live streams (board/web/events.py) refresh the overview when the human's todos change, at
most once per OVERVIEW_MIN_SECONDS, and share one read among the streams of one human that
refresh within that time (OverviewReads).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from board.errors import Unavailable
from board.store.store import Human
from board.tasks import FreshReads
from board.web.context import Filters, app_single
from board.web.templating import render



@dataclass(frozen=True)
class ChartWindow:
    """One of the charts' windows: its bars (the newest, at the right, holds now) and how
    the page names it. Bucket lengths are whole multiples of the five minutes the counts are
    kept in (migration 0007), aligned to UTC."""

    key: str
    label: str  # the column heading and the choice's button
    bucket_seconds: int
    buckets: int
    each: str  # what one bar covers, for the chart's description

    @property
    def lower(self) -> str:
        return self.label[0].lower() + self.label[1:]


WINDOWS = {w.key: w for w in (ChartWindow("hour", "Last hour", 300, 12, "5 minutes"),
                              ChartWindow("day", "Last day", 3600, 24, "hour"),
                              ChartWindow("week", "Last week", 6 * 3600, 28, "6 hours"))}
DEFAULT_WINDOW = "hour"

log = logging.getLogger("switchboard.web")

# The window a human chose, kept like the colour scheme: a cookie the pages and the live
# stream read (the choice is posted to /chart, board/web/queues.py).
CHART_COOKIE = "sb_chart"
CHART_COOKIE_MAX_AGE = 400 * 24 * 3600
# The chart's outcomes, bottom of a bar first; a died attempt's lease lapsed (lease_expired
# on a takeover, reaped by the reaper).
CHART_OUTCOMES = ("completed", "released", "failed", "died")
CHART_WIDTH, CHART_HEIGHT = 120, 32
# Live refreshes: at most one per stream this often while its todos change, and one at
# least this often while nothing does, so the chart's window moves on.
OVERVIEW_MIN_SECONDS = 2.0
OVERVIEW_IDLE_SECONDS = 60.0

# Where each count's link goes: the list's own filters (state, queue, dead_letter). The list has no
# filter for "retrying" alone, so that count opens the queue's failed todos (the dead
# letters among them are marked); each interrupt state has its own.
# Each column: its key, its heading, its link's filters, and what its link says after the
# count to a screen reader ("3 pending in builds"; a noun as singular and plural: "1 dead
# letter in builds").
COUNT_COLUMNS = (
    # Pending todos apart: ready (may be claimed now), scheduled (waiting for their start time)
    # and waiting (for other todos to be done).
    ("ready", "Ready", {"start": "ready"}, "ready"),
    ("scheduled", "Scheduled", {"start": "scheduled"}, "scheduled"),
    ("waiting", "Waiting", {"start": "waiting"}, "waiting for other todos"),
    ("claimed", "Claimed", {"state": "claimed"}, "claimed"),
    # Interrupted todos, input_required and auth_required (linked apart): a person is needed.
    ("interrupted", "Waiting for a person", None, "waiting for a person"),
    ("retrying", "Retrying", {"state": "failed"}, "retrying"),
    ("dead_letter", "Dead letters", {"dead_letter": True}, ("dead letter", "dead letters")),
    ("done", "Done", {"state": "done"}, "done"),
    ("canceled", "Canceled", {"state": "canceled"}, "canceled"),
)


def list_link(queue: str, **filters: Any) -> str:
    return "/" + Filters(queue=queue, **filters).query()


def limit_text(limit: dict) -> str:
    """A queue's limit as the overview says it: "4 of 4 running"."""
    return f"{limit['held']} of {limit['max']} running"


def limit_id(queue: str) -> str:
    """The id of a queue's limit field (focused again after its form posts)."""
    return f"queue-limit-{queue}"


def toggle_id(queue: str) -> str:
    """The id of a queue's Pause/Resume button (queue names are valid in an id and a URL fragment)."""
    return f"queue-toggle-{queue}"


def chart_window_of(request) -> ChartWindow:
    """The window the human chose (its cookie), else the last hour."""
    return WINDOWS.get(request.cookies.get(CHART_COOKIE) or "", WINDOWS[DEFAULT_WINDOW])


def chart_bars(buckets: list[dict[str, int]], scale: int) -> list[dict]:
    """Stacked bars, oldest bucket at the left: one rect per outcome with a count. A count
    too small for the scale still shows as a 1-unit sliver."""
    step = CHART_WIDTH / len(buckets)
    bars = []
    for i, bucket in enumerate(buckets):
        y = float(CHART_HEIGHT)
        for outcome in CHART_OUTCOMES:
            n = bucket[outcome]
            if not n:
                continue
            h = min(y, max(1.0, n * (CHART_HEIGHT - 2) / scale))
            y -= h
            bars.append({"outcome": outcome, "x": round(i * step + 1, 2), "y": round(y, 2),
                         "w": round(step - 2, 2), "h": round(h, 2)})
    return bars


def summary_text(totals: dict[str, int]) -> str:
    if not any(totals.values()):
        return "no attempts closed"
    return ", ".join(f"{totals[o]} {o}" for o in CHART_OUTCOMES)


async def overview_data(store, human: Human, now: datetime | None = None,
                        window: ChartWindow = WINDOWS[DEFAULT_WINDOW]) -> dict:
    """The overview as the template shows it: each queue's counts, pause and chart of the
    attempts closed in the window (from the counts written at close, so pruning and
    retention leave them alone)."""
    now = now or datetime.now(timezone.utc)
    n = window.buckets
    rows = await store.queue_overview(human)
    closed = await store.queue_outcomes(human, buckets=n, bucket_seconds=window.bucket_seconds, now=now)
    per_queue: dict[str, list[dict[str, int]]] = {}
    for r in closed:
        bucket = int(r["bucket"])
        if not 0 <= bucket < n:
            continue
        outcome = "died" if r["died"] else r["outcome"]
        buckets = per_queue.setdefault(r["queue"], [dict.fromkeys(CHART_OUTCOMES, 0) for _ in range(n)])
        buckets[n - 1 - bucket][outcome] += int(r["n"])  # bucket 0 is the newest: at the right
    empty = [dict.fromkeys(CHART_OUTCOMES, 0) for _ in range(n)]
    scale = max([sum(b.values()) for bs in per_queue.values() for b in bs] + [1])
    queues = []
    for r in rows:
        buckets = per_queue.get(r["queue"], empty)
        totals = {o: sum(b[o] for b in buckets) for o in CHART_OUTCOMES}
        counts = {k: int(r[k]) for k in ("pending", "claimed", "input_required", "auth_required", "retrying",
                                          "done", "canceled")}
        counts["dead_letter"] = int(r["dead"])
        counts["interrupted"] = counts["input_required"] + counts["auth_required"]
        counts["scheduled"] = int(r["scheduled"])
        counts["waiting"] = int(r["waiting"])
        counts["ready"] = counts["pending"] - counts["scheduled"] - counts["waiting"]
        # What the queue's limit counts (the store's queue_room): todos claimed or waiting for a person.
        held = counts["claimed"] + counts["interrupted"]
        limit = None if r["max_held"] is None else {"max": int(r["max_held"]), "held": held,
                                                    "full": held >= int(r["max_held"])}
        queues.append({"name": r["queue"], "paused_at": r["paused_at"], "limit": limit, "counts": counts,
                       "totals": totals, "summary": summary_text(totals), "bars": chart_bars(buckets, scale)})
    return {"queues": queues, "now": now, "window": window}


def overview_context(data: dict, back: str) -> dict:
    """What _overview.html reads, as one `overview` value: the data, the count columns and
    their links, the chart's size, and back (where a Pause/Resume post returns, a local path)."""
    return {"overview": dict(data, columns=COUNT_COLUMNS, link=list_link, toggle_id=toggle_id, limit_id=limit_id,
                             limit_text=limit_text, back=back,
                             chart={"w": CHART_WIDTH, "h": CHART_HEIGHT}, windows=WINDOWS.values())}


def render_overview(data: dict, *, csrf: str, back: str, admin: bool) -> str:
    """The overview partial alone, for the live updates: shared by the streams of a space,
    drawn with its pause and limit forms for its admins only."""
    return render("_overview.html", csrf=csrf, now=data["now"], may=lambda role: admin,
                  **overview_context(data, back))


@dataclass
class RefreshSchedule:
    """When one live stream sends the overview next: a change of the human's todos asks for
    a refresh at once, but never sooner than min_gap after the last one (changes in between
    coalesce into it); with no change, idle after the last one; a pause or resume at once."""

    sent_at: float
    at: float
    min_gap: float = OVERVIEW_MIN_SECONDS
    idle: float = OVERVIEW_IDLE_SECONDS

    @classmethod
    def starting(cls, now: float) -> "RefreshSchedule":
        return cls(sent_at=now, at=now + OVERVIEW_IDLE_SECONDS)

    def changed(self, now: float) -> None:
        self.at = min(self.at, max(now, self.sent_at + self.min_gap))

    def at_once(self, now: float) -> None:
        self.at = now

    def due(self, now: float) -> bool:
        return now >= self.at

    def sent(self, now: float) -> None:
        self.sent_at, self.at = now, now + self.idle


class OverviewReads:
    """One overview read per human and chart window shared by the streams that refresh it
    within max_age; a pause or resume drops the human's entries, so the next read is fresh."""

    def __init__(self, max_age: float = OVERVIEW_MIN_SECONDS / 2, generation=None):
        self.max_age = max_age
        self._reads = FreshReads(log, "the overview's read", (Unavailable,), generation=generation)

    def stamp(self) -> tuple[float, float]:
        """Now, for get's `since`: taken by a stream once it has subscribed."""
        return self._reads.stamp()

    def get(self, store, human: Human, window: ChartWindow = WINDOWS[DEFAULT_WINDOW], *,
            since: tuple[float, float] | None = None) -> asyncio.Future:
        """The shared read; with `since` (a stamp()), only a read that misses nothing from
        then on: a stream that subscribed at `since` shares a read begun after, or one begun
        shortly before with nothing announced in between (FreshReads). Without it, a read
        begun within max_age. So streams connecting together share reads, one at a time per
        human and window."""
        if since is None:
            since = (time.monotonic() - self.max_age, math.inf)
        return self._reads.get((human.user_id, window.key), since,
                               lambda: overview_data(store, human, window=window))

    def forget(self, user_id: int) -> None:
        for window in WINDOWS:
            self._reads.forget((user_id, window))


def overview_reads(app) -> OverviewReads:
    return app_single(app, "board_overview_reads",
                      lambda: OverviewReads(generation=lambda: app.state.runtime.fanout.generation))


# -- pause and resume --------------------------------------------------------------------
