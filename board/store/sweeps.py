"""The sweeps (board/store/sql/sweeps.sql), a part of board.store.store.Store: the reaper,
expired questions, the retry scheduler, the counts' and the charts' folds, retention, and
the hook events' outbox."""

from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg_pool import PoolTimeout

from board.store.base import StoreBase, _translate
from board.store.queries import execute, query
from board.store.vocabulary import SWEEP_BATCH, Transition

# The charts' fold leaves the last ten seconds' closes as attempts: a close's ended_at is
# its statement's arrival, which its backend shows in pg_stat_activity microseconds later.
FOLD_MARGIN_SECONDS = 10.0


class Sweeps(StoreBase):
    """Retention also prunes OAuth codes and tokens through the Store's oauth_prune (grants.py)."""

    async def sweep_reap(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Reaper: lapsed leases -> pending or dead letter, attempts closed reaped."""
        rows = await self._fetch(query("attempts_reap_lapsed"), {"now": now, "batch": batch, "hook_urls": list(self.settings.hook_urls)},
                                op="reap")
        self._emit(Transition("reaped", r["id"], str(r["endpoint_id"]), r["queue"], r["state"],
                              dead_letter=r["dead_letter"], closed=dict(r["closed"]),
                              attempts_total=r["attempts_total"]) for r in rows)
        return len(rows)

    async def sweep_questions(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Questions that expired unanswered: their todos released (attempt released/requeued,
        with a note of kind expired saying so)."""
        rows = await self._fetch(query("questions_expire"), {"now": now, "batch": batch,
                                                            "hook_urls": list(self.settings.hook_urls)}, op="reap")
        self._emit(Transition("released", r["id"], str(r["endpoint_id"]), r["queue"], r["state"],
                              closed={"seq": r["attempts_total"], "outcome": "released", "disposition": "requeued",
                                      "died": False},
                              attempts_total=r["attempts_total"]) for r in rows)
        return len(rows)

    async def sweep_retry(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Retry scheduler: failed todos whose backoff elapsed -> pending."""
        rows = await self._fetch(query("todos_retry_due"), {"now": now, "batch": batch,
                                                 "hook_urls": list(self.settings.hook_urls)}, op="retry_due")
        self._emit(Transition("requeued", r["id"], str(r["endpoint_id"]), r["queue"], r["state"],
                              attempts_total=r["attempts_total"]) for r in rows)
        return len(rows)

    async def sweep_counts(self) -> int:
        """Counts sweep: each key's deltas in todo_counts (the overview's and /metrics' counts)
        folded into one row. One pass a period: returns 0, so the sweep loop does not repeat it."""
        await self._fetch(query("todo_counts_compact"), {}, op="counts")
        return 0

    async def sweep_outcomes(self, *, now: datetime | None = None,
                             margin_seconds: float = FOLD_MARGIN_SECONDS) -> int:
        """The charts' fold (migration 0012): the attempts closed before the next watermark
        counted into attempt_outcome_counts, at most an hour of them a pass, and the counts
        no chart needs at five minutes merged into hours and six hours. Returns the
        count rows written, at least 1 while an hour's cap stopped it (so the sweep loop
        repeats until it has caught up), else 0."""
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    cur = await execute(conn, query("attempt_outcomes_fold_lock"), {})
                    running_since = (await cur.fetchone())["running_since"]
                    cur = await execute(conn, query("attempt_outcomes_fold"),
                                        {"now": now, "margin_seconds": margin_seconds, "running_since": running_since})
                    row = await cur.fetchone()
                    if row["new_hour"]:  # the merge's cuts move by the hour
                        await execute(conn, query("attempt_counts_merge"), {"now": now})
        except (PoolTimeout, psycopg.Error) as err:
            raise _translate(err, "outcomes", None) from None
        return max(row["counted"], 1) if row["behind"] else 0

    async def outcomes_fold_lag(self) -> float:
        """Read: the seconds the charts' fold is behind now, for /metrics."""
        row = await self._fetch(query("attempt_outcomes_fold_lag"), {}, op="metrics", one=True)
        return row["seconds"]

    async def sweep_retention(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Retention: terminal todos past the age bound are deleted with their attempts; then
        delivered hook events past it, the charts' closed-attempt counts older than their
        longest window, OAuth tokens and codes a day past their expiry, and OAuth clients
        registered a day ago that never completed a grant."""
        rows = await self._fetch(query("todos_delete_expired"), {"now": now, "batch": batch,
                                                 "retention_seconds": self.settings.retention_days * 86400},
                                 op="retention")
        self._emit(Transition("deleted", r["id"], str(r["endpoint_id"]), r["queue"], "deleted") for r in rows)
        if len(rows) < batch:  # the todo backlog is done: prune delivered hook events too
            await self._fetch(query("hook_events_prune"), {"retention_seconds": self.settings.retention_days * 86400},
                              op="retention")
            await self._fetch(query("attempt_counts_prune"), {"now": now}, op="retention")
            await self.oauth_prune(now=now)
            await self.sweep_audit(now=now)
        return len(rows)

    # -- hook outbox ---------------------------------------------------------------------

    async def hook_events_lease(self, *, limit: int = 20, lease_seconds: float = 30.0) -> list[dict]:
        """Due hook events, leased to this process for lease_seconds."""
        return await self._fetch(query("hook_events_lease"), {"limit": limit, "lease_seconds": lease_seconds}, op="hooks")

    async def hook_event_delivered(self, event_id: str) -> None:
        await self._fetch(query("hook_event_delivered"), {"id": event_id}, op="hooks")

    async def hook_event_retry(self, event_id: str, *, delay: float, error: str) -> None:
        await self._fetch(query("hook_event_retry_later"), {"id": event_id, "delay": delay, "error": error[:200]}, op="hooks")
