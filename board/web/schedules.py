"""The Schedules page (/schedules): the signed-in human's schedules (each tick adds a todo;
migration 0017), with pause, resume and remove, and the form that adds one. The form shows
the next three run times in the schedule's time zone before it is saved: its Preview button
(without JavaScript) and, with it, board.js asking /schedules/preview as the fields change.
Removing asks first (/schedules/{id}/remove shows the question, its form posts back)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from litestar import Request, Response, get, post
from litestar.params import FromPath

from board.errors import Invalid, NotFound
from board.store.inputs import int_text, json_object_text
from board.store.vocabulary import (MAX_ATTEMPTS_DEFAULT, MAX_ATTEMPTS_MAX, PRIORITY_DEFAULT, PRIORITY_MAX,
                                    PRIORITY_MIN, TITLE_MAX_CHARS)
from board.web.context import (checked_form, not_found, page, query_text, redirect, require_human, require_role,
                               runtime)
from board.web.templating import sentence

FIELDS = ("queue", "title", "cron", "timezone", "every", "payload", "priority", "max_attempts", "overlap")
BLANK = {"queue": "", "title": "", "cron": "", "timezone": "UTC", "every": "", "payload": "",
         "priority": str(PRIORITY_DEFAULT), "max_attempts": str(MAX_ATTEMPTS_DEFAULT), "overlap": ""}
FIELD_OF = {"every_seconds": "every"}  # the store's argument -> the form's field


def run_time(at: datetime) -> str:
    """A run time in its schedule's zone: "Mon 2026-03-30 09:00 (+02:00, CEST)"."""
    offset = at.strftime("%z")
    return f"{at:%a %Y-%m-%d %H:%M} ({offset[:3]}:{offset[3:]}, {at.tzname()})"


def _fields(values: dict) -> tuple[dict, dict]:
    """The form's text -> the store's schedule fields, and the problems by field."""
    errors: dict[str, str] = {}
    fields: dict[str, Any] = {"queue": values["queue"], "title": values["title"].strip(),
                              "timezone": values["timezone"].strip() or "UTC", "overlap": values["overlap"] == "on"}
    cron, every = values["cron"].strip(), values["every"].strip()
    if bool(cron) == bool(every):
        errors["cron"] = "Give a cron expression or a number of seconds between runs (one of the two)."
    fields["cron"] = cron or None
    fields["every_seconds"] = None
    for name, check in (("every", lambda v: int_text(v, "every", 1, 366 * 86400) if v.strip() else None),
                        ("payload", lambda v: json_object_text(v, "payload")),
                        ("priority", lambda v: int_text(v or BLANK["priority"], "priority", PRIORITY_MIN, PRIORITY_MAX)),
                        ("max_attempts", lambda v: int_text(v or BLANK["max_attempts"], "max_attempts", 1,
                                                            MAX_ATTEMPTS_MAX))):
        try:
            fields["every_seconds" if name == "every" else name] = check(values[name])
        except Invalid as e:
            errors[name] = sentence(e.message)
    return fields, errors


def _preview(store, fields: dict, errors: dict) -> list[str]:
    """The next three run times, or [] with the problem put in errors (by field)."""
    if errors.get("cron") or errors.get("every"):
        return []
    try:  # the run times alone: the queue and title are checked on their own
        return [run_time(t) for t in store.schedule_preview(**(fields | {"queue": "preview", "title": "preview"}))]
    except Invalid as e:
        errors.setdefault(field_of(e), sentence(e.message))
        return []


def field_of(e: Invalid) -> str:
    """The form's field a store error names (a problem of no field: the cron expression's)."""
    name = FIELD_OF.get(e.argument, e.argument)
    return name if name in FIELDS else "cron"


async def _queues(request: Request, human) -> list[str]:
    live = [e for e in await runtime(request).store.endpoints_of_user(human.user_id) if e["revoked_at"] is None]
    return sorted({q for e in live for q in e["queues"]})


async def schedules_page_of(request: Request, human, session, values: dict, errors: dict, preview: list[str],
                            status: int = 200, previewed: bool = False) -> Response:
    store = runtime(request).store
    return page(request, "schedules.html", session=session, human=human, title="Schedules", active="schedules",
                status=status, schedules=await store.schedules_list(human.user_id), queues=await _queues(request, human),
                values=values, errors=errors, preview=preview, previewed=previewed, run_time=run_time, zone_of=ZoneInfo,
                TITLE_MAX_CHARS=TITLE_MAX_CHARS, MAX_ATTEMPTS_MAX=MAX_ATTEMPTS_MAX,
                PRIORITIES=range(PRIORITY_MIN, PRIORITY_MAX + 1), PRIORITY_DEFAULT=PRIORITY_DEFAULT)


@get("/schedules", name="schedules")
async def schedules_page(request: Request) -> Response:
    human, session = await require_human(request)
    return await schedules_page_of(request, human, session, dict(BLANK), {}, [])


@get("/schedules/preview", name="schedules_preview")
async def schedules_preview(request: Request) -> Response:
    """The add form's live preview (board.js): {"times": [...]} or {"field": f, "error": e}."""
    await require_human(request)
    values = {k: query_text(request.query_params, k) or BLANK[k] for k in FIELDS}
    fields, errors = _fields(values)
    times = _preview(runtime(request).store, fields, errors)
    if errors:
        field = next(iter(errors))
        return Response({"field": field, "error": errors[field]}, headers={"Cache-Control": "no-store"})
    return Response({"times": times}, headers={"Cache-Control": "no-store"})


@post("/schedules")
async def schedules_add(request: Request) -> Response:
    """Preview (the next three run times) or add a schedule; every problem shown at once."""
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    values = {k: str(form.get(k) or "") for k in FIELDS}
    fields, errors = _fields(values)
    queues = await _queues(request, human)
    if values["queue"] not in queues:
        errors["queue"] = "Choose a queue of one of your live endpoints."
    if not fields["title"]:
        errors["title"] = "Give the schedule's todos a title."
    store = runtime(request).store
    preview = _preview(store, fields, errors)
    if form.get("action") == "preview" or errors:
        return await schedules_page_of(request, human, session, values, errors, preview,
                                       status=400 if errors else 200, previewed=True)
    try:
        s = await store.schedule_add(human, **fields)
    except Invalid as e:
        errors[field_of(e)] = sentence(e.message)
        return await schedules_page_of(request, human, session, values, errors, preview, status=400, previewed=True)
    session.set_flash("success", f"Added the schedule “{s['title']}” to queue {s['queue']}: its next run is "
                                 f"{run_time(s['next_at'].astimezone(_zone(s)))}.")
    return redirect(request, f"/schedules#schedule-{s['id']}", session)


def _zone(s: dict) -> ZoneInfo:
    return ZoneInfo(s["timezone"])


DONE = {"pause": "Paused the schedule “{t}”: it adds nothing until you resume it.",
        "resume": "Resumed the schedule “{t}”: its next run is {n}."}
UNCHANGED = {"pause": "The schedule “{t}” was already paused.", "resume": "The schedule “{t}” was not paused."}


async def _mine(request: Request, human, schedule_id: str) -> dict | None:
    return next((s for s in await runtime(request).store.schedules_list(human.user_id) if s["id"] == schedule_id),
                None)


@post("/schedules/{schedule_id:str}/remove")
async def schedule_remove_submit(request: Request, schedule_id: FromPath[str]) -> Response:
    """Remove one of the human's schedules (the question page's form), then back to the page."""
    return await schedule_action(request, schedule_id, "remove")


@post("/schedules/{schedule_id:str}/{action:str}")
async def schedule_toggle(request: Request, schedule_id: FromPath[str], action: FromPath[str]) -> Response:
    """Pause or resume one of the human's schedules, then back to its row."""
    if action == "remove":
        return await schedule_action(request, schedule_id, "other")
    return await schedule_action(request, schedule_id, action)


async def schedule_action(request: Request, schedule_id: str, action: str) -> Response:
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    s = await _mine(request, human, schedule_id)
    if s is None or action not in ("pause", "resume", "remove"):
        return not_found(request, session, human)
    store = runtime(request).store
    try:
        if action == "remove":
            await store.schedule_remove(human, schedule_id)
            session.set_flash("success", f"Removed the schedule “{s['title']}”. The todos it added stay.")
            return redirect(request, "/schedules#schedules-heading", session)
        verb = store.schedule_pause if action == "pause" else store.schedule_resume
        changed = await verb(human, schedule_id)
    except NotFound:
        return not_found(request, session, human)
    s = await _mine(request, human, schedule_id) or s
    said = (DONE if changed else UNCHANGED)[action].format(t=s["title"], n=run_time(s["next_at"].astimezone(_zone(s))))
    session.set_flash("success" if changed else "info", said)
    return redirect(request, f"/schedules#schedule-{schedule_id}", session)


@get("/schedules/{schedule_id:str}/remove", name="schedule_remove")
async def schedule_remove_page(request: Request, schedule_id: FromPath[str]) -> Response:
    human, session = await require_human(request)
    require_role(human, "admin", "manage this team")
    s = await _mine(request, human, schedule_id)
    if s is None:
        return not_found(request, session, human)
    return page(request, "schedule_remove.html", session=session, human=human, title="Remove the schedule?",
                active="schedules", schedule=s)


def handlers() -> list:
    return [schedules_page, schedules_preview, schedules_add, schedule_toggle, schedule_remove_page,
            schedule_remove_submit]
