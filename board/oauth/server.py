"""The authorization server co-hosted in the app, for MCP hosts that connect with OAuth.

Built on the MCP SDK's handlers (mcp.server.auth: authorize, token, register, revoke) over
Provider, which keeps clients, codes and tokens in the store (board/store/grants.py):

- /.well-known/oauth-protected-resource[/mcp]: RFC 9728 metadata of /mcp, which /mcp's 401
  names in WWW-Authenticate;
- /.well-known/oauth-authorization-server: RFC 8414 metadata, advertising client ID metadata
  documents (board/oauth/client_documents.py) and dynamic registration (RFC 7591) as the
  fallback;
- /oauth/authorize: checks the client, its redirect URI (a loopback one on any port), the
  scopes and the resource (RFC 8707: only this server's /mcp), then sends the human to the Board's consent screen
  (/consent, board/web/consent.py) with the request signed, so nothing is stored before
  the human approves;
- /oauth/token: the authorization code with PKCE S256 (required), and rotating refresh
  tokens; a code presented a second time revokes the grant it made, and so does a refresh
  token presented again later than settings.oauth_refresh_grace_seconds after its rotation
  (sooner, it gets the pair its rotation issued: two windows of one host refreshing at once).
  A person has one grant per client: a second consent's code updates it;
- /oauth/register: dynamic registration, rate limited per client address (the direct peer,
  or the address a trusted proxy forwarded: SWITCHBOARD_TRUSTED_PROXIES, which uvicorn
  applies); the body at most 16 KiB, the metadata within board/oauth/client_metadata.py's
  limits (redirect URIs https, http on a loopback host, or a private-use scheme);
- /oauth/revoke (RFC 7009): revoking either token revokes the grant.

The public base URL is settings.public_url or, unset, the request's scheme and Host; the
issuer is that base, the resource its /mcp. The handlers never log a token or a code.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import hmac
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator
from urllib.parse import unquote, urlencode, urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from litestar import asgi
from litestar.types import Receive, Scope, Send
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken, AuthorizationCode, AuthorizationParams, AuthorizeError, RefreshToken, RegistrationError, TokenError)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router, request_response

from board import logs
from board.config import Settings
from board.errors import NotFound, SwitchboardError
from board.oauth.client_documents import ClientDocumentError, ClientDocuments, is_document_client_id
from board.oauth.client_metadata import BODY_MAX, Client, as_client, clean_name, metadata_problem, unstorable
from board.store.inputs import hash_token
from board.store.store import Store
from board.store.vocabulary import VERBS

log = logging.getLogger("switchboard.oauth")

CONSENT_PATH = "/consent"
CONSENT_MAX_AGE = 600  # seconds a signed authorization request stays good for the consent screen
_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}

# The request's public base URL, set by the router for the provider (which the SDK calls
# without the request).
_BASE = contextvars.ContextVar("switchboard_oauth_base", default="")


def base_url(settings: Settings, scope: dict) -> str:
    """The server's public base URL: settings.public_url, else the request's scheme and Host."""
    if settings.public_url:
        return settings.public_url
    headers = dict((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", []))
    host = headers.get("host") or "localhost"
    return f"{scope.get('scheme', 'http')}://{host}"


def resource_url(base: str) -> str:
    return base + "/mcp"


def resource_metadata_url(base: str) -> str:
    return base + "/.well-known/oauth-protected-resource/mcp"


def same_resource(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def client_verified(client: OAuthClientInformationFull) -> bool:
    """A client is shown as verified only when it is named by a metadata document and each of
    its redirect URIs is on the document's own host: then who answers at that host wrote it."""
    if not is_document_client_id(client.client_id):
        return False
    host = urlsplit(client.client_id).hostname
    return bool(client.redirect_uris) and all(urlsplit(str(u)).hostname == host for u in client.redirect_uris)


def client_name(client: OAuthClientInformationFull) -> str:
    """The name the consent screen and the grant show: control, bidi and invisible characters
    taken out (they could reverse or hide the heading), else the first redirect's host."""
    return (clean_name(client.client_name or "")[:200] or urlsplit(str(client.redirect_uris[0])).hostname
            or "unnamed")


@dataclass(frozen=True)
class ConsentRequest:
    """An authorization request the SDK's handler accepted, carried signed to the consent
    screen: nothing is stored until the human approves."""

    client_id: str
    redirect_uri: str
    redirect_uri_explicit: bool
    scopes: tuple[str, ...] | None
    state: str | None
    code_challenge: str
    resource: str


class HashedSecretAuthenticator(ClientAuthenticator):
    """The SDK's client authentication, with the stored secret being its SHA-256 (the
    provider's get_client gives client_secret as that hash, hex): the presented secret is
    hashed before the constant-time comparison."""

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        client = await self.provider.get_client(client_id)
        if client is None:
            raise AuthenticationError("Invalid client_id")
        if client.token_endpoint_auth_method == "none":
            return client
        presented: str | None = None
        if client.token_endpoint_auth_method == "client_secret_basic":
            header = request.headers.get("authorization", "")
            if not header.startswith("Basic "):
                raise AuthenticationError("Missing or invalid Basic authentication in Authorization header")
            try:
                basic_id, _, presented = base64.b64decode(header[6:]).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError, binascii.Error):
                raise AuthenticationError("Invalid Basic authentication header") from None
            if unquote(basic_id) != client_id:
                raise AuthenticationError("Client ID mismatch in Basic auth")
            presented = unquote(presented)
        else:
            secret = form.get("client_secret")
            presented = secret if isinstance(secret, str) else None
        if not client.client_secret or not presented:
            raise AuthenticationError("Client secret is required")
        if not hmac.compare_digest(hash_token(presented).hex().encode(), client.client_secret.encode()):
            raise AuthenticationError("Invalid client_secret")
        return client


class Provider:
    """The SDK's OAuthAuthorizationServerProvider over Switchboard's store. A grant's endpoint
    id rides in the SDK's token objects as `subject`."""

    def __init__(self, server: "OAuthServer"):
        self.server = server

    @property
    def store(self) -> Store:
        assert self.server.store is not None
        return self.server.store

    # -- clients ---------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if is_document_client_id(client_id):
            try:
                client: OAuthClientInformationFull = as_client(await self.server.documents.resolve(client_id))
            except ClientDocumentError:
                return None
        else:
            row = await self.store.oauth_client(client_id)
            if row is None:
                return None
            secret = row["secret_hash"]
            client = Client.model_validate(
                {**row["metadata"], "client_id": client_id,
                 "client_secret": bytes(secret).hex() if secret else None})
        # Any verb may be asked for; the human narrows it on the consent screen.
        return client.model_copy(update={"scope": " ".join(VERBS)})

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        problem = metadata_problem(client_info.model_dump(mode="json", exclude_none=True))
        if problem:
            raise RegistrationError(problem.error, problem.description)
        if client_info.client_name is not None:  # stored, and echoed in the response, clean
            client_info.client_name = clean_name(client_info.client_name) or None
        metadata = client_info.model_dump(mode="json", exclude_none=True,
                                          exclude={"client_id", "client_secret", "client_secret_expires_at"})
        await self.store.oauth_client_register(client_info.client_id, metadata, client_info.client_secret)
        log.info("oauth client registered: client=%s name=%s", logs.field(client_info.client_id),
                 logs.field(client_info.client_name or "-"))

    # -- authorization ---------------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        resource = resource_url(_BASE.get())
        if params.resource is not None and not same_resource(params.resource, resource):
            raise AuthorizeError("invalid_target", f"this server issues tokens for {resource} only")
        request = ConsentRequest(
            client_id=client.client_id, redirect_uri=str(params.redirect_uri),
            redirect_uri_explicit=params.redirect_uri_provided_explicitly,
            scopes=tuple(params.scopes) if params.scopes else None, state=params.state,
            code_challenge=params.code_challenge, resource=resource)
        return f"{_BASE.get()}{CONSENT_PATH}?request={self.server.sign_request(request)}"

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        row = await self.store.oauth_code(code)
        if row is None:
            return None
        if row["used"]:  # RFC 6749 4.1.2: a code used twice revokes what it granted
            await self._revoke_grant(row["endpoint_id"], "an authorization code was used twice")
            return None
        if row["client_id"] != client.client_id:
            return None
        return AuthorizationCode(
            code=code, scopes=list(row["scope"]), expires_at=row["expires_at"], client_id=row["client_id"],
            code_challenge=row["code_challenge"], redirect_uri=row["redirect_uri"],
            redirect_uri_provided_explicitly=row["redirect_uri_explicit"], resource=row["resource"])

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        settings = self.server.settings
        issued = await self.store.oauth_code_exchange(
            authorization_code.code, access_seconds=settings.oauth_access_token_seconds,
            refresh_seconds=settings.oauth_refresh_token_seconds)
        if issued is None:
            raise TokenError("invalid_grant", "authorization code was already used or has expired")
        log.info("oauth grant %s: endpoint=%s client=%s", "updated" if issued["updated"] else "created",
                 issued["endpoint_id"], logs.field(client.client_id), extra={"endpoint_id": issued["endpoint_id"]})
        return self._token(issued["access_token"], issued["refresh_token"], issued["scope"])

    # -- refresh, access and revocation ----------------------------------------------------

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        grace = self.server.settings.oauth_refresh_grace_seconds
        row = await self.store.oauth_refresh(refresh_token, grace_seconds=grace)
        if row is None:
            return None
        # A stolen copy, or the client's own stale one: either way end the grant; within the
        # grace it is another window of the client refreshing at the same moment.
        if row["rotated"] and not row["in_grace"]:
            await self._revoke_grant(row["endpoint_id"], "a refresh token was used again after rotation")
            return None
        if row["client_id"] != client.client_id:
            return None
        return RefreshToken(token=refresh_token, client_id=row["client_id"], scopes=list(row["scope"]),
                            expires_at=int(row["expires_at"]), resource=row["resource"], subject=row["endpoint_id"])

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        settings = self.server.settings
        issued = await self.store.oauth_refresh_rotate(
            refresh_token.token, scopes, access_seconds=settings.oauth_access_token_seconds,
            refresh_seconds=settings.oauth_refresh_token_seconds, grace_seconds=settings.oauth_refresh_grace_seconds)
        if issued is None:  # another request rotated it first, longer ago than the grace: the same reuse
            await self._revoke_grant(refresh_token.subject, "a refresh token was used twice")
            raise TokenError("invalid_grant", "refresh token was already used; the grant is revoked")
        if issued["repeated"]:
            log.info("oauth refresh token presented again within the grace: endpoint=%s, the same pair",
                     refresh_token.subject, extra={"endpoint_id": refresh_token.subject})
        return self._token(issued["access_token"], issued["refresh_token"], issued["scope"])

    async def load_access_token(self, token: str) -> AccessToken | None:
        row = await self.store.oauth_access(token)
        if row is None:
            return None
        return AccessToken(token=token, client_id=row["client_id"], scopes=list(row["scope"]),
                           expires_at=int(row["expires_at"]), resource=row["resource"], subject=row["endpoint_id"])

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await self._revoke_grant(token.subject, "the client revoked its token")

    async def exchange_identity_assertion(self, client, params) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "the JWT bearer grant is not supported")

    async def _revoke_grant(self, endpoint_id: str | None, why: str) -> None:
        if not endpoint_id:
            return
        try:
            dead = await self.store.endpoint_revoke(endpoint_id)
        except NotFound:  # revoked already
            return
        log.warning("oauth grant revoked: endpoint=%s reason=%s held_todos_dead_lettered=%s", endpoint_id,
                    logs.field(why), dead, extra={"endpoint_id": endpoint_id})

    def _token(self, access: str, refresh: str, scopes) -> OAuthToken:
        return OAuthToken(access_token=access, token_type="Bearer",
                          expires_in=self.server.settings.oauth_access_token_seconds,
                          scope=" ".join(scopes), refresh_token=refresh)


class RegistrationLimiter:
    """Dynamic registrations per client address: a sliding minute, in this process."""

    def __init__(self, per_minute: float):
        self.per_minute = per_minute
        self._seen: dict[str, list[float]] = {}

    def allow(self, address: str) -> bool:
        if self.per_minute <= 0:
            return True
        now = time.monotonic()
        recent = [t for t in self._seen.get(address, []) if t > now - 60.0]
        if len(recent) >= self.per_minute:
            self._seen[address] = recent
            return False
        recent.append(now)
        self._seen[address] = recent
        if len(self._seen) > 10_000:
            self._seen = {k: v for k, v in self._seen.items() if v and v[-1] > now - 60.0}
        return True


def _oauth_error(status: int, error: str, description: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status,
                        headers={**_NO_STORE, **(headers or {})})


def _replayed(request: Request, body: bytes, content_type: str | None = None) -> Request:
    """request again with body (read already) to be read, for a handler that reads it itself."""
    drop = (b"content-type", b"content-length") if content_type else (b"content-length",)
    headers = [(k, v) for k, v in request.scope["headers"] if k not in drop]
    if content_type:
        headers.append((b"content-type", content_type.encode()))
    headers.append((b"content-length", str(len(body)).encode()))
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request({**request.scope, "headers": headers}, receive)


def _limited(app):
    """The SDK's own cap on a request body, as its routes have it."""
    return RequestBodyLimitMiddleware(app, DEFAULT_MAX_REQUEST_BODY_SIZE)


def _cors(app, methods: list[str]):
    # Browser-based clients (the MCP Inspector) call these from their own origin; no cookie is
    # involved, so any origin may.
    return CORSMiddleware(app, allow_origins=["*"], allow_methods=methods,
                          allow_headers=["mcp-protocol-version", "authorization", "content-type"])


class OAuthServer:
    """The authorization server of one app instance: routes() at build time, running() in the
    lifespan; the Board's consent screen uses consent_request() and the store."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.store: Store | None = None
        self.documents = ClientDocuments(settings)
        self.provider = Provider(self)
        self.limiter = RegistrationLimiter(settings.oauth_registrations_per_minute)
        self._signer = URLSafeTimedSerializer(settings.secret_key or "switchboard-unset-secret",
                                              salt="switchboard.oauth.consent")
        authenticator = HashedSecretAuthenticator(self.provider)
        self._authorize = AuthorizationHandler(self.provider)
        self._token = TokenHandler(self.provider, authenticator)
        self._register = RegistrationHandler(self.provider, ClientRegistrationOptions(
            enabled=True, valid_scopes=list(VERBS), default_scopes=list(VERBS)))
        self._revoke = RevocationHandler(self.provider, authenticator)
        self.router = Router(routes=[
            Route("/.well-known/oauth-authorization-server", _cors(request_response(self._as_metadata), ["GET"]),
                  methods=["GET", "OPTIONS"]),
            Route("/.well-known/oauth-protected-resource/mcp", _cors(request_response(self._pr_metadata), ["GET"]),
                  methods=["GET", "OPTIONS"]),
            Route("/.well-known/oauth-protected-resource", _cors(request_response(self._pr_metadata), ["GET"]),
                  methods=["GET", "OPTIONS"]),
            Route("/oauth/authorize", _limited(request_response(self._authorize_route)), methods=["GET", "POST"]),
            Route("/oauth/token", _cors(_limited(request_response(self._token_route)), ["POST"]),
                  methods=["POST", "OPTIONS"]),
            Route("/oauth/register", _cors(_limited(request_response(self._register_route)), ["POST"]),
                  methods=["POST", "OPTIONS"]),
            Route("/oauth/revoke", _cors(_limited(request_response(self._revoke_route)), ["POST"]),
                  methods=["POST", "OPTIONS"]),
        ])

    @contextlib.asynccontextmanager
    async def running(self, store: Store) -> AsyncIterator[None]:
        self.store = store
        try:
            yield
        finally:
            self.store = None
            await self.documents.aclose()

    # -- ASGI ------------------------------------------------------------------------------

    def mounts(self) -> list:
        """Litestar mounts for /.well-known and /oauth (a mount gets its path with the prefix
        cut off and a slash added; the router sees the whole path again)."""
        server = self

        def mounted(prefix: str):
            @asgi(prefix, is_mount=True, copy_scope=True)
            async def oauth_mount(scope: Scope, receive: Receive, send: Send) -> None:
                rest = scope["path"].rstrip("/")
                await server({**scope, "path": prefix + rest, "root_path": ""}, receive, send)
            return oauth_mount

        return [mounted("/.well-known"), mounted("/oauth")]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self.store is None:
            await _oauth_error(503, "temporarily_unavailable", "the server is starting or stopping")(
                scope, receive, send)
            return
        token = _BASE.set(base_url(self.settings, scope))
        try:
            await self.router(scope, receive, send)
        finally:
            _BASE.reset(token)

    async def _guarded(self, handler, request: Request) -> Response:
        """A handler's answer; the database away is temporarily_unavailable (503), never a 500."""
        try:
            return await handler(request)
        except SwitchboardError as err:
            status, error = {"unavailable": (503, "temporarily_unavailable"),
                             "internal": (500, "server_error")}.get(err.code, (400, "invalid_request"))
            return _oauth_error(status, error, err.message)

    # -- metadata --------------------------------------------------------------------------

    def metadata(self, base: str) -> OAuthMetadata:
        return OAuthMetadata(
            issuer=base, authorization_endpoint=f"{base}/oauth/authorize", token_endpoint=f"{base}/oauth/token",
            registration_endpoint=f"{base}/oauth/register", revocation_endpoint=f"{base}/oauth/revoke",
            scopes_supported=list(VERBS), response_types_supported=["code"],
            grant_types_supported=["authorization_code", "refresh_token"],
            token_endpoint_auth_methods_supported=["none", "client_secret_post", "client_secret_basic"],
            revocation_endpoint_auth_methods_supported=["none", "client_secret_post", "client_secret_basic"],
            code_challenge_methods_supported=["S256"], client_id_metadata_document_supported=True,
            service_documentation=f"{base}/endpoints")

    async def _as_metadata(self, request: Request) -> Response:
        body = self.metadata(_BASE.get()).model_dump(mode="json", exclude_none=True)
        return JSONResponse(body, headers={"Cache-Control": "public, max-age=300"})

    async def _pr_metadata(self, request: Request) -> Response:
        base = _BASE.get()
        body = ProtectedResourceMetadata(
            resource=resource_url(base), authorization_servers=[base], scopes_supported=list(VERBS),
            bearer_methods_supported=["header"], resource_name="Switchboard",
            resource_documentation=f"{base}/endpoints").model_dump(mode="json", exclude_none=True)
        return JSONResponse(body, headers={"Cache-Control": "public, max-age=300"})

    # -- the SDK's handlers, each after what it does not check -----------------------------

    async def _authorize_route(self, request: Request) -> Response:
        params = request.query_params if request.method == "GET" else await request.form()
        for name, value in params.multi_items():
            if isinstance(value, str) and unstorable(value):
                # The SDK's handler would pass it to the store and log the refusal as an error.
                return _oauth_error(400, "invalid_request",
                                    f"{logs.cap(name, 40)} must not hold NUL characters or lone surrogates")
        client_id = params.get("client_id")
        if isinstance(client_id, str) and is_document_client_id(client_id):
            try:  # the SDK would only say "not found"; the human and the developer need why
                await self.documents.resolve(client_id)
            except ClientDocumentError as err:
                return _oauth_error(400, "invalid_client", f"client metadata document: {err.message}")
        return await self._guarded(self._authorize.handle, request)

    async def _token_route(self, request: Request) -> Response:
        form = await request.form()  # cached on the request, which the SDK's handler reads again
        resource = form.get("resource")
        expected = resource_url(_BASE.get())
        if isinstance(resource, str) and resource and not same_resource(resource, expected):
            return _oauth_error(400, "invalid_target", f"this server issues tokens for {expected} only")
        return await self._guarded(self._token.handle, request)

    async def _register_route(self, request: Request) -> Response:
        # request.client is the direct peer, or what a trusted proxy forwarded (uvicorn's
        # proxy headers, given SWITCHBOARD_TRUSTED_PROXIES only).
        address = request.client.host if request.client else "unknown"
        if not self.limiter.allow(address):
            return _oauth_error(429, "too_many_requests", "too many client registrations from this address; "
                                "retry in a minute", {"Retry-After": "60"})
        too_large = _oauth_error(400, "invalid_client_metadata",
                                 f"the registration body must be at most {BODY_MAX // 1024} KiB")
        with contextlib.suppress(ValueError):
            if int(request.headers.get("content-length", "0")) > BODY_MAX:
                return too_large
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > BODY_MAX:
                return too_large
        return await self._guarded(self._register.handle, _replayed(request, body))

    async def _revoke_route(self, request: Request) -> Response:
        form = await request.form()
        if "client_secret" not in form:
            # The SDK's revocation request model requires the field even for a public client,
            # which has no secret (RFC 7009 2.1 asks only for client_id): pass it empty.
            body = urlencode([*form.multi_items(), ("client_secret", "")]).encode()
            request = _replayed(request, body, "application/x-www-form-urlencoded")
        return await self._guarded(self._revoke.handle, request)

    # -- the consent screen's side ---------------------------------------------------------

    def sign_request(self, request: ConsentRequest) -> str:
        return self._signer.dumps([request.client_id, request.redirect_uri, request.redirect_uri_explicit,
                                   list(request.scopes) if request.scopes else None, request.state,
                                   request.code_challenge, request.resource])

    def consent_request(self, signed: Any) -> ConsentRequest | None:
        """The authorization request a consent link carries, or None when it is forged,
        malformed or older than CONSENT_MAX_AGE."""
        if not isinstance(signed, str) or len(signed) > 8192:
            return None
        try:
            data = self._signer.loads(signed, max_age=CONSENT_MAX_AGE)
            client_id, redirect_uri, explicit, scopes, state, challenge, resource = data
        except (BadSignature, ValueError, TypeError):
            return None
        return ConsentRequest(client_id, redirect_uri, bool(explicit), tuple(scopes) if scopes else None, state,
                              challenge, resource)

    def approval_binding(self, signed: str, user_id: int) -> str:
        """A value the consent form carries that ties it to the human it was shown to."""
        return hmac.new((self.settings.secret_key or "").encode(), f"{user_id}:{signed}".encode(),
                        "sha256").hexdigest()

    def check_binding(self, signed: str, user_id: int, presented: Any) -> bool:
        return isinstance(presented, str) and hmac.compare_digest(presented, self.approval_binding(signed, user_id))
