"""The one transactional store: it runs every statement that reads or changes todos,
attempts, users and endpoints (the statements are board/store/sql/*.sql, loaded by board/store/queries.py;
users and endpoints are the Accounts part, board/store/accounts.py; input shaping is
board/store/inputs.py).

Each transition is a compare-and-set written as one statement of data-modifying CTEs:
the todo row is locked first (always todo before attempt, so transitions never deadlock),
the open attempt is closed and/or a new one opened in the same statement, and the statement
calls pg_notify, which Postgres delivers only at commit. A statement that touches no row is
re-read once to classify the miss: absent or foreign is NotFound, present in the wrong
state is Conflict (REQ-19). Nothing outside this module catches psycopg errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import json
import logging
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

import psycopg
from psycopg import errors as pgerrors
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from board import logs

from board.store import liveness
from board.config import Settings
from board.store.accounts import Accounts
from board.store.grants import Grants
from board.errors import Conflict, Forbidden, Internal, Invalid, NotFound, SwitchboardError, Unavailable
from board.store.inputs import (
    answer_fence,
    checked_todo_id,
    clean_artifact,
    clean_claimant,
    clean_note,
    clean_choice,
    clean_question,
    clean_usage,
    cut_utf8,
    screen_secrets,
    hash_token,
    json_object,
    list_cursor,
    list_filters,
    json_value,
    positive_int,
    read_list_cursor,
    storable,
)

from board.store.vocabulary import (
    Agent,
    Caller,
    Human,
    Observer,
    Transition,
)

from board.store.queries import Query, execute, query
from board.store.vocabulary import (
    ATTEMPTS_LIMIT_DEFAULT,
    ATTEMPTS_LIMIT_MAX,
    BOARD_SORTS,
    BULK_BATCH,
    BULK_CONCURRENCY,
    BULK_MAX,
    CHAIN_MAX,
    CLAIM_NEXT_LIMIT_MAX,
    COMPLETE_TODOS_MAX,
    CLOSED_BY,
    HOLDER_STATES,
    INTERRUPT_STATES,
    AGENT_ID_MAX_CHARS,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    LIST_SORTS,
    MAX_ATTEMPTS_DEFAULT,
    MAX_ATTEMPTS_MAX,
    NOTE_MAX_BYTES,
    NOTES_LIMIT_DEFAULT,
    NOTES_LIMIT_MAX,
    PRIOR_ATTEMPTS,
    PRIOR_NOTES,
    QUEUE_PATTERN,
    QUEUE_RULE,
    SUMMARY_MAX_BYTES,
    SWEEP_BATCH,
    TITLE_MAX_CHARS,
    TODOS_ADD_MAX,
    USERNAME_MAX_CHARS,
)

log = logging.getLogger("switchboard.store")

# The holder verbs and the states each one acts on (for classifying a miss).
_HOLDER_OPS = {op: ("claimed",) for op in ("heartbeat", "complete", "fail", "release", "interrupt")} | {
    "resume": INTERRUPT_STATES, "note": HOLDER_STATES}


# How long a checkout waits while the database is known away (Store._connection).
AWAY_WAIT_SECONDS = 0.5
# The charts' fold leaves the last ten seconds' closes as attempts: a close's ended_at is
# its statement's arrival, which its backend shows in pg_stat_activity microseconds later.
FOLD_MARGIN_SECONDS = 10.0
# The least a checkout waits once its call's deadline has passed: enough to take an idle
# connection, too short to wait for a new one.
_PAST_DEADLINE_WAIT = 0.01

# The deadline (event loop time) of the call being answered, set by the surface that
# answers it (board/mcp/server.py, board/web/routes.py): every checkout the call makes, its
# authentication and its statements alike, waits at most until then, so the call is
# answered within SWITCHBOARD_DB_WAIT_SECONDS however many checkouts it makes. Unset
# (sweeps, the CLI, long-lived streams after their start): each checkout waits the pool's bound.
_CALL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("switchboard_call_deadline",
                                                                              default=None)


def deadline_after(seconds: float) -> float:
    """The deadline `seconds` from now, in the event loop's time."""
    return asyncio.get_running_loop().time() + seconds


@contextlib.contextmanager
def call_deadline(deadline: float | None) -> Iterator[None]:
    """Every checkout inside waits at most until `deadline` (None: no deadline)."""
    token = _CALL_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _CALL_DEADLINE.reset(token)


# -- constraint names -> domain errors, in one place --------------------------------------
_CONSTRAINT_ERRORS: dict[str, Callable[[], SwitchboardError]] = {
    "todos_queue_check": lambda: Invalid(f"queue must be {QUEUE_RULE}", argument="queue"),
    "todos_title_check": lambda: Invalid(f"title must be 1 to {TITLE_MAX_CHARS} characters", argument="title"),
    "todos_max_attempts_check": lambda: Invalid(f"max_attempts must be from 1 to {MAX_ATTEMPTS_MAX}", argument="max_attempts"),
    "users_username_key": lambda: Conflict("that username is taken", argument="username"),
    "users_username_check": lambda: Invalid(f"username must be 1-{USERNAME_MAX_CHARS} of letters, digits, _ . @ -", argument="username"),
    "endpoints_agent_id_check": lambda: Invalid(f"agent_id must be 1-{AGENT_ID_MAX_CHARS} of letters, digits, _ . : / -", argument="agent_id"),
    "attempts_one_open_per_todo": lambda: Conflict("the todo already has an open attempt"),
    "todos_endpoint_id_fkey": lambda: NotFound("no such endpoint"),
    "todos_one_successor": lambda: Conflict("the todo it continues already has a successor", argument="continues"),
    "todos_continues_fixed": lambda: Conflict("a todo's continues never changes", argument="continues"),
    "endpoints_user_id_fkey": lambda: NotFound("no such user"),
    "endpoints_one_live_grant": lambda: Conflict("the person already has a live grant of this client"),
}


def _translate(err: Exception, op: str, todo_id: str | None) -> SwitchboardError:
    """The one place a driver error becomes a domain error: a named constraint its error,
    bad data invalid, a database that cannot be reached unavailable, anything else internal
    (logged with its traceback; the caller learns nothing more)."""
    name = getattr(getattr(err, "diag", None), "constraint_name", None)
    if name in _CONSTRAINT_ERRORS:
        e = _CONSTRAINT_ERRORS[name]()
    elif isinstance(err, pgerrors.InvalidTextRepresentation | pgerrors.DataException):
        e = Invalid(f"bad input: {err.diag.message_primary}")
    elif isinstance(err, psycopg.DataError | UnicodeEncodeError):  # refused client-side, before sending
        # (the input checks should have caught it first)
        e = Invalid("bad input: text must not contain NUL characters or lone surrogates")
    elif isinstance(err, psycopg.OperationalError):
        log.warning("database unavailable during %s: %s", op, type(err).__name__)
        e = Unavailable()
    else:
        log.error("database error during %s", op, exc_info=err)
        e = Internal()
    e.op, e.todo_id = op, todo_id
    return e


# -- the store ---------------------------------------------------------------------------

def _parse_times(obj: dict, keys=("claimed_at", "last_heartbeat_at", "lease_expires_at", "ended_at",
                                   "last_note_at", "answered_at")) -> dict:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            obj[k] = datetime.fromisoformat(v)
    for note in obj.get("notes") or ():
        if isinstance(note.get("at"), str):
            note["at"] = datetime.fromisoformat(note["at"])
    return obj


def _outcome_counts(row: dict) -> dict[str, int]:
    counts = dict(row.get("pruned_outcomes") or {})
    for outcome, n in (row.get("live_outcomes") or {}).items():
        counts[outcome] = counts.get(outcome, 0) + int(n)
    return {k: int(v) for k, v in sorted(counts.items())}


def _continues_id(value: Any) -> str:
    """The id add_todo's continues names, checked as an id is (an id no todo can have is
    not_found, with the body of any unknown id), naming continues."""
    try:
        return checked_todo_id(value, op="add_todo")
    except Invalid:
        raise Invalid("continues must be a todo id (a non-empty string)", argument="continues", op="add_todo") from None
    except NotFound:
        raise NotFound(argument="continues", op="add_todo") from None


def _usage_totals(raw: dict | None) -> dict | None:
    """get_todo's usage totals: tokens as integers, cost as a number (null: never reported)."""
    if raw is None:
        return None
    return {k: (None if raw.get(k) is None else int(raw[k]) if k != "cost_usd" else float(raw[k]))
            for k in ("input_tokens", "output_tokens", "cost_usd")}


def _continuation(raw: dict) -> dict:
    """A claim's `continues`: the predecessor and its last closed attempt."""
    out = dict(raw)
    if out.get("last_attempt") is not None:
        out["last_attempt"] = _parse_times(dict(out["last_attempt"]))
    return out


def todo_out(row: dict) -> dict:
    """The todo as agents and pages see it (the compact row plus payload and routing)."""
    keys = ("id", "queue", "title", "state", "owner", "attempt", "max_attempts", "lease_expires_at",
            "next_retry_at", "dead_letter", "payload", "routing", "result", "attempts_total",
            "attempts_pruned", "created_at", "updated_at")
    return {k: row[k] for k in keys}


def _list_row(row: dict) -> dict:
    """A list row: the todo, its endpoint, and for a human's list its newest attempt (seq,
    outcome, null while open, claimant, the first 80 characters of its summary on one line
    and whether there was more, and its current interrupt's answered_at, asked_at and
    question_expires_at: liveness.waiting_for_person's), or None before any."""
    out = todo_out(row) | {"endpoint_id": str(row["endpoint_id"])}
    if "last_seq" in row:
        out["last_attempt"] = None if row["last_seq"] is None else {
            "seq": row["last_seq"], "outcome": row["last_outcome"], "claimant": row["last_claimant"],
            "summary": row["last_summary"], "summary_cut": bool(row["last_summary_cut"]),
            "answered_at": row["last_answered_at"], "asked_at": row["last_asked_at"],
            "question_expires_at": row["last_question_expires_at"]}
    return out


# The fields an add_todos item takes (add_todo's arguments).
_ADD_ITEM_FIELDS = frozenset({"queue", "title", "payload", "routing", "max_attempts", "continues"})
# The fields a complete_todos item takes (complete's arguments).
_COMPLETE_ITEM_FIELDS = frozenset({"id", "result", "summary", "artifact", "lease_token", "usage"})

# The statements of board/store/sql/ that each caller runs, where the caller's kind or the verb picks one.
_CLASSIFY = {"agent": query("todo_classify_miss"), "human": query("todo_classify_miss_human")}
_CONTINUES_MISS = {"agent": query("todo_continues_miss"), "human": query("todo_continues_miss_human")}
_GET = {"agent": query("todo_get"), "human": query("todo_get_human")}
_RETRY = {"agent": query("todo_retry"), "human": query("todo_retry_human")}
_LIST = {
    ("agent", "created"): query("todo_list_by_created"), ("agent", "updated"): query("todo_list_by_updated"),
    ("human", "created"): query("todo_list_by_created_human"), ("human", "updated"): query("todo_list_by_updated_human"),
}
_CLOSE_AGENT = {"complete": query("todo_complete"), "fail": query("todo_fail"), "release": query("todo_release")}
# The Board's closes: the owning human is exempt from the fence (REQ-6) and may release,
# fail or cancel any holder's attempt; complete only their own claim.
_CLOSE_HUMAN = {"complete": query("todo_complete_human"), "fail": query("todo_fail_human"),
                "release": query("todo_release_human")}
# complete and cancel close with a fixed outcome and disposition and leave a fixed state, so
# their statements return neither, nor what a close fixes on the todo (filled in by _closed):
# (outcome, disposition, state). tests/integration/test_transition_responses.py holds each
# response to a fresh read.
FIXED_CLOSE = {"complete": ("completed", "done", "done"), "cancel": ("canceled", "canceled", "canceled")}
# The statements that change nothing, so _fetch may run one again on a fresh connection when
# its connection died under it (tests/unit/test_statements.py holds each to a plain SELECT).
READS = frozenset((
    query("todo_get"), query("todo_get_human"), query("todo_continues_miss"), query("todo_continues_miss_human"),
    query("todo_list_by_created"), query("todo_list_by_updated"), query("todo_list_by_created_human"),
    query("todo_list_by_updated_human"), query("todo_list_row_human"), query("todo_classify_miss"),
    query("todo_classify_miss_human"), query("todos_complete_closable"), query("attempt_replay_lookup"),
    query("attempt_answers"), query("todo_answer_choices"), query("user_by_name"), query("user_by_id"),
    query("endpoint_auth"), query("endpoints_of_user"), query("endpoint_owner"),
    query("todos_count_by_queue_state"), query("todos_ready"), query("attempt_summary"), query("queue_pause_state"),
    query("queue_pauses_count"), query("queues_paused_by"), query("overview_counts"), query("overview_outcomes"),
    query("oauth_client_get"), query("oauth_code_get"), query("oauth_refresh_get"), query("oauth_access_get"),
    query("todos_still_pending"), query("watchers_in_flight"), query("watchers_in_flight_left"),
    query("attempt_outcomes_fold_lag"), query("oauth_refresh_repeat"),
))


@dataclass
class Store(Accounts, Grants):
    pool: AsyncConnectionPool
    settings: Settings
    observers: list[Observer] = field(default_factory=list)
    # Called with a control event ({"kind": "endpoint_revoked", "endpoint": id}) once this
    # process's revocation has committed, so its own caches drop the endpoint at once rather
    # than when its notification comes back through LISTEN (other processes' way).
    control_observers: list[Callable[[dict], None]] = field(default_factory=list)
    # A server process's cache of each human's paused queues (board/live/pause_cache.py); None:
    # every claim_next checks queue_pauses itself.
    pauses: Any = None
    _away: bool = field(default=False, init=False, repr=False)  # see _connection

    # -- plumbing --------------------------------------------------------------------

    async def _fetch(self, sql: Query, params: dict, *, op: str, todo_id: str | None = None, one=False):
        """Run one statement as its own transaction: one round trip, since the pool's
        connections are in autocommit and a single statement commits (or rolls back) whole.
        Every transition is one statement that writes nothing when it misses. A read whose
        connection died under it runs once more on a fresh one; a write does not, as it may
        have committed (a fenced close retried by its agent is answered as a replay)."""
        params.setdefault("now", None)
        for attempt in range(3):
            try:
                async with self._connection() as conn:
                    cur = await execute(conn, sql, params)
                    rows = (await cur.fetchone()) if one else (await cur.fetchall())
                self._away = False
                return rows
            except (pgerrors.DeadlockDetected, pgerrors.SerializationFailure) as err:
                if attempt == 2:
                    raise _translate(err, op, todo_id) from None
            except PoolTimeout as err:  # no connection within the bounded wait
                self._away = True
                raise _translate(err, op, todo_id) from None
            except psycopg.OperationalError as err:
                self._away = True
                if attempt > 0 or sql not in READS:
                    raise _translate(err, op, todo_id) from None
            except (psycopg.Error, UnicodeEncodeError) as err:
                raise _translate(err, op, todo_id) from None

    def _connection(self):
        """A pooled connection, waited for at most the pool's bounded wait; while the database
        is known away (the last checkout timed out or a connection failed, and nothing has
        succeeded since), only AWAY_WAIT_SECONDS; never past the call's deadline, so a call
        that makes several checkouts (its authentication, its statement) still answers
        within one bounded wait."""
        timeout = AWAY_WAIT_SECONDS if self._away else None  # None: the pool's own bound
        deadline = _CALL_DEADLINE.get()
        if deadline is not None:
            left = max(deadline - asyncio.get_running_loop().time(), _PAST_DEADLINE_WAIT)
            timeout = left if timeout is None else min(timeout, left)
        return self.pool.connection(timeout=timeout)

    def _emit(self, transitions: Iterable[Transition]) -> None:
        for t in transitions:
            for observer in self.observers:
                try:
                    observer(t)
                except Exception:  # an observer must never break a committed transition
                    log.exception("observer failed for %s of todo %s", t.kind, logs.field(t.todo_id))

    def _params(self, caller: Caller, **extra) -> dict:
        if isinstance(caller, Agent):
            params = {"endpoint_id": caller.endpoint_id, "queues": list(caller.queues), "owner": caller.owner,
                      "user_id": caller.user_id}  # the owning human, whose queue pauses hold
        else:
            params = {"user_id": caller.user_id, "owner": caller.owner}
        params.update(extra)
        params.setdefault("now", None)
        params["hook_urls"] = list(self.settings.hook_urls)
        return params

    async def _classify(self, caller: Caller, todo_id: str, op: str, params: dict) -> SwitchboardError:
        which = "agent" if isinstance(caller, Agent) else "human"
        row = await self._fetch(_CLASSIFY[which], dict(params, id=todo_id), op=op, todo_id=todo_id, one=True)
        if row is None:
            return NotFound(op=op, todo_id=todo_id)
        state = row["state"]
        expected = _HOLDER_OPS.get(op)
        shown = "dead-lettered" if state == "failed" and row["next_retry_at"] is None else state
        if op == "answer":  # the human's answer: missed because the todo stopped waiting
            msg = f"the todo is no longer waiting for an answer (it is {shown.replace('_', ' ')})"
        elif expected and state in expected and row["owner"] == caller.owner and isinstance(caller, Agent):
            # Held by this caller in the right state, yet the statement missed: the fence
            # (REQ-6). Conflict, never Forbidden, which would confirm the fence (REQ-19).
            msg = "the lease does not match this attempt"
        elif expected and state in HOLDER_STATES and row["owner"] != caller.owner:
            msg = "the todo is held by another claimer"
        elif (op == "claim" and isinstance(caller, Agent) and row["paused"]
              and (state == "pending" or (state == "claimed" and row["lapsed"]))):
            msg = f"the queue {row['queue']} is paused; nothing in it can be claimed until it is resumed"
        elif state == "claimed" and op == "claim" and row["lapsed"]:
            msg = "the lease of the todo's last allowed attempt lapsed; the reaper dead-letters it"
        elif state == "claimed" and op == "claim":
            msg = "the todo is claimed and its lease has not lapsed"
        elif op == "note" and state not in HOLDER_STATES:
            msg = f"the todo has no open attempt to note on (it is {shown})"
        else:
            msg = f"the todo is {shown}"
        return Conflict(msg, op=op, todo_id=todo_id)

    def _prior(self, raw) -> list[dict]:
        return [_parse_times(dict(a)) for a in (raw or [])]

    # -- agent verbs -----------------------------------------------------------------

    async def todo_add(self, caller: Caller, *, queue: Any, title: Any, payload: Any = None,
                       routing: Any = None, max_attempts: Any = None, endpoint_id: Any = None,
                       continues: Any = None, now: datetime | None = None) -> dict:
        """-> pending, in a queue the endpoint is granted. A human (the Board) adds through one
        of their live endpoints granted the queue: endpoint_id, or else their oldest one; the
        statement itself picks and checks it. With continues, the new todo continues that todo
        of the caller's, which must have ended and have no successor yet (one statement; a
        continuation of a human's todo goes on that todo's endpoint)."""
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
        params = self._params(
            caller, queue=queue, title=title,
            payload=Jsonb(json_object(payload, "payload")), routing=Jsonb(json_object(routing, "routing")),
            max_attempts=MAX_ATTEMPTS_DEFAULT if max_attempts is None else positive_int(max_attempts, "max_attempts", 1,
                                                                                         MAX_ATTEMPTS_MAX),
            now=now, continues=continues, **({"endpoint_id": endpoint_id} if human else {}),
        )
        if continues is None:
            sql = query("todo_add_human") if human else query("todo_add")
        else:
            sql = query("todo_add_continuing_human") if human else query("todo_add_continuing")
        row = await self._fetch(sql, params, op="add_todo", one=True)
        if row is None and continues is not None:
            raise await self._continues_miss(caller, params, not_granted)
        if row is None:  # the human has no live endpoint granted the queue (or not the one named)
            raise not_granted
        self._emit([Transition("added", row["id"], str(row["endpoint_id"]), row["queue"], row["state"])])
        out = todo_out(row)
        if continues is not None:
            out["continues_id"] = row["continues_id"]
        return out

    async def _continues_miss(self, caller: Caller, params: dict, not_granted: SwitchboardError) -> SwitchboardError:
        """Why a continuation added nothing: the predecessor is not the caller's (NotFound, the
        body of any unknown id), still live, or continued already (Conflict naming the
        successor, the winner of a race included: this read runs after it committed)."""
        which = "agent" if isinstance(caller, Agent) else "human"
        row = await self._fetch(_CONTINUES_MISS[which], params, op="add_todo", todo_id=params["continues"], one=True)
        if row is None:
            return NotFound(argument="continues", op="add_todo", todo_id=params["continues"])
        if row["successor"] is not None:
            return Conflict(f"that todo already has a successor: {row['successor']}", argument="continues",
                            op="add_todo", todo_id=params["continues"])
        if not row["ended"]:
            return Conflict(f"that todo is still live ({row['state']}); only a done, canceled or dead-lettered "
                            "todo can be continued", argument="continues", op="add_todo", todo_id=params["continues"])
        return not_granted  # a human with no live endpoint of the predecessor's granted the queue

    async def todos_add(self, caller: Agent, todos: Any, *, now: datetime | None = None) -> dict:
        """-> pending, up to TODOS_ADD_MAX todos in one statement, all or nothing: every item is
        checked first (an error names it, todos[i].field), then one statement inserts them all
        in the order given, one notification (one doorbell ring) per todo. Items that continue
        a todo run in a transaction rolled back when any predecessor is refused."""
        caller.require("add_todos")
        if not isinstance(todos, list) or not 1 <= len(todos) <= TODOS_ADD_MAX:
            raise Invalid(f"todos must be an array of 1 to {TODOS_ADD_MAX} todos", argument="todos", op="add_todos")
        continuing: dict[str, int] = {}  # predecessor id -> the index of the item continuing it
        items = [self._add_item(caller, i, item, continuing) for i, item in enumerate(todos)]
        params = self._params(caller, todos=Jsonb(items), continues=list(continuing), now=now)
        if not continuing:  # one autocommit statement: it inserts every item or fails whole
            rows = await self._fetch(query("todos_add"), params, op="add_todos")
        else:
            rows = await self._add_all_or_nothing(params, len(items))
            if rows is None:
                raise await self._continuing_miss(caller, params, continuing)
        rows.sort(key=lambda r: r["created_at"])  # created_at steps a microsecond per item
        self._emit([Transition("added", r["id"], str(r["endpoint_id"]), r["queue"], r["state"]) for r in rows])
        out = []
        for row in rows:
            todo = todo_out(row)
            if row["continues_id"] is not None:
                todo["continues_id"] = row["continues_id"]
            out.append(todo)
        return {"todos": out}

    def _add_item(self, caller: Agent, i: int, item: Any, continuing: dict[str, int]) -> dict:
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
        except SwitchboardError as e:
            e.op = "add_todos"
            raise
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
                "max_attempts": max_attempts, "continues": continues}

    async def _add_all_or_nothing(self, params: dict, expected: int) -> list[dict] | None:
        """todos_add in a transaction, committed only when every item was inserted (a
        predecessor refused leaves its item out): the rows, or None after a rollback."""
        rows = None
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    cur = await execute(conn, query("todos_add"), params)
                    rows = await cur.fetchall()
                    if len(rows) != expected:
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

    async def todo_list(self, caller: Caller, *, state: Any = None, queue: Any = None, dead_letter: bool = False,
                        title: Any = None, claimant: Any = None, payload_key: Any = None, payload_value: Any = None,
                        sort: Any = "created", limit: Any = None, cursor: Any = None) -> dict:
        """Read: the caller's todos matching every filter given, newest first by the sort's
        time (created or updated), keyset-paginated; a human's rows carry their newest
        attempt (last_attempt), and a human may sort by any column of the Board's list, either
        way (BOARD_SORTS). Scoped in the same statement (REQ-10)."""
        if isinstance(caller, Agent):
            caller.require("list_todos")
        params = self._params(caller, **list_filters(state=state, queue=queue, dead_letter=dead_letter, title=title,
                                                     claimant=claimant, payload_key=payload_key,
                                                     payload_value=payload_value))
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
        which = "agent" if isinstance(caller, Agent) else "human"
        row = await self._fetch(_GET[which], self._params(caller, id=todo_id, attempts_limit=limit, chain_max=CHAIN_MAX,
                                                             notes_limit=notes),
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
        out["chain"] = row["chain"]["links"]
        out["chain_truncated"] = row["chain"]["truncated"]
        out["usage"] = _usage_totals(row["usage"])
        if isinstance(caller, Human):
            out["endpoint_id"] = str(row["endpoint_id"])
        return out

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

    def _lease(self, lease_seconds: Any) -> float:
        if lease_seconds is None:
            return float(self.settings.lease_seconds)
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not (
                1 <= lease_seconds <= self.settings.lease_seconds_max):
            raise Invalid(f"lease_seconds must be a number from 1 to {self.settings.lease_seconds_max:g}",
                          argument="lease_seconds")
        return float(lease_seconds)

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

    async def _fenced(self, caller: Agent, sql: Query, params: dict, lease_token: Any,
                      *, op: str, todo_id: str, from_states: Iterable[str]):
        """Run a holder transition under REQ-6. With a lease_token: lock the todo, compare the
        token's hash with the open attempt's in constant time, then run the transition in the
        same transaction with token_checked. Without one: the statement itself requires an
        unfenced attempt (token_checked false)."""
        if lease_token is None:
            return await self._fetch(sql, dict(params, token_checked=False), op=op, todo_id=todo_id, one=True)
        if not isinstance(lease_token, str):
            raise Invalid("lease_token must be a string", argument="lease_token", op=op, todo_id=todo_id)
        storable(lease_token, "lease_token")
        presented = hash_token(lease_token)
        params = dict(params, from_states=list(from_states), token_checked=True)
        try:
            async with self._connection() as conn:
                async with conn.transaction():
                    cur = await execute(conn, query("attempt_fence_lookup"), params)
                    found = await cur.fetchone()
                    if found is None:
                        return None
                    stored = found["lease_token_hash"]
                    if stored is None or not hmac.compare_digest(bytes(stored), presented):
                        raise Conflict("the lease does not match this attempt", op=op, todo_id=todo_id)
                    cur = await execute(conn, sql, params)
                    return await cur.fetchone()
        except (psycopg.Error, UnicodeEncodeError) as err:
            raise _translate(err, op, todo_id) from None

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
                     lease_token=None, usage=None, now=None) -> dict:
        todo_id = checked_todo_id(todo_id)
        inputs = self._closing(summary, artifact, result, with_result=kind in ("complete", "fail"), op=kind,
                               todo_id=todo_id)
        try:
            usage = clean_usage(usage)
        except SwitchboardError as e:
            e.op, e.todo_id = kind, todo_id
            raise
        reported = {k: v for k, v in usage.items() if v is not None}
        if reported and not isinstance(caller, Agent):  # the Board's closes report none
            raise Invalid("usage is reported by an agent's closing call", argument="usage", op=kind, todo_id=todo_id)
        if isinstance(caller, Agent):  # an agent's close sets what it reported (nulls: nothing)
            inputs.update(usage)
        params = self._params(caller, id=todo_id, **inputs, now=now,
                              retry_base=self.settings.retry_base_seconds, retry_max=self.settings.retry_max_seconds)
        if isinstance(caller, Agent):
            caller.require(kind)
            params["from_states"] = ["claimed"]
            if lease_token is None:  # the statement itself requires an unfenced attempt
                row = await self._fetch(_CLOSE_AGENT[kind], dict(params, token_checked=False), op=kind,
                                        todo_id=todo_id, one=True)
            else:
                try:
                    row = await self._fenced(caller, _CLOSE_AGENT[kind], params,
                                             lease_token, op=kind, todo_id=todo_id, from_states=["claimed"])
                except Conflict:  # the token no longer holds the open attempt: it may have closed it
                    row = None
                if row is None:
                    replayed = await self._replay(caller, kind, todo_id, lease_token, params)
                    if replayed is not None:
                        return replayed
        else:
            params["from_states"] = ["claimed"] if kind == "complete" else list(HOLDER_STATES)
            row = await self._fetch(_CLOSE_HUMAN[kind], params, op=kind, todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, kind, params)
        return self._closed(kind, todo_id, row, usage=reported or None)

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
                               dead_letter=row["dead_letter"], closed=closed, attempts_total=row["attempts_total"]),))
        out = todo_out(row)
        out["closed_attempt"] = {"seq": closed["seq"], "attempt": closed["attempt"], "outcome": outcome,
                                 "disposition": closed["disposition"], "died": closed["died"]}
        return out

    async def todo_complete(self, caller: Caller, todo_id: Any, *, result=None, summary=None, artifact=None,
                            lease_token=None, usage=None, now=None) -> dict:
        """claimed -> done; closes the attempt completed/done (with the usage reported)."""
        return await self._close(caller, "complete", todo_id, result=result, summary=summary, artifact=artifact,
                                 lease_token=lease_token, usage=usage, now=now)

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

    async def todo_fail(self, caller: Caller, todo_id: Any, *, result=None, summary=None, artifact=None,
                        lease_token=None, usage=None, now=None) -> dict:
        """claimed -> failed with a retry, or a dead letter at the cap; closes failed/..."""
        return await self._close(caller, "fail", todo_id, result=result, summary=summary, artifact=artifact,
                                 lease_token=lease_token, usage=usage, now=now)

    async def todo_release(self, caller: Caller, todo_id: Any, *, summary=None, artifact=None, lease_token=None,
                           usage=None, now=None) -> dict:
        """claimed -> pending, attempt counter unchanged; closes released/requeued (REQ-9)."""
        return await self._close(caller, "release", todo_id, summary=summary, artifact=artifact,
                                 lease_token=lease_token, usage=usage, now=now)

    async def todo_heartbeat(self, caller: Agent, todo_id: Any, *, lease_token=None, lease_seconds=None,
                             now=None) -> dict:
        """claimed -> claimed with the lease extended, on the todo and its attempt (REQ-4)."""
        caller.require("heartbeat")
        todo_id = checked_todo_id(todo_id)
        params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,
                              from_states=["claimed"])
        row = await self._fenced(caller, query("todo_heartbeat"), params, lease_token,
                                 op="heartbeat", todo_id=todo_id, from_states=["claimed"])
        if row is None:
            raise await self._classify(caller, todo_id, "heartbeat", params)
        self._emit([Transition("lease_extended", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todo_note(self, caller: Caller, todo_id: Any, *, text: Any, lease_token: Any = None,
                        now: datetime | None = None) -> dict:
        """held -> held: a note appended to the open attempt (the lease is not extended; the
        note is activity for liveness). An agent notes on its own attempt, fenced as heartbeat
        is (REQ-6); the owning human on any open attempt of theirs (author_kind owner). Past
        the per-attempt cap the oldest notes are deleted and counted, in the same statement."""
        agent = isinstance(caller, Agent)
        if agent:
            caller.require("note")
        todo_id = checked_todo_id(todo_id)
        try:
            text, truncated = clean_note(text, NOTE_MAX_BYTES)
        except Invalid as e:
            e.op, e.todo_id = "note", todo_id
            raise
        params = self._params(caller, id=todo_id, text=text, truncated=truncated, now=now,
                              notes_max=max(1, int(self.settings.attempt_notes_max)),
                              from_states=list(HOLDER_STATES))
        if agent:
            row = await self._fenced(caller, query("attempt_note_add"), params, lease_token, op="note",
                                     todo_id=todo_id, from_states=HOLDER_STATES)
        else:
            row = await self._fetch(query("attempt_note_add_human"), params, op="note", todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "note", params)
        return {"id": row["id"], "attempt_seq": row["seq"], "notes_count": row["notes_count"],
                "notes_pruned": row["notes_pruned"],
                "note": {"at": row["at"], "text": text, "truncated": truncated,
                         "author_kind": "endpoint" if agent else "owner", "kind": "working"}}

    async def todo_interrupt(self, caller: Agent, todo_id: Any, *, state: Any = "input_required", lease_token=None,
                             question: Any = None, choices: Any = None, expires_in_seconds: Any = None,
                             now=None) -> dict:
        """claimed -> input_required | auth_required; the attempt stays open (REQ-2). A
        question (with choices and an expiry) is written on the attempt as a note of kind
        question in the same statement, with the hook event that asks for a person."""
        caller.require("interrupt")
        todo_id = checked_todo_id(todo_id)
        if state not in INTERRUPT_STATES:
            raise Invalid("state must be input_required or auth_required", argument="state", op="interrupt")
        try:
            asked = clean_question(question, choices, expires_in_seconds)
        except Invalid as e:
            e.op, e.todo_id = "interrupt", todo_id
            raise
        if asked["choices"] is not None:
            asked["choices"] = Jsonb(asked["choices"])
        params = self._params(caller, id=todo_id, from_states=["claimed"], to_state=state, now=now,
                              public_url=self.settings.public_url, **asked)
        row = await self._fenced(caller, query("todo_interrupt"), params, lease_token,
                                 op="interrupt", todo_id=todo_id, from_states=["claimed"])
        if row is None:
            raise await self._classify(caller, todo_id, "interrupt", params)
        self._emit([Transition("interrupted", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        out = todo_out(row)
        if asked["question"] is not None:
            out["question"] = {"text": asked["question"], "truncated": asked["question_truncated"],
                               "choices": choices and list(asked["choices"].obj),
                               "expires_at": row["question_expires_at"]}
        return out

    async def todo_resume(self, caller: Agent, todo_id: Any, *, lease_token=None, lease_seconds=None,
                          now=None) -> dict:
        """input_required | auth_required -> claimed with a fresh lease; the same attempt.
        Returns the answers given since the interrupt (answers: text, choice, who, at)."""
        caller.require("resume")
        todo_id = checked_todo_id(todo_id)
        params = self._params(caller, id=todo_id, from_states=list(INTERRUPT_STATES), to_state="claimed",
                              lease_seconds=self._lease(lease_seconds), now=now)
        row = await self._fenced(caller, query("todo_resume"), params, lease_token,
                                 op="resume", todo_id=todo_id, from_states=INTERRUPT_STATES)
        if row is None:
            raise await self._classify(caller, todo_id, "resume", params)
        self._emit([Transition("resumed", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        seq, after, upto = row.pop("seq"), row.pop("waiting_n"), row.pop("notes_count")
        answers = [] if after is None or not upto else await self._fetch(
            query("attempt_answers"), {"id": todo_id, "seq": seq, "after": after, "upto": upto}, op="resume",
            todo_id=todo_id)
        out = todo_out(row)
        out["answers"] = [dict(a) for a in answers]
        return out

    async def todo_answer(self, caller: Human, todo_id: Any, *, text: Any = None, choice: Any = None,
                          asked: Any = None, now: datetime | None = None) -> dict:
        """The owning human answers an interrupted todo: a note of kind answer on its open
        attempt (text, or one of the question's choices, or both), written only while the
        todo is still interrupted and, with asked (the question key the answer was given for,
        "" for none), only while that question is the one waiting. The holder gets a fresh
        lease to resume in; its sessions are rung. Refused: a todo no longer interrupted
        (Conflict), another question waiting than the one answered (Conflict naming asked), a
        choice the question does not offer (Invalid), a todo not the human's (NotFound)."""
        todo_id = checked_todo_id(todo_id)
        try:
            fenced, asked_at = answer_fence(asked)
            if choice is not None:
                if not isinstance(choice, str):
                    raise Invalid("choice must be a string", argument="choice")
                choice = clean_choice(choice)
            if text is None or (isinstance(text, str) and not text.strip() and choice is not None):
                if choice is None:
                    raise Invalid("an answer needs text or a choice", argument="text")
                text = choice
            text, truncated = clean_note(text, NOTE_MAX_BYTES)
        except Invalid as e:
            e.op, e.todo_id = "answer", todo_id
            raise
        params = self._params(caller, id=todo_id, text=text, truncated=truncated, choice=choice, now=now,
                              username=caller.username, lease_seconds=float(self.settings.lease_seconds),
                              from_states=list(INTERRUPT_STATES), fenced=fenced, asked_at=asked_at)
        row = await self._fetch(query("todo_answer_human"), params, op="answer", todo_id=todo_id, one=True)
        if row is None:
            if choice is not None or fenced:
                waiting = await self._fetch(query("todo_answer_choices"), params, op="answer", todo_id=todo_id,
                                            one=True)
                if waiting is not None and fenced and waiting["asked_at"] != asked_at:
                    raise Conflict("the agent asked something else since this answer was written: read the "
                                   "question waiting now and answer that", argument="asked", op="answer",
                                   todo_id=todo_id)
                if waiting is not None and choice is not None:
                    offered = waiting["choices"]
                    if not offered:
                        raise Invalid("this question offers no choices; answer with text", argument="choice",
                                      op="answer", todo_id=todo_id)
                    raise Invalid("choice must be one of the question's choices: " + ", ".join(offered),
                                  argument="choice", op="answer", todo_id=todo_id)
            raise await self._classify(caller, todo_id, "answer", params)
        waited = (row["at"] - row["asked_at"]).total_seconds() if row["first"] and row["asked_at"] else None
        self._emit([Transition("answered", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["seq"], waited_seconds=waited)])
        return {"id": row["id"], "attempt_seq": row["seq"],
                "answer": {"n": row["n"], "at": row["at"], "text": text, "truncated": truncated, "choice": choice,
                           "who": caller.username}}

    async def todo_cancel(self, caller: Caller, todo_id: Any, *, now=None) -> dict:
        """pending, held, or failed awaiting retry -> canceled; a held todo's attempt closes
        canceled/canceled."""
        todo_id = checked_todo_id(todo_id)
        agent = isinstance(caller, Agent)
        if agent:
            caller.require("cancel")
        params = self._params(caller, id=todo_id, summary=None, summary_truncated=False, artifact=None,
                              from_states=list(HOLDER_STATES), now=now)
        row = await self._fetch(query("todo_cancel_held") if agent else query("todo_cancel_held_human"), params,
                                op="cancel", todo_id=todo_id, one=True)
        if row is not None:
            return self._closed("cancel", todo_id, row)
        row = await self._fetch(query("todo_cancel_unheld") if agent else query("todo_cancel_unheld_human"), params, op="cancel",
                                todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "cancel", params)
        self._emit([Transition("canceled", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todo_retry(self, caller: Caller, todo_id: Any, *, now=None) -> dict:
        """Manual retry: dead letter -> pending with attempt = 0; every attempt kept (REQ-12)."""
        todo_id = checked_todo_id(todo_id)
        which = "agent" if isinstance(caller, Agent) else "human"
        params = self._params(caller, id=todo_id, now=now)
        row = await self._fetch(_RETRY[which], params, op="retry", todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "retry", params)
        self._emit([Transition("retried", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todos_bulk(self, caller: Human, kind: str, todo_ids: Iterable[str], *, batch: int = BULK_BATCH,
                         concurrency: int = BULK_CONCURRENCY) -> dict:
        """A Board bulk action: the single action's own transition (todo_retry, todo_cancel or
        todo_release) for each todo, so each gets its attempt record, hook events and notify,
        in batches of `batch` with at most `concurrency` statements in flight. A todo whose
        state moved on (Conflict) or that is not the caller's (NotFound) is skipped, never an
        error. If the database goes away, the batch under way finishes and the rest is not
        tried. A bulk delete is todos_delete, one statement a batch. Returns the counts:
        changed, skipped, not_tried."""
        if not isinstance(caller, Human):
            raise Forbidden("bulk actions are the Board's", op=f"bulk_{kind}")
        ids = list(dict.fromkeys(todo_ids))
        if kind == "delete":
            return await self._bulk_delete(caller, ids, batch)
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
        rest is not tried."""
        counts = {"changed": 0, "skipped": 0, "not_tried": 0}
        for start in range(0, len(ids), batch):
            try:
                done = await self.todos_delete(caller, ids[start:start + batch])
            except Unavailable:
                counts["not_tried"] = len(ids) - start
                break
            counts["changed"] += len(done["deleted"])
            counts["skipped"] += len(done["skipped"])
        return counts

    async def todos_delete(self, caller: Human, todo_ids: Iterable[Any]) -> dict:
        """The owning human deletes ended todos of theirs (done, canceled, dead letters) by
        id, in one statement that locks them first: their attempts and notes go with them
        (cascade), and so do the successor links to and from them. Any other id (another
        human's, a todo that has not ended, an unknown one, or no id at all) is left alone
        and reported skipped, never an error that stops the rest. Nothing is counted here:
        the counters and outcome counts moved when each attempt closed, and stay.
        Returns {"deleted": [the todos deleted], "skipped": [the ids left alone]}."""
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
        return {"deleted": deleted, "skipped": skipped}

    # -- sweeps ------------------------------------------------------------------------

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

    # -- presence (board/live/presence.py): who this process has live listeners for ----------

    async def watchers_hold(self, process: str, users: list[int], ttl_seconds: float) -> list[int]:
        """Records or renews the process's row for each human; returns those whose row was
        added rather than renewed (absent until now)."""
        rows = await self._fetch(query("watchers_hold"), {"process": process, "users": users,
                                                          "ttl_seconds": ttl_seconds}, op="presence")
        return [r["user_id"] for r in rows if r["added"]]

    async def watchers_drop(self, process: str, users: list[int]) -> None:
        await self._fetch(query("watchers_drop"), {"process": process, "users": users}, op="presence")

    async def watchers_expire(self) -> None:
        await self._fetch(query("watchers_expire"), {}, op="presence")

    async def watchers_in_flight(self) -> list[str]:
        """The other transactions that may have checked watchers before now (by virtual id)."""
        row = await self._fetch(query("watchers_in_flight"), {}, op="presence", one=True)
        return list(row["vxids"])

    async def watchers_in_flight_left(self, vxids: list[str]) -> int:
        row = await self._fetch(query("watchers_in_flight_left"), {"vxids": vxids}, op="presence", one=True)
        return row["n"]

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
        return len(rows)

    # -- aggregate and sweep reads ---------------------------------------------------------

    async def queue_state_counts(self) -> list[dict]:
        """Aggregates only, for /metrics."""
        return await self._fetch(query("todos_count_by_queue_state"), {}, op="metrics")

    async def schema_ready(self, known_version: int, *, timeout: float) -> bool:
        """Readiness (/readyz): Postgres answered within `timeout` seconds (the wait for a
        pooled connection included) and the newest migration applied is at least
        known_version. A database that cannot be reached or answers too late is not ready."""
        try:
            async with asyncio.timeout(timeout):
                async with self.pool.connection(timeout=timeout) as conn:
                    row = await (await execute(conn, query("schema_version"))).fetchone()
        except (psycopg.Error, TimeoutError):  # a PoolTimeout is a psycopg.Error
            return False
        return row["version"] >= known_version

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

    async def queue_paused_counts(self) -> list[dict]:
        """Aggregates only, for /metrics: how many humans paused each queue."""
        return await self._fetch(query("queue_pauses_count"), {}, op="metrics")

    async def queues_paused_by(self, user_id: int) -> frozenset[str]:
        """Read, for the pause cache: the queues this human has paused."""
        rows = await self._fetch(query("queues_paused_by"), {"user_id": user_id}, op="claim_next")
        return frozenset(r["queue"] for r in rows)

    # -- queues: pause, resume, the overview (a human's own, scoped in each statement) -----

    def _queue_name(self, queue: Any, op: str) -> str:
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"queue must be {QUEUE_RULE}", argument="queue", op=op)
        return queue

    async def queue_pause(self, caller: Human, queue: Any, *, now: datetime | None = None) -> dict:
        """A queue of the human's endpoints -> paused: agents claim nothing in it until it is
        resumed. Pausing a paused queue changes nothing (changed: false)."""
        queue = self._queue_name(queue, "queue_pause")
        params = {"user_id": caller.user_id, "queue": queue, "now": now}
        row = await self._fetch(query("queue_pause"), params, op="queue_pause", one=True)
        if self.pauses is not None:  # here at once; other processes on its notification
            self.pauses.forget(caller.user_id)
        if row is not None:
            return {"queue": queue, "paused_at": row["paused_at"], "changed": True}
        state = await self._fetch(query("queue_pause_state"), params, op="queue_pause", one=True)
        if state["paused_at"] is None and not state["known"]:
            raise NotFound("no endpoint of this user is granted that queue", argument="queue", op="queue_pause")
        return {"queue": queue, "paused_at": state["paused_at"], "changed": False}

    async def queue_resume(self, caller: Human, queue: Any) -> dict:
        """paused -> resumed; the doorbell rings the queue's ready todos (queue_resumed).
        Resuming a queue that is not paused changes nothing (changed: false)."""
        queue = self._queue_name(queue, "queue_resume")
        params = {"user_id": caller.user_id, "queue": queue}
        row = await self._fetch(query("queue_resume"), params, op="queue_resume", one=True)
        if self.pauses is not None:
            self.pauses.forget(caller.user_id)
        if row is not None:
            return {"queue": queue, "paused_at": None, "changed": True}
        state = await self._fetch(query("queue_pause_state"), params, op="queue_resume", one=True)
        if not state["known"]:
            raise NotFound("no endpoint of this user is granted that queue", argument="queue", op="queue_resume")
        return {"queue": queue, "paused_at": None, "changed": False}

    async def queue_overview(self, caller: Human) -> list[dict]:
        """Read: each of the human's queues with its todos counted by state and its pause."""
        return await self._fetch(query("overview_counts"), {"user_id": caller.user_id}, op="overview")

    async def queue_outcomes(self, caller: Human, *, buckets: int, bucket_seconds: int,
                             now: datetime | None = None) -> list[dict]:
        """Read: attempts of the human's todos closed in the last `buckets` buckets of
        bucket_seconds (a multiple of five minutes, aligned to UTC), counted by queue, outcome
        and bucket (0: the one holding now), from the counts each close wrote."""
        return await self._fetch(query("overview_outcomes"), {"user_id": caller.user_id, "now": now,
                                                          "buckets": buckets,
                                                          "bucket_seconds": bucket_seconds}, op="overview")

    async def todo_attempt_summary(self, todo_id: str) -> dict | None:
        """The exact attempt summary (counts by outcome, recent tokens, omitted), or None."""
        row = await self._fetch(query("attempt_summary"), {"id": todo_id}, op="attempt_summary", one=True)
        return row["summary"] if row else None

    # -- hook outbox ---------------------------------------------------------------------

    async def hook_events_lease(self, *, limit: int = 20, lease_seconds: float = 30.0) -> list[dict]:
        """Due hook events, leased to this process for lease_seconds."""
        return await self._fetch(query("hook_events_lease"), {"limit": limit, "lease_seconds": lease_seconds}, op="hooks")

    async def hook_event_delivered(self, event_id: str) -> None:
        await self._fetch(query("hook_event_delivered"), {"id": event_id}, op="hooks")

    async def hook_event_retry(self, event_id: str, *, delay: float, error: str) -> None:
        await self._fetch(query("hook_event_retry_later"), {"id": event_id, "delay": delay, "error": error[:200]}, op="hooks")
