"""The consent screen: where a human signed in to the Board approves (or denies) an MCP host's
request to connect over OAuth (board/oauth/server.py sends the browser here with the request
signed). Approving records a code for exactly what the human ticked (verbs, queues, agent id)
and sends the browser back to the client; the grant is created when the client exchanges the
code, an endpoint like a vended one, or, when the person has a live grant of that client
already, that grant is updated (the screen says which, and says when an earlier grant was
revoked, so that this one is new). The person chooses the space the grant works in: their
own, or a team they are an admin of (its grant is an endpoint of the team, reading and
claiming the team's todos; a team's grant of a client is one per agent id, and an agent id
another live endpoint of the team has is refused). The form is bound to the human it was
shown to and carries the session's CSRF token."""

from __future__ import annotations

import logging
import re

from litestar import Request, Response, get, post
from litestar.response import Redirect
from mcp.server.auth.provider import construct_redirect_uri

from board import logs
from board.errors import Invalid
from board.oauth.client_metadata import form_action_source, redirect_shown
from board.oauth.server import ConsentRequest, client_name, client_verified
from board.store.accounts import vend_problems
from board.store.vocabulary import VERBS
from board.web.context import (NO_STORE, bad_request, checked_form, not_found, page, require_person, runtime,
                               with_session)
from board.web.templating import DEFAULT_VERBS, sentence

log = logging.getLogger("switchboard.web")

# Verbs that only read: a request for these alone is shown as read-only.
READ_VERBS = ("list_todos", "get_todo")

# The internal header a response sets to let its form post end at another origin (the
# client's redirect URI); the security headers middleware folds it into form-action.
FORM_ACTION_HEADER = "x-switchboard-form-action"


def _oauth(request: Request):
    return request.app.state.oauth


def _agent_id_from(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.:/-]+", "-", name.strip().lower()).strip("-")[:100]
    return slug or "oauth-client"


async def _client(request: Request, req: ConsentRequest):
    return await _oauth(request).provider.get_client(req.client_id)


def _asked(req: ConsentRequest) -> tuple[str, ...]:
    """The verbs the client asked for (every verb when it named none)."""
    return tuple(v for v in VERBS if v in req.scopes) if req.scopes else VERBS


def _defaults(req: ConsentRequest, existing: dict | None) -> list[str]:
    """The verbs ticked at first: those the client asked for (/mcp's 401 names a worker's
    verbs, which hosts ask for), and those its live grant has already. A request for every verb
    (what a host asks when it takes the metadata's whole list) ticks the vend wizard's
    defaults (a worker's loop) instead. Anything more the person ticks on purpose: every verb
    is offered, those not asked for saying so."""
    asked = _asked(req)
    ticked = set(DEFAULT_VERBS) if set(asked) == set(VERBS) else set(asked)
    return [v for v in VERBS if v in ticked or existing and v in existing["scope"]]


def _form_action(request: Request, req: ConsentRequest) -> str:
    return form_action_source(req.redirect_uri)


def _connections(endpoints: list[dict], client_id: str) -> tuple[dict | None, dict | None]:
    """The person's live grant of this client (a consent updates it), and else their latest
    revoked one (a consent makes a new grant, which cannot see its todos)."""
    mine = [e for e in endpoints if e["kind"] == "oauth" and e["client_id"] == client_id]  # newest first
    live = next((e for e in mine if e["revoked_at"] is None), None)
    return live, (None if live else next(iter(mine), None))


async def _spaces(request: Request, human) -> list[dict]:
    """The spaces the person may connect an application for: their own, and the teams they
    are an admin of."""
    return [s for s in await runtime(request).store.spaces_of(human) if s["role"] == "admin"]


def _space_chosen(value, spaces: list[dict]) -> dict | None:
    """The space a form names (its id), among those offered; the first (their own) by default."""
    if value in (None, ""):
        return spaces[0]
    return next((s for s in spaces if str(s["id"]) == str(value)), None)


def _agent_id_taken(endpoints: list[dict], agent_id: str, client_id: str) -> bool:
    """A team's live endpoint other than its grant of this client with this agent id has it
    (an agent id names one holder among a team's endpoints)."""
    return any(e["revoked_at"] is None and e["agent_id"] == agent_id
               and not (e["kind"] == "oauth" and e["client_id"] == client_id) for e in endpoints)


def _queues_of(form) -> list[str]:
    """The queues ticked among the person's, then those typed (commas or spaces between)."""
    ticked = [q for q in form["_multi"].getall("queue", []) if isinstance(q, str)]
    typed = str(form.get("queues") or "").replace(",", " ").split()
    return list(dict.fromkeys(q for q in [*ticked, *typed] if q))


async def _render(request: Request, human, session, signed: str, req: ConsentRequest, client, *, status=200,
                  errors=None, values=None, space: dict | None = None) -> Response:
    redirect_host = redirect_shown(req.redirect_uri)
    spaces = await _spaces(request, human)
    space = space or spaces[0]
    endpoints = await runtime(request).store.endpoints_of_user(space["id"])
    existing, revoked = _connections(endpoints, req.client_id)
    if space["kind"] == "team":  # a team's grant of a client is one per agent id
        wanted = (values or {}).get("agent_id")
        existing = next((e for e in endpoints if e["kind"] == "oauth" and e["client_id"] == req.client_id
                         and e["revoked_at"] is None and e["agent_id"] == wanted), None)
        revoked = None
    values = values or {"agent_id": existing["agent_id"] if existing else _agent_id_from(client_name(client)),
                        "queues": "", "queue": list(existing["queues"]) if existing else [],
                        "verbs": _defaults(req, existing)}
    values.setdefault("space", space["id"])
    known_queues = sorted({q for e in endpoints if e["revoked_at"] is None for q in e["queues"]}
                          | set(values["queue"]))
    asked = _asked(req)
    response = page(request, "consent.html", session=session, human=human, status=status,
                    title=f"Connect {client_name(client)}", client_name=client_name(client),
                    client_id=req.client_id, redirect_host=redirect_host, verified=client_verified(client),
                    signed=signed, binding=_oauth(request).approval_binding(signed, human.actor),
                    offered=VERBS, asked=asked, read_only=all(v in READ_VERBS for v in asked), errors=errors or {},
                    values=values, known_queues=known_queues, existing=existing, revoked=revoked,
                    spaces=spaces, space=space, active="endpoints")
    response.headers[FORM_ACTION_HEADER] = _form_action(request, req)
    return response


def _expired(request: Request, session) -> Response:
    return bad_request(request, session, "This sign-in link is not valid or has expired (links last ten "
                                         "minutes). Go back to the application you were connecting and start again.")


@get("/consent", name="consent")
async def consent_page(request: Request) -> Response:
    human, session = await require_person(request)  # grants are the person's own, whatever the Board shows
    if _oauth(request) is None:  # OAuth turned off: there is nothing to consent to
        return not_found(request, session, human)
    signed = request.query_params.get("request")
    req = _oauth(request).consent_request(signed)
    if req is None:
        return _expired(request, session)
    client = await _client(request, req)
    if client is None:
        return bad_request(request, session, "The application asking to connect is no longer known. Start again "
                                             "from the application.")
    return await _render(request, human, session, signed, req, client)


@post("/consent")
async def consent_submit(request: Request) -> Response:
    human, session = await require_person(request)  # grants are the person's own, whatever the Board shows
    oauth = _oauth(request)
    if oauth is None:
        return not_found(request, session, human)
    form = await checked_form(request, session)
    if isinstance(form, Response):
        return form
    signed = form.get("request")
    req = oauth.consent_request(signed)
    if req is None:
        return _expired(request, session)
    if not oauth.check_binding(signed, human.actor, form.get("binding")):
        # Shown to another human (or forged): nobody approves on someone else's behalf.
        return page(request, "error.html", session=session, human=human, status=403, title="Not yours to approve",
                    show_flash=False, heading="This approval belongs to someone else",
                    message="This consent form was shown to another person. Start again from the application "
                            "while signed in as yourself.")
    client = await _client(request, req)
    if client is None:
        return bad_request(request, session, "The application asking to connect is no longer known.")
    if form.get("decision") != "approve":
        log.info("oauth consent denied: client=%s user=%s", logs.field(req.client_id), human.actor)
        target = construct_redirect_uri(req.redirect_uri, error="access_denied",
                                        error_description="the person denied the request", state=req.state)
        return _away(request, session, target, req)
    multi = form["_multi"]
    agent_id = str(form.get("agent_id") or "").strip()
    queues = _queues_of(form)
    verbs = [v for v in multi.getall("verbs", []) if isinstance(v, str)]
    values = {"agent_id": agent_id, "queues": str(form.get("queues") or ""),
              "queue": [q for q in multi.getall("queue", []) if isinstance(q, str)], "verbs": verbs,
              "space": form.get("space")}
    store = runtime(request).store
    spaces = await _spaces(request, human)
    space = _space_chosen(form.get("space"), spaces)
    problems = vend_problems(agent_id=agent_id, queues=queues, scope=verbs)
    acting = await store.human_in(human, space["id"]) if space is not None else None
    if acting is None or not acting.may("admin"):
        # a forged or stale choice: a team the person is not (or no longer) an admin of
        problems.insert(0, Invalid("choose your own space or a team you are an admin of", argument="space"))
        space = None
    elif space["kind"] == "team" and not problems and _agent_id_taken(
            await store.endpoints_of_user(space["id"]), agent_id, req.client_id):
        problems.append(Invalid(f"another agent of {space['name']} has the agent id {agent_id}; an agent id names "
                                "one agent of a team: choose another", argument="agent_id"))
    if not problems:
        try:
            code = await store.oauth_code_issue(
                acting, client_id=req.client_id, client_name=client_name(client),
                client_verified=client_verified(client), agent_id=agent_id, scope=verbs, queues=queues,
                redirect_uri=req.redirect_uri, redirect_uri_explicit=req.redirect_uri_explicit,
                code_challenge=req.code_challenge, resource=req.resource)
        except Invalid as e:
            problems = [e]
    if problems:
        errors = {p.argument or "general": sentence(p.message) for p in problems}
        return await _render(request, human, session, signed, req, client, status=400, errors=errors, values=values,
                             space=space)
    log.info("oauth consent approved: client=%s user=%s space=%s verbs=%s", logs.field(req.client_id), human.actor,
             acting.user_id, logs.field(",".join(verbs)))
    base = request.app.state.settings.public_url or f"{request.url.scheme}://{request.url.netloc}"
    return _away(request, session, construct_redirect_uri(req.redirect_uri, code=code, state=req.state, iss=base),
                 req)


def _away(request: Request, session, target: str, req: ConsentRequest) -> Response:
    """Back to the client's redirect URI (registered, checked by the authorize handler)."""
    response = Redirect(target, status_code=303, headers={**NO_STORE, FORM_ACTION_HEADER: _form_action(request, req)})
    return with_session(request, response, session)


def handlers() -> list:
    return [consent_page, consent_submit]
