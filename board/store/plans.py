"""Plans (board/store/sql/plans.sql), a part of board.store.store.Store: a dependency the
owning human drops, and the waiting counts. The adds write dependencies (adds.py), the
completes release them (closes.sql), get_todo reads the plan around a todo (reads.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from board.errors import Conflict, Forbidden, NotFound
from board.store.base import StoreBase, acts, todo_out
from board.store.inputs import checked_todo_id
from board.store.queries import query
from board.store.vocabulary import Human, Transition


class Plans(StoreBase):
    @acts("drop_dependency", detail=("after_id",))
    async def todo_drop_dependency(self, caller: Human, todo_id: Any, after_id: Any, *,
                                   now: datetime | None = None) -> dict:
        """The owning human drops after_id from what todo_id waits for: -> the todo, claimable
        now (unblocked) if it waited on nothing else. NotFound when either is not theirs;
        Conflict when todo_id does not wait on after_id."""
        if not isinstance(caller, Human):
            raise Forbidden("dropping a dependency is the Board's", op="drop_dependency")
        todo_id = checked_todo_id(todo_id, op="drop_dependency")
        try:
            after_id = checked_todo_id(after_id, op="drop_dependency")
        except NotFound:
            raise NotFound(argument="after_id", op="drop_dependency", todo_id=todo_id) from None
        row = await self._fetch(query("todo_drop_dependency"),
                                self._params(caller, id=todo_id, after_id=after_id, now=now),
                                op="drop_dependency", todo_id=todo_id, one=True)
        if row is None:
            todo = await self.todo_get(caller, todo_id, attempts_limit=1, notes_limit=0)  # NotFound if not theirs
            if after_id not in todo["after"]:
                raise Conflict(f"the todo does not wait on {after_id}", argument="after_id", op="drop_dependency",
                               todo_id=todo_id)
            raise NotFound(argument="after_id", op="drop_dependency", todo_id=todo_id)
        self._emit([Transition("unblocked" if row["freed"] else "waiting", row["id"], str(row["endpoint_id"]),
                               row["queue"], row["state"])])
        return todo_out(row) | {"unblocked": row["freed"]}

    async def queue_waiting_counts(self) -> list[dict]:
        """Aggregates only, for /metrics: how many pending todos of each queue wait for other todos."""
        return await self._fetch(query("todos_waiting_by_queue"), {}, op="metrics")

    async def waiting_counts(self, caller: Human) -> dict[str, int]:
        """The human's pending todos waiting for other todos, per queue (the Board's overview)."""
        rows = await self._fetch(query("todos_waiting_count_human"), {"user_id": caller.user_id}, op="overview")
        return {r["queue"]: r["n"] for r in rows}
