"""Bulk actions on the Board: Retry (dead letters), Cancel, Release, Delete (ended todos) or
Set priority (pending todos) many todos at once.

The Board's list is a form of checkboxes (one per row, plus "all matching this view"),
which posts to a confirmation page saying how many todos of which states will change and
how many will be skipped; confirming applies the single action's own store transition to
each (Store.todos_bulk, in bounded batches), then the Board says how many changed and how
many were skipped because their state had moved on. Nothing here trusts the form for
scope: "all matching" is resolved again through the human-scoped list, and every id goes
through the human-scoped store, so another human's id is a NotFound, which is a skip.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from urllib.parse import parse_qsl

from litestar import Request, Response, post

from board.errors import Invalid, NotFound
from board.store.store import Human
from board.store.vocabulary import BULK_MAX, LIST_LIMIT_MAX, PRIORITY_MAX, PRIORITY_MIN
from board.web.context import (Filters, back_to_list, checked_form, page, redirect, require_human, require_role,
                               runtime)
from board.web.templating import actions_for, kept_message, state_label


@dataclass(frozen=True)
class BulkAction:
    verb: str  # the button: "Retry"
    done: str  # what happened to each: "retried"
    effect: str  # what the transition does, said on the confirmation page
    danger: bool = False
    skips: str = ""  # which todos the action skips, and why, when their states alone do not say
    result: str = ""  # the result's first sentence, when "<Done> N todos." does not fit ({todos}: "3 todos")
    skipped: str = "because {its} state had moved on"  # why a todo was skipped, in the result


BULK_ACTIONS = {
    "retry": BulkAction("Retry", "retried", "Each dead letter goes back to pending with its attempt counter at 0; "
                                            "every attempt so far is kept, and the next claim opens the next one."),
    "release": BulkAction("Release", "released", "Each goes back to pending with its attempt counter unchanged; "
                                                 "its open attempt closes as released."),
    "cancel": BulkAction("Cancel", "canceled", "Each becomes canceled; a held todo's open attempt closes as canceled. "
                                               "This cannot be undone.", danger=True),
    "priority": BulkAction("Set the priority of", "set to P{p}", "Each pending todo takes the new priority: agents "
                                                             "claim P0 first and P4 last, the oldest first "
                                                             "within a priority.",
                           skips="Only a pending todo's priority can change: the others are skipped, and so are "
                                 "todos already at P{p} and a todo that is gone or not yours.",
                           result="Set {todos} to P{p}.", skipped="(not pending, or already at P{p})"),
    "delete": BulkAction("Delete", "deleted", "Each is deleted for good with its attempts and their notes; what "
                                              "they counted in the charts and the metrics stays. "
                                              "This cannot be undone.", danger=True,
                         skips="Only a done, canceled or dead-letter todo can be deleted: the others are skipped, "
                               "and so is a todo that is gone or not yours."),
}
NOT_FOUND_LABEL = "not found (gone, or not yours)"
READ_CONCURRENCY = 4


def list_args(filters: Filters) -> dict:
    """The store list's arguments for a view of the Board (as board_context reads it): every
    filter of the view, so "all in this view" is exactly what the search shows."""
    return filters.store_filters()


def view_of(form: dict) -> Filters:
    """The Board view the form was posted from (its query string), every page of it."""
    raw = str(form.get("filter") or "").lstrip("?")
    return dataclasses.replace(Filters.of(dict(parse_qsl(raw))), cursor=None)


@dataclass
class Selection:
    todos: list[dict]  # the selected todos the caller can see, as they are now
    missing: int = 0  # selected ids that are not (or no longer) the caller's todos
    more: bool = False  # "all matching": more than BULK_MAX match; these are the newest

    def will_change(self, action: str, user_id: int, priority: int | None = None) -> list[dict]:
        return [t for t in self.todos if changes(t, action, user_id, priority)]


def changes(todo: dict, action: str, user_id: int, priority: int | None) -> bool:
    """Whether the action changes the todo: its state allows it, and a new priority differs."""
    return action in actions_for(todo, user_id) and not (action == "priority" and todo["priority"] == priority)


def posted_priority(form: dict) -> int:
    """The priority a Set priority form chose (P0 to P4), or Invalid naming it."""
    raw = str(form.get("priority") or "").strip().removeprefix("P")
    if not raw.isdigit() or not PRIORITY_MIN <= int(raw) <= PRIORITY_MAX:
        raise Invalid(f"Choose a priority from P{PRIORITY_MIN} to P{PRIORITY_MAX}.", argument="priority")
    return int(raw)


def action_of(action: str, priority: int | None) -> BulkAction:
    """The action as the pages say it, with the priority chosen filled in."""
    act = BULK_ACTIONS[action]
    if priority is None:
        return act
    return dataclasses.replace(act, done=act.done.format(p=priority), skips=act.skips.format(p=priority),
                               result=act.result.replace("{p}", str(priority)),
                               skipped=act.skipped.format(p=priority))


async def matching(store, human: Human, view: Filters) -> Selection:
    """Every todo of the view, newest first, through keyset pages of the human-scoped list."""
    todos: list[dict] = []
    cursor = None
    while len(todos) < BULK_MAX:
        listing = await store.todo_list(human, **list_args(view), limit=min(LIST_LIMIT_MAX, BULK_MAX - len(todos)),
                                        cursor=cursor)
        todos += listing["todos"]
        cursor = listing["next_cursor"]
        if cursor is None:
            return Selection(todos)
    probe = await store.todo_list(human, **list_args(view), limit=1, cursor=cursor)
    return Selection(todos, more=bool(probe["todos"]))


async def chosen(store, human: Human, ids: list[str]) -> Selection:
    """The todos named by id, each read through the human-scoped store."""
    gate = asyncio.Semaphore(READ_CONCURRENCY)

    async def one(todo_id: str) -> dict | None:
        async with gate:
            try:
                return await store.todo_get(human, todo_id, attempts_limit=1)
            except (NotFound, Invalid):
                return None

    found = await asyncio.gather(*(one(i) for i in ids))
    return Selection([t for t in found if t is not None], missing=sum(t is None for t in found))


def posted_ids(form: dict) -> list[str]:
    ids = list(dict.fromkeys(v for v in form["_multi"].getall("ids", []) if isinstance(v, str) and v))
    if len(ids) > BULK_MAX:
        raise Invalid(f"a bulk action takes at most {BULK_MAX} todos at once", argument="ids")
    return ids


def state_group(todo: dict) -> str:
    if todo["dead_letter"]:
        return "dead letter"
    if todo["state"] == "failed":
        return "failed, retry scheduled"
    return state_label(todo["state"])


def groups(selection: Selection, action: str, user_id: int,
           priority: int | None = None) -> list[tuple[str, int, bool]]:
    """(state, how many, whether they change) for the confirmation page's table."""
    counts: dict[tuple[str, bool], int] = {}
    for t in selection.todos:
        key = (state_group(t), changes(t, action, user_id, priority))
        counts[key] = counts.get(key, 0) + 1
    rows = sorted(((label, n, change) for (label, change), n in counts.items()), key=lambda r: (not r[2], r[0]))
    if selection.missing:
        rows.append((NOT_FOUND_LABEL, selection.missing, False))
    return rows


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def result_message(act: BulkAction, counts: dict) -> str:
    todos = plural(counts['changed'], 'todo')
    msg = act.result.format(todos=todos) if act.result else f"{act.done.capitalize()} {todos}."
    if counts["skipped"]:
        one = counts["skipped"] == 1
        msg += (f" {counts['skipped']} {'was' if one else 'were'} skipped "
                f"{act.skipped.replace('{its}', 'its' if one else 'their')}.")
    if counts.get("refused"):
        msg += " " + kept_message(counts["refused"])
    if counts["not_tried"]:
        msg += f" The database became unavailable: {counts['not_tried']} not tried; try again in a few seconds."
    return msg


async def selection_of(request: Request, human: Human, form: dict, view: Filters) -> Selection:
    store = runtime(request).store
    if form.get("scope") == "filter":
        return await matching(store, human, view)
    return await chosen(store, human, posted_ids(form))


async def bulk_form(request: Request):
    """A bulk form's human, session, fields, Board view and action; or the response that
    refuses it (no session, a bad CSRF token, no action named)."""
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    require_role(human, "operator", "act on todos")  # not even the confirmation: the store refuses each todo too
    view = view_of(form)
    action = form.get("action")
    if action not in BULK_ACTIONS:
        session.set_flash("error", "Choose Retry, Release, Cancel, Delete or Set priority for the selected todos.")
        return redirect(request, "/" + view.query(), session)
    priority = None
    if action == "priority":
        try:
            priority = posted_priority(form)
        except Invalid as e:
            session.set_flash("error", f"Could not set the priority: {e.message}")
            return redirect(request, "/" + view.query(), session)
    return human, session, form, view, action, priority


@post("/todos/bulk", name="bulk_confirm")
async def bulk_confirm(request: Request) -> Response:
    """The confirmation page: what the action would do to the selection. Changes nothing."""
    posted = await bulk_form(request)
    if isinstance(posted, Response):
        return posted
    human, session, form, view, action, priority = posted
    if form.get("scope") != "filter" and not posted_ids(form):
        session.set_flash("error", "Select at least one todo first, or choose all todos matching this view.")
        return redirect(request, "/" + view.query(), session)
    selection = await selection_of(request, human, form, view)
    change = selection.will_change(action, human.actor, priority)
    act = action_of(action, priority)
    return page(request, "bulk_confirm.html", session=session, human=human, active="board",
                title=f"{act.verb} todos?", action=action, act=act, priority=priority, view=view,
                every=form.get("scope") == "filter", selected=len(selection.todos) + selection.missing,
                change=change, groups=groups(selection, action, human.actor, priority), more=selection.more,
                bulk_max=BULK_MAX, scheme_next="/" + view.query(),
                back=back_to_list(view, form.get("cursor"), posted_ids(form), form.get("scope") == "filter"))


@post("/todos/bulk/apply", name="bulk_apply")
async def bulk_apply(request: Request) -> Response:
    """Apply the confirmed action, then back to the Board view with the counts."""
    posted = await bulk_form(request)
    if isinstance(posted, Response):
        return posted
    human, session, form, view, action, priority = posted
    if form.get("scope") == "filter":
        # Resolved again here, through the human's own list: never ids from the form.
        selection = await matching(runtime(request).store, human, view)
        ids = [t["id"] for t in selection.will_change(action, human.actor, priority)]
    else:
        ids = posted_ids(form)
    counts = await runtime(request).store.todos_bulk(human, action, ids, priority=priority)
    session.set_flash("result", result_message(action_of(action, priority), counts))
    return redirect(request, "/" + view.query(), session)


def handlers() -> list:
    return [bulk_confirm, bulk_apply]
