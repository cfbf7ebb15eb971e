"""2025-11-25 MCP sessions that any serve process can resume (docs/scaling.md).

The SDK's session manager keeps each session in the memory of the process that answered
its `initialize`, and answers any other process's request for it with 404. Here a session
id is signed with SWITCHBOARD_SECRET_KEY and carries what a process needs to serve the
session without having seen its handshake: the endpoint that opened it and the client's
declared capabilities. A process that receives a request for a session it does not hold
checks the signature and the endpoint (the request's credential must be the same
endpoint's), then serves the session from then on as if it had opened it: a replica,
born initialized. The negotiated protocol version comes from the request's
MCP-Protocol-Version header, which clients send on every request after the handshake.

So a client whose requests land on any process (a balancer without affinity, a new
connection per request) keeps one session: its tool calls, resources/subscribe, and its
GET stream, wherever that opens; the doorbell rings there, since every process hears every
change through the LISTEN fan-out. Nothing is stored per session: resuming costs one HMAC
check, once per process per session.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Callable

from itsdangerous import BadSignature, URLSafeSerializer
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import DEFAULT_NEGOTIATED_VERSION, ClientCapabilities
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

log = logging.getLogger("switchboard.mcp")

# Past this size the declared capabilities are cut to their extensions (MCP Apps is the one
# the server reads), so a session id stays well inside a balancer's header limit.
CAPABILITIES_MAX_BYTES = 1024
# Set by the ASGI wrapper on a request opening a session: {"endpoint": id, "capabilities": {...}}.
OPENING_KEY = "switchboard.mcp.opening"
_opening: contextvars.ContextVar[dict | None] = contextvars.ContextVar("switchboard_mcp_opening", default=None)


@dataclass(frozen=True)
class SessionClaims:
    endpoint_id: str
    capabilities: dict[str, Any]


class SessionIds:
    """Mints and reads session ids: a random nonce, the endpoint and the client's declared
    capabilities, signed (not encrypted: nothing in it is secret, and it is the client's own)."""

    def __init__(self, secret_key: str | None):
        if not secret_key:
            log.warning("no SWITCHBOARD_SECRET_KEY: MCP sessions are signed with a random key, so only this "
                        "process can resume them")
        self._serializer = URLSafeSerializer(secret_key or secrets.token_urlsafe(32), salt="switchboard.mcp.session")

    def mint(self, endpoint_id: str, capabilities: dict[str, Any] | None) -> str:
        capabilities = capabilities if isinstance(capabilities, dict) else {}
        if len(json.dumps(capabilities, separators=(",", ":"))) > CAPABILITIES_MAX_BYTES:
            extensions = capabilities.get("extensions")
            capabilities = {"extensions": extensions} if isinstance(extensions, dict) else {}
            if len(json.dumps(capabilities, separators=(",", ":"))) > CAPABILITIES_MAX_BYTES:
                capabilities = {}
        return self._serializer.dumps({"n": secrets.token_hex(8), "e": endpoint_id, "c": capabilities})

    def read(self, session_id: str) -> SessionClaims | None:
        try:
            data = self._serializer.loads(session_id)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("e"), str) or not isinstance(data.get("c"), dict):
            return None
        return SessionClaims(data["e"], data["c"])


def opening_capabilities(body: bytes) -> dict[str, Any] | None:
    """The capabilities an `initialize` request declares, or None when the body is not one."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    return capabilities if isinstance(capabilities, dict) else {}


class ResumableSessionManager(StreamableHTTPSessionManager):
    """The SDK's stateful session manager, with signed session ids that any process resumes.

    resumed(scope, session_id, connection) is told of each session this process takes up
    (the doorbell sends a session's rings through its connection)."""

    def __init__(self, app, *, ids: SessionIds, resumed: Callable[[Scope, str, Connection], None], **kwargs):
        super().__init__(app, **kwargs)
        self.ids = ids
        self.resumed = resumed
        # Sessions being taken up: set once the session's server loop is connected. A request of
        # the same session arriving meanwhile waits for it (its transport cannot take a message
        # before then).
        self._taking_up: dict[str, asyncio.Event] = {}

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _header(scope, MCP_SESSION_ID_HEADER)
        if session_id is not None:
            taking_up = self._taking_up.get(session_id)
            if taking_up is not None:  # another request of it is taking it up: wait until it has
                await taking_up.wait()
            elif session_id not in self._server_instances:
                await self._resume(session_id, scope)
        token = _opening.set(scope.get(OPENING_KEY))
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _opening.reset(token)

    def _admit_session(self, requestor):
        """A new session (as the SDK's own), under a signed id naming its endpoint and the
        client's capabilities; None at the session limit."""
        opening = _opening.get()
        if opening is None:  # the wrapper saw no initialize: the SDK's own random id, never resumed
            return super()._admit_session(requestor)
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        session_id = self.ids.mint(opening["endpoint"], opening.get("capabilities"))
        transport = self._transport(session_id)
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport:
        return StreamableHTTPServerTransport(
            mcp_session_id=session_id, is_json_response_enabled=self.json_response, event_store=self.event_store,
            security_settings=self.security_settings, retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout)

    async def _resume(self, session_id: str, scope: Scope) -> None:
        """Take up a session another process opened, when its id is ours and the request's
        credential is its endpoint's; otherwise leave it to the SDK, which answers 404."""
        claims = self.ids.read(session_id)
        user = scope.get("user")
        if claims is None or not isinstance(user, AuthenticatedUser) \
                or user.access_token.client_id != claims.endpoint_id:
            return
        version = _header(scope, MCP_PROTOCOL_VERSION_HEADER)
        if version not in HANDSHAKE_PROTOCOL_VERSIONS:
            version = DEFAULT_NEGOTIATED_VERSION
        taken_up = None
        async with self._session_creation_lock:
            if session_id in self._server_instances:
                taking_up = self._taking_up.get(session_id)  # a concurrent request took it up first
            elif self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
                return
            else:
                transport = self._transport(session_id)
                self._server_instances[session_id] = transport
                self._session_owners[session_id] = authorization_context(user)
                self._taking_up[session_id] = taken_up = asyncio.Event()
        if taken_up is None:  # wait, outside the lock, until that request's server loop is connected
            if taking_up is not None:
                await taking_up.wait()
            return
        try:
            connection = await self._task_group.start(self._serve_resumed, session_id, transport, version,
                                                      claims.capabilities)
        except BaseException:
            await self._discard_session(session_id, transport)
            raise
        finally:
            del self._taking_up[session_id]
            taken_up.set()
        self.resumed(scope, session_id, connection)

    async def _serve_resumed(self, session_id: str, transport: StreamableHTTPServerTransport, version: str,
                             capabilities: dict[str, Any], *, task_status: Any) -> None:
        """The session's server loop, as the SDK's own (serve_loop), on a connection born
        initialized: its handshake happened on another process."""
        async with transport.connect() as (read_stream, write_stream):
            dispatcher = JSONRPCDispatcher(read_stream, write_stream, inline_methods=frozenset({"initialize"}))
            connection = Connection.for_loop(dispatcher, session_id=session_id, protocol_version_hint=version)
            with contextlib.suppress(ValidationError):  # checked when the session opened; never fatal here
                connection.client_capabilities = ClientCapabilities.model_validate(capabilities)
            connection.initialized.set()
            task_status.started(connection)
            try:
                with transport.idle_scope or contextlib.nullcontext():  # ends an idle session, as the SDK's
                    await serve_connection(self.app, dispatcher, connection=connection,
                                           lifespan_state=self._lifespan_state)
            except Exception:
                log.exception("resumed MCP session crashed")
            finally:
                await self._discard_session(session_id, transport)


def _header(scope: Scope, name: str) -> str | None:
    key = name.lower().encode("latin-1")
    return next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == key), None)
