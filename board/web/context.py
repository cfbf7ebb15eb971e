"""What every Board route shares: the web state on the app, the signed-in human and the
session, page rendering, redirects and the not-found page, CSRF-checked forms, the list's
filters and the MCP client snippet. The routes (pages, events) and the demo import
this module, never each other."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import shlex
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.enums import MediaType
from litestar.response import Redirect

from board.errors import Forbidden, Invalid, Unavailable
from board.store.inputs import list_filters, read_list_cursor, text_problem
from board.store.store import Human
from board.tasks import shared_future
from board.web.auth import CSRF_FIELD, SESSION_COOKIE, Session, SessionCodec, SignInThrottle
from board.store.vocabulary import BOARD_PAGE_SIZES, BOARD_SORTS, QUEUE_PATTERN, QUEUE_RULE
from board.web.templating import render

log = logging.getLogger("switchboard.web")

PAGE_SIZE = 50  # the list's default page size (BOARD_PAGE_SIZES are the choices)
ATTEMPTS_SHOWN = 50
NO_STORE = {"cache-control": "no-store"}
# The colour scheme the human chose (static/board.css): read here, so each page is drawn in
# it from the first byte; "system" follows the browser's prefers-color-scheme.
SCHEME_COOKIE = "sb_scheme"
SCHEMES = ("light", "dark", "system")
SCHEME_MAX_AGE = 400 * 24 * 3600  # the longest a browser keeps a cookie
# The list's start filter (?start=) as the store's filters take it: pending todos waiting
# for their run_at, those that may be claimed now (ready: neither scheduled nor waiting),
# or those waiting for other todos to be done.
START_FILTERS = {"scheduled": {"scheduled": True}, "ready": {"scheduled": False}, "waiting": {"waiting": True}}


@dataclass
class WebState:
    """Per-app Board state: the session codec, the sign-in throttle and the
    endpoint -> owning user cache the live streams share (endpoints never change owner)."""

    codec: SessionCodec
    throttle: SignInThrottle = field(default_factory=SignInThrottle)
    endpoint_owners: dict[str, int | None] = field(default_factory=dict)
    # user id -> username of the humans signed in here, for pages rendered where the store
    # cannot be awaited (the error handlers); bounded, and a miss only drops the name.
    usernames: dict[int, str] = field(default_factory=dict)

    # user id -> the read of that user in flight: a burst of one human's requests (every
    # tab's stream reconnecting after a restart) shares one read instead of queueing a read
    # each on the pool. Only reads in flight are shared; none is kept after it ends.
    user_reads: dict[int, asyncio.Future] = field(default_factory=dict)

    # endpoint id -> the read of its owner in flight: the first change of an endpoint that a
    # thousand streams hear is one read, not a thousand.
    owner_reads: dict[str, asyncio.Future] = field(default_factory=dict)

    async def user(self, store, user_id: int) -> dict | None:
        return await _in_flight(self.user_reads, user_id, lambda: store.user_by_id(user_id), "a user's read")

    async def owner_of(self, store, endpoint_id: str) -> int | None:
        owner = self.endpoint_owners.get(endpoint_id)
        if owner is None:
            owner = await _in_flight(self.owner_reads, endpoint_id, lambda: store.endpoint_owner(endpoint_id),
                                     "an endpoint's owner read")
            if owner is None:
                return None  # not cached: an unknown id says nothing for later
            self.endpoint_owners[endpoint_id] = owner
        return owner


async def _in_flight(reads: dict, key, make, what: str):
    """The read of key in flight, shared by every caller that comes while it runs; a caller
    after it ends reads anew."""
    fut = reads.get(key)
    if fut is None:
        fut = shared_future(make(), log, what, (Unavailable,))
        reads[key] = fut

        def ended(done: asyncio.Future) -> None:
            if reads.get(key) is done:
                del reads[key]

        fut.add_done_callback(ended)
    return await asyncio.shield(fut)


def web_state(app) -> WebState:
    state = app.state.get("board_web")
    if state is None:
        settings = app.state.get("settings")
        key = getattr(settings, "secret_key", None)
        if not key:
            log.warning("no SWITCHBOARD_SECRET_KEY: Board sessions are signed with a random key "
                        "and end when this process stops")
            key = secrets.token_urlsafe(32)
        state = WebState(SessionCodec(key))
        app.state["board_web"] = state
    return state


def app_single(app, key: str, make):
    """The one object of its kind the app keeps in its state under key, made on first use."""
    found = app.state.get(key)
    if found is None:
        found = make()
        app.state[key] = found
    return found


def runtime(request: Request):
    return request.app.state.runtime


class SignInRequired(Exception):
    """No valid session: pages redirect to the sign-in page, streams answer 401."""


# -- sessions on requests and responses ------------------------------------------------

def read_session(request: Request) -> Session | None:
    return web_state(request.app).codec.decode(request.cookies.get(SESSION_COOKIE))


async def require_person(request: Request) -> tuple[Human, Session]:
    """The signed-in person in their own space (what is theirs whatever the Board shows)."""
    session = read_session(request)
    if session is None or session.user_id is None:
        raise SignInRequired()
    state = web_state(request.app)
    user = await state.user(runtime(request).store, session.user_id)
    if user is None:
        raise SignInRequired()
    names = state.usernames
    if len(names) > 10000:
        names.clear()
    names[user["id"]] = user["username"]
    return Human(user["id"], user["username"]), session


async def drawer_todo(store, human: Human, todo_id: str) -> dict:
    """A todo as its drawer shows it: its read with its attempts, and what people did to it
    (the record of actions, in the space the todo is seen in)."""
    todo = await store.todo_get(human, todo_id, attempts_limit=ATTEMPTS_SHOWN)
    return todo | {"records": await store.audit_of_todo(human, todo["id"])}


async def require_human(request: Request) -> tuple[Human, Session]:
    """The signed-in person acting in the space their Board shows: the one they chose with
    the switcher while it is still theirs (membership is read from the database on every
    request, so a removal takes effect on the next one), else their own."""
    person, session = await require_person(request)
    store = runtime(request).store
    spaces = await store.spaces_of(person)
    request.state.spaces = spaces  # the switcher's choices (page)
    if session.space is None or session.space == person.user_id:
        return person, session
    human = await store.human_in(person, session.space)
    if human is None:  # no longer theirs: back to their own space
        session.set_space(None)
        return person, session
    return human, session


def require_role(human: Human, role: str, what: str) -> None:
    """A page or form only a role at least `role` may use (a confirmation, a form the store
    would refuse anyway): refused with the 403 page, as the store's refusal is."""
    if not human.may(role):
        raise Forbidden(f"a {human.role} of {human.space_name or 'this space'} may not {what}")


async def human_for_todo(request: Request, todo_id: str) -> tuple[Human, Human | None, Session]:
    """For a route naming a todo by id: the human in the Board's space (the page's frame,
    and what an id they may not see is answered with, exactly as one never minted), and the
    person acting in the todo's own space when they may see it, else None. A todo's URL works
    whichever space the Board shows."""
    human, session = await require_human(request)
    person = Human(human.actor, human.username)
    return human, await runtime(request).store.human_for_todo(person, todo_id), session


def known_human(request: Request) -> tuple[Human | None, Session | None]:
    """The signed-in human as the session cookie says, without a database read (for the
    error handlers): the name comes from the ones this process has seen, or is left out."""
    session = read_session(request)
    if session is None or session.user_id is None:
        return None, session
    return Human(session.user_id, web_state(request.app).usernames.get(session.user_id, "")), session


def session_cookie(request: Request, session: Session) -> Cookie:
    codec = web_state(request.app).codec
    return Cookie(key=SESSION_COOKIE, value=codec.encode(session), max_age=codec.remaining(session), path="/",
                  httponly=True, samesite="lax", secure=request.url.scheme == "https")


def with_session(request: Request, response: Response, session: Session | None) -> Response:
    if session is not None and session.changed:
        response.set_cookie(session_cookie(request, session))
    return response


def scheme_of(request: Request) -> str:
    value = request.cookies.get(SCHEME_COOKIE)
    return value if value in SCHEMES else "system"


def scheme_cookie(request: Request, scheme: str) -> Cookie:
    return Cookie(key=SCHEME_COOKIE, value=scheme, max_age=SCHEME_MAX_AGE, path="/", httponly=True,
                  samesite="lax", secure=request.url.scheme == "https")


def this_page(request: Request) -> str:
    """Where the scheme toggle returns to: this address when it was asked for with GET;
    after a form post (which a GET cannot repeat), the Board unless the page says better."""
    if request.method not in ("GET", "HEAD"):
        return "/"
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def page(request: Request, template: str, *, session: Session | None, human: Human | None = None,
         status: int = 200, headers: dict | None = None, **context: Any) -> Response:
    """A full page (or fragment) rendered server-side; re-issues the cookie when it changed."""
    flash = session.pop_flash() if session is not None and context.pop("show_flash", True) else None
    context.setdefault("scheme_next", this_page(request))
    context.setdefault("spaces", (getattr(request.state, "spaces", None) or []) if human is not None else [])
    html = render(template, human=human, csrf=session.csrf if session else "", flash=flash,
                  scheme=scheme_of(request), **context)
    response = Response(html, media_type=MediaType.HTML, status_code=status, headers={**NO_STORE, **(headers or {})})
    return with_session(request, response, session)


def redirect(request: Request, to: str, session: Session | None = None) -> Response:
    return with_session(request, Redirect(to, status_code=303, headers=NO_STORE), session)


def not_found(request: Request, session: Session | None, human: Human | None) -> Response:
    """The one not-found page: a random id and another human's todo get the same bytes."""
    return page(request, "not_found.html", session=session, human=human, status=404, title="Not found",
                show_flash=False, scheme_next="/")


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def bad_request(request: Request, session: Session | None, message: str) -> Response:
    """The 400 page: the error page's layout, saying what was wrong."""
    return page(request, "error.html", session=session, human=None, status=400, title="That did not work",
                show_flash=False, heading="That did not work", message=message)


def query_text(params, name: str) -> str | None:
    """A query parameter's value. One holding a NUL (urlencoded text can carry one; Postgres
    text cannot) is Invalid, which the Board answers with a 400 page naming the parameter."""
    value = params.get(name)
    problem = text_problem(value)
    if problem:
        raise Invalid(f"The {name} parameter must not contain {problem}.", argument=name)
    return value


_FIELD_NAME = re.compile(r"[A-Za-z0-9_]{1,40}")


def _form_problem(form) -> str | None:
    """What makes a posted form unusable: a field that is a file, or holds a NUL or a lone
    surrogate (a multipart field can name a character set that decodes to one)."""
    for name, value in form.multi_items():
        field = f"The {name} field" if isinstance(name, str) and _FIELD_NAME.fullmatch(name) else "A field"
        if not isinstance(value, str):
            return f"{field} must be text, not a file."
        problem = text_problem(value)
        if problem:
            return f"{field} must not contain {problem}."
    return None


async def checked_form(request: Request, session: Session | None) -> dict | Response:
    """The posted form after the text and CSRF checks, or the 400 or 403 page. Same-origin
    only, too."""
    try:
        form = await request.form()
    except (UnicodeDecodeError, LookupError):  # a multipart field not in its (or an unknown) character set
        return bad_request(request, session, "The form could not be read: its text is not valid UTF-8 "
                                             "(or not valid in the character set it names).")
    problem = _form_problem(form)
    if problem:
        return bad_request(request, session, problem)
    # Under Referrer-Policy: no-referrer browsers send "Origin: null" on form posts; only a
    # named foreign origin is refused here, the token decides the rest.
    origin = request.headers.get("origin")
    same_origin = origin in (None, "null") or origin == f"{request.url.scheme}://{request.url.netloc}"
    if session is None or not same_origin or not session.check_csrf(form.get(CSRF_FIELD)):
        return page(request, "error.html", session=session, human=None, status=403, title="Form expired",
                    show_flash=False, heading="This form has expired",
                    message="The form was missing its security token or came from another site. "
                            "Go back, reload the page and try again.")
    return {"_multi": form, **{k: form.get(k) for k in form.keys()}}


# -- sign-in ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """The list's filters, sort and page as the Board's URL carries them (bookmarkable).
    Every value is checked when read: a bad one is Invalid naming its parameter, which the
    Board answers with its 400 page."""

    title: str | None = None
    claimant: str | None = None
    payload_key: str | None = None
    payload_value: str | None = None
    state: str | None = None
    queue: str | None = None
    dead_letter: bool = False
    start: str | None = None  # a pending todo's start: "scheduled" (waiting for its time), "ready" or "waiting"
    sort: str = "created"
    cursor: str | None = None
    page_size: int = PAGE_SIZE

    TEXT = ("title", "claimant", "payload_key", "payload_value", "state", "queue", "start", "sort", "cursor")

    @classmethod
    def of(cls, params) -> "Filters":
        values = {name: query_text(params, name) or None for name in cls.TEXT}
        dead_letter = query_text(params, "dead_letter") or ""
        if dead_letter not in ("", "0", "1", "true", "on"):
            raise Invalid("The dead_letter parameter must be 1 (dead letters only) or empty.", argument="dead_letter")
        queue = values["queue"]
        if queue is not None and not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"The queue parameter must be a queue name: {QUEUE_RULE}.", argument="queue")
        if values["start"] not in (None, *START_FILTERS):
            raise Invalid("The start parameter must be scheduled (pending todos waiting for their start time), "
                          "ready (pending todos that may be claimed now) or waiting (pending todos waiting for "
                          "other todos to be done).", argument="start")
        values["sort"] = values["sort"] or "created"
        if values["sort"] not in BOARD_SORTS:
            raise Invalid(f"The sort parameter must be one of {', '.join(BOARD_SORTS)}.", argument="sort")
        size = query_text(params, "page_size") or str(PAGE_SIZE)
        if size not in {str(n) for n in BOARD_PAGE_SIZES}:
            raise Invalid(f"The page_size parameter must be {', '.join(map(str, BOARD_PAGE_SIZES[:-1]))} or "
                          f"{BOARD_PAGE_SIZES[-1]}.", argument="page_size")
        filters = cls(**values, dead_letter=dead_letter in ("1", "true", "on"), page_size=int(size))
        cleaned = list_filters(**filters.store_filters())  # Invalid naming the parameter
        if filters.cursor is not None:
            read_list_cursor(filters.cursor, filters.sort)
        return replace(filters, **{k: v for k, v in cleaned.items() if k in cls.TEXT})

    def store_filters(self) -> dict:
        """The filters as todo_list and todo_list_row take them."""
        return {"state": self.state, "queue": self.queue, "dead_letter": self.dead_letter, "title": self.title,
                "claimant": self.claimant, "payload_key": self.payload_key, "payload_value": self.payload_value,
                **START_FILTERS.get(self.start, {})}

    @property
    def view_title(self) -> str:
        """What the page's title calls this view of the list."""
        if self.dead_letter:
            return "Dead letters · Board"
        return "Search results · Board" if self.searching else "Board"

    @property
    def searching(self) -> bool:
        """Whether anything narrows the list (a sort or a page alone does not)."""
        return any(self.store_filters().values()) or self.start is not None

    @property
    def sort_column(self) -> str:
        return BOARD_SORTS[self.sort][0]

    @property
    def sort_descending(self) -> bool:
        return BOARD_SORTS[self.sort][1]

    def sort_by(self, column: str) -> str:
        """The sort a click on a column's header asks for: the other way when the list is
        sorted by it, else the column's own first order (BOARD_SORT_COLUMNS)."""
        if self.sort_column != column:
            return column
        return next(name for name, (c, desc) in BOARD_SORTS.items() if c == column and desc != self.sort_descending)

    def query(self, **override) -> str:
        values = {name: getattr(self, name) for name in self.TEXT} | {"dead_letter": "1" if self.dead_letter else None,
                                                                       "page_size": str(self.page_size)} | override
        if values["sort"] == "created":
            values["sort"] = None  # the defaults stay out of the URL
        if str(values["page_size"]) == str(PAGE_SIZE):
            values["page_size"] = None
        q = urlencode({k: v for k, v in values.items() if v})
        return f"?{q}" if q else ""


def view_query(request: Request) -> str:
    """The list's view (filters, sort) a drawer was acted on from, to return to: only what
    reads as valid filters is kept."""
    try:
        return Filters.of(request.query_params).query()
    except Invalid:
        return ""


# At most this many ids come back ticked (the confirmation's Back): more than a page of
# rows could not have been ticked by hand.
TICKED_MAX = 100


def ticked_of(request: Request) -> dict:
    """The boxes to show ticked on the list, as the bulk confirmation's Back asks for them
    (?selected=<id>, repeated; ?every=1 for every todo in the view): a row not on the page
    is simply not there to tick, so the values need no other check."""
    ids = [v for v in request.query_params.getall("selected", []) if isinstance(v, str) and not text_problem(v)]
    return {"ticked": frozenset(ids[:TICKED_MAX]), "every_ticked": request.query_params.get("every") == "1"}


def back_to_list(view: Filters, cursor: str | None, ids: list[str], every: bool) -> str:
    """The list the bulk form was posted from (its page too, when its cursor still reads),
    with the same boxes ticked (see ticked_of)."""
    if cursor:
        try:
            read_list_cursor(cursor, view.sort)
            view = replace(view, cursor=cursor)
        except Invalid:
            pass
    query = view.query()
    extra = [("every", "1")] if every else [("selected", i) for i in ids[:TICKED_MAX]]
    if extra:
        query += ("&" if query else "?") + urlencode(extra)
    return "/" + query


def mcp_url(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}/mcp"


def worker_command(url: str, token: str, queues: list[str], scope: list[str]) -> str | None:
    """The `switchboard work` command line for a new endpoint that may claim (docs/worker.md):
    its one queue, or any it may drain; ./run.sh stands for the person's command."""
    if "claim_next" not in scope:
        return None
    queue = ["--queue", queues[0]] if len(queues) == 1 else []
    return shlex.join([f"SWITCHBOARD_TOKEN={token}", "switchboard", "work", "--url", url, *queue, "--", "./run.sh"])


def client_snippet(url: str, token: str, name: str) -> str:
    return json.dumps({"mcpServers": {name: {"type": "http", "url": url,
                                             "headers": {"Authorization": f"Bearer {token}"}}}}, indent=2)
