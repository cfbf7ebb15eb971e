"""The consent screen: where a human signed in to the Board approves (or denies) an MCP host's
request to connect over OAuth (board/oauth/server.py sends the browser here with the request
signed). Approving records a code for exactly what the human ticked (verbs, queues, agent id)
and sends the browser back to the client; the grant is created when the client exchanges the
code, an endpoint like a vended one. The form is bound to the human it was shown to and
carries the session's CSRF token."""

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
from board.web.context import (NO_STORE, bad_request, checked_form, not_found, page, require_human, runtime,
                               with_session)
from board.web.view import DEFAULT_VERBS, sentence

log = logging.getLogger("switchboard.web")

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


def _defaults(req: ConsentRequest) -> list[str]:
    """The verbs ticked at first: the vend wizard's defaults (a worker's loop) among those the
    client asked for. Anything more (release, adding, cancelling) the person ticks on purpose:
    hosts tend to ask for every verb the metadata lists."""
    return [v for v in DEFAULT_VERBS if v in _offered(req)]


def _offered(req: ConsentRequest) -> tuple[str, ...]:
    """The verbs the human may tick: those the client asked for (the human may narrow, never
    widen), or every verb when it named none."""
    return tuple(v for v in VERBS if v in req.scopes) if req.scopes else VERBS


def _form_action(request: Request, req: ConsentRequest) -> str:
    return form_action_source(req.redirect_uri)


async def _render(request: Request, human, session, signed: str, req: ConsentRequest, client, *, status=200,
                  errors=None, values=None) -> Response:
    redirect_host = redirect_shown(req.redirect_uri)
    values = values or {"agent_id": _agent_id_from(client_name(client)), "queues": "", "verbs": _defaults(req)}
    endpoints = await runtime(request).store.endpoints_of_user(human.user_id)
    known_queues = sorted({q for e in endpoints if e["revoked_at"] is None for q in e["queues"]})
    response = page(request, "consent.html", session=session, human=human, status=status,
                    title=f"Connect {client_name(client)}", client_name=client_name(client),
                    client_id=req.client_id, redirect_host=redirect_host, verified=client_verified(client),
                    signed=signed, binding=_oauth(request).approval_binding(signed, human.user_id),
                    offered=_offered(req), errors=errors or {}, values=values, known_queues=known_queues,
                    active="endpoints")
    response.headers[FORM_ACTION_HEADER] = _form_action(request, req)
    return response


def _expired(request: Request, session) -> Response:
    return bad_request(request, session, "This sign-in link is not valid or has expired (links last ten "
                                         "minutes). Go back to the application you were connecting and start again.")


@get("/consent", name="consent")
async def consent_page(request: Request) -> Response:
    human, session = await require_human(request)
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
    human, session = await require_human(request)
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
    if not oauth.check_binding(signed, human.user_id, form.get("binding")):
        # Shown to another human (or forged): nobody approves on someone else's behalf.
        return page(request, "error.html", session=session, human=human, status=403, title="Not yours to approve",
                    show_flash=False, heading="This approval belongs to someone else",
                    message="This consent form was shown to another person. Start again from the application "
                            "while signed in as yourself.")
    client = await _client(request, req)
    if client is None:
        return bad_request(request, session, "The application asking to connect is no longer known.")
    if form.get("decision") != "approve":
        log.info("oauth consent denied: client=%s user=%s", logs.field(req.client_id), human.user_id)
        target = construct_redirect_uri(req.redirect_uri, error="access_denied",
                                        error_description="the person denied the request", state=req.state)
        return _away(request, session, target, req)
    multi = form["_multi"]
    agent_id = str(form.get("agent_id") or "").strip()
    queues_raw = str(form.get("queues") or "")
    queues = [q for q in queues_raw.replace(",", " ").split() if q]
    verbs = [v for v in multi.getall("verbs", []) if isinstance(v, str)]
    values = {"agent_id": agent_id, "queues": queues_raw, "verbs": verbs}
    problems = vend_problems(agent_id=agent_id, queues=queues, scope=verbs)
    widened = [v for v in verbs if v not in _offered(req)]
    if widened:
        problems.append(Invalid(f"the verb {widened[0]} was not asked for by this application", argument="scope"))
    if not problems:
        try:
            code = await runtime(request).store.oauth_code_issue(
                human.user_id, client_id=req.client_id, client_name=client_name(client),
                client_verified=client_verified(client), agent_id=agent_id, scope=verbs, queues=queues,
                redirect_uri=req.redirect_uri, redirect_uri_explicit=req.redirect_uri_explicit,
                code_challenge=req.code_challenge, resource=req.resource)
        except Invalid as e:
            problems = [e]
    if problems:
        errors = {p.argument or "general": sentence(p.message) for p in problems}
        return await _render(request, human, session, signed, req, client, status=400, errors=errors, values=values)
    log.info("oauth consent approved: client=%s user=%s verbs=%s", logs.field(req.client_id), human.user_id,
             logs.field(",".join(verbs)))
    base = request.app.state.settings.public_url or f"{request.url.scheme}://{request.url.netloc}"
    return _away(request, session, construct_redirect_uri(req.redirect_uri, code=code, state=req.state, iss=base),
                 req)


def _away(request: Request, session, target: str, req: ConsentRequest) -> Response:
    """Back to the client's redirect URI (registered, checked by the authorize handler)."""
    response = Redirect(target, status_code=303, headers={**NO_STORE, FORM_ACTION_HEADER: _form_action(request, req)})
    return with_session(request, response, session)


def handlers() -> list:
    return [consent_page, consent_submit]
