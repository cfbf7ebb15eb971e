"""The claims (board/store/sql/claims.sql), a part of board.store.store.Store: pending (or a
lapsed lease) -> claimed, by id or the oldest of the caller's queues, one or a batch, each
opening an attempt."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from board.errors import Forbidden, Invalid
from board.store.base import StoreBase, _parse_times, todo_out
from board.store.inputs import checked_todo_id, clean_claimant, hash_token, positive_int, storable
from board.store.queries import Query, query
from board.store.vocabulary import CLAIM_NEXT_LIMIT_MAX, PRIOR_ATTEMPTS, PRIOR_NOTES, Agent, Caller, Transition

def _continuation(raw: dict) -> dict:
    """A claim's `continues`: the predecessor and its last closed attempt."""
    out = dict(raw)
    if out.get("last_attempt") is not None:
        out["last_attempt"] = _parse_times(dict(out["last_attempt"]))
    return out


class Claims(StoreBase):
    async def todo_claim(self, caller: Caller, todo_id: Any, *, claimant: Any = None, require_fence: Any = False,
                         lease_seconds: Any = None, now: datetime | None = None) -> dict:
        """pending (or claimed with a lapsed lease) -> claimed, by id; opens an attempt."""
        todo_id = checked_todo_id(todo_id)
        if isinstance(caller, Agent):
            caller.require("claim")
            sqls = (query("todo_claim_fast"), query("todo_claim"))
        else:
            sqls = (query("todo_claim_human_fast"), query("todo_claim_human"))
        return await self._claim(caller, sqls, {"id": todo_id}, claimant, require_fence, lease_seconds, now,
                                 op="claim", todo_id=todo_id)

    async def todo_claim_next(self, caller: Agent, *, queue: Any = None, claimant: Any = None,
                              require_fence: Any = False, lease_seconds: Any = None,
                              now: datetime | None = None, limit: Any = None) -> dict:
        """The oldest claimable todo in the caller's queues -> claimed (SKIP LOCKED). With a
        limit above 1, up to that many at once (_claim_many)."""
        caller.require("claim_next")
        limit = 1 if limit is None else positive_int(limit, "limit", 1, CLAIM_NEXT_LIMIT_MAX)
        storable(queue, "queue")
        if queue is None:
            queues = list(caller.queues)
        elif isinstance(queue, str) and queue in caller.queues:
            queues = [queue]
        elif isinstance(queue, str):
            raise Forbidden(f"this endpoint is not granted queue {queue}", argument="queue", op="claim_next")
        else:
            raise Invalid("queue must be a string", argument="queue", op="claim_next")
        if limit > 1:
            return await self._claim_many(caller, queues, limit, claimant, require_fence, lease_seconds, now)
        sqls = (query("todo_claim_next_fast"), query("todo_claim_next"))
        paused = await self.pauses.paused_queues(caller.user_id) if self.pauses is not None else None
        if paused is not None:  # the cache vouches for them: ask for the open queues only
            queues = [q for q in queues if q not in paused]
            sqls = (query("todo_claim_next_fast_unpaused"), query("todo_claim_next_unpaused"))
        return await self._claim(caller, sqls, {"claim_queues": queues}, claimant,
                                 require_fence, lease_seconds, now, op="claim_next", todo_id=None)

    async def _claim(self, caller: Caller, sqls: tuple[Query, Query], target: dict, claimant, require_fence,
                     lease_seconds, now, *, op: str, todo_id: str | None) -> dict:
        """Run the fast claim statement, then the full one (takeover, pruning) if it missed."""
        if not isinstance(require_fence, bool):
            raise Invalid("require_fence must be true or false", argument="require_fence", op=op)
        claimant = clean_claimant(claimant)
        token = secrets.token_urlsafe(32) if require_fence else None  # 256 random bits
        agent = isinstance(caller, Agent)
        params = self._params(
            caller, **target, claimant=claimant, lease_seconds=self._lease(lease_seconds),
            history_max=max(5, int(self.settings.attempt_history_max_per_todo)),
            claimer_session=caller.session_id if agent else None,
            token_hash=hash_token(token) if token else None, now=now,
            prior_attempts=PRIOR_ATTEMPTS, prior_notes=PRIOR_NOTES,
        )
        row = await self._fetch(sqls[0], params, op=op, todo_id=todo_id, one=True)
        if row is None:
            row = await self._fetch(sqls[1], params, op=op, todo_id=todo_id, one=True)
        if row is None:
            if todo_id is None:
                return {"todo": None}
            raise await self._classify(caller, todo_id, "claim", params)
        row.update(state="claimed", owner=params["owner"], next_retry_at=None, dead_letter=False)  # what a claim fixes, not returned
        seq = row["attempts_total"]  # the attempt this claim opened
        opened = Transition("claimed", row["id"], str(row["endpoint_id"]), row["queue"], "claimed",
                            attempts_total=seq, opened_seq=seq)
        lapsed = row.get("lapsed")  # only the full statement returns it: a takeover's closed attempt
        if lapsed:
            self._emit([Transition("lease_expired", row["id"], opened.endpoint_id, row["queue"], "claimed",
                                   closed=dict(lapsed), attempts_total=seq - 1), opened])
        else:
            self._emit((opened,))
        out = {"todo": todo_out(row), "attempt_seq": seq, "attempts_total": seq,
               "prior_attempts": self._prior(row["prior_attempts"])}
        if row.get("continues") is not None:  # the todo continues another: what that one ended with
            out["continues"] = _continuation(row["continues"])
        if token:
            out["lease_token"] = token
        return out

    async def _claim_many(self, caller: Agent, queues: list[str], limit: int, claimant, require_fence,
                          lease_seconds, now) -> dict:
        """claim_next with a limit above 1: up to limit todos, oldest first, the fast statement
        and then the full one for what is left, each todo with its own attempt and, fenced, its
        own lease token. The result is the single claim_next result of the first todo claimed
        ({"todo": null} when none) plus claims: every claim, oldest first, each shaped as one."""
        if not isinstance(require_fence, bool):
            raise Invalid("require_fence must be true or false", argument="require_fence", op="claim_next")
        tokens = {}
        if require_fence:  # 256 random bits each, by the hash the statement stores
            tokens = {hash_token(t): t for t in (secrets.token_urlsafe(32) for _ in range(limit))}
        hashes = list(tokens)
        params = self._params(
            caller, claim_queues=queues, limit=limit, claimant=clean_claimant(claimant),
            lease_seconds=self._lease(lease_seconds),
            history_max=max(5, int(self.settings.attempt_history_max_per_todo)), claimer_session=caller.session_id,
            token_hashes=hashes or None, now=now, prior_attempts=PRIOR_ATTEMPTS, prior_notes=PRIOR_NOTES,
        )
        order = lambda r: (r.get("lapsed") is not None, r["created_at"], r["id"])  # noqa: E731
        rows = sorted(await self._fetch(query("todos_claim_next_fast"), params, op="claim_next"), key=order)
        if len(rows) < limit:
            used = {bytes(r["lease_token_hash"]) for r in rows if r["lease_token_hash"] is not None}
            rest = [h for h in hashes if h not in used]
            more = await self._fetch(query("todos_claim_next"),
                                     dict(params, limit=limit - len(rows), token_hashes=rest or None), op="claim_next")
            rows += sorted(more, key=order)
        claims, transitions = [], []
        for row in rows:
            row.update(state="claimed", owner=params["owner"], next_retry_at=None, dead_letter=False)
            seq = row["attempts_total"]
            endpoint = str(row["endpoint_id"])
            if row.get("lapsed"):
                transitions.append(Transition("lease_expired", row["id"], endpoint, row["queue"], "claimed",
                                              closed=dict(row["lapsed"]), attempts_total=seq - 1))
            transitions.append(Transition("claimed", row["id"], endpoint, row["queue"], "claimed",
                                          attempts_total=seq, opened_seq=seq))
            claim = {"todo": todo_out(row), "attempt_seq": seq, "attempts_total": seq,
                     "prior_attempts": self._prior(row["prior_attempts"])}
            if row.get("continues") is not None:
                claim["continues"] = _continuation(row["continues"])
            if row["lease_token_hash"] is not None:
                claim["lease_token"] = tokens[bytes(row["lease_token_hash"])]
            claims.append(claim)
        self._emit(transitions)
        return (dict(claims[0]) if claims else {"todo": None}) | {"claims": claims}
