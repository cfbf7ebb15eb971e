"""The reads (board/store/sql/reads.sql), a part of board.store.store.Store: a todo with its
attempts, the lists, and the doorbell's and the hooks' reads."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable

from board.errors import Invalid, NotFound
from board.store import liveness
from board.store.base import StoreBase, todo_out
from board.store.inputs import checked_todo_id, list_cursor, list_filters, positive_int, read_list_cursor
from board.store.queries import query
from board.store.vocabulary import (
    ATTEMPTS_LIMIT_DEFAULT,
    ATTEMPTS_LIMIT_MAX,
    BOARD_SORTS,
    CHAIN_MAX,
    DEPENDENTS_MAX,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    LIST_SORTS,
    NOTES_LIMIT_DEFAULT,
    NOTES_LIMIT_MAX,
    Agent,
    Caller,
    Human,
)

def _outcome_counts(row: dict) -> dict[str, int]:
    counts = dict(row.get("pruned_outcomes") or {})
    for outcome, n in (row.get("live_outcomes") or {}).items():
        counts[outcome] = counts.get(outcome, 0) + int(n)
    return {k: int(v) for k, v in sorted(counts.items())}


def _usage_totals(raw: dict | None) -> dict | None:
    """get_todo's usage totals: tokens as integers, cost as a number (null: never reported)."""
    if raw is None:
        return None
    return {k: (None if raw.get(k) is None else int(raw[k]) if k != "cost_usd" else float(raw[k]))
            for k in ("input_tokens", "output_tokens", "cost_usd")}


def _list_row(row: dict) -> dict:
    """A list row: the todo, its endpoint, and for a human's list its newest attempt (seq,
    outcome, null while open, claimant, the first 80 characters of its summary on one line
    and whether there was more, and its current interrupt's answered_at, asked_at and
    question_expires_at: liveness.waiting_for_person's), or None before any, and how many
    of its dependencies are not done yet (waits)."""
    out = todo_out(row) | {"endpoint_id": str(row["endpoint_id"])}
    if "last_seq" in row:
        out["waits"] = row["waits"]  # dependencies not done yet: "pending, waiting for N todos"
        out["last_attempt"] = None if row["last_seq"] is None else {
            "seq": row["last_seq"], "outcome": row["last_outcome"], "claimant": row["last_claimant"],
            "summary": row["last_summary"], "summary_cut": bool(row["last_summary_cut"]),
            "answered_at": row["last_answered_at"], "asked_at": row["last_asked_at"],
            "question_expires_at": row["last_question_expires_at"]}
    return out


# The statements the caller's kind (and the list's sort) picks.
_LIST = {
    ("agent", "created"): query("todo_list_by_created"), ("agent", "updated"): query("todo_list_by_updated"),
    ("human", "created"): query("todo_list_by_created_human"), ("human", "updated"): query("todo_list_by_updated_human"),
}


class Reads(StoreBase):
    async def todo_list(self, caller: Caller, *, state: Any = None, queue: Any = None, dead_letter: bool = False,
                        title: Any = None, claimant: Any = None, payload_key: Any = None, payload_value: Any = None,
                        priority: Any = None, key: Any = None, scheduled: Any = None, waiting: Any = None,
                        sort: Any = "created", limit: Any = None, cursor: Any = None) -> dict:
        """Read: the caller's todos matching every filter given, newest first by the sort's
        time (created or updated), keyset-paginated; a human's rows carry their newest
        attempt (last_attempt), and a human may sort by any column of the Board's list, either
        way (BOARD_SORTS). Scoped in the same statement (REQ-10)."""
        if isinstance(caller, Agent):
            caller.require("list_todos")
        params = self._params(caller, **list_filters(state=state, queue=queue, dead_letter=dead_letter, title=title,
                                                     claimant=claimant, payload_key=payload_key,
                                                     payload_value=payload_value, priority=priority, key=key,
                                                     scheduled=scheduled, waiting=waiting))
        which = "agent" if isinstance(caller, Agent) else "human"
        sorts = LIST_SORTS if which == "agent" else tuple(BOARD_SORTS)
        if sort not in sorts:
            raise Invalid(f"sort must be one of {', '.join(sorts)}", argument="sort", op="list_todos")
        limit = LIST_LIMIT_DEFAULT if limit is None else positive_int(limit, "limit", 1, LIST_LIMIT_MAX)
        after_key = after_id = None
        if cursor is not None:
            try:
                after_key, after_id = read_list_cursor(cursor, sort)
            except Invalid as e:
                e.op = "list_todos"
                raise
        if sort in LIST_SORTS:
            params.update(limit=limit, after_at=after_key, after_id=after_id)
            rows = await self._fetch(_LIST[(which, sort)], params, op="list_todos")
        else:
            column, descending = BOARD_SORTS[sort]
            params.update(limit=limit, order=column, descending=descending, after_key=after_key, after_id=after_id)
            rows = await self._fetch(query("todo_list_sorted_human"), params, op="list_todos")
        next_cursor = None
        if len(rows) == limit:
            last = rows[-1]
            next_cursor = list_cursor(sort, last[f"{sort}_at"] if sort in LIST_SORTS else last["sort_key"], last["id"])
        return {"todos": [_list_row(r) for r in rows], "next_cursor": next_cursor}

    async def todo_list_a2a(self, caller: Agent, *, context: str | None = None, states: list[str] | None = None,
                            limit: int = LIST_LIMIT_DEFAULT, cursor: Any = None) -> dict:
        """Read: the ids of the agent's todos added over A2A (in one context, in those states,
        when given), newest first, with the cursor of the next page (list_todos' kind)."""
        caller.require("list_todos")
        after_at = after_id = None
        if cursor is not None:
            after_at, after_id = read_list_cursor(cursor, "created")
        rows = await self._fetch(query("todo_list_a2a"), self._params(
            caller, context=context, states=states, limit=limit, after_at=after_at, after_id=after_id),
            op="list_todos")
        last = rows[-1] if len(rows) == limit else None
        return {"ids": [r["id"] for r in rows],
                "next_cursor": list_cursor("created", last["created_at"], last["id"]) if last else None}

    async def todo_list_row(self, caller: Human, todo_id: Any, **filters: Any) -> dict | None:
        """Read: one of the human's todos as a list row, with `matches` saying whether it
        passes the filters (todo_list's); None when there is no such todo of theirs."""
        todo_id = checked_todo_id(todo_id)
        params = self._params(caller, id=todo_id, **list_filters(**filters))
        row = await self._fetch(query("todo_list_row_human"), params, op="list_todos", todo_id=todo_id, one=True)
        return None if row is None else _list_row(row) | {"matches": row["matches"]}

    async def todo_get(self, caller: Caller, todo_id: Any, *, attempts_limit: Any = None,
                       notes_limit: Any = None, now: datetime | None = None) -> dict:
        """Read (REQ-8): the full todo with its attempts newest first, each with its newest
        notes_limit notes, scoped in one statement. The open attempt carries its liveness
        and last_activity_at, derived as of now (board/store/liveness.py), never stored."""
        if isinstance(caller, Agent):
            caller.require("get_todo")
        todo_id = checked_todo_id(todo_id)
        limit = ATTEMPTS_LIMIT_DEFAULT if attempts_limit is None else positive_int(
            attempts_limit, "attempts_limit", 1, ATTEMPTS_LIMIT_MAX)
        notes = NOTES_LIMIT_DEFAULT if notes_limit is None else positive_int(notes_limit, "notes_limit", 0,
                                                                             NOTES_LIMIT_MAX)
        row = await self._fetch(query("todo_get"), self._params(caller, id=todo_id, attempts_limit=limit, chain_max=CHAIN_MAX,
                                                             notes_limit=notes, dependents_max=DEPENDENTS_MAX),
                                op="get_todo", todo_id=todo_id, one=True)
        if row is None:
            raise NotFound(op="get_todo", todo_id=todo_id)
        out = todo_out(row)
        out["attempts"] = self._prior(row["attempts"])
        out["attempt_outcomes"] = _outcome_counts(row)
        current = out["attempts"][0] if out["attempts"] and out["attempts"][0]["ended_at"] is None else None
        if current is not None:
            live = liveness.derive(current, now or datetime.now(timezone.utc),
                                   quiet_fraction=self.settings.liveness_quiet_fraction,
                                   lapsed_seconds=self.settings.liveness_lapsed_seconds)
            current.update(liveness=live.level, last_activity_at=live.last_activity_at)
            if isinstance(caller, Human):  # the Board's words for it, and whether it waits for the human
                current["liveness_explanation"] = live.explanation
                asked = current["question"] if current.get("question") and current["question"]["current"] else {}
                current["waiting"] = liveness.waiting_for_person(out["state"], {
                    "answered_at": current.get("answered_at"), "asked_at": asked.get("asked_at"),
                    "question_expires_at": asked.get("expires_at")})
                if current["waiting"]:
                    current["liveness"] = liveness.WAITING
        out["continues_id"] = row["continues_id"]
        out["continued_by_id"] = row["continued_by_id"]
        # added over A2A (migration 0019): by which client, in which context; else null
        out["a2a"] = {"client": row["a2a_client"], "context_id": row["a2a_context"]} if row["a2a_client"] else None
        # the plan: what it waits for that is not done, and what waits for it while it is not
        out["waiting_for"] = [{k: d[k] for k in ("id", "title", "state", "dead_letter")} for d in row["plan_after"]
                              if d["state"] != "done"]
        out["blocking"] = [] if out["state"] == "done" else [
            {k: w[k] for k in ("id", "title", "state")} for w in row["plan_dependents"] if not w["ended"]]
        if isinstance(caller, Human):  # the Board's drawer draws the plan around the todo
            out["plan"] = {"after": row["plan_after"], "dependents": row["plan_dependents"],
                           "dependents_total": row["dependents_total"]}
        out["chain"] = row["chain"]["links"]
        out["chain_truncated"] = row["chain"]["truncated"]
        out["usage"] = _usage_totals(row["usage"])
        if isinstance(caller, Human):
            out["endpoint_id"] = str(row["endpoint_id"])
        return out

    async def todo_attempt_summary(self, todo_id: str) -> dict | None:
        """The exact attempt summary (counts by outcome, recent tokens, omitted), or None."""
        row = await self._fetch(query("attempt_summary"), {"id": todo_id}, op="attempt_summary", one=True)
        return row["summary"] if row else None

    async def ready_todos(self, endpoint_ids: Iterable[str], limit: int = 500, *, queue: str | None = None) -> list[dict]:
        """Each endpoint's oldest pending todos outside paused queues (in one queue, if given),
        ids and queues only (the doorbell heartbeat, and a resumed queue's ring)."""
        ids = list(endpoint_ids)
        if not ids:
            return []
        return await self._fetch(query("todos_ready"), {"endpoint_ids": ids, "limit": limit, "queue": queue}, op="ready")

    async def todos_still_pending(self, todo_ids: Iterable[str]) -> set[str]:
        """Which of these todos are still pending (ids only, no caller: the doorbell's)."""
        rows = await self._fetch(query("todos_still_pending"), {"ids": list(todo_ids)}, op="doorbell")
        return {r["id"] for r in rows}
