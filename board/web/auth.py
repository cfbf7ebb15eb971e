"""Board sign-in: the signed session cookie, CSRF tokens and the failed-sign-in throttle.

The session is stateless: an itsdangerous-signed, timestamped cookie holding the user id,
the session's CSRF token and at most one flash message. It is HttpOnly, SameSite=Lax,
Secure when the request came over https, and expires after SESSION_MAX_AGE (the signature
carries the time, so an old cookie is refused even if a browser keeps it). Every form that
changes anything posts the session's CSRF token; a visitor without a session gets an
anonymous one on the sign-in page, so the sign-in form is protected too, and signing in
issues a fresh session (new token) so a planted one cannot be reused.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

log = logging.getLogger("switchboard.web")

SESSION_COOKIE = "sb_session"
SESSION_MAX_AGE = 12 * 3600  # seconds
CSRF_FIELD = "csrf_token"

# Failed sign-ins: at most this many per (username, client) and per client in the window.
THROTTLE_WINDOW = 15 * 60.0
THROTTLE_PER_ACCOUNT = 5
THROTTLE_PER_CLIENT = 20


@dataclass
class Session:
    """What the cookie carries. user_id is None for the anonymous sign-in session."""

    user_id: int | None
    csrf: str
    issued: int  # when it was signed in (unix seconds): the expiry is absolute, not sliding
    # (kind, message), or (kind, message, href, link text) when it leads somewhere; shown once
    flash: tuple[str, ...] | None = None
    changed: bool = False  # re-issue the cookie at the end of the request
    space: int | None = None  # the space the Board shows (a team's user id); None: the person's own

    def set_space(self, space_id: int | None) -> None:
        self.space = space_id
        self.changed = True

    def check_csrf(self, presented: Any) -> bool:
        return isinstance(presented, str) and bool(presented) and hmac.compare_digest(
            presented.encode(), self.csrf.encode())

    def set_flash(self, kind: str, message: str, link: tuple[str, str] | None = None) -> None:
        """link: (href, text) of a link the message ends with, e.g. to what was just added."""
        self.flash = (kind, message, *link) if link else (kind, message)
        self.changed = True

    def pop_flash(self) -> tuple[str, ...] | None:
        flash, self.flash = self.flash, None
        if flash is not None:
            self.changed = True
        return flash


def new_session(user_id: int | None, *, issued: float | None = None) -> Session:
    return Session(user_id=user_id, csrf=secrets.token_urlsafe(32),
                   issued=int(time.time() if issued is None else issued), changed=True)


class SessionCodec:
    """Signs and verifies session cookies with the server's secret key."""

    def __init__(self, secret_key: str, max_age: int = SESSION_MAX_AGE):
        self.max_age = max_age
        self._serializer = URLSafeTimedSerializer(secret_key, salt="switchboard.board.session")

    def encode(self, session: Session, *, signed_at: float | None = None) -> str:
        payload = {"u": session.user_id, "c": session.csrf, "t": session.issued}
        if session.flash:
            payload["f"] = list(session.flash)
        if session.space is not None:
            payload["s"] = session.space
        if signed_at is None:
            return self._serializer.dumps(payload)
        # Tests and tools may mint a cookie as of another time (an expired one, say).
        signer = self._serializer.make_signer()
        signer.get_timestamp = lambda: int(signed_at)  # type: ignore[method-assign]
        return signer.sign(self._serializer.dump_payload(payload)).decode()

    def remaining(self, session: Session, now: float | None = None) -> int:
        """Seconds the session has left (the cookie's Max-Age)."""
        now = time.time() if now is None else now
        return max(0, int(session.issued + self.max_age - now))

    def decode(self, cookie: str | None) -> Session | None:
        """The session in a cookie, or None when it is missing, tampered with or expired."""
        if not cookie:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=self.max_age)
        except SignatureExpired:
            return None
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("c"), str):
            return None
        issued = data.get("t")
        if isinstance(issued, bool) or not isinstance(issued, int) or issued + self.max_age <= time.time():
            return None
        user_id = data.get("u")
        if user_id is not None and (isinstance(user_id, bool) or not isinstance(user_id, int)):
            return None
        flash = data.get("f")
        if not (isinstance(flash, list) and len(flash) in (2, 4) and all(isinstance(x, str) for x in flash)):
            flash = None
        space = data.get("s")
        if isinstance(space, bool) or not isinstance(space, int):
            space = None
        return Session(user_id=user_id, csrf=data["c"], issued=issued, flash=tuple(flash) if flash else None,
                       space=space)


@dataclass
class SignInThrottle:
    """Throttles failed sign-ins in this process: a sliding window per (account, client)
    and per client. Keyed by both, so a stranger cannot lock a user out from elsewhere.
    In memory, so each server process counts on its own."""

    window: float = THROTTLE_WINDOW
    per_account: int = THROTTLE_PER_ACCOUNT
    per_client: int = THROTTLE_PER_CLIENT
    _fails: dict[tuple, deque] = field(default_factory=dict)

    def _recent(self, key: tuple, now: float) -> deque:
        q = self._fails.get(key)
        if q is None:
            return deque()
        while q and q[0] <= now - self.window:
            q.popleft()
        if not q:
            del self._fails[key]
        return q

    def retry_after(self, username: str, client: str, now: float | None = None) -> int:
        """Seconds until another attempt is allowed; 0 when allowed now."""
        now = time.monotonic() if now is None else now
        waits = []
        for key, limit in (((username.lower(), client), self.per_account), ((None, client), self.per_client)):
            q = self._recent(key, now)
            if len(q) >= limit:
                waits.append(q[len(q) - limit] + self.window - now)
        return max(1, int(max(waits)) + 1) if waits else 0

    def failed(self, username: str, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for key in ((username.lower(), client), (None, client)):
            self._fails.setdefault(key, deque()).append(now)
        if len(self._fails) > 10000:  # bound memory: forget the stalest keys
            for key in sorted(self._fails, key=lambda k: self._fails[k][-1] if self._fails[k] else 0)[:5000]:
                del self._fails[key]

    def succeeded(self, username: str, client: str) -> None:
        self._fails.pop((username.lower(), client), None)


def safe_next(target: Any) -> str:
    """Where to go after signing in: a local path only (no scheme, no host, no //)."""
    if not isinstance(target, str) or not target.startswith("/") or target.startswith("//"):
        return "/"
    if "\\" in target or any(ord(ch) < 0x20 for ch in target):
        return "/"
    return target
