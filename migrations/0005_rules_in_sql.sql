-- Each rule of a todo's and an attempt's state held once, as a SQL function every statement
-- (board/store/sql/) and every function below calls. Each is IMMUTABLE LANGUAGE sql with a
-- single expression, so the planner inlines it: a statement's plan is what it would be
-- with the expression written out.

-- An attempt died when its lease lapsed with no report from its holder (REQ-4). An open
-- attempt (no outcome yet) has not died.
CREATE FUNCTION attempt_died(outcome attempt_outcome) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(outcome IN ('lease_expired', 'reaped'), false)
$$;

-- A dead letter: a failed todo with no retry ahead of it. It stays until a manual retry,
-- a cancel or retention.
CREATE FUNCTION todo_dead_letter(state todo_state, next_retry_at timestamptz) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT state = 'failed' AND next_retry_at IS NULL
$$;

-- A todo that has ended: done, canceled or a dead letter. Only an ended todo can be
-- continued, and only an ended one is deleted by retention.
CREATE FUNCTION todo_ended(state todo_state, next_retry_at timestamptz) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT state IN ('done', 'canceled') OR todo_dead_letter(state, next_retry_at)
$$;

-- An attempt as agents and the Board see it: its notes' counters, the time of its last
-- note, and `usage`: what the closing verb reported, or null when it reported nothing.
CREATE OR REPLACE FUNCTION attempt_public(a attempts) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('seq', a.seq, 'attempt', a.attempt,
    'claimer_kind', a.claimer_kind, 'claimant', a.claimant, 'claimed_at', a.claimed_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'lease_expires_at', a.lease_expires_at,
    'ended_at', a.ended_at, 'outcome', a.outcome, 'disposition', a.disposition,
    'died', attempt_died(a.outcome),
    'summary', a.summary, 'summary_truncated', a.summary_truncated, 'artifact', a.artifact,
    'notes_count', coalesce(a.notes_count, 0), 'notes_pruned', coalesce(a.notes_pruned, 0),
    'last_note_at', a.last_note_at,
    'usage', CASE WHEN num_nonnulls(a.input_tokens, a.output_tokens, a.cost_usd, a.model) > 0 THEN
      json_build_object('input_tokens', a.input_tokens, 'output_tokens', a.output_tokens,
                        'cost_usd', a.cost_usd, 'model', a.model) END)
$$;

-- A claim's n prior attempts, newest first, each with its `notes` newest notes (the caller
-- passes board/store/vocabulary.py's PRIOR_NOTES).
CREATE FUNCTION attempt_prior(todo_id text, n integer, notes integer) RETURNS json
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json)
    FROM (SELECT a.seq, attempt_public_notes(a, $3) AS j FROM attempts a
           WHERE a.todo_id = $1 AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT $2) x
$$;

-- What a claim of a continuing todo returns beside it: the predecessor (of the same
-- endpoint) with its id, state, result, attempts_total and its last closed attempt with its
-- `notes` newest notes. The claim calls it only for a todo whose continues_id is set, so a
-- claim of any other todo sets up nothing for it.
CREATE FUNCTION todo_continuation(pred_id text, endpoint uuid, notes integer) RETURNS json
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('id', p.id, 'state', p.state,
    'dead_letter', todo_dead_letter(p.state, p.next_retry_at), 'result', p.result,
    'attempts_total', p.attempts_total,
    'last_attempt', (SELECT attempt_public_notes(a, $3) FROM attempts a
                      WHERE a.todo_id = p.id AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT 1))
    FROM todos p WHERE p.id = $1 AND p.endpoint_id = $2
$$;

-- Which hook event a transition's new state writes (none: null): a todo that became ready,
-- or one that became a dead letter. And the event's head, the same in every payload.
CREATE FUNCTION hook_event(state todo_state, next_retry_at timestamptz) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN $1::todo_state = 'pending' THEN 'todo.ready'
              WHEN todo_dead_letter($1::todo_state, $2::timestamptz) THEN 'todo.dead_lettered' END
$$;

CREATE FUNCTION hook_payload(event text, occurred_at timestamptz, id text, queue text, title text,
                             state todo_state, attempt integer, max_attempts integer,
                             attempts_total integer, endpoint_id uuid) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object('event', $1::text, 'occurred_at', $2::timestamptz,
    'todo', jsonb_build_object('id', $3::text, 'queue', $4::text, 'title', $5::text, 'state', $6::todo_state,
      'attempt', $7::integer, 'max_attempts', $8::integer, 'attempts_total', $9::integer,
      'endpoint_id', $10::uuid))
$$;

-- The exact attempt summary of a todo (hook payloads and the in-process hooks): per-outcome
-- counts over the whole history (live rows plus what pruning folded into pruned_outcomes),
-- the 10 most recent attempts as outcome tokens, and how many were left out. A statement
-- that closes an attempt passes its seq and outcome, which that statement's own snapshot
-- still sees open; a plain read passes nulls. (The casts restate the argument types for a
-- reading of the body alone, as the plan test does.)
CREATE FUNCTION attempt_summary(todo_id text, total integer, pruned integer, pruned_outcomes jsonb,
                                closing_seq integer, closing_outcome text) RETURNS jsonb
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
    'total', $2::integer,
    'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
        SELECT w.k, sum(w.n)::int AS n FROM (
          SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
           WHERE a.todo_id = $1::text AND a.outcome IS NOT NULL AND a.seq IS DISTINCT FROM $5::integer GROUP BY 1
          UNION ALL SELECT $6::text, 1 WHERE $5::integer IS NOT NULL
          UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text($4::jsonb) p
        ) w GROUP BY w.k) z),
    'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
        SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                         'died', attempt_died(o.outcome::attempt_outcome)) AS j
          FROM attempts a
          CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = $5::integer THEN $6::text ELSE a.outcome::text END AS outcome) o
         WHERE a.todo_id = $1::text ORDER BY a.seq DESC LIMIT 10) x),
    'omitted', greatest($2::integer - least($2::integer - $3::integer, 10), 0))
$$;

-- The two-argument attempt_prior and todo_continuation of migration 0004 remain for the
-- statements of a server of the previous release still running while this one starts; no
-- statement of this release calls them.
