"""The Board's deletes and bulk actions (board/store/sql/deletes.sql), a part of
board.store.store.Store: a human's ended todos deleted, and a bulk retry, cancel or release
run as the single verbs, todo by todo (a bulk change of priority, a batch at a time)."""

from __future__ import annotations

import asyncio
from typing import Any, Iterable

from board.errors import Conflict, Forbidden, Invalid, NotFound, Unavailable
from board.store.base import StoreBase, acts
from board.store.inputs import checked_todo_id
from board.store.queries import query
from board.store.vocabulary import BULK_BATCH, BULK_CONCURRENCY, BULK_MAX, Human, Transition

class Deletes(StoreBase):
    """A bulk retry, cancel or release calls the Store's todo_retry, todo_cancel and
    todo_release (closes.py) for each todo."""

    async def todos_bulk(self, caller: Human, kind: str, todo_ids: Iterable[str], *, batch: int = BULK_BATCH,
                         concurrency: int = BULK_CONCURRENCY, priority: Any = None) -> dict:
        """A Board bulk action: the single action's own transition (todo_retry, todo_cancel or
        todo_release) for each todo, so each gets its attempt record, hook events and notify,
        in batches of `batch` with at most `concurrency` statements in flight. A todo whose
        state moved on (Conflict) or that is not the caller's (NotFound) is skipped, never an
        error. If the database goes away, the batch under way finishes and the rest is not
        tried. A bulk delete is todos_delete, one statement a batch. Returns the counts:
        changed, skipped, not_tried."""
        if not isinstance(caller, Human):
            raise Forbidden("bulk actions are the Board's", op=f"bulk_{kind}")
        if not caller.may("operator"):  # refused whole, not skipped todo by todo
            raise Forbidden(f"a {caller.role} of {caller.space_name or 'this space'} may not act on todos",
                            op=f"bulk_{kind}")
        ids = list(dict.fromkeys(todo_ids))
        if kind == "delete":
            return await self._bulk_delete(caller, ids, batch)
        if kind == "priority":
            return await self._bulk_priority(caller, ids, batch, priority)
        run = {"retry": self.todo_retry, "cancel": self.todo_cancel, "release": self.todo_release}[kind]
        gate = asyncio.Semaphore(concurrency)

        async def one(todo_id: str) -> str:
            async with gate:
                try:
                    await run(caller, todo_id)
                    return "changed"
                except (Conflict, NotFound, Invalid):
                    return "skipped"
                except Unavailable:
                    return "not_tried"

        counts = {"changed": 0, "skipped": 0, "not_tried": 0}
        for start in range(0, len(ids), batch):
            for outcome in await asyncio.gather(*(one(i) for i in ids[start:start + batch])):
                counts[outcome] += 1
            if counts["not_tried"]:  # the database went away: stop after this batch
                counts["not_tried"] += max(0, len(ids) - start - batch)
                break
        return counts

    async def _bulk_delete(self, caller: Human, ids: list, batch: int) -> dict:
        """A bulk delete: one todos_delete statement a batch. If the database goes away, the
        rest is not tried. The counts also carry refused (todos_delete's: kept for their waiters)."""
        counts = {"changed": 0, "skipped": 0, "not_tried": 0, "refused": []}
        for start in range(0, len(ids), batch):
            try:
                done = await self.todos_delete(caller, ids[start:start + batch])
            except Unavailable:
                counts["not_tried"] = len(ids) - start
                break
            counts["changed"] += len(done["deleted"])
            counts["skipped"] += len(done["skipped"])
            counts["refused"] += done["refused"]
        return counts

    async def _bulk_priority(self, caller: Human, ids: list, batch: int, priority: Any) -> dict:
        """A bulk change of priority: one todos_set_priority statement a batch (Schedule); a
        todo not pending, already at that priority, or not the caller's is skipped. If the
        database goes away, the rest is not tried."""
        counts = {"changed": 0, "skipped": 0, "not_tried": 0}
        for start in range(0, len(ids), batch):
            part = ids[start:start + batch]
            try:
                changed = await self.todos_set_priority(caller, part, priority)
            except Unavailable:
                counts["not_tried"] = len(ids) - start
                break
            counts["changed"] += len(changed)
            counts["skipped"] += len(part) - len(changed)
        return counts

    @acts("delete", todo=None)
    async def todos_delete(self, caller: Human, todo_ids: Iterable[Any]) -> dict:
        """The owning human deletes ended todos of theirs (done, canceled, dead letters) by
        id, in one statement that locks them first: their attempts and notes go with them
        (cascade), and so do the successor links to and from them. Any other id (another
        human's, a todo that has not ended, an unknown one, or no id at all) is left alone
        and reported skipped, never an error that stops the rest. Nothing is counted here:
        the counters and outcome counts moved when each attempt closed, and stay.
        A canceled or dead-lettered todo that live todos wait on is left alone unless they are
        deleted with it, and named in refused with its waiters.
        Returns {"deleted": [the todos deleted], "skipped": [the ids left alone],
        "refused": [{"id", "title", "waiters": [{"id", "title", "state"}]}]}."""
        if not isinstance(caller, Human):
            raise Forbidden("deleting todos is the Board's", op="delete")
        asked = list(todo_ids)
        if len(asked) > BULK_MAX:
            raise Invalid(f"a delete takes at most {BULK_MAX} todos at once", argument="ids", op="delete")
        ids = []
        for value in asked:
            try:
                ids.append(checked_todo_id(value, op="delete"))
            except (Invalid, NotFound):  # not an id any todo can have: skipped
                continue
        ids = list(dict.fromkeys(ids))
        rows = await self._fetch(query("todos_delete_human"), {"user_id": caller.user_id, "ids": ids},
                                 op="delete") if ids else []
        self._emit(Transition("deleted", r["id"], str(r["endpoint_id"]), r["queue"], "deleted") for r in rows)
        gone = {r["id"] for r in rows}
        deleted = [{k: r[k] for k in ("id", "queue", "title", "state", "dead_letter", "attempts_total")}
                   for r in rows]
        skipped = [v for v in dict.fromkeys(v for v in asked if isinstance(v, str)) if v not in gone]
        skipped += [v for v in asked if not isinstance(v, str)]
        left = [v for v in ids if v not in gone]
        refused = await self._fetch(query("todos_waiters"), {"user_id": caller.user_id, "ids": left},
                                    op="delete") if left else []
        return {"deleted": deleted, "skipped": skipped,
                "refused": [{"id": r["id"], "title": r["title"], "waiters": r["waiters"]} for r in refused]}
