-- Claims: pending -> claimed, or claimed with a lapsed lease -> claimed (a takeover). Each
-- opens one attempt, seq = the todo's new attempts_total, in the statement that updates the
-- todo (REQ-2); a takeover first closes the lapsed attempt lease_expired/requeued; the full
-- path prunes the oldest closed attempts past the per-todo cap, folding their outcomes and
-- usage into todos.pruned_outcomes and pruned_usage (REQ-3, REQ-11).
--
-- Each claim comes as a fast statement, tried first (a pending todo whose history needs no
-- pruning: only the attempt insert joins the todos update, which is the statement itself,
-- so its RETURNING is the response), and a full one run when the fast one finds nothing
-- (a lapsed lease, a capped history, nothing pending). They are separate statements, not
-- one with a parameter, because each has its own plan.
--
-- Scope is written out per statement: an agent's is its endpoint and granted queues (two
-- keyed conditions), a human's the endpoints of the user (a sub-select); one statement
-- choosing between them would plan for neither. An agent records its endpoint as claimer,
-- the Board records the owner and no endpoint (REQ-1).
--
-- A queue the caller's human has paused (migration 0003): an agent's claim probes the small
-- queue_pauses table by its key for each candidate row (an anti-join: the scan stops at the
-- first row of a live queue, and the planner judges it as passing nearly every row, so
-- claim_next still walks the pending index). Not phrased as "queue <> ALL(the paused ones)":
-- the planner reads that as matching almost no row and scans and sorts the whole table.
-- The probe is a few per cent of a claim's server work, so a server process whose pause
-- cache (board/live/pause_cache.py) vouches for the caller's paused queues runs the _unpaused
-- claim_next statements, which leave it out; a claim by id always probes. The Board's own
-- claim is not held back by a pause.
--
-- claim_next takes the oldest pending todo, else a lapsed lease (the reaper returns the rest
-- to pending soon anyway). Two locking scans, because one with an OR could not use the
-- pending-only index; the lapsed scan runs only when no pending todo was found. A lapsed
-- lease on a todo's last allowed attempt is never taken over: the reaper dead-letters it.
--
-- A claim returns neither the state, owner, next_retry_at nor dead_letter: a claimed todo
-- has a holder and no retry time (the todos_consistent trigger), and the store fills them
-- in. Prior attempts come from attempt_prior, called only for a todo claimed before, and a
-- continuing todo's predecessor from todo_continuation, called only when continues_id is
-- set: as sub-selects, the executor would set them up on every claim. The counts passed in
-- (prior_attempts, prior_notes) are board/store/vocabulary.py's.

-- name: todo_claim_next_fast
-- description: claim_next's first try: the oldest pending todo of the agent's queues whose history needs no pruning -> claimed, opening an attempt
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'endpoint'::attempt_claimer_kind,
         %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text,
         coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
             %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s,
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
           updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload,
          t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, %(prior_attempts)s::int, %(prior_notes)s::int) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text) END;

-- name: todo_claim_next
-- description: claim_next's full path: the oldest pending todo, else a lapsed lease to take over -> claimed; closes the lapsed attempt, prunes history, opens an attempt
WITH lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
cand AS (
  SELECT * FROM pending_cand
  UNION ALL
  SELECT * FROM lapsed_cand WHERE NOT EXISTS (SELECT 1 FROM pending_cand)
),
lapsed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_died(a.outcome) AS died,
            attempt_public_notes(a, %(prior_notes)s::int) AS public
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
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage
             ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
               'input_tokens', CASE WHEN count(p.input_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END,
               'output_tokens', CASE WHEN count(p.output_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END,
               'cost_usd', CASE WHEN count(p.cost_usd) > 0
                 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END
             FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid,
         %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at,
       upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at,
       upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, %(prior_notes)s::int) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT %(prior_attempts)s::int)
          ) y ORDER BY y.seq DESC LIMIT %(prior_attempts)s::int) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text) END
  FROM upd, ins;

-- name: todo_claim_next_fast_unpaused
-- description: todo_claim_next_fast without the queue_pauses probe, for a process whose pause cache already left paused queues out of claim_queues
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'endpoint'::attempt_claimer_kind,
         %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text,
         coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
             %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s,
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
           updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload,
          t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, %(prior_attempts)s::int, %(prior_notes)s::int) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text) END;

-- name: todo_claim_next_unpaused
-- description: todo_claim_next without the queue_pauses probe, for a process whose pause cache already left paused queues out of claim_queues
WITH lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
cand AS (
  SELECT * FROM pending_cand
  UNION ALL
  SELECT * FROM lapsed_cand WHERE NOT EXISTS (SELECT 1 FROM pending_cand)
),
lapsed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_died(a.outcome) AS died,
            attempt_public_notes(a, %(prior_notes)s::int) AS public
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
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage
             ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
               'input_tokens', CASE WHEN count(p.input_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END,
               'output_tokens', CASE WHEN count(p.output_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END,
               'cost_usd', CASE WHEN count(p.cost_usd) > 0
                 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END
             FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid,
         %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at,
       upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at,
       upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, %(prior_notes)s::int) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT %(prior_attempts)s::int)
          ) y ORDER BY y.seq DESC LIMIT %(prior_attempts)s::int) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text) END
  FROM upd, ins;

-- name: todo_claim_fast
-- description: An agent's claim by id, first try: the pending todo -> claimed when its history needs no pruning, opening an attempt
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.id = %(id)s
     AND t.state = 'pending'
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   FOR UPDATE OF t
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'endpoint'::attempt_claimer_kind,
         %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text,
         coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
             %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s,
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
           updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload,
          t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, %(prior_attempts)s::int, %(prior_notes)s::int) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text) END;

-- name: todo_claim
-- description: An agent's claim by id, full path: pending or a lapsed lease -> claimed; closes the lapsed attempt, prunes history, opens an attempt
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.id = %(id)s
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
                                  AND t.attempt < t.max_attempts))
   FOR UPDATE OF t
),
lapsed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_died(a.outcome) AS died,
            attempt_public_notes(a, %(prior_notes)s::int) AS public
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
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage
             ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
               'input_tokens', CASE WHEN count(p.input_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END,
               'output_tokens', CASE WHEN count(p.output_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END,
               'cost_usd', CASE WHEN count(p.cost_usd) > 0
                 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END
             FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid,
         %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at,
       upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at,
       upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, %(prior_notes)s::int) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT %(prior_attempts)s::int)
          ) y ORDER BY y.seq DESC LIMIT %(prior_attempts)s::int) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text) END
  FROM upd, ins;

-- name: todo_claim_human_fast
-- description: The owning human's claim by id (the Board), first try: the pending todo -> claimed, opening an owner attempt
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.id = %(id)s
     AND t.state = 'pending'
   FOR UPDATE OF t
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'owner'::attempt_claimer_kind, NULL::uuid,
         %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
             %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s,
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
           updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload,
          t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, %(prior_attempts)s::int, %(prior_notes)s::int) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text) END;

-- name: todo_claim_human
-- description: The owning human's claim by id (the Board), full path: pending or a lapsed lease -> claimed, with takeover and pruning
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.id = %(id)s
     AND (t.state = 'pending' OR (t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
                                  AND t.attempt < t.max_attempts))
   FOR UPDATE OF t
),
lapsed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_died(a.outcome) AS died,
            attempt_public_notes(a, %(prior_notes)s::int) AS public
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
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage
             ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
               'input_tokens', CASE WHEN count(p.input_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END,
               'output_tokens', CASE WHEN count(p.output_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END,
               'cost_usd', CASE WHEN count(p.cost_usd) > 0
                 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END
             FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'owner'::attempt_claimer_kind, NULL::uuid,
         %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at,
       upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at,
       upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, %(prior_notes)s::int) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT %(prior_attempts)s::int)
          ) y ORDER BY y.seq DESC LIMIT %(prior_attempts)s::int) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text) END
  FROM upd, ins;

-- name: todos_claim_next_fast
-- description: A batched claim_next's first try: the oldest pending todos of the agent's queues whose history needs no pruning -> claimed, each opening an attempt
-- claim_next with a limit above 1: up to limit todos in one statement, each opening its
-- own attempt, with its own lease token hash (token_hashes[n], null when not fenced) and its
-- own notification. As claim_next's, a fast statement first (pending todos whose history
-- needs no pruning), then the full one for what is left of the limit (a capped history, a
-- lapsed lease taken over only when no pending todo is left). The rows come back in no order;
-- each carries its attempt's lease_token_hash, so the store gives each its token. Both probe
-- queue_pauses, pause cache or not: a batch pays the probe once per candidate, not per call.
WITH cand AS (
  SELECT t.id, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.created_at, t.id
   LIMIT %(limit)s
   FOR UPDATE OF t SKIP LOCKED
),
numbered AS (  -- LIMIT 50 (claim_next's most) bounds the generic plan's row estimate: keyed joins below
  SELECT cand.*, row_number() OVER () AS n FROM cand WHERE cand.prev_total < %(history_max)s LIMIT 50
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT numbered.id, numbered.prev_total + 1, numbered.prev_attempt + 1, 'endpoint'::attempt_claimer_kind,
         %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text,
         coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         (%(token_hashes)s::bytea[])[numbered.n]
    FROM numbered
  RETURNING todo_id, seq, lease_token_hash
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s,
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
       updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload,
          t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, ins.lease_token_hash,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, %(prior_attempts)s::int, %(prior_notes)s::int) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text) END;

-- name: todos_claim_next
-- description: A batched claim_next's full path: the oldest pending todos, then lapsed leases to take over -> claimed; closes each lapsed attempt, prunes each history, opens an attempt each
WITH pending_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'pending'
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.created_at, t.id
   LIMIT %(limit)s
   FOR UPDATE OF t SKIP LOCKED
),
lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts
     AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.lease_expires_at
   LIMIT %(limit)s
   FOR UPDATE OF t SKIP LOCKED
),
cand AS (
  SELECT c.*, row_number() OVER () AS n FROM (
    SELECT * FROM pending_cand
    UNION ALL
    (SELECT * FROM lapsed_cand WHERE (SELECT count(*) FROM pending_cand) < %(limit)s
      LIMIT %(limit)s - (SELECT count(*) FROM pending_cand))) c
   LIMIT 50  -- claim_next's most: bounds the generic plan's row estimate, so the joins below stay keyed
),
lapsed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_died(a.outcome) AS died,
            attempt_public_notes(a, %(prior_notes)s::int) AS public
),
pruned AS (
  DELETE FROM attempts a USING cand
   WHERE cand.prev_total >= %(history_max)s
     AND a.todo_id = cand.id AND a.seq <= cand.prev_total + 1 - %(history_max)s
     AND a.ended_at IS NOT NULL
  RETURNING a.todo_id, a.seq, a.outcome, a.input_tokens, a.output_tokens, a.cost_usd
),
upd AS (
  UPDATE todos t
     SET state = 'claimed', owner = %(owner)s,
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned p WHERE p.todo_id = t.id),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned WHERE pruned.todo_id = t.id
                      GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage
             ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
               'input_tokens', CASE WHEN count(p.input_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END,
               'output_tokens', CASE WHEN count(p.output_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END,
               'cost_usd', CASE WHEN count(p.cost_usd) > 0
                 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END
             FROM pruned p WHERE p.todo_id = t.id) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed l WHERE l.todo_id = cand.id))
  RETURNING t.*, cand.n
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid,
         %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, (%(token_hashes)s::bytea[])[upd.n]
    FROM upd
  RETURNING todo_id, seq, lease_token_hash
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at,
       upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at,
       upd.updated_at, ins.lease_token_hash,
       (SELECT to_jsonb(l) - 'public' - 'todo_id' FROM lapsed l WHERE l.todo_id = upd.id) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l WHERE l.todo_id = upd.id
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, %(prior_notes)s::int) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT p.seq FROM pruned p WHERE p.todo_id = upd.id)
              ORDER BY a.seq DESC LIMIT %(prior_attempts)s::int)
          ) y ORDER BY y.seq DESC LIMIT %(prior_attempts)s::int) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text) END
  FROM upd JOIN ins ON ins.todo_id = upd.id;
