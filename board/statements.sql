-- Every statement the store sends to Postgres, rendered from board/statements.py
-- (psycopg turns each %(name)s into a $n parameter). Generated: do not edit; a test fails
-- when this file and the store differ. Regenerate with `python -m tests.unit.test_statements`.

-- name: SQL_ADD
-- add: -> pending
WITH upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, routing, max_attempts, created_at, updated_at)
  VALUES (%(endpoint_id)s, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()))
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'added')::text) FROM upd;

-- name: SQL_ADD_CONTINUING
WITH pred AS (
  SELECT t.id FROM todos t
   WHERE t.id = %(continues)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL))
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
         link.todo_id, coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
    FROM link
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.continues_id, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'added')::text) FROM upd;

-- name: SQL_ADD_HUMAN
-- add by the owning human (the Board): -> pending, through one of the human's live
-- endpoints granted the queue (the one named, else the oldest), chosen in the same statement.
-- FOR SHARE: a revocation committing meanwhile is waited for, and then the endpoint no longer
-- qualifies, so no todo is ever added to a revoked endpoint.
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
  SELECT ep.id, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()) FROM ep
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'added')::text) FROM upd;

-- name: SQL_ADD_HUMAN_CONTINUING
WITH pred AS (
  SELECT t.id, t.endpoint_id FROM todos t
   WHERE t.id = %(continues)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL))
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
         coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
    FROM ep, link
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.continues_id, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'added')::text) FROM upd;

-- name: SQL_ATTEMPT_SUMMARY
-- The exact attempt summary of one todo, read after a terminal transition committed (the
-- in-process hooks). System-wide: hooks run without a caller scope and read out nothing.
SELECT jsonb_build_object(
  'total', t.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = t.id AND a.outcome IS NOT NULL  GROUP BY 1
        
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(t.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT a.outcome::text AS outcome) o
       WHERE a.todo_id = t.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(t.attempts_total - least(t.attempts_total - t.attempts_pruned, 10), 0)) AS summary FROM todos t WHERE t.id = %(id)s;

-- name: SQL_CANCEL_HELD_AGENT
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'canceled'::attempt_outcome, disposition = 'canceled'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
                   FOR UPDATE OF t)
     AND a.outcome IS NULL 
  RETURNING a.attempt
)
UPDATE todos t SET state = 'canceled', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'canceled')::text);

-- name: SQL_CANCEL_UNHELD['agent']
-- cancel with no lease: pending, or failed waiting for a retry -> canceled. No attempt.
UPDATE todos t SET state = 'canceled', next_retry_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
   AND (t.state = 'pending' OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'canceled')::text);

-- name: SQL_CANCEL_UNHELD['human']
-- cancel with no lease: pending, or failed waiting for a retry -> canceled. No attempt.
UPDATE todos t SET state = 'canceled', next_retry_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
 WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
   AND (t.state = 'pending' OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'canceled')::text);

-- name: SQL_CLAIM_BY_AGENT
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.id = %(id)s AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
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
            a.summary_truncated, a.artifact, attempt_public_notes(a, 3) AS public
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
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object('input_tokens', CASE WHEN count(p.input_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END, 'output_tokens', CASE WHEN count(p.output_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END, 'cost_usd', CASE WHEN count(p.cost_usd) > 0 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd 
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, 3) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT 5)
          ) y ORDER BY y.seq DESC LIMIT 5) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text)
  FROM upd, ins;

-- name: SQL_CLAIM_BY_AGENT_FAST
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.id = %(id)s AND t.state = 'pending' AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   FOR UPDATE OF t
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s, lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, 5) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text);

-- name: SQL_CLAIM_BY_HUMAN
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
            a.summary_truncated, a.artifact, attempt_public_notes(a, 3) AS public
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
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object('input_tokens', CASE WHEN count(p.input_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END, 'output_tokens', CASE WHEN count(p.output_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END, 'cost_usd', CASE WHEN count(p.cost_usd) > 0 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'owner'::attempt_claimer_kind, NULL::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd 
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, 3) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT 5)
          ) y ORDER BY y.seq DESC LIMIT 5) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text)
  FROM upd, ins;

-- name: SQL_CLAIM_BY_HUMAN_FAST
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.id = %(id)s AND t.state = 'pending'
   FOR UPDATE OF t
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'owner'::attempt_claimer_kind, NULL::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s, lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, 5) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text);

-- name: SQL_CLAIM_NEXT
WITH lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s) AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s) AND t.state = 'pending' AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
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
            a.summary_truncated, a.artifact, attempt_public_notes(a, 3) AS public
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
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object('input_tokens', CASE WHEN count(p.input_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END, 'output_tokens', CASE WHEN count(p.output_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END, 'cost_usd', CASE WHEN count(p.cost_usd) > 0 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd 
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, 3) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT 5)
          ) y ORDER BY y.seq DESC LIMIT 5) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text)
  FROM upd, ins;

-- name: SQL_CLAIM_NEXT_FAST
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s) AND t.state = 'pending' AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue)
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s, lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, 5) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text);

-- name: SQL_CLAIM_NEXT_FAST_UNPAUSED
-- claim_next when the process's pause cache (board/live/pause_cache.py) has already left the
-- caller's paused queues out of claim_queues: no probe of queue_pauses per claim.
WITH cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s) AND t.state = 'pending'
   ORDER BY t.created_at, t.id
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT cand.id, cand.prev_total + 1, cand.prev_attempt + 1, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', %(token_hash)s::bytea
    FROM cand WHERE cand.prev_state = 'pending' AND cand.prev_total < %(history_max)s
  RETURNING todo_id, seq
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s, lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, 5) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'claimed')::text);

-- name: SQL_CLAIM_NEXT_UNPAUSED
WITH lapsed_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s) AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts
   ORDER BY t.lease_expires_at
   LIMIT 1
   FOR UPDATE OF t SKIP LOCKED
),
pending_cand AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt
    FROM todos t
   WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s) AND t.state = 'pending'
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
            a.summary_truncated, a.artifact, attempt_public_notes(a, 3) AS public
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
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object('input_tokens', CASE WHEN count(p.input_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END, 'output_tokens', CASE WHEN count(p.output_tokens) > 0 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END, 'cost_usd', CASE WHEN count(p.cost_usd) > 0 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END FROM pruned p) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed))
  RETURNING t.*
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash)
  SELECT upd.id, upd.attempts_total, upd.attempt, 'endpoint'::attempt_claimer_kind, %(endpoint_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text, coalesce(%(now)s::timestamptz, now()),
         upd.lease_expires_at, %(token_hash)s::bytea
    FROM upd 
  RETURNING todo_id, seq
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       (SELECT to_jsonb(l) - 'public' FROM lapsed l) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, 3) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT seq FROM pruned)
              ORDER BY a.seq DESC LIMIT 5)
          ) y ORDER BY y.seq DESC LIMIT 5) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id) END AS continues,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'claimed')::text)
  FROM upd, ins;

-- name: SQL_CLASSIFY['agent']
-- Classify a miss: the todo as the caller may see it, or nothing (REQ-19).
SELECT t.state::text AS state, t.owner, t.lease_expires_at <= coalesce(%(now)s::timestamptz, now()) AS lapsed, t.next_retry_at, t.queue, t.queue = ANY(ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s)) AS paused FROM todos t WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s);

-- name: SQL_CLASSIFY['human']
-- Classify a miss: the todo as the caller may see it, or nothing (REQ-19).
SELECT t.state::text AS state, t.owner, t.lease_expires_at <= coalesce(%(now)s::timestamptz, now()) AS lapsed, t.next_retry_at, t.queue, t.queue = ANY(ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s)) AS paused FROM todos t WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s);

-- name: SQL_CLOSE_AGENT[('complete', 'unfenced')]
-- Agent statements: the owner check always, the fence guard when UNFENCED.
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome, disposition = 'done'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
                   FOR UPDATE OF t)
     AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.attempt
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'completed')::text);

-- name: SQL_CLOSE_AGENT[('complete', 'token_checked')]
-- Agent statements: the owner check always, the fence guard when UNFENCED.
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome, disposition = 'done'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
                   FOR UPDATE OF t)
     AND a.outcome IS NULL 
  RETURNING a.attempt
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'completed')::text);

-- name: SQL_CLOSE_AGENT[('fail', 'unfenced')]
-- Agent statements: the owner check always, the fence guard when UNFENCED.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'failed'::attempt_outcome, disposition = (CASE WHEN l.attempt < l.max_attempts THEN 'retry_scheduled' ELSE 'dead_lettered' END)::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, next_retry_at = CASE WHEN t.attempt < t.max_attempts THEN coalesce(%(now)s::timestamptz, now()) + least(%(retry_max)s::float8, %(retry_base)s::float8 * power(2, least(t.attempt - 1, 30))) * (0.5 + random() * 0.5) * interval '1 second' END, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'failed')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT[('fail', 'token_checked')]
-- Agent statements: the owner check always, the fence guard when UNFENCED.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'failed'::attempt_outcome, disposition = (CASE WHEN l.attempt < l.max_attempts THEN 'retry_scheduled' ELSE 'dead_lettered' END)::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, next_retry_at = CASE WHEN t.attempt < t.max_attempts THEN coalesce(%(now)s::timestamptz, now()) + least(%(retry_max)s::float8, %(retry_base)s::float8 * power(2, least(t.attempt - 1, 30))) * (0.5 + random() * 0.5) * interval '1 second' END, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'failed')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT[('release', 'unfenced')]
-- Agent statements: the owner check always, the fence guard when UNFENCED.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'released'::attempt_outcome, disposition = 'requeued'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'pending', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'released')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT[('release', 'token_checked')]
-- Agent statements: the owner check always, the fence guard when UNFENCED.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'released'::attempt_outcome, disposition = 'requeued'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'pending', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'released')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT_USAGE[('complete', 'unfenced')]
-- The same closes when the caller reported usage.
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome, disposition = 'done'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
                   FOR UPDATE OF t)
     AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.attempt
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'completed')::text);

-- name: SQL_CLOSE_AGENT_USAGE[('complete', 'token_checked')]
-- The same closes when the caller reported usage.
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome, disposition = 'done'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
                   FOR UPDATE OF t)
     AND a.outcome IS NULL 
  RETURNING a.attempt
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'completed')::text);

-- name: SQL_CLOSE_AGENT_USAGE[('fail', 'unfenced')]
-- The same closes when the caller reported usage.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'failed'::attempt_outcome, disposition = (CASE WHEN l.attempt < l.max_attempts THEN 'retry_scheduled' ELSE 'dead_lettered' END)::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, next_retry_at = CASE WHEN t.attempt < t.max_attempts THEN coalesce(%(now)s::timestamptz, now()) + least(%(retry_max)s::float8, %(retry_base)s::float8 * power(2, least(t.attempt - 1, 30))) * (0.5 + random() * 0.5) * interval '1 second' END, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'failed')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT_USAGE[('fail', 'token_checked')]
-- The same closes when the caller reported usage.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'failed'::attempt_outcome, disposition = (CASE WHEN l.attempt < l.max_attempts THEN 'retry_scheduled' ELSE 'dead_lettered' END)::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, next_retry_at = CASE WHEN t.attempt < t.max_attempts THEN coalesce(%(now)s::timestamptz, now()) + least(%(retry_max)s::float8, %(retry_base)s::float8 * power(2, least(t.attempt - 1, 30))) * (0.5 + random() * 0.5) * interval '1 second' END, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'failed')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT_USAGE[('release', 'unfenced')]
-- The same closes when the caller reported usage.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'released'::attempt_outcome, disposition = 'requeued'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'pending', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'released')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_AGENT_USAGE[('release', 'token_checked')]
-- The same closes when the caller reported usage.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'released'::attempt_outcome, disposition = 'requeued'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, input_tokens = %(input_tokens)s::attempt_tokens, output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd, model = %(model)s::attempt_model
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'pending', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'released')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_HUMAN['complete']
-- Human statements (the Board): the owning human is exempt from the fence (REQ-6) and may
-- release, fail or cancel any holder's attempt; complete only their own claim.
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome, disposition = 'done'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, lease_token_hash = NULL
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
                   FOR UPDATE OF t)
     AND a.outcome IS NULL 
  RETURNING a.attempt
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'completed')::text);

-- name: SQL_CLOSE_HUMAN['fail']
-- Human statements (the Board): the owning human is exempt from the fence (REQ-6) and may
-- release, fail or cancel any holder's attempt; complete only their own claim.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'failed'::attempt_outcome, disposition = (CASE WHEN l.attempt < l.max_attempts THEN 'retry_scheduled' ELSE 'dead_lettered' END)::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, lease_token_hash = NULL
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, result = %(result)s, next_retry_at = CASE WHEN t.attempt < t.max_attempts THEN coalesce(%(now)s::timestamptz, now()) + least(%(retry_max)s::float8, %(retry_base)s::float8 * power(2, least(t.attempt - 1, 30))) * (0.5 + random() * 0.5) * interval '1 second' END, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'failed')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_HUMAN['release']
-- Human statements (the Board): the owning human is exempt from the fence (REQ-6) and may
-- release, fail or cancel any holder's attempt; complete only their own claim.
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'released'::attempt_outcome, disposition = 'requeued'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, lease_token_hash = NULL
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact
),
upd AS (
  UPDATE todos t SET state = 'pending', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition, c.summary AS closed_summary, c.artifact AS closed_artifact, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'released')::text)
  FROM upd JOIN closed c ON true;

-- name: SQL_CLOSE_HUMAN['cancel']
-- Human statements (the Board): the owning human is exempt from the fence (REQ-6) and may
-- release, fail or cancel any holder's attempt; complete only their own claim.
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'canceled'::attempt_outcome, disposition = 'canceled'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s, lease_token_hash = NULL
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
                   FOR UPDATE OF t)
     AND a.outcome IS NULL 
  RETURNING a.attempt
)
UPDATE todos t SET state = 'canceled', owner = NULL, lease_expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, c.attempt AS closed_attempt, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'canceled')::text);

-- name: SQL_CONTINUES_MISS['agent']
-- Classify a continuation that added nothing: the predecessor as the caller may see it (none:
-- not_found), whether it has ended, and its successor (todo_successors, by key).
SELECT t.state::text AS state, (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL)) AS ended, (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS successor FROM todos t WHERE t.id = %(continues)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s);

-- name: SQL_CONTINUES_MISS['human']
-- Classify a continuation that added nothing: the predecessor as the caller may see it (none:
-- not_found), whether it has ended, and its successor (todo_successors, by key).
SELECT t.state::text AS state, (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL)) AS ended, (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS successor FROM todos t WHERE t.id = %(continues)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s);

-- name: SQL_ENDPOINTS_OF_USER
SELECT id::text AS id, name, agent_id, scope, queues, created_at, last_used_at, revoked_at
  FROM endpoints WHERE user_id = %(user_id)s ORDER BY created_at DESC;

-- name: SQL_ENDPOINT_AUTH
SELECT id::text AS id, user_id, agent_id, scope, queues,
       (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') AS stale_use
  FROM endpoints WHERE token_hash = %(token_hash)s AND revoked_at IS NULL;

-- name: SQL_ENDPOINT_INSERT
INSERT INTO endpoints (user_id, name, agent_id, token_hash, scope, queues)
VALUES (%(user_id)s, %(name)s, %(agent_id)s, %(token_hash)s, %(scope)s, %(queues)s)
RETURNING id::text, user_id, name, agent_id, scope, queues, created_at;

-- name: SQL_ENDPOINT_OWNER
SELECT user_id FROM endpoints WHERE id = %(id)s;

-- name: SQL_ENDPOINT_TOUCH
UPDATE endpoints SET last_used_at = now() WHERE id = %(id)s RETURNING id;

-- name: SQL_FENCE_LOOKUP
-- the fence lookup: the open attempt's lease_token_hash, with the todo row locked, so the
-- constant-time comparison happens in Python before the transition statement runs.
SELECT a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
 FOR UPDATE OF t;

-- name: SQL_GET['agent']
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, t.pruned_outcomes, t.continues_id,
       (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS continued_by_id,
       (WITH RECURSIVE up AS (
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, 0 AS pos
    UNION ALL
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, up.pos - 1 FROM up JOIN todos t ON t.id = up.continues_id
     WHERE up.pos > -50 AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
  ), down AS (
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, 0 AS pos
    UNION ALL
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, down.pos + 1 FROM down JOIN todo_successors s ON s.todo_id = down.id
      JOIN todos t ON t.id = s.successor_id
     WHERE down.pos < 50 AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
  ), links AS (
    SELECT * FROM up UNION SELECT * FROM down
  ), kept AS (
    SELECT c.*, count(*) OVER () AS n FROM links c ORDER BY abs(c.pos), c.pos LIMIT 50
  )
  SELECT json_build_object('truncated', max(c.n) > 50, 'links', json_agg(json_build_object(
           'id', c.id, 'title', c.title, 'state', c.state, 'dead_letter', (c.state = 'failed' AND c.next_retry_at IS NULL),
           'attempts_total', c.attempts_total, 'last_outcome', l.outcome, 'last_summary', left(l.line, 80),
           'last_summary_cut', coalesce(length(l.line) > 80, false)) ORDER BY c.pos))
    FROM kept c
    LEFT JOIN LATERAL (
      SELECT a.outcome, btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line FROM attempts a
       WHERE a.todo_id = c.id AND a.seq = c.attempts_total) l ON true) AS chain,
       (SELECT CASE WHEN count(a.input_tokens) + count(a.output_tokens) + count(a.cost_usd) > 0
            OR t.pruned_usage IS NOT NULL THEN json_build_object('input_tokens', CASE WHEN count(a.input_tokens) > 0 OR t.pruned_usage ? 'input_tokens' THEN coalesce(sum(a.input_tokens), 0) + coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) END, 'output_tokens', CASE WHEN count(a.output_tokens) > 0 OR t.pruned_usage ? 'output_tokens' THEN coalesce(sum(a.output_tokens), 0) + coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) END, 'cost_usd', CASE WHEN count(a.cost_usd) > 0 OR t.pruned_usage ? 'cost_usd' THEN coalesce(sum(a.cost_usd), 0) + coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) END) END
     FROM attempts a WHERE a.todo_id = t.id) AS usage,
       (SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT a.seq, attempt_public_notes(a, %(notes_limit)s::int) AS j FROM attempts a
           WHERE a.todo_id = t.id ORDER BY a.seq DESC LIMIT %(attempts_limit)s) x) AS attempts,
       (SELECT coalesce(json_object_agg(o.outcome, o.n), '{}'::json) FROM (
          SELECT a.outcome::text AS outcome, count(*) AS n FROM attempts a
           WHERE a.todo_id = t.id AND a.outcome IS NOT NULL GROUP BY 1) o) AS live_outcomes
  FROM todos t
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s);

-- name: SQL_GET['human']
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, t.pruned_outcomes, t.continues_id,
       (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS continued_by_id,
       (WITH RECURSIVE up AS (
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, 0 AS pos
    UNION ALL
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, up.pos - 1 FROM up JOIN todos t ON t.id = up.continues_id
     WHERE up.pos > -50 AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
  ), down AS (
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, 0 AS pos
    UNION ALL
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, down.pos + 1 FROM down JOIN todo_successors s ON s.todo_id = down.id
      JOIN todos t ON t.id = s.successor_id
     WHERE down.pos < 50 AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
  ), links AS (
    SELECT * FROM up UNION SELECT * FROM down
  ), kept AS (
    SELECT c.*, count(*) OVER () AS n FROM links c ORDER BY abs(c.pos), c.pos LIMIT 50
  )
  SELECT json_build_object('truncated', max(c.n) > 50, 'links', json_agg(json_build_object(
           'id', c.id, 'title', c.title, 'state', c.state, 'dead_letter', (c.state = 'failed' AND c.next_retry_at IS NULL),
           'attempts_total', c.attempts_total, 'last_outcome', l.outcome, 'last_summary', left(l.line, 80),
           'last_summary_cut', coalesce(length(l.line) > 80, false)) ORDER BY c.pos))
    FROM kept c
    LEFT JOIN LATERAL (
      SELECT a.outcome, btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line FROM attempts a
       WHERE a.todo_id = c.id AND a.seq = c.attempts_total) l ON true) AS chain,
       (SELECT CASE WHEN count(a.input_tokens) + count(a.output_tokens) + count(a.cost_usd) > 0
            OR t.pruned_usage IS NOT NULL THEN json_build_object('input_tokens', CASE WHEN count(a.input_tokens) > 0 OR t.pruned_usage ? 'input_tokens' THEN coalesce(sum(a.input_tokens), 0) + coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) END, 'output_tokens', CASE WHEN count(a.output_tokens) > 0 OR t.pruned_usage ? 'output_tokens' THEN coalesce(sum(a.output_tokens), 0) + coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) END, 'cost_usd', CASE WHEN count(a.cost_usd) > 0 OR t.pruned_usage ? 'cost_usd' THEN coalesce(sum(a.cost_usd), 0) + coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) END) END
     FROM attempts a WHERE a.todo_id = t.id) AS usage,
       (SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT a.seq, attempt_public_notes(a, %(notes_limit)s::int) AS j FROM attempts a
           WHERE a.todo_id = t.id ORDER BY a.seq DESC LIMIT %(attempts_limit)s) x) AS attempts,
       (SELECT coalesce(json_object_agg(o.outcome, o.n), '{}'::json) FROM (
          SELECT a.outcome::text AS outcome, count(*) AS n FROM attempts a
           WHERE a.todo_id = t.id AND a.outcome IS NOT NULL GROUP BY 1) o) AS live_outcomes
  FROM todos t
 WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s);

-- name: SQL_HEARTBEAT['unfenced']
-- heartbeat: claimed -> claimed; extends the lease on the todo and sets the open
-- attempt's last_heartbeat_at and lease_expires_at in the same statement (REQ-4).
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
hb AS (
  UPDATE attempts a
     SET last_heartbeat_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second'
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET lease_expires_at = hb.lease_expires_at, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM hb WHERE t.id = hb.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'lease_extended')::text) FROM upd;

-- name: SQL_HEARTBEAT['token_checked']
-- heartbeat: claimed -> claimed; extends the lease on the todo and sets the open
-- attempt's last_heartbeat_at and lease_expires_at in the same statement (REQ-4).
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
hb AS (
  UPDATE attempts a
     SET last_heartbeat_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second'
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET lease_expires_at = hb.lease_expires_at, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM hb WHERE t.id = hb.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'lease_extended')::text) FROM upd;

-- name: SQL_HOOKS_LEASE
-- durable hook delivery (the outbox rows written by the transitions above)
-- lease due events: each delivery try pushes next_attempt_at out first, so a process that
-- dies mid-delivery only delays the event; another process retries it after the lease.
UPDATE hook_events h SET tries = h.tries + 1,
       next_attempt_at = now() + %(lease_seconds)s * interval '1 second'
  FROM (SELECT id FROM hook_events
         WHERE delivered_at IS NULL AND next_attempt_at <= now()
         ORDER BY next_attempt_at, created_at LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED) due
 WHERE h.id = due.id
RETURNING h.id::text AS id, h.event, h.url, h.payload, h.tries, h.created_at;

-- name: SQL_HOOKS_PRUNE
DELETE FROM hook_events WHERE delivered_at < now() - %(retention_seconds)s * interval '1 second' RETURNING id;

-- name: SQL_HOOK_DELIVERED
UPDATE hook_events SET delivered_at = now(), last_error = NULL WHERE id = %(id)s RETURNING id;

-- name: SQL_HOOK_RETRY
UPDATE hook_events SET next_attempt_at = now() + %(delay)s * interval '1 second', last_error = %(error)s
 WHERE id = %(id)s RETURNING id;

-- name: SQL_INTERRUPT[('interrupt', 'unfenced')]
-- Keyed by (verb, fence mode); resume sets a fresh lease, interrupt keeps the lease as it is.
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(NULL::timestamptz, a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'interrupted')::text) FROM upd;

-- name: SQL_INTERRUPT[('interrupt', 'token_checked')]
-- Keyed by (verb, fence mode); resume sets a fresh lease, interrupt keeps the lease as it is.
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(NULL::timestamptz, a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'interrupted')::text) FROM upd;

-- name: SQL_INTERRUPT[('resume', 'unfenced')]
-- Keyed by (verb, fence mode); resume sets a fresh lease, interrupt keeps the lease as it is.
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'resumed')::text) FROM upd;

-- name: SQL_INTERRUPT[('resume', 'token_checked')]
-- Keyed by (verb, fence mode); resume sets a fresh lease, interrupt keeps the lease as it is.
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'resumed')::text) FROM upd;

-- name: SQL_LIST[('agent', 'created')]
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at FROM todos t WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.created_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s;

-- name: SQL_LIST[('agent', 'updated')]
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at FROM todos t WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.updated_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.updated_at DESC, t.id DESC
 LIMIT %(limit)s;

-- name: SQL_LIST[('human', 'created')]
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, l.*
  FROM (SELECT t.* FROM endpoints e CROSS JOIN LATERAL (
          SELECT t.* FROM todos t
           WHERE t.endpoint_id = e.id
             AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.created_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s) t
         WHERE e.user_id = %(user_id)s
         ORDER BY t.created_at DESC, t.id DESC
         LIMIT %(limit)s) t
  LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 ORDER BY t.created_at DESC, t.id DESC;

-- name: SQL_LIST[('human', 'updated')]
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, l.*
  FROM (SELECT t.* FROM todos t
         WHERE t.endpoint_id = ANY (ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
           AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.updated_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.updated_at DESC, t.id DESC
 LIMIT %(limit)s) t
  LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 ORDER BY t.updated_at DESC, t.id DESC;

-- name: SQL_LIST_ROW
-- One of a human's todos as a list row, and whether it matches the list's filters (a live
-- stream's changed todo); nothing when it is not the human's.
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, l.*, coalesce((%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0), false) AS matches
  FROM todos t LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s);

-- name: SQL_NOTE['unfenced']
-- An agent notes on its own attempt, fenced as heartbeat is (UNFENCED / TOKEN_CHECKED); the
-- owning human on any open attempt of their todos (exempt from the fence, REQ-6).
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),
         last_note_at = coalesce(%(now)s::timestamptz, now())
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL AND a.lease_token_hash IS NULL
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, 'endpoint'::attempt_claimer_kind, %(text)s, %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count, coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, pg_notify('switchboard_v1', json_build_object(
  'todo', cur.id, 'endpoint', cur.endpoint_id, 'queue', cur.queue, 'state', cur.state,
  'kind', 'noted')::text)
  FROM cur JOIN att ON true JOIN ins ON true;

-- name: SQL_NOTE['token_checked']
-- An agent notes on its own attempt, fenced as heartbeat is (UNFENCED / TOKEN_CHECKED); the
-- owning human on any open attempt of their todos (exempt from the fence, REQ-6).
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),
         last_note_at = coalesce(%(now)s::timestamptz, now())
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, 'endpoint'::attempt_claimer_kind, %(text)s, %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count, coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, pg_notify('switchboard_v1', json_build_object(
  'todo', cur.id, 'endpoint', cur.endpoint_id, 'queue', cur.queue, 'state', cur.state,
  'kind', 'noted')::text)
  FROM cur JOIN att ON true JOIN ins ON true;

-- name: SQL_NOTE_HUMAN
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = ANY(%(from_states)s::todo_state[]) 
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),
         last_note_at = coalesce(%(now)s::timestamptz, now())
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL 
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, 'owner'::attempt_claimer_kind, %(text)s, %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count, coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, pg_notify('switchboard_v1', json_build_object(
  'todo', cur.id, 'endpoint', cur.endpoint_id, 'queue', cur.queue, 'state', cur.state,
  'kind', 'noted')::text)
  FROM cur JOIN att ON true JOIN ins ON true;

-- name: SQL_OVERVIEW_COUNTS
-- the Board's overview, each scoped to the human in the statement (REQ-10)
-- Counts of the human's todos by queue and state: per endpoint of theirs, an index-only scan
-- of its (endpoint_id, created_at, id) index, which carries queue, state and next_retry_at
-- (an aggregate per endpoint, so the planner cannot turn it into a scan of every todo).
-- Every queue of their live endpoints and every paused one is listed, with no todos too.
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
 ORDER BY 1;

-- name: SQL_OVERVIEW_OUTCOMES
-- The overview's chart: attempts of the human's todos closed in the window, by queue,
-- outcome and bucket (0: the newest), through the BRIN index on ended_at: the page ranges
-- that hold attempts closed in the window, never the whole history. The scope is the
-- human's endpoints as an array read once; the planner joins the window's attempts to the
-- human's todos by key, from whichever side it finds smaller.
SELECT t.queue, a.outcome::text AS outcome,
       floor(extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - a.ended_at) / %(bucket_seconds)s)::int AS bucket,
       count(*) AS n
  FROM attempts a JOIN todos t ON t.id = a.todo_id
 WHERE a.ended_at > coalesce(%(now)s::timestamptz, now()) - %(window_seconds)s * interval '1 second' AND a.ended_at <= coalesce(%(now)s::timestamptz, now())
   AND a.outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped')
   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
 GROUP BY 1, 2, 3;

-- name: SQL_QUEUES_PAUSED_BY
-- One human's paused queues, for the process's pause cache.
SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s;

-- name: SQL_QUEUE_PAUSE
-- queue pauses (migration 0003), each scoped to the owning human in the statement
-- a queue of the human's endpoints -> paused (already paused: no row, nothing notified)
WITH ins AS (
  INSERT INTO queue_pauses (user_id, queue, paused_at)
  SELECT %(user_id)s, %(queue)s, coalesce(%(now)s::timestamptz, now())
   WHERE EXISTS (SELECT 1 FROM endpoints e WHERE e.user_id = %(user_id)s AND %(queue)s::text = ANY(e.queues))
  ON CONFLICT (user_id, queue) DO NOTHING
  RETURNING queue, paused_at
)
SELECT ins.queue, ins.paused_at,
       pg_notify('switchboard_v1', json_build_object('kind', 'queue_paused', 'user', %(user_id)s::bigint,
                                                'queue', ins.queue)::text)
  FROM ins;

-- name: SQL_QUEUE_PAUSES_ALL
-- /metrics: how many humans have paused each queue (read at scrape; one row per pause).
SELECT p.queue, count(*) AS n FROM queue_pauses p GROUP BY 1;

-- name: SQL_QUEUE_PAUSE_STATE
-- Classify a pause or resume that changed nothing: is the queue one of the human's, and is
-- it paused (since when)?
SELECT EXISTS (SELECT 1 FROM endpoints e WHERE e.user_id = %(user_id)s AND %(queue)s::text = ANY(e.queues)) AS known,
       (SELECT p.paused_at FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = %(queue)s) AS paused_at;

-- name: SQL_QUEUE_RESUME
-- paused -> resumed; every process's doorbell then rings the queue's ready todos
WITH del AS (
  DELETE FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = %(queue)s
  RETURNING p.queue
)
SELECT del.queue,
       pg_notify('switchboard_v1', json_build_object('kind', 'queue_resumed', 'user', %(user_id)s::bigint,
                                                'queue', del.queue)::text)
  FROM del;

-- name: SQL_QUEUE_STATES
SELECT queue, state::text AS state, count(*) AS n FROM todos GROUP BY 1, 2;

-- name: SQL_READY_TODOS
-- The doorbell heartbeat: each listening endpoint's oldest pending todos (ids only), so one
-- busy endpoint can never starve another's. Walks the pending index per endpoint; passes
-- over the queues the endpoint's human paused (nothing there can be claimed); with a queue,
-- that queue only (a resumed queue rings its ready todos).
SELECT t.id, t.endpoint_id::text AS endpoint_id, t.queue
  FROM endpoints e
  CROSS JOIN LATERAL (
    SELECT t.id, t.endpoint_id, t.queue FROM todos t
     WHERE t.endpoint_id = e.id AND t.state = 'pending'
       AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
       AND t.queue <> ALL(ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = e.user_id))
     ORDER BY t.created_at, t.id LIMIT %(limit)s) t
 WHERE e.id = ANY(%(endpoint_ids)s::uuid[]);

-- name: SQL_REAP
-- reaper: claimed, lease lapsed -> pending (attempt < max) or failed dead letter; closes
-- reaped/requeued or reaped/dead_lettered. SKIP LOCKED: safe with several processes.
WITH cand AS (
  SELECT t.id, t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
   ORDER BY t.lease_expires_at
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'reaped',
         disposition = CASE WHEN cand.attempt < cand.max_attempts THEN 'requeued' ELSE 'dead_lettered' END::attempt_disposition
    FROM cand
   WHERE a.todo_id = cand.id AND a.seq = cand.attempts_total AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.summary_truncated, a.artifact, a.claimant
),
upd AS (
  UPDATE todos t
     SET state = CASE WHEN closed.disposition = 'requeued' THEN 'pending' ELSE 'failed' END::todo_state,
         owner = NULL, lease_expires_at = NULL, next_retry_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed WHERE t.id = closed.todo_id
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, row_to_json(closed) AS closed, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'reaped')::text)
  FROM upd JOIN closed ON closed.todo_id = upd.id;

-- name: SQL_REPLAY_LOOKUP
-- a replayed close: the attempts of the todo this caller claimed with a token and closed
-- with the verb's outcome, newest first, with their token hashes, so the store compares the
-- presented token in constant time. Read only on a close that missed.
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts, t.lease_expires_at, t.next_retry_at, (t.state = 'failed' AND t.next_retry_at IS NULL) AS dead_letter, t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, a.seq AS closed_seq, a.attempt AS closed_attempt, a.outcome::text AS closed_outcome,
       a.disposition::text AS closed_disposition, a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND a.outcome = %(outcome)s::attempt_outcome
   AND a.claimer_endpoint_id = %(endpoint_id)s AND a.owner = %(owner)s AND a.lease_token_hash IS NOT NULL
 ORDER BY a.seq DESC;

-- name: SQL_RETENTION
-- retention: terminal todos older than the bound are deleted; attempts cascade (REQ-11), and
-- the todo_successors rows naming them go in the same statement.
-- Live todos (pending, held, failed with a retry window) are never touched.
WITH old AS (
  SELECT t.id FROM todos t
   WHERE t.updated_at < coalesce(%(now)s::timestamptz, now()) - %(retention_seconds)s * interval '1 second'
     AND (t.state IN ('done', 'canceled') OR (t.state = 'failed' AND t.next_retry_at IS NULL))
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
links AS (
  DELETE FROM todo_successors s
   WHERE s.todo_id = ANY(ARRAY(SELECT id FROM old)) OR s.successor_id = ANY(ARRAY(SELECT id FROM old))
)
DELETE FROM todos t USING old WHERE t.id = old.id
RETURNING t.id, t.endpoint_id, t.queue, pg_notify('switchboard_v1', json_build_object(
  'todo', t.id, 'endpoint', t.endpoint_id, 'queue', t.queue, 'state', t.state,
  'kind', 'deleted')::text);

-- name: SQL_RETRY['agent']
-- manual retry: dead letter -> pending, attempt counter reset; history kept (REQ-12).
WITH upd AS (
  UPDATE todos t SET state = 'pending', attempt = 0, next_retry_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.state = 'failed' AND t.next_retry_at IS NULL
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'retried')::text) FROM upd;

-- name: SQL_RETRY['human']
-- manual retry: dead letter -> pending, attempt counter reset; history kept (REQ-12).
WITH upd AS (
  UPDATE todos t SET state = 'pending', attempt = 0, next_retry_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s) AND t.state = 'failed' AND t.next_retry_at IS NULL
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'retried')::text) FROM upd;

-- name: SQL_RETRY_DUE
-- retry scheduler: failed with next_retry_at <= now -> pending. Closes and opens nothing.
WITH due AS (
  SELECT t.id FROM todos t
   WHERE t.state = 'failed' AND t.next_retry_at <= coalesce(%(now)s::timestamptz, now())
   ORDER BY t.next_retry_at LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
upd AS (
  UPDATE todos t SET state = 'pending', next_retry_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
    FROM due WHERE t.id = due.id
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN '{}'::jsonb ELSE '{}'::jsonb END
    FROM upd u 
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt, upd.max_attempts, upd.lease_expires_at, upd.next_retry_at, (upd.state = 'failed' AND upd.next_retry_at IS NULL) AS dead_letter, upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'requeued')::text) FROM upd;

-- name: SQL_REVOKE
-- endpoint revocation: the endpoint is revoked, and each of its held todos -> failed dead
-- letter, closing the open attempt revoked/dead_lettered. System-wide within the endpoint.
WITH ep AS (
  UPDATE endpoints SET revoked_at = coalesce(%(now)s::timestamptz, now())
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
  UPDATE attempts a SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'revoked', disposition = 'dead_lettered'
    FROM cand
   WHERE a.todo_id = cand.id AND a.seq = cand.attempts_total AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.summary_truncated, a.artifact, a.claimant
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, next_retry_at = NULL,
                     updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed WHERE t.id = closed.todo_id
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         jsonb_build_object('event', ev.event, 'occurred_at', coalesce(%(now)s::timestamptz, now()),
           'todo', jsonb_build_object('id', u.id, 'queue', u.queue, 'title', u.title, 'state', u.state,
             'attempt', u.attempt, 'max_attempts', u.max_attempts, 'attempts_total', u.attempts_total,
             'endpoint_id', u.endpoint_id))
         || CASE WHEN ev.event = 'todo.dead_lettered' THEN jsonb_build_object(
      'attempt', jsonb_build_object('seq', c.seq, 'attempt', c.attempt, 'outcome', c.outcome,
        'died', c.outcome IN ('lease_expired', 'reaped'), 'summary', c.summary, 'artifact', c.artifact),
      'attempts', jsonb_build_object(
  'total', u.attempts_total,
  'by_outcome', (SELECT coalesce(jsonb_object_agg(z.k, z.n), '{}'::jsonb) FROM (
      SELECT w.k, sum(w.n)::int AS n FROM (
        SELECT a.outcome::text AS k, count(*) AS n FROM attempts a
         WHERE a.todo_id = u.id AND a.outcome IS NOT NULL AND a.seq <> c.seq GROUP BY 1
        UNION ALL SELECT c.outcome::text, 1
        UNION ALL SELECT p.key, p.value::bigint FROM jsonb_each_text(u.pruned_outcomes) p
      ) w GROUP BY w.k) z),
  'recent', (SELECT coalesce(jsonb_agg(x.j ORDER BY x.seq DESC), '[]'::jsonb) FROM (
      SELECT a.seq, jsonb_build_object('seq', a.seq, 'attempt', a.attempt, 'outcome', o.outcome,
                                       'died', coalesce(o.outcome IN ('lease_expired', 'reaped'), false)) AS j
        FROM attempts a CROSS JOIN LATERAL (SELECT CASE WHEN a.seq = c.seq THEN c.outcome::text ELSE a.outcome::text END AS outcome) o
       WHERE a.todo_id = u.id ORDER BY a.seq DESC LIMIT 10) x),
  'omitted', greatest(u.attempts_total - least(u.attempts_total - u.attempts_pruned, 10), 0))) ELSE '{}'::jsonb END
    FROM upd u JOIN closed c ON c.todo_id = u.id
    CROSS JOIN LATERAL (SELECT CASE
        WHEN u.state = 'pending' THEN 'todo.ready'
        WHEN u.state = 'failed' AND u.next_retry_at IS NULL THEN 'todo.dead_lettered' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0 AND ev.event IS NOT NULL
  RETURNING 1
)
SELECT (SELECT count(*) FROM ep) AS revoked,
       -- every process drops the endpoint from its cache of authenticated tokens
       (SELECT pg_notify('switchboard_v1', json_build_object('kind', 'endpoint_revoked', 'endpoint', ep.id)::text)
          FROM ep) AS revoked_notice,
       coalesce((SELECT json_agg(json_build_object(
          'todo', row_to_json(upd), 'closed', row_to_json(c), 'n', pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'revoked')::text)))
         FROM upd JOIN closed c ON c.todo_id = upd.id), '[]'::json) AS todos;

-- name: SQL_SCHEMA_VERSION
-- Readiness (/readyz): the newest migration applied, for the server to compare with the
-- newest it knows (migrations apply in order, so every earlier one is applied too).
SELECT coalesce(max(version), 0) AS version FROM schema_migrations;

-- name: SQL_USER_BY_ID
SELECT id, username FROM users WHERE id = %(id)s;

-- name: SQL_USER_BY_NAME
SELECT id, username, password_hash FROM users WHERE username = %(username)s;

-- name: SQL_USER_INSERT
-- users and endpoints
INSERT INTO users (username, password_hash) VALUES (%(username)s, %(password_hash)s) RETURNING id, username;
