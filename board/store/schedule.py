"""The claim's order set by hand and by time (board/store/sql/schedule.sql), a part of
board.store.store.Store: scheduled todos falling due (the due timer's sweep, or a human's
"start now"), a human's change of priority, and the per-queue limits on held todos."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from board.errors import Conflict, Invalid, NotFound
from board.store.base import StoreBase, acts, space_user
from board.store.inputs import checked_todo_id, priority_value
from board.store.queries import query
from board.store.vocabulary import DUE_BATCH, QUEUE_LIMIT_MAX, QUEUE_PATTERN, QUEUE_RULE, Human, Transition


class Schedule(StoreBase):
    async def sweep_due(self, *, now: datetime | None = None) -> int:
        """One batch of scheduled todos whose run_at has come -> claimable (each notified
        "due", which rings the doorbell); returns how many."""
        rows = await self._fetch(query("todos_fall_due"), self._sweep_params(now=now), op="due")
        self._emit_due(rows)
        return len(rows)

    async def next_due(self) -> datetime | None:
        """When the next scheduled todo falls due (None: nothing is scheduled)."""
        row = await self._fetch(query("todos_next_due"), {}, op="due", one=True)
        return None if row is None else row["run_at"]

    @acts("start_now")
    async def todo_start_now(self, caller: Human, todo_id: Any, *, now: datetime | None = None) -> dict:
        """A scheduled todo of the human's -> claimable now (its run_at becomes now)."""
        todo_id = checked_todo_id(todo_id, op="start_now")
        params = self._params(caller, id=todo_id, batch=1, now=now)
        rows = await self._fetch(query("todos_fall_due"), params, op="start_now", todo_id=todo_id)
        if not rows:
            row = await self._fetch(query("todo_classify_miss"), params, op="start_now", todo_id=todo_id, one=True)
            if row is None:
                raise NotFound(op="start_now", todo_id=todo_id)
            raise Conflict(f"the todo is not scheduled (it is {row['state']})", op="start_now", todo_id=todo_id)
        self._emit_due(rows)
        return {"id": rows[0]["id"], "run_at": rows[0]["run_at"]}

    def _sweep_params(self, **extra) -> dict:
        return {"id": None, "endpoint_id": None, "queues": None, "user_id": None, "batch": DUE_BATCH,
                "hook_urls": list(self.settings.hook_urls)} | extra

    def _emit_due(self, rows: list[dict]) -> None:
        self._emit([Transition("due", r["id"], str(r["endpoint_id"]), r["queue"], r["state"]) for r in rows])

    @acts("set_priority", todo=None, detail=("priority",))
    async def todos_set_priority(self, caller: Human, todo_ids: Any, priority: Any, *,
                                 now: datetime | None = None) -> list[str]:
        """The priority of the human's pending todos among todo_ids -> priority; returns the
        ids changed (a todo not pending, already at that priority, or not theirs is left)."""
        priority = priority_value(priority)
        if not isinstance(todo_ids, list) or not todo_ids:
            raise Invalid("ids must be a non-empty list of todo ids", argument="ids", op="set_priority")
        ids = [checked_todo_id(t, op="set_priority") for t in todo_ids]
        rows = await self._fetch(query("todos_set_priority"), self._params(caller, ids=ids, priority=priority, now=now),
                                 op="set_priority")
        self._emit([Transition("reprioritized", r["id"], str(r["endpoint_id"]), r["queue"], r["state"])
                    for r in rows])
        return [r["id"] for r in rows]

    @acts("set_limit", "admin", todo=None, queue="queue", detail=("limit",))
    async def queue_limit_set(self, user_id: int, queue: Any, limit: Any) -> int | None:
        """How many todos of the human's queue may be held at once -> limit (0: no limit);
        returns the limit now in force (None: none)."""
        user_id = space_user(user_id)  # a person acting in the space, or its id
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"queue must be {QUEUE_RULE}", argument="queue", op="queue_limit")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= QUEUE_LIMIT_MAX:
            raise Invalid(f"the limit must be an integer from 0 (none) to {QUEUE_LIMIT_MAX}", argument="limit",
                          op="queue_limit")
        row = await self._fetch(query("queue_limit_set"), {"user_id": user_id, "queue": queue, "max_held": limit},
                                op="queue_limit", one=True)
        return row["max_held"]

    async def queue_scheduled_counts(self) -> list[dict]:
        """Aggregates only, for /metrics: how many todos of each queue wait for their run_at."""
        return await self._fetch(query("todos_scheduled_by_queue"), {}, op="metrics")

    async def queue_limits_held(self) -> list[dict]:
        """Aggregates only, for /metrics: each limited queue's limit and what it holds now."""
        return await self._fetch(query("queue_limits_held"), {}, op="metrics")
