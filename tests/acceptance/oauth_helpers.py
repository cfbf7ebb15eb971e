"""Helpers for the OAuth acceptance tests: PKCE pairs, dynamic registration, and the consent
screen driven over HTTP by a signed-in Board client (the browser tests drive it in Chromium)."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from tests.acceptance.test_board_auth import csrf_of

REDIRECT = "http://127.0.0.1:9/callback"


@dataclass
class Pkce:
    verifier: str
    challenge: str


def pkce() -> Pkce:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return Pkce(verifier, challenge)


async def register(c: httpx.AsyncClient, *, redirect_uris=(REDIRECT,), name="Test Host", **extra) -> httpx.Response:
    body = {"client_name": name, "redirect_uris": list(redirect_uris), "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], **extra}
    return await c.post("/oauth/register", json=body)


async def public_client(c: httpx.AsyncClient, **kw) -> str:
    r = await register(c, **kw)
    assert r.status_code == 201, r.text
    return r.json()["client_id"]


def authorize_params(client_id: str, p: Pkce, *, scope: str | None = "list_todos get_todo claim_next heartbeat complete",
                     redirect_uri: str | None = REDIRECT, resource: str | None = None, state: str = "st-1",
                     **extra) -> dict:
    params = {"response_type": "code", "client_id": client_id, "code_challenge": p.challenge,
              "code_challenge_method": "S256", "state": state, **extra}
    if scope is not None:
        params["scope"] = scope
    if redirect_uri is not None:
        params["redirect_uri"] = redirect_uri
    if resource is not None:
        params["resource"] = resource
    return params


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def hidden(page: str, name: str) -> str:
    m = re.search(r'<input type="hidden" name="%s" value="([^"]*)"' % name, page)
    assert m, f"no hidden {name} in the page"
    return html.unescape(m.group(1))


async def consent_form(board: httpx.AsyncClient, consent_url: str) -> tuple[str, dict]:
    """The consent page and the fields its form posts (csrf, request, binding)."""
    r = await board.get(consent_url)
    assert r.status_code == 200, r.text
    return r.text, {"csrf_token": csrf_of(r.text), "request": hidden(r.text, "request"),
                    "binding": hidden(r.text, "binding")}


async def approve(board: httpx.AsyncClient, consent_url: str, *, verbs, queues="q", agent_id="host-agent",
                  decision="approve") -> httpx.Response:
    _, fields = await consent_form(board, consent_url)
    data = [*fields.items(), ("decision", decision), ("queues", queues), ("agent_id", agent_id),
            *(("verbs", v) for v in verbs)]
    return await board.post("/consent", content=urlencode(data),
                            headers={"content-type": "application/x-www-form-urlencoded"})


async def authorize(c: httpx.AsyncClient, params: dict) -> httpx.Response:
    return await c.get("/oauth/authorize", params=params)


async def code_for(c: httpx.AsyncClient, board: httpx.AsyncClient, client_id: str, p: Pkce, *,
                   verbs=("list_todos", "get_todo", "claim_next", "heartbeat", "complete"), queues="q",
                   **params) -> str:
    """The whole front channel: authorize, consent approved on the Board, the code back."""
    r = await authorize(c, authorize_params(client_id, p, **params))
    assert r.status_code == 302, r.text
    consent = r.headers["location"]
    assert "/consent?request=" in consent
    done = await approve(board, consent, verbs=verbs, queues=queues)
    assert done.status_code == 303, done.text
    back = query_of(done.headers["location"])
    assert back["state"] == params.get("state", "st-1")
    return back["code"]


async def exchange(c: httpx.AsyncClient, client_id: str, code: str, p: Pkce, *, redirect_uri=REDIRECT,
                   **extra) -> httpx.Response:
    data = {"grant_type": "authorization_code", "client_id": client_id, "code": code,
            "code_verifier": p.verifier, "redirect_uri": redirect_uri, **extra}
    return await c.post("/oauth/token", data=data)


async def refresh(c: httpx.AsyncClient, client_id: str, refresh_token: str, **extra) -> httpx.Response:
    return await c.post("/oauth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                              "refresh_token": refresh_token, **extra})
