"""Mutation testing of the store's guards: break one guard at a time and run the tests that
should notice; a mutant the tests do not kill is a guard nothing holds.

Each mutant names one exact piece of source text and what it becomes. The text must occur
exactly once in its file (in a board/store/sql/ file, as often as the mutant says in the statement
it names, all of them mutated), and in a migration it must be part of the definition that runs:
not a comment, and not in an object a later migration replaces (the list fails loudly when
the code moves on without it, so the list is kept with the code: add a mutant with every new
guard). A mutant is applied to a copy of the package in a temporary folder, never to the
work tree, and the tests run in a subprocess that imports the copy.

    .venv/bin/python scripts/mutants.py              # every mutant
    .venv/bin/python scripts/mutants.py --group fence
    .venv/bin/python scripts/mutants.py --list

Exit status 0 when every mutant selected was killed, 1 when any survived, 2 when the list
is out of date with the code.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LIFECYCLE = "tests/integration/test_lifecycle.py"
FENCE = "tests/integration/test_fence.py"
# The fence mutants, which CI runs, name just the test that kills each: a renamed test is an
# error of the run, never a survivor.
FENCED = f"{FENCE}::test_fenced_attempt"
RACES = "tests/integration/test_concurrency.py"
MODEL = "tests/integration/test_store_model.py"
INVARIANTS = "tests/integration/test_attempt_invariants.py"
BOUNDARIES = "tests/integration/test_boundaries.py"
PAUSES = "tests/integration/test_queue_pauses.py"
NOTES = "tests/integration/test_attempt_notes.py"
QUESTIONS = "tests/integration/test_questions.py"
HOOKS = "tests/integration/test_hooks.py"
METRICS = "tests/acceptance/test_metrics.py"
PRUNE = "tests/integration/test_prune_counts.py"
OAUTH = "tests/acceptance/test_oauth.py"
CHARTS = "tests/acceptance/test_board_charts.py"
FOLDED = "tests/integration/test_outcomes_folded.py"
OUTAGE = "tests/integration/test_outage.py"
COUNTS = "tests/integration/test_todo_counts.py"
SCREENING = "tests/unit/test_secret_screening.py"
SCREENING_MCP = "tests/acceptance/test_mcp_secret_screening.py"
BOARD_FORMS = "tests/acceptance/test_board_forms.py"
BOARD_AUTH = "tests/acceptance/test_board_auth.py"
WORKER_API = "tests/acceptance/test_worker_api.py"
WORKER_COMMAND = "tests/acceptance/test_worker_command.py"
BOUNDS = "tests/acceptance/test_argument_bounds.py"
DUE_TIMER = "tests/integration/test_due_timer.py"
DOORBELL = "tests/acceptance/test_mcp_doorbell.py"
ORDER_MCP = "tests/acceptance/test_mcp_claim_order.py"
PLANS_MCP = "tests/acceptance/test_mcp_plans.py"
DEPENDENCIES = "tests/integration/test_dependencies.py"
CLAIM_ORDER_BOARD = "tests/acceptance/test_board_claim_order.py"
SCHEDULES = "tests/integration/test_schedules.py"
PLANS_BOARD = "tests/acceptance/test_board_plans.py"
TEAMS = "tests/integration/test_teams.py"
BOARD_ACTIVITY = "tests/acceptance/test_board_activity.py"
BOARD_ROWS = "tests/integration/test_board_rows.py"
TEAMS_MCP = "tests/acceptance/test_mcp_teams.py"
TEAMS_OAUTH = "tests/acceptance/test_oauth_teams.py"
TEAM_POOL = TEAMS_MCP + "::test_a_planners_todos_are_drained_by_the_teams_pool_each_holding_what_it_claimed[modern-vended]"
TEAMS_SHARE = "tests/acceptance/test_mcp_attempts.py::test_two_endpoints_of_one_team_share_its_todos"
TEAM_REVOKE = TEAMS_MCP + "::test_revoking_a_team_endpoint_dead_letters_only_what_it_held"
TEAMS_BOARD = "tests/acceptance/test_board_teams.py"
REDIRECTS = (OAUTH + "::test_a_loopback_redirect_matches_whatever_its_port_and_nothing_else_does",
             OAUTH + "::test_a_redirect_a_browser_would_run_or_a_plain_http_host_is_refused_at_registration",
             OAUTH + "::test_a_private_use_redirect_registers_and_authorizes_to_the_consent_screen")


# How a claim counts the attempts it prunes, by outcome, into todos.pruned_outcomes.
_PRUNED_BY_OUTCOME = "FROM pruned WHERE pruned.todo_id = t.id\n                      GROUP BY 1) p), '{}') END,"
# The fence guard of a holder statement: without a token (token_checked false) only an
# attempt claimed without one qualifies.
_FENCE = " AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)"
_NOW = "coalesce(%(now)s::timestamptz, now())"
_AGENT_OWNER = " AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)"
# The provider's guards (board/oauth/server.py) and the tests that hold them.
_REUSED = 'if row["rotated"] and not row["in_grace"]:'
OAUTH_CODE_REUSE = f"{OAUTH}::test_a_code_used_twice_is_refused_and_revokes_the_grant_it_made"
OAUTH_GRACE = f"{OAUTH}::test_two_refreshes_racing_with_one_token_both_get_the_same_new_pair_and_the_grant_stays_live"
OAUTH_AFTER_GRACE = f"{OAUTH}::test_a_refresh_token_presented_again_gets_the_same_pair_within_the_grace_and_revokes_the_grant_after"
OAUTH_EXPIRED_REUSE = f"{OAUTH}::test_a_rotated_refresh_token_presented_after_its_own_expiry_still_revokes_the_grant"
OAUTH_RECONSENT = f"{OAUTH}::test_a_second_consent_by_the_same_client_updates_its_grant_and_ends_the_earlier_tokens"
OAUTH_FORGED_CONSENT = f"{OAUTH}::test_a_consent_post_without_csrf_or_from_another_human_is_refused_and_creates_nothing"
# The caller's scope on a todo read or changed by id (migration 0014).
_SCOPE = "todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)"
CALLER_RULES = "migrations/0014_caller_rules.sql"
ORDER = "tests/integration/test_claim_order.py"
_NOT_PAUSED = ("     AND (%(ignore_pauses)s OR NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s"
               " AND p.queue = t.queue))\n")


@dataclass(frozen=True)
class Mutant:
    name: str
    group: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    why: str
    # In a file of board/store/sql/, the statement (or statements) whose text holds the target; it
    # must occur there `times` times in all (every occurrence is mutated), wherever else the
    # file has it.
    statement: str | tuple[str, ...] | None = None
    times: int = 1

    @property
    def statements(self) -> tuple[str, ...]:
        return (self.statement,) if isinstance(self.statement, str) else self.statement or ()


SQL = "board/store/sql/"
MUTANTS: tuple[Mutant, ...] = (
    # -- the fence (REQ-6) ---------------------------------------------------------------
    Mutant("fence-complete-without-token", "fence", SQL + "closes.sql", _FENCE, "",
           (f"{FENCED}[complete-no_token]",),
           "complete without a token closes a fenced attempt", "todo_complete"),
    Mutant("fence-fail-release-without-token", "fence", SQL + "closes.sql", _FENCE, "",
           (f"{FENCED}[fail-no_token]",),
           "fail or release without a token closes a fenced attempt", "todo_fail_or_release"),
    Mutant("fence-heartbeat-without-token", "fence", SQL + "holds.sql", _FENCE, "",
           (f"{FENCED}[heartbeat-no_token]",),
           "heartbeat without a token extends a fenced lease", "todo_heartbeat"),
    Mutant("fence-interrupt-without-token", "fence", SQL + "holds.sql", _FENCE, "",
           (f"{FENCED}[interrupt-no_token]",),
           "interrupt without a token moves a fenced attempt", "todo_interrupt"),
    Mutant("fence-resume-without-token", "fence", SQL + "holds.sql", _FENCE, "",
           (f"{FENCED}[resume-no_token]",), "resume without a token moves a fenced attempt", "todo_resume"),
    Mutant("fence-note-without-token", "fence", SQL + "holds.sql", _FENCE, "",
           (f"{FENCED}[note-no_token]",), "a note without a token lands on a fenced attempt", "attempt_note_add"),
    Mutant("fence-unfenced-call-checked", "fence", "board/store/base.py",
           "return await self._fetch(sql, dict(params, token_checked=False), op=op, todo_id=todo_id, one=True)",
           "return await self._fetch(sql, dict(params, token_checked=True), op=op, todo_id=todo_id, one=True)",
           (f"{FENCED}[heartbeat-no_token]",),
           "a holder call without a token runs as if its token had been checked"),
    Mutant("fence-unfenced-close-checked", "fence", "board/store/closes.py",
           "row = await self._fetch(_CLOSE[kind], dict(params, token_checked=False), op=kind,\n",
           "row = await self._fetch(_CLOSE[kind], dict(params, token_checked=True), op=kind,\n",
           (f"{FENCED}[complete-no_token]",), "a close without a token runs as if its token had been checked"),
    Mutant("fence-any-token-matches", "fence", "board/store/base.py",
           "if stored is None or not hmac.compare_digest(bytes(stored), presented):", "if stored is None:",
           (f"{FENCED}[heartbeat-wrong_token]",), "a wrong or stale token is accepted"),
    Mutant("fence-token-on-unfenced-attempt", "fence", "board/store/base.py",
           "if stored is None or not hmac.compare_digest(bytes(stored), presented):",
           "if stored is not None and not hmac.compare_digest(bytes(stored), presented):",
           (f"{LIFECYCLE}::test_a_token_on_an_unfenced_attempt_is_conflict",),
           "a made-up token is accepted on an unfenced attempt"),
    # -- owner and state checks ----------------------------------------------------------
    Mutant("owner-close", "owner", SQL + "closes.sql", " AND t.owner = %(owner)s", "",
           (FENCE, LIFECYCLE), "another holder's attempt can be completed", "todo_complete", times=2),
    Mutant("owner-fail-release", "owner", SQL + "closes.sql", _AGENT_OWNER, "",
           (FENCE, LIFECYCLE), "another holder's attempt can be failed or released", "todo_fail_or_release",
           times=2),
    Mutant("owner-heartbeat", "owner", SQL + "holds.sql", _AGENT_OWNER, "",
           (FENCE,), "another holder's lease can be extended", "todo_heartbeat"),
    Mutant("owner-interrupt", "owner", SQL + "holds.sql", _AGENT_OWNER, "",
           (FENCE,), "another holder's attempt can be interrupted", "todo_interrupt"),
    Mutant("owner-note", "owner", SQL + "holds.sql", _AGENT_OWNER, "",
           (FENCE, NOTES), "another holder's attempt takes a note", "attempt_note_add"),
    Mutant("state-heartbeat-on-interrupted", "state", "board/store/holds.py",
           'params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,\n'
           '                              from_states=["claimed"])',
           'params = self._params(caller, id=todo_id, lease_seconds=self._lease(lease_seconds), now=now,\n'
           '                              from_states=["claimed", "input_required", "auth_required"])',
           (BOUNDARIES, FENCE), "a heartbeat revives an interrupted todo's lease"),
    # -- a call's one deadline while Postgres is away (docs/reliability.md) ---------------
    Mutant("deadline-per-checkout", "deadline", "board/store/base.py",
           "    token = _CALL_DEADLINE.set(deadline)\n", "    token = _CALL_DEADLINE.set(None)\n",
           (OUTAGE,), "each checkout of a call waits on its own while Postgres is away"),
    # -- locks ---------------------------------------------------------------------------
    Mutant("lock-claim-by-id", "lock", SQL + "claims.sql",
           "   FOR UPDATE OF t\n),\ncand AS (", "),\ncand AS (",
           (RACES,), "two by-id claims of one todo both win", "todo_claim"),
    Mutant("lock-claim-next", "lock", SQL + "claims.sql",
           "   ORDER BY t.priority, t.created_at, t.id\n   LIMIT %(limit)s\n   FOR UPDATE OF t SKIP LOCKED",
           "   ORDER BY t.priority, t.created_at, t.id\n   LIMIT %(limit)s",
           (RACES,), "two claim_next calls take the same todo", "todo_claim_fast"),
    # Not listed: dropping the reaper's FOR UPDATE SKIP LOCKED. The attempt's own
    # `outcome IS NULL`, re-checked after a row-lock wait, already keeps a double close out;
    # the lock keeps the todo-then-attempt lock order of every transition (so a takeover and
    # the reaper cannot deadlock), which no bounded test shows.
    # -- boundaries ----------------------------------------------------------------------
    Mutant("lease-boundary-takeover", "boundary", SQL + "claims.sql",
           "(t.state = 'claimed' AND t.lease_expires_at <= " + _NOW, "(t.state = 'claimed' AND t.lease_expires_at < " + _NOW,
           (BOUNDARIES, LIFECYCLE), "a lease that lapses this instant cannot be taken over by id", "todo_claim"),
    Mutant("lease-boundary-reaper", "boundary", SQL + "sweeps.sql",
           "t.lease_expires_at <= " + _NOW, "t.lease_expires_at < " + _NOW,
           (BOUNDARIES, LIFECYCLE), "the reaper misses a lease that lapses this instant", "attempts_reap_lapsed"),
    Mutant("cap-boundary-takeover", "boundary", SQL + "claims.sql",
           "AND t.attempt < t.max_attempts))", "AND t.attempt <= t.max_attempts))",
           (BOUNDARIES, LIFECYCLE), "the last allowed attempt's lapsed lease is taken over instead of dead-lettered",
           "todo_claim"),
    Mutant("cap-boundary-fail", "boundary", SQL + "closes.sql",
           "= 'failed' AND t.attempt < t.max_attempts", "= 'failed' AND t.attempt <= t.max_attempts",
           (BOUNDARIES, LIFECYCLE), "a fail at max_attempts schedules a retry instead of a dead letter",
           "todo_fail_or_release"),
    Mutant("cap-boundary-reaper", "boundary", SQL + "sweeps.sql",
           "CASE WHEN cand.attempt < cand.max_attempts THEN 'requeued' ELSE 'dead_lettered' END",
           "CASE WHEN cand.attempt <= cand.max_attempts THEN 'requeued' ELSE 'dead_lettered' END",
           (BOUNDARIES, INVARIANTS), "the reaper requeues the last allowed attempt", "attempts_reap_lapsed"),
    # -- the died mapping (REQ-4) --------------------------------------------------------
    Mutant("died-rule", "died", "migrations/0005_rules_in_sql.sql",
           "SELECT coalesce(outcome IN ('lease_expired', 'reaped'), false)",
           "SELECT coalesce(outcome IN ('lease_expired'), false)",
           (LIFECYCLE,), "get_todo and prior_attempts say a reaped attempt did not die"),
    Mutant("died-in-hook-payload", "died", SQL + "sweeps.sql",
           "a.claimant, attempt_died(a.outcome) AS died", "a.claimant, false AS died",
           ("tests/integration/test_hooks.py",), "a reaped dead letter's hook payload says it did not die",
           "attempts_reap_lapsed"),
    Mutant("dead-letter-rule", "died", "migrations/0005_rules_in_sql.sql",
           "SELECT state = 'failed' AND next_retry_at IS NULL", "SELECT state = 'failed'",
           (LIFECYCLE, BOUNDARIES), "a failed todo waiting for its retry counts as a dead letter"),
    # -- exact counts across pruning (REQ-11) --------------------------------------------
    # One statement counts every outcome a claim prunes; each mutant drops one outcome that
    # can close an attempt while its todo lives on (completed and canceled cannot).
    Mutant("prune-count-lease-expired", "prune", SQL + "claims.sql",
           _PRUNED_BY_OUTCOME,
           _PRUNED_BY_OUTCOME.replace("= t.id", "= t.id AND outcome <> 'lease_expired'"),
           (PRUNE,), "pruned lease_expired attempts are not counted", "todo_claim"),
    Mutant("prune-count-reaped", "prune", SQL + "claims.sql",
           _PRUNED_BY_OUTCOME,
           _PRUNED_BY_OUTCOME.replace("= t.id", "= t.id AND outcome <> 'reaped'"),
           (PRUNE,), "pruned reaped attempts are not counted", "todo_claim"),
    Mutant("prune-count-revoked", "prune", SQL + "claims.sql",
           _PRUNED_BY_OUTCOME,
           _PRUNED_BY_OUTCOME.replace("= t.id", "= t.id AND outcome <> 'revoked'"),
           (PRUNE,), "pruned revoked attempts are not counted (the Board's claim prunes them: the endpoint "
           "is revoked)", "todo_claim"),
    Mutant("prune-count-merge", "prune", SQL + "claims.sql",
           "ELSE t.pruned_outcomes || coalesce((", "ELSE coalesce((",
           (PRUNE,), "a prune forgets the outcomes earlier prunes counted that it prunes none of", "todo_claim"),
    # -- scope (REQ-10) ------------------------------------------------------------------
    Mutant("scope-agent-queues", "scope", CALLER_RULES,
           "ELSE endpoint_id = caller_endpoint AND queue = ANY(caller_queues) END",
           "ELSE endpoint_id = caller_endpoint END",
           (LIFECYCLE,), "an endpoint reads its todos in a queue it is no longer granted"),
    Mutant("scope-human", "scope", CALLER_RULES,
           "SELECT ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = $1)", "SELECT ARRAY(SELECT e.id FROM endpoints e)",
           (LIFECYCLE,), "a human reads another human's todos"),
    Mutant("scope-agent-endpoint", "scope", CALLER_RULES,
           "ELSE endpoint_id = caller_endpoint AND queue", "ELSE queue",
           (LIFECYCLE,), "an endpoint reads another endpoint's todos of a queue it is granted"),
    # -- notes on an attempt (migration 0004) --------------------------------------------
    Mutant("notes-cap", "notes", SQL + "holds.sql",
           "x.n <= att.notes_count - %(notes_max)s", "x.n < att.notes_count - %(notes_max)s",
           (NOTES,), "one note more than the per-attempt cap is kept", "attempt_note_add"),
    Mutant("notes-pruned-count", "notes", SQL + "holds.sql",
           "coalesce(a.notes_count, 0) + 1, %(notes_max)s::integer, a.waiting_n)), 0),",
           "0, %(notes_max)s::integer, a.waiting_n)), 0),",
           (NOTES,), "notes deleted past the cap are not counted", "attempt_note_add"),
    Mutant("notes-scope-human", "notes", SQL + "holds.sql",
           "WHERE t.id = %(id)s AND " + _SCOPE, "WHERE t.id = %(id)s",
           (NOTES,), "a human notes on another human's todo", "attempt_note_add"),
    # -- questions and answers on an interrupt (migration 0009) ---------------------------
    Mutant("question-pruned", "questions", SQL + "holds.sql",
           "x.n <= att.notes_count - %(notes_max)s\n     AND x.kind = 'working'",
           "x.n <= att.notes_count - %(notes_max)s",
           (QUESTIONS,), "the notes cap deletes a question and its answers", "attempt_note_add"),
    Mutant("answer-choice", "questions", SQL + "holds.sql",
           "WHERE %(choice)s::text IS NULL OR q.choices ? %(choice)s::text", "WHERE true",
           (QUESTIONS,), "an answer takes a choice the question does not offer", "todo_answer_human"),
    Mutant("answer-scope", "questions", SQL + "holds.sql",
           "WHERE t.id = %(id)s AND " + _SCOPE, "WHERE t.id = %(id)s",
           (QUESTIONS,), "a human answers another human's todo", "todo_answer_human"),
    Mutant("answer-lease", "questions", SQL + "holds.sql",
           "         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second'\n    FROM prev",
           "         lease_expires_at = a.lease_expires_at\n    FROM prev",
           (QUESTIONS,), "an answer gives the holder no lease to resume in", "todo_answer_human"),
    Mutant("reap-unanswered", "questions", SQL + "sweeps.sql",
           "AND a.outcome IS NULL AND a.answered_at IS NOT NULL))", "AND a.outcome IS NULL))",
           (QUESTIONS,), "the reaper takes a todo still waiting for its answer", "attempts_reap_lapsed"),
    Mutant("expire-answered", "questions", SQL + "sweeps.sql",
           "a.answered_at IS NULL", "true",
           (QUESTIONS,), "an answered question expires", "questions_expire", times=2),
    Mutant("hook-board-url-bare", "questions", SQL + "holds.sql",
           "'board_url', %(public_url)s::text || '/todos/' || u.id",
           "'board_url', coalesce(%(public_url)s::text, '') || '/todos/' || u.id",
           (HOOKS,), "a hook event names a bare path as the Board URL when no public URL is set", "todo_interrupt"),
    Mutant("hook-auth-required-event", "questions", SQL + "holds.sql",
           "WHEN u.state = 'auth_required' THEN 'todo.auth_required'",
           "WHEN u.state = 'auth_required' THEN 'todo.input_required'",
           (HOOKS,), "an interrupt for authorization is announced as one for input", "todo_interrupt"),
    Mutant("metrics-every-answer-timed", "questions", "board/ops/metrics.py",
           'if t.kind == "answered" and t.waited_seconds is not None:\n'
           '            self.question_answer.labels(queue).observe(max(0.0, t.waited_seconds))',
           'if t.kind == "answered":\n'
           '            self.question_answer.labels(queue).observe(max(0.0, t.waited_seconds or 0.0))',
           (METRICS,), "a later answer to the same question is timed as if it were the first"),
    # -- queue pauses and the overview (migration 0003) --------------------------------
    Mutant("pause-claim-next", "pause", SQL + "claims.sql", _NOT_PAUSED + "   ORDER BY t.priority, t.created_at",
           "   ORDER BY t.priority, t.created_at",
           (PAUSES,), "an agent's claim_next takes a todo of a paused queue", "todo_claim_fast"),
    Mutant("pause-claim-by-id", "pause", SQL + "claims.sql", _NOT_PAUSED + "   FOR UPDATE OF t\n),",
           "   FOR UPDATE OF t\n),",
           (PAUSES,), "an agent claims a todo of a paused queue by id", "todo_claim_fast"),
    Mutant("pause-by-id-ignored", "pause", "board/store/claims.py",
           '"ignore_pauses": not isinstance(caller, Agent)}', '"ignore_pauses": True}',
           (PAUSES,), "an agent's claim by id is not held back by a paused queue"),
    Mutant("pause-next-ignored", "pause", "board/store/claims.py",
           '"ignore_pauses": paused is not None}', '"ignore_pauses": True}',
           (PAUSES,), "an agent's claim_next is not held back by a paused queue"),
    Mutant("pause-scope", "pause", SQL + "claims.sql",
           "FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)",
           "FROM queue_pauses p WHERE p.queue = t.queue)",
           (PAUSES,), "one human's pause holds another human's agents back",
           ("todo_claim_fast", "todo_claim"), times=5),
    # -- OAuth grants (board/store/sql/oauth.sql, accounts.sql's endpoint_auth) --------------
    Mutant("oauth-refresh-rotates-twice", "oauth", SQL + "oauth.sql", " AND t.rotated_at IS NULL", "",
           (OAUTH,), "two refreshes with one token both rotate it", "oauth_refresh_rotate"),
    Mutant("oauth-expired-access-token", "oauth", SQL + "accounts.sql",
           " AND t.expires_at > now() AND e.revoked_at IS NULL;", " AND e.revoked_at IS NULL;",
           (OAUTH,), "an expired access token still authenticates", "endpoint_auth"),
    Mutant("oauth-revoked-grant-token", "oauth", SQL + "accounts.sql",
           "t.kind = 'access' AND t.expires_at > now() AND e.revoked_at IS NULL;",
           "t.kind = 'access' AND t.expires_at > now();",
           (OAUTH,), "a revoked grant's access token still authenticates", "endpoint_auth"),
    Mutant("oauth-refresh-token-as-bearer", "oauth", SQL + "accounts.sql",
           "WHERE t.token_hash = %(token_hash)s AND t.kind = 'access' AND", "WHERE t.token_hash = %(token_hash)s AND",
           (OAUTH,), "a refresh token is accepted at /mcp as an access token", "endpoint_auth"),
    Mutant("overview-counts-scope", "pause", SQL + "board.sql",
           "   WHERE c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))\n),",
           "   WHERE c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e))\n),",
           (PAUSES,), "the overview counts another human's todos", "overview_counts"),
    Mutant("overview-chart-scope", "pause", SQL + "board.sql",
           "                   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))",
           "                   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e))",
           (PAUSES,), "the overview's chart counts another human's attempts", "overview_outcomes"),
    # -- the charts' counts of deleted attempts (migration 0007) ----------------------------
    Mutant("chart-count-pruned", "chart", "migrations/0012_outcomes_folded.sql",
           "DO UPDATE SET n = c.n + 1", "DO UPDATE SET n = c.n",
           (CHARTS,), "a pruned attempt in a bucket already counted is not counted"),
    Mutant("chart-count-deleted-todo", "chart", "migrations/0012_outcomes_folded.sql",
           "DO UPDATE SET n = c.n + excluded.n", "DO UPDATE SET n = excluded.n",
           (CHARTS,), "a deleted todo's attempts replace the bucket's count instead of adding to it"),
    Mutant("chart-deleted-scope", "chart", SQL + "board.sql",
           "           AND c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))",
           "           AND c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e))",
           (CHARTS,), "the chart counts another human's deleted attempts", "overview_outcomes"),
    Mutant("chart-without-deleted", "chart", SQL + "board.sql",
           "        SELECT c.queue, c.outcome, c.bucket, c.n\n", "        SELECT c.queue, c.outcome, c.bucket, 0\n",
           (CHARTS,), "the chart counts only the attempt rows that survive pruning and retention", "overview_outcomes"),
    # -- the charts' fold (migration 0012) ----------------------------------------------------
    Mutant("fold-past-running-closes", "chart", SQL + "sweeps.sql",
           "AND s.backend_type = 'client backend' AND s.pid <> pg_backend_pid()", "AND false",
           (FOLDED,), "the fold moves past a close still committing, which no chart then counts",
           "attempt_outcomes_fold_lock"),
    Mutant("fold-read-twice", "chart", SQL + "board.sql", "greatest(w.oldest, w.folded)", "w.oldest",
           (FOLDED,), "the chart reads folded attempts as attempts too", "overview_outcomes"),
    Mutant("fold-without-lock", "chart", SQL + "sweeps.sql",
           "SELECT pg_advisory_xact_lock(x'5B0A0012'::bigint) AS locked,", "SELECT 1 AS locked,",
           (FOLDED,), "the fold counts an attempt a delete in flight has counted", "attempt_outcomes_fold_lock"),
    Mutant("fold-delete-without-lock", "chart", "migrations/0012_outcomes_folded.sql",
           "  PERFORM pg_advisory_xact_lock_shared(x'5B0A0012'::bigint);\n  INSERT INTO attempt_outcome_counts AS c "
           "(endpoint_id, bucket, queue, outcome, n)\n  SELECT OLD.endpoint_id",
           "  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)\n  SELECT OLD.endpoint_id",
           (FOLDED,), "a delete counts an attempt a fold in flight has counted"),
    Mutant("fold-deleted-todo-counted-twice", "chart", "migrations/0012_outcomes_folded.sql",
           "     AND a.ended_at >= (SELECT f.before FROM attempt_outcomes_folded f)", "",
           (FOLDED,), "a deleted todo's folded attempts are counted again"),
    Mutant("fold-pruned-counted-twice", "chart", "migrations/0012_outcomes_folded.sql",
           " AND OLD.ended_at >= (SELECT f.before FROM attempt_outcomes_folded f)", "",
           (FOLDED,), "an attempt pruned past the cap after its fold is counted again"),
    Mutant("fold-never-caught-up", "chart", "board/store/sweeps.py",
           'return max(row["counted"], 1) if row["behind"] else 0',
           'return max(row["counted"], 1) if row["before"] is not None else 0',
           (FOLDED,), "the fold reports more to do whenever the clock moved, and its sweep loop spins"),
    Mutant("merge-hours-too-soon", "chart", SQL + "sweeps.sql",
           "coalesce(%(now)s::timestamptz, now()) - interval '1 hour',",
           "coalesce(%(now)s::timestamptz, now()) + interval '1 hour',",
           (FOLDED,), "the hour's chart loses its five-minute bars to hours", "attempt_counts_merge"),
    Mutant("merge-six-hours-too-soon", "chart", SQL + "sweeps.sql",
           "coalesce(%(now)s::timestamptz, now()) - interval '1 day',",
           "coalesce(%(now)s::timestamptz, now()) - interval '1 hour',",
           (FOLDED,), "the day's chart loses its hourly bars to six hours", "attempt_counts_merge"),
    Mutant("merge-loses-counts", "chart", SQL + "sweeps.sql",
           "SELECT endpoint_id, bucket, queue, outcome, sum(n) FROM gone",
           "SELECT endpoint_id, bucket, queue, outcome, max(n) FROM gone",
           (FOLDED,), "merged buckets keep one of their counts, not their sum", "attempt_counts_merge"),
    # -- the todos' counts (migration 0010) ---------------------------------------------------
    Mutant("counts-added", "counts", "migrations/0010_todo_counts.sql",
           "SELECT a.endpoint_id, a.queue, 'all', count(*) FROM added a GROUP BY 1, 2",
           "SELECT a.endpoint_id, a.queue, 'all', count(*) FROM added a WHERE a.title = '' GROUP BY 1, 2",
           (COUNTS,), "an added todo is not counted"),
    Mutant("counts-deleted", "counts", "migrations/0010_todo_counts.sql",
           "  SELECT g.endpoint_id, g.queue, k.kind, -count(*)\n", "  SELECT g.endpoint_id, g.queue, k.kind, 0\n",
           (COUNTS,), "a deleted todo stays counted"),
    Mutant("counts-canceled-unheld", "counts", SQL + "closes.sql",
           "SELECT u.endpoint_id, u.queue, 'canceled', count(*) FROM upd u GROUP BY 1, 2",
           "SELECT u.endpoint_id, u.queue, 'canceled', 0 FROM upd u GROUP BY 1, 2",
           (COUNTS,), "a todo nobody held, canceled by its human, is counted done", "todo_cancel_unheld"),
    Mutant("counts-dead-reaped", "counts", SQL + "sweeps.sql",
           "FROM upd u WHERE todo_dead_letter(u.state, u.next_retry_at) GROUP BY 1, 2",
           "FROM upd u WHERE false GROUP BY 1, 2",
           (COUNTS,), "a todo the reaper dead-letters is counted done", "attempts_reap_lapsed"),
    Mutant("counts-dead-retried", "counts", SQL + "closes.sql",
           "SELECT u.endpoint_id, u.queue, 'dead', -count(*) FROM upd u GROUP BY 1, 2",
           "SELECT u.endpoint_id, u.queue, 'dead', 0 FROM upd u GROUP BY 1, 2",
           (COUNTS,), "a dead letter the human retries stays counted dead", "todo_retry"),
    # -- secret screening: each shape, each stand-in rule, each place it is applied ----------
    *(Mutant(f"screen-shape-{slug}", "screening", "board/store/inputs.py", f'("{what}", {literals}',
             f'("{what}", ("never in any text",)', (SCREENING,), f"{what} is no longer refused")
      for slug, what, literals in (
          ("private-key", "a private key", '("PRIVATE KEY",)'),
          ("switchboard-token", "a Switchboard token", '("sb",)'),
          ("aws-access-key", "an AWS access key", '("AKIA", "ASIA")'),
          ("aws-secret-key", "an AWS secret access key", '("ecret", "ECRET")'),
          ("github", "a GitHub token", '("gh", "github_pat_")'),
          ("gitlab", "a GitLab token", '("glpat-",)'),
          ("slack", "a Slack token", '("xox",)'),
          ("api-key", "an API key", '("sk-",)'),
          ("google", "a Google API key", '("AIza",)'),
          ("stripe", "a Stripe secret key", '("_live_",)'),
          ("authorization", "an Authorization header", '("uthorization", "UTHORIZATION")'),
          ("bearer", "a bearer token", '("Bearer",)'),
          ("jwt", "a JWT", '("eyJ",)'),
          ("url-password", "a URL with a password", '("://",)'),
          ("password", "a password", '("assw", "ASSW", "assphrase", "ASSPHRASE")'))),
    # The stand-ins a value may be, and the JSON walk: each rule broken alone (board/store/inputs.py).
    *(Mutant(f"screen-{slug}", "screening", "board/store/inputs.py", find, replace, (SCREENING,), why)
      for slug, find, replace, why in (
          ("password-passwd", "(?:password|passwd|passphrase)", "(?:password|passphrase)",
           "passwd: is not read as a password"),
          ("jwt-any-header", 'isinstance(decoded.get("alg"), str)', "True",
           "a JWT-looking string whose header names no alg is refused"),
          ("jwt-unsigned", '{16,})"), _jwt_header)', '{0,})"), _jwt_header)',
           "a JWT-looking string with no signature to speak of is refused"),
          ("url-empty-password", "return bool(password) and not (", "return not (",
           "a URL with user: and no password is refused"),
          ("url-masked", "_MASK.fullmatch(password) or ", "", "a URL with a masked password is refused"),
          ("url-slot", "_SLOT.fullmatch(password)", "False", "a URL with ${PW} or <password> is refused"),
          ("url-placeholder-word", "or _PLACEHOLDER_WORDS.fullmatch(password))", ")",
           "user:password@localhost is refused"),
          ("assigned-short", "len(value) < ASSIGNED_MIN_CHARS", "False", "password == x, password: str are refused"),
          ("assigned-words", "_WORDS.fullmatch(value)", "False", "password: rotated, password: changeme are refused"),
          ("assigned-mask", "_MASK.fullmatch(value)", "False", "password: ******** is refused"),
          ("assigned-reference", 'value[0] in "$%{<[(@:!/~"', "False",
           "password: ${VAR}, <redacted>, /run/secrets are refused"),
          ("assigned-call", '"(" in value', "False", "password = getpass() is refused"),
          ("assigned-index", '"[" in value', "False", "password = os.environ['PW'] is refused"),
          ("assigned-dotted", "_DOTTED_NAME.fullmatch(value)", "False", "password = settings.DB_PASSWORD is refused"),
          ("assigned-quoted", 'if after < len(text) and text[after] in "\\"\'`":', "if False:",
           'a quoted password (PGPASSWORD="...") passes'),
          ("assigned-sentence-end", '.group().rstrip(".,:;!?")', ".group()",
           "password: done. at a sentence's end is refused"),
          ("json-members", 'pieces.append(f"{key}: {member}")', "pieces.extend((str(key), str(member)))",
           '{"password": "..."} in a payload passes'),
          ("json-keys", "                    pieces.append(str(key))\n", "", "a credential as a key passes"),
          ("json-arrays", "        elif isinstance(item, (list, tuple)):\n            pending.extend(item)\n    screen_",
           "        elif isinstance(item, (list, tuple)):\n            pass\n    screen_", "a credential in an array passes"),
          ("json-joined-apart", '"\\x00".join(pieces)', '" ".join(pieces)', "two strings side by side are read as one"))),
    Mutant("screen-at-json", "screening", "board/store/inputs.py",
           "    screen_json(value, argument)  # after", "    None  # after", (SCREENING, SCREENING_MCP),
           "payloads, routing and results are not screened"),
    Mutant("screen-at-title", "screening", "board/store/adds.py",
           '        screen_secrets(title, "title")\n', "", (SCREENING_MCP,), "add_todo's title is not screened"),
    Mutant("screen-at-batch-title", "screening", "board/store/adds.py",
           '            screen_secrets(title, f"{at}.title")\n', "", (SCREENING_MCP,),
           "add_todos' titles are not screened"),
    Mutant("screen-at-form-title", "screening", "board/web/todo_forms.py",
           '            screen_secrets(title, "title")  # the store', "            pass  # the store", (BOARD_FORMS,),
           "the add form's title problem is not shown beside the others"),
    Mutant("screen-at-summary", "screening", "board/store/closes.py",
           "if not from_result:", "if False:", (SCREENING_MCP,), "summaries are not screened"),
    Mutant("screen-at-note", "screening", "board/store/inputs.py",
           '    screen_secrets(kept, "text")', "    pass", (SCREENING, SCREENING_MCP),
           "notes, questions and answers are not screened"),
    Mutant("screen-at-artifact", "screening", "board/store/inputs.py",
           '        screen_secrets(artifact, "artifact")', "        pass", (SCREENING, SCREENING_MCP),
           "artifacts are not screened"),
    # -- the Board's CSRF check on its forms (board/web/auth.py, context.py) -------------------
    Mutant("csrf-any-token", "board-csrf", "board/web/auth.py",
           "return isinstance(presented, str) and bool(presented) and hmac.compare_digest(\n"
           "            presented.encode(), self.csrf.encode())", "return True", (BOARD_AUTH,),
           "a form with a forged or missing token is accepted"),
    Mutant("csrf-no-session", "board-csrf", "board/web/context.py",
           "if session is None or not same_origin", "if not same_origin", (BOARD_AUTH,),
           "a post without a session cookie is not refused (a 500)"),
    Mutant("csrf-foreign-origin", "board-csrf", "board/web/context.py",
           " or not same_origin or ", " or ", (BOARD_AUTH,), "a post from another site with a right token is accepted"),
    Mutant("csrf-any-origin-same", "board-csrf", "board/web/context.py",
           'same_origin = origin in (None, "null") or origin == f"{request.url.scheme}://{request.url.netloc}"',
           "same_origin = True", (BOARD_AUTH,), "every Origin counts as the Board's own"),
    Mutant("csrf-null-origin-refused", "board-csrf", "board/web/context.py",
           'same_origin = origin in (None, "null") or', "same_origin = origin is None or", (BOARD_AUTH,),
           "a post under the no-referrer policy (Origin: null) is refused"),
    Mutant("csrf-own-origin-refused", "board-csrf", "board/web/context.py",
           ' or origin == f"{request.url.scheme}://{request.url.netloc}"', "", (BOARD_AUTH,),
           "a post from the Board's own origin is refused"),
    Mutant("csrf-token-kept-at-sign-in", "board-csrf", "board/web/pages.py",
           'new_session(user["id"]))  # a fresh session: new token',
           'type(session)(user["id"], session.csrf, session.issued, changed=True))', (BOARD_AUTH,),
           "the sign-in page's token (one an attacker could plant) stays good after sign-in"),
    Mutant("csrf-cookie-samesite", "board-csrf", "board/web/context.py",
           'httponly=True, samesite="lax", secure=request.url.scheme == "https")',
           'httponly=True, samesite="none", secure=request.url.scheme == "https")', (BOARD_AUTH,),
           "the session cookie rides on other sites' requests"),
    # -- the fence on a person's answer: only the owner's todo, only while it waits, and only on
    # -- the question it was given for (holds.sql todo_answer_human, reads.sql todo_answer_choices;
    # -- the owner check of the answer itself is answer-scope above)
    Mutant("answer-fence-state", "answer-fence", SQL + "holds.sql",
           "AND t.state = ANY(%(from_states)s::todo_state[])", "AND true",
           (QUESTIONS,), "an answer lands after the agent resumed", "todo_answer_human"),
    Mutant("answer-fence-question", "answer-fence", SQL + "holds.sql",
           "     AND (NOT %(fenced)s::boolean OR prev.asked_at IS NOT DISTINCT FROM %(asked_at)s::timestamptz)\n", "",
           (QUESTIONS,), "an answer lands on a question asked after the one it was given for", "todo_answer_human"),
    Mutant("answer-fence-no-question", "answer-fence", SQL + "holds.sql",
           "prev.asked_at IS NOT DISTINCT FROM %(asked_at)s", "prev.asked_at = %(asked_at)s",
           (QUESTIONS,), "an answer given while no question waited is refused", "todo_answer_human"),
    Mutant("answer-fence-current-question", "answer-fence", SQL + "holds.sql",
           "\n                             AND a.asked_n > a.waiting_n", "",
           (QUESTIONS,), "an earlier interrupt's question counts as the one waiting", "todo_answer_human"),
    Mutant("answer-fence-store-unfenced", "answer-fence", "board/store/holds.py",
           "from_states=list(INTERRUPT_STATES), fenced=fenced, asked_at=asked_at)",
           "from_states=list(INTERRUPT_STATES), fenced=False, asked_at=asked_at)",
           (QUESTIONS,), "the store drops the question an answer was given for"),
    Mutant("answer-fence-said", "answer-fence", "board/store/holds.py",
           'if waiting is not None and fenced and waiting["asked_at"] != asked_at:', "if False:",
           (QUESTIONS,), "an answer to a question asked since is refused as if the todo had stopped waiting"),
    Mutant("answer-fence-board-form", "answer-fence", "board/web/pages.py",
           "asked=str(asked) if asked is not None else None)", "asked=None)",
           ("tests/acceptance/test_board_answers.py",), "the Board's answer lands on whatever question waits"),
    Mutant("answer-fence-lookup-scope", "answer-fence", SQL + "reads.sql", _SCOPE, "true",
           (QUESTIONS,), "another human's answer by choice is told the question's choices", "todo_answer_choices"),
    Mutant("answer-fence-lookup-state", "answer-fence", SQL + "reads.sql",
           "AND t.state = ANY(%(from_states)s::todo_state[])", "AND true",
           (QUESTIONS,), "a choice is blamed for an answer to a todo that stopped waiting", "todo_answer_choices"),
    # -- the worker's heartbeats and lost leases (switchboard_worker) --------------------------
    Mutant("worker-heartbeat-late", "worker", "switchboard_worker/worker.py",
           "every = max(0.2, self.lease_seconds / 3)", "every = max(0.2, self.lease_seconds * 2)",
           (WORKER_API + "::test_heartbeats_run_in_the_background_while_a_todo_is_held_and_stop_when_it_closes",),
           "the worker heartbeats after its lease has lapsed"),
    Mutant("worker-heartbeats-never-run", "worker", "switchboard_worker/worker.py",
           'self._beats = asyncio.create_task(self._heartbeat_loop(), name=f"heartbeat-{self.id}")',
           "self._beats = None",
           (WORKER_API + "::test_heartbeats_run_in_the_background_while_a_todo_is_held_and_stop_when_it_closes",),
           "a held todo is never heartbeated"),
    Mutant("worker-lost-lease-ignored", "worker", "switchboard_worker/worker.py",
           "                    self._lose()\n                    return\n                log.warning(",
           "                    continue\n                log.warning(",
           (WORKER_API + "::test_a_lease_taken_over_mid_work_is_noticed_by_the_next_heartbeat_and_the_old_complete_"
            "is_refused",), "a heartbeat refused as conflict is shrugged off and the worker goes on"),
    Mutant("worker-lost-lease-unannounced", "worker", "switchboard_worker/worker.py",
           "        self.lease_lost.set()\n        self.worker._forget(self)", "        self.worker._forget(self)",
           (WORKER_API + "::test_a_lease_taken_over_mid_work_is_noticed_by_the_next_heartbeat_and_the_old_complete_"
            "is_refused",), "a lost lease is never announced to whoever does the work"),
    Mutant("worker-command-outlives-its-lease", "worker", "switchboard_worker/command.py",
           "lost = asyncio.create_task(run.todo.lease_lost.wait())", "lost = asyncio.create_task(asyncio.Event().wait())",
           (WORKER_COMMAND + "::test_a_todo_released_from_the_board_mid_run_stops_its_command_and_is_reported_lost",),
           "the command runs on after its todo's lease was lost"),
    # -- OAuth redirect matching (board/oauth/client_metadata.py, RFC 8252) --------------------
    Mutant("redirect-loopback-any-host", "oauth-redirects", "board/oauth/client_metadata.py",
           "    return (mine.hostname == theirs.hostname and mine.path", "    return (True and mine.path",
           REDIRECTS, "a loopback redirect on another loopback host (localhost for 127.0.0.1) matches"),
    Mutant("redirect-loopback-any-path", "oauth-redirects", "board/oauth/client_metadata.py",
           "mine.hostname == theirs.hostname and mine.path == theirs.path and", "mine.hostname == theirs.hostname and",
           REDIRECTS, "a loopback redirect with another path matches"),
    Mutant("redirect-loopback-any-query", "oauth-redirects", "board/oauth/client_metadata.py",
           " and mine.query == theirs.query\n", "\n",
           REDIRECTS, "a loopback redirect with another query matches"),
    Mutant("redirect-loopback-https-too", "oauth-redirects", "board/oauth/client_metadata.py",
           '    return parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS',
           '    return parts.scheme in ("http", "https") and parts.hostname in LOOPBACK_HOSTS',
           REDIRECTS, "an https redirect matches a registered http loopback one"),
    Mutant("redirect-any-port-everywhere", "oauth-redirects", "board/oauth/client_metadata.py",
           "    if not (_loopback(mine) and _loopback(theirs)):\n        return False\n", "",
           REDIRECTS, "a non-loopback redirect on another port (or path) matches: not exact any more"),
    Mutant("redirect-loopback-exact", "oauth-redirects", "board/oauth/client_metadata.py",
           "    if registered == requested:\n        return True\n", "    return registered == requested\n",
           REDIRECTS, "a loopback redirect on a new port is refused (the host on an ephemeral port)"),
    Mutant("redirect-refused-schemes-allowed", "oauth-redirects", "board/oauth/client_metadata.py",
           '    if scheme not in ("http", "https", *REFUSED_SCHEMES) and', '    if scheme not in ("http", "https") and',
           REDIRECTS, "javascript:, data:, file:, vbscript: and about: redirects are accepted"),
    Mutant("redirect-http-any-host", "oauth-redirects", "board/oauth/client_metadata.py",
           '    if scheme == "http" and parts.hostname in LOOPBACK_HOSTS:', '    if scheme == "http":',
           REDIRECTS, "a plain http redirect to any host is accepted"),
    Mutant("redirect-private-use-refused", "oauth-redirects", "board/oauth/client_metadata.py",
           "        return None  # a private-use scheme", "        pass  # a private-use scheme",
           REDIRECTS, "a desktop host's private-use redirect (cursor://) is refused"),
    Mutant("redirect-userinfo-allowed", "oauth-redirects", "board/oauth/client_metadata.py",
           '    if "@" in parts.netloc:\n        return f"redirect URI {_shown(uri)} must not hold a user name',
           '    if False:\n        return f"redirect URI {_shown(uri)} must not hold a user name',
           REDIRECTS, "a redirect URI with a user name (cursor://evil@host) is accepted"),
    # -- oauth: the provider's and the consent screen's guards (board/oauth/server.py, its SQL,
    # board/web/consent.py and the form check it uses) --------------------------------------
    Mutant("oauth-code-reuse-kept", "oauth", "board/oauth/server.py",
           'if row["used"]:  # RFC 6749 4.1.2', "if False:  # RFC 6749 4.1.2",
           (OAUTH_CODE_REUSE,),
           "a code used twice is refused but its grant lives on"),
    Mutant("oauth-refresh-reuse-kept", "oauth", "board/oauth/server.py",
           _REUSED, "if False:",
           (OAUTH_EXPIRED_REUSE, OAUTH_AFTER_GRACE),
           "a rotated refresh token presented again after the grace leaves the grant live (the exchange's own "
           "check ends it only while the token has not expired)"),
    Mutant("oauth-refresh-reuse-expired-kept", "oauth", "board/oauth/server.py",
           _REUSED,
           'if row["rotated"] and not row["in_grace"] and row["expires_at"] > time.time():',
           (OAUTH_EXPIRED_REUSE,),
           "a rotated refresh token presented after its own expiry is only refused, not a reuse"),
    Mutant("oauth-refresh-get-unexpired", "oauth", SQL + "oauth.sql",
           "WHERE t.token_hash = %(token_hash)s AND t.kind = 'refresh' AND e.revoked_at IS NULL;",
           "WHERE t.token_hash = %(token_hash)s AND t.kind = 'refresh' AND e.revoked_at IS NULL AND t.expires_at > now();",
           (OAUTH_EXPIRED_REUSE,),
           "an expired rotated refresh token is unknown rather than a reuse", "oauth_refresh_get"),
    Mutant("oauth-refresh-no-grace", "oauth", "board/oauth/server.py",
           _REUSED, 'if row["rotated"]:',
           (OAUTH_AFTER_GRACE, OAUTH_GRACE),
           "a second window refreshing at the same moment ends the grant"),
    Mutant("oauth-refresh-grace-forever", "oauth", SQL + "oauth.sql",
           "t.rotated_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(grace)s)",
           "t.rotated_at IS NOT NULL",
           (OAUTH_AFTER_GRACE,),
           "a rotated refresh token gets its pair again however late it comes back",
           ("oauth_refresh_get", "oauth_refresh_repeat"), times=2),
    Mutant("oauth-refresh-pair-random", "oauth", "board/store/grants.py",
           "access, refresh = rotated_pair(self._oauth_key(), token)",
           "access, refresh = _mint(ACCESS_PREFIX), _mint(REFRESH_PREFIX)",
           (OAUTH_GRACE,),
           "a refresh token presented again within the grace cannot be given the pair its rotation issued"),
    Mutant("oauth-reconsent-new-grant", "oauth", SQL + "oauth.sql",
           "new AS (SELECT coalesce((SELECT id FROM live), gen_random_uuid()) AS id,",
           "new AS (SELECT gen_random_uuid() AS id,",
           (OAUTH_RECONSENT,),
           "a second consent by the same client makes another grant", "oauth_code_exchange"),
    Mutant("oauth-reconsent-keeps-old-tokens", "oauth", SQL + "oauth.sql",
           "DELETE FROM oauth_tokens o USING ep WHERE o.endpoint_id = ep.id RETURNING 1",
           "SELECT 1 FROM ep WHERE false",
           (OAUTH_RECONSENT,),
           "the tokens of the grant before a second consent keep its earlier verbs", "oauth_code_exchange"),
    Mutant("oauth-reconsent-cached-tokens", "oauth", "board/live/endpoint_cache.py",
           'if kind in ("endpoint_revoked", "endpoint_changed"):', 'if kind in ("endpoint_revoked",):',
           (OAUTH_RECONSENT,), "a grant's cached earlier tokens outlive a second consent"),
    Mutant("oauth-exchange-race-refused", "oauth", "board/store/grants.py",
           '# one, run again, finds and updates it.\n            row = await self._fetch(query("oauth_code_exchange"), '
           'params, op="oauth_token", one=True)',
           "# one, run again, finds and updates it.\n            raise",
           ("tests/integration/test_oauth_grants.py",),
           "an exchange racing another for the same person and client fails instead of updating its grant"),
    Mutant("oauth-consent-without-csrf", "oauth", "board/web/context.py",
           "if session is None or not same_origin or not session.check_csrf(form.get(CSRF_FIELD)):",
           "if session is None or not same_origin:",
           (OAUTH_FORGED_CONSENT,),
           "a consent form posted without the session's CSRF token approves"),
    Mutant("oauth-consent-binding-unchecked", "oauth", "board/web/consent.py",
           'if not oauth.check_binding(signed, human.actor, form.get("binding")):', "if False:",
           (OAUTH_FORGED_CONSENT,),
           "a person approves a consent form shown to someone else"),
    Mutant("oauth-consent-binding-any-value", "oauth", "board/oauth/server.py",
           "return isinstance(presented, str) and hmac.compare_digest(presented, self.approval_binding(signed, user_id))",
           "return isinstance(presented, str)",
           (OAUTH_FORGED_CONSENT,),
           "any binding value passes"),
    Mutant("oauth-consent-binding-not-personal", "oauth", "board/oauth/server.py",
           'f"{user_id}:{signed}".encode()', "signed.encode()",
           (OAUTH_FORGED_CONSENT,),
           "the binding does not name the person it was shown to"),
    # -- limits: a bound the tools publish, the check enforces and the database holds, one side
    # drifting from the others (board/store/vocabulary.py names each once) ----------------------
    Mutant("limits-schema-title", "limits", "board/mcp/tools.py",
           '"title": {"type": "string", "minLength": 1, "maxLength": TITLE_MAX_CHARS,',
           '"title": {"type": "string", "minLength": 1, "maxLength": 400,',
           (BOUNDS,), "add_todo publishes a shorter title than it takes"),
    Mutant("limits-schema-list-limit", "limits", "board/mcp/tools.py",
           '"maximum": LIST_LIMIT_MAX,', '"maximum": 100,',
           (BOUNDS,), "list_todos publishes a smaller page than it serves"),
    Mutant("limits-schema-choice", "limits", "board/mcp/tools.py",
           '"items": {"type": "string", "minLength": 1, "maxLength": CHOICE_MAX_BYTES}',
           '"items": {"type": "string", "minLength": 1, "maxLength": 256}',
           (BOUNDS,), "interrupt publishes choices longer than it takes and an answer's column holds"),
    Mutant("limits-schema-cost", "limits", "board/mcp/tools.py",
           '"cost_usd": {"type": "number", "minimum": 0, "maximum": USAGE_COST_MAX,',
           '"cost_usd": {"type": "number", "minimum": 0, "maximum": 10**6,',
           (BOUNDS,), "usage.cost_usd is published lower than the check and the column take"),
    Mutant("limits-check-artifact", "limits", "board/store/inputs.py",
           'if len(artifact.encode("utf-8")) > ARTIFACT_MAX_BYTES:', 'if len(artifact.encode("utf-8")) > 500:',
           (BOUNDS,), "an artifact of the published length is refused"),
    Mutant("limits-check-choices", "limits", "board/store/inputs.py",
           "not 1 <= len(choices) <= QUESTION_CHOICES_MAX", "not 1 <= len(choices) <= 20",
           (BOUNDS,), "more choices are taken than published, and than the attempt_notes CHECK holds"),
    Mutant("limits-check-tokens", "limits", "board/store/inputs.py",
           "not 0 <= value <= USAGE_TOKENS_MAX", "not 0 <= value <= 10**13",
           (BOUNDS,), "token counts past the published maximum and the attempt_tokens domain are taken"),
    Mutant("limits-cut-model", "limits", "board/store/inputs.py",
           "model = cut_utf8(stripped, USAGE_MODEL_MAX_BYTES)[0]", "model = cut_utf8(stripped, 100)[0]",
           (BOUNDS,), "a model label is cut shorter than its column holds"),
    Mutant("limits-constant-max-attempts", "limits", "board/store/vocabulary.py",
           "MAX_ATTEMPTS_MAX = 1000", "MAX_ATTEMPTS_MAX = 2000",
           (BOUNDS,), "schema and check agree on a max_attempts the todos trigger refuses"),
    Mutant("limits-form-max-attempts", "limits", "board/web/todo_forms.py",
           '"max_attempts", 1, MAX_ATTEMPTS_MAX)', '"max_attempts", 1, 999)',
           (BOUNDS,), "the Board's add form refuses the max_attempts the tool publishes"),
    # -- the caller rules, each written once (migration 0014) -------------------------------
    Mutant("rules-fence-open", "rules", CALLER_RULES,
           "SELECT caller_endpoint IS NULL OR token_checked OR lease_token_hash IS NULL", "SELECT true",
           (FENCE,), "every statement's fence lets a close without the token through"),
    Mutant("rules-fence-owner-not-exempt", "rules", CALLER_RULES,
           "SELECT caller_endpoint IS NULL OR token_checked OR lease_token_hash IS NULL",
           "SELECT token_checked OR lease_token_hash IS NULL",
           (FENCE, LIFECYCLE), "the owning human cannot close an attempt claimed with a token"),
    Mutant("rules-held-by-anyone", "rules", CALLER_RULES,
           "SELECT caller_endpoint IS NULL OR owner = caller_owner", "SELECT true",
           (FENCE,), "an agent acts on an attempt another holder holds"),
    Mutant("rules-held-owner-only-own", "rules", CALLER_RULES,
           "SELECT caller_endpoint IS NULL OR owner = caller_owner", "SELECT owner = caller_owner",
           (LIFECYCLE, NOTES), "the owning human cannot fail, release or note on an agent's attempt"),
    Mutant("rules-scope-owner-sees-all", "rules", CALLER_RULES,
           "THEN endpoint_id = ANY(user_endpoints(caller_user))", "THEN true",
           (LIFECYCLE,), "a human acts on another human's todos"),
    Mutant("rules-claimer-kind", "rules", SQL + "claims.sql",
           "(CASE WHEN %(endpoint_id)s::uuid IS NULL THEN 'owner' ELSE 'endpoint' END)::attempt_claimer_kind",
           "'endpoint'::attempt_claimer_kind",
           (LIFECYCLE, INVARIANTS), "the Board's claim records an endpoint claimer", "todo_claim_fast"),
    Mutant("rules-owner-voids-token", "rules", SQL + "closes.sql",
           "lease_token_hash = CASE WHEN %(endpoint_id)s::uuid IS NULL THEN NULL ELSE a.lease_token_hash END",
           "lease_token_hash = a.lease_token_hash",
           ("tests/integration/test_replay.py",), "the holder's token replays a release the owning human made",
           "todo_fail_or_release"),
    # -- order: the claim's order of migration 0015 (priority, run_at, keys, limits) --
    Mutant("order-priority-ignored", "order", SQL + "claims.sql",
           "   ORDER BY t.priority, t.created_at, t.id\n   LIMIT %(limit)s\n   FOR UPDATE OF t SKIP LOCKED",
           "   ORDER BY t.created_at, t.id\n   LIMIT %(limit)s\n   FOR UPDATE OF t SKIP LOCKED",
           (ORDER,), "claim_next takes an older P2 before a P0", "todo_claim_fast"),
    Mutant("order-scheduled-claimable", "order", SQL + "claims.sql",
           "     AND t.state = 'pending' AND NOT t.scheduled AND t.waits = 0\n", "     AND t.state = 'pending' AND t.waits = 0\n",
           (ORDER,), "claim_next takes a todo before its run_at", ("todo_claim_fast", "todo_claim"), 2),
    Mutant("order-by-id-before-run-at", "order", SQL + "claims.sql",
           "(NOT t.scheduled OR t.run_at <= coalesce(%(now)s::timestamptz, now()))", "true",
           (ORDER,), "a claim by id takes a todo before its run_at", ("todo_claim_fast", "todo_claim"), 2),
    Mutant("order-limit-unlocked", "order", "migrations/0015_claim_order.sql",
           "WHERE l.user_id = $1 AND l.queue = $2 FOR UPDATE;", "WHERE l.user_id = $1 AND l.queue = $2;",
           (ORDER + "::test_a_queue_at_its_limit_is_passed_over_while_sixteen_connections_claim_at_once",),
           "concurrent claims of a limited queue hold more than its limit"),
    Mutant("order-limit-batch-room", "order", SQL + "claims.sql",
           "     AND c.nth <= coalesce((SELECT r.room FROM room r WHERE r.queue = c.queue), 50)\n", "",
           (ORDER,), "a batch claim takes more of a limited queue than its room", "todo_claim_fast"),
    Mutant("order-key-any-state", "order", "migrations/0015_claim_order.sql",
           "WHERE key IS NOT NULL AND state NOT IN ('done', 'canceled') AND (state <> 'failed' OR next_retry_at IS NOT NULL);",
           "WHERE key IS NOT NULL;",
           (ORDER,), "an ended todo's key is never free again"),
    Mutant("order-snooze-ignored", "order", SQL + "closes.sql",
           "         scheduled = %(outcome)s::attempt_outcome = 'released' AND %(delay_seconds)s::float8 > 0,\n",
           "", (ORDER,), "a snoozed todo is claimable at once", "todo_fail_or_release"),
    # -- order-ops: the due timer, the doorbell's "due", the command line's queue limit -------
    Mutant("order-ops-timer-deaf", "order-ops", "board/ops/schedule.py",
           'WAKE_KINDS = frozenset({"scheduled", "resync"})', 'WAKE_KINDS = frozenset({"resync"})',
           (DUE_TIMER + "::test_an_earlier_scheduled_add_in_another_process_wakes_the_sleeping_timer",),
           "the timer sleeps past an earlier run_at another process scheduled"),
    Mutant("order-ops-timer-no-resync", "order-ops", "board/ops/schedule.py",
           'WAKE_KINDS = frozenset({"scheduled", "resync"})', 'WAKE_KINDS = frozenset({"scheduled"})',
           (DUE_TIMER + "::test_a_resync_makes_the_timer_sweep_what_it_was_not_told_of",),
           "after a LISTEN reconnect the timer sleeps on past what it missed"),
    Mutant("order-ops-due-not-ready", "order-ops", "board/mcp/doorbell.py",
           '"retried", "due", "unblocked"})', '"retried", "unblocked"})',
           (DOORBELL + "::test_a_scheduled_todo_rings_a_listening_agent_within_a_second_of_falling_due",),
           "a todo falling due never rings a listening agent"),
    Mutant("order-ops-due-gated", "order-ops", "board/mcp/doorbell.py",
           'REGATED_KINDS = frozenset({"requeued", "due", "unblocked"})',
           'REGATED_KINDS = frozenset({"requeued", "unblocked"})',
           (DOORBELL + "::test_a_snoozed_todo_rings_again_when_it_falls_due_inside_the_gate",),
           "a snoozed todo falling due is swallowed by the gate of its first ring"),
    Mutant("order-ops-limit-zero-kept", "order-ops", SQL + "schedule.sql",
           "WHERE %(max_held)s::int = 0 AND", "WHERE false AND",
           ("tests/acceptance/test_queue_limit_cli.py::test_the_command_line_limits_a_users_queue_and_0_removes_the_limit",),
           "`switchboard queue limit ... 0` leaves the limit in force", "queue_limit_set"),
    # -- order-mcp: the claim's order as agents meet it (board/mcp/tools.py, the add's result,
    # -- the doorbell, switchboard work) ----------------------------------------------------------
    Mutant("order-mcp-priority-published", "order-mcp", "board/mcp/tools.py",
           'A_PRIORITY = {"type": "integer", "minimum": PRIORITY_MIN, "maximum": PRIORITY_MAX}',
           'A_PRIORITY = {"type": "integer", "minimum": PRIORITY_MIN, "maximum": 7}',
           (BOUNDS + "::test_a_published_bound_is_the_one_the_tool_and_the_database_enforce",),
           "add_todo and list_todos publish a priority of 7, which the check and the todos CHECK refuse"),
    Mutant("order-mcp-deduplicated-false", "order-mcp", "board/store/adds.py",
           'live = await self._fetch(query("todo_by_key"), params, op="add_todo", one=True)\n'
           '            if live is not None:\n                return todo_out(live) | {"deduplicated": True}',
           'live = await self._fetch(query("todo_by_key"), params, op="add_todo", one=True)\n'
           '            if live is not None:\n                return todo_out(live) | {"deduplicated": False}',
           (ORDER_MCP + "::test_a_second_add_with_a_live_key_returns_that_todo_deduplicated",),
           "a second add with a live key says it added the todo it found"),
    Mutant("order-mcp-release-delay-dropped", "order-mcp", "board/mcp/tools.py",
           'delay_seconds=x.get("delay_seconds"))', "delay_seconds=None)",
           (ORDER_MCP + "::test_a_release_with_delay_seconds_is_not_claimable_until_it_falls_due",),
           "release's delay_seconds never reaches the store: the snoozed todo is claimable at once"),
    Mutant("order-mcp-due-silent", "order-mcp", "board/mcp/doorbell.py",
           '"retried", "due", "unblocked"})', '"retried", "unblocked"})',
           ("tests/acceptance/test_mcp_doorbell.py::"
            "test_a_scheduled_todo_rings_when_it_falls_due_not_on_its_add_and_again_after_a_snooze",),
           "a todo falling due never rings, so a waiting worker sleeps until its safety poll"),
    Mutant("order-mcp-worker-env-key", "order-mcp", "switchboard_worker/command.py",
           'SWITCHBOARD_TODO_KEY=todo.key or ""', 'SWITCHBOARD_TODO_KEY=""',
           (WORKER_COMMAND + "::test_the_command_reads_the_todo_s_priority_run_at_and_key_in_its_environment",),
           "switchboard work hands the command an empty key"),
    # -- the claim's order on the Board (board/web/overview.py, templating.py, bulk.py) -------
    Mutant("order-board-ready-count", "order-board", "board/web/overview.py",
           'counts["ready"] = counts["pending"] - counts["scheduled"]', 'counts["ready"] = counts["pending"]',
           (CLAIM_ORDER_BOARD,), "the overview counts scheduled todos as ready"),
    Mutant("order-board-limit-text", "order-board", "board/web/overview.py",
           "return f\"{limit['held']} of {limit['max']} running\"", "return f\"{limit['max']} of {limit['max']} running\"",
           (CLAIM_ORDER_BOARD,), "a queue's limit reads as full whatever it holds"),
    Mutant("order-board-limit-held", "order-board", "board/web/overview.py",
           'held = counts["claimed"] + counts["interrupted"]', 'held = counts["claimed"]',
           (CLAIM_ORDER_BOARD,), "a todo waiting for a person is not counted against its queue's limit"),
    Mutant("order-board-starts-past", "order-board", "board/web/templating.py",
           "return run_at if run_at > (now or datetime.now(timezone.utc)) else None", "return run_at",
           (CLAIM_ORDER_BOARD,), "a todo started now (or fallen due) still shows as scheduled, without Claim"),
    Mutant("order-board-bulk-same-priority", "order-board", "board/web/bulk.py",
           ' and not (action == "priority" and todo["priority"] == priority)', "",
           (CLAIM_ORDER_BOARD,), "a bulk Set priority counts todos already at that priority as changing"),
    # -- sched: schedules' ticks, each taken once (board/store/recurring.py, sql/recurring.sql) ---
    Mutant("sched-no-skip-locked", "sched", SQL + "recurring.sql",
           "   FOR UPDATE OF s SKIP LOCKED;", ";",
           (SCHEDULES + "::test_two_concurrent_sweeps_never_double_a_tick",
            SCHEDULES + "::test_a_tick_another_process_is_taking_is_skipped_not_taken_again"),
           "concurrent sweeps (two serve processes) both take a due schedule's tick: two todos for it",
           statement="schedules_due_lock"),
    Mutant("sched-next-at-kept", "sched", SQL + "recurring.sql",
           "SET next_at = %(next_at)s, last_tick_at", "SET last_tick_at",
           (SCHEDULES + "::test_every_n_seconds_adds_one_todo_per_tick",),
           "a tick's next_at is not moved on: every sweep takes the same tick again",
           statement="schedule_tick"),
    Mutant("sched-overlap-ignored", "sched", SQL + "recurring.sql",
           "WHERE %(overlap)s::boolean OR NOT EXISTS (SELECT FROM live)", "WHERE true",
           (SCHEDULES + "::test_a_tick_whose_previous_todo_is_live_is_skipped_and_counted",),
           "a tick adds a todo while the schedule's previous one is live, without --overlap",
           statement="schedule_tick"),
    Mutant("sched-catch-up-per-tick", "sched", "board/store/recurring.py",
           '"next_at": next_tick(s, at)', '"next_at": next_tick(s, s["next_at"])',
           (SCHEDULES + "::test_catch_up_after_downtime_adds_one_todo_for_the_latest_missed_tick",),
           "ticks missed while every process was down are caught up one sweep (one todo) each"),
    Mutant("sched-dst-fall-doubled", "sched", "board/store/recurring.py",
           "if tick > after and not (_repeated(tick, zone) and not _every_hour(expr)):", "if tick > after:",
           (SCHEDULES + "::test_a_daily_cron_runs_once_across_each_2026_daylight_saving_change",),
           "a daily cron runs twice on the fall's repeated hour"),
    # -- plans-mcp: todos that wait for other todos as agents meet them (board/mcp/tools.py, the
    # -- doorbell's "unblocked", the add's after and hooks, the release in a complete) -------------
    Mutant("plans-mcp-unblocked-silent", "plans-mcp", "board/mcp/doorbell.py",
           '"due", "unblocked"})  # never', '"due"})  # never',
           (DOORBELL + "::test_a_waiting_todo_rings_a_listening_agent_when_its_last_dependency_completes",),
           "a todo whose last dependency completed never rings, so a listening worker sleeps until its safety poll"),
    Mutant("plans-mcp-item-after-dropped", "plans-mcp", "board/store/adds.py",
           'after = _after(item.get("after"), f"{at}.", i, "add_todos")', 'after = []',
           (PLANS_MCP + "::test_a_three_step_plan_filed_with_add_todos_is_claimed_in_order",),
           "an add_todos item's after is dropped: every step of a plan is claimable at once"),
    Mutant("plans-mcp-waiting-filter-ignored", "plans-mcp", "board/mcp/tools.py",
           'waiting=x.get("waiting"), ', "",
           (PLANS_MCP + "::test_add_todo_with_after_waits_until_every_todo_named_is_done",),
           "list_todos ignores waiting and lists every todo"),
    Mutant("plans-mcp-complete-no-release", "plans-mcp", SQL + "closes.sql",
           "CASE WHEN t.waited_on", "CASE WHEN false",
           (DOORBELL + "::test_a_waiting_todo_rings_a_listening_agent_when_its_last_dependency_completes",
            "tests/integration/test_hooks.py::test_a_waiting_todo_s_ready_event_is_written_when_its_last_dependency_completes",
            PLANS_MCP, DEPENDENCIES),
           "a complete never releases the todos waiting on it: they wait forever", "todo_complete"),
    Mutant("plans-mcp-batch-no-release", "plans-mcp", SQL + "closes.sql",
           "CASE WHEN t.waited_on", "CASE WHEN false",
           (PLANS_MCP + "::test_complete_todos_closing_every_dependency_makes_the_waiting_todo_claimable",),
           "complete_todos never releases the todos waiting on what it closed", "todos_complete"),
    Mutant("plans-mcp-after-any-owner", "plans-mcp", SQL + "adds.sql",
           "WHERE t.id = ANY(%(after)s::text[])\n             AND " + _SCOPE,
           "WHERE t.id = ANY(%(after)s::text[])",
           (PLANS_MCP + "::test_a_bad_after_is_invalid_or_not_found_naming_it_and_adds_nothing", DEPENDENCIES),
           "after may name another owner's todo, which then holds the new todo back and learns of it",
           "todos_add"),
    Mutant("plans-mcp-ready-hook-at-add", "plans-mcp", SQL + "adds.sql",
           "CASE WHEN NOT u.scheduled AND u.waits = 0 THEN", "CASE WHEN NOT u.scheduled THEN",
           ("tests/integration/test_hooks.py::test_a_waiting_todo_s_ready_event_is_written_when_its_last_dependency_completes",),
           "a todo added waiting writes todo.ready at its add, before anyone can claim it", "todos_add"),
    # -- plans-board: plans on the Board (overview.py, context.py, pages.py, bulk.py, todo_forms.py)
    Mutant("plans-board-ready-count", "plans-board", "board/web/overview.py",
           ' - counts["waiting"]', "",
           (PLANS_BOARD,), "the overview counts waiting todos as ready"),
    Mutant("plans-board-waiting-filter", "plans-board", "board/web/context.py",
           '"waiting": {"waiting": True}', '"waiting": {"scheduled": False}',
           (PLANS_BOARD,), "the list's waiting filter shows ready todos instead"),
    Mutant("plans-board-unblocked-said", "plans-board", "board/web/pages.py",
           'then = "it can be claimed now" if todo["unblocked"] else', 'then = "it can be claimed now" if True else',
           (PLANS_BOARD,), "a dependency dropped says the todo may be claimed while it still waits"),
    Mutant("plans-board-kept-said", "plans-board", "board/web/todo_forms.py",
           '    if out["refused"]:\n', '    if False:\n',
           (PLANS_BOARD,), "a delete that kept a todo others wait on does not say why"),
    Mutant("plans-board-bulk-kept", "plans-board", "board/web/bulk.py",
           'counts.get("refused")', 'None',
           (PLANS_BOARD,), "a bulk delete does not name the todos it kept for their waiters"),
    # -- teams: roles, the record of actions, the last admin, membership (base.acts, teams.py, teams.sql) --
    Mutant("teams-role-unchecked", "teams", "board/store/base.py",
           "            if not person.may(role):", "            if False:",
           (TEAMS + "::test_each_role_may_take_an_action_only_at_or_above_the_role_it_needs_and_each_taken_one_is_recorded",),
           "a viewer (or an operator) takes an action their role does not allow"),
    Mutant("teams-record-outside", "teams", "board/store/base.py",
           "                            wrote = await self._record(conn, record, rows)\n",
           "                            wrote = False\n",
           (TEAMS + "::test_each_role_may_take_an_action_only_at_or_above_the_role_it_needs_and_each_taken_one_is_recorded",),
           "a person's action goes unrecorded"),
    Mutant("teams-record-on-miss", "teams", "board/store/base.py",
           "        if record.written or not record.took(result):", "        if record.written:",
           (TEAMS + "::test_an_action_that_misses_or_is_refused_by_its_rules_is_not_recorded",),
           "an action that missed (a conflict) is recorded as if it happened"),
    Mutant("teams-last-admin-demoted", "teams", SQL + "teams.sql",
           "   WHERE %(role)s = 'admin' OR (SELECT n FROM other_admins) > 0", "",
           (TEAMS + "::test_the_last_admin_is_kept_and_of_two_admins_stepping_down_at_once_one_stays",),
           "the team's last admin steps down to operator: nobody can manage the team", statement="team_member_set"),
    Mutant("teams-last-admin-removed", "teams", SQL + "teams.sql",
           " AND (m.role <> 'admin' OR (SELECT n FROM other_admins) > 0)", "",
           (TEAMS + "::test_the_last_admin_is_kept_and_of_two_admins_stepping_down_at_once_one_stays",),
           "the team's last admin is removed", statement="team_member_remove"),
    Mutant("teams-no-turns", "teams", SQL + "teams.sql",
           "SELECT id FROM users WHERE id = %(team_id)s AND kind = 'team' FOR NO KEY UPDATE;",
           "SELECT id FROM users WHERE id = %(team_id)s AND kind = 'team';",
           (TEAMS + "::test_the_last_admin_is_kept_and_of_two_admins_stepping_down_at_once_one_stays",),
           "two admins stepping down at once both succeed: the team is left without one", statement="team_lock"),
    Mutant("teams-todo-of-anyone", "teams", SQL + "teams.sql",
           " WHERE t.id = %(id)s AND (u.id = %(person)s OR m.user_id IS NOT NULL);", " WHERE t.id = %(id)s;",
           (TEAMS + "::test_a_person_sees_a_team_todo_only_while_a_member_and_another_process_knows_at_once",),
           "a stranger (or a removed member) opens a team's todo by its id", statement="todo_space_of_person"),
    Mutant("teams-space-of-anyone", "teams", SQL + "teams.sql",
           " WHERE u.id = %(space)s AND (u.id = %(person)s OR m.user_id IS NOT NULL);", " WHERE u.id = %(space)s;",
           (TEAMS + "::test_a_person_sees_a_team_todo_only_while_a_member_and_another_process_knows_at_once",),
           "a stranger (or a removed member) switches to a team's space", statement="space_of_person"),
    Mutant("teams-shared-agent-id", "teams", SQL + "accounts.sql",
           " WHERE s.id IS NULL OR NOT EXISTS", " WHERE s.id IS NULL OR EXISTS",
           (TEAMS + "::test_a_team_endpoint_s_agent_id_is_its_own_among_the_team_s_live_endpoints",),
           "two live endpoints of a team share an agent id, so either acts as the other's holder",
           statement="endpoint_insert"),
    Mutant("teams-revoke-whole-team", "teams", SQL + "accounts.sql",
           "     AND (ep.space_id IS NULL OR EXISTS", "     AND (true OR EXISTS",
           (TEAMS + "::test_revoking_a_team_endpoint_dead_letters_only_what_it_held",),
           "revoking one endpoint of a team dead-letters what the team's other endpoints hold",
           statement="endpoint_revoke"),
    Mutant("teams-team-sign-in", "teams", SQL + "accounts.sql",
           "WHERE username = %(username)s AND kind = 'person';", "WHERE username = %(username)s;",
           (TEAMS + "::test_a_team_cannot_be_signed_in_as_nor_take_a_person_s_name",),
           "a team's name signs in (or is taken as a person)", statement="user_by_name"),
    # -- plans: todos that wait for others (claims.sql, closes.sql, adds.sql, deletes.sql, migration 0016) --
    Mutant("plans-waiting-claimable", "plans", SQL + "claims.sql",
           "AND NOT t.scheduled AND t.waits = 0", "AND NOT t.scheduled",
           (DEPENDENCIES + "::test_a_waiting_todo_of_the_highest_priority_is_passed_over_until_its_dependency_is_done",),
           "claim_next takes a todo before what it waits for is done", statement=("todo_claim_fast", "todo_claim"),
           times=2),
    Mutant("plans-never-released", "plans", SQL + "closes.sql",
           "CASE WHEN t.waited_on", "CASE WHEN false",
           (DEPENDENCIES + "::test_a_three_step_plan_is_claimed_in_its_order",),
           "completing a todo leaves what waits on it waiting for ever", statement=("todo_complete", "todos_complete"),
           times=2),
    Mutant("plans-not-marked", "plans", SQL + "adds.sql",
           "UPDATE todos t SET waited_on = true", "UPDATE todos t SET waited_on = t.waited_on",
           (DEPENDENCIES + "::test_a_todo_waiting_on_two_is_claimable_only_after_both_complete",),
           "a todo named in after is not marked, so its complete never releases its waiters", statement="todos_add"),
    Mutant("plans-delete-waited-on", "plans", SQL + "deletes.sql",
           "AND (t.state = 'done' OR NOT EXISTS (", "AND (true OR NOT EXISTS (",
           (DEPENDENCIES + "::test_deleting_a_todo_others_wait_on_is_refused_with_its_waiters_unless_deleted_with_it",),
           "deleting a canceled todo others wait on leaves them waiting on nothing", statement="todos_delete_human"),
    # -- teams-live: the record on the Board and a team's live Board (board/web/events.py,
    # -- activity.py, context.py) ---------------------------------------------------------------
    Mutant("teams-live-said-to-actor", "teams-live", "board/web/events.py",
           ' and event.get("actor_id") != human.actor', "",
           (BOARD_ACTIVITY + "::test_two_members_each_see_a_team_change_live_and_only_the_other_hears_who_made_it",),
           "the person who acted is told what they did, beside their flash"),
    Mutant("teams-live-said-in-any-space", "teams-live", "board/web/events.py",
           'return event.get("space") == human.user_id and', "return",
           (BOARD_ACTIVITY + "::test_two_members_each_see_a_team_change_live_and_only_the_other_hears_who_made_it",),
           "a Board of another space (a non-member's own) hears what a team member did"),
    Mutant("teams-live-removal-ends-nothing", "teams-live", "board/web/events.py",
           'elif kind == "member_removed" and ends_for(event, human):', 'elif kind == "member_removed" and False:',
           (BOARD_ACTIVITY + "::test_a_removed_member_has_their_stream_of_the_team_ended_by_a_removal_in_another_process",),
           "a member removed from a team keeps watching it live"),
    Mutant("teams-live-removal-ends-everyone", "teams-live", "board/web/events.py",
           'return event.get("team") == human.user_id and event.get("user") == human.actor',
           'return event.get("team") == human.user_id',
           (BOARD_ACTIVITY + "::test_a_removed_member_has_their_stream_of_the_team_ended_by_a_removal_in_another_process",),
           "a member's removal ends every member's stream of the team"),
    Mutant("teams-live-drawer-no-records", "teams-live", "board/web/context.py",
           '"records": await store.audit_of_todo(human, todo["id"])', '"records": []',
           (BOARD_ACTIVITY + "::test_the_drawer_lists_who_did_what_to_a_team_todo_after_board_and_command_line_actions",),
           "the drawer says nothing of what people did to the todo"),
    Mutant("teams-live-activity-any-space", "teams-live", SQL + "teams.sql",
           " WHERE r.space_id = %(space_id)s\n", " WHERE true\n",
           (BOARD_ACTIVITY + "::test_the_activity_page_lists_the_spaces_records_newest_first_with_filters",),
           "the Activity page lists other spaces' records", "audit_list"),
    Mutant("teams-live-activity-person-ignored", "teams-live", "board/web/activity.py",
           "actor=filters.person,", "actor=None,",
           (BOARD_ACTIVITY + "::test_the_activity_page_lists_the_spaces_records_newest_first_with_filters",),
           "the Activity page's person filter is ignored"),
    Mutant("teams-live-activity-cursor-ignored", "teams-live", "board/web/activity.py",
           "cursor=filters.cursor)", "cursor=None)",
           (BOARD_ACTIVITY + "::test_the_activity_page_pages_back_through_records_made_in_one_transaction",),
           "the Activity page's older records repeat the newest"),
    Mutant("teams-live-activity-bad-action", "teams-live", "board/web/activity.py",
           'if values["action"] not in ACTIONS:', "if False:",
           (BOARD_ACTIVITY + "::test_a_bad_activity_filter_is_a_400_naming_it_never_a_500",),
           "an action the record has no words for is searched for, not refused"),
    Mutant("teams-live-streams-by-person", "teams-live", "board/web/events.py",
           "self._streams.setdefault(stream.human.user_id, set()).add(stream)",
           "self._streams.setdefault(stream.human.actor, set()).add(stream)",
           (BOARD_ROWS + "::test_a_team_change_is_read_once_for_every_members_stream_and_rendered_for_each",),
           "a member's stream of a team is keyed by the person, and hears none of the team's changes"),
    Mutant("teams-live-read-per-member", "teams-live", "board/web/events.py",
           "members = [(s, (s.row_key, s.watching == todo_id)) for s in",
           "members = [(s, (s.row_key, s.watching == todo_id, s.human.actor)) for s in",
           (BOARD_ROWS + "::test_a_team_change_is_read_once_for_every_members_stream_and_rendered_for_each",),
           "a team's change is read once per member watching, not once per view"),
    Mutant("teams-live-new-role-kept", "teams-live", "board/web/events.py",
           'elif kind == "member_changed" and ends_for(event, human):', 'elif kind == "member_changed" and False:',
           (BOARD_ACTIVITY + "::test_a_members_new_role_ends_their_stream_so_it_comes_back_with_it",),
           "a member's stream goes on showing the team with the role they no longer have"),
    # -- teams-mcp: the scope of a team's endpoints (migration 0018, accounts.sql, oauth.sql,
    # claims.sql, base.py's caller parameters, the doorbell's doorways)
    Mutant("teams-mcp-scope-by-credential", "teams-mcp", "board/store/base.py",
           '"endpoint_id": caller.space,', '"endpoint_id": caller.endpoint_id,',
           (TEAMS_SHARE, TEAM_POOL), "a team endpoint reads and claims only the todos it added itself"),
    Mutant("teams-mcp-vend-personal", "teams-mcp", SQL + "accounts.sql",
           "%(scope)s, %(queues)s, s.id", "%(scope)s, %(queues)s, NULL",
           (TEAMS_SHARE, TEAM_POOL), "an endpoint vended for a team is not the team's: it sees none of its todos",
           "endpoint_insert"),
    Mutant("teams-mcp-vend-agent-id-twice", "teams-mcp", SQL + "accounts.sql",
           "WHERE s.id IS NULL OR NOT EXISTS", "WHERE true OR NOT EXISTS",
           (TEAMS_MCP + "::test_an_agent_id_names_one_live_endpoint_of_a_team",),
           "two live endpoints of a team share an agent id, so each may act on what the other holds",
           "endpoint_insert"),
    Mutant("teams-mcp-attempt-names-the-team", "teams-mcp", SQL + "claims.sql",
           "%(claimer_id)s::uuid, %(claimer_session)s::text", "%(endpoint_id)s::uuid, %(claimer_session)s::text",
           (TEAM_POOL,), "an attempt of a team endpoint names the team's space, not the endpoint that claimed",
           ("todo_claim_fast", "todo_claim"), 2),
    Mutant("teams-mcp-revoke-dead-letters-the-teams", "teams-mcp", SQL + "accounts.sql",
           "AND (ep.space_id IS NULL OR EXISTS", "AND (true OR EXISTS",
           (TEAM_REVOKE,),
           "revoking one endpoint of a team dead-letters every held todo of the team", "endpoint_revoke"),
    Mutant("teams-mcp-revoke-misses-the-teams", "teams-mcp", SQL + "accounts.sql",
           "WHERE t.endpoint_id = coalesce(ep.space_id, ep.id)", "WHERE t.endpoint_id = ep.id",
           (TEAM_REVOKE,),
           "revoking a team endpoint leaves what it held claimed until its lease lapses", "endpoint_revoke"),
    Mutant("teams-mcp-doorbell-by-credential", "teams-mcp", "board/mcp/doorbell.py",
           "self._doorways.setdefault(agent.space, set()).add(doorway)",
           "self._doorways.setdefault(agent.endpoint_id, set()).add(doorway)",
           (TEAMS_MCP + "::test_a_todo_one_team_endpoint_adds_rings_another_team_endpoints_listener",),
           "a team endpoint's listener never hears what another endpoint of the team adds"),
    Mutant("teams-mcp-grant-personal", "teams-mcp", SQL + "oauth.sql",
           "(SELECT s.id FROM endpoints s WHERE s.user_id = code.user_id AND s.kind = 'team')", "NULL",
           (TEAMS_OAUTH + "::test_an_admin_connects_the_sdk_client_for_a_team_and_it_drains_the_teams_queue",),
           "a grant consented for a team is not the team's: it sees none of its todos", "oauth_code_exchange"),
    Mutant("teams-mcp-one-grant-per-team-client", "teams-mcp", SQL + "oauth.sql",
           "AND (e.space_id IS NULL OR e.agent_id = c.agent_id)", "",
           (TEAMS_OAUTH + "::test_two_admins_connecting_one_client_for_a_team_get_a_grant_each_by_agent_id",),
           "a second admin's consent of a client for a team takes over the first's grant", "oauth_code_exchange"),
    Mutant("teams-mcp-grant-agent-id-taken", "teams-mcp", SQL + "oauth.sql",
           " AND NOT EXISTS (SELECT FROM taken)", "",
           (TEAMS_OAUTH + "::test_a_code_for_an_agent_id_another_endpoint_of_the_team_has_grants_nothing",),
           "a grant takes an agent id another endpoint of the team has", "oauth_code_exchange"),
    Mutant("teams-mcp-consent-any-role", "teams-mcp", "board/web/consent.py",
           'if s["role"] == "admin"]', 'if s["role"]]',
           (TEAMS_OAUTH + "::test_a_forged_choice_of_a_team_the_person_is_not_an_admin_of_is_refused",),
           "the consent screen offers a team the person is not an admin of"),
    # -- teams-board: the Board in a space (context.py, events.py, pages.py, bulk.py, todo_forms.py,
    # -- templating.py, overview.py, the templates): scope and role checks -------------------------
    Mutant("teams-board-todo-in-board-space", "teams-board", "board/web/context.py",
           "return human, await runtime(request).store.human_for_todo(person, todo_id), session",
           "return human, human, session",
           (TEAMS_BOARD + "::test_a_team_todo_url_works_for_a_member_whichever_space_the_board_shows",),
           "a todo's URL is read in the space the Board shows, not the todo's: a member's link 404s"),
    Mutant("teams-board-events-in-board-space", "teams-board", "board/web/events.py",
           "human = await rt.store.human_for_todo(Human(human.actor, human.username), watched) or human",
           "human = human",
           (TEAMS_BOARD + "::test_a_team_todo_url_works_for_a_member_whichever_space_the_board_shows",),
           "a todo page's live stream reads the Board's space: the member's drawer says gone"),
    Mutant("teams-board-action-unresolved", "teams-board", "board/web/pages.py",
           "    if human is None:  # a todo they may not see: as an id never minted\n", "    if False:\n",
           (TEAMS_BOARD + "::test_a_non_member_gets_exactly_what_a_never_minted_id_gets",),
           "a non-member's action on a team todo is not answered as an id never minted"),
    Mutant("teams-board-removed-kept", "teams-board", "board/web/context.py",
           "    human = await store.human_in(person, session.space)\n",
           "    human = await store.human_in(person, session.space) or replace(person, user_id=session.space)\n",
           (TEAMS_BOARD + "::test_removal_ends_access_on_the_next_request_in_every_process",),
           "a removed member's session keeps the team's space"),
    Mutant("teams-board-switch-unchecked", "teams-board", "board/web/teams.py",
           "chosen = await runtime(request).store.human_in(person, int(raw)) if",
           "chosen = Human(int(raw), person.username, actor_id=person.actor, space_name='x') if",
           (TEAMS_BOARD + "::test_the_switcher_shows_the_team_space_and_a_foreign_space_is_refused",),
           "the switcher takes a space that is not the person's"),
    Mutant("teams-board-bulk-role", "teams-board", "board/web/bulk.py",
           '    require_role(human, "operator", "act on todos")', "    pass",
           (TEAMS_BOARD + "::test_a_viewer_sees_no_action_control",),
           "a viewer gets the bulk confirmation"),
    Mutant("teams-board-add-role", "teams-board", "board/web/todo_forms.py",
           '    require_role(human, "operator", "act on todos")  # before', "    pass  # before",
           (TEAMS_BOARD + "::test_each_board_action_by_role_viewer_refused_operator_on_todos_admin_all[add]",),
           "a viewer's forged add is a form error, not the 403 page"),
    Mutant("teams-board-may", "teams-board", "board/web/templating.py",
           'context.setdefault("may", human.may if human is not None else _may_nothing)',
           'context.setdefault("may", lambda role: True)',
           (TEAMS_BOARD + "::test_a_viewer_sees_no_action_control",), "a viewer is shown every control"),
    Mutant("teams-board-drawer-role", "teams-board", "templates/_todo_actions.html",
           'actions_for(todo, human.actor) if may("operator") else []', "actions_for(todo, human.actor)",
           (TEAMS_BOARD + "::test_a_viewer_sees_no_action_control",), "a viewer's drawer has the todo's actions"),
    Mutant("teams-board-overview-role", "teams-board", "board/web/overview.py",
           "may=lambda role: admin,", "may=lambda role: True,",
           (TEAMS_BOARD + "::test_a_viewer_sees_no_action_control",),
           "the live overview draws pause and limit forms for a viewer"),
    Mutant("teams-board-you", "teams-board", "templates/_todo_row.html",
           "holder(todo, human.actor)", "holder(todo, human.user_id)",
           (TEAMS_BOARD + "::test_a_member_who_claims_a_team_todo_is_its_holder_you",),
           "a member's own claim in a team is not theirs (\"you\") on the list"),
    Mutant("teams-board-complete", "teams-board", "templates/_todo_actions.html",
           "actions_for(todo, human.actor) if", "actions_for(todo, human.user_id) if",
           (TEAMS_BOARD + "::test_a_member_who_claims_a_team_todo_is_its_holder_you",),
           "a member's own claim in a team has no Complete"),
    Mutant("teams-board-members-team-only", "teams-board", "board/web/teams.py",
           "    if human.space_name is None:\n        return human, session, not_found", "    if False:\n        return human, session, not_found",
           (TEAMS_BOARD + "::test_an_operator_sees_the_members_but_no_member_control",),
           "a personal space has a Members page"),
    Mutant("teams-board-member-remove-role", "teams-board", "board/web/teams.py",
           '    require_role(human, "admin", "manage this team")\n    member = ', "    member = ",
           (TEAMS_BOARD + "::test_an_operator_sees_the_members_but_no_member_control",),
           "an operator gets the remove confirmation"),
)

# The tests run from the copy (pytest puts its rootdir first on sys.path, so a copy of the
# package alone would be shadowed by the work tree's).
MUTANTS_DATA_DIR = ROOT / ".switchboard" / "mutants"
COPIED = ("board", "switchboard_worker", "migrations", "tests", "pyproject.toml")
LINKED = ("templates", "static", "e2e", "bench")


def check(mutants) -> list[str]:
    """Each mutant's text must occur exactly once in its file, and in a migration be part of
    the definition that runs."""
    problems = []
    for m in mutants:
        text = (ROOT / m.file).read_text()
        spans = [statement_span(text, name) for name in m.statements] if m.statement else [(0, len(text))]
        if None in spans:
            problems.append(f"{m.name}: {m.file} lacks a statement of {', '.join(m.statements)}")
            continue
        count = sum(text[start:end].count(m.find) for start, end in spans)
        where = f"statements {', '.join(m.statements)} of {m.file}" if m.statement else m.file
        if count != m.times:
            problems.append(f"{m.name}: its text occurs {count} times in {where}, not {m.times}")
        elif m.file.startswith("migrations/"):
            problems.extend(f"{m.name}: {p}" for p in migration_problems(m))
    return problems


def statement_span(text: str, name: str) -> tuple[int, int] | None:
    """Where the statement called name runs in a board/store/sql/ file: from its `-- name:` line to
    the next one (board/store/queries.py's format)."""
    found = re.search(rf"^-- name: {re.escape(name)}\s*$", text, re.MULTILINE)
    if found is None:
        return None
    after = re.search(r"^-- name: ", text[found.end():], re.MULTILINE)
    return found.start(), found.end() + after.start() if after else len(text)


def mutated(text: str, m: Mutant) -> str:
    """text with the mutant applied: every occurrence in its statement, or the one in its file."""
    if m.statement is None:
        return text.replace(m.find, m.replace, 1)
    for name in m.statements:
        start, end = statement_span(text, name)
        text = text[:start] + text[start:end].replace(m.find, m.replace) + text[end:]
    return text


# A mutant in a migration must edit what runs. An object (function, view, trigger, index,
# table...) that a later migration creates anew (CREATE OR REPLACE, or DROP then CREATE)
# runs as the later text, and a table's column or constraint that a later ALTER TABLE drops
# runs no more: a mutant of either changes nothing and survives. The check is textual. Each
# migration is split into statements at the semicolons outside comments, strings and
# dollar-quoted bodies. The statement holding the mutant's text names its object by kind and
# name (CREATE or ALTER); in a table (CREATE TABLE, or ALTER TABLE ... ADD) the part between
# commas holding the text names its column, and its constraint when the text is in one (an
# unnamed CHECK on a column has Postgres's name for it, <table>_<column>_check). A later
# statement that creates or drops the same kind and name, or an ALTER TABLE of that table
# that drops that column or constraint, is reported. Names are compared without schema,
# quotes or case; a function's arguments are not compared, so an overload counts as a
# replacement (a false alarm rather than a miss). Not followed: renames, CASCADE drops of
# dependants, and ALTER forms that drop less than a column or constraint (DROP DEFAULT...).
# A statement that names no object (INSERT, UPDATE: a data step) is not checked.
MIGRATION_FILE = re.compile(r"migrations/(\d+)_[^/]+\.sql")
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_]\w*)?\$")
_OBJECT = re.compile(
    r"\s*(CREATE(?:\s+OR\s+REPLACE)?|ALTER|DROP)\s+(?:UNIQUE\s+|CONSTRAINT\s+|MATERIALIZED\s+)?"
    r"(TABLE|VIEW|FUNCTION|PROCEDURE|TRIGGER|INDEX|DOMAIN|TYPE|SEQUENCE)\s+"
    r"(?:CONCURRENTLY\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?:ONLY\s+)?([\w.\"]+)", re.IGNORECASE)
_ADD = re.compile(r"\s*ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?", re.IGNORECASE)
_CONSTRAINT = re.compile(r"\b(?:CONSTRAINT\s+([\w\"]+)|CHECK\b)", re.IGNORECASE)
_DROP_PART = re.compile(r"\s*DROP\s+(?:(COLUMN|CONSTRAINT)\s+)?(?:IF\s+EXISTS\s+)?([\w\"]+)", re.IGNORECASE)
_NOT_COLUMNS = ("CONSTRAINT", "CHECK", "PRIMARY", "UNIQUE", "FOREIGN", "EXCLUDE")


def _scan(text: str, code: list[str], bare: list[str], i: int, end: int, spans: list | None) -> None:
    """Blank out text[i:end]'s comments in code, and its comments, strings and dollar-quoted
    bodies in bare; record the statements' spans in spans (None inside a body, whose
    semicolons end no statement)."""
    start = i
    while i < end:
        if text.startswith("--", i) or text.startswith("/*", i):
            stop = text.find("\n", i) if text[i] == "-" else text.find("*/", i + 2) + 2
            stop = end if stop < i + 2 else min(stop, end)
            code[i:stop] = bare[i:stop] = " " * (stop - i)
        elif text[i] in "'\"":  # a string or a quoted name; a doubled quote stays inside
            stop = text.find(text[i], i + 1)
            while stop >= 0 and text.startswith(text[i], stop + 1):
                stop = text.find(text[i], stop + 2)
            stop = end if stop < 0 else stop + 1
            if text[i] == "'":
                bare[i:stop] = " " * (stop - i)
        elif (tag := _DOLLAR_QUOTE.match(text, i)) is not None:
            body_end = text.find(tag.group(), tag.end())
            body_end = end if body_end < 0 else body_end
            _scan(text, code, bare, tag.end(), body_end, None)
            stop = min(body_end + len(tag.group()), end)
            bare[i:stop] = " " * (stop - i)
        else:
            if text[i] == ";" and spans is not None:
                spans.append((start, i + 1))
                start = i + 1
            stop = i + 1
        i = stop
    if spans is not None:
        spans.append((start, end))


def sql_statements(text: str) -> tuple[str, str, list[tuple[int, int]]]:
    """A SQL script with its comments blanked out (code), also its strings and bodies (bare),
    every offset kept; and its statements' spans."""
    code, bare, spans = list(text), list(text), []
    _scan(text, code, bare, 0, len(text), spans)
    return "".join(code), "".join(bare), spans


def _name(word: str | None) -> str | None:
    return None if word is None else word.replace('"', "").lower().removeprefix("public.")


def _object(bare: str, at: int) -> tuple[str, str, str, int] | None:
    """(verb, kind, name, where the name ends) of what the statement at `at` creates, alters or drops."""
    found = _OBJECT.match(bare, at)
    if found is None:
        return None
    verb, kind = (" ".join(g.upper().split()) for g in found.groups()[:2])
    return verb, kind, _name(found.group(3)), found.end()


def _parts(bare: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans between the commas of bare[start:end] outside parentheses, up to its end or
    the parenthesis that closes before it."""
    spans, depth = [], 0
    for i in range(start, end):
        depth += {"(": 1, ")": -1}.get(bare[i], 0)
        if depth < 0:
            end = i
            break
        if bare[i] == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, end))
    return spans


def _table_part(bare: str, verb: str, table: str, after: int, end: int, at: int) -> tuple[str | None, str | None]:
    """(column, constraint) of a table definition's part that holds offset `at` (each None
    when the text is in none)."""
    if verb.startswith("CREATE"):
        start = bare.find("(", after, end) + 1
        if start == 0:
            return None, None
    else:
        start = after
    part = next(((s, e) for s, e in _parts(bare, start, end) if s <= at < e), None)
    if part is None:
        return None, None
    s, e = part
    if not verb.startswith("CREATE"):  # of an ALTER TABLE, only what it adds
        added = _ADD.match(bare, s)
        if added is None or added.end() > e:
            return None, None
        s = added.end()
    words = bare[s:e].split()
    column = words[0] if words and words[0].upper() not in _NOT_COLUMNS else None
    mark = _CONSTRAINT.search(bare, s, e)
    if mark is None or at < mark.start():
        return _name(column), None
    constraint = mark.group(1) or (f"{table}_{_name(column)}_check" if column else None)
    return _name(column), _name(constraint)


def migration_problems(m: Mutant) -> list[str]:
    """Why the mutant's text in a migration is not part of the definition that runs, if it is not."""
    which = MIGRATION_FILE.fullmatch(m.file)
    if which is None:
        return [f"{m.file} is not a migration: nothing applies it"]
    text = (ROOT / m.file).read_text()
    at = text.index(m.find)
    code, bare, spans = sql_statements(text)
    if not code[at:at + len(m.find)].strip():
        return [f"its text is a comment in {m.file}"]
    start, end = next((s, e) for s, e in spans if s <= at < e)
    defined = _object(bare, start)
    if defined is None:
        return []
    verb, kind, name, after = defined
    column, constraint = _table_part(bare, verb, name, after, end, at) if kind == "TABLE" else (None, None)
    numbered = ((MIGRATION_FILE.fullmatch(f"migrations/{path.name}"), path.name)
                for path in (ROOT / "migrations").glob("*.sql"))
    later = sorted((int(n.group(1)), file) for n, file in numbered if n and int(n.group(1)) > int(which.group(1)))
    for _, later_name in later:  # the first replacement found is the one reported
        _, later_bare, later_spans = sql_statements((ROOT / "migrations" / later_name).read_text())
        for s, e in later_spans:
            other = _object(later_bare, s)
            if other is None or other[1:3] != (kind, name):
                continue
            if other[0] != "ALTER":
                return [f"migrations/{later_name} replaces the {kind.lower()} {name} its text is in "
                        f"({other[0]} {kind}), so the mutant of {m.file} changes nothing that runs"]
            for ps, _ in _parts(later_bare, other[3], e) if column or constraint else ():
                drop = _DROP_PART.match(later_bare, ps)
                what = "column" if drop is None or drop.group(1) is None else drop.group(1).lower()
                if drop is not None and _name(drop.group(2)) == {"column": column, "constraint": constraint}[what]:
                    return [f"migrations/{later_name} drops the {what} {_name(drop.group(2))} of {name} its text "
                            f"is in, so the mutant of {m.file} changes nothing that runs"]
    return []


def run(m: Mutant, pytest_args: list[str]) -> tuple[bool, float, str]:
    """Apply one mutant to a copy and run its tests; returns (killed, seconds, last line)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{m.name}-") as tmp:
        copy = Path(tmp)
        for name in COPIED:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
            else:
                shutil.copy2(ROOT / name, copy / name)
        if (ROOT / "tests" / "clients" / "node_modules").exists():
            (copy / "tests" / "clients" / "node_modules").symlink_to(ROOT / "tests" / "clients" / "node_modules")
        for name in LINKED:
            if m.file.startswith(name + "/"):  # the mutant's own folder: a copy, never the work tree's
                shutil.copytree(ROOT / name, copy / name)
            else:
                (copy / name).symlink_to(ROOT / name)
        target = copy / m.file
        target.write_text(mutated(target.read_text(), m))
        env = {**os.environ, "SWITCHBOARD_TEST_DATA_DIR": str(MUTANTS_DATA_DIR)}
        probe = subprocess.run([sys.executable, "-c", "import board, switchboard_worker as w; "
                                "print(board.__file__); print(w.__file__)"], cwd=copy, env=env,
                               capture_output=True, text=True)
        if not probe.stdout or not all(line.startswith(str(copy)) for line in probe.stdout.splitlines()):
            raise RuntimeError(f"the mutant's copy is not what imports: {probe.stdout}{probe.stderr}")
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
             *pytest_args, *m.tests], cwd=copy, env=env, capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        # Killed means a test failed; an error starting the tests is not a kill.
        killed = proc.returncode == 1 and any(" failed" in line for line in lines[-3:])
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{m.name}: pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        # The test that killed it (pytest's summary line), so a list entry can name it first.
        killer = next((line.split()[1] for line in lines if line.startswith("FAILED ")), "")
        return killed, time.monotonic() - started, f"{lines[-1] if lines else ''}  {killer}".rstrip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group", action="append", help="only this group (repeatable)")
    ap.add_argument("--name", action="append", help="only this mutant (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("pytest_args", nargs="*", help="extra arguments for pytest")
    args = ap.parse_args()
    problems = check(MUTANTS)  # the whole list, whatever is chosen: a stale entry is a stale list
    if problems:
        print("the mutant list is out of date with the code:", *problems, sep="\n  ")
        return 2
    chosen = [m for m in MUTANTS if (not args.group or m.group in args.group) and (not args.name or m.name in args.name)]
    if args.list:
        for m in chosen:
            print(f"{m.group:9} {m.name:34} {m.why}")
        return 0
    survivors = []
    # The runs' embedded Postgres, started once: while this process holds it, each run's
    # tests attach to the running server instead of starting and stopping one of their own.
    from board.store.db import EmbeddedPostgres

    server = None if os.environ.get("DATABASE_URL") else EmbeddedPostgres(MUTANTS_DATA_DIR)
    if server is not None:
        server.start()
    try:
        for m in chosen:
            killed, seconds, last = run(m, args.pytest_args)
            print(f"{'killed  ' if killed else 'SURVIVED'} {m.name:34} {seconds:5.1f} s  {last}", flush=True)
            if not killed:
                survivors.append(m)
    finally:
        if server is not None:
            server.stop()
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} mutants killed; {len(survivors)} survived")
    for m in survivors:
        print(f"  survivor {m.name}: {m.why} ({m.file}; tests {', '.join(m.tests)})")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
