-- The public shape of an attempt (REQ-7, REQ-8) as one SQL function, and a claim's prior
-- attempts as another, so every statement in board/store.py that shows attempts shows them
-- the same way, and a first claim pays nothing for the list it does not have.
--
-- attempt_public(a) is a single expression, so the planner inlines it into each statement
-- that calls it: no function call at run time. It never shows lease_token_hash,
-- claimer_session or claimer_endpoint_id (REQ-7). It is STABLE, not IMMUTABLE, because a
-- timestamptz turns into JSON in the session's time zone.
--
-- attempt_prior(todo_id, n): the n newest closed attempts of a todo, newest first, as a JSON
-- array ('[]' when there are none). The claim calls it only for a todo claimed before. As a
-- sub-select of the claim, the same query was set up by the executor on every claim, used or
-- not: 36k instructions of a claim plus complete, counted with cachegrind. Its plan is one
-- backward walk of attempts_pkey (tests/integration/test_plans.py).

CREATE FUNCTION attempt_public(a attempts) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('seq', a.seq, 'attempt', a.attempt,
    'claimer_kind', a.claimer_kind, 'claimant', a.claimant, 'claimed_at', a.claimed_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'lease_expires_at', a.lease_expires_at,
    'ended_at', a.ended_at, 'outcome', a.outcome, 'disposition', a.disposition,
    'died', coalesce(a.outcome IN ('lease_expired', 'reaped'), false),
    'summary', a.summary, 'summary_truncated', a.summary_truncated, 'artifact', a.artifact)
$$;

CREATE FUNCTION attempt_prior(todo_id text, n integer) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json)
    FROM (SELECT a.seq, attempt_public(a) AS j FROM attempts a
           WHERE a.todo_id = $1 AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT $2) x
$$;
