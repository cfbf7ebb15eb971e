"""Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document): a client_id
that is an https URL with a path names a JSON document, the client's metadata in RFC 7591
field names, which this server fetches instead of keeping a registration.

- is_document_client_id(): whether a client_id names a document (https, a host, a path other
  than /, no fragment, no user name or password, no . or .. segments);
- ClientDocuments.resolve(): the client the document describes, as the MCP SDK's
  OAuthClientInformationFull, or ClientDocumentError with a message fit to show the human
  or the client's developer.

Fetching: httpx2 with one deadline for the whole fetch (5 s), Accept: application/json and
no compression asked for; the body is streamed and refused past 64 KiB; up to 3 redirects,
each followed by hand to an https URL; every host must resolve to public addresses only
(unless settings.oauth_client_metadata_allow_private, for tests). The TLS context trusts
the system's and certifi's CAs plus settings.oauth_client_metadata_ca_file.

The document: a JSON object whose client_id is the URL exactly; redirect_uris required,
within the limits a registration has (board/oauth/client_metadata.py: https, http on a
loopback host or a private-use scheme, at most 10; client_name at most 200 characters once
cleaned, every URI at most 2 KiB); token_endpoint_auth_method absent or "none" (such a
client has no secret); grant_types with authorization_code; response_types with code.
The client may ask for every verb: the human narrows it on the consent screen.

Caching: a document as long as its response's Cache-Control max-age (less its Age) or
Expires says, at most 24 h, 5 minutes when neither is given, not at all for no-store or
no-cache; a refusal for 30 s, so a bad client cannot make this server fetch in a loop. At
most 1,000 URLs are kept. Concurrent resolves of one URL share one fetch.

One log line a fetch: the URL's host and the outcome (a short code), never the document.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

import httpx2
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import ValidationError

from board import logs
from board.config import Settings
from board.errors import Invalid
from board.oauth.client_metadata import clean_name, metadata_problem
from board.store.vocabulary import VERBS

log = logging.getLogger("switchboard.oauth")

TIMEOUT_SECONDS = 5.0
MAX_BYTES = 64 * 1024
MAX_REDIRECTS = 3
CACHE_DEFAULT_SECONDS = 300.0
CACHE_MAX_SECONDS = 24 * 3600.0
ERROR_CACHE_SECONDS = 30.0
CACHE_MAX_ENTRIES = 1000

_REDIRECTS = (301, 302, 303, 307, 308)
_HEADERS = {"Accept": "application/json", "Accept-Encoding": "identity",
            "User-Agent": "Switchboard (OAuth client metadata)"}


class ClientDocumentError(Exception):
    """A client metadata document that could not be had or was refused. message says why,
    fit to show a user; reason is a short code for the log."""

    def __init__(self, message: str, reason: str = "refused"):
        super().__init__(message)
        self.message = message
        self.reason = reason


def client_id_problem(client_id: str) -> str | None:
    """Why client_id does not name a metadata document, or None when it does. Stricter than
    the MCP SDK client's is_valid_client_metadata_url (https and a path other than /): the
    draft also requires a host and forbids a fragment, a user name or password and . or ..
    path segments."""
    if not isinstance(client_id, str) or not client_id:
        return "the client id is empty"
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in client_id):
        return "the client id must not hold spaces or control characters"
    try:
        parts = urlsplit(client_id)
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        return "the client id is not a valid URL"
    if parts.scheme != "https":
        return "the client id must be an https URL"
    if not parts.hostname:
        return "the client id must name a host"
    if "@" in parts.netloc:
        return "the client id must not hold a user name or password"
    if "#" in client_id:
        return "the client id must not have a fragment"
    if parts.path in ("", "/"):
        return "the client id must have a path other than /"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "the client id must not have . or .. path segments"
    return None


def is_document_client_id(client_id: str) -> bool:
    """Whether client_id names a client metadata document (see client_id_problem)."""
    return client_id_problem(client_id) is None


def client_from_document(client_id: str, body: bytes) -> OAuthClientInformationFull:
    """The client a fetched document describes, or ClientDocumentError saying what is wrong."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ClientDocumentError("the document is not JSON", "not_json") from None
    if not isinstance(doc, dict):
        raise ClientDocumentError("the document is not a JSON object", "not_object")
    named = doc.get("client_id")
    if named is None:
        raise ClientDocumentError("the document has no client_id; it must be the document's own URL", "no_client_id")
    if named != client_id:
        shown = logs.cap(str(named), 200)
        raise ClientDocumentError(f"the document names another client id ({shown!r}), not the URL it was "
                                  "fetched from", "other_client_id")
    if "client_secret" in doc or "client_secret_expires_at" in doc:
        raise ClientDocumentError("the document must not hold a client_secret", "secret")
    method = doc.get("token_endpoint_auth_method")
    if method is not None and method != "none":
        shown = logs.cap(str(method), 60)
        raise ClientDocumentError(f"token_endpoint_auth_method {shown!r} is not supported: a client named by a "
                                  'metadata document has no secret, so only "none" is', "auth_method")
    uris = doc.get("redirect_uris")
    if not uris:
        raise ClientDocumentError("the document has no redirect_uris", "no_redirect_uris")
    if not isinstance(uris, list):
        raise ClientDocumentError("redirect_uris must be a list of URIs", "redirect_uris")
    problem = metadata_problem(doc)
    if problem:
        raise ClientDocumentError(problem.description, "redirect_uris" if problem.error == "invalid_redirect_uri"
                                  else "limits")
    grants = doc.get("grant_types")
    if grants is not None and (not isinstance(grants, list) or "authorization_code" not in grants):
        raise ClientDocumentError("grant_types must include authorization_code", "grant_types")
    responses = doc.get("response_types")
    if responses is not None and (not isinstance(responses, list) or "code" not in responses):
        raise ClientDocumentError('response_types must include "code"', "response_types")
    try:
        metadata = OAuthClientMetadata.model_validate(doc)
    except ValidationError as err:
        # Where and what, never the offending input (it is the document's content).
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}"
                             for e in err.errors()[:3])
        raise ClientDocumentError(f"the document is not valid client metadata: {logs.cap(problems, 300)}",
                                  "invalid_metadata") from None
    return OAuthClientInformationFull(
        client_id=client_id, client_secret=None, token_endpoint_auth_method="none",
        redirect_uris=metadata.redirect_uris, grant_types=list(metadata.grant_types),
        response_types=list(metadata.response_types), scope=" ".join(VERBS),
        client_name=clean_name(metadata.client_name or "") or None, client_uri=metadata.client_uri, logo_uri=metadata.logo_uri)


def cache_seconds(headers: httpx2.Headers, now: float | None = None) -> float:
    """How long a response may be kept by its cache headers (RFC 9111): 0 for no-store or
    no-cache; max-age less Age; else Expires less Date (or now); else the default. At most
    CACHE_MAX_SECONDS. A malformed max-age or Expires means stale (0)."""
    directives: dict[str, str | None] = {}
    for item in ",".join(headers.get_list("cache-control")).split(","):
        name, _, value = item.strip().partition("=")
        if name:
            directives[name.strip().lower()] = value.strip().strip('"') if value else None
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    if "max-age" in directives:
        try:
            seconds = float(int(directives["max-age"] or ""))
        except ValueError:
            return 0.0
        try:
            seconds -= max(0, int(headers.get("age", "0")))
        except ValueError:
            pass
        return max(0.0, min(seconds, CACHE_MAX_SECONDS))
    if "expires" in headers:
        try:
            expires = email.utils.parsedate_to_datetime(headers["expires"]).timestamp()
        except (TypeError, ValueError, IndexError):
            return 0.0
        try:
            base = email.utils.parsedate_to_datetime(headers["date"]).timestamp()
        except (KeyError, TypeError, ValueError, IndexError):
            base = time.time() if now is None else now
        return max(0.0, min(expires - base, CACHE_MAX_SECONDS))
    return CACHE_DEFAULT_SECONDS


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not (address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
                or address.is_reserved or address.is_unspecified or not address.is_global)


_NOT_PUBLIC = "a private, loopback or otherwise non-public address"


def ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """The system's default CAs and certifi's, plus ca_file when given."""
    context = ssl.create_default_context()
    try:
        import certifi

        context.load_verify_locations(cafile=certifi.where())
    except (ImportError, OSError, ssl.SSLError):
        pass
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as err:
            raise Invalid(f"SWITCHBOARD_OAUTH_CLIENT_METADATA_CA_FILE {ca_file!r} could not be loaded: {err}",
                          argument="SWITCHBOARD_OAUTH_CLIENT_METADATA_CA_FILE") from None
    return context


@dataclass
class _Entry:
    expires: float
    client: OAuthClientInformationFull | None = None
    error: ClientDocumentError | None = None


class ClientDocuments:
    """Fetches, checks and caches client metadata documents (see the module's docstring).
    The limits are parameters so that tests need not wait out the real ones; clock is the
    monotonic clock the cache reads."""

    def __init__(self, settings: Settings, *, timeout: float = TIMEOUT_SECONDS, max_bytes: int = MAX_BYTES,
                 max_redirects: int = MAX_REDIRECTS, error_seconds: float = ERROR_CACHE_SECONDS,
                 max_entries: int = CACHE_MAX_ENTRIES, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.error_seconds = error_seconds
        self.max_entries = max_entries
        self.clock = clock
        self._ssl = ssl_context(settings.oauth_client_metadata_ca_file)
        self._client: httpx2.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._cache: dict[str, _Entry] = {}
        self._inflight: dict[str, asyncio.Task] = {}

    async def resolve(self, client_id: str) -> OAuthClientInformationFull:
        """The client client_id's document describes; ClientDocumentError when client_id is
        not a document URL, or its document cannot be had or is refused."""
        problem = client_id_problem(client_id)
        if problem:
            raise ClientDocumentError(problem, "client_id")
        entry = self._cache.get(client_id)
        if entry is not None and entry.expires > self.clock():
            return self._answer(entry)
        task = self._inflight.get(client_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._fetch_and_keep(client_id))
            self._inflight[client_id] = task
            task.add_done_callback(lambda t, key=client_id: self._settled(key, t))
        # Shielded: a caller that gives up does not cancel the fetch the others wait on.
        return self._answer(await asyncio.shield(task))

    async def aclose(self) -> None:
        tasks = list(self._inflight.values())
        self._inflight.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        client, self._client, self._client_loop = self._client, None, None
        if client is not None:
            await client.aclose()

    # -- internals -------------------------------------------------------------------------

    @staticmethod
    def _answer(entry: _Entry) -> OAuthClientInformationFull:
        if entry.error is not None:  # a fresh exception each time: a shared one gathers tracebacks
            raise ClientDocumentError(entry.error.message, entry.error.reason)
        assert entry.client is not None
        return entry.client.model_copy(deep=True)

    def _settled(self, client_id: str, task: asyncio.Task) -> None:
        if self._inflight.get(client_id) is task:
            del self._inflight[client_id]
        if not task.cancelled():
            task.exception()  # retrieved, so a fetch nobody waits on any more is not reported

    def _keep(self, client_id: str, entry: _Entry) -> None:
        self._cache.pop(client_id, None)
        if len(self._cache) >= self.max_entries:
            now = self.clock()
            for key in [k for k, e in self._cache.items() if e.expires <= now]:
                del self._cache[key]
            while len(self._cache) >= self.max_entries:
                del self._cache[next(iter(self._cache))]  # the oldest kept
        self._cache[client_id] = entry

    async def _fetch_and_keep(self, client_id: str) -> _Entry:
        host = urlsplit(client_id).hostname or "-"
        try:
            async with asyncio.timeout(self.timeout):
                body, headers = await self._fetch(client_id)
            client = client_from_document(client_id, body)
        except (TimeoutError, httpx2.TimeoutException):
            error = ClientDocumentError(f"fetching the document timed out after {self.timeout:g} s", "timeout")
        except ClientDocumentError as err:
            error = err
        except httpx2.HTTPError as err:
            error = _fetch_error(err)
        except Exception:  # a fault of ours: said, and refused like any other failure
            log.exception("client metadata document fetch failed: host=%s", logs.field(host))
            error = ClientDocumentError("the document could not be fetched", "internal")
        else:
            seconds = cache_seconds(headers)
            log.info("client metadata document fetched: host=%s outcome=ok cache_seconds=%d",
                     logs.field(host), seconds)
            entry = _Entry(expires=self.clock() + seconds, client=client)
            if seconds > 0:
                self._keep(client_id, entry)
            else:
                self._cache.pop(client_id, None)
            return entry
        log.info("client metadata document fetched: host=%s outcome=%s", logs.field(host), logs.field(error.reason))
        entry = _Entry(expires=self.clock() + self.error_seconds, error=error)
        self._keep(client_id, entry)
        return entry

    def _http(self) -> httpx2.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # A client's pooled connections belong to the loop that opened them: another loop
            # (a test's) gets a client of its own. trust_env off: no proxy, netrc or
            # SSL_CERT_FILE from the environment.
            self._client = httpx2.AsyncClient(
                verify=self._ssl, follow_redirects=False, trust_env=False, headers=_HEADERS,
                timeout=httpx2.Timeout(self.timeout), limits=httpx2.Limits(max_connections=20,
                                                                           max_keepalive_connections=5))
            self._client_loop = loop
        return self._client

    async def _fetch(self, client_id: str) -> tuple[bytes, httpx2.Headers]:
        url = httpx2.URL(client_id)
        client = self._http()
        for hop in range(self.max_redirects + 1):
            await self._check_host(url)
            # The host is resolved again when httpx2 connects: a name that changes its answer
            # between the two (DNS rebinding) could still reach a private address. Closing
            # that would take a transport that connects to the checked address itself.
            async with client.stream("GET", url) as response:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    try:
                        target = url.join(response.headers["location"])
                    except httpx2.InvalidURL:
                        raise ClientDocumentError("the document's URL redirected to an invalid URL",
                                                  "redirect") from None
                    if target.scheme != "https" or not target.host:
                        raise ClientDocumentError("the document's URL redirected to a URL that is not https",
                                                  "redirect_not_https")
                    if hop == self.max_redirects:
                        raise ClientDocumentError(f"the document's URL redirected more than {self.max_redirects} "
                                                  "times", "redirects")
                    url = target
                    continue
                if response.status_code != 200:
                    raise ClientDocumentError(f"fetching the document answered HTTP status {response.status_code}",
                                              f"http_{response.status_code}")
                return await self._body(response), response.headers
        raise AssertionError("unreachable")  # pragma: no cover

    async def _body(self, response: httpx2.Response) -> bytes:
        too_large = ClientDocumentError(f"the document is larger than {self.max_bytes // 1024} KiB "
                                        f"({self.max_bytes} bytes)", "too_large")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise ClientDocumentError(f"the document was sent compressed ({logs.cap(encoding, 40)}) though it was "
                                      "asked for uncompressed", "encoded")
        try:
            if int(response.headers.get("content-length", "0")) > self.max_bytes:
                raise too_large
        except ValueError:
            pass
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > self.max_bytes:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def _check_host(self, url: httpx2.URL) -> None:
        """Refuse a host that is, or resolves to, anything but public addresses."""
        if self.settings.oauth_client_metadata_allow_private:
            return
        host = url.raw_host.decode("ascii")
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            if not _public(literal):
                raise ClientDocumentError(f"the document's host is {_NOT_PUBLIC}", "private_address")
            return
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, url.port or 443, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            raise ClientDocumentError(f"the document's host {logs.cap(host, 100)!r} could not be resolved",
                                      "dns") from None
        if not infos:
            raise ClientDocumentError(f"the document's host {logs.cap(host, 100)!r} could not be resolved", "dns")
        for info in infos:
            try:
                address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            except ValueError:
                raise ClientDocumentError(f"the document's host resolves to {_NOT_PUBLIC}",
                                          "private_address") from None
            if not _public(address):
                raise ClientDocumentError(f"the document's host resolves to {_NOT_PUBLIC}", "private_address")


def _fetch_error(err: httpx2.HTTPError) -> ClientDocumentError:
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return ClientDocumentError("the document's host's TLS certificate could not be verified", "tls")
        if isinstance(cause, ssl.SSLError):
            return ClientDocumentError("the TLS connection to the document's host failed", "tls")
        cause = cause.__cause__ or cause.__context__
    if isinstance(err, httpx2.ConnectError):
        return ClientDocumentError("the document's host could not be connected to", "connect")
    return ClientDocumentError(f"the document could not be fetched ({type(err).__name__})", "fetch")
