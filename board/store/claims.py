"""The claims (board/store/sql/claims.sql), a part of board.store.store.Store: pending (or a
lapsed lease) -> claimed, by id or the oldest of the caller's queues, one or a batch, each
opening an attempt."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from board.errors import Forbidden, Invalid
from board.store.base import StoreBase, _parse_times, acts, todo_out
from board.store.inputs import checked_todo_id, clean_claimant, hash_token, positive_int, storable
from board.store.queries import query
from board.store.vocabulary import CLAIM_NEXT_LIMIT_MAX, PRIOR_ATTEMPTS, PRIOR_NOTES, Agent, Caller, Transition

def _continuation(raw: dict) -> dict:
    """A claim's `continues`: the predecessor and its last closed attempt."""
    out = dict(raw)
    if out.get("last_attempt") is not None:
        out["last_attempt"] = _parse_times(dict(out["last_attempt"]))
    return out


class Claims(StoreBase):
    @acts("claim")
    async def todo_claim(self, caller: Caller, todo_id: Any, *, claimant: Any = None, require_fence: Any = False,
                         lease_seconds: Any = None, now: datetime | None = None) -> dict:
        """pending (or claimed with a lapsed lease) -> claimed, by id; opens an attempt. An
        agent's claim is held back by a paused queue, the owning human's is not."""
        todo_id = checked_todo_id(todo_id)
        if isinstance(caller, Agent):
            caller.require("claim")
        claims = await self._claim(caller, {"id": todo_id, "claim_queues": None,
                                            "ignore_pauses": not isinstance(caller, Agent)},
                                   1, claimant, require_fence, lease_seconds, now, op="claim", todo_id=todo_id)
        return claims[0]

    @acts("claim", todo=None)
    async def todo_claim_next(self, caller: Agent, *, queue: Any = None, claimant: Any = None,
                              require_fence: Any = False, lease_seconds: Any = None,
                              now: datetime | None = None, limit: Any = None) -> dict:
        """The oldest claimable todo in the caller's queues -> claimed (SKIP LOCKED). With a
        limit above 1, up to that many at once: the result is the single claim_next result of
        the first todo claimed ({"todo": null} when none) plus claims: every claim, oldest
        first, each shaped as one."""
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
        # A batch probes queue_pauses per candidate anyway; a single claim asks the process's
        # pause cache, which leaves the paused queues out when it vouches for them.
        paused = await self.pauses.paused_queues(caller.user_id) if self.pauses is not None and limit == 1 else None
        if paused is not None:
            queues = [q for q in queues if q not in paused]
        claims = await self._claim(caller, {"id": None, "claim_queues": queues, "ignore_pauses": paused is not None},
                                   limit, claimant, require_fence, lease_seconds, now, op="claim_next", todo_id=None)
        first = dict(claims[0]) if claims else {"todo": None}
        return first | {"claims": claims} if limit > 1 else first

    async def _claim(self, caller: Caller, target: dict, limit: int, claimant, require_fence,
                     lease_seconds, now, *, op: str, todo_id: str | None) -> list[dict]:
        """Run the fast claim statement, then the full one (takeover, pruning) for what it
        left of the limit. Each todo claimed opens its own attempt with, fenced, its own lease
        token; the claims come back oldest first, takeovers last. A claim by id that claimed
        nothing raises why."""
        if not isinstance(require_fence, bool):
            raise Invalid("require_fence must be true or false", argument="require_fence", op=op)
        claimant = clean_claimant(claimant)
        tokens = {}
        if require_fence:  # 256 random bits each, by the hash the statement stores
            tokens = {hash_token(t): t for t in (secrets.token_urlsafe(32) for _ in range(limit))}
        hashes = list(tokens)
        agent = isinstance(caller, Agent)
        params = self._params(
            caller, **target, limit=limit, claimant=claimant, lease_seconds=self._lease(lease_seconds),
            history_max=max(5, int(self.settings.attempt_history_max_per_todo)),
            claimer_session=caller.session_id if agent else None,
            token_hashes=hashes or None, now=now, prior_attempts=PRIOR_ATTEMPTS, prior_notes=PRIOR_NOTES,
            traceparent=self.trace_context() if self.trace_context is not None else None,
        )
        order = lambda r: (r.get("lapsed") is not None, r["created_at"], r["id"])  # noqa: E731
        rows = sorted(await self._fetch(query("todo_claim_fast"), params, op=op, todo_id=todo_id), key=order)
        if len(rows) < limit:
            used = {bytes(r["lease_token_hash"]) for r in rows if r["lease_token_hash"] is not None}
            rest = [h for h in hashes if h not in used]
            more = await self._fetch(query("todo_claim"), dict(params, limit=limit - len(rows),
                                                               token_hashes=rest or None), op=op, todo_id=todo_id)
            rows += sorted(more, key=order)
        if not rows and todo_id is not None:
            raise await self._classify(caller, todo_id, "claim", params)
        claims, transitions = [], []
        for row in rows:
            row.update(state="claimed", owner=params["owner"], next_retry_at=None, dead_letter=False)  # what a claim fixes, not returned
            seq = row["attempts_total"]  # the attempt this claim opened
            endpoint = str(row["endpoint_id"])
            if row.get("lapsed"):  # a takeover's closed attempt
                transitions.append(Transition("lease_expired", row["id"], endpoint, row["queue"], "claimed",
                                              closed=dict(row["lapsed"]), attempts_total=seq - 1))
            transitions.append(Transition("claimed", row["id"], endpoint, row["queue"], "claimed",
                                          attempts_total=seq, opened_seq=seq))
            claim = {"todo": todo_out(row), "attempt_seq": seq, "attempts_total": seq,
                     "prior_attempts": self._prior(row["prior_attempts"])}
            if row.get("continues") is not None:  # the todo continues another: what that one ended with
                claim["continues"] = _continuation(row["continues"])
            if row["lease_token_hash"] is not None:
                claim["lease_token"] = tokens[bytes(row["lease_token_hash"])]
            claims.append(claim)
        self._emit(transitions)
        return claims
