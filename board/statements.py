"""Every SQL statement the store sends, composed from a few shared parts and named after its
transition (noun first). Each is also committed as rendered text in board/statements.sql,
which a test holds to this module. Only board/store/store.py (and board/store/accounts.py for users
and endpoints) executes them."""

from __future__ import annotations

import re
from typing import Iterable

from board.store.vocabulary import CLOSED_BY, NOTIFY_CHANNEL, PRIOR_ATTEMPTS, PRIOR_NOTES

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
# A queue the caller's human has paused (migration 0003): agents claim nothing in it; the
# Board's own claim by its human, the reaper and the retry scheduler are not held back. In
# the claims, a probe of the small queue_pauses table by its key for each candidate row (an
# anti-join: the scan stops at the first row of a live queue, and the planner judges it as
# passing nearly every row, so claim_next still walks the pending index). Cheaper there than
# an array of the paused queues read once per statement: each sub-select that a claim
# evaluates costs it a few per cent (measured side by side; REQ-18 holds the claim's cost).
# Even so the probe is 2-3% of a claim_next cycle's server work (bench/attempt_instructions.py),
# so a server process runs claim_next without it while its pause cache vouches for the
# caller's paused queues (SQL_CLAIM_NEXT_*_UNPAUSED below); claim by id always probes.
_NOT_PAUSED_ROW = "NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)"
_NOT_PAUSED = {_AGENT_SCOPE: " AND " + _NOT_PAUSED_ROW, _HUMAN_SCOPE: ""}
# The same, as an array, where one statement reads it once (classifying a miss).
_PAUSED = "ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s)"

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
    return compose(", ".join(expr for name, expr in _TODO_COLUMNS.items() if name not in known), r=r)


# What a claim and the lean closes (complete, cancel) fix on the todo, so their statements
# need not return it: every column sent costs the server an output conversion and the
# client a parse (a timestamp costs most). The store fills these in from the transition.
# The rules of the todos_consistent trigger make them so: a claimed todo has a holder and no
# retry time; a done or canceled one has neither holder, lease nor retry time.
CLAIM_KNOWN = ("state", "owner", "next_retry_at", "dead_letter")
CLOSE_KNOWN = ("id", "state", "owner", "lease_expires_at", "next_retry_at", "dead_letter")

_NOTIFY = """pg_notify('{channel}', json_build_object(
  'todo', {r}.id, 'endpoint', {r}.endpoint_id, 'queue', {r}.queue, 'state', {r}.state,
  'kind', '{kind}')::text)"""


_SLOT = re.compile(r"\{([A-Za-z_]+)\}")


def compose(text: str, **parts) -> str:
    """The one way statements are built: fill each {name} slot of text with parts[name]
    ({NOW} with the injectable clock), and again in what was filled in, until no slot is
    left. Other braces (a JSON literal '{}') are text and stay as they are."""
    parts = {"NOW": NOW, "channel": NOTIFY_CHANNEL, "hook_recent": HOOK_RECENT, **parts}
    while True:
        filled = _SLOT.sub(lambda m: str(parts[m.group(1)]) if m.group(1) in parts else m.group(0), text)
        if filled == text:
            return text
        text = filled


HOOK_RECENT = 10

# The exact attempt summary (seed 002's idea): per-outcome counts over the whole history
# (live rows plus the counts pruning folded into pruned_outcomes), the most recent attempts
# as outcome tokens, and how many were left out. {closing} overrides the outcome of the
# attempt the same statement closes, which that statement's snapshot still sees open.
_SUMMARY = """jsonb_build_object(
  'total', {r}.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
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
       WHERE a.todo_id = {r}.id ORDER BY a.seq DESC LIMIT {hook_recent}) x),
  'omitted', greatest({r}.attempts_total - least({r}.attempts_total - {r}.attempts_pruned, {hook_recent}), 0))"""


def _summary(r: str, c: str | None) -> str:
    if c is None:
        return compose(_SUMMARY, r=r, not_closing="", closing_count="", outcome="a.outcome::text")
    return compose(_SUMMARY, r=r, c=c, not_closing="AND a.seq <> {c}.seq",
                   closing_count="UNION ALL SELECT {c}.outcome::text, 1",
                   outcome="CASE WHEN a.seq = {c}.seq THEN {c}.outcome::text ELSE a.outcome::text END")


# Durable notify hooks: one hook_events row per configured URL when a transition makes a
# todo ready or dead-letters it, in the same statement. With no URLs configured the cross
# join is empty and nothing is written. A dead letter carries its closing attempt and the
# exact summary (REQ-15).
_OUTBOX_DEAD = """jsonb_build_object(
      'attempt', jsonb_build_object('seq', {c}.seq, 'attempt', {c}.attempt, 'outcome', {c}.outcome,
        'died', {c}.outcome IN ('lease_expired', 'reaped'), 'summary', {c}.summary, 'artifact', {c}.artifact),
      'attempts', {summary})"""


def _outbox(r: str, c: str | None) -> str:
    if c is None:
        return compose(_OUTBOX, r=r, dead="'{}'::jsonb", join="")
    return compose(_OUTBOX, r=r, c=c, dead=_OUTBOX_DEAD, summary=_summary(r, c),
                   join="JOIN closed {c} ON {c}.todo_id = {r}.id")


_OUTBOX = """outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, {r}.id,
         jsonb_build_object('event', ev.event, 'occurred_at', {NOW},
           'todo', jsonb_build_object('id', {r}.id, 'queue', {r}.queue, 'title', {r}.title, 'state', {r}.state,
             'attempt', {r}.attempt, 'max_attempts', {r}.max_attempts, 'attempts_total', {r}.attempts_total,
             'endpoint_id', {r}.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN {dead} ELSE '{}'::jsonb END
    FROM upd {r} {join}
    CROSS JOIN LATERAL (SELECT CASE
        WHEN {r}.state = 'pending' THEN 'todo.ready'
        WHEN {r}.state = 'failed' AND {r}.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)"""


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
_OPEN_FROM_UPD = compose(_OPEN_ATTEMPT, src="upd", seq="upd.attempts_total", attempt="upd.attempt",
                         lease="upd.lease_expires_at", where="")
_OPEN_FROM_CAND = compose(_OPEN_ATTEMPT,
    src="cand", seq="cand.prev_total + 1", attempt="cand.prev_attempt + 1", lease=_LEASE,
    where="WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s", claimer="{claimer}")
# claimer_kind and claimer_endpoint_id follow from who may run the statement: an agent's
# statements record its endpoint (the endpoint_id its scope filter already binds), the
# Board's record the owner and no endpoint (REQ-1).
_CLAIMER = {
    _AGENT_SCOPE: "'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid",
    _HUMAN_SCOPE: "'owner'::attempt_claimer_kind, NULL::uuid",
}

# A claim of a continuing todo returns its predecessor (migration 0004's todo_continuation),
# called only when continues_id is set, as attempt_prior is: nothing is set up per claim of
# a todo that continues nothing.
_CONTINUES = ("CASE WHEN {r}.continues_id IS NOT NULL THEN todo_continuation({r}.continues_id, {r}.endpoint_id) "
              "END AS continues")
# The usage of the attempts a claim prunes, folded into todos.pruned_usage (as their outcomes
# into pruned_outcomes) so get_todo's totals stay exact: each total only once some attempt
# reported it; unchanged when no pruned attempt reported any.
_USAGE_KEYS = ("input_tokens", "output_tokens", "cost_usd")
_PRUNED_USAGE = ("CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage "
                 "ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object("
                 + ", ".join(f"'{k}', CASE WHEN count(p.{k}) > 0 THEN coalesce((t.pruned_usage ->> '{k}')::numeric, 0) "
                             f"+ sum(p.{k}) END" for k in _USAGE_KEYS) + ")) END")

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
            a.summary_truncated, a.artifact, attempt_public_notes(a, {prior_notes}) AS public
),
pruned AS (
  DELETE FROM attempts a USING cand
   WHERE cand.prev_total >= %(history_max)s
     AND a.todo_id = cand.id AND a.seq <= cand.prev_total + 1 - %(history_max)s
     AND a.ended_at IS NOT NULL
  RETURNING a.seq, a.outcome, a.input_tokens, a.output_tokens, a.cost_usd
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
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT {pruned_usage} FROM pruned p) END,
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
            (SELECT a.seq, attempt_public_notes(a, {prior_notes}) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT {prior})
          ) y ORDER BY y.seq DESC LIMIT {prior}) x) END AS prior_attempts,
       {continues},
       {notify}
  FROM upd, ins
"""


# By id: the one row, pending or with a lapsed lease (a primary-key lookup).
_CAND_BY_ID = """cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.id = %(id)s{not_paused}
     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= {NOW}
                                  AND t.attempt < t.max_attempts))
   FOR UPDATE OF t
)"""

# claim_next: the oldest pending todo, else a lapsed lease to take over (REQ-3; the reaper
# returns the rest to pending soon anyway). A lapsed lease on a todo's last allowed attempt
# is never taken over: the reaper dead-letters it, whoever looks first. Two locking scans, because one with an OR could
# not use the pending-only index and would walk every finished row; the lapsed scan runs
# only when no pending todo was found.
# The pending scan of claim_next: also the whole candidate of its fast path.
_PENDING_SCAN = """
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.queue = ANY(%(claim_queues)s) AND t.state = 'pending'{not_paused}
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
"""
# claim_next passes over the rows of paused queues ({not_paused}). Not phrased as
# "queue <> ALL(the paused ones)": the planner reads that as matching almost no row and then
# scans and sorts the whole table rather than walk the pending index
# (tests/integration/test_plans.py, on a backlog). When every queue asked for is paused, the
# scan walks the endpoint's pending rows of them and finds nothing; the doorbell does not
# ring for them meanwhile.
_CAND_NEXT = """lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.queue = ANY(%(claim_queues)s) AND t.state = 'claimed' AND t.lease_expires_at <= {NOW}
     AND t.attempt < t.max_attempts{not_paused}
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
{pending_scan}
),
cand AS (
  SELECT * FROM pending_cand
  UNION ALL
  SELECT * FROM lapsed_cand WHERE NOT EXISTS (SELECT 1 FROM pending_cand)
)"""


def _claim_sql(scope: str, by_id: bool, not_paused: str | None = None) -> str:
    not_paused = _NOT_PAUSED[scope] if not_paused is None else not_paused
    cand = compose(_CAND_BY_ID if by_id else _CAND_NEXT, scope=scope, pending_scan=_PENDING_SCAN.strip("\n"),
                   not_paused=not_paused)
    return compose(
        _CLAIM,
        cand=cand,
        open_attempt=compose(_OPEN_FROM_UPD, claimer=_CLAIMER[scope]),
        todo_cols=_todo_cols("upd", CLAIM_KNOWN),
        prior=PRIOR_ATTEMPTS, prior_notes=PRIOR_NOTES,
        notify=compose(_NOTIFY, r="upd", kind="claimed"),
        continues=compose(_CONTINUES, r="upd"), pruned_usage=_PRUNED_USAGE,
    )


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
       {continues},
       {notify}
"""
# The todos update is the statement itself, not a CTE: its RETURNING is the response, with
# no whole-row copy through a CTE. The prior
# attempts come from the SQL function attempt_prior, called only for a todo
# claimed before: as a sub-select, the executor set the query up on every claim, used or not.

_PENDING_BY_ID = """cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE {scope} AND t.id = %(id)s AND t.state = 'pending'{not_paused}
   FOR UPDATE OF t
)"""


def _claim_fast_sql(scope: str, by_id: bool, not_paused: str | None = None) -> str:
    not_paused = _NOT_PAUSED[scope] if not_paused is None else not_paused
    if by_id:
        cand = _PENDING_BY_ID
    else:  # the pending scan of claim_next alone
        cand = "cand AS (\n{pending_scan}\n)"
    return compose(
        _CLAIM_FAST, cand=compose(cand, scope=scope, pending_scan=_PENDING_SCAN.strip("\n"),
                                  not_paused=not_paused),
        open_attempt=compose(_OPEN_FROM_CAND, claimer=_CLAIMER[scope]), lease=_LEASE,
        todo_cols=_todo_cols("t", CLAIM_KNOWN),
        prior=PRIOR_ATTEMPTS,
        notify=compose(_NOTIFY, r="t", kind="claimed"),
        continues=compose(_CONTINUES, r="t"),
    )


SQL_CLAIM_NEXT_FAST = _claim_fast_sql(_AGENT_SCOPE, by_id=False)
SQL_CLAIM_BY_AGENT_FAST = _claim_fast_sql(_AGENT_SCOPE, by_id=True)
SQL_CLAIM_BY_HUMAN_FAST = _claim_fast_sql(_HUMAN_SCOPE, by_id=True)

SQL_CLAIM_NEXT = _claim_sql(_AGENT_SCOPE, by_id=False)
# claim_next when the process's pause cache (board/live/pause_cache.py) has already left the
# caller's paused queues out of claim_queues: no probe of queue_pauses per claim.
SQL_CLAIM_NEXT_FAST_UNPAUSED = _claim_fast_sql(_AGENT_SCOPE, by_id=False, not_paused="")
SQL_CLAIM_NEXT_UNPAUSED = _claim_sql(_AGENT_SCOPE, by_id=False, not_paused="")
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
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s{void_token}{usage}
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
        outcome="'completed'::attempt_outcome", disposition="'done'::attempt_disposition",
        todo_set="state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s",
    ),
    # claimed -> failed (retry scheduled or dead letter); closes failed/retry_scheduled|dead_lettered
    "fail": dict(
        outcome="'failed'::attempt_outcome", disposition=_FAIL_DISPOSITION,
        todo_set="state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, "
        "next_retry_at = {retry_at}",
    ),
    # claimed -> pending, owner and lease cleared, attempt unchanged; closes released/requeued
    "release": dict(
        outcome="'released'::attempt_outcome", disposition="'requeued'::attempt_disposition",
        todo_set="state = 'pending', owner = NULL, lease_expires_at = NULL",
    ),
    # claimed or interrupted -> canceled; closes canceled/canceled
    "cancel": dict(
        outcome="'canceled'::attempt_outcome", disposition="'canceled'::attempt_disposition",
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
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s{void_token}{usage}
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


# What the closing verb reported about usage, on the attempt it closes (migration 0004), set
# only by the variants a close with usage runs: a close without it assigns no new column.
# Each value is cast to its domain here, where usage is written: the columns are of the base
# types (migrations/0004_working_context.sql says why).
_USAGE_SET = (", input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, "
              "cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model")


def _close_sql(kind: str, scope: str, owner: bool, fence: bool, usage: bool = False) -> str:
    spec = CLOSE_KINDS[kind]
    lean = kind in NO_OUTBOX_KINDS
    row = "t" if lean else "upd"
    return compose(
        _CLOSE_LEAN if lean else _CLOSE,
        scope=scope,
        owner="AND t.owner = %(owner)s" if owner else "",
        fence="AND a.lease_token_hash IS NULL" if fence else "",
        outcome=spec["outcome"], retry_at=_RETRY_AT,
        disposition=spec["disposition"],
        todo_set=spec["todo_set"],
        todo_cols=_todo_cols(row, CLOSE_KNOWN if lean else ()),
        closed_cols=", ".join(compose("c.{k} AS closed_{k}", k=k) for k in _closed_cols(kind)),
        notify=compose(_NOTIFY, r=row, kind=CLOSED_BY[kind]),
        outbox="" if lean else _outbox("u", "c"),
        # A human's close voids the holder's token: only a close the token made can be
        # replayed with it (SQL_REPLAY_LOOKUP).
        void_token=", lease_token_hash = NULL" if scope == _HUMAN_SCOPE else "",
        usage=_USAGE_SET if usage else "",
    )


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
# The same closes when the caller reported usage.
SQL_CLOSE_AGENT_USAGE = {
    (kind, mode): _close_sql(kind, _AGENT_SCOPE, owner=True, fence=mode == UNFENCED, usage=True)
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
    mode: compose(
        _HEARTBEAT, scope=_AGENT_SCOPE, fence=_FENCE_GUARD[mode],
        todo_cols=compose(_TODO_COLS, r="upd"), notify=compose(_NOTIFY, r="upd", kind="lease_extended"),
    )
    for mode in (UNFENCED, TOKEN_CHECKED)
}

# -- note: held -> held, unchanged; appends a note to the open attempt, sets its last_note_at
# (activity, not a lease: the lease stays as it is), and deletes the oldest notes past the
# per-attempt cap, counted in notes_pruned, in the same statement. The todo row is locked
# first (todo before attempt, as everywhere), and the todo itself is not written.
_NOTE = """
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) {owner}
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),
         last_note_at = {NOW}
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL {fence}
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, {author}, %(text)s, %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count, coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, {notify}
  FROM cur JOIN att ON true JOIN ins ON true
"""
# An agent notes on its own attempt, fenced as heartbeat is (UNFENCED / TOKEN_CHECKED); the
# owning human on any open attempt of their todos (exempt from the fence, REQ-6).
SQL_NOTE = {
    mode: compose(_NOTE, scope=_AGENT_SCOPE, owner="AND t.owner = %(owner)s", fence=_FENCE_GUARD[mode],
                  author="'endpoint'::attempt_claimer_kind", notify=compose(_NOTIFY, r="cur", kind="noted"))
    for mode in (UNFENCED, TOKEN_CHECKED)
}
SQL_NOTE_HUMAN = compose(_NOTE, scope=_HUMAN_SCOPE, owner="", fence="", author="'owner'::attempt_claimer_kind",
                         notify=compose(_NOTIFY, r="cur", kind="noted"))

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
    (verb, mode): compose(
        _INTERRUPT, scope=_AGENT_SCOPE,
        lease="{NOW} + %(lease_seconds)s * interval '1 second'" if verb == "resume" else "NULL::timestamptz",
        fence=_FENCE_GUARD[mode],
        todo_cols=compose(_TODO_COLS, r="upd"),
        notify=compose(_NOTIFY, r="upd", kind="resumed" if verb == "resume" else "interrupted"),
    )
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
    name: compose(_CANCEL_UNHELD, scope=scope, todo_cols=compose(_TODO_COLS, r="t"),
               notify=compose(_NOTIFY, r="t", kind="canceled"))
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
    name: compose(_RETRY, scope=scope, todo_cols=compose(_TODO_COLS, r="upd"),
               notify=compose(_NOTIFY, r="upd", kind="retried"), outbox=_outbox("u", None))
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# -- add: -> pending
SQL_ADD = compose("""
WITH upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, routing, max_attempts, created_at, updated_at)
  VALUES (%(endpoint_id)s, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, {NOW}, {NOW})
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, {notify} FROM upd
""", todo_cols=compose(_TODO_COLS, r="upd"), notify=compose(_NOTIFY, r="upd", kind="added"),
   outbox=_outbox("u", None))

# -- add by the owning human (the Board): -> pending, through one of the human's live
# endpoints granted the queue (the one named, else the oldest), chosen in the same statement.
# FOR SHARE: a revocation committing meanwhile is waited for, and then the endpoint no longer
# qualifies, so no todo is ever added to a revoked endpoint.
SQL_ADD_HUMAN = compose("""
WITH ep AS (
  SELECT e.id FROM endpoints e
   WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL AND %(queue)s::text = ANY(e.queues)
     AND (%(endpoint_id)s::uuid IS NULL OR e.id = %(endpoint_id)s::uuid)
   ORDER BY e.created_at, e.id
   LIMIT 1
   FOR SHARE OF e
),
upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, routing, max_attempts, created_at, updated_at)
  SELECT ep.id, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, {NOW}, {NOW} FROM ep
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, {notify} FROM upd
""", todo_cols=compose(_TODO_COLS, r="upd"), notify=compose(_NOTIFY, r="upd", kind="added"),
   outbox=_outbox("u", None))

# -- add a continuation: -> pending, continuing a todo of the caller's that has ended (done,
# canceled or a dead letter) and has no successor yet, in one statement. The predecessor is
# locked FOR SHARE, so a manual retry or a deletion waits until the insert commits; two adds
# continuing one todo race on todo_successors' primary key todos_one_successor, and the loser
# inserts nothing (ON CONFLICT waits for the winner's commit). A miss is classified after
# (SQL_CONTINUES_MISS). A human's continuation goes on the predecessor's endpoint, so a
# chain never spans endpoints.
_PRED_ENDED = "(t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL))"
SQL_ADD_CONTINUING = compose("""
WITH pred AS (
  SELECT t.id FROM todos t
   WHERE t.id = %(continues)s AND {scope} AND {ended}
   FOR SHARE OF t
),
link AS (
  INSERT INTO todo_successors (todo_id, successor_id)
  SELECT pred.id, gen_random_uuid()::text FROM pred
  ON CONFLICT (todo_id) DO NOTHING
  RETURNING todo_id, successor_id
),
upd AS (
  INSERT INTO todos AS t (id, endpoint_id, queue, title, payload, routing, max_attempts, continues_id, created_at,
                          updated_at)
  SELECT link.successor_id, %(endpoint_id)s, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s,
         link.todo_id, {NOW}, {NOW}
    FROM link
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, upd.continues_id, {notify} FROM upd
""", scope=_AGENT_SCOPE, ended=_PRED_ENDED, todo_cols=compose(_TODO_COLS, r="upd"),
   notify=compose(_NOTIFY, r="upd", kind="added"), outbox=_outbox("u", None))
SQL_ADD_HUMAN_CONTINUING = compose("""
WITH pred AS (
  SELECT t.id, t.endpoint_id FROM todos t
   WHERE t.id = %(continues)s AND {scope} AND {ended}
   FOR SHARE OF t
),
ep AS (
  SELECT e.id FROM endpoints e JOIN pred ON e.id = pred.endpoint_id
   WHERE e.revoked_at IS NULL AND %(queue)s::text = ANY(e.queues)
     AND (%(endpoint_id)s::uuid IS NULL OR e.id = %(endpoint_id)s::uuid)
   FOR SHARE OF e
),
link AS (
  INSERT INTO todo_successors (todo_id, successor_id)
  SELECT pred.id, gen_random_uuid()::text FROM pred, ep
  ON CONFLICT (todo_id) DO NOTHING
  RETURNING todo_id, successor_id
),
upd AS (
  INSERT INTO todos AS t (id, endpoint_id, queue, title, payload, routing, max_attempts, continues_id, created_at,
                          updated_at)
  SELECT link.successor_id, ep.id, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, link.todo_id,
         {NOW}, {NOW}
    FROM ep, link
  RETURNING t.*
),
{outbox}
SELECT {todo_cols}, upd.continues_id, {notify} FROM upd
""", scope=_HUMAN_SCOPE, ended=_PRED_ENDED, todo_cols=compose(_TODO_COLS, r="upd"),
   notify=compose(_NOTIFY, r="upd", kind="added"), outbox=_outbox("u", None))
# Classify a continuation that added nothing: the predecessor as the caller may see it (none:
# not_found), whether it has ended, and its successor (todo_successors, by key).
SQL_CONTINUES_MISS = {
    name: compose("SELECT t.state::text AS state, {ended} AS ended, "
                  "(SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS successor "
                  "FROM todos t WHERE t.id = %(continues)s AND {scope}", scope=scope, ended=_PRED_ENDED)
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# -- the fence lookup: the open attempt's lease_token_hash, with the todo row locked, so the
# constant-time comparison happens in Python before the transition statement runs.
SQL_FENCE_LOOKUP = compose("""
SELECT a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = %(id)s AND {scope} AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
 FOR UPDATE OF t
""", scope=_AGENT_SCOPE)

# -- a replayed close: the attempts of the todo this caller claimed with a token and closed
# with the verb's outcome, newest first, with their token hashes, so the store compares the
# presented token in constant time. Read only on a close that missed.
SQL_REPLAY_LOOKUP = compose("""
SELECT {todo_cols}, a.seq AS closed_seq, a.attempt AS closed_attempt, a.outcome::text AS closed_outcome,
       a.disposition::text AS closed_disposition, a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id
 WHERE t.id = %(id)s AND {scope} AND a.outcome = %(outcome)s::attempt_outcome
   AND a.claimer_endpoint_id = %(endpoint_id)s AND a.owner = %(owner)s AND a.lease_token_hash IS NOT NULL
 ORDER BY a.seq DESC
""", scope=_AGENT_SCOPE, todo_cols=compose(_TODO_COLS, r="t"))

# -- reads, each filtered by the owner scope in the same statement (REQ-10)
# A todo's continuation chain as get_todo returns it: every link root first, each with its
# id, title, state, attempts_total and its newest attempt's outcome (null while open) and
# the start of its summary on one line. Walked both ways from the todo, by primary key up
# and through todo_successors down, each link in the caller's scope, at most
# CHAIN_MAX links each way; of a longer chain, the CHAIN_MAX links nearest the todo.
CHAIN_MAX = 50
_CHAIN_LINK = "t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total"
_CHAIN = """(WITH RECURSIVE up AS (
    SELECT {link}, 0 AS pos
    UNION ALL
    SELECT {link}, up.pos - 1 FROM up JOIN todos t ON t.id = up.continues_id
     WHERE up.pos > -{chain_max} AND {scope}
  ), down AS (
    SELECT {link}, 0 AS pos
    UNION ALL
    SELECT {link}, down.pos + 1 FROM down JOIN todo_successors s ON s.todo_id = down.id
      JOIN todos t ON t.id = s.successor_id
     WHERE down.pos < {chain_max} AND {scope}
  ), links AS (
    SELECT * FROM up UNION SELECT * FROM down
  ), kept AS (
    SELECT c.*, count(*) OVER () AS n FROM links c ORDER BY abs(c.pos), c.pos LIMIT {chain_max}
  )
  SELECT json_build_object('truncated', max(c.n) > {chain_max}, 'links', json_agg(json_build_object(
           'id', c.id, 'title', c.title, 'state', c.state, 'dead_letter', (c.state = 'failed' AND c.next_retry_at IS NULL),
           'attempts_total', c.attempts_total, 'last_outcome', l.outcome, 'last_summary', left(l.line, 80),
           'last_summary_cut', coalesce(length(l.line) > 80, false)) ORDER BY c.pos))
    FROM kept c
    LEFT JOIN LATERAL (
      SELECT a.outcome, btrim(regexp_replace(a.summary, '\\s+', ' ', 'g')) AS line FROM attempts a
       WHERE a.todo_id = c.id AND a.seq = c.attempts_total) l ON true)"""
# The usage totals over a todo's whole history: its attempts' and what pruning folded into
# pruned_usage; each total null until some attempt reported it, the whole null when none did.
_USAGE_TOTALS = """(SELECT CASE WHEN count(a.input_tokens) + count(a.output_tokens) + count(a.cost_usd) > 0
            OR t.pruned_usage IS NOT NULL THEN json_build_object({totals}) END
     FROM attempts a WHERE a.todo_id = t.id)"""
_USAGE_TOTAL = ("'{k}', CASE WHEN count(a.{k}) > 0 OR t.pruned_usage ? '{k}' THEN coalesce(sum(a.{k}), 0) "
                "+ coalesce((t.pruned_usage ->> '{k}')::numeric, 0) END")
_GET = """
SELECT {todo_cols}, t.pruned_outcomes, t.continues_id,
       (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS continued_by_id,
       {chain} AS chain,
       {usage} AS usage,
       (SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT a.seq, attempt_public_notes(a, %(notes_limit)s::int) AS j FROM attempts a
           WHERE a.todo_id = t.id ORDER BY a.seq DESC LIMIT %(attempts_limit)s) x) AS attempts,
       (SELECT coalesce(json_object_agg(o.outcome, o.n), '{}'::json) FROM (
          SELECT a.outcome::text AS outcome, count(*) AS n FROM attempts a
           WHERE a.todo_id = t.id AND a.outcome IS NOT NULL GROUP BY 1) o) AS live_outcomes
  FROM todos t
 WHERE t.id = %(id)s AND {scope}
"""
SQL_GET = {
    name: compose(_GET, scope=scope, todo_cols=compose(_TODO_COLS, r="t"), chain=_CHAIN, chain_max=CHAIN_MAX,
                  link=_CHAIN_LINK, usage=compose(_USAGE_TOTALS, totals=", ".join(compose(_USAGE_TOTAL, k=k) for k in _USAGE_KEYS)))
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# The list's filters, each a no-op when its parameter is null. The same text pages the list
# (SQL_LIST) and tells a live stream whether a changed todo still matches (SQL_LIST_ROW).
# Title and claimant match a substring, ignoring case; the claimant is the newest attempt's
# (the holder's while one is open), a primary-key probe per row (a scalar sub-select: an EXISTS
# would be planned as a hash of every attempt with that claimant); a payload key alone matches a todo
# whose payload has it, with a value one whose payload->>key is that text.
_LIST_MATCH = """(%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)"""
# Keyset paging, newest first by the sort's time; the cursor carries the last row's key.
_LIST_PAGE = """
   AND (%(after_at)s::timestamptz IS NULL OR (t.{at}, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.{at} DESC, t.id DESC
 LIMIT %(limit)s"""
# What the list says about each row's newest attempt: its outcome (null while open), the
# claimant, and the start of its summary on one line (80 characters) with whether it was cut.
_LAST_ATTEMPT = """LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true"""
_LIST_AGENT = "SELECT {todo_cols} FROM todos t WHERE {scope} AND {match}{page}"
# A human's todos span their endpoints: the newest page of each endpoint, then the newest
# of those, and only then each row's newest attempt (a primary-key probe per row shown).
# Sorted by created time, each endpoint walks its (endpoint_id, created_at DESC, id) index, so
# a page never sorts the whole history. Sorted by updated time, each endpoint's matching
# todos are sorted (top-N): an index on updated_at would end a heartbeat's heap-only update.
_LIST_HUMAN = {
    "created": """
SELECT {todo_cols}, l.*
  FROM (SELECT t.* FROM endpoints e CROSS JOIN LATERAL (
          SELECT t.* FROM todos t
           WHERE t.endpoint_id = e.id
             AND {match}{page}) t
         WHERE e.user_id = %(user_id)s
         ORDER BY t.{at} DESC, t.id DESC
         LIMIT %(limit)s) t
  {last_attempt}
 ORDER BY t.{at} DESC, t.id DESC""",
    "updated": """
SELECT {todo_cols}, l.*
  FROM (SELECT t.* FROM todos t
         WHERE t.endpoint_id = ANY (ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
           AND {match}{page}) t
  {last_attempt}
 ORDER BY t.{at} DESC, t.id DESC""",
}
SQL_LIST = {
    (who, sort): compose(_LIST_AGENT if who == "agent" else _LIST_HUMAN[sort],
                         scope=_AGENT_SCOPE if who == "agent" else _HUMAN_SCOPE, match=_LIST_MATCH,
                         page=_LIST_PAGE, at=f"{sort}_at", last_attempt=_LAST_ATTEMPT,
                         todo_cols=compose(_TODO_COLS, r="t"))
    for who in ("agent", "human") for sort in ("created", "updated")
}
# One of a human's todos as a list row, and whether it matches the list's filters (a live
# stream's changed todo); nothing when it is not the human's.
SQL_LIST_ROW = compose("""
SELECT {todo_cols}, l.*, coalesce({match}, false) AS matches
  FROM todos t {last_attempt}
 WHERE t.id = %(id)s AND {scope}""", match=_LIST_MATCH, last_attempt=_LAST_ATTEMPT, scope=_HUMAN_SCOPE,
                       todo_cols=compose(_TODO_COLS, r="t"))

# Classify a miss: the todo as the caller may see it, or nothing (REQ-19).
SQL_CLASSIFY = {
    name: compose("SELECT t.state::text AS state, t.owner, t.lease_expires_at <= {NOW} AS lapsed, "
                  "t.next_retry_at, t.queue, t.queue = ANY({paused}) AS paused FROM todos t WHERE t.id = %(id)s AND {scope}",
                  scope=scope, paused=_PAUSED)
    for name, scope in (("agent", _AGENT_SCOPE), ("human", _HUMAN_SCOPE))
}

# -- sweeps: system-wide, no caller scope, read nothing out (REQ-10)

# reaper: claimed, lease lapsed -> pending (attempt < max) or failed dead letter; closes
# reaped/requeued or reaped/dead_lettered. SKIP LOCKED: safe with several processes.
SQL_REAP = compose("""
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
""", todo_cols=compose(_TODO_COLS, r="upd"), notify=compose(_NOTIFY, r="upd", kind="reaped"),
   outbox=_outbox("u", "c"))

# retry scheduler: failed with next_retry_at <= now -> pending. Closes and opens nothing.
SQL_RETRY_DUE = compose("""
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
""", todo_cols=compose(_TODO_COLS, r="upd"), notify=compose(_NOTIFY, r="upd", kind="requeued"),
   outbox=_outbox("u", None))

# retention: terminal todos older than the bound are deleted; attempts cascade (REQ-11), and
# the todo_successors rows naming them go in the same statement.
# Live todos (pending, held, failed with a retry window) are never touched.
SQL_RETENTION = compose("""
WITH old AS (
  SELECT t.id FROM todos t
   WHERE t.updated_at < {NOW} - %(retention_seconds)s * interval '1 second'
     AND (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
links AS (
  DELETE FROM todo_successors s
   WHERE s.todo_id = ANY(ARRAY(SELECT id FROM old)) OR s.successor_id = ANY(ARRAY(SELECT id FROM old))
)
DELETE FROM todos t USING old WHERE t.id = old.id
RETURNING t.id, t.endpoint_id, t.queue, {notify}
""", notify=compose(_NOTIFY, r="t", kind="deleted"))

# endpoint revocation: the endpoint is revoked, and each of its held todos -> failed dead
# letter, closing the open attempt revoked/dead_lettered. System-wide within the endpoint.
SQL_REVOKE = compose("""
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
       (SELECT pg_notify('{channel}', json_build_object('kind', 'endpoint_revoked', 'endpoint', ep.id)::text)
          FROM ep) AS revoked_notice,
       coalesce((SELECT json_agg(json_build_object(
          'todo', {todo_json}, 'closed', row_to_json(c), 'n', {notify}))
         FROM upd JOIN closed c ON c.todo_id = upd.id), '[]'::json) AS todos
""", todo_json="row_to_json(upd)", notify=compose(_NOTIFY, r="upd", kind="revoked"),
   outbox=_outbox("u", "c"))

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
# Readiness (/readyz): the newest migration applied, for the server to compare with the
# newest it knows (migrations apply in order, so every earlier one is applied too).
SQL_SCHEMA_VERSION = "SELECT coalesce(max(version), 0) AS version FROM schema_migrations"
# The doorbell heartbeat: each listening endpoint's oldest pending todos (ids only), so one
# busy endpoint can never starve another's. Walks the pending index per endpoint; passes
# over the queues the endpoint's human paused (nothing there can be claimed); with a queue,
# that queue only (a resumed queue rings its ready todos).
SQL_READY_TODOS = """
SELECT t.id, t.endpoint_id::text AS endpoint_id, t.queue
  FROM endpoints e
  CROSS JOIN LATERAL (
    SELECT t.id, t.endpoint_id, t.queue FROM todos t
     WHERE t.endpoint_id = e.id AND t.state = 'pending'
       AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
       AND t.queue <> ALL(ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = e.user_id))
     ORDER BY t.created_at, t.id LIMIT %(limit)s) t
 WHERE e.id = ANY(%(endpoint_ids)s::uuid[])
"""

# -- queue pauses (migration 0003), each scoped to the owning human in the statement
# a queue of the human's endpoints -> paused (already paused: no row, nothing notified)
SQL_QUEUE_PAUSE = compose("""
WITH ins AS (
  INSERT INTO queue_pauses (user_id, queue, paused_at)
  SELECT %(user_id)s, %(queue)s, {NOW}
   WHERE EXISTS (SELECT 1 FROM endpoints e WHERE e.user_id = %(user_id)s AND %(queue)s::text = ANY(e.queues))
  ON CONFLICT (user_id, queue) DO NOTHING
  RETURNING queue, paused_at
)
SELECT ins.queue, ins.paused_at,
       pg_notify('{channel}', json_build_object('kind', 'queue_paused', 'user', %(user_id)s::bigint,
                                                'queue', ins.queue)::text)
  FROM ins
""")
# paused -> resumed; every process's doorbell then rings the queue's ready todos
SQL_QUEUE_RESUME = compose("""
WITH del AS (
  DELETE FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = %(queue)s
  RETURNING p.queue
)
SELECT del.queue,
       pg_notify('{channel}', json_build_object('kind', 'queue_resumed', 'user', %(user_id)s::bigint,
                                                'queue', del.queue)::text)
  FROM del
""")
# Classify a pause or resume that changed nothing: is the queue one of the human's, and is
# it paused (since when)?
SQL_QUEUE_PAUSE_STATE = """
SELECT EXISTS (SELECT 1 FROM endpoints e WHERE e.user_id = %(user_id)s AND %(queue)s::text = ANY(e.queues)) AS known,
       (SELECT p.paused_at FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = %(queue)s) AS paused_at
"""
# One human's paused queues, for the process's pause cache.
SQL_QUEUES_PAUSED_BY = "SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s"
# /metrics: how many humans have paused each queue (read at scrape; one row per pause).
SQL_QUEUE_PAUSES_ALL = "SELECT p.queue, count(*) AS n FROM queue_pauses p GROUP BY 1"

# -- the Board's overview, each scoped to the human in the statement (REQ-10)
# Counts of the human's todos by queue and state: per endpoint of theirs, an index-only scan
# of its (endpoint_id, created_at, id) index, which carries queue, state and next_retry_at
# (an aggregate per endpoint, so the planner cannot turn it into a scan of every todo).
# Every queue of their live endpoints and every paused one is listed, with no todos too.
SQL_OVERVIEW_COUNTS = """
SELECT coalesce(c.queue, g.queue) AS queue, coalesce(c.pending, 0) AS pending, coalesce(c.claimed, 0) AS claimed,
       coalesce(c.input_required, 0) AS input_required, coalesce(c.auth_required, 0) AS auth_required,
       coalesce(c.retrying, 0) AS retrying, coalesce(c.dead, 0) AS dead, coalesce(c.done, 0) AS done,
       coalesce(c.canceled, 0) AS canceled, p.paused_at
  FROM (
    SELECT x.queue, sum(x.pending)::bigint AS pending, sum(x.claimed)::bigint AS claimed,
           sum(x.input_required)::bigint AS input_required, sum(x.auth_required)::bigint AS auth_required,
           sum(x.retrying)::bigint AS retrying, sum(x.dead)::bigint AS dead, sum(x.done)::bigint AS done,
           sum(x.canceled)::bigint AS canceled
      FROM endpoints e
      CROSS JOIN LATERAL (
        SELECT t.queue,
               count(*) FILTER (WHERE t.state = 'pending') AS pending,
               count(*) FILTER (WHERE t.state = 'claimed') AS claimed,
               count(*) FILTER (WHERE t.state = 'input_required') AS input_required,
               count(*) FILTER (WHERE t.state = 'auth_required') AS auth_required,
               count(*) FILTER (WHERE t.state = 'failed' AND t.next_retry_at IS NOT NULL) AS retrying,
               count(*) FILTER (WHERE t.state = 'failed' AND t.next_retry_at IS NULL) AS dead,
               count(*) FILTER (WHERE t.state = 'done') AS done,
               count(*) FILTER (WHERE t.state = 'canceled') AS canceled
          FROM todos t WHERE t.endpoint_id = e.id GROUP BY t.queue) x
     WHERE e.user_id = %(user_id)s
     GROUP BY x.queue) c
  FULL JOIN (
    SELECT unnest(e.queues) AS queue FROM endpoints e WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL
    UNION SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s) g ON g.queue = c.queue
  LEFT JOIN queue_pauses p ON p.user_id = %(user_id)s AND p.queue = coalesce(c.queue, g.queue)
 ORDER BY 1
"""
# The overview's chart: attempts of the human's todos closed in the window, by queue,
# outcome and bucket (0: the newest), through the BRIN index on ended_at: the page ranges
# that hold attempts closed in the window, never the whole history. The scope is the
# human's endpoints as an array read once; the planner joins the window's attempts to the
# human's todos by key, from whichever side it finds smaller.
SQL_OVERVIEW_OUTCOMES = compose("""
SELECT t.queue, a.outcome::text AS outcome,
       floor(extract(epoch FROM {NOW} - a.ended_at) / %(bucket_seconds)s)::int AS bucket,
       count(*) AS n
  FROM attempts a JOIN todos t ON t.id = a.todo_id
 WHERE a.ended_at > {NOW} - %(window_seconds)s * interval '1 second' AND a.ended_at <= {NOW}
   AND a.outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped')
   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
 GROUP BY 1, 2, 3
""")


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
SQL_ATTEMPT_SUMMARY = compose("SELECT {summary} AS summary FROM todos t WHERE t.id = %(id)s",
                              summary=_summary("t", None))

# -- reads: the statements that change nothing, so the store may run one again on a fresh
# connection when its connection died under it (tests/unit/test_statements.py holds each to
# a plain SELECT with no pg_notify).
READS = frozenset({
    *SQL_GET.values(), *SQL_CONTINUES_MISS.values(), *SQL_LIST.values(), SQL_LIST_ROW, *SQL_CLASSIFY.values(), SQL_REPLAY_LOOKUP,
    SQL_USER_BY_NAME, SQL_USER_BY_ID, SQL_ENDPOINT_AUTH, SQL_ENDPOINTS_OF_USER, SQL_ENDPOINT_OWNER,
    SQL_QUEUE_STATES, SQL_READY_TODOS, SQL_ATTEMPT_SUMMARY, SQL_QUEUE_PAUSE_STATE, SQL_QUEUE_PAUSES_ALL,
    SQL_QUEUES_PAUSED_BY, SQL_OVERVIEW_COUNTS, SQL_OVERVIEW_OUTCOMES,
})
