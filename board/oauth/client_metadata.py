"""What a client may say about itself, registered (RFC 7591) or in a metadata document, and
how a redirect URI it asks for is matched to those it gave.

Redirect URIs (RFC 8252 for native apps, OAuth 2.1):
- https with a host; http only on a loopback host: 127.0.0.1, [::1] or localhost (RFC 8252
  section 7.3 names the IP literals; localhost is kept because hosts in the wild register
  it and browsers resolve it to loopback only);
- a private-use scheme of a desktop or IDE host (section 7.1: `cursor://...`,
  `vscode://...`, `com.example.app:/cb`); never a scheme a browser runs or reads locally
  (javascript:, data:, file:, vbscript:, about:, blob:, ...);
- no fragment, no user name or password, at most URI_MAX characters.

Matching (Client.validate_redirect_uri, which the MCP SDK's authorize handler calls): a
loopback redirect matches a registered one with the same host, path and query whatever its
port (section 7.3: a native app listens on an ephemeral port); anything else matches exactly.

Limits, so a registration cannot grow the database: client_name at most NAME_MAX characters
once control, bidi and invisible characters are taken out (they could reverse or hide the
consent screen's heading); every URI at most URI_MAX characters; at most REDIRECT_URIS_MAX
redirect URIs. The registration body itself is capped by the server (BODY_MAX)."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull
from pydantic import AnyUrl

BODY_MAX = 16 * 1024
NAME_MAX = 200
URI_MAX = 2048
REDIRECT_URIS_MAX = 10
URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
# Schemes a browser runs, reads locally or hands to itself: never a place to send a code.
REFUSED_SCHEMES = ("javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "view-source",
                   "chrome", "chrome-extension", "ws", "wss", "ftp", "mailto", "tel", "sms", "urn")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
# Invisible letters and fillers that Unicode does not class as format characters.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180e\u2800\u3164\uffa0")


class MetadataError(Exception):
    """Client metadata refused: error is the RFC 7591 code (invalid_client_metadata or
    invalid_redirect_uri), description names the field."""

    def __init__(self, error: str, description: str):
        super().__init__(description)
        self.error = error
        self.description = description


def _shown(uri: str) -> str:
    return repr(uri[:200] + ("\u2026" if len(uri) > 200 else ""))


def redirect_uri_problem(uri: str) -> str | None:
    """Why a client's redirect URI is refused, or None (see the module's docstring)."""
    if len(uri) > URI_MAX:
        return f"redirect URI {_shown(uri)} is longer than {URI_MAX} characters"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        return f"redirect URI {_shown(uri)} is not a valid URL"
    scheme = parts.scheme.lower()
    if parts.fragment or "#" in uri:
        return f"redirect URI {_shown(uri)} must not have a fragment"
    if "@" in parts.netloc:
        return f"redirect URI {_shown(uri)} must not hold a user name or password"
    if scheme == "https" and parts.hostname:
        return None
    if scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return None
    if scheme not in ("http", "https", *REFUSED_SCHEMES) and _SCHEME.fullmatch(scheme):
        return None  # a private-use scheme (RFC 8252 section 7.1)
    return (f"redirect URI {_shown(uri)} must be https, http on 127.0.0.1, [::1] or localhost, or an "
            "application's own scheme (such as cursor: or com.example.app:)")


def is_private_use(uri: str) -> bool:
    """Whether uri is a private-use scheme's (an application on the person's device)."""
    return urlsplit(uri).scheme.lower() not in ("http", "https")


def redirect_shown(uri: str) -> str:
    """Where a redirect URI returns the person, for the consent screen: an http(s) URI's host
    and port; a private-use URI whole but for its query (the scheme names the application)."""
    parts = urlsplit(uri)
    if not is_private_use(uri):
        return parts.netloc
    return parts._replace(query="", fragment="").geturl()


def form_action_source(uri: str) -> str:
    """The CSP form-action source the consent form's post may end at (its redirect): an
    http(s) URI's origin, a private-use URI's scheme."""
    parts = urlsplit(uri)
    if is_private_use(uri):
        return f"{parts.scheme}:"
    return f"{parts.scheme}://{parts.netloc}"


def _loopback(parts) -> bool:
    return parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS


def redirect_uri_matches(registered: str, requested: str) -> bool:
    """Whether requested is registered: a loopback redirect whatever its port, with the same
    scheme, host, path and query; anything else exactly."""
    if registered == requested:
        return True
    mine, theirs = urlsplit(registered), urlsplit(requested)
    if not (_loopback(mine) and _loopback(theirs)):
        return False
    return (mine.hostname == theirs.hostname and mine.path == theirs.path and mine.query == theirs.query
            and "@" not in theirs.netloc and not theirs.fragment)


class Client(OAuthClientInformationFull):
    """A client as the provider gives it to the MCP SDK's handlers: its redirect URIs matched
    by redirect_uri_matches (a loopback one on any port)."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if redirect_uri is None:
            return super().validate_redirect_uri(None)
        asked = str(redirect_uri)
        if not any(redirect_uri_matches(str(uri), asked) for uri in self.redirect_uris or []):
            raise InvalidRedirectUriError(f"Redirect URI '{asked[:200]}' not registered for client")
        return redirect_uri


def as_client(client: OAuthClientInformationFull) -> Client:
    return Client.model_validate(client.model_dump())


def clean_name(name: str) -> str:
    """A client's name with control, bidi, format (zero-width) and invisible characters taken
    out and each run of spaces made one."""
    kept = "".join(ch for ch in name if ch not in _INVISIBLE
                   and unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
    return " ".join(kept.split())


def unstorable(value: object) -> bool:
    """Whether a JSON value holds text Postgres cannot store: NUL, or a lone surrogate."""
    if isinstance(value, str):
        return "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, dict):
        return any(unstorable(k) or unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(unstorable(v) for v in value)
    return False


def metadata_problem(metadata: dict) -> MetadataError | None:
    """The first limit a client's metadata (a registration or a document, as JSON) breaks."""
    for field, value in metadata.items():
        if unstorable(field) or unstorable(value):
            return MetadataError("invalid_client_metadata",
                                 f"{_shown(str(field))} must not hold NUL characters or lone surrogates")
    name = metadata.get("client_name")
    if isinstance(name, str) and len(clean_name(name)) > NAME_MAX:
        return MetadataError("invalid_client_metadata", f"client_name must be at most {NAME_MAX} characters")
    for field in URI_FIELDS:
        value = metadata.get(field)
        if isinstance(value, str) and len(value) > URI_MAX:
            return MetadataError("invalid_client_metadata", f"{field} must be at most {URI_MAX} characters")
    uris = metadata.get("redirect_uris")
    if not uris:
        return MetadataError("invalid_redirect_uri", "redirect_uris must name at least one URI")
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        return MetadataError("invalid_redirect_uri", "redirect_uris must be a list of URIs")
    if len(uris) > REDIRECT_URIS_MAX:
        return MetadataError("invalid_redirect_uri", f"redirect_uris must name at most {REDIRECT_URIS_MAX} URIs")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            return MetadataError("invalid_redirect_uri", f"redirect_uris: {problem}")
    return None
