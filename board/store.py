"""The one transactional store module: every statement that reads or changes todos,
attempts, users and endpoints.

Each transition is a compare-and-set written as one statement of data-modifying CTEs:
the todo row is locked first (always todo before attempt, so transitions never deadlock),
the open attempt is closed and/or a new one opened in the same statement, and the statement
calls pg_notify, which Postgres delivers only at commit. A statement that touches no row is
re-read once to classify the miss: absent or foreign is NotFound, present in the wrong
state is Conflict (REQ-19). Nothing outside this module catches psycopg errors.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import secrets
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

import psycopg
from psycopg import errors as pgerrors
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from board.config import Settings
from board.errors import Conflict, Forbidden, Invalid, NotFound, SwitchboardError
from board.vocabulary import (  # noqa: F401 (the vocabulary is re-exported for the store's callers)
    ARTIFACT_MAX_BYTES,
    ATTEMPTS_LIMIT_DEFAULT,
    ATTEMPTS_LIMIT_MAX,
    CLAIMANT_MAX_BYTES,
    CLOSED_BY,
    DIED_OUTCOMES,
    HOLDER_STATES,
    INTERRUPT_STATES,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    NOTIFY_CHANNEL,
    PRIOR_ATTEMPTS,
    QUEUE_PATTERN,
    QUEUE_RULE,
    RESULT_MAX_BYTES,
    SUMMARY_MAX_BYTES,
    SWEEP_BATCH,
    VERBS,
)

log = logging.getLogger("switchboard.store")

# The holder verbs and the states each one acts on (for classifying a miss).
_HOLDER_OPS = {op: ("claimed",) for op in ("heartbeat", "complete", "fail", "release", "interrupt")} | {
    "resume": ("input_required", "auth_required")}


_CAIRN_ARTIFACT = re.compile(r"mcp://cairn/[A-Za-z0-9_-]{1,64}")
_AGENT_ID = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
_USERNAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


# -- callers -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Agent:
    """An endpoint credential calling over MCP. Its reads are scoped to its own todos in
    its granted queues (ADR-0022); its claims write owner = agent:<agent_id>."""

    endpoint_id: str
    agent_id: str
    user_id: int
    scope: frozenset[str]
    queues: tuple[str, ...]
    session_id: str | None = None

    @property
    def owner(self) -> str:
        return f"agent:{self.agent_id}"

    def allows(self, verb: str) -> bool:
        if verb == "get_todo":  # REQ-8: an endpoint that may list may read one
            return "get_todo" in self.scope or "list_todos" in self.scope
        return verb in self.scope

    def require(self, verb: str) -> None:
        if not self.allows(verb):
            raise Forbidden(f"this endpoint's scope does not grant {verb}", op=verb)

    def on_session(self, session_id: str | None) -> "Agent":
        return Agent(self.endpoint_id, self.agent_id, self.user_id, self.scope, self.queues, session_id)


@dataclass(frozen=True)
class Human:
    """A signed-in human on the Board: sees the todos of the endpoints they own, and is
    exempt from the fence (REQ-6)."""

    user_id: int
    username: str

    @property
    def owner(self) -> str:
        return f"human:{self.user_id}"


Caller = Agent | Human


# -- committed-transition events ---------------------------------------------------------

@dataclass(frozen=True)
class Transition:
    """One committed transition, handed to observers after commit (metrics, hooks, the
    doorbell). Carries the closing attempt when one closed. Never logged."""

    kind: str  # one of vocabulary.TRANSITION_KINDS
    todo_id: str
    endpoint_id: str
    queue: str
    state: str
    dead_letter: bool = False
    closed: dict | None = None
    attempts_total: int = 0
    opened_seq: int | None = None


Observer = Callable[[Transition], Any]


# -- input shaping (REQ-5) ---------------------------------------------------------------

def cut_utf8(text: str, limit: int) -> tuple[str, bool]:
    """Cut text to at most limit UTF-8 bytes without splitting a character."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode("utf-8", "ignore"), True


def _no_nul(value: str, argument: str) -> None:
    if "\x00" in value:
        raise Invalid(f"{argument} must not contain NUL characters", argument=argument)


def clean_claimant(claimant: Any) -> str | None:
    if claimant is None:
        return None
    if not isinstance(claimant, str):
        raise Invalid("claimant must be a string", argument="claimant")
    stripped = "".join(ch for ch in claimant if unicodedata.category(ch) != "Cc")
    return cut_utf8(stripped, CLAIMANT_MAX_BYTES)[0]


def clean_artifact(artifact: Any) -> str | None:
    if artifact is None:
        return None
    if not isinstance(artifact, str):
        raise Invalid("artifact must be a string", argument="artifact")
    if len(artifact.encode("utf-8")) > ARTIFACT_MAX_BYTES:
        raise Invalid(f"artifact must be at most {ARTIFACT_MAX_BYTES} bytes", argument="artifact")
    if _CAIRN_ARTIFACT.fullmatch(artifact) or is_https_url(artifact):
        return artifact
    raise Invalid(
        "artifact must be mcp://cairn/<id> (letters, digits, _ or -, at most 64) or an absolute https URL",
        argument="artifact",
    )


def is_https_url(value: str) -> bool:
    if any(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # raises on a malformed port
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and value.lower().startswith("https://")


def _json_value(value: Any, argument: str) -> Any:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise Invalid(f"{argument} must be JSON", argument=argument) from None
    if "\\u0000" in text:
        raise Invalid(f"{argument} must not contain NUL characters", argument=argument)
    if len(text.encode("utf-8")) > RESULT_MAX_BYTES:
        raise Invalid(f"{argument} must be at most {RESULT_MAX_BYTES} bytes of JSON", argument=argument)
    return value


def _json_object(value: Any, argument: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{argument} must be a JSON object", argument=argument)
    return _json_value(value, argument)


def _positive_int(value: Any, argument: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Invalid(f"{argument} must be an integer from {lo} to {hi}", argument=argument)
    return value


def _todo_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("id must be a non-empty string", argument="id")
    return value


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


# -- SQL -------------------------------------------------------------------------------
# {NOW} is the injectable clock: tests pass now= to move time without sleeping.
NOW = "coalesce(%(now)s::timestamptz, now())"

# An open attempt is found by its primary key (todo_id, seq = the todo's attempts_total) and
# tested with "outcome IS NULL", which is the same as "ended_at IS NULL" because every
# statement here sets ended_at, outcome and disposition together (the attempts' rules, held
# by this module, tests/integration/test_attempt_invariants.py). Phrased
# on ended_at, the test would let the planner walk the whole partial index behind
# attempts_one_open_per_todo (every open attempt, and every dead entry of the ones closed
# since the last vacuum) instead of one primary-key probe; the plan test in
# tests/integration/test_plans.py holds every statement to keyed lookups.
_AGENT_SCOPE = "t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)"
_HUMAN_SCOPE = "t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)"

_TODO_COLUMNS = {
    "id": "{r}.id", "endpoint_id": "{r}.endpoint_id", "queue": "{r}.queue", "title": "{r}.title",
    "state": "{r}.state::text AS state", "owner": "{r}.owner", "attempt": "{r}.attempt",
    "max_attempts": "{r}.max_attempts", "lease_expires_at": "{r}.lease_expires_at",
    "next_retry_at": "{r}.next_retry_at",
    "dead_letter": "({r}.state = 'failed' AND {r}.next_retry_at IS NULL) AS dead_letter",
    "payload": "{r}.payload", "routing": "{r}.routing", "result": "{r}.result",
    "attempts_total": "{r}.attempts_total", "attempts_pruned": "{r}.attempts_pruned",
    "created_at": "{r}.created_at", "updated_at": "{r}.updated_at",
}
_TODO_COLS = ", ".join(_TODO_COLUMNS.values())


def _todo_cols(r: str, known: Iterable[str] = ()) -> str:
    """The todo's columns of row r, less those the transition itself fixes (known)."""
    return ", ".join(expr for name, expr in _TODO_COLUMNS.items() if name not in known).format(r=r)


# What a claim and the lean closes (complete, cancel) fix on the todo, so their statements
# need not return it: every column sent costs the server an output conversion and the
# client a parse (a timestamp costs most). The store fills these in from the transition.
# The rules of the todos_consistent trigger make them so: a claimed todo has a holder and no
# retry time; a done or canceled one has neither holder, lease nor retry time.
CLAIM_KNOWN = ("state", "owner", "next_retry_at", "dead_letter")
CLOSE_KNOWN = ("id", "state", "owner", "lease_expires_at", "next_retry_at", "dead_letter")

_NOTIFY = """pg_notify('""" + NOTIFY_CHANNEL + """', json_build_object(
  'todo', {r}.id, 'endpoint', {r}.endpoint_id, 'queue', {r}.queue, 'state', {r}.state,
  'kind', {kind})::text)"""


def _sql(text: str, **parts: str) -> str:
    return text.replace("{NOW}", NOW).format(**parts)


HOOK_RECENT = 10

# The exact attempt summary (seed 002's idea): per-outcome counts over the whole history
# (live rows plus the counts pruning folded into pruned_outcomes), the most recent attempts
# as outcome tokens, and how many were left out. {closing} overrides the outcome of the
# attempt the same statement closes, which that statement's snapshot still sees open.
_SUMMARY = """jsonb_build_object(
  'total', {r}.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{{}}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = {r}.id AND a.outcome IS NOT NULL {not_closing} GROUP BY 1
        {closing_count}
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text({r}.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT {outcome} AS outcome) o
       WHERE a.todo_id = {r}.id ORDER BY a.seq DESC LIMIT """ + str(HOOK_RECENT) + """) x),
  'omitted', greatest({r}.attempts_total - least({r}.attempts_total - {r}.attempts_pruned, """ + str(HOOK_RECENT) + """), 0))"""


def _summary(r: str, c: str | None) -> str:
    if c is None:
        return _SUMMARY.format(r=r, not_closing="", closing_count="", outcome="a.outcome::text")
    return _SUMMARY.format(
        r=r, not_closing=f"AND a.seq <> {c}.seq", closing_count=f"UNION ALL SELECT {c}.outcome::text, 1",
        outcome=f"CASE WHEN a.seq = {c}.seq THEN {c}.outcome::text ELSE a.outcome::text END")


# Durable notify hooks: one hook_events row per configured URL when a transition makes a
# todo ready or dead-letters it, in the same statement. With no URLs configured the cross
# join is empty and nothing is written. A dead letter carries its closing attempt and the
# exact summary (REQ-15).
def _outbox(r: str, c: str | None) -> str:
    dead = "'{}'::jsonb" if c is None else f"""jsonb_build_object(
      'attempt', jsonb_build_object('seq', {c}.seq, 'attempt', {c}.attempt, 'outcome', {c}.outcome,
        'died', {c}.outcome IN ('lease_expired', 'reaped'), 'summary', {c}.summary, 'artifact', {c}.artifact),
      'attempts', {_summary(r, c)})"""
    join = "" if c is None else f"JOIN closed {c} ON {c}.todo_id = {r}.id"
    return f"""outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, {r}.id,
         jsonb_build_object('event', ev.event, 'occurred_at', {NOW},
           'todo', jsonb_build_object('id', {r}.id, 'queue', {r}.queue, 'title', {r}.title, 'state', {r}.state,
             'attempt', {r}.attempt, 'max_attempts', {r}.max_attempts, 'attempts_total', {r}.attempts_total,
             'endpoint_id', {r}.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN {dead} ELSE '{{}}'::jsonb END
    FROM upd {r} {join}
    CROSS JOIN LATERAL (SELECT CASE
        WHEN {r}.state = 'pending' THEN 'todo.ready'
        WHEN {r}.state = 'failed' AND {r}.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)""".replace("{{}}", "{}")


# -- claim: pending -> claimed, or claimed (lease lapsed) -> claimed (takeover); opens one
# attempt; a takeover first closes the lapsed attempt lease_expired/requeued; prunes the
# oldest closed attempts past the per-todo cap (REQ-2, REQ-3, REQ-11).
# Opening an attempt (REQ-2): one row per committed claim, seq = the todo's new attempts_total,
# written by the same statement as the todos update it records. Shared by both claim paths:
# the full path opens it from the updated todo ({src} upd), the fast path from the locked
# candidate ({src} cand) before the todos update, which is then the statement's last step.
_LEASE = "{NOW} + %(lease_seconds)s * interval '1 second'"
_OPEN_ATTEMPT = """ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT {src}.id, {seq}, {attempt}, {claimer}, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, {NOW},
         {lease}, %(token_hash)s::bytea
    FROM {src} {where}
  RETURNING todo_id, seq
)"""
_OPEN_FROM_UPD = _OPEN_ATTEMPT.format(src="upd", seq="upd.attempts_total", attempt="upd.attempt",
                                      lease="upd.lease_expires_at", where="", NOW="{NOW}", claimer="{claimer}")
_OPEN_FROM_CAND = _OPEN_ATTEMPT.format(
    src="cand", seq="cand.prev_total + 1", attempt="cand.prev_attempt + 1", lease=_LEASE, NOW="{NOW}",
    where="WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s", claimer="{claimer}")
# claimer_kind and claimer_endpoint_id follow from who may run the statement: an agent's
# statements record its endpoint (the endpoint_id its scope filter already binds), the
# Board's record the owner and no endpoint (REQ-1).
_CLAIMER = {
    _AGENT_SCOPE: "'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid",
    _HUMAN_SCOPE: "'owner'::attempt_claimer_kind, NULL::uuid",
}

_CLAIM = """
WITH {cand},
lapsed AS (
  UPDATE attempts a
     SET ended_at = {NOW}, outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_public(a) AS public
),
pruned AS (
  DELETE FROM attempts a USING cand
   WHERE cand.prev_total >= %(history_max)s
     AND a.todo_id = cand.id AND a.seq <= cand.prev_total + 1 - %(history_max)s
     AND a.ended_at IS NOT NULL
  RETURNING a.seq, a.outcome
),
upd AS (
  UPDATE todos t
     SET state = 'claimed', owner = %(owner)s,
         lease_expires_at = {NOW} + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned GROUP BY 1) p), '{{}}') END,
         updated_at = {NOW}
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
{open_attempt}
SELECT {todo_cols},
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public(a) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT {prior})
          ) y ORDER BY y.seq DESC LIMIT {prior}) x) END AS prior_attempts,
       {notify}
  FROM upd, ins
"""


# By id: the one row, pending or with a lapsed lease (a primary-key lookup).
_CAND_BY_ID = """cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.id = %(id)s
     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= {NOW}
                                  AND t.attempt < t.max_attempts))
   FOR UPDATE OF t
)"""

# claim_next: the oldest pending todo, else a lapsed lease to take over (REQ-3; the reaper
# returns the rest to pending soon anyway). A lapsed lease on a todo's last allowed attempt
# is never taken over: the reaper dead-letters it, whoever looks first. Two locking scans, because one with an OR could
# not use the pending-only index and would walk every finished row; the lapsed scan runs
# only when no pending todo was found.
_CAND_NEXT = """lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.queue = ANY(%(claim_queues)s) AND t.state = 'claimed' AND t.lease_expires_at <= {NOW}
     AND t.attempt < t.max_attempts
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.queue = ANY(%(claim_queues)s) AND t.state = 'pending'
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
cand AS (
  SELECT * FROM pending_cand
  UNION ALL
  SELECT * FROM lapsed_cand WHERE NOT EXISTS (SELECT 1 FROM pending_cand)
)"""


def _claim_sql(scope: str, by_id: bool) -> str:
    cand = (_CAND_BY_ID if by_id else _CAND_NEXT).replace("{scope}", scope)
    return _sql(
        _CLAIM,
        cand=cand,
        open_attempt=_OPEN_FROM_UPD.replace("{claimer}", _CLAIMER[scope]),
        todo_cols=_todo_cols("upd", CLAIM_KNOWN),
        prior=PRIOR_ATTEMPTS,
        notify=_NOTIFY.format(r="upd", kind="'claimed'"),
    ).replace("{NOW}", NOW)


# The fast path of a claim, taken first: a pending todo whose history needs no pruning.
# Only the attempt insert joins the todos update; the takeover and pruning work of the full
# statement above runs only when this one finds nothing (a lapsed lease, a capped history,
# or nothing pending at all).
_CLAIM_FAST = """
WITH {cand},
{open_attempt}
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s, lease_expires_at = {lease},
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1, updated_at = {NOW}
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING {todo_cols},
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, {prior}) END AS prior_attempts,
       {notify}
"""
# The todos update is the statement itself, not a CTE: its RETURNING is the response, with
# no whole-row copy through a CTE. The prior
# attempts come from the SQL function attempt_prior, called only for a todo
# claimed before: as a sub-select, the executor set the query up on every claim, used or not.

_PENDING_BY_ID = """cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.id = %(id)s AND t.state = 'pending'
   FOR UPDATE OF t
)"""


def _claim_fast_sql(scope: str, by_id: bool) -> str:
    if by_id:
        cand = _PENDING_BY_ID
    else:  # the pending scan of claim_next alone
        cand = _CAND_NEXT[_CAND_NEXT.index("pending_cand AS ("):_CAND_NEXT.index("cand AS (\n  SELECT * FROM")]
        cand = cand.replace("pending_cand AS (", "cand AS (").rstrip().rstrip(",")
    return _sql(
        _CLAIM_FAST, cand=cand.replace("{scope}", scope),
        open_attempt=_OPEN_FROM_CAND.replace("{claimer}", _CLAIMER[scope]), lease=_LEASE,
        todo_cols=_todo_cols("t", CLAIM_KNOWN),
        prior=PRIOR_ATTEMPTS,
        notify=_NOTIFY.format(r="t", kind="'claimed'"),
    ).replace("{NOW}", NOW)


SQL_CLAIM_NEXT_FAST = _claim_fast_sql(_AGENT_SCOPE, by_id=False)
SQL_CLAIM_BY_AGENT_FAST = _claim_fast_sql(_AGENT_SCOPE, by_id=True)
SQL_CLAIM_BY_HUMAN_FAST = _claim_fast_sql(_HUMAN_SCOPE, by_id=True)

SQL_CLAIM_NEXT = _claim_sql(_AGENT_SCOPE, by_id=False)
SQL_CLAIM_BY_AGENT = _claim_sql(_AGENT_SCOPE, by_id=True)
SQL_CLAIM_BY_HUMAN = _claim_sql(_HUMAN_SCOPE, by_id=True)


# -- closing a lease: claimed (or interrupted) -> {next state}; closes the open attempt with
# {outcome}/{disposition} in the same statement (REQ-3). {fence} narrows the owner check.
# Every close takes the todo's row lock first (todo before attempt, as everywhere), closes
# the open attempt, and updates the todo only if the attempt closed: a miss (the fence, the
# wrong state or holder, an attempt closed since this statement's snapshot) writes nothing,
# so no close needs a rollback, and each is one statement, one round trip.
# fail and release write hook events, which need the updated row, so their todos update is
# a CTE (upd) feeding the outbox:
_CLOSE = """
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) {owner}
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = {NOW}, outcome = {outcome}, disposition = {disposition},
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL {fence}
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET {todo_set}, updated_at = {NOW}
    FROM closed c
   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) {owner}
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, {closed_cols}, {notify}
  FROM upd JOIN closed c ON true
"""
# The state test is "= ANY(%(from_states)s)", a parameter, even where one state is meant: a
# literal 'claimed' would let a generic plan reach the row through todos_claimed_idx (every
# claimed todo of the endpoint) instead of the primary key.

# The closed attempt as plain columns (closed_attempt, ...): cheaper on both ends than a JSON
# row, and only the columns the todo does not already tell: the closed seq is the todo's
# attempts_total (a close closes that attempt and leaves the counter), and complete and
# cancel close with a fixed outcome and disposition. What the attempt reported (summary,
# artifact) comes back only from fail and release, whose hook events can carry it (a dead
# letter, REQ-15).
def _closed_cols(kind: str) -> tuple[str, ...]:
    return ("attempt",) if kind in NO_OUTBOX_KINDS else ("attempt", "outcome", "disposition", "summary", "artifact")

_RETRY_AT = (
    "CASE WHEN t.attempt < t.max_attempts THEN {NOW} + least(%(retry_max)s::float8, "
    "%(retry_base)s::float8 * power(2, least(t.attempt - 1, 30))) * (0.5 + random() * 0.5) "
    "* interval '1 second' END"
)
_FAIL_DISPOSITION = (  # l: the locked todo, before the update (fail leaves its attempt counter as it is)
    "(CASE WHEN l.attempt < l.max_attempts THEN 'retry_scheduled' ELSE 'dead_lettered' END)::attempt_disposition"
)

CLOSE_KINDS = {
    # claimed -> done; closes the open attempt completed/done
    "complete": dict(
        outcome="'completed'", disposition="'done'",
        todo_set="state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s",
    ),
    # claimed -> failed (retry scheduled or dead letter); closes failed/retry_scheduled|dead_lettered
    "fail": dict(
        outcome="'failed'", disposition=_FAIL_DISPOSITION,
        todo_set="state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, "
        "next_retry_at = " + _RETRY_AT,
    ),
    # claimed -> pending, owner and lease cleared, attempt unchanged; closes released/requeued
    "release": dict(
        outcome="'released'", disposition="'requeued'",
        todo_set="state = 'pending', owner = NULL, lease_expires_at = NULL",
    ),
    # claimed or interrupted -> canceled; closes canceled/canceled
    "cancel": dict(
        outcome="'canceled'", disposition="'canceled'",
        todo_set="state = 'canceled', owner = NULL, lease_expires_at = NULL",
    ),
}


# complete and cancel write no hook events, so their todos update can be the statement
# itself, with no whole-row copy through a CTE: a locking sub-select takes the todo first and
# yields the open attempt's seq, the attempt closes, and the todo updates only if it did.
NO_OUTBOX_KINDS = frozenset({"complete", "cancel"})
# Their outcome, disposition and the todo's state after are fixed, so the statement need not
# return them (with the rest of CLOSE_KNOWN).
# tests/integration/test_transition_responses.py holds each response to a fresh read.
FIXED_CLOSE = {"complete": ("completed", "done", "done"), "cancel": ("canceled", "canceled", "canceled")}
_CLOSE_LEAN = """
WITH closed AS (
  UPDATE attempts a
     SET ended_at = {NOW}, outcome = {outcome}, disposition = {disposition},
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) {owner}
                   FOR UPDATE OF t)
     AND a.outcome IS NULL {fence}
  RETURNING a.attempt
)
UPDATE todos t SET {todo_set}, updated_at = {NOW}
  FROM closed c
 WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) {owner}
RETURNING {todo_cols}, {closed_cols}, {notify}
"""


def _close_sql(kind: str, scope: str, owner: bool, fence: bool) -> str:
    spec = CLOSE_KINDS[kind]
    lean = kind in NO_OUTBOX_KINDS
    row = "t" if lean else "upd"
    return _sql(
        _CLOSE_LEAN if lean else _CLOSE,
        scope=scope,
        owner="AND t.owner = %(owner)s" if owner else "",
        fence="AND a.lease_token_hash IS NULL" if fence else "",
        outcome=spec["outcome"] + "::attempt_outcome",
        disposition=spec["disposition"] if "CASE" in spec["disposition"] else spec["disposition"] + "::attempt_disposition",
        todo_set=spec["todo_set"].replace("{NOW}", NOW),
        todo_cols=_todo_cols(row, CLOSE_KNOWN if lean else ()),
        closed_cols=", ".join(f"c.{k} AS closed_{k}" for k in _closed_cols(kind)),
        notify=_NOTIFY.format(r=row, kind=f"'{CLOSED_BY[kind]}'"),
        outbox="" if lean else _outbox("u", "c"),
    ).replace("{NOW}", NOW)


# A holder statement comes in two variants. UNFENCED: the caller gave no lease token, so the
# statement itself requires an attempt claimed without a fence. TOKEN_CHECKED: the store
# has just compared the caller's token with the open attempt's, in the same transaction,
# with the todo locked (Store._fenced), so the statement adds no fence guard.
UNFENCED = "unfenced"
TOKEN_CHECKED = "token_checked"
_FENCE_GUARD = {UNFENCED: "AND a.lease_token_hash IS NULL", TOKEN_CHECKED: ""}

# Agent statements: the owner check always, the fence guard when UNFENCED.
SQL_CLOSE_AGENT = {
    (kind, mode): _close_sql(kind, _AGENT_SCOPE, owner=True, fence=mode == UNFENCED)
    for kind in ("complete", "fail", "release")
    for mode in (UNFENCED, TOKEN_CHECKED)
}
SQL_CANCEL_HELD_AGENT = _close_sql("cancel", _AGENT_SCOPE, owner=False, fence=False)
# Human statements (the Board): the owning human is exempt from the fence (REQ-6) and may
# release, fail or cancel any holder's attempt; complete only their own claim.
SQL_CLOSE_HUMAN = {
    "complete": _close_sql("complete", _HUMAN_SCOPE, owner=True, fence=False),
    "fail": _close_sql("fail", _HUMAN_SCOPE, owner=False, fence=False),
    "release": _close_sql("release", _HUMAN_SCOPE, owner=False, fence=False),
    "cancel": _close_sql("cancel", _HUMAN_SCOPE, owner=False, fence=False),
}

# -- heartbeat: claimed -> claimed; extends the lease on the todo and sets the open
# attempt's last_heartbeat_at and lease_expires_at in the same statement (REQ-4).
_HEARTBEAT = """
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
hb AS (
  UPDATE attempts a
     SET last_heartbeat_at = {NOW}, lease_expires_at = {NOW} + %(lease_seconds)s * interval '1 second'
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL {fence}
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET lease_expires_at = hb.lease_expires_at, updated_at = {NOW}
    FROM hb WHERE t.id = hb.todo_id
  RETURNING t.*
)
SELECT {todo_cols}, {notify} FROM upd
"""
SQL_HEARTBEAT = {
    mode: _sql(
        _HEARTBEAT, scope=_AGENT_SCOPE, fence=_FENCE_GUARD[mode],
        todo_cols=_TODO_COLS.format(r="upd"), notify=_NOTIFY.format(r="upd", kind="'lease_extended'"),
    )
    for mode in (UNFENCED, TOKEN_CHECKED)
}

# -- interrupt: claimed -> input_required | auth_required; resume: back to claimed with a
# fresh lease. The attempt stays open across both (REQ-2); resume refreshes its lease.
_INTERRUPT = """
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce({lease}, a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL {fence}
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at, updated_at = {NOW}
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT {todo_cols}, {notify} FROM upd
"""
# Keyed by (verb, fence mode); resume sets a fresh lease, interrupt keeps the lease as it is.
SQL_INTERRUPT = {
    (verb, mode): _sql(
        _INTERRUPT, scope=_AGENT_SCOPE,
        lease="{NOW} + %(lease_seconds)s * interval '1 second'" if verb == "resume" else "NULL::timestamptz",
        fence=_FENCE_GUARD[mode],
        todo_cols=_TODO_COLS.format(r="upd"),
        notify=_NOTIFY.format(r="upd", kind="'resumed'" if verb == "resume" else "'interrupted'"),
    ).replace("{NOW}", NOW)
    for verb in ("interrupt", "resume")
    for mode in (UNFENCED, TOKEN_CHECKED)
}

# -- cancel with no lease: pending, or failed waiting for a retry -> canceled. No attempt.
_CANCEL_UNHELD = """
UPDATE todos t SET state = 'canceled', next_retry_at = NULL, updated_at = {NOW}
 WHERE t.id = %(id)s AND {scope}
   AND (t.state = 'pending' OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))
RETURNING {todo_cols}, {notify}
"""
SQL_CANCEL_UNHELD = {
    name: _sql(_CANCEL_UNHELD, scope=scope, todo_cols=_TODO_COLS.format(r="t"),
               notify=_NOTIFY.format(r="t", kind="'canceled'"))
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# -- manual retry: dead letter -> pending, attempt counter reset; history kept (REQ-12).
_RETRY = """
WITH upd AS (
  UPDATE todos t SET state = 'pending', attempt = 0, next_retry_at = NULL, updated_at = {NOW}
   WHERE t.id = %(id)s AND {scope} AND t.state = 'failed' AND t.next_retry_at IS NULL
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, {notify} FROM upd
"""
SQL_RETRY = {
    name: _sql(_RETRY, scope=scope, todo_cols=_TODO_COLS.format(r="upd"),
               notify=_NOTIFY.format(r="upd", kind="'retried'"), outbox=_outbox("u", None)).replace("{NOW}", NOW)
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# -- add: -> pending
SQL_ADD = _sql("""
WITH upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, routing, max_attempts, created_at, updated_at)
  VALUES (%(endpoint_id)s, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, {NOW}, {NOW})
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, {notify} FROM upd
""", todo_cols=_TODO_COLS.format(r="upd"), notify=_NOTIFY.format(r="upd", kind="'added'"),
   outbox=_outbox("u", None)).replace("{NOW}", NOW)

# -- the fence lookup: the open attempt's lease_token_hash, with the todo row locked, so the
# constant-time comparison happens in Python before the transition statement runs.
SQL_FENCE_LOOKUP = _sql("""
SELECT a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
 FOR UPDATE OF t
""", scope=_AGENT_SCOPE)

# -- reads, each filtered by the owner scope in the same statement (REQ-10)
_GET = """
SELECT {todo_cols}, t.pruned_outcomes,
       (SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT a.seq, attempt_public(a) AS j FROM attempts a
           WHERE a.todo_id = t.id ORDER BY a.seq DESC LIMIT %(attempts_limit)s) x) AS attempts,
       (SELECT coalesce(json_object_agg(o.outcome, o.n), '{{}}'::json) FROM (
          SELECT a.outcome::text AS outcome, count(*) AS n FROM attempts a
           WHERE a.todo_id = t.id AND a.outcome IS NOT NULL GROUP BY 1) o) AS live_outcomes
  FROM todos t
 WHERE t.id = %(id)s AND {scope}
"""
SQL_GET = {
    name: _sql(_GET, scope=scope, todo_cols=_TODO_COLS.format(r="t"))
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

_LIST_FILTERS = """
   AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(after_created)s::timestamptz IS NULL OR (t.created_at, t.id) < (%(after_created)s, %(after_id)s::text))
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s"""
# A human's todos span their endpoints: the newest page of each endpoint (walking its
# (endpoint_id, created_at DESC, id) index), then the newest of those, so a page never
# sorts the whole history.
SQL_LIST = {
    "agent": _sql("SELECT {todo_cols} FROM todos t WHERE {scope}" + _LIST_FILTERS,
                  scope=_AGENT_SCOPE, todo_cols=_TODO_COLS.format(r="t")),
    "human": _sql("""
SELECT {todo_cols}
  FROM endpoints e CROSS JOIN LATERAL (
    SELECT t.* FROM todos t WHERE t.endpoint_id = e.id""" + _LIST_FILTERS + """) t
 WHERE e.user_id = %(user_id)s
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s""", todo_cols=_TODO_COLS.format(r="t")),
}

# Classify a miss: the todo as the caller may see it, or nothing (REQ-19).
SQL_CLASSIFY = {
    name: f"SELECT t.state::text AS state, t.owner, t.lease_expires_at <= {NOW} AS lapsed, "
    "t.next_retry_at FROM todos t WHERE t.id = %(id)s AND " + scope
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# -- sweeps: system-wide, no caller scope, read nothing out (REQ-10)

# reaper: claimed, lease lapsed -> pending (attempt < max) or failed dead letter; closes
# reaped/requeued or reaped/dead_lettered. SKIP LOCKED: safe with several processes.
SQL_REAP = _sql("""
WITH cand AS (
  SELECT t.id, t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.state = 'claimed' AND t.lease_expires_at <= {NOW}
   ORDER BY t.lease_expires_at
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
closed AS (
  UPDATE attempts a
     SET ended_at = {NOW}, outcome = 'reaped',
         disposition = CASE WHEN cand.attempt < cand.max_attempts THEN 'requeued' ELSE 'dead_lettered' END::attempt_disposition
    FROM cand
   WHERE a.todo_id = cand.id AND a.seq = cand.attempts_total AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.summary_truncated, a.artifact, a.claimant
),
upd AS (
  UPDATE todos t
     SET state = CASE WHEN closed.disposition = 'requeued' THEN 'pending' ELSE 'failed' END::todo_state,
         owner = NULL, lease_expires_at = NULL, next_retry_at = NULL, updated_at = {NOW}
    FROM closed WHERE t.id = closed.todo_id
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, row_to_json(closed) AS closed, {notify}
  FROM upd JOIN closed ON closed.todo_id = upd.id
""", todo_cols=_TODO_COLS.format(r="upd"), notify=_NOTIFY.format(r="upd", kind="'reaped'"),
   outbox=_outbox("u", "c")).replace("{NOW}", NOW)

# retry scheduler: failed with next_retry_at <= now -> pending. Closes and opens nothing.
SQL_RETRY_DUE = _sql("""
WITH due AS (
  SELECT t.id FROM todos t
   WHERE t.state = 'failed' AND t.next_retry_at <= {NOW}
   ORDER BY t.next_retry_at LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
upd AS (
  UPDATE todos t SET state = 'pending', next_retry_at = NULL, updated_at = {NOW}
    FROM due WHERE t.id = due.id
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, {notify} FROM upd
""", todo_cols=_TODO_COLS.format(r="upd"), notify=_NOTIFY.format(r="upd", kind="'requeued'"),
   outbox=_outbox("u", None)).replace("{NOW}", NOW)

# retention: terminal todos older than the bound are deleted; attempts cascade (REQ-11).
# Live todos (pending, held, failed with a retry window) are never touched.
SQL_RETENTION = _sql("""
WITH old AS (
  SELECT t.id FROM todos t
   WHERE t.updated_at < {NOW} - %(retention_seconds)s * interval '1 second'
     AND (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM todos t USING old WHERE t.id = old.id
RETURNING t.id, t.endpoint_id, t.queue, {notify}
""", notify=_NOTIFY.format(r="t", kind="'deleted'"))

# endpoint revocation: the endpoint is revoked, and each of its held todos -> failed dead
# letter, closing the open attempt revoked/dead_lettered. System-wide within the endpoint.
SQL_REVOKE = _sql("""
WITH ep AS (
  UPDATE endpoints SET revoked_at = {NOW}
   WHERE id = %(endpoint_id)s AND revoked_at IS NULL AND (%(user_id)s::bigint IS NULL OR user_id = %(user_id)s)
  RETURNING id
),
cand AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND EXISTS (SELECT 1 FROM ep)
     AND t.state IN ('claimed', 'input_required', 'auth_required')
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a SET ended_at = {NOW}, outcome = 'revoked', disposition = 'dead_lettered'
    FROM cand
   WHERE a.todo_id = cand.id AND a.seq = cand.attempts_total AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.summary_truncated, a.artifact, a.claimant
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, next_retry_at = NULL,
                     updated_at = {NOW}
    FROM closed WHERE t.id = closed.todo_id
  RETURNING t.*
),
{outbox}
SELECT (SELECT count(*) FROM ep) AS revoked,
       -- every process drops the endpoint from its cache of authenticated tokens
       (SELECT pg_notify('""" + NOTIFY_CHANNEL + """', json_build_object('kind', 'endpoint_revoked', 'endpoint', ep.id)::text)
          FROM ep) AS revoked_notice,
       coalesce((SELECT json_agg(json_build_object(
          'todo', {todo_json}, 'closed', row_to_json(c), 'n', {notify}))
         FROM upd JOIN closed c ON c.todo_id = upd.id), '[]'::json) AS todos
""", todo_json="row_to_json(upd)", notify=_NOTIFY.format(r="upd", kind="'revoked'"),
   outbox=_outbox("u", "c")).replace("{NOW}", NOW)

# -- users and endpoints
SQL_USER_INSERT = "INSERT INTO users (username, password_hash) VALUES (%(username)s, %(password_hash)s) RETURNING id, username"
SQL_USER_BY_NAME = "SELECT id, username, password_hash FROM users WHERE username = %(username)s"
SQL_USER_BY_ID = "SELECT id, username FROM users WHERE id = %(id)s"
SQL_ENDPOINT_INSERT = """
INSERT INTO endpoints (user_id, name, agent_id, token_hash, scope, queues)
VALUES (%(user_id)s, %(name)s, %(agent_id)s, %(token_hash)s, %(scope)s, %(queues)s)
RETURNING id::text, user_id, name, agent_id, scope, queues, created_at
"""
SQL_ENDPOINT_AUTH = """
SELECT id::text AS id, user_id, agent_id, scope, queues,
       (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') AS stale_use
  FROM endpoints WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
"""
SQL_ENDPOINT_TOUCH = "UPDATE endpoints SET last_used_at = now() WHERE id = %(id)s RETURNING id"
SQL_ENDPOINTS_OF_USER = """
SELECT id::text AS id, name, agent_id, scope, queues, created_at, last_used_at, revoked_at
  FROM endpoints WHERE user_id = %(user_id)s ORDER BY created_at DESC
"""
SQL_ENDPOINT_OWNER = "SELECT user_id FROM endpoints WHERE id = %(id)s"
SQL_QUEUE_STATES = "SELECT queue, state::text AS state, count(*) AS n FROM todos GROUP BY 1, 2"
# The doorbell heartbeat: each listening endpoint's oldest pending todos (ids only), so one
# busy endpoint can never starve another's. Walks the pending index per endpoint.
SQL_READY_TODOS = """
SELECT t.id, t.endpoint_id::text AS endpoint_id, t.queue
  FROM unnest(%(endpoint_ids)s::uuid[]) AS e(id)
  CROSS JOIN LATERAL (
    SELECT t.id, t.endpoint_id, t.queue FROM todos t
     WHERE t.endpoint_id = e.id AND t.state = 'pending'
     ORDER BY t.created_at, t.id LIMIT %(limit)s) t
"""


# -- durable hook delivery (the outbox rows written by the transitions above)
# lease due events: each delivery try pushes next_attempt_at out first, so a process that
# dies mid-delivery only delays the event; another process retries it after the lease.
SQL_HOOKS_LEASE = """
UPDATE hook_events h SET tries = h.tries + 1,
       next_attempt_at = now() + %(lease_seconds)s * interval '1 second'
  FROM (SELECT id FROM hook_events
         WHERE delivered_at IS NULL AND next_attempt_at <= now()
         ORDER BY next_attempt_at, created_at LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED) due
 WHERE h.id = due.id
RETURNING h.id::text AS id, h.event, h.url, h.payload, h.tries, h.created_at
"""
SQL_HOOK_DELIVERED = "UPDATE hook_events SET delivered_at = now(), last_error = NULL WHERE id = %(id)s RETURNING id"
SQL_HOOK_RETRY = """
UPDATE hook_events SET next_attempt_at = now() + %(delay)s * interval '1 second', last_error = %(error)s
 WHERE id = %(id)s RETURNING id
"""
SQL_HOOKS_PRUNE = """
DELETE FROM hook_events WHERE delivered_at < now() - %(retention_seconds)s * interval '1 second' RETURNING id
"""
# The exact attempt summary of one todo, read after a terminal transition committed (the
# in-process hooks). System-wide: hooks run without a caller scope and read out nothing.
SQL_ATTEMPT_SUMMARY = "SELECT " + _summary("t", None) + " AS summary FROM todos t WHERE t.id = %(id)s"


# -- constraint names -> domain errors, in one place --------------------------------------
_CONSTRAINT_ERRORS: dict[str, Callable[[], SwitchboardError]] = {
    "todos_queue_check": lambda: Invalid(f"queue must be {QUEUE_RULE}", argument="queue"),
    "todos_title_check": lambda: Invalid("title must be 1 to 500 characters", argument="title"),
    "todos_max_attempts_check": lambda: Invalid("max_attempts must be from 1 to 1000", argument="max_attempts"),
    "users_username_key": lambda: Conflict("that username is taken", argument="username"),
    "users_username_check": lambda: Invalid("username must be 1-64 of letters, digits, _ . @ -", argument="username"),
    "endpoints_agent_id_check": lambda: Invalid("agent_id must be 1-128 of letters, digits, _ . : / -", argument="agent_id"),
    "attempts_one_open_per_todo": lambda: Conflict("the todo already has an open attempt"),
    "todos_endpoint_id_fkey": lambda: NotFound("no such endpoint"),
    "endpoints_user_id_fkey": lambda: NotFound("no such user"),
}


def _translate(err: psycopg.Error, op: str, todo_id: str | None) -> SwitchboardError | None:
    name = getattr(err.diag, "constraint_name", None)
    if name in _CONSTRAINT_ERRORS:
        e = _CONSTRAINT_ERRORS[name]()
        e.op, e.todo_id = op, todo_id
        return e
    if isinstance(err, pgerrors.InvalidTextRepresentation | pgerrors.DataException):
        return Invalid(f"bad input: {err.diag.message_primary}", op=op, todo_id=todo_id)
    return None


# -- the store ---------------------------------------------------------------------------

def _parse_times(obj: dict, keys=("claimed_at", "last_heartbeat_at", "lease_expires_at", "ended_at")) -> dict:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            obj[k] = datetime.fromisoformat(v)
    return obj


def _outcome_counts(row: dict) -> dict[str, int]:
    counts = dict(row.get("pruned_outcomes") or {})
    for outcome, n in (row.get("live_outcomes") or {}).items():
        counts[outcome] = counts.get(outcome, 0) + int(n)
    return {k: int(v) for k, v in sorted(counts.items())}


def todo_out(row: dict) -> dict:
    """The todo as agents and pages see it (the compact row plus payload and routing)."""
    keys = ("id", "queue", "title", "state", "owner", "attempt", "max_attempts", "lease_expires_at",
            "next_retry_at", "dead_letter", "payload", "routing", "result", "attempts_total",
            "attempts_pruned", "created_at", "updated_at")
    return {k: row[k] for k in keys}


@dataclass
class Store:
    pool: AsyncConnectionPool
    settings: Settings
    observers: list[Observer] = field(default_factory=list)

    # -- plumbing --------------------------------------------------------------------

    async def _fetch(self, sql: str, params: dict, *, op: str, todo_id: str | None = None, one=False):
        """Run one statement as its own transaction: one round trip, since the pool's
        connections are in autocommit and a single statement commits (or rolls back) whole.
        Every transition is one statement that writes nothing when it misses."""
        params.setdefault("now", None)
        for attempt in range(3):
            try:
                async with self.pool.connection() as conn:
                    cur = await conn.execute(sql, params)
                    return (await cur.fetchone()) if one else (await cur.fetchall())
            except (pgerrors.DeadlockDetected, pgerrors.SerializationFailure):
                if attempt == 2:
                    raise
            except psycopg.Error as err:
                translated = _translate(err, op, todo_id)
                if translated is None:
                    raise
                raise translated from None

    def _emit(self, transitions: Iterable[Transition]) -> None:
        for t in transitions:
            for observer in self.observers:
                try:
                    observer(t)
                except Exception:  # an observer must never break a committed transition
                    log.exception("observer failed for %s of todo %s", t.kind, t.todo_id)

    def _params(self, caller: Caller, **extra) -> dict:
        if isinstance(caller, Agent):
            params = {"endpoint_id": caller.endpoint_id, "queues": list(caller.queues), "owner": caller.owner}
        else:
            params = {"user_id": caller.user_id, "owner": caller.owner}
        params.update(extra)
        params.setdefault("now", None)
        params["hook_urls"] = list(self.settings.hook_urls)
        return params

    async def _classify(self, caller: Caller, todo_id: str, op: str, params: dict) -> SwitchboardError:
        which = "agent" if isinstance(caller, Agent) else "human"
        row = await self._fetch(SQL_CLASSIFY[which], dict(params, id=todo_id), op=op, todo_id=todo_id, one=True)
        if row is None:
            return NotFound(op=op, todo_id=todo_id)
        state = row["state"]
        expected = _HOLDER_OPS.get(op)
        if expected and state in expected and row["owner"] == caller.owner and isinstance(caller, Agent):
            # Held by this caller in the right state, yet the statement missed: the fence
            # (REQ-6). Conflict, never Forbidden, which would confirm the fence (REQ-19).
            msg = "the lease does not match this attempt"
        elif expected and state in HOLDER_STATES and row["owner"] != caller.owner:
            msg = "the todo is held by another claimer"
        elif state == "claimed" and op == "claim" and row["lapsed"]:
            msg = "the lease of the todo's last allowed attempt lapsed; the reaper dead-letters it"
        elif state == "claimed" and op == "claim":
            msg = "the todo is claimed and its lease has not lapsed"
        else:
            shown = "dead-lettered" if state == "failed" and row["next_retry_at"] is None else state
            msg = f"the todo is {shown}"
        return Conflict(msg, op=op, todo_id=todo_id)

    def _prior(self, raw) -> list[dict]:
        return [_parse_times(dict(a)) for a in (raw or [])]

    # -- agent verbs -----------------------------------------------------------------

    async def todo_add(self, caller: Agent, *, queue: Any, title: Any, payload: Any = None,
                       routing: Any = None, max_attempts: Any = None, now: datetime | None = None) -> dict:
        """-> pending, in a queue the endpoint is granted."""
        caller.require("add_todo")
        if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
            raise Invalid(f"queue must be {QUEUE_RULE}", argument="queue", op="add_todo")
        if queue not in caller.queues:
            raise Forbidden(f"this endpoint is not granted queue {queue}", argument="queue", op="add_todo")
        if not isinstance(title, str) or not 1 <= len(title) <= 500:
            raise Invalid("title must be a string of 1 to 500 characters", argument="title", op="add_todo")
        _no_nul(title, "title")
        params = self._params(
            caller, queue=queue, title=title,
            payload=Jsonb(_json_object(payload, "payload")), routing=Jsonb(_json_object(routing, "routing")),
            max_attempts=5 if max_attempts is None else _positive_int(max_attempts, "max_attempts", 1, 1000),
            now=now,
        )
        row = await self._fetch(SQL_ADD, params, op="add_todo", one=True)
        self._emit([Transition("added", row["id"], str(row["endpoint_id"]), row["queue"], row["state"])])
        return todo_out(row)

    async def todo_list(self, caller: Caller, *, state: Any = None, queue: Any = None, dead_letter: bool = False,
                        limit: Any = None, cursor: Any = None) -> dict:
        """Read: the caller's todos, newest first, keyset-paginated."""
        if isinstance(caller, Agent):
            caller.require("list_todos")
        states = ("pending", "claimed", "input_required", "auth_required", "done", "failed", "canceled")
        if state is not None and state not in states:
            raise Invalid(f"state must be one of {', '.join(states)}", argument="state", op="list_todos")
        if queue is not None and not isinstance(queue, str):
            raise Invalid("queue must be a string", argument="queue", op="list_todos")
        limit = LIST_LIMIT_DEFAULT if limit is None else _positive_int(limit, "limit", 1, LIST_LIMIT_MAX)
        after_created = after_id = None
        if cursor is not None:
            try:
                after_created, after_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
                after_created = datetime.fromisoformat(after_created)
            except Exception:
                raise Invalid("cursor is not one this server returned", argument="cursor", op="list_todos") from None
        which = "agent" if isinstance(caller, Agent) else "human"
        params = self._params(caller, state=state, queue=queue, dead_letter=bool(dead_letter), limit=limit,
                              after_created=after_created, after_id=after_id)
        rows = await self._fetch(SQL_LIST[which], params, op="list_todos")
        next_cursor = None
        if len(rows) == limit:
            last = rows[-1]
            next_cursor = base64.urlsafe_b64encode(
                json.dumps([last["created_at"].isoformat(), last["id"]]).encode()).decode()
        return {"todos": [todo_out(r) | {"endpoint_id": str(r["endpoint_id"])} for r in rows],
                "next_cursor": next_cursor}

    async def todo_get(self, caller: Caller, todo_id: Any, *, attempts_limit: Any = None) -> dict:
        """Read (REQ-8): the full todo with its attempts newest first, scoped in one statement."""
        if isinstance(caller, Agent):
            caller.require("get_todo")
        todo_id = _todo_id(todo_id)
        limit = ATTEMPTS_LIMIT_DEFAULT if attempts_limit is None else _positive_int(
            attempts_limit, "attempts_limit", 1, ATTEMPTS_LIMIT_MAX)
        which = "agent" if isinstance(caller, Agent) else "human"
        row = await self._fetch(SQL_GET[which], self._params(caller, id=todo_id, attempts_limit=limit),
                                op="get_todo", todo_id=todo_id, one=True)
        if row is None:
            raise NotFound(op="get_todo", todo_id=todo_id)
        out = todo_out(row)
        out["attempts"] = self._prior(row["attempts"])
        out["attempt_outcomes"] = _outcome_counts(row)
        if isinstance(caller, Human):
            out["endpoint_id"] = str(row["endpoint_id"])
        return out

    async def todo_claim(self, caller: Caller, todo_id: Any, *, claimant: Any = None, require_fence: Any = False,
                         lease_seconds: Any = None, now: datetime | None = None) -> dict:
        """pending (or claimed with a lapsed lease) -> claimed, by id; opens an attempt."""
        todo_id = _todo_id(todo_id)
        if isinstance(caller, Agent):
            caller.require("claim")
            sqls = (SQL_CLAIM_BY_AGENT_FAST, SQL_CLAIM_BY_AGENT)
        else:
            sqls = (SQL_CLAIM_BY_HUMAN_FAST, SQL_CLAIM_BY_HUMAN)
        return await self._claim(caller, sqls, {"id": todo_id}, claimant, require_fence, lease_seconds, now,
                                 op="claim", todo_id=todo_id)

    async def todo_claim_next(self, caller: Agent, *, queue: Any = None, claimant: Any = None,
                              require_fence: Any = False, lease_seconds: Any = None,
                              now: datetime | None = None) -> dict:
        """The oldest claimable todo in the caller's queues -> claimed (SKIP LOCKED)."""
        caller.require("claim_next")
        if queue is None:
            queues = list(caller.queues)
        elif isinstance(queue, str) and queue in caller.queues:
            queues = [queue]
        elif isinstance(queue, str):
            raise Forbidden(f"this endpoint is not granted queue {queue}", argument="queue", op="claim_next")
        else:
            raise Invalid("queue must be a string", argument="queue", op="claim_next")
        return await self._claim(caller, (SQL_CLAIM_NEXT_FAST, SQL_CLAIM_NEXT), {"claim_queues": queues}, claimant,
                                 require_fence, lease_seconds, now, op="claim_next", todo_id=None)

    def _lease(self, lease_seconds: Any) -> float:
        if lease_seconds is None:
            return float(self.settings.lease_seconds)
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not (
                1 <= lease_seconds <= self.settings.lease_seconds_max):
            raise Invalid(f"lease_seconds must be a number from 1 to {self.settings.lease_seconds_max:g}",
                          argument="lease_seconds")
        return float(lease_seconds)

    async def _claim(self, caller: Caller, sqls: tuple[str, str], target: dict, claimant, require_fence,
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
        )
        row = await self._fetch(sqls[0], params, op=op, todo_id=todo_id, one=True)
        if row is None:
            row = await self._fetch(sqls[1], params, op=op, todo_id=todo_id, one=True)
        if row is None:
            if todo_id is None:
                return {"todo": None}
            raise await self._classify(caller, todo_id, "claim", params)
        row.update(state="claimed", owner=params["owner"], next_retry_at=None, dead_letter=False)  # CLAIM_KNOWN
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
        if token:
            out["lease_token"] = token
        return out

    async def _fenced(self, caller: Agent, sql_by_fence: dict, key, params: dict, lease_token: Any,
                      *, op: str, todo_id: str, from_states: Iterable[str]):
        """Run a holder transition under REQ-6. With a lease_token: lock the todo, compare the
        token's hash with the open attempt's in constant time, then run the transition in the
        same transaction. Without one: the statement itself requires an unfenced attempt."""
        if lease_token is None:
            return await self._fetch(sql_by_fence[key(UNFENCED)], params, op=op, todo_id=todo_id, one=True)
        if not isinstance(lease_token, str):
            raise Invalid("lease_token must be a string", argument="lease_token", op=op, todo_id=todo_id)
        presented = hash_token(lease_token)
        params = dict(params, from_states=list(from_states))
        try:
            async with self.pool.connection() as conn:
                async with conn.transaction():
                    cur = await conn.execute(SQL_FENCE_LOOKUP, params)
                    found = await cur.fetchone()
                    if found is None:
                        return None
                    stored = found["lease_token_hash"]
                    if stored is None or not hmac.compare_digest(bytes(stored), presented):
                        raise Conflict("the lease does not match this attempt", op=op, todo_id=todo_id)
                    cur = await conn.execute(sql_by_fence[key(TOKEN_CHECKED)], params)
                    return await cur.fetchone()
        except psycopg.Error as err:
            translated = _translate(err, op, todo_id)
            if translated is None:
                raise
            raise translated from None

    def _closing(self, summary: Any, artifact: Any, result: Any, *, with_result: bool, op: str, todo_id: str) -> dict:
        """Validate every input before any transition applies (REQ-5)."""
        try:
            artifact = clean_artifact(artifact)
            if summary is not None and not isinstance(summary, str):
                raise Invalid("summary must be a string", argument="summary")
            if with_result and result is not None:
                _json_value(result, "result")
            if summary is None and with_result and result is not None and self.settings.attempt_summary_from_result:
                summary = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
            truncated = False
            if summary is not None:
                _no_nul(summary, "summary")
                summary, truncated = cut_utf8(summary, SUMMARY_MAX_BYTES)
        except SwitchboardError as e:
            e.op, e.todo_id = op, todo_id
            raise
        return {"summary": summary, "summary_truncated": truncated, "artifact": artifact,
                "result": Jsonb(result) if with_result and result is not None else None}

    async def _close(self, caller: Caller, kind: str, todo_id: Any, *, summary=None, artifact=None, result=None,
                     lease_token=None, now=None) -> dict:
        todo_id = _todo_id(todo_id)
        inputs = self._closing(summary, artifact, result, with_result=kind in ("complete", "fail"), op=kind,
                               todo_id=todo_id)
        params = self._params(caller, id=todo_id, **inputs, now=now,
                              retry_base=self.settings.retry_base_seconds, retry_max=self.settings.retry_max_seconds)
        if isinstance(caller, Agent):
            caller.require(kind)
            params["from_states"] = ["claimed"]
            if lease_token is None:  # the statement itself requires an unfenced attempt
                row = await self._fetch(SQL_CLOSE_AGENT[(kind, UNFENCED)], params, op=kind, todo_id=todo_id,
                                        one=True)
            else:
                row = await self._fenced(caller, SQL_CLOSE_AGENT, lambda mode: (kind, mode), params, lease_token,
                                         op=kind, todo_id=todo_id, from_states=["claimed"])
        else:
            params["from_states"] = ["claimed"] if kind == "complete" else list(HOLDER_STATES)
            row = await self._fetch(SQL_CLOSE_HUMAN[kind], params, op=kind, todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, kind, params)
        return self._closed(kind, todo_id, row)

    def _closed(self, kind: str, todo_id: str, row: dict) -> dict:
        if kind in NO_OUTBOX_KINDS:
            outcome, disposition, state = FIXED_CLOSE[kind]
            row.update(id=todo_id, state=state, owner=None, lease_expires_at=None, next_retry_at=None,
                       dead_letter=False)  # CLOSE_KNOWN
            closed = {"seq": row["attempts_total"], "attempt": row["closed_attempt"], "outcome": outcome,
                      "disposition": disposition}
        else:
            outcome = row["closed_outcome"]
            closed = {"seq": row["attempts_total"], "attempt": row["closed_attempt"], "outcome": outcome,
                      "disposition": row["closed_disposition"], "summary": row["closed_summary"],
                      "artifact": row["closed_artifact"]}
        self._emit((Transition(CLOSED_BY[kind], row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               dead_letter=row["dead_letter"], closed=closed, attempts_total=row["attempts_total"]),))
        out = todo_out(row)
        out["closed_attempt"] = {"seq": closed["seq"], "attempt": closed["attempt"], "outcome": outcome,
                                 "disposition": closed["disposition"], "died": outcome in DIED_OUTCOMES}
        return out

    async def todo_complete(self, caller: Caller, todo_id: Any, *, result=None, summary=None, artifact=None,
                            lease_token=None, now=None) -> dict:
        """claimed -> done; closes the attempt completed/done."""
        return await self._close(caller, "complete", todo_id, result=result, summary=summary, artifact=artifact,
                                 lease_token=lease_token, now=now)

    async def todo_fail(self, caller: Caller, todo_id: Any, *, result=None, summary=None, artifact=None,
                        lease_token=None, now=None) -> dict:
        """claimed -> failed with a retry, or a dead letter at the cap; closes failed/..."""
        return await self._close(caller, "fail", todo_id, result=result, summary=summary, artifact=artifact,
                                 lease_token=lease_token, now=now)

    async def todo_release(self, caller: Caller, todo_id: Any, *, summary=None, artifact=None, lease_token=None,
                           now=None) -> dict:
        """claimed -> pending, attempt counter unchanged; closes released/requeued (REQ-9)."""
        return await self._close(caller, "release", todo_id, summary=summary, artifact=artifact,
                                 lease_token=lease_token, now=now)

    async def todo_heartbeat(self, caller: Agent, todo_id: Any, *, lease_token=None, lease_seconds=None,
                             now=None) -> dict:
        """claimed -> claimed with the lease extended, on the todo and its attempt (REQ-4)."""
        caller.require("heartbeat")
        todo_id = _todo_id(todo_id)
        params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,
                              from_states=["claimed"])
        row = await self._fenced(caller, SQL_HEARTBEAT, lambda mode: mode, params, lease_token,
                                 op="heartbeat", todo_id=todo_id, from_states=["claimed"])
        if row is None:
            raise await self._classify(caller, todo_id, "heartbeat", params)
        self._emit([Transition("lease_extended", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todo_interrupt(self, caller: Agent, todo_id: Any, *, state: Any = "input_required", lease_token=None,
                             now=None) -> dict:
        """claimed -> input_required | auth_required; the attempt stays open (REQ-2)."""
        caller.require("interrupt")
        todo_id = _todo_id(todo_id)
        if state not in INTERRUPT_STATES:
            raise Invalid("state must be input_required or auth_required", argument="state", op="interrupt")
        params = self._params(caller, id=todo_id, from_states=["claimed"], to_state=state, now=now)
        row = await self._fenced(caller, SQL_INTERRUPT, lambda mode: ("interrupt", mode), params, lease_token,
                                 op="interrupt", todo_id=todo_id, from_states=["claimed"])
        if row is None:
            raise await self._classify(caller, todo_id, "interrupt", params)
        self._emit([Transition("interrupted", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todo_resume(self, caller: Agent, todo_id: Any, *, lease_token=None, lease_seconds=None,
                          now=None) -> dict:
        """input_required | auth_required -> claimed with a fresh lease; the same attempt."""
        caller.require("resume")
        todo_id = _todo_id(todo_id)
        params = self._params(caller, id=todo_id, from_states=list(INTERRUPT_STATES), to_state="claimed",
                              lease_seconds=self._lease(lease_seconds), now=now)
        row = await self._fenced(caller, SQL_INTERRUPT, lambda mode: ("resume", mode), params, lease_token,
                                 op="resume", todo_id=todo_id, from_states=INTERRUPT_STATES)
        if row is None:
            raise await self._classify(caller, todo_id, "resume", params)
        self._emit([Transition("resumed", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todo_cancel(self, caller: Caller, todo_id: Any, *, now=None) -> dict:
        """pending, held, or failed awaiting retry -> canceled; a held todo's attempt closes
        canceled/canceled."""
        todo_id = _todo_id(todo_id)
        agent = isinstance(caller, Agent)
        if agent:
            caller.require("cancel")
        params = self._params(caller, id=todo_id, summary=None, summary_truncated=False, artifact=None,
                              from_states=list(HOLDER_STATES), now=now)
        row = await self._fetch(SQL_CANCEL_HELD_AGENT if agent else SQL_CLOSE_HUMAN["cancel"], params,
                                op="cancel", todo_id=todo_id, one=True)
        if row is not None:
            return self._closed("cancel", todo_id, row)
        row = await self._fetch(SQL_CANCEL_UNHELD["agent" if agent else "human"], params, op="cancel",
                                todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "cancel", params)
        self._emit([Transition("canceled", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    async def todo_retry(self, caller: Caller, todo_id: Any, *, now=None) -> dict:
        """Manual retry: dead letter -> pending with attempt = 0; every attempt kept (REQ-12)."""
        todo_id = _todo_id(todo_id)
        which = "agent" if isinstance(caller, Agent) else "human"
        params = self._params(caller, id=todo_id, now=now)
        row = await self._fetch(SQL_RETRY[which], params, op="retry", todo_id=todo_id, one=True)
        if row is None:
            raise await self._classify(caller, todo_id, "retry", params)
        self._emit([Transition("retried", row["id"], str(row["endpoint_id"]), row["queue"], row["state"],
                               attempts_total=row["attempts_total"])])
        return todo_out(row)

    # -- sweeps ------------------------------------------------------------------------

    async def sweep_reap(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Reaper: lapsed leases -> pending or dead letter, attempts closed reaped."""
        rows = await self._fetch(SQL_REAP, {"now": now, "batch": batch, "hook_urls": list(self.settings.hook_urls)},
                                op="reap")
        self._emit(Transition("reaped", r["id"], str(r["endpoint_id"]), r["queue"], r["state"],
                              dead_letter=r["dead_letter"], closed=dict(r["closed"]),
                              attempts_total=r["attempts_total"]) for r in rows)
        return len(rows)

    async def sweep_retry(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Retry scheduler: failed todos whose backoff elapsed -> pending."""
        rows = await self._fetch(SQL_RETRY_DUE, {"now": now, "batch": batch,
                                                 "hook_urls": list(self.settings.hook_urls)}, op="retry_due")
        self._emit(Transition("requeued", r["id"], str(r["endpoint_id"]), r["queue"], r["state"],
                              attempts_total=r["attempts_total"]) for r in rows)
        return len(rows)

    async def sweep_retention(self, *, now: datetime | None = None, batch: int = SWEEP_BATCH) -> int:
        """Retention: terminal todos past the age bound are deleted with their attempts."""
        rows = await self._fetch(SQL_RETENTION, {"now": now, "batch": batch,
                                                 "retention_seconds": self.settings.retention_days * 86400},
                                 op="retention")
        self._emit(Transition("deleted", r["id"], str(r["endpoint_id"]), r["queue"], "deleted") for r in rows)
        if len(rows) < batch:  # the todo backlog is done: prune delivered hook events too
            await self._fetch(SQL_HOOKS_PRUNE, {"retention_seconds": self.settings.retention_days * 86400},
                              op="retention")
        return len(rows)

    # -- users and endpoints -----------------------------------------------------------

    async def user_insert(self, username: str, password_hash: str) -> dict:
        if not isinstance(username, str) or not _USERNAME.fullmatch(username):
            raise Invalid("username must be 1-64 of letters, digits, _ . @ -", argument="username")
        return await self._fetch(SQL_USER_INSERT, {"username": username, "password_hash": password_hash},
                                 op="user_add", one=True)

    async def user_by_name(self, username: str) -> dict | None:
        return await self._fetch(SQL_USER_BY_NAME, {"username": username}, op="user_get", one=True)

    async def user_by_id(self, user_id: int) -> dict | None:
        return await self._fetch(SQL_USER_BY_ID, {"id": user_id}, op="user_get", one=True)

    async def endpoint_vend(self, user_id: int, *, name: str, agent_id: str, queues: list[str],
                            scope: list[str]) -> tuple[dict, str]:
        """A new endpoint credential; the token is returned once and only its hash stored."""
        if not isinstance(agent_id, str) or not _AGENT_ID.fullmatch(agent_id):
            raise Invalid("agent_id must be 1-128 of letters, digits, _ . : / -", argument="agent_id")
        queues = list(dict.fromkeys(queues or []))
        if not queues:
            raise Invalid("grant at least one queue", argument="queues")
        for q in queues:
            if not isinstance(q, str) or not QUEUE_PATTERN.fullmatch(q):
                raise Invalid(f"queue {q!r} must be {QUEUE_RULE}", argument="queues")
        scope = list(dict.fromkeys(scope or []))
        if not scope:
            raise Invalid("grant at least one verb", argument="scope")
        unknown = [v for v in scope if v not in VERBS]
        if unknown:
            raise Invalid(f"unknown verb {unknown[0]!r}; verbs are {', '.join(VERBS)}", argument="scope")
        name = (name or agent_id).strip()[:100] or agent_id
        token = "sb_" + secrets.token_urlsafe(32)
        row = await self._fetch(SQL_ENDPOINT_INSERT, {"user_id": user_id, "name": name, "agent_id": agent_id,
                                                      "token_hash": hash_token(token), "scope": scope,
                                                      "queues": queues}, op="endpoint_vend", one=True)
        return row, token

    async def endpoint_authenticate(self, token: str) -> Agent | None:
        """The live endpoint behind a bearer token, or None (unknown or revoked)."""
        if not token:
            return None
        row = await self._fetch(SQL_ENDPOINT_AUTH, {"token_hash": hash_token(token)}, op="auth", one=True)
        if row is None:
            return None
        if row["stale_use"]:
            await self._fetch(SQL_ENDPOINT_TOUCH, {"id": row["id"]}, op="auth_touch")
        return Agent(row["id"], row["agent_id"], row["user_id"], frozenset(row["scope"]), tuple(row["queues"]))

    async def endpoints_of_user(self, user_id: int) -> list[dict]:
        return await self._fetch(SQL_ENDPOINTS_OF_USER, {"user_id": user_id}, op="endpoints")

    async def endpoint_owner(self, endpoint_id: str) -> int | None:
        row = await self._fetch(SQL_ENDPOINT_OWNER, {"id": endpoint_id}, op="endpoint_owner", one=True)
        return row["user_id"] if row else None

    async def endpoint_revoke(self, endpoint_id: str, *, user_id: int | None = None, now=None) -> int:
        """Revoke an endpoint; its held todos -> failed dead letter, attempts closed
        revoked/dead_lettered. With user_id, only that user's endpoint. Returns how many
        todos were dead-lettered; raises NotFound when there was nothing to revoke."""
        try:
            import uuid
            uuid.UUID(str(endpoint_id))
        except ValueError:
            raise NotFound("no such endpoint", op="endpoint_revoke") from None
        row = await self._fetch(SQL_REVOKE, {"endpoint_id": endpoint_id, "user_id": user_id, "now": now,
                                             "hook_urls": list(self.settings.hook_urls)},
                                op="endpoint_revoke", one=True)
        if not row["revoked"]:
            raise NotFound("no such endpoint, or already revoked", op="endpoint_revoke")
        events = []
        for item in row["todos"]:
            t = item["todo"]
            events.append(Transition("revoked", t["id"], str(t["endpoint_id"]), t["queue"], "failed",
                                     dead_letter=True, closed=item["closed"], attempts_total=t["attempts_total"]))
        self._emit(events)
        return len(events)

    # -- aggregate and sweep reads ---------------------------------------------------------

    async def queue_state_counts(self) -> list[dict]:
        """Aggregates only, for /metrics."""
        return await self._fetch(SQL_QUEUE_STATES, {}, op="metrics")

    async def ready_todos(self, endpoint_ids: Iterable[str], limit: int = 500) -> list[dict]:
        """Each endpoint's oldest pending todos, ids and queues only (the doorbell heartbeat)."""
        ids = list(endpoint_ids)
        if not ids:
            return []
        return await self._fetch(SQL_READY_TODOS, {"endpoint_ids": ids, "limit": limit}, op="ready")

    async def todo_attempt_summary(self, todo_id: str) -> dict | None:
        """The exact attempt summary (counts by outcome, recent tokens, omitted), or None."""
        row = await self._fetch(SQL_ATTEMPT_SUMMARY, {"id": todo_id}, op="attempt_summary", one=True)
        return row["summary"] if row else None

    # -- hook outbox ---------------------------------------------------------------------

    async def hook_events_lease(self, *, limit: int = 20, lease_seconds: float = 30.0) -> list[dict]:
        """Due hook events, leased to this process for lease_seconds."""
        return await self._fetch(SQL_HOOKS_LEASE, {"limit": limit, "lease_seconds": lease_seconds}, op="hooks")

    async def hook_event_delivered(self, event_id: str) -> None:
        await self._fetch(SQL_HOOK_DELIVERED, {"id": event_id}, op="hooks")

    async def hook_event_retry(self, event_id: str, *, delay: float, error: str) -> None:
        await self._fetch(SQL_HOOK_RETRY, {"id": event_id, "delay": delay, "error": error[:200]}, op="hooks")
