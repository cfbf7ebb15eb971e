"""The Board overview's form posts: pausing and resuming a queue, its limit on held todos,
and the charts' window."""

from __future__ import annotations

from litestar import Request, Response, post
from litestar.datastructures import Cookie
from litestar.params import FromPath

from board.errors import Invalid, NotFound
from board.store.inputs import int_text
from board.store.vocabulary import QUEUE_LIMIT_MAX
from board.web.auth import safe_next
from board.web.context import bad_request, checked_form, not_found, redirect, require_human, runtime
from board.web.overview import CHART_COOKIE, CHART_COOKIE_MAX_AGE, WINDOWS, limit_id, overview_reads, toggle_id

TOGGLED = {
    "pause": "Paused queue {q}: agents claim nothing from it until you resume it.",
    "resume": "Resumed queue {q}: agents can claim its todos again, and listening agents were told.",
}
UNCHANGED = {"pause": "Queue {q} was already paused.", "resume": "Queue {q} was not paused."}


@post("/queues/{queue:str}/{action:str}")
async def queue_toggle(request: Request, queue: FromPath[str], action: FromPath[str]) -> Response:
    """Pause or resume one of the human's queues, then back to the page it was posted from,
    with focus on the same control (the URL fragment names it; board.js focuses it)."""
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    if action == "limit":
        return await queue_limit(request, human, session, queue, form)
    if action not in TOGGLED:
        return not_found(request, session, human)
    store = runtime(request).store
    try:
        if action == "pause":
            result = await store.queue_pause(human, queue)
        else:
            result = await store.queue_resume(human, queue)
    except (NotFound, Invalid):
        return not_found(request, session, human)
    overview_reads(request.app).forget(human.user_id)
    session.set_flash("success" if result["changed"] else "info",
                      (TOGGLED if result["changed"] else UNCHANGED)[action].format(q=queue))
    back = safe_next(form.get("next")).split("#", 1)[0]
    return redirect(request, f"{back}#{toggle_id(queue)}", session)


async def queue_limit(request: Request, human, session, queue: str, form: dict) -> Response:
    """Set how many of the queue's todos may be held at once (0 or empty: no limit), then back
    to the page it was posted from, focus on the limit's field; a bad number says why."""
    back = safe_next(form.get("next")).split("#", 1)[0]
    raw = str(form.get("limit") or "").strip() or "0"
    try:
        limit = int_text(raw, "limit", 0, QUEUE_LIMIT_MAX)
        now = await runtime(request).store.queue_limit_set(human, queue, limit)
    except Invalid as e:
        if e.argument == "queue":
            return not_found(request, session, human)
        session.set_flash("error", f"Could not set the limit of queue {queue}: the limit must be a whole number "
                                   f"from 0 (no limit) to {QUEUE_LIMIT_MAX}.")
        return redirect(request, f"{back}#{limit_id(queue)}", session)
    overview_reads(request.app).forget(human.user_id)
    session.set_flash("success", f"Queue {queue}: at most {now} of its todos may be held at once." if now else
                      f"Queue {queue} has no limit: agents may hold any number of its todos.")
    return redirect(request, f"{back}#{limit_id(queue)}", session)


@post("/chart")
async def chart_window(request: Request) -> Response:
    """The charts' window (the last hour, day or week): a cookie the Board and its live
    stream read, then back to the page it was posted from, focus on the chosen button."""
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    window = form.get("window")
    if window not in WINDOWS:
        return bad_request(request, session, "The chart's window must be hour, day or week.")
    back = safe_next(form.get("next")).split("#", 1)[0]
    response = redirect(request, f"{back}#chart-{window}", session)
    response.set_cookie(Cookie(key=CHART_COOKIE, value=window, max_age=CHART_COOKIE_MAX_AGE, path="/",
                               httponly=True, samesite="lax", secure=request.url.scheme == "https"))
    return response


def handlers() -> list:
    return [queue_toggle, chart_window]
