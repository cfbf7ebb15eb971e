"""Helpers for the OAuth acceptance tests: PKCE pairs, dynamic registration, and the consent
screen driven over HTTP by a signed-in Board client (the browser tests drive it in Chromium)."""

from __future__ import annotations

import base64
import contextlib
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
                  decision="approve", space: int | None = None) -> httpx.Response:
    """Approve on the consent screen; `space`: the team to connect it for (else their own)."""
    _, fields = await consent_form(board, consent_url)
    data = [*fields.items(), ("decision", decision), ("queues", queues), ("agent_id", agent_id),
            *(("verbs", v) for v in verbs), *((("space", str(space)),) if space is not None else ())]
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


# -- the MCP Python SDK's own OAuth client ------------------------------------------------

@dataclass
class MemoryStorage:
    """The SDK client's TokenStorage, in memory (a host keeps it on disk)."""

    tokens: object = None
    client_info: object = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info) -> None:
        self.client_info = client_info


class HttpConsent:
    """The SDK client's redirect and callback handlers, with a signed-in Board client standing
    in for the person's browser: it follows the authorization URL to the consent screen,
    approves `verbs`, and hands the code on the redirect back to the SDK."""

    def __init__(self, board: httpx.AsyncClient, *, verbs, queues="q", agent_id="sdk-host", space: int | None = None):
        self.board, self.verbs, self.queues, self.agent_id = board, list(verbs), queues, agent_id
        self.space = space
        self.redirects: list[str] = []
        self.pages: list[str] = []  # each consent screen as shown, whitespace folded
        self.back: str | None = None

    async def redirect_handler(self, url: str) -> None:
        self.redirects.append(url)
        r = await self.board.get(url)
        assert r.status_code == 302, r.text
        self.pages.append(" ".join((await self.board.get(r.headers["location"])).text.split()))
        done = await approve(self.board, r.headers["location"], verbs=self.verbs, queues=self.queues,
                             agent_id=self.agent_id, space=self.space)
        assert done.status_code == 303, done.text
        self.back = done.headers["location"]

    async def callback_handler(self):
        from mcp.shared.auth import AuthorizationCodeResult

        back = query_of(self.back)
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"), iss=back.get("iss"))


def sdk_provider(server_url: str, storage: MemoryStorage, consent, *, client_metadata_url: str | None = None,
                 redirect_uri: str = REDIRECT, scope: str | None = None):
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(client_name="SDK Host", redirect_uris=[redirect_uri],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none", scope=scope)
    return OAuthClientProvider(server_url + "/mcp", metadata, storage, redirect_handler=consent.redirect_handler,
                               callback_handler=consent.callback_handler, client_metadata_url=client_metadata_url)


@contextlib.asynccontextmanager
async def sdk_session(server_url: str, provider, generation: str = "modern"):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0)) as http:
        kwargs = {"mode": "legacy"} if generation == "legacy" else {}
        async with Client(streamable_http_client(server_url + "/mcp", http_client=http), **kwargs) as client:
            yield client
