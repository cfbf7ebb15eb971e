"""The store's plumbing, shared by every part of it (board/store/store.py composes them):
one statement run as its own transaction (_fetch), the pooled checkout bounded by the call's
deadline (_connection, call_deadline), driver errors turned into domain errors in one place
(_translate), the transitions handed to observers (_emit), each caller's parameters
(_params), a missed transition classified (_classify), the fence of a holder's transition
(_fenced) and the row shapes every verb returns (todo_out).

Each transition is a compare-and-set written as one statement of data-modifying CTEs:
the todo row is locked first (always todo before attempt, so transitions never deadlock),
the open attempt is closed and/or a new one opened in the same statement, and the statement
calls pg_notify, which Postgres delivers only at commit. A statement that touches no row is
re-read once to classify the miss: absent or foreign is NotFound, present in the wrong
state is Conflict (REQ-19). Nothing outside the store catches psycopg errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hmac
import inspect
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Protocol

import psycopg
from psycopg import errors as pgerrors
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from board import logs
from board.config import Settings
from board.errors import Conflict, Forbidden, Internal, Invalid, NotFound, SwitchboardError, Unavailable
from board.store.inputs import hash_token, storable
from board.store.queries import Query, execute, query
from board.store.vocabulary import (
    AGENT_ID_MAX_CHARS,
    HOLDER_STATES,
    INTERRUPT_STATES,
    KEY_MAX_BYTES,
    MAX_ATTEMPTS_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_LIMIT_MAX,
    QUEUE_RULE,
    TITLE_MAX_CHARS,
    USERNAME_MAX_CHARS,
    Agent,
    Caller,
    Human,
    Observer,
    Transition,
)

log = logging.getLogger("switchboard.store")

# The holder verbs and the states each one acts on (for classifying a miss).
_HOLDER_OPS = {op: ("claimed",) for op in ("heartbeat", "complete", "fail", "release", "interrupt")} | {
    "resume": INTERRUPT_STATES, "note": HOLDER_STATES}


# How long a checkout waits while the database is known away (Store._connection).
AWAY_WAIT_SECONDS = 0.5
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
    "todos_max_attempts_check": lambda: Invalid(f"max_attempts must be from 1 to {MAX_ATTEMPTS_MAX}",
                                                argument="max_attempts"),
    "users_username_key": lambda: Conflict("that username is taken", argument="username"),
    "users_username_check": lambda: Invalid(f"username must be 1-{USERNAME_MAX_CHARS} of letters, digits, _ . @ -",
                                            argument="username"),
    "endpoints_agent_id_check": lambda: Invalid(
        f"agent_id must be 1-{AGENT_ID_MAX_CHARS} of letters, digits, _ . : / -", argument="agent_id"),
    "attempts_one_open_per_todo": lambda: Conflict("the todo already has an open attempt"),
    "todos_endpoint_id_fkey": lambda: NotFound("no such endpoint"),
    "todos_one_successor": lambda: Conflict("the todo it continues already has a successor", argument="continues"),
    "todos_continues_fixed": lambda: Conflict("a todo's continues never changes", argument="continues"),
    "endpoints_user_id_fkey": lambda: NotFound("no such user"),
    "endpoints_one_live_grant": lambda: Conflict("the person already has a live grant of this client"),
    "endpoints_one_live_team_grant": lambda: Conflict("the team already has a live grant of this client and agent id"),
    "todos_priority_check": lambda: Invalid(f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}",
                                            argument="priority"),
    "todos_key_check": lambda: Invalid(f"key must be a string of 1 to {KEY_MAX_BYTES} bytes", argument="key"),
    # a retried todo whose key another live todo took meanwhile
    "todos_live_key": lambda: Conflict("another live todo of this queue has the same key; it must end first",
                                       argument="key"),
    "queue_limits_max_held_check": lambda: Invalid(f"the limit must be an integer from 0 to {QUEUE_LIMIT_MAX}",
                                                   argument="limit"),
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


# -- rows as every part returns them ------------------------------------------------------

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


def todo_out(row: dict) -> dict:
    """The todo as agents and pages see it (the compact row plus payload and routing)."""
    keys = ("id", "queue", "title", "state", "owner", "attempt", "max_attempts", "lease_expires_at",
            "next_retry_at", "dead_letter", "payload", "routing", "result", "attempts_total",
            "attempts_pruned", "created_at", "updated_at", "priority", "run_at", "key", "schedule_id", "waiting")
    return {k: row[k] for k in keys} | {"after": row["after"] or []}


# -- who did what (migration 0018) ---------------------------------------------------

@dataclass
class Acting:
    """A person's action under way: what the record of actions writes, in the transaction of
    the first statement of the action that takes effect (never for one refused or missed)."""

    human: Human
    action: str
    todo_id: str | None = None
    queue: str | None = None
    detail: dict = field(default_factory=dict)
    took: Callable[[Any], bool] = bool  # whether a statement's result is the change
    written: bool = False

    def params(self, result: Any) -> dict:
        rows = result if isinstance(result, list) else [result]
        ids = [self.todo_id] if self.todo_id is not None else [
            r.get("id") for r in rows if isinstance(r, dict) and isinstance(r.get("id"), str)] or [None]
        queues = [self.queue or next((r.get("queue") for r in rows if isinstance(r, dict) and r.get("id") == i), None)
                  for i in ids]
        h = self.human
        # no actor: the command line acting in a space as no one in particular (no name)
        actor = None if h.via == "cli" and not h.username else h.actor
        return {"space_id": h.user_id, "actor_id": actor,
                "actor_name": h.username or None, "action": self.action, "todo_ids": ids, "queues": queues,
                "detail": Jsonb(self.detail), "source": h.via, "space_name": h.space_name}


_ACTING: contextvars.ContextVar[Acting | None] = contextvars.ContextVar("switchboard_acting", default=None)

ROLE_WORDS = {"operator": "act on todos", "admin": "manage this team"}


def acts(action: str, role: str = "operator", *, todo: str | None = "todo_id", queue: str | None = None,
         detail: tuple[str, ...] = (), took: Callable[[Any], bool] = bool):
    """A store verb a person may call in a space: refused (Forbidden, nothing run) unless
    their role there is at least `role`, and recorded as `action` with the first statement
    that takes effect. The verb's first argument is the caller; an Agent is neither checked
    here (its scope is) nor recorded. todo/queue/detail name the verb's arguments the record
    keeps; a record of a verb that changes many todos has one row per todo."""

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        async def run(self, caller, *args, **kwargs):
            # the person: the first argument, or user_id (a verb keyed by the space's user)
            person = caller if isinstance(caller, Human) else kwargs.get("user_id")
            if not isinstance(person, Human) or _ACTING.get() is not None:
                return await fn(self, caller, *args, **kwargs)
            if not person.may(role):
                raise Forbidden(f"a {person.role} of {person.space_name or 'this space'} may not "
                                f"{ROLE_WORDS.get(role, action)}", op=action)
            got = dict(sig.bind_partial(self, caller, *args, **kwargs).arguments)
            for p in sig.parameters.values():
                if p.kind is p.VAR_KEYWORD:
                    got.update(got.pop(p.name, None) or {})
            todo_id = got.get(todo) if todo else None
            acting = Acting(person, action, todo_id=todo_id if isinstance(todo_id, str) else None,
                            queue=got.get(queue) if queue and isinstance(got.get(queue), str) else None,
                            detail={k: got[k] for k in detail if got.get(k) is not None and
                                    isinstance(got[k], (str, int, float, bool))}, took=took)
            token = _ACTING.set(acting)
            try:
                return await fn(self, caller, *args, **kwargs)
            finally:
                _ACTING.reset(token)

        run.acts = (action, role)
        return run

    return wrap


def space_user(space: "int | Human | None") -> int | None:
    """The user id of a space given as a person acting in it or as the id itself."""
    return space.user_id if isinstance(space, Human) else space


def acting() -> Acting | None:
    """The person's action under way in this task, if any (the record's context)."""
    return _ACTING.get()


# The statements that change nothing, so _fetch may run one again on a fresh connection when
# its connection died under it (tests/unit/test_statements.py holds each to a plain SELECT).
READS = frozenset((
    query("todo_get"), query("todo_continues_miss"),
    query("todo_list_by_created"), query("todo_list_by_updated"), query("todo_list_by_created_human"),
    query("todo_list_by_updated_human"), query("todo_list_row_human"), query("todo_classify_miss"),
    query("todos_complete_closable"), query("attempt_replay_lookup"),
    query("attempt_answers"), query("todo_answer_choices"), query("user_by_name"), query("user_by_id"),
    query("endpoint_auth"), query("endpoints_of_user"), query("endpoint_owner"),
    query("todos_count_by_queue_state"), query("todos_ready"), query("attempt_summary"), query("queue_pause_state"),
    query("queue_pauses_count"), query("queues_paused_by"), query("overview_counts"), query("overview_outcomes"),
    query("oauth_client_get"), query("oauth_code_get"), query("oauth_refresh_get"), query("oauth_access_get"),
    query("todos_still_pending"), query("watchers_in_flight"), query("watchers_in_flight_left"),
    query("attempt_outcomes_fold_lag"), query("oauth_refresh_repeat"), query("todo_by_key"),
    query("todo_add_human_endpoint"), query("todos_next_due"), query("queue_limits_held"), query("todos_in_scope"), query("todos_waiters"),
    query("todos_waiting_by_queue"), query("todos_waiting_count_human"),
))


class PausedQueues(Protocol):
    """What the store asks of a server process's cache of each human's paused queues
    (board/live/pause_cache.py's PauseCache)."""

    async def paused_queues(self, user_id: int) -> frozenset[str] | None:
        """The human's paused queues, or None when the cache cannot vouch for them."""

    def forget(self, user_id: int) -> None:
        """This human's pauses changed."""


@dataclass
class StoreBase:
    pool: AsyncConnectionPool
    settings: Settings
    observers: list[Observer] = field(default_factory=list)
    # Called with a control event ({"kind": "endpoint_revoked", "endpoint": id}) once this
    # process's revocation has committed, so its own caches drop the endpoint at once rather
    # than when its notification comes back through LISTEN (other processes' way).
    control_observers: list[Callable[[dict], None]] = field(default_factory=list)
    # A server process's cache of each human's paused queues (board/live/pause_cache.py); None:
    # every claim_next checks queue_pauses itself. The cache is made from the store (it reads
    # queues_paused_by), so a server process hands it over once both exist: use_pause_cache.
    pauses: PausedQueues | None = None
    # The current call's W3C traceparent, recorded on each attempt a claim opens so that its
    # span, emitted at its close, continues the claim's trace (board/ops/tracing.py); None:
    # tracing is off, and a claim records none.
    trace_context: Callable[[], str | None] | None = None
    _away: bool = field(default=False, init=False, repr=False)  # see _connection

    # -- plumbing --------------------------------------------------------------------

    async def _fetch(self, sql: Query, params: dict, *, op: str, todo_id: str | None = None, one=False):
        """Run one statement as its own transaction: one round trip, since the pool's
        connections are in autocommit and a single statement commits (or rolls back) whole.
        Every transition is one statement that writes nothing when it misses. A read whose
        connection died under it runs once more on a fresh one; a write does not, as it may
        have committed (a fenced close retried by its agent is answered as a replay)."""
        params.setdefault("now", None)
        record = _ACTING.get()
        if record is not None and (record.written or sql in READS):
            record = None
        for attempt in range(3):
            try:
                async with self._connection() as conn:
                    if record is None:
                        cur = await execute(conn, sql, params)
                        rows = (await cur.fetchone()) if one else (await cur.fetchall())
                    else:  # a person's action: the change and its record commit together
                        async with conn.transaction():
                            cur = await execute(conn, sql, params)
                            rows = (await cur.fetchone()) if one else (await cur.fetchall())
                            wrote = await self._record(conn, record, rows)
                        record.written = wrote  # committed
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

    async def _record(self, conn, record: Acting, result: Any) -> bool:
        """Write a person's action in the transaction of the statement whose result is
        `result`, when that result is the change (a miss records nothing)."""
        if record.written or not record.took(result):
            return False
        await execute(conn, query("audit_insert"), record.params(result) | {"now": None})
        return True

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
            # endpoint_id: the todos' endpoint, the team's space endpoint for a team endpoint
            # (migration 0018); claimer_id: this endpoint, which an attempt names
            params = {"endpoint_id": caller.space, "claimer_id": caller.endpoint_id, "queues": list(caller.queues),
                      "owner": caller.owner, "user_id": caller.user_id}  # the space, whose queue pauses hold
        else:
            # a person in a space: no endpoint, every queue (migration 0014's caller rules)
            params = {"endpoint_id": None, "claimer_id": None, "queues": None, "user_id": caller.user_id,
                      "owner": caller.owner}
        params.update(extra)
        params.setdefault("now", None)
        params["hook_urls"] = list(self.settings.hook_urls)
        return params

    async def _classify(self, caller: Caller, todo_id: str, op: str, params: dict) -> SwitchboardError:
        row = await self._fetch(query("todo_classify_miss"), dict(params, id=todo_id), op=op, todo_id=todo_id, one=True)
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
        elif op == "claim" and state == "pending" and row["waiting_for"]:
            named = ", ".join(f"{d['id']} ({'dead-lettered' if d['dead_letter'] else d['state']})"
                              for d in row["waiting_for"])
            msg = f"the todo waits for {row['waits']} todo(s) to be done first: {named}"
        elif op == "claim" and state == "pending" and row["scheduled"]:
            msg = f"the todo is scheduled to start at {row['run_at'].isoformat()}; it cannot be claimed before then"
        elif op == "claim" and state == "pending" and row["room"] is not None and row["room"] <= 0:
            msg = (f"the queue {row['queue']} is at its limit of {row['max_held']} held todos; "
                   "one must end or be released first")
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

    def _lease(self, lease_seconds: Any) -> float:
        if lease_seconds is None:
            return float(self.settings.lease_seconds)
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not (
                1 <= lease_seconds <= self.settings.lease_seconds_max):
            raise Invalid(f"lease_seconds must be a number from 1 to {self.settings.lease_seconds_max:g}",
                          argument="lease_seconds")
        return float(lease_seconds)

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

    def use_pause_cache(self, pauses: PausedQueues) -> None:
        """Hand the store its process's pause cache (board/app.py, once the cache is made from
        this store); from then on claim_next asks it which queues are paused."""
        if self.pauses is not None and self.pauses is not pauses:
            raise RuntimeError("the store already has a pause cache")
        self.pauses = pauses
