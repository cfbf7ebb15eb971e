"""Users and endpoints (the Board's humans and the credentials they vend, ADR-0022): the
part of the store that is not a todo transition. A mixin of board.store.store.Store (the store), whose base gives
it _fetch and _emit; its statements are in board/store/sql/accounts.sql."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone

from board.errors import Conflict, Invalid, NotFound
from board.store import liveness
from board.store.base import acts, space_user
from board.store.inputs import AGENT_ID_PATTERN, USERNAME_PATTERN, hash_token, storable
from board.store.queries import query
from board.store.vocabulary import (AGENT_ID_MAX_CHARS, ENDPOINT_NAME_MAX_CHARS, QUEUE_PATTERN, QUEUE_RULE,
                                    USERNAME_MAX_CHARS, VERBS, Agent, Transition)


def vend_problems(*, agent_id, queues, scope) -> list[Invalid]:
    """Every reason a vend request is refused, one per argument, so a form can show them all
    at once; empty when it is fine."""
    problems = []
    if not isinstance(agent_id, str) or not AGENT_ID_PATTERN.fullmatch(agent_id):
        problems.append(Invalid(f"agent_id must be 1-{AGENT_ID_MAX_CHARS} of letters, digits, _ . : / -",
                                argument="agent_id"))
    queues = list(dict.fromkeys(queues or []))
    bad = [q for q in queues if not isinstance(q, str) or not QUEUE_PATTERN.fullmatch(q)]
    if not queues:
        problems.append(Invalid("grant at least one queue", argument="queues"))
    elif bad:
        problems.append(Invalid(f"queue {bad[0]!r} must be {QUEUE_RULE}", argument="queues"))
    scope = list(dict.fromkeys(scope or []))
    unknown = [v for v in scope if v not in VERBS]
    if not scope:
        problems.append(Invalid("grant at least one verb", argument="scope"))
    elif unknown:
        problems.append(Invalid(f"unknown verb {unknown[0]!r}; verbs are {', '.join(VERBS)}", argument="scope"))
    return problems


class Accounts:
    async def user_insert(self, username: str, password_hash: str) -> dict:
        if not isinstance(username, str) or not USERNAME_PATTERN.fullmatch(username):
            raise Invalid(f"username must be 1-{USERNAME_MAX_CHARS} of letters, digits, _ . @ -", argument="username")
        return await self._fetch(query("user_insert"), {"username": username, "password_hash": password_hash},
                                 op="user_add", one=True)

    async def user_by_name(self, username: str) -> dict | None:
        return await self._fetch(query("user_by_name"), {"username": username}, op="user_get", one=True)

    async def user_by_id(self, user_id: int) -> dict | None:
        return await self._fetch(query("user_by_id"), {"id": user_id}, op="user_get", one=True)

    @acts("vend", "admin", todo=None, detail=("agent_id", "name"))
    async def endpoint_vend(self, user_id: int, *, name: str, agent_id: str, queues: list[str],
                            scope: list[str]) -> tuple[dict, str]:
        """A new endpoint credential; the token is returned once and only its hash stored."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        problems = vend_problems(agent_id=agent_id, queues=queues, scope=scope)
        if problems:
            raise problems[0]
        queues, scope = list(dict.fromkeys(queues)), list(dict.fromkeys(scope))
        storable(name, "name")
        name = (name or agent_id).strip()[:ENDPOINT_NAME_MAX_CHARS] or agent_id
        token = "sb_" + secrets.token_urlsafe(32)
        row = await self._fetch(query("endpoint_insert"), {"user_id": user_id, "name": name, "agent_id": agent_id,
                                                      "token_hash": hash_token(token), "scope": scope,
                                                      "queues": queues}, op="endpoint_vend", one=True)
        if row is None:
            raise Conflict(f"a live endpoint of this team already has the agent id {agent_id}; an agent id names "
                           "one holder of the team's todos", argument="agent_id", op="endpoint_vend")
        return row, token

    async def endpoint_authenticate(self, token: str) -> Agent | None:
        """The live endpoint behind a bearer token, or None (unknown or revoked)."""
        if not token:
            return None
        row = await self._fetch(query("endpoint_auth"), {"token_hash": hash_token(token)}, op="auth", one=True)
        if row is None:
            return None
        if row["stale_use"]:
            await self._fetch(query("endpoint_touch"), {"id": row["id"]}, op="auth_touch")
        return Agent(row["id"], row["agent_id"], row["user_id"], frozenset(row["scope"]), tuple(row["queues"]),
                     expires_at=row["expires_at"], resource=row["resource"], space_id=row["space_id"])

    async def endpoints_of_user(self, user_id: int) -> list[dict]:
        return await self._fetch(query("endpoints_of_user"), {"user_id": user_id}, op="endpoints")

    async def agents_of_user(self, user_id: int, *, now: datetime | None = None) -> list[dict]:
        """Read: the human's endpoints, each with the open attempts it holds and their
        liveness as of now (board/store/liveness.py, as the drawer shows it: waiting, with
        when its question was asked and expires, while it waits for the human), and its last
        activity: the latest of its last call and its held attempts' claims, heartbeats and notes."""
        now = now or datetime.now(timezone.utc)
        rows = await self._fetch(query("agents_of_user"), {"user_id": user_id}, op="agents")
        for row in rows:
            held = []
            for a in row["held"]:
                for key in ("claimed_at", "last_heartbeat_at", "last_note_at", "lease_expires_at", "answered_at",
                            "asked_at", "question_expires_at"):
                    a[key] = datetime.fromisoformat(a[key]) if a[key] else None
                live = liveness.derive(a, now, quiet_fraction=self.settings.liveness_quiet_fraction,
                                       lapsed_seconds=self.settings.liveness_lapsed_seconds)
                # Waiting for its owner's answer, its holder is not judged by its lease.
                waiting = liveness.waiting_for_person(a["state"], a)
                held.append(a | {"liveness": liveness.WAITING if waiting else live.level, "waiting": waiting,
                                 "liveness_explanation": live.explanation, "last_activity_at": live.last_activity_at})
            row["held"] = held
            times = [t for t in [row["last_used_at"], *(a["last_activity_at"] for a in held)] if t is not None]
            row["last_activity_at"] = max(times) if times else None
        return rows

    async def endpoint_owner(self, endpoint_id: str) -> int | None:
        row = await self._fetch(query("endpoint_owner"), {"id": endpoint_id}, op="endpoint_owner", one=True)
        return row["user_id"] if row else None

    @acts("revoke", "admin", todo=None, detail=("endpoint_id",), took=lambda row: bool(row and row["revoked"]))
    async def endpoint_revoke(self, endpoint_id: str, *, user_id: int | None = None, now=None) -> int:
        """Revoke an endpoint; its held todos -> failed dead letter, attempts closed
        revoked/dead_lettered. With user_id, only that user's endpoint. Returns how many
        todos were dead-lettered; raises NotFound when there was nothing to revoke."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        try:
            import uuid
            uuid.UUID(str(endpoint_id))
        except ValueError:
            raise NotFound("no such endpoint", op="endpoint_revoke") from None
        row = await self._fetch(query("endpoint_revoke"), {"endpoint_id": endpoint_id, "user_id": user_id, "now": now,
                                             "hook_urls": list(self.settings.hook_urls)},
                                op="endpoint_revoke", one=True)
        if not row["revoked"]:
            raise NotFound("no such endpoint, or already revoked", op="endpoint_revoke")
        for observer in self.control_observers:
            observer({"kind": "endpoint_revoked", "endpoint": str(endpoint_id)})
        events = []
        for item in row["todos"]:
            t = item["todo"]
            events.append(Transition("revoked", t["id"], str(t["endpoint_id"]), t["queue"], "failed",
                                     dead_letter=True, closed=item["closed"], attempts_total=t["attempts_total"]))
        self._emit(events)
        return len(events)
