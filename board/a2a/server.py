"""The A2A surface of one app instance: the SDK's JSON-RPC routes at /a2a (A2A 1.0 and the
SDK's 0.3 compatibility on the same URL) and its agent card route at
/.well-known/agent-card.json, mounted in Litestar; mount() at build time, running() in the
lifespan (the handler needs the store and the fan-out).

Every /a2a request passes /mcp's gate first (McpSurface.admit: DNS-rebinding protection and
the same bearer tokens, endpoint tokens and OAuth access tokens), then MCP's rate limit (the
same bucket per endpoint) and body limit. The card is public and lists no skill; the
authenticated extended card (GetExtendedAgentCard) lists one skill per queue the credential
may add to.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import AsyncIterator

from a2a.server.context import ServerCallContext
from a2a.server.routes import ServerCallContextBuilder, create_agent_card_routes, create_jsonrpc_routes
from a2a.types import a2a_pb2 as pb
from litestar import asgi
from litestar.types import Receive, Scope, Send
from starlette.applications import Starlette

from board.a2a.handler import AGENT_KEY, PushNotifications, TodoRequestHandler
from board.config import Settings
from board.mcp.server import MAX_BODY_BYTES, McpSurface, _replaying, _send_bytes, _version, _whole_body
from board.oauth.server import base_url
from board.store.store import Agent, Store

log = logging.getLogger("switchboard.a2a")

BASE_KEY = "base"
# Cards built per base URL (the Host a request came to, when no public URL is set): at most this many kept.
CARDS_KEPT = 16
_RATE_LIMITED = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
    "code": -32600, "message": "too many calls from this endpoint; retry after a short wait",
    "data": {"code": "rate_limited"}}}).encode()
_TOO_LARGE = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
    "code": -32600, "message": f"the request body is over {MAX_BODY_BYTES} bytes"}}).encode()
DESCRIPTION = ("A work queue whose workers are agents: a message adds a todo to a queue, a worker claims it, and "
               "the task follows the todo through its attempts (submitted, working, input-required, completed, "
               "failed, canceled). Name the queue in the message's metadata ({\"queue\": \"...\"}).")


class AgentCards:
    """The public card (no skills) and the extended card of a credential."""

    def __init__(self, settings: Settings, push: bool):
        self.settings = settings
        self.push = push

    def public(self, base: str) -> pb.AgentCard:
        url = base + "/a2a"
        card = pb.AgentCard(
            name="Switchboard", description=DESCRIPTION, version=_version(),
            # A2A 1.0; the SDK's card route adds the 0.3 fields (url, preferredTransport), and
            # /a2a answers 0.3's methods too.
            supported_interfaces=[pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
            capabilities=pb.AgentCapabilities(streaming=True, push_notifications=self.push, extended_agent_card=True),
            default_input_modes=["text/plain", "application/json"],
            default_output_modes=["application/json", "text/plain"],
        )
        card.security_schemes["bearer"].http_auth_security_scheme.CopyFrom(pb.HTTPAuthSecurityScheme(
            scheme="Bearer", description="A Switchboard endpoint token (switchboard endpoint vend), or an OAuth "
                                         "access token"))
        card.security_requirements.add().schemes["bearer"].CopyFrom(pb.StringList())
        if self.settings.oauth_enabled:
            oauth = card.security_schemes["oauth"].oauth2_security_scheme
            oauth.description = "OAuth 2.1 with PKCE, as for /mcp"
            oauth.oauth2_metadata_url = base + "/.well-known/oauth-authorization-server"
            flow = oauth.flows.authorization_code
            flow.authorization_url, flow.token_url, flow.pkce_required = (base + "/oauth/authorize",
                                                                          base + "/oauth/token", True)
            flow.scopes["add_todo"] = "add todos (send messages)"
            flow.scopes["get_todo"] = "read tasks"
            card.security_requirements.add().schemes["oauth"].list.append("add_todo")
        return card

    def extended(self, base: str, agent: Agent) -> pb.AgentCard:
        card = self.public(base)
        if agent.allows("add_todo"):
            for queue in agent.queues:
                card.skills.append(pb.AgentSkill(
                    id=f"queue:{queue}", name=queue, tags=["queue", queue],
                    description=f"Add a todo to queue {queue}: its workers claim it and the task follows it.",
                    examples=[f'{{"queue": "{queue}"}} in the message metadata, the first text line its title'],
                    input_modes=["text/plain", "application/json"], output_modes=["application/json", "text/plain"]))
        return card


class _Context(ServerCallContextBuilder):
    def build(self, request) -> ServerCallContext:
        # headers: the SDK reads A2A-Version there (none is 0.3); the bearer token is left out
        headers = {k: v for k, v in request.headers.items() if k != "authorization"}
        return ServerCallContext(state={AGENT_KEY: request.scope[AGENT_KEY], BASE_KEY: request.scope[BASE_KEY],
                                        "headers": headers})


class A2ASurface:
    def __init__(self, settings: Settings, mcp: McpSurface, push: PushNotifications | None = None):
        self.settings = settings
        self.mcp = mcp
        self.push = push
        self.cards = AgentCards(settings, push is not None)
        self._card_apps: dict[str, Starlette] = {}
        self.rpc: Starlette | None = None

    def mount(self) -> list:
        surface = self

        @asgi("/a2a", is_mount=True, copy_scope=True)
        async def a2a_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            await surface.handle(scope, receive, send)

        @asgi("/.well-known/agent-card.json", copy_scope=True)
        async def agent_card(scope: Scope, receive: Receive, send: Send) -> None:
            await surface.card(scope, receive, send)

        return [a2a_endpoint, agent_card]

    async def card(self, scope: Scope, receive: Receive, send: Send) -> None:
        base = base_url(self.settings, scope)
        app = self._card_apps.get(base)
        if app is None:
            if len(self._card_apps) >= CARDS_KEPT:
                self._card_apps.clear()
            app = self._card_apps[base] = Starlette(routes=create_agent_card_routes(self.cards.public(base),
                                                                                    card_url="/"))
        await app(dict(scope, path="/", root_path=""), receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.rpc is None or self.mcp.endpoints is None:
            await _send_bytes(send, 503, b'{"error":"unavailable"}', [])
            return
        admitted = await self.mcp.admit(scope, receive, send)
        if admitted is None:
            return
        agent, _ = admitted
        if not self.mcp.limiter.allow(agent.endpoint_id):
            await _send_bytes(send, 429, _RATE_LIMITED, [(b"retry-after", b"1")])
            return
        if scope.get("method") == "POST":
            body = await _whole_body(receive)
            if body is None:  # the client left mid-body
                return
            if len(body) > MAX_BODY_BYTES:
                await _send_bytes(send, 413, _TOO_LARGE, [])
                return
            receive = _replaying(body, receive)
        scope[AGENT_KEY] = agent
        scope[BASE_KEY] = base_url(self.settings, scope)
        await self.rpc(dict(scope, path="/", root_path=""), receive, send)

    @contextlib.asynccontextmanager
    async def running(self, store: Store, fanout) -> AsyncIterator[None]:
        handler = TodoRequestHandler(store, fanout, self.cards, self.push)
        self.rpc = Starlette(routes=create_jsonrpc_routes(handler, "/", context_builder=_Context(),
                                                          enable_v0_3_compat=True))
        try:
            yield
        finally:
            self.rpc = None
