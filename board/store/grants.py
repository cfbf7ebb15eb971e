"""OAuth grants (board/oauth/ drives them): registered clients, authorization codes, and the
access and refresh tokens of grants. A grant is an endpoint of kind 'oauth', created when its
code is exchanged, so it authenticates, is scoped and is revoked exactly as a vended endpoint
(accounts.py). A person has at most one live grant per client (a team one per client and agent id,
since its agents are told apart by agent id): a second consent's code
updates it. Codes and tokens are random (a rotated pair is derived from the refresh token it
replaces, see rotated_pair), returned once, and stored as SHA-256 only. A mixin of
board.store.store.Store; its statements are in board/store/sql/oauth.sql."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets

from board.errors import Conflict
from board.store.accounts import vend_problems
from board.store.base import acts, space_user
from board.store.inputs import hash_token
from board.store.queries import query
from board.store.vocabulary import Human

# Prefixes say what a token is when one turns up where it should not (a log, a note).
ACCESS_PREFIX, REFRESH_PREFIX, CODE_PREFIX = "sba_", "sbr_", "sbc_"
CODE_SECONDS = 300


# The key rotated pairs are derived with when the server has no secret key (tests, the
# store alone): random, so this process alone can recompute a pair.
_PROCESS_KEY = secrets.token_bytes(32)


def _mint(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)  # 256 random bits


def rotated_pair(key: bytes, refresh_token: str) -> tuple[str, str]:
    """The access and refresh token a refresh token rotates to: an HMAC of it under the
    server's secret key, so that the same token presented again (a second window refreshing
    at the same moment) recomputes the same pair and finds it stored, though only hashes are."""
    def derived(prefix: str) -> str:
        mac = hmac.new(key, f"switchboard.oauth.{prefix}{refresh_token}".encode(), hashlib.sha256).digest()
        return prefix + base64.urlsafe_b64encode(mac).decode().rstrip("=")
    return derived(ACCESS_PREFIX), derived(REFRESH_PREFIX)


class Grants:
    async def oauth_client_register(self, client_id: str, metadata: dict, secret: str | None) -> None:
        await self._fetch(query("oauth_client_insert"), {
            "client_id": client_id, "metadata": json.dumps(metadata),
            "secret_hash": hash_token(secret) if secret else None}, op="oauth_register")

    async def oauth_client(self, client_id: str) -> dict | None:
        """A registered client: its metadata and its secret's hash (None for a public client)."""
        return await self._fetch(query("oauth_client_get"), {"client_id": client_id}, op="oauth_client", one=True)

    @acts("vend", "admin", todo=None, detail=("agent_id", "client_name"))
    async def oauth_code_issue(self, user_id: "int | Human", *, client_id: str, client_name: str,
                               client_verified: bool, agent_id: str, scope: list[str], queues: list[str],
                               redirect_uri: str, redirect_uri_explicit: bool, code_challenge: str,
                               resource: str) -> str:
        """A code for what the human approved, for the space they approved it in (their own,
        or a team they are an admin of: its grant is an endpoint of the team); Invalid (naming
        agent_id, queues or scope) when the approval could not be vended as an endpoint."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        problems = vend_problems(agent_id=agent_id, queues=queues, scope=scope)
        if problems:
            raise problems[0]
        code = _mint(CODE_PREFIX)
        await self._fetch(query("oauth_code_insert"), {
            "code_hash": hash_token(code), "client_id": client_id, "client_name": client_name[:200],
            "client_verified": client_verified, "user_id": user_id, "agent_id": agent_id,
            "scope": list(dict.fromkeys(scope)), "queues": list(dict.fromkeys(queues)),
            "redirect_uri": redirect_uri, "redirect_uri_explicit": redirect_uri_explicit,
            "code_challenge": code_challenge, "resource": resource, "ttl_seconds": CODE_SECONDS},
            op="oauth_authorize")
        return code

    async def oauth_code(self, code: str) -> dict | None:
        return await self._fetch(query("oauth_code_get"), {"code_hash": hash_token(code)}, op="oauth_code", one=True)

    async def oauth_code_exchange(self, code: str, *, access_seconds: int, refresh_seconds: int) -> dict | None:
        """The grant's new tokens, or None when the code was used (or expired) meanwhile. The
        person's live grant of the same client is updated to what the code approved (its
        earlier tokens end); without one a new grant is made. `updated` says which."""
        access, refresh = _mint(ACCESS_PREFIX), _mint(REFRESH_PREFIX)
        params = {"code_hash": hash_token(code), "access_hash": hash_token(access),
                  "refresh_hash": hash_token(refresh), "access_ttl": access_seconds, "refresh_ttl": refresh_seconds}
        try:
            row = await self._fetch(query("oauth_code_exchange"), params, op="oauth_token", one=True)
        except Conflict:
            # Another exchange made the person's grant of this client in the meantime: this
            # one, run again, finds and updates it.
            row = await self._fetch(query("oauth_code_exchange"), params, op="oauth_token", one=True)
        if row is None:
            return None
        if row["updated"]:
            for observer in self.control_observers:  # this process's cached tokens of the grant, at once
                observer({"kind": "endpoint_changed", "endpoint": row["endpoint_id"]})
        return {"endpoint_id": row["endpoint_id"], "scope": list(row["scope"]), "access_token": access,
                "refresh_token": refresh, "updated": row["updated"]}

    async def oauth_refresh(self, token: str, *, grace_seconds: float = 0) -> dict | None:
        """A refresh token of a live grant (rotated or not, expired or not), or None; `in_grace`
        when it was rotated within the last grace_seconds."""
        return await self._fetch(query("oauth_refresh_get"), {"token_hash": hash_token(token), "grace": grace_seconds},
                                 op="oauth_token", one=True)

    async def oauth_refresh_rotate(self, token: str, scope: list[str], *, access_seconds: int, refresh_seconds: int,
                                   grace_seconds: float = 0) -> dict | None:
        """A new access and refresh token for a refresh token used for the first time; the same
        pair again for one rotated within the last grace_seconds (two windows of one host
        refreshing at once); None when it was rotated before that (or expired, or its grant was
        revoked)."""
        access, refresh = rotated_pair(self._oauth_key(), token)
        hashes = {"token_hash": hash_token(token), "access_hash": hash_token(access),
                  "refresh_hash": hash_token(refresh)}
        row = await self._fetch(query("oauth_refresh_rotate"), {
            **hashes, "scope": list(scope), "access_ttl": access_seconds, "refresh_ttl": refresh_seconds},
            op="oauth_token", one=True)
        if row and row["tokens"]:
            return {"access_token": access, "refresh_token": refresh, "scope": list(scope), "repeated": False}
        # Rotated already: a statement of its own, whose snapshot sees the rotation that won.
        again = await self._fetch(query("oauth_refresh_repeat"), {**hashes, "grace": grace_seconds},
                                  op="oauth_token", one=True)
        if again is None:
            return None
        return {"access_token": access, "refresh_token": refresh, "scope": list(again["scope"]), "repeated": True}

    def _oauth_key(self) -> bytes:
        return self.settings.secret_key.encode() if self.settings.secret_key else _PROCESS_KEY

    async def oauth_access(self, token: str) -> dict | None:
        return await self._fetch(query("oauth_access_get"), {"token_hash": hash_token(token)}, op="oauth_access",
                                 one=True)

    async def oauth_prune(self, *, now=None) -> dict:
        """Retention: the counts of tokens, codes and clients deleted (a client registered a
        day ago that never completed a grant, nor holds a live code, goes)."""
        return await self._fetch(query("oauth_prune"), {"now": now}, op="oauth_prune", one=True)
