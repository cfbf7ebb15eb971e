"""The adds (board/store/sql/adds.sql), a part of board.store.store.Store: a todo added,
alone or a batch of them, continuing an ended todo or not."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from board.errors import Conflict, Forbidden, Invalid, NotFound, SwitchboardError
from board.store.base import StoreBase, _translate, acts, todo_out
from board.store.inputs import (
    checked_todo_id,
    clean_key,
    json_object,
    positive_int,
    priority_value,
    screen_secrets,
    start_time,
    storable,
)
from board.store.queries import execute, query
from board.store.vocabulary import (
    AFTER_MAX,
    MAX_ATTEMPTS_DEFAULT,
    MAX_ATTEMPTS_MAX,
    QUEUE_PATTERN,
    QUEUE_RULE,
    TITLE_MAX_CHARS,
    TODOS_ADD_MAX,
    Agent,
    Caller,
    Human,
    Transition,
)

def _continues_id(value: Any) -> str:
    """The id add_todo's continues names, checked as an id is (an id no todo can have is
    not_found, with the body of any unknown id), naming continues."""
    try:
        return checked_todo_id(value, op="add_todo")
    except Invalid:
        raise Invalid("continues must be a todo id (a non-empty string)", argument="continues", op="add_todo") from None
    except NotFound:
        raise NotFound(argument="continues", op="add_todo") from None


def _after(value: Any, at: str, i: int | None, op: str) -> list[str]:
    """The todos an add names in after, checked: up to AFTER_MAX ids, or (an add_todos item,
    index i) "#k" naming an earlier item k of the same call; repeats count once. An id no
    todo can have is not_found with the body of any unknown id."""
    name = f"{at}after"
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > AFTER_MAX:
        raise Invalid(f"{name} must be an array of at most {AFTER_MAX} todo ids", argument=name, op=op)
    ids = []
    for v in value:
        if not isinstance(v, str) or not v:
            raise Invalid(f"{name} must be an array of todo ids (non-empty strings)", argument=name, op=op)
        if v.startswith("#"):
            k = v[1:]
            if i is None or not (k.isascii() and k.isdigit()) or int(k) >= i:
                where = "an earlier item of this call" if i is not None else "an item of add_todos"
                raise Invalid(f"{name}: {v!r} does not name {where} (#0 is the first)", argument=name, op=op)
            ids.append(f"#{int(k)}")
            continue
        try:
            ids.append(checked_todo_id(v, op=op))
        except (Invalid, NotFound):
            raise NotFound(argument=name, op=op) from None
    return list(dict.fromkeys(ids))


# The fields an add_todos item takes (add_todo's arguments).
_ADD_ITEM_FIELDS = frozenset({"queue", "title", "payload", "routing", "max_attempts", "continues", "priority",
                              "run_at", "delay_seconds", "key", "after"})
# How many times an add whose key is live looks for that todo and, finding it ended, adds again.
_KEY_RACES = 5
# Why a continuation added nothing, as the caller's kind sees the predecessor.


class Adds(StoreBase):
    @acts("add", todo=None)
    async def todo_add(self, caller: Caller, *, queue: Any, title: Any, payload: Any = None,
                       routing: Any = None, max_attempts: Any = None, endpoint_id: Any = None,
                       continues: Any = None, priority: Any = None, run_at: Any = None,
                       delay_seconds: Any = None, key: Any = None, after: Any = None,
                       a2a: tuple[str, str] | None = None, now: datetime | None = None) -> dict:
        """-> pending, in a queue the endpoint is granted. A human (the Board) adds through one
        of their live endpoints granted the queue: endpoint_id, or else their oldest one; the
        statement itself picks and checks it. With continues, the new todo continues that todo
        of the caller's, which must have ended and have no successor yet (one statement; a
        continuation of a human's todo goes on that todo's endpoint).

        priority orders the claim (0 first); run_at or delay_seconds schedules it; with a key
        taken by a live todo of the queue, that todo comes back unchanged, deduplicated. after
        names the caller's todos this one waits for (an agent's add: run as add_todos' batch
        of one). a2a, for an agent's add over A2A: (the A2A client, the task's contextId),
        recorded on the todo (migration 0019)."""
        human = isinstance(caller, Human)
        if not human:
            caller.require("add_todo")
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"queue must be {QUEUE_RULE}", argument="queue", op="add_todo")
        not_granted = Forbidden(f"{'none of your live endpoints is' if human else 'this endpoint is not'} granted "
                                f"queue {queue}", argument="queue", op="add_todo")
        if not human and queue not in caller.queues:
            raise not_granted
        if human and endpoint_id is not None:
            try:
                endpoint_id = str(uuid.UUID(endpoint_id))
            except (TypeError, ValueError, AttributeError):
                raise not_granted from None
        if not isinstance(title, str) or not 1 <= len(title) <= TITLE_MAX_CHARS:
            raise Invalid(f"title must be a string of 1 to {TITLE_MAX_CHARS} characters", argument="title",
                          op="add_todo")
        storable(title, "title")
        screen_secrets(title, "title")
        if continues is not None:
            continues = _continues_id(continues)
        try:
            order = {"priority": priority_value(priority), "run_at": start_time(run_at, delay_seconds, now),
                     "key": clean_key(key)}
        except SwitchboardError as e:
            e.op = "add_todo"
            raise
        if continues is not None and order["key"] is not None:
            raise Invalid("key cannot be given with continues: a todo has one successor already", argument="key",
                          op="add_todo")
        if _after(after, "", None, "add_todo"):
            if human:
                raise Invalid("after: the Board's add cannot wait for other todos", argument="after", op="add_todo")
            return await self._add_one_waiting(caller, now, queue=queue, title=title, payload=payload,
                                               routing=routing, max_attempts=max_attempts, continues=continues,
                                               priority=priority, run_at=run_at, delay_seconds=delay_seconds,
                                               key=key, after=after)
        params = self._params(
            caller, queue=queue, title=title, **order,
            payload=Jsonb(json_object(payload, "payload")), routing=Jsonb(json_object(routing, "routing")),
            max_attempts=MAX_ATTEMPTS_DEFAULT if max_attempts is None else positive_int(max_attempts, "max_attempts", 1,
                                                                                         MAX_ATTEMPTS_MAX),
            now=now, continues=continues, **({"endpoint_id": endpoint_id} if human else {}),
            a2a_client=a2a[0] if a2a else None, a2a_context=a2a[1] if a2a else None,
        )
        if continues is None:
            sql = query("todo_add_human") if human else query("todo_add")
        else:
            sql = query("todo_add_continuing_human") if human else query("todo_add_continuing")
        for _ in range(_KEY_RACES):
            row = await self._fetch(sql, params, op="add_todo", one=True)
            if row is not None or order["key"] is None:
                break
            # the key is live: that todo, unless it ended since (then the add runs again)
            live = await self._fetch(query("todo_by_key"), params, op="add_todo", one=True)
            if live is not None:
                return todo_out(live) | {"deduplicated": True}
            if human and not await self._fetch(query("todo_add_human_endpoint"), params, op="add_todo", one=True):
                raise not_granted
        else:
            raise Conflict("the key kept changing hands while this add ran; try again", argument="key", op="add_todo")
        if row is None and continues is not None:
            raise await self._continues_miss(caller, params, not_granted)
        if row is None:  # the human has no live endpoint granted the queue (or not the one named)
            raise not_granted
        self._emit([Transition("added", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               run_at=row["run_at"])])
        out = todo_out(row) | {"deduplicated": False}
        if continues is not None:
            out["continues_id"] = row["continues_id"]
        return out

    async def _add_one_waiting(self, caller: Agent, now: datetime | None, **item: Any) -> dict:
        """add_todo with after: add_todos' statement for one item, its errors named as
        add_todo's arguments."""
        try:
            out = (await self._add_batch(caller, [item], now))["todos"][0]
        except SwitchboardError as e:
            e.op = "add_todo"
            if e.argument and e.argument.startswith("todos[0]."):
                e.argument = e.argument.removeprefix("todos[0].")
                e.message = e.message.replace("todos[0].", "")
            raise
        return out

    async def _continues_miss(self, caller: Caller, params: dict, not_granted: SwitchboardError) -> SwitchboardError:
        """Why a continuation added nothing: the predecessor is not the caller's (NotFound, the
        body of any unknown id), still live, or continued already (Conflict naming the
        successor, the winner of a race included: this read runs after it committed)."""
        # in the caller's scope: a human's add names the endpoint it goes through as endpoint_id
        scope = self._params(caller, continues=params["continues"], now=params.get("now"))
        row = await self._fetch(query("todo_continues_miss"), scope, op="add_todo", todo_id=params["continues"],
                                one=True)
        if row is None:
            return NotFound(argument="continues", op="add_todo", todo_id=params["continues"])
        if row["successor"] is not None:
            return Conflict(f"that todo already has a successor: {row['successor']}", argument="continues",
                            op="add_todo", todo_id=params["continues"])
        if not row["ended"]:
            return Conflict(f"that todo is still live ({row['state']}); only a done, canceled or dead-lettered "
                            "todo can be continued", argument="continues", op="add_todo", todo_id=params["continues"])
        return not_granted  # a human with no live endpoint of the predecessor's granted the queue

    @acts("add", todo=None)
    async def todos_add(self, caller: Agent, todos: Any, *, now: datetime | None = None) -> dict:
        """-> pending, up to TODOS_ADD_MAX todos in one statement, all or nothing: every item is
        checked first (an error names it, todos[i].field), then one statement inserts them all
        in the order given, one notification (one doorbell ring) per todo. Items that continue
        a todo run in a transaction rolled back when any predecessor is refused. An item's
        after names todos it waits for: the caller's, or an earlier item ("#0")."""
        caller.require("add_todos")
        if not isinstance(todos, list) or not 1 <= len(todos) <= TODOS_ADD_MAX:
            raise Invalid(f"todos must be an array of 1 to {TODOS_ADD_MAX} todos", argument="todos", op="add_todos")
        return await self._add_batch(caller, todos, now)

    async def _add_batch(self, caller: Agent, todos: list, now: datetime | None) -> dict:
        continuing: dict[str, int] = {}  # predecessor id -> the index of the item continuing it
        items = [self._add_item(caller, i, item, continuing, now) for i, item in enumerate(todos)]
        # An item whose queue and key an earlier item has is that item's todo, deduplicated.
        first: dict[tuple[str, str], int] = {}
        same_as = {i: first.setdefault((it["queue"], it["key"]), i) for i, it in enumerate(items)
                   if it["key"] is not None}
        outside = self._resolve_after(items)
        sent = [it for i, it in enumerate(items) if same_as.get(i, i) == i]
        params = self._params(caller, todos=Jsonb(sent), continues=list(continuing), after=outside, now=now)
        if not continuing:  # one autocommit statement: it inserts every item or fails whole
            rows = await self._fetch(query("todos_add"), params, op="add_todos")
        else:
            rows = await self._add_all_or_nothing(params, len(continuing))
        if outside and len(rows or ()) < len(sent):
            await self._after_not_found(caller, items, outside)
        if rows is None:
            raise await self._continuing_miss(caller, params, continuing)
        if sum(r["key"] is None for r in rows) < sum(it["key"] is None for it in sent):
            raise Conflict("a todo named in after went away while this add ran; nothing was added, try again",
                           argument="todos", op="add_todos")
        rows.sort(key=lambda r: r["created_at"])  # created_at steps a microsecond per item
        self._emit([Transition("added", r["id"], str(r["endpoint_id"]), r["queue"], r["state"], run_at=r["run_at"])
                    for r in rows])
        keyed = {(r["queue"], r["key"]): r for r in rows if r["key"] is not None}
        unkeyed = iter(r for r in rows if r["key"] is None)
        by_item: dict[int, dict] = {}
        for i, it in enumerate(items):
            if it["key"] is None:
                by_item[i] = todo_out(row := next(unkeyed)) | {"deduplicated": False}
                if row["continues_id"] is not None:
                    by_item[i]["continues_id"] = row["continues_id"]
            elif same_as[i] != i:  # the earlier item's todo
                by_item[i] = dict(by_item[same_as[i]], deduplicated=True)
            elif (it["queue"], it["key"]) in keyed:
                by_item[i] = todo_out(keyed[it["queue"], it["key"]]) | {"deduplicated": False}
            else:  # the key is live: that todo, or this item added alone if it ended meanwhile
                by_item[i] = await self._add_keyed(caller, it, now)
        return {"todos": [by_item[i] for i in range(len(items))]}

    @staticmethod
    def _resolve_after(items: list[dict]) -> list[str]:
        """Gives each item its id and turns "#k" into item k's id (k is then waited_on); returns
        the ids named outside the batch, once each. An item with a key may be deduplicated to
        a todo added before, so it is named by that todo's id, not by "#k"."""
        for it in items:
            it["id"], it["waited_on"] = str(uuid.uuid4()), False
        outside: dict[str, None] = {}
        for i, it in enumerate(items):
            ids = []
            for a in it["after"]:
                if a.startswith("#"):
                    target = items[int(a[1:])]
                    if target["key"] is not None:
                        raise Invalid(f"todos[{i}].after: {a} names an item with a key, which may stand for a todo "
                                      "added before; add it first and name its id", argument=f"todos[{i}].after",
                                      op="add_todos")
                    target["waited_on"] = True
                    ids.append(target["id"])
                else:
                    ids.append(a)
                    outside[a] = None
            it["after"] = list(dict.fromkeys(ids)) or None
        return list(outside)

    async def _after_not_found(self, caller: Agent, items: list[dict], outside: list[str]) -> None:
        """Raises not_found naming the first item whose after names a todo that is not the
        caller's (or no todo at all), when the add inserted nothing for that reason."""
        seen = {r["id"] for r in await self._fetch(query("todos_in_scope"), self._params(caller, ids=outside),
                                                   op="add_todos")}
        for i, it in enumerate(items):
            if any(a not in seen for a in it["after"] or () if a in outside):
                raise NotFound(argument=f"todos[{i}].after", op="add_todos")

    async def _add_keyed(self, caller: Agent, item: dict, now: datetime | None) -> dict:
        """An add_todos item whose key was live when the batch ran: the live todo, deduplicated,
        or the item added now if that todo has ended since."""
        params = self._params(caller, **{k: item[k] for k in ("queue", "title", "max_attempts", "priority", "key")},
                              payload=Jsonb(item["payload"]), routing=Jsonb(item["routing"]), run_at=item["run_at"],
                              now=now)
        for _ in range(_KEY_RACES):
            live = await self._fetch(query("todo_by_key"), params, op="add_todos", one=True)
            if live is not None:
                return todo_out(live) | {"deduplicated": True}
            if item["after"]:  # todo_add would add it waiting for nothing
                break
            row = await self._fetch(query("todo_add"), params, op="add_todos", one=True)
            if row is not None:
                self._emit([Transition("added", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               run_at=row["run_at"])])
                return todo_out(row) | {"deduplicated": False}
        raise Conflict("a key kept changing hands while this add ran; try again", argument="todos", op="add_todos")

    def _add_item(self, caller: Agent, i: int, item: Any, continuing: dict[str, int], now: datetime | None) -> dict:
        """One add_todos item checked as add_todo checks its arguments, every error naming
        todos[i] and the field."""
        at = f"todos[{i}]"
        if not isinstance(item, dict):
            raise Invalid(f"{at} must be an object with queue and title", argument=at, op="add_todos")
        unknown = [k for k in item if k not in _ADD_ITEM_FIELDS]
        if unknown:
            raise Invalid(f"{at} takes no field {unknown[0]!r}", argument=f"{at}.{unknown[0]}", op="add_todos")
        queue, title, continues = item.get("queue"), item.get("title"), item.get("continues")
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"{at}.queue must be {QUEUE_RULE}", argument=f"{at}.queue", op="add_todos")
        if queue not in caller.queues:
            raise Forbidden(f"{at}.queue: this endpoint is not granted queue {queue}", argument=f"{at}.queue",
                            op="add_todos")
        if not isinstance(title, str) or not 1 <= len(title) <= TITLE_MAX_CHARS:
            raise Invalid(f"{at}.title must be a string of 1 to {TITLE_MAX_CHARS} characters", argument=f"{at}.title",
                          op="add_todos")
        try:
            storable(title, f"{at}.title")
            screen_secrets(title, f"{at}.title")
            payload = json_object(item.get("payload"), f"{at}.payload")
            routing = json_object(item.get("routing"), f"{at}.routing")
            max_attempts = item.get("max_attempts")
            max_attempts = MAX_ATTEMPTS_DEFAULT if max_attempts is None else positive_int(
                max_attempts, f"{at}.max_attempts", 1, MAX_ATTEMPTS_MAX)
            priority = priority_value(item.get("priority"), f"{at}.priority")
            run_at = start_time(item.get("run_at"), item.get("delay_seconds"), now, prefix=f"{at}.")
            key = clean_key(item.get("key"), f"{at}.key")
            after = _after(item.get("after"), f"{at}.", i, "add_todos")
        except SwitchboardError as e:
            e.op = "add_todos"
            raise
        if continues is not None and key is not None:
            raise Invalid(f"{at}.key cannot be given with {at}.continues: a todo has one successor already",
                          argument=f"{at}.key", op="add_todos")
        if continues is not None:
            if not isinstance(continues, str) or not continues:
                raise Invalid(f"{at}.continues must be a todo id (a non-empty string)", argument=f"{at}.continues",
                              op="add_todos")
            try:
                checked_todo_id(continues)
            except NotFound:  # an id no todo can have: the body of any unknown id
                raise NotFound(argument=f"{at}.continues", op="add_todos") from None
            if continues in continuing:
                raise Conflict(f"{at}.continues names the todo todos[{continuing[continues]}].continues continues; "
                               "a todo has one successor", argument=f"{at}.continues", op="add_todos")
            continuing[continues] = i
        return {"ord": i, "queue": queue, "title": title, "payload": payload, "routing": routing,
                "max_attempts": max_attempts, "continues": continues, "priority": priority,
                "run_at": None if run_at is None else run_at.isoformat(), "key": key, "after": after}

    async def _add_all_or_nothing(self, params: dict, continuing: int) -> list[dict] | None:
        """todos_add in a transaction, committed only when every continuing item was inserted
        (a predecessor refused leaves its item out): the rows, or None after a rollback."""
        rows = None
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    cur = await execute(conn, query("todos_add"), params)
                    rows = await cur.fetchall()
                    if sum(r["continues_id"] is not None for r in rows) != continuing:
                        rows = None
                        raise psycopg.Rollback()
        except (psycopg.Error, UnicodeEncodeError) as err:
            raise _translate(err, "add_todos", None) from None
        return rows

    async def _continuing_miss(self, caller: Agent, params: dict, continuing: dict[str, int]) -> SwitchboardError:
        """Why add_todos added nothing: the first item whose predecessor is refused, named."""
        not_refused = Conflict("", op="add_todos")  # what _continues_miss returns for a predecessor it would take
        for pred, i in sorted(continuing.items(), key=lambda kv: kv[1]):
            e = await self._continues_miss(caller, dict(params, continues=pred), not_refused)
            if e is not not_refused:
                e.op, e.argument, e.message = "add_todos", f"todos[{i}].continues", f"todos[{i}].continues: {e.message}"
                return e
        return Conflict("a todo this call continues changed while it ran; nothing was added, try again",
                        argument="todos", op="add_todos")
