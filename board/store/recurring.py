"""Schedules (board/store/sql/recurring.sql, migration 0017), a part of
board.store.store.Store: a human's standing orders that add a todo at each tick of a cron
expression in an IANA time zone, or every N seconds; and the timer's sweep that takes the
ticks that have come (board/ops/schedule.py runs it in every server process).

The ticks are computed here, with croniter in the schedule's zone, and held in the database
as next_at (UTC). The sweep locks due schedules FOR UPDATE SKIP LOCKED and, in the same
transaction, adds the todo of the latest tick that has come (however many were missed while
every process was down: one todo, not one per tick) and moves next_at past now: so each
tick is taken by exactly one process.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from croniter import CroniterError, croniter
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from board.errors import Invalid, NotFound
from board.store.base import StoreBase, _translate, acts, space_user
from board.store.inputs import json_object, positive_int, priority_value, screen_secrets, storable
from board.store.queries import execute, query
from board.store.vocabulary import (
    MAX_ATTEMPTS_DEFAULT, MAX_ATTEMPTS_MAX, QUEUE_PATTERN, QUEUE_RULE, SCHEDULE_BATCH, SCHEDULE_EVERY_MAX,
    SCHEDULE_PREVIEW, TITLE_MAX_CHARS, Transition,
)


def schedule_zone(name: Any) -> ZoneInfo:
    """An IANA time zone by name (Invalid, argument timezone, when it is none)."""
    if name is None:
        name = "UTC"
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or name.startswith(("/", ".")) or ".." in name:
        raise Invalid("timezone must be an IANA time zone name such as Europe/Berlin", argument="timezone",
                      op="schedule")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise Invalid(f"timezone {name!r} is not a known IANA time zone (such as Europe/Berlin)",
                      argument="timezone", op="schedule") from None


def cron_expression(expr: Any) -> str:
    """A five-field cron expression, checked by croniter (Invalid, argument cron)."""
    if not isinstance(expr, str) or not 1 <= len(expr) <= 200:
        raise Invalid("cron must be a cron expression of five fields such as '0 9 * * 1-5'", argument="cron",
                      op="schedule")
    expr = " ".join(expr.split())
    if len(expr.split(" ")) != 5 or not croniter.is_valid(expr):
        raise Invalid(f"cron {expr!r} is not a cron expression of five fields (minute hour day month weekday), "
                      "such as '0 9 * * 1-5'", argument="cron", op="schedule")
    try:  # a date that never comes (30 February): croniter gives up looking
        croniter(expr, datetime(2026, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterError:
        raise Invalid(f"cron {expr!r} never runs (no such date)", argument="cron", op="schedule") from None
    return expr


def _repeated(tick: datetime, zone: ZoneInfo) -> bool:
    """Whether tick is the second pass of a wall time the fall's change back repeats."""
    local = tick.astimezone(zone)
    return local.replace(fold=0).utcoffset() != local.utcoffset()


def _every_hour(expr: str) -> bool:
    return expr.split(" ")[1] == "*"


def cron_next(expr: str, zone: ZoneInfo, after: datetime) -> datetime:
    """The first tick strictly after `after` (UTC).

    croniter computes in the zone's wall time. Where the spring change skips a wall time
    (02:30 on 2026-03-29 in Europe/Berlin) it runs the tick at the first time that exists
    (03:00), once: right. Where the fall change repeats one (02:30 on 2026-10-25), it runs
    the tick on both passes: a daily job would run twice. So a tick on the second pass of a
    repeated wall time is passed over here, in the UTC domain, unless the expression runs
    every hour (then each real hour is a tick of its own, as in cron)."""
    at = after.astimezone(zone)
    it = croniter(expr, at)
    while True:
        tick = it.get_next(datetime).astimezone(UTC)
        if tick > after and not (_repeated(tick, zone) and not _every_hour(expr)):
            return tick


def cron_latest(expr: str, zone: ZoneInfo, now: datetime) -> datetime | None:
    """The latest tick at or before now (UTC), with cron_next's fall-back rule."""
    start = now.astimezone(zone).replace(microsecond=0) + timedelta(seconds=1)
    it = croniter(expr, start)
    for _ in range(4):
        tick = it.get_prev(datetime).astimezone(UTC)
        if tick <= now and not (_repeated(tick, zone) and not _every_hour(expr)):
            return tick
    return None


def next_tick(s: dict, after: datetime) -> datetime:
    """The schedule's first tick strictly after `after`."""
    if s["every_seconds"] is not None:
        every = timedelta(seconds=s["every_seconds"])
        anchor = s["created_at"]
        if after < anchor:
            return anchor + every
        return anchor + ((after - anchor) // every + 1) * every
    return cron_next(s["cron"], ZoneInfo(s["timezone"]), after)


def latest_tick(s: dict, now: datetime) -> datetime:
    """The schedule's latest tick at or before now (a due schedule's: at least its next_at)."""
    if s["every_seconds"] is not None:
        every = timedelta(seconds=s["every_seconds"])
        tick = s["created_at"] + ((now - s["created_at"]) // every) * every
    else:
        tick = cron_latest(s["cron"], ZoneInfo(s["timezone"]), now)
    # The spring change: croniter's way back may miss a skipped wall time run late, which
    # its way forward (next_at) found.
    return s["next_at"] if tick is None or tick < s["next_at"] else tick


def _now(now: datetime | None) -> datetime:
    return datetime.now(UTC) if now is None else now.astimezone(UTC)


def _schedule_id(value: Any) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise NotFound("no such schedule", argument="id", op="schedule") from None


class Recurring(StoreBase):
    def schedule_checked(self, *, queue: Any, title: Any, cron: Any = None, every_seconds: Any = None,
                         timezone: Any = None, payload: Any = None, priority: Any = None,
                         max_attempts: Any = None, overlap: Any = False) -> dict:
        """A schedule's fields checked (Invalid naming the first argument wrong)."""
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"queue must be {QUEUE_RULE}", argument="queue", op="schedule")
        if not isinstance(title, str) or not 1 <= len(title) <= TITLE_MAX_CHARS or not title.strip():
            raise Invalid(f"title must be a string of 1 to {TITLE_MAX_CHARS} characters", argument="title",
                          op="schedule")
        storable(title, "title")
        screen_secrets(title, "title")
        if (cron is None) == (every_seconds is None):
            raise Invalid("give exactly one of cron and every_seconds", argument="cron", op="schedule")
        zone = schedule_zone(timezone)
        if cron is not None:
            cron = cron_expression(cron)
        else:
            every_seconds = positive_int(every_seconds, "every_seconds", 1, SCHEDULE_EVERY_MAX)
        if max_attempts is None:
            max_attempts = MAX_ATTEMPTS_DEFAULT
        return {"queue": queue, "title": title, "cron": cron, "every_seconds": every_seconds, "timezone": zone.key,
                "payload": json_object(payload, "payload"), "priority": priority_value(priority),
                "max_attempts": positive_int(max_attempts, "max_attempts", 1, MAX_ATTEMPTS_MAX),
                "overlap": bool(overlap)}

    def schedule_preview(self, *, now: datetime | None = None, count: int = SCHEDULE_PREVIEW, **fields) -> list[datetime]:
        """The next `count` ticks of a schedule not yet saved, in its time zone; writes nothing."""
        s = self.schedule_checked(**fields)
        at = _now(now)
        s |= {"created_at": at}
        ticks, zone = [], ZoneInfo(s["timezone"])
        for _ in range(count):
            at = next_tick(s, at)
            ticks.append(at.astimezone(zone))
        return ticks

    @acts("schedule_add", "admin", todo=None, queue="queue", detail=("title",))
    async def schedule_add(self, user_id: int, *, now: datetime | None = None, **fields) -> dict:
        """A new schedule of the human's; its first tick is the first after now."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        s = self.schedule_checked(**fields)
        at = _now(now)
        next_at = next_tick(s | {"created_at": at}, at)
        row = await self._fetch(query("schedule_add"), s | {"user_id": user_id, "payload": Jsonb(s["payload"]),
                                                           "next_at": next_at, "now": at}, op="schedule", one=True)
        return _schedule_out(row)

    async def schedules_list(self, user_id: int | None) -> list[dict]:
        """The human's schedules (every human's, with None), oldest first."""
        rows = await self._fetch(query("schedules_of_user"), {"user_id": user_id, "id": None}, op="schedule")
        return [_schedule_out(r) for r in rows]

    @acts("schedule_pause", "admin", todo=None, detail=("schedule_id",))
    async def schedule_pause(self, user_id: int | None, schedule_id: Any) -> bool:
        """Pauses the schedule (of the human's, unless user_id is None); returns whether it changed."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        return await self._set_paused(user_id, schedule_id, True, None)

    @acts("schedule_resume", "admin", todo=None, detail=("schedule_id",))
    async def schedule_resume(self, user_id: int | None, schedule_id: Any, *, now: datetime | None = None) -> bool:
        """Resumes the schedule at its first tick after now (ticks missed while paused add nothing)."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        schedule_id = _schedule_id(schedule_id)
        rows = await self._fetch(query("schedules_of_user"), {"user_id": user_id, "id": schedule_id}, op="schedule")
        if not rows:
            raise NotFound("no such schedule", argument="id", op="schedule")
        return await self._set_paused(user_id, schedule_id, False, next_tick(rows[0], _now(now)))

    async def _set_paused(self, user_id, schedule_id, paused: bool, next_at) -> bool:
        schedule_id = _schedule_id(schedule_id)
        rows = await self._fetch(query("schedule_set_paused"), {"user_id": user_id, "id": schedule_id,
                                                                "paused": paused, "next_at": next_at}, op="schedule")
        if rows:
            return True
        if not await self._fetch(query("schedules_of_user"), {"user_id": user_id, "id": schedule_id}, op="schedule"):
            raise NotFound("no such schedule", argument="id", op="schedule")
        return False

    @acts("schedule_remove", "admin", todo=None, detail=("schedule_id",))
    async def schedule_remove(self, user_id: int | None, schedule_id: Any) -> None:
        """Removes the schedule; the todos it added stay (their schedule_id becomes null)."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        rows = await self._fetch(query("schedule_remove"), {"user_id": user_id, "id": _schedule_id(schedule_id)},
                                 op="schedule")
        if not rows:
            raise NotFound("no such schedule", argument="id", op="schedule")

    async def sweep_schedules(self, *, now: datetime | None = None, batch: int = SCHEDULE_BATCH) -> int:
        """One batch of due schedules, in one transaction: each one's latest tick at or
        before now taken (its todo added, or the tick skipped and counted) and next_at moved
        past now. Returns how many schedules were taken."""
        at = _now(now)
        added = []
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    cur = await execute(conn, query("schedules_due_lock"), {"now": at, "batch": batch})
                    due = await cur.fetchall()
                    for s in due:
                        tick = latest_tick(s, at)
                        cur = await execute(conn, query("schedule_tick"), {
                            "id": s["id"], "user_id": s["user_id"], "queue": s["queue"], "title": s["title"],
                            "payload": Jsonb(s["payload"]), "max_attempts": s["max_attempts"],
                            "priority": s["priority"], "overlap": s["overlap"], "tick": tick,
                            "next_at": next_tick(s, at), "key": f"schedule:{s['id']}:{tick.isoformat()}",
                            "hook_urls": list(self.settings.hook_urls), "now": now})
                        row = await cur.fetchone()
                        if row["id"] is not None:
                            added.append(row)
        except (PoolTimeout, psycopg.Error) as err:
            self._away = isinstance(err, (PoolTimeout, psycopg.OperationalError))
            raise _translate(err, "schedule", None) from None
        self._away = False
        self._emit([Transition("added", r["id"], str(r["endpoint_id"]), r["queue"], r["state"], run_at=r["run_at"])
                    for r in added])
        return len(due)

    async def next_schedule_at(self) -> datetime | None:
        """When the next schedule not paused ticks (None: none), for the timer's sleep."""
        row = await self._fetch(query("schedules_next_at"), {}, op="schedule", one=True)
        return None if row is None else row["next_at"]

    async def queue_schedule_ticks(self) -> list[dict]:
        """Aggregates only, for /metrics: schedule ticks added and skipped by queue."""
        return await self._fetch(query("schedule_ticks_by_queue"), {}, op="metrics")


def _schedule_out(row: dict) -> dict:
    out = {k: row[k] for k in ("id", "queue", "title", "payload", "priority", "max_attempts", "cron",
                               "every_seconds", "timezone", "overlap", "paused", "next_at", "last_tick_at",
                               "ticks_added", "ticks_skipped", "created_at", "endpoint_live")}
    return out
