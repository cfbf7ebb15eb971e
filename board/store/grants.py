"""OAuth grants (board/oauth/ drives them): registered clients, authorization codes, and the
access and refresh tokens of grants. A grant is an endpoint of kind 'oauth', created when its
code is exchanged, so it authenticates, is scoped and is revoked exactly as a vended endpoint
(accounts.py). Codes and tokens are random, returned once, and stored as SHA-256 only. A
mixin of board.store.store.Store; its statements are in board/store/sql/oauth.sql."""

from __future__ import annotations

import json
import secrets

from board.store.accounts import vend_problems
from board.store.inputs import hash_token
from board.store.queries import query

# Prefixes say what a token is when one turns up where it should not (a log, a note).
ACCESS_PREFIX, REFRESH_PREFIX, CODE_PREFIX = "sba_", "sbr_", "sbc_"
CODE_SECONDS = 300


def _mint(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)  # 256 random bits


class Grants:
    async def oauth_client_register(self, client_id: str, metadata: dict, secret: str | None) -> None:
        await self._fetch(query("oauth_client_insert"), {
            "client_id": client_id, "metadata": json.dumps(metadata),
            "secret_hash": hash_token(secret) if secret else None}, op="oauth_register")

    async def oauth_client(self, client_id: str) -> dict | None:
        """A registered client: its metadata and its secret's hash (None for a public client)."""
        return await self._fetch(query("oauth_client_get"), {"client_id": client_id}, op="oauth_client", one=True)

    async def oauth_code_issue(self, user_id: int, *, client_id: str, client_name: str, client_verified: bool,
                               agent_id: str, scope: list[str], queues: list[str], redirect_uri: str,
                               redirect_uri_explicit: bool, code_challenge: str, resource: str) -> str:
        """A code for what the human approved; Invalid (naming agent_id, queues or scope)
        when the approval could not be vended as an endpoint."""
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
        """The grant's first tokens, or None when the code was used (or expired) meanwhile."""
        access, refresh = _mint(ACCESS_PREFIX), _mint(REFRESH_PREFIX)
        row = await self._fetch(query("oauth_code_exchange"), {
            "code_hash": hash_token(code), "access_hash": hash_token(access), "refresh_hash": hash_token(refresh),
            "access_ttl": access_seconds, "refresh_ttl": refresh_seconds}, op="oauth_token", one=True)
        if row is None:
            return None
        return {"endpoint_id": row["endpoint_id"], "scope": list(row["scope"]), "access_token": access,
                "refresh_token": refresh}

    async def oauth_refresh(self, token: str) -> dict | None:
        """A refresh token of a live grant (rotated or not), or None."""
        return await self._fetch(query("oauth_refresh_get"), {"token_hash": hash_token(token)}, op="oauth_token",
                                 one=True)

    async def oauth_refresh_rotate(self, token: str, scope: list[str], *, access_seconds: int,
                                   refresh_seconds: int) -> dict | None:
        """A new access and refresh token for a refresh token used for the first time; None
        when it was rotated already (or expired, or its grant was revoked) meanwhile."""
        access, refresh = _mint(ACCESS_PREFIX), _mint(REFRESH_PREFIX)
        row = await self._fetch(query("oauth_refresh_rotate"), {
            "token_hash": hash_token(token), "scope": list(scope), "access_hash": hash_token(access),
            "refresh_hash": hash_token(refresh), "access_ttl": access_seconds, "refresh_ttl": refresh_seconds},
            op="oauth_token", one=True)
        if not row or not row["tokens"]:
            return None
        return {"access_token": access, "refresh_token": refresh}

    async def oauth_access(self, token: str) -> dict | None:
        return await self._fetch(query("oauth_access_get"), {"token_hash": hash_token(token)}, op="oauth_access",
                                 one=True)

    async def oauth_prune(self, *, now=None) -> dict:
        """Retention: the counts of tokens, codes and clients deleted (a client registered a
        day ago that never completed a grant, nor holds a live code, goes)."""
        return await self._fetch(query("oauth_prune"), {"now": now}, op="oauth_prune", one=True)
