"""The Board's pages and form posts: sign-in, the todo list, the drawer, its actions and
the vend wizard. Every read and change goes through the store with the signed-in human as
the caller, so the owning-human predicate is applied in the store's own statements."""

from __future__ import annotations

import asyncio
import logging
import re
from urllib.parse import quote, urlencode

from litestar import Request, Response, get, post
from litestar.enums import MediaType
from litestar.params import FromPath
from litestar.response import Redirect

from board import logs

from board.store import auth

from board.web import overview
from board.errors import Conflict, Invalid, NotFound, SwitchboardError, Unavailable
from board.store.store import Human
from board.store.inputs import int_text
from board.store.vocabulary import NOTE_MAX_BYTES, PRIORITY_MAX, PRIORITY_MIN
from board.web.auth import new_session, safe_next
from board.web.context import (NO_STORE, SCHEMES, Filters, SignInRequired, bad_request,
                               checked_form, client_of, client_snippet, mcp_url, not_found, page, query_text,
                               read_session, redirect, require_human, runtime, scheme_cookie, web_state,
                               worker_command)
from board.store.accounts import vend_problems
from board.web.context import drawer_todo, human_for_todo, known_human, require_role, ticked_of, view_query
from board.web.templating import DEFAULT_VERBS, VERB_PRESETS, sentence

log = logging.getLogger("switchboard.web")

@get("/login", name="login")
async def login_page(request: Request) -> Response:
    session = read_session(request)
    if session is not None and session.user_id is not None:
        return redirect(request, "/")
    if session is None:
        session = new_session(None)
    return page(request, "login.html", session=session, title="Sign in",
                next=safe_next(query_text(request.query_params, "next")), username="", error=None)


@post("/login")
async def login_submit(request: Request) -> Response:
    session = read_session(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    state = web_state(request.app)
    username = str(form.get("username") or "")[:200]
    password = str(form.get("password") or "")
    target = safe_next(form.get("next"))
    client = client_of(request)

    def again(status: int, error: str, headers: dict | None = None) -> Response:
        return page(request, "login.html", session=session, title="Sign in", status=status, headers=headers,
                    next=target, username=username, error=error,
                    scheme_next="/login" + ("" if target == "/" else "?" + urlencode({"next": target})))

    wait = state.throttle.retry_after(username, client)
    if wait:
        return again(429, f"Too many failed sign-ins. Try again in {wait} seconds.", {"retry-after": str(wait)})
    user = await runtime(request).store.user_by_name(username) if username else None
    ok = await asyncio.to_thread(auth.verify_password, user["password_hash"] if user else None, password)
    if not ok:
        state.throttle.failed(username, client)
        return again(401, "That username and password do not match an account.")
    state.throttle.succeeded(username, client)
    return redirect(request, target, new_session(user["id"]))  # a fresh session: new token


@post("/logout")
async def logout(request: Request) -> Response:
    session = read_session(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    anonymous = new_session(None)
    anonymous.set_flash("info", "You have signed out.")
    return redirect(request, "/login", anonymous)


@post("/scheme")
async def scheme_submit(request: Request) -> Response:
    """The colour scheme toggle (light, dark, or the system's): a cookie the pages read, then
    back to the page it was posted from. Signed in or not (the sign-in page has it too)."""
    session = read_session(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    scheme = form.get("scheme")
    if scheme not in SCHEMES:
        return bad_request(request, session, "The scheme must be light, dark or system.")
    back = safe_next(form.get("next")).split("#", 1)[0]
    response = redirect(request, f"{back}#scheme-{scheme}", session)
    response.set_cookie(scheme_cookie(request, scheme))
    return response


# -- the Board ---------------------------------------------------------------------------

async def board_context(request: Request, human: Human, filters: Filters) -> dict:
    store = runtime(request).store
    listing = await store.todo_list(human, **filters.store_filters(), sort=filters.sort, limit=filters.page_size,
                                    cursor=filters.cursor)
    endpoints = await store.endpoints_of_user(human.user_id)
    queues = sorted({q for e in endpoints for q in e["queues"]} | ({filters.queue} if filters.queue else set()))
    summary = overview.overview_context(
        await overview.overview_data(store, human, window=overview.chart_window_of(request)), "/" + filters.query())
    return {"todos": listing["todos"], "next_cursor": listing["next_cursor"], "filters": filters,
            "queues": queues, "has_endpoints": bool(endpoints), "active": "board", "page_size": filters.page_size, **summary}


# What a todo id looks like when the server made it (a UUID): typed into the search, one
# that names no todo of the human's is answered as not found rather than searched for.
_MINTED_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


async def todo_named_by(store, human: Human, text: str) -> str | None:
    """The id of the human's todo whose id is exactly text (whitespace trimmed), or None."""
    try:
        row = await store.todo_list_row(human, text.strip())
    except Invalid:  # not a well-formed id at all: a title to search for
        return None
    return row["id"] if row else None


@get("/", name="board")
async def board_page(request: Request) -> Response:
    human, session = await require_human(request)
    filters = Filters.of(request.query_params)  # bad values: the 400 page
    if filters.title and not filters.cursor:
        # Go to a todo by its id: the title search takes one too.
        todo_id = await todo_named_by(runtime(request).store, human, filters.title)
        if todo_id is not None:
            return redirect(request, f"/todos/{quote(todo_id, safe='')}", session)
        if _MINTED_ID.fullmatch(filters.title.strip()):
            return page(request, "not_found.html", session=session, human=human, status=404, title="Not found",
                        show_flash=False, missing_id=filters.title.strip())
    ctx = await board_context(request, human, filters)
    return page(request, "board.html", session=session, human=human, title=filters.view_title, **ctx,
                **ticked_of(request))


@get("/todos/{todo_id:str}", name="todo")
async def todo_page(request: Request, todo_id: FromPath[str]) -> Response:
    shown, human, session = await human_for_todo(request, todo_id)
    if human is None:
        return not_found(request, session, shown)
    store = runtime(request).store
    try:
        todo = await drawer_todo(store, human, todo_id)
    except (NotFound, Invalid):
        return not_found(request, session, shown)
    filters = Filters.of(request.query_params)
    ctx = await board_context(request, human, filters)
    return page(request, "todo.html", session=session, human=human, title=f"{todo['title']} · {filters.view_title}",
                todo=todo, **ctx)


@get("/todos/{todo_id:str}/drawer", name="drawer")
async def drawer_fragment(request: Request, todo_id: FromPath[str]) -> Response:
    """The drawer alone, for opening it in the page; the same partial the page uses."""
    shown, human, session = await human_for_todo(request, todo_id)
    if human is None:
        return not_found(request, session, shown)
    try:
        todo = await drawer_todo(runtime(request).store, human, todo_id)
    except (NotFound, Invalid):
        return not_found(request, session, shown)
    return page(request, "_drawer.html", session=session, human=human, todo=todo, show_flash=False)


ACTIONS = {
    "claim": ("Claimed. The attempt is yours; complete, release or fail it here.", "claimed"),
    "release": ("Released. The todo is pending again.", "released"),
    "fail": ("Failed. The attempt is closed as failed.", "failed"),
    "complete": ("Completed.", "completed"),
    "retry": ("Retried. The dead letter is pending again with its history kept.", "retried"),
    "cancel": ("Canceled.", "canceled"),
    "start-now": ("Started. The todo no longer waits for its start time: an agent may claim it now.", "due"),
    "priority": ("Priority set to P{p}.", "reprioritized"),
}


async def todo_note(request: Request, human: Human, session, todo_id: str, form) -> Response:
    """The owner's note on the open attempt, through the store's note (author kind owner). A
    note the store refuses as invalid comes back on the drawer with the message next to the
    field and the text kept; one with no open attempt left, as a flash."""
    store = runtime(request).store
    text = str(form.get("text") or "")
    try:
        note = await store.todo_note(human, todo_id, text=text)
    except NotFound:
        return not_found(request, session, human)
    except Invalid as e:
        try:
            todo = await drawer_todo(store, human, todo_id)
        except (NotFound, Invalid):
            return not_found(request, session, human)
        ctx = await board_context(request, human, Filters.of(request.query_params))
        return page(request, "todo.html", session=session, human=human, title=todo["title"], todo=todo, status=400,
                    note_error=sentence(e.message), note_value=text, **ctx)
    except Conflict as e:
        session.set_flash("error", f"Could not add the note: {e.message}.")
        return redirect(request, f"/todos/{todo_id}", session)
    cut = f" It was cut to {NOTE_MAX_BYTES} bytes." if note["note"]["truncated"] else ""
    session.set_flash("success", f"Note added to attempt {note['attempt_seq']}.{cut}")
    return redirect(request, f"/todos/{todo_id}", session)


async def todo_answer(request: Request, human: Human, session, todo_id: str, form) -> Response:
    """The owner's answer to an interrupted todo, through the store's answer: a choice's
    button sends choice, the text box sends text, and the form says which question it was
    drawn for. A todo that stopped waiting meanwhile, a question asked since, or a choice the
    question does not offer, comes back as a flash on the drawer."""
    text = str(form.get("text") or "")
    choice = form.get("choice")
    asked = form.get("asked")  # the question the drawer showed ("" none); absent from a form drawn before it
    try:
        await runtime(request).store.todo_answer(human, todo_id, text=text if text.strip() or choice is None else None,
                                                 choice=str(choice) if choice is not None else None,
                                                 asked=str(asked) if asked is not None else None)
    except NotFound:
        return not_found(request, session, human)
    except (Conflict, Invalid) as e:
        # The text box is "Your answer" here, not a note: say so when the text was refused.
        message = "your answer " + e.message[len("text "):] if e.message.startswith("text ") else e.message
        session.set_flash("error", f"Could not answer: {sentence(message)}")
        return redirect(request, f"/todos/{todo_id}{view_query(request)}", session)
    session.set_flash("result", "Answered. The agent has been told.")
    return redirect(request, f"/todos/{todo_id}{view_query(request)}", session)


async def todo_drop_dependency(request: Request, human: Human, session, todo_id: str, form) -> Response:
    """The owner drops one of what the todo waits for (the drawer's plan, after_id): back to
    the drawer saying so, and whether the todo may be claimed now."""
    store = runtime(request).store
    after_id = str(form.get("after_id") or "")
    try:
        todo = await store.todo_drop_dependency(human, todo_id, after_id)
        dropped = await store.todo_get(human, after_id, attempts_limit=1, notes_limit=0)
    except NotFound:
        return not_found(request, session, human)
    except (Conflict, Invalid) as e:
        session.set_flash("error", f"Could not drop the dependency: {e.message}.")
        return redirect(request, f"/todos/{todo_id}{view_query(request)}", session)
    then = "it can be claimed now" if todo["unblocked"] else "it still waits for other todos"
    session.set_flash("result", f"“{todo['title']}” no longer waits for “{dropped['title']}”; {then}.")
    return redirect(request, f"/todos/{todo_id}{view_query(request)}", session)


@post("/todos/{todo_id:str}/{action:str}")
async def todo_action(request: Request, todo_id: FromPath[str], action: FromPath[str]) -> Response:
    shown, human, session = await human_for_todo(request, todo_id)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    if human is None:  # a todo they may not see: as an id never minted
        return not_found(request, session, shown)
    if action == "note":
        return await todo_note(request, human, session, todo_id, form)
    if action == "answer":
        return await todo_answer(request, human, session, todo_id, form)
    if action == "drop-dependency":
        return await todo_drop_dependency(request, human, session, todo_id, form)
    if action not in ACTIONS:
        return not_found(request, session, human)
    store = runtime(request).store
    summary = (form.get("summary") or "").strip() or None
    try:
        if action == "claim":
            await store.todo_claim(human, todo_id, claimant=f"board/{human.username}")
        elif action == "release":
            await store.todo_release(human, todo_id, summary=summary)
        elif action == "fail":
            await store.todo_fail(human, todo_id, summary=summary)
        elif action == "complete":
            await store.todo_complete(human, todo_id, summary=summary)
        elif action == "retry":
            await store.todo_retry(human, todo_id)
        elif action == "start-now":
            await store.todo_start_now(human, todo_id)
        elif action == "priority":
            priority = int_text(str(form.get("priority") or ""), "priority", PRIORITY_MIN, PRIORITY_MAX)
            if not await store.todos_set_priority(human, [todo_id], priority):
                todo = await store.todo_get(human, todo_id, attempts_limit=1)  # NotFound when it is not theirs
                if todo["state"] != "pending":
                    raise Conflict(f"the todo is {todo['state'].replace('_', ' ')}; only a pending todo's "
                                   "priority can change")
                raise Conflict(f"it is already P{priority}")
        else:
            await store.todo_cancel(human, todo_id)
        session.set_flash("result", ACTIONS[action][0].format(p=form.get("priority")))  # focused when the drawer shows again
    except NotFound:
        return not_found(request, session, human)
    except (Conflict, Invalid) as e:
        said = {"start-now": "start it now", "priority": "set the priority"}.get(action, action)
        session.set_flash("error", f"Could not {said}: {e.message}.")
    return redirect(request, f"/todos/{todo_id}{view_query(request)}", session)


# -- the vend wizard ---------------------------------------------------------------------

async def endpoints_context(request: Request, human: Human) -> dict:
    endpoints = await runtime(request).store.endpoints_of_user(human.user_id)
    return {"endpoints": [e for e in endpoints if e["kind"] == "vended"],
            "grants": [e for e in endpoints if e["kind"] == "oauth"], "active": "endpoints",
            "mcp_url": mcp_url(request), "oauth": request.app.state.oauth is not None}


@get("/endpoints", name="endpoints")
async def endpoints_page(request: Request) -> Response:
    human, session = await require_human(request)
    ctx = await endpoints_context(request, human)
    # A preset's link (the page's script ticks the boxes in place instead): the form, ticked.
    preset = next((p for p in VERB_PRESETS if p[0] == request.query_params.get("preset")), None)
    said = f"{preset[1]} preset: its {len(preset[3])} verbs are ticked." if preset else ""
    return page(request, "endpoints.html", session=session, human=human, title="Endpoints", created=None,
                errors={}, values={"name": "", "agent_id": "", "queues": "",
                                   "verbs": list(preset[3] if preset else DEFAULT_VERBS)}, preset_said=said, **ctx)


@post("/endpoints")
async def endpoints_vend(request: Request) -> Response:
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    multi = form["_multi"]
    name = str(form.get("name") or "").strip()
    agent_id = str(form.get("agent_id") or "").strip()
    queues_raw = str(form.get("queues") or "")
    queues = [q for q in queues_raw.replace(",", " ").split() if q]
    verbs = [v for v in multi.getall("verbs", []) if isinstance(v, str)]
    values = {"name": name, "agent_id": agent_id, "queues": queues_raw, "verbs": verbs}
    # Every problem at once, each shown next to its field; the store checks again.
    problems = vend_problems(agent_id=agent_id, queues=queues, scope=verbs)
    try:
        if problems:
            raise problems[0]
        row, token = await runtime(request).store.endpoint_vend(human, name=name or agent_id,
                                                                agent_id=agent_id, queues=queues, scope=verbs)
    except (Invalid, Conflict) as e:
        errors = {p.argument or "general": sentence(p.message) for p in (problems or [e])}
        ctx = await endpoints_context(request, human)
        return page(request, "endpoints.html", session=session, human=human, title="Endpoints", status=400,
                    created=None, errors=errors, values=values, scheme_next="/endpoints", **ctx)
    ctx = await endpoints_context(request, human)
    created = {"row": row, "token": token, "snippet": client_snippet(ctx["mcp_url"], token, "switchboard"),
               "worker_command": worker_command(ctx["mcp_url"], token, row["queues"], row["scope"])}
    # The token is in this response body only: never in a URL, a cookie or a log.
    return page(request, "endpoints.html", session=session, human=human, title="Endpoint created",
                status=201, created=created, errors={},
                values={"name": "", "agent_id": "", "queues": "", "verbs": list(DEFAULT_VERBS)}, **ctx)


async def own_endpoint(request: Request, human: Human, endpoint_id: str) -> dict | None:
    for e in await runtime(request).store.endpoints_of_user(human.user_id):
        if e["id"] == endpoint_id:
            return e
    return None


@get("/endpoints/{endpoint_id:str}/revoke", name="endpoint_revoke")
async def endpoint_revoke_page(request: Request, endpoint_id: FromPath[str]) -> Response:
    human, session = await require_human(request)
    require_role(human, "admin", "manage this team")
    endpoint = await own_endpoint(request, human, endpoint_id)
    if endpoint is None or endpoint["revoked_at"] is not None:
        return not_found(request, session, human)
    title = f"Disconnect {endpoint['client_name']}" if endpoint["kind"] == "oauth" else "Revoke endpoint"
    return page(request, "endpoint_revoke.html", session=session, human=human, title=title,
                endpoint=endpoint, active="endpoints")


@post("/endpoints/{endpoint_id:str}/revoke")
async def endpoint_revoke_submit(request: Request, endpoint_id: FromPath[str]) -> Response:
    human, session = await require_human(request)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    endpoint = await own_endpoint(request, human, endpoint_id)
    if endpoint is None:
        return not_found(request, session, human)
    try:
        n = await runtime(request).store.endpoint_revoke(endpoint_id, user_id=human)
    except NotFound:
        session.set_flash("error", f"Endpoint {endpoint['name']} was already revoked.")
        return redirect(request, "/endpoints", session)
    held = f"{n} held todo{'s' if n != 1 else ''} became dead letter{'s' if n != 1 else ''}"
    what = f"connected agent {endpoint['client_name']}" if endpoint["kind"] == "oauth" else f"endpoint {endpoint['name']}"
    session.set_flash("success", f"Revoked {what}; {held}.")
    return redirect(request, "/endpoints", session)


# -- errors ------------------------------------------------------------------------------

def error_page(request: Request, status: int, heading: str, message: str) -> Response:
    session = read_session(request)
    return page(request, "error.html", session=session, human=None, status=status, title=heading,
                heading=heading, message=message, show_flash=False)


def on_sign_in_required(request: Request, exc: SignInRequired) -> Response:
    if request.url.path == "/events" or request.url.path.endswith("/drawer"):
        return Response("sign in first\n", status_code=401, media_type=MediaType.TEXT, headers=NO_STORE)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    query = "" if target == "/" else "?" + urlencode({"next": safe_next(target)})
    return Redirect(f"/login{query}", status_code=303, headers=NO_STORE)


def not_found_page(request: Request) -> Response:
    """The not-found page from an error handler: with the navigation and Sign out for a
    signed-in human, as the routes' own not-found page has."""
    human, session = known_human(request)
    return not_found(request, session, human)


def on_switchboard_error(request: Request, exc: SwitchboardError) -> Response:
    if isinstance(exc, NotFound):
        return not_found_page(request)
    if isinstance(exc, Unavailable):
        response = error_page(request, 503, "The database is unavailable",
                              "The Board cannot reach its database right now. Nothing you did was lost; "
                              "try again in a few seconds.")
        response.headers["Retry-After"] = str(exc.retry_after_seconds)
        return response
    return error_page(request, exc.http_status, "That did not work", exc.message)


def on_http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    if status == 404:
        return not_found_page(request)
    if status >= 500:
        log.error("unhandled error on %s %s", logs.field(request.method), logs.field(request.url.path),
                  exc_info=exc)
        return error_page(request, 500, "Something went wrong", "The server hit an error. Try again shortly.")
    if status == 405:
        return error_page(request, 405, "Not allowed", "That address does not take this kind of request.")
    return error_page(request, status, "That did not work", "The request could not be handled.")


def handlers() -> list:
    return [login_page, login_submit, logout, scheme_submit, board_page, todo_page, drawer_fragment, todo_action,
            endpoints_page, endpoints_vend, endpoint_revoke_page, endpoint_revoke_submit]
