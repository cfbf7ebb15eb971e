"""The closes (board/store/sql/closes.sql), a part of board.store.store.Store: a held todo's
attempt closed (complete, fail, release, one or a batch, by its holder or its owning human),
a todo canceled, a dead letter retried."""

from __future__ import annotations

import hmac
import json
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from board.errors import Conflict, Invalid, SwitchboardError
from board.store.base import StoreBase, _translate, acts, todo_out
from board.store.inputs import (
    checked_todo_id,
    clean_artifact,
    clean_usage,
    cut_utf8,
    delay_value,
    hash_token,
    json_value,
    screen_secrets,
    storable,
)
from board.store.queries import execute, query
from board.store.vocabulary import (
    CLOSED_BY,
    COMPLETE_TODOS_MAX,
    HOLDER_STATES,
    SUMMARY_MAX_BYTES,
    Agent,
    Caller,
    Human,
    Transition,
)

# The fields a complete_todos item takes (complete's arguments).
_COMPLETE_ITEM_FIELDS = frozenset({"id", "result", "summary", "artifact", "lease_token", "usage"})

# The statements the caller's kind or the verb picks.
# The holder's closes, an agent's or the Board's (the statement tells them apart by the
# caller's endpoint): fail and release are one statement, its outcome a parameter.
_CLOSE = {"complete": query("todo_complete"), "fail": query("todo_fail_or_release"),
          "release": query("todo_fail_or_release")}
# complete and cancel close with a fixed outcome and disposition and leave a fixed state, so
# their statements return neither, nor what a close fixes on the todo (filled in by _closed):
# (outcome, disposition, state). tests/integration/test_transition_responses.py holds each
# response to a fresh read.
FIXED_CLOSE = {"complete": ("completed", "done", "done"), "cancel": ("canceled", "canceled", "canceled")}


class Closes(StoreBase):
    def _closing(self, summary: Any, artifact: Any, result: Any, *, with_result: bool, op: str, todo_id: str) -> dict:
        """Validate every input before any transition applies (REQ-5)."""
        try:
            artifact = clean_artifact(artifact)
            if summary is not None and not isinstance(summary, str):
                raise Invalid("summary must be a string", argument="summary")
            if with_result and result is not None:
                json_value(result, "result")  # screened there, keys and strings
            from_result = False
            if summary is None and with_result and result is not None and self.settings.attempt_summary_from_result:
                summary, from_result = json.dumps(result, separators=(",", ":"), ensure_ascii=False), True
            truncated = False
            if summary is not None:
                storable(summary, "summary")
                if not from_result:  # a summary taken from the result was screened as the result
                    screen_secrets(summary, "summary")
                summary, truncated = cut_utf8(summary, SUMMARY_MAX_BYTES)
        except SwitchboardError as e:
            e.op, e.todo_id = op, todo_id
            raise
        return {"summary": summary, "summary_truncated": truncated, "artifact": artifact,
                "result": Jsonb(result) if with_result and result is not None else None}

    async def _close(self, caller: Caller, kind: str, todo_id: Any, *, summary=None, artifact=None, result=None,
                     lease_token=None, usage=None, delay_seconds=None, now=None) -> dict:
        """complete, fail or release: every input checked first (REQ-5), then the holder's close
        (_close_as_holder) or the owning human's on the Board (_close_as_owner). A release's
        delay_seconds snoozes the todo: pending again, scheduled that far ahead."""
        todo_id = checked_todo_id(todo_id)
        inputs = self._closing(summary, artifact, result, with_result=kind in ("complete", "fail"), op=kind,
                               todo_id=todo_id)
        try:
            inputs["delay_seconds"] = delay_value(delay_seconds)
        except SwitchboardError as e:
            e.op, e.todo_id = kind, todo_id
            raise
        try:
            usage = clean_usage(usage)
        except SwitchboardError as e:
            e.op, e.todo_id = kind, todo_id
            raise
        reported = {k: v for k, v in usage.items() if v is not None}
        if isinstance(caller, Agent):
            return await self._close_as_holder(caller, kind, todo_id, inputs, usage, reported, lease_token, now)
        if reported:  # the Board's closes report none
            raise Invalid("usage is reported by an agent's closing call", argument="usage", op=kind, todo_id=todo_id)
        return await self._close_as_owner(caller, kind, todo_id, inputs | usage, now)

    async def _close_as_holder(self, caller: Agent, kind: str, todo_id: str, inputs: dict, usage: dict,
                               reported: dict, lease_token: Any, now) -> dict:
        """The holder closes its own claimed attempt with what it reported: without a lease
        token the statement itself requires an unfenced attempt; with one the token is compared
        first (_fenced), and a close that misses is looked up as a replay of a close that
        token already made (its reply lost) before the miss is classified."""
        inputs.update(usage)  # an agent's close sets what it reported (nulls: nothing)
        params = self._close_params(caller, kind, todo_id, inputs, now)
        caller.require(kind)
        params["from_states"] = ["claimed"]
        if lease_token is None:  # the statement itself requires an unfenced attempt
            row = await self._fetch(_CLOSE[kind], dict(params, token_checked=False), op=kind,
                                    todo_id=todo_id, one=True)
        else:
            try:
                row = await self._fenced(caller, _CLOSE[kind], params,
                                         lease_token, op=kind, todo_id=todo_id, from_states=["claimed"])
            except Conflict:  # the token no longer holds the open attempt: it may have closed it
                row = None
            if row is None:
                replayed = await self._replay(caller, kind, todo_id, lease_token, params)
                if replayed is not None:
                    return replayed
        if row is None:
            raise await self._classify(caller, todo_id, kind, params)
        return self._closed(kind, todo_id, row, usage=reported or None)

    async def _close_as_owner(self, caller: Human, kind: str, todo_id: str, inputs: dict, now) -> dict:
        """The owning human closes on the Board: exempt from the fence (REQ-6), any holder's
        attempt for fail and release, only a claimed one for complete; no usage (nulls)."""
        params = self._close_params(caller, kind, todo_id, inputs, now)
        params["from_states"] = ["claimed"] if kind == "complete" else list(HOLDER_STATES)
        row = await self._fetch(_CLOSE[kind], dict(params, token_checked=False), op=kind, todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, kind, params)
        return self._closed(kind, todo_id, row)

    def _close_params(self, caller: Caller, kind: str, todo_id: str, inputs: dict, now) -> dict:
        return self._params(caller, id=todo_id, **inputs, now=now, outcome=CLOSED_BY[kind],
                            retry_base=self.settings.retry_base_seconds, retry_max=self.settings.retry_max_seconds)

    async def _replay(self, caller: Agent, kind: str, todo_id: str, lease_token: str, params: dict) -> dict | None:
        """A close retried with the token of an attempt that token already closed with the same
        verb (its reply was lost): the closed result again, marked replayed; nothing changes."""
        presented = hash_token(lease_token)
        rows = await self._fetch(query("attempt_replay_lookup"), dict(params, outcome=CLOSED_BY[kind]), op=kind,
                                 todo_id=todo_id)
        for row in rows:
            if hmac.compare_digest(bytes(row["lease_token_hash"]), presented):
                out = todo_out(row)
                out["closed_attempt"] = {"seq": row["closed_seq"], "attempt": row["closed_attempt"],
                                         "outcome": row["closed_outcome"], "disposition": row["closed_disposition"],
                                         "died": False}
                out["replayed"] = True
                return out
        return None

    def _closed(self, kind: str, todo_id: str, row: dict, *, usage: dict | None = None) -> dict:
        if kind in FIXED_CLOSE:
            outcome, disposition, state = FIXED_CLOSE[kind]
            row.update(id=todo_id, state=state, owner=None, lease_expires_at=None, next_retry_at=None,
                       dead_letter=False)  # what the close fixes, not returned
            closed = {"seq": row["attempts_total"], "attempt": row["closed_attempt"], "outcome": outcome,
                      "disposition": disposition, "died": False}
        else:
            outcome = row["closed_outcome"]
            closed = {"seq": row["attempts_total"], "attempt": row["closed_attempt"], "outcome": outcome,
                      "disposition": row["closed_disposition"], "summary": row["closed_summary"],
                      "artifact": row["closed_artifact"], "died": row["closed_died"]}
        if usage:  # for the metrics' token and cost counters
            closed["usage"] = usage
        self._emit((Transition(CLOSED_BY[kind], row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               dead_letter=row["dead_letter"], closed=closed, attempts_total=row["attempts_total"],
                               run_at=row.get("run_at")),))
        out = todo_out(row)
        out["closed_attempt"] = {"seq": closed["seq"], "attempt": closed["attempt"], "outcome": outcome,
                                 "disposition": closed["disposition"], "died": closed["died"]}
        return out

    @acts("complete")
    async def todo_complete(self, caller: Caller, todo_id: Any, *, result=None, summary=None, artifact=None,
                            lease_token=None, usage=None, now=None) -> dict:
        """claimed -> done; closes the attempt completed/done (with the usage reported)."""
        return await self._close(caller, "complete", todo_id, result=result, summary=summary, artifact=artifact,
                                 lease_token=lease_token, usage=usage, now=now)

    @acts("complete", todo=None)
    async def todos_complete(self, caller: Agent, todos: Any, *, now=None) -> dict:
        """claimed -> done for up to COMPLETE_TODOS_MAX held todos in one statement, all or
        nothing: every item is checked first (an error names it, todos[i].field), fenced
        items' tokens are compared in constant time with their todos locked, and the
        statement closes every todo or none. No replay: an item already closed is a conflict
        naming it."""
        caller.require("complete_todos")
        if not isinstance(todos, list) or not 1 <= len(todos) <= COMPLETE_TODOS_MAX:
            raise Invalid(f"todos must be an array of 1 to {COMPLETE_TODOS_MAX} completions", argument="todos",
                          op="complete_todos")
        items, tokens, reported, first = [], {}, {}, {}
        for i, item in enumerate(todos):
            checked, token, usage = self._complete_item(i, item)
            if checked["id"] in first:
                raise Invalid(f"todos[{i}].id repeats todos[{first[checked['id']]}].id", argument=f"todos[{i}].id",
                              op="complete_todos")
            first[checked["id"]] = i
            items.append(checked)
            if token is not None:
                tokens[checked["id"]] = token
            if usage:
                reported[checked["id"]] = usage
        ids = list(first)
        params = self._params(caller, ids=ids, now=now)
        if tokens:
            rows = await self._complete_fenced(params, items, tokens, first)
        else:  # the statement closes all or none: alone, it needs no transaction
            rows = await self._fetch(query("todos_complete"), dict(params, todos=Jsonb(items)), op="complete_todos")
        if len(rows) != len(items):  # it changed nothing: name the item that stopped it
            closable = {r["id"] for r in await self._fetch(query("todos_complete_closable"),
                                                             dict(params, todos=Jsonb(items)), op="complete_todos")}
            missed = next((item["id"] for item in items if item["id"] not in closable), ids[0])
            i = first[missed]
            e = await self._classify(caller, missed, "complete", dict(params, from_states=["claimed"]))
            e.op, e.argument, e.message = "complete_todos", f"todos[{i}].id", f"todos[{i}].id: {e.message}"
            raise e
        by_id = {r["id"]: r for r in rows}
        return {"todos": [self._closed("complete", todo_id, by_id[todo_id], usage=reported.get(todo_id))
                          for todo_id in ids]}

    async def _complete_fenced(self, params: dict, items: list[dict], tokens: dict[str, str],
                               first: dict[str, int]) -> list[dict]:
        """todos_complete for a batch with lease tokens: each presented token compared in
        constant time with its todo's open attempt, locked by the lookup in the same
        transaction as the close. A token that does not match is a conflict naming it."""
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    cur = await execute(conn, query("attempts_fence_lookup_many"), dict(params, ids=list(tokens)))
                    stored = {r["id"]: r["lease_token_hash"] for r in await cur.fetchall()}
                    for item in items:
                        token = tokens.get(item["id"])
                        if token is not None and item["id"] in stored:  # not held: the statement misses it
                            held = stored[item["id"]]  # None: an unfenced attempt, which no token matches
                            if held is None or not hmac.compare_digest(bytes(held), hash_token(token)):
                                i = first[item["id"]]
                                raise Conflict(f"todos[{i}].lease_token: the lease does not match this attempt",
                                               argument=f"todos[{i}].lease_token", op="complete_todos",
                                               todo_id=item["id"])
                            item["token_checked"] = True
                    cur = await execute(conn, query("todos_complete"), dict(params, todos=Jsonb(items)))
                    return await cur.fetchall()
        except (psycopg.Error, UnicodeEncodeError) as err:
            raise _translate(err, "complete_todos", None) from None

    def _complete_item(self, i: int, item: Any) -> tuple[dict, str | None, dict]:
        """One complete_todos item checked as complete checks its arguments, every error
        naming todos[i] and the field: (the item for the statement, its lease_token, the
        usage it reported)."""
        at = f"todos[{i}]"
        if not isinstance(item, dict):
            raise Invalid(f"{at} must be an object with id", argument=at, op="complete_todos")
        unknown = [k for k in item if k not in _COMPLETE_ITEM_FIELDS]
        if unknown:
            raise Invalid(f"{at} takes no field {unknown[0]!r}", argument=f"{at}.{unknown[0]}", op="complete_todos")
        try:
            todo_id = checked_todo_id(item.get("id"))
            token = item.get("lease_token")
            if token is not None:
                if not isinstance(token, str):
                    raise Invalid("lease_token must be a string", argument="lease_token")
                storable(token, "lease_token")
            inputs = self._closing(item.get("summary"), item.get("artifact"), item.get("result"), with_result=True,
                                   op="complete_todos", todo_id=todo_id)
            usage = clean_usage(item.get("usage"))
        except SwitchboardError as e:
            field_name = e.argument or "id"
            e.op, e.argument = "complete_todos", f"{at}.{field_name}"
            e.message = (f"{at}.{e.message}" if e.message.startswith(field_name)
                         else f"{at}.{field_name}: {e.message}")
            raise
        result = item.get("result")
        checked = {"id": todo_id, "result": result, "summary": inputs["summary"],
                   "summary_truncated": inputs["summary_truncated"], "artifact": inputs["artifact"],
                   "input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"],
                   "cost_usd": None if usage["cost_usd"] is None else str(usage["cost_usd"]), "model": usage["model"],
                   "token_checked": False}
        return checked, token, {k: v for k, v in usage.items() if v is not None}

    @acts("fail")
    async def todo_fail(self, caller: Caller, todo_id: Any, *, result=None, summary=None, artifact=None,
                        lease_token=None, usage=None, now=None) -> dict:
        """claimed -> failed with a retry, or a dead letter at the cap; closes failed/..."""
        return await self._close(caller, "fail", todo_id, result=result, summary=summary, artifact=artifact,
                                 lease_token=lease_token, usage=usage, now=now)

    @acts("release", detail=("delay_seconds",))
    async def todo_release(self, caller: Caller, todo_id: Any, *, summary=None, artifact=None, lease_token=None,
                           usage=None, delay_seconds=None, now=None) -> dict:
        """claimed -> pending, attempt counter unchanged; closes released/requeued (REQ-9).
        With delay_seconds above 0 the todo is scheduled that far ahead (a snooze)."""
        return await self._close(caller, "release", todo_id, summary=summary, artifact=artifact,
                                 lease_token=lease_token, usage=usage, delay_seconds=delay_seconds, now=now)

    @acts("cancel")
    async def todo_cancel(self, caller: Caller, todo_id: Any, *, now=None) -> dict:
        """pending, held, or failed awaiting retry -> canceled; a held todo's attempt closes
        canceled/canceled."""
        todo_id = checked_todo_id(todo_id)
        agent = isinstance(caller, Agent)
        if agent:
            caller.require("cancel")
        params = self._params(caller, id=todo_id, summary=None, summary_truncated=False, artifact=None,
                              from_states=list(HOLDER_STATES), now=now)
        row = await self._fetch(query("todo_cancel_held"), params,
                                op="cancel", todo_id=todo_id, one=True)
        if row is not None:
            return self._closed("cancel", todo_id, row)
        row = await self._fetch(query("todo_cancel_unheld"), params, op="cancel",
                                todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "cancel", params)
        self._emit([Transition("canceled", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    @acts("retry")
    async def todo_retry(self, caller: Caller, todo_id: Any, *, now=None) -> dict:
        """Manual retry: dead letter -> pending with attempt = 0; every attempt kept (REQ-12)."""
        todo_id = checked_todo_id(todo_id)
        params = self._params(caller, id=todo_id, now=now)
        row = await self._fetch(query("todo_retry"), params, op="retry", todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "retry", params)
        self._emit([Transition("retried", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)
