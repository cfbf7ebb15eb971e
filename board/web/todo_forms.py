"""The Board's forms about one todo beyond the drawer's one-click actions: adding a todo
(/todos/new), the confirmation a cancel asks for (/todos/{id}/confirm-cancel, which
posts to the drawer's own cancel action), and deleting an ended todo (/todos/{id}/confirm-delete,
then /todos/{id}/delete, which returns to the list view the drawer was opened from).

A todo added here goes through the store's add with the human as the caller, through one of
their live endpoints granted the queue (checked in the same statement), so it rings that
endpoint's doorbell and reaches every open Board over the live stream like any other add.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.params import FromPath

from board.errors import Conflict, Forbidden, Invalid, NotFound
from board.store.inputs import clean_key, int_text, json_object_text, screen_secrets
from board.store.store import Human
from board.store.vocabulary import (MAX_ATTEMPTS_DEFAULT, MAX_ATTEMPTS_MAX, PRIORITY_DEFAULT, PRIORITY_MAX,
                                    PRIORITY_MIN, TITLE_MAX_CHARS)
from board.web.context import (checked_form, human_for_todo, not_found, page, query_text, redirect, require_human,
                               require_role, runtime,
                               view_query)
from board.web.templating import (actions_for, fmt_relative, fmt_when, kept_message, priority_label, sentence,
                                  starts_at)

FIELDS = ("target", "title", "priority", "start_at", "start_offset", "key", "payload", "routing", "max_attempts",
          "continues")
BLANK = {"target": "", "title": "", "priority": str(PRIORITY_DEFAULT), "start_at": "", "start_offset": "+00:00",
         "key": "", "payload": "", "routing": "", "max_attempts": str(MAX_ATTEMPTS_DEFAULT), "continues": ""}
# The add form's start time: a datetime-local field's value (seconds optional) and the offset
# from UTC the page's script puts beside it (the browser's, for that date); without the
# script the offset stays +00:00 and the form says the time is UTC.
_LOCAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?")
_OFFSET = re.compile(r"[+-](?:[01]\d|2[0-3]):[0-5]\d")
# Where a store message's argument shows on the form.
FORM_FIELD_OF = {"run_at": "start_at", "delay_seconds": "start_at"}


def start_at_value(local: str, offset: str) -> str | None:
    """The form's start time as RFC 3339 with its offset ("2026-12-05T18:30:00+01:00"), None
    when empty (at once); Invalid naming start_at when it is not a date and time."""
    local = local.strip()
    if not local:
        return None
    offset = offset.strip() or "+00:00"
    if not _LOCAL_TIME.fullmatch(local) or not _OFFSET.fullmatch(offset):
        raise Invalid("start_at must be a date and time, like 2026-12-05T18:30", argument="start_at")
    try:
        datetime.fromisoformat(local)
    except ValueError:
        raise Invalid("start_at must be a date and time that exists, like 2026-12-05T18:30",
                      argument="start_at") from None
    return (local if local.count(":") == 2 else local + ":00") + offset


async def targets(request: Request, human: Human) -> list[dict]:
    """The (endpoint, queue) pairs the human may add to: every queue of each live endpoint.
    A queue two endpoints share is offered once per endpoint, since the endpoint decides
    which agent can see and claim the todo."""
    live = [e for e in await runtime(request).store.endpoints_of_user(human.user_id) if e["revoked_at"] is None]
    live.sort(key=lambda e: (e["created_at"], e["id"]))
    shared = {q for q in {q for e in live for q in e["queues"]}
              if sum(q in e["queues"] for e in live) > 1}
    out = [{"value": f"{e['id']}:{q}", "queue": q, "endpoint": e,
            "label": f"{q} (endpoint {e['name']})" if q in shared else q}
           for e in live for q in e["queues"]]
    return sorted(out, key=lambda t: (t["queue"], t["label"]))


def add_page(request: Request, human: Human, session, options: list[dict], values: dict, errors: dict,
             status: int = 200, continuing: dict | None = None) -> Response:
    return page(request, "todo_new.html", session=session, human=human, active="board", title="Add a todo",
                status=status, options=options, values=values, errors=errors, continuing=continuing,
                scheme_next="/todos/new" + (f"?continues={quote(continuing['id'])}" if continuing else ""))


async def predecessor(request: Request, human: Human, todo_id: str | None) -> dict | None:
    """The human's todo a new one is to continue (?continues=, the form's hidden field), or None."""
    if not todo_id:
        return None
    try:
        return await runtime(request).store.todo_get(human, todo_id, attempts_limit=1)
    except (NotFound, Invalid):
        return None


@get("/todos/new", name="todo_new")
async def todo_new_page(request: Request) -> Response:
    human, session = await require_human(request)
    require_role(human, "operator", "act on todos")
    options = await targets(request, human)
    wanted = query_text(request.query_params, "queue")
    first = next((o["value"] for o in options if o["queue"] == wanted), "")
    # "Continue in a new todo" from a drawer: on the predecessor's endpoint and queue.
    pred = await predecessor(request, human, query_text(request.query_params, "continues"))
    if pred is None:
        return add_page(request, human, session, options, dict(BLANK, target=first), {})
    target = f"{pred['endpoint_id']}:{pred['queue']}"
    values = dict(BLANK, target=target if any(o["value"] == target for o in options) else "",
                  title=f"Continue: {pred['title']}"[:TITLE_MAX_CHARS], continues=pred["id"])
    return add_page(request, human, session, options, values, {}, continuing=pred)


@post("/todos/new")
async def todo_new_submit(request: Request) -> Response:
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    require_role(human, "operator", "act on todos")  # before the form's checks (a Forbidden there is the endpoint's)
    options = await targets(request, human)
    values = {k: str(form.get(k) or "") for k in FIELDS}
    errors: dict[str, str] = {}
    # Every field is checked, so the form shows every problem at once.
    target = next((o for o in options if o["value"] == values["target"]), None)
    if target is None:
        errors["target"] = "Choose a queue of one of your live endpoints."
    title = values["title"].strip()
    if not title:
        errors["title"] = "Give the todo a title."
    elif len(title) > TITLE_MAX_CHARS:
        errors["title"] = f"The title must be at most {TITLE_MAX_CHARS} characters."
    else:
        try:
            screen_secrets(title, "title")  # the store screens it too; here it shows beside the other problems
        except Invalid as e:
            errors["title"] = sentence(e.message)
    parsed = {}
    for name, check in (("priority", lambda v: int_text(v or BLANK["priority"], "priority", PRIORITY_MIN,
                                                          PRIORITY_MAX)),
                        ("start_at", lambda v: start_at_value(v, values["start_offset"])),
                        ("key", lambda v: clean_key(v) if v.strip() else None),
                        ("payload", lambda v: json_object_text(v, "payload")),
                        ("routing", lambda v: json_object_text(v, "routing")),
                        ("max_attempts",
                         lambda v: int_text(v or BLANK["max_attempts"], "max_attempts", 1, MAX_ATTEMPTS_MAX))):
        try:
            parsed[name] = check(values[name])
        except Invalid as e:
            errors[name] = sentence(e.message)
    if not errors:
        run_at = parsed.pop("start_at")
        try:
            todo = await runtime(request).store.todo_add(
                human, queue=target["queue"], endpoint_id=target["endpoint"]["id"], title=title,
                continues=values["continues"] or None, run_at=run_at, **parsed)
        except (Invalid, Forbidden) as e:  # e.g. the endpoint was revoked since the form was drawn
            name = "target" if e.argument in (None, "queue") else FORM_FIELD_OF.get(e.argument, e.argument)
            errors[name if name in FIELDS else "target"] = sentence(e.message)
        except (Conflict, NotFound) as e:  # the todo to continue: live, continued meanwhile, or gone
            errors["continues"] = sentence("the todo to continue is not one of yours" if isinstance(e, NotFound)
                                           else e.message)
        else:
            link = (f"/todos/{quote(todo['id'], safe='')}", f"Open “{todo['title']}”")
            starts = starts_at(todo)
            if todo["deduplicated"]:
                said = (f"Nothing was added: the key “{todo['key']}” already names a live todo in queue "
                        f"{todo['queue']}, “{todo['title']}”.")
            else:
                said = f"Added “{todo['title']}” to queue {todo['queue']}. " + (
                    "It is pending." if starts is None else
                    f"It is scheduled to start {fmt_relative(starts, datetime.now(timezone.utc))}, "
                    f"at {fmt_when(starts)}.")
                if todo["priority"] != PRIORITY_DEFAULT:
                    said += f" Its priority is {priority_label(todo['priority'])}."
            session.set_flash("result", said, link=link)
            return redirect(request, "/", session)
    return add_page(request, human, session, options, values, errors, status=400,
                    continuing=await predecessor(request, human, values["continues"]))


async def owned(request: Request, human: Human | None, session, todo_id: str, shown: Human) -> dict | Response:
    """The todo (its newest attempt only) in its space (human, from human_for_todo), or the
    not-found page in the Board's (shown) when they may not see it."""
    if human is None:
        return not_found(request, session, shown)
    try:
        return await runtime(request).store.todo_get(human, todo_id, attempts_limit=1)
    except (NotFound, Invalid):
        return not_found(request, session, shown)


@get("/todos/{todo_id:str}/confirm-cancel", name="todo_cancel_confirm")
async def todo_cancel_confirm(request: Request, todo_id: FromPath[str]) -> Response:
    """Cancel asks first, as revoking an endpoint does; the form posts to the drawer's cancel."""
    shown, human, session = await human_for_todo(request, todo_id)
    todo = await owned(request, human, session, todo_id, shown)
    if isinstance(todo, Response):
        return todo
    if "cancel" not in actions_for(todo, human.actor):
        session.set_flash("error", f"Could not cancel: the todo is {todo['state'].replace('_', ' ')}.")
        return redirect(request, f"/todos/{todo['id']}", session)
    return page(request, "todo_cancel.html", session=session, human=human, active="board", title="Cancel todo",
                todo=todo)


@get("/todos/{todo_id:str}/confirm-drop", name="todo_drop_confirm")
async def todo_drop_confirm(request: Request, todo_id: FromPath[str]) -> Response:
    """Dropping a dependency (?after_id=) asks first; the form posts to the drawer's drop."""
    shown, human, session = await human_for_todo(request, todo_id)
    todo = await owned(request, human, session, todo_id, shown)
    if isinstance(todo, Response):
        return todo
    after_id = query_text(request.query_params, "after_id")
    dependency = next((d for d in todo["waiting_for"] if d["id"] == after_id), None)
    if dependency is None:
        session.set_flash("error", "Could not drop the dependency: the todo does not wait on it (any more).")
        return redirect(request, f"/todos/{todo['id']}", session)
    return page(request, "todo_drop.html", session=session, human=human, active="board",
                title="Drop this dependency", todo=todo, dependency=dependency)


async def deletable(request: Request, human: Human | None, session, todo_id: str, shown: Human) -> dict | Response:
    """The human's todo to delete, or the response that refuses it: the not-found page, or
    back to its drawer saying why when it has not ended."""
    todo = await owned(request, human, session, todo_id, shown)
    if isinstance(todo, Response):
        return todo
    if "delete" not in actions_for(todo, human.actor):
        session.set_flash("error", f"Could not delete: the todo is {todo['state'].replace('_', ' ')}. "
                                   "Only a done, canceled or dead-letter todo can be deleted.")
        return redirect(request, f"/todos/{todo['id']}{view_query(request)}", session)
    return todo


@post("/todos/{todo_id:str}/confirm-delete", name="todo_delete_confirm")
async def todo_delete_confirm(request: Request, todo_id: FromPath[str]) -> Response:
    """Delete asks first. The drawer's form posts here with the list's view in its query
    (board.js adds it), and the page's own form carries it on to the delete. Changes nothing."""
    shown, human, session = await human_for_todo(request, todo_id)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    todo = await deletable(request, human, session, todo_id, shown)
    if isinstance(todo, Response):
        return todo
    back = view_query(request)
    return page(request, "todo_delete.html", session=session, human=human, active="board", title="Delete todo",
                todo=todo, back=back, scheme_next=f"/todos/{quote(todo['id'])}{back}")


@post("/todos/{todo_id:str}/delete", name="todo_delete")
async def todo_delete(request: Request, todo_id: FromPath[str]) -> Response:
    """Deletes the ended todo with its attempts, then back to the list view, the result said
    (and focused) at its top. A todo whose state moved on since the confirmation stays."""
    shown, human, session = await human_for_todo(request, todo_id)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    if human is None:
        return not_found(request, session, shown)
    out = await runtime(request).store.todos_delete(human, [todo_id])
    if out["refused"]:
        session.set_flash("error", f"Could not delete: {kept_message(out['refused'])}")
        return redirect(request, f"/todos/{out['refused'][0]['id']}{view_query(request)}", session)
    if not out["deleted"]:
        todo = await deletable(request, human, session, todo_id, shown)  # why not: gone, or not ended
        if isinstance(todo, Response):
            return todo
        # It ended between the delete's look and this read: rare; nothing was deleted.
        session.set_flash("error", "Could not delete: the todo's state was changing. Try again.")
        return redirect(request, f"/todos/{todo['id']}{view_query(request)}", session)
    gone = out["deleted"][0]
    n = gone["attempts_total"]
    attempts = f" and its {n} attempt{'' if n == 1 else 's'}" if n else ""
    session.set_flash("result", f"Deleted “{gone['title']}”{attempts}.")
    return redirect(request, "/" + view_query(request), session)


def handlers() -> list:
    return [todo_new_page, todo_new_submit, todo_cancel_confirm, todo_drop_confirm, todo_delete_confirm, todo_delete]
