-- Closes: a held todo -> its next state, closing the open attempt with the verb's outcome
-- and disposition in the same statement (REQ-3). Every close locks the todo row first (todo
-- before attempt, as everywhere), closes the open attempt, and updates the todo only if the
-- attempt closed: a miss (the fence, the wrong state or holder, an attempt closed since the
-- statement's snapshot) writes nothing, so no close needs a rollback.
--
-- Each statement serves an agent and the owning human (the Board: endpoint_id null), with
-- the rules of migration 0014: todo_in_scope (whose todo it is), todo_held_by (an agent acts
-- on what it holds, the human on any holder's) and lease_fence_holds (REQ-6). The human's
-- closes void the holder's token, so only a close the token made can be replayed with it
-- (attempt_replay_lookup).
--
-- An open attempt is found by its primary key (todo_id, seq = the todo's attempts_total)
-- and tested with "outcome IS NULL", the same as "ended_at IS NULL" since every statement
-- sets ended_at, outcome and disposition together; phrased on ended_at, the planner could
-- walk the partial index of every open attempt instead of one key probe.
--
-- The state test is "= ANY(from_states)", a parameter even where one state is meant: a
-- literal 'claimed' would let a generic plan reach the row through todos_claimed_idx.
--
-- The fence: with no lease token the store passes token_checked false, and only an attempt
-- claimed without a token qualifies; with one, the store has compared the token with the
-- open attempt's in the same transaction, the todo locked (Store._fenced), and passes true.
--
-- complete and cancel write no hook events and close with a fixed outcome, disposition and
-- state, so their todos update is the statement itself and returns neither (the store
-- fills them in): complete is half of every agent's cycle, and this shape is what keeps
-- REQ-18's floor (docs/performance.md). fail and release are one statement (outcome
-- says which) writing hook events, which need the updated row, so its todos update is a
-- CTE feeding the outbox: one hook_events row per configured URL when a transition makes a
-- todo ready or dead-letters it (none with no URLs configured), a dead letter with its
-- closing attempt and the exact attempt summary (REQ-15), which migration 0005's
-- attempt_summary() builds (counts by outcome, the most recent, how many left out).
--
-- complete_todos' statements (attempts_fence_lookup_many, todos_complete,
-- todos_complete_closable) are an agent's only, and name its endpoint directly: behind
-- todo_in_scope's CASE, the planner reaches a batch's rows through todos_claimed_idx and
-- filters every claimed todo by id (the plan test).
--
-- Usage (migration 0004): an agent's close sets what it reported, each value cast to its
-- domain; what it did not report is null, as the attempt's columns were (the Board reports
-- none).

-- name: todo_complete
-- description: The holder completes: claimed -> done, closing its attempt completed/done with the usage it reported (nulls: none); the owning human completes their own claim, voiding its token
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome,
         disposition = 'done'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s,
         input_tokens = %(input_tokens)s::attempt_tokens,
         output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd,
         model = %(model)s::attempt_model,
         lease_token_hash = CASE WHEN %(endpoint_id)s::uuid IS NULL THEN NULL ELSE a.lease_token_hash END
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
                     AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
                   FOR UPDATE OF t)
     AND a.outcome IS NULL AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)
  RETURNING a.attempt
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = %(result)s,
    updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
   AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
RETURNING t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result,
          t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting,
          c.attempt AS closed_attempt,
          CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN todo_notify(t.id, t.endpoint_id, t.queue, t.state, 'completed') END,
          CASE WHEN t.waited_on  -- its waiters count one fewer (migration 0016)
       THEN todo_release_dependents(t.id, %(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now())) END AS unblocked;

-- name: todo_fail_or_release
-- description: The holder fails (outcome failed: held -> failed with a retry time, or dead-lettered) or releases (outcome released: held -> pending), closing its attempt, with hook events; the owning human does either to any holder's attempt, voiding its token
WITH locked AS (
  SELECT t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = %(outcome)s::attempt_outcome,
         disposition = (CASE WHEN %(outcome)s::attempt_outcome = 'released' THEN 'requeued'
                             WHEN l.attempt < l.max_attempts THEN 'retry_scheduled'
                             ELSE 'dead_lettered' END)::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s,
         input_tokens = %(input_tokens)s::attempt_tokens,
         output_tokens = %(output_tokens)s::attempt_tokens, cost_usd = %(cost_usd)s::attempt_cost_usd,
         model = %(model)s::attempt_model,
         lease_token_hash = CASE WHEN %(endpoint_id)s::uuid IS NULL THEN NULL ELSE a.lease_token_hash END
    FROM locked l
   WHERE a.todo_id = %(id)s AND a.seq = l.attempts_total AND a.outcome IS NULL
     AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.artifact, attempt_died(a.outcome) AS died
),
upd AS (
  UPDATE todos t
     SET state = (CASE WHEN %(outcome)s::attempt_outcome = 'released' THEN 'pending' ELSE 'failed' END)::todo_state,
         owner = NULL, lease_expires_at = NULL,
         -- a release with a delay (a snooze) waits scheduled until then
         scheduled = %(outcome)s::attempt_outcome = 'released' AND %(delay_seconds)s::float8 > 0,
         run_at = CASE WHEN %(outcome)s::attempt_outcome = 'released' AND %(delay_seconds)s::float8 > 0
           THEN coalesce(%(now)s::timestamptz, now()) + %(delay_seconds)s::float8 * interval '1 second'
           ELSE t.run_at END,
         result = CASE WHEN %(outcome)s::attempt_outcome = 'released' THEN t.result ELSE %(result)s END,
         next_retry_at = CASE WHEN %(outcome)s::attempt_outcome = 'failed' AND t.attempt < t.max_attempts
           THEN coalesce(%(now)s::timestamptz, now())
             + least(%(retry_max)s::float8, %(retry_base)s::float8 * power(2, least(t.attempt - 1, 30)))
               * (0.5 + random() * 0.5) * interval '1 second' END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
  RETURNING t.*
),
counted AS (  -- todo_counts (migration 0010)
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT u.endpoint_id, u.queue, 'dead', count(*) FROM upd u WHERE todo_dead_letter(u.state, u.next_retry_at) GROUP BY 1, 2
  RETURNING 1
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u JOIN closed c ON c.todo_id = u.id, hook_rows(%(hook_urls)s::text[],
      coalesce(%(now)s::timestamptz, now()), CASE WHEN NOT u.scheduled THEN hook_event(u.state, u.next_retry_at) END,
      u.id, u.queue, u.title, u.state, u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, u.attempts_pruned,
      u.pruned_outcomes, c.seq, c.attempt, c.outcome, c.died, c.summary, c.artifact, u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       c.attempt AS closed_attempt, c.outcome AS closed_outcome, c.disposition AS closed_disposition,
       c.summary AS closed_summary, c.artifact AS closed_artifact, c.died AS closed_died,
       CASE WHEN upd.scheduled  -- every process's due timer hears a scheduled todo, watched or not
              OR EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.scheduled THEN 'scheduled' ELSE c.outcome END) END
  FROM upd JOIN closed c ON true;

-- name: todo_cancel_held
-- description: A held todo is canceled (an agent's of its queues, whoever holds it, or the owning human's, voiding the holder's token): claimed or interrupted -> canceled, closing the open attempt
WITH closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'canceled'::attempt_outcome,
         disposition = 'canceled'::attempt_disposition,
         summary = %(summary)s, summary_truncated = %(summary_truncated)s, artifact = %(artifact)s,
         lease_token_hash = CASE WHEN %(endpoint_id)s::uuid IS NULL THEN NULL ELSE a.lease_token_hash END
   WHERE a.todo_id = %(id)s
     AND a.seq = (SELECT t.attempts_total FROM todos t
                   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
                     AND t.state = ANY(%(from_states)s::todo_state[])
                   FOR UPDATE OF t)
     AND a.outcome IS NULL
  RETURNING a.attempt
),
upd AS (
  UPDATE todos t SET state = 'canceled', owner = NULL, lease_expires_at = NULL,
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed c
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[])
  RETURNING t.*, c.attempt AS closed_attempt
),
counted AS (  -- todo_counts (migration 0010)
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT u.endpoint_id, u.queue, 'canceled', count(*) FROM upd u GROUP BY 1, 2
  RETURNING 1
)
SELECT u.endpoint_id, u.queue, u.title, u.attempt, u.max_attempts, u.payload, u.routing, u.result,
          u.attempts_total, u.attempts_pruned, u.created_at, u.updated_at, u.priority, u.run_at, u.key, u.after, u.schedule_id::text AS schedule_id, u.waits > 0 AS waiting, u.closed_attempt,
          CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = u.endpoint_id)
       THEN todo_notify(u.id, u.endpoint_id, u.queue, u.state, 'canceled') END
  FROM upd u;

-- name: todo_cancel_unheld
-- description: A todo nobody holds is canceled (by an agent of its queue or the owning human): pending, or failed waiting for a retry -> canceled
WITH upd AS (
  UPDATE todos t SET state = 'canceled', next_retry_at = NULL, scheduled = false,
      updated_at = coalesce(%(now)s::timestamptz, now())
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND (t.state = 'pending' OR (t.state = 'failed' AND t.next_retry_at IS NOT NULL))
  RETURNING t.*
),
counted AS (  -- todo_counts (migration 0010)
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT u.endpoint_id, u.queue, 'canceled', count(*) FROM upd u GROUP BY 1, 2
  RETURNING 1
)
SELECT u.id, u.endpoint_id, u.queue, u.title, u.state::text AS state, u.owner, u.attempt, u.max_attempts,
          u.lease_expires_at, u.next_retry_at,
          todo_dead_letter(u.state, u.next_retry_at) AS dead_letter, u.payload, u.routing, u.result,
          u.attempts_total, u.attempts_pruned, u.created_at, u.updated_at, u.priority, u.run_at, u.key, u.after, u.schedule_id::text AS schedule_id, u.waits > 0 AS waiting,
          CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = u.endpoint_id)
       THEN todo_notify(u.id, u.endpoint_id, u.queue, u.state, 'canceled') END
  FROM upd u;

-- name: todo_retry
-- description: A manual retry (by an agent of the todo's queue or the owning human): a dead letter -> pending with its attempt counter reset, history kept
WITH upd AS (
  UPDATE todos t SET state = 'pending', attempt = 0, next_retry_at = NULL,
      updated_at = coalesce(%(now)s::timestamptz, now())
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND todo_dead_letter(t.state, t.next_retry_at)
  RETURNING t.*
),
counted AS (  -- todo_counts (migration 0010)
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT u.endpoint_id, u.queue, 'dead', -count(*) FROM upd u GROUP BY 1, 2
  RETURNING 1
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      hook_event(u.state, u.next_retry_at), u.id, u.queue, u.title, u.state, u.attempt, u.max_attempts,
      u.attempts_total, u.endpoint_id, priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'retried') END FROM upd;

-- name: attempt_replay_lookup
-- description: The attempts this caller claimed with a token and closed with the verb's outcome, newest first, for a replayed close
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, a.seq AS closed_seq, a.attempt AS closed_attempt, a.outcome::text AS closed_outcome,
       a.disposition::text AS closed_disposition, a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
   AND a.outcome = %(outcome)s::attempt_outcome
   AND a.claimer_endpoint_id = %(claimer_id)s AND a.owner = %(owner)s AND a.lease_token_hash IS NOT NULL
 ORDER BY a.seq DESC;

-- name: attempts_fence_lookup_many
-- description: The open attempts' lease_token_hash of several held todos, each todo row locked, for complete_todos' constant-time token checks
SELECT t.id, a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = ANY(%(ids)s::text[]) AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
   AND t.state = 'claimed' AND t.owner = %(owner)s
 FOR UPDATE OF t;

-- name: todos_complete
-- description: The holder completes several todos at once, all or none: each claimed -> done, closing its attempt completed/done with the summary, artifact and usage given for it
-- complete_todos: the items come as one JSON array; token_checked is true for an item whose
-- lease_token the store has just checked against attempts_fence_lookup_many in the same
-- transaction. The statement closes every item or none: when one cannot be closed (not
-- held, fenced without its token), it changes nothing and returns no row, and the store asks
-- todos_complete_closable which one it was. So an unfenced batch is one statement, with no
-- transaction around it. LIMIT 50 (complete_todos' most) bounds the generic plan's row
-- estimate, so the joins stay keyed.
WITH item AS (
  SELECT x.id, x.result, x.summary, x.summary_truncated, x.artifact, x.input_tokens, x.output_tokens, x.cost_usd,
         x.model, x.token_checked
    FROM jsonb_to_recordset(%(todos)s::jsonb) AS x(id text, result jsonb, summary text, summary_truncated boolean,
                                                  artifact text, input_tokens bigint, output_tokens bigint,
                                                  cost_usd numeric, model text, token_checked boolean)
   LIMIT 50
),
locked AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = ANY(%(ids)s::text[]) AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.state = 'claimed' AND t.owner = %(owner)s
   FOR UPDATE OF t
),
closable AS (
  SELECT l.id, l.attempts_total FROM locked l
    JOIN item i ON i.id = l.id
    JOIN attempts a ON a.todo_id = l.id AND a.seq = l.attempts_total AND a.outcome IS NULL
   WHERE i.token_checked OR a.lease_token_hash IS NULL
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'completed'::attempt_outcome,
         disposition = 'done'::attempt_disposition,
         summary = i.summary, summary_truncated = i.summary_truncated, artifact = i.artifact::attempt_artifact,
         input_tokens = i.input_tokens::attempt_tokens, output_tokens = i.output_tokens::attempt_tokens,
         cost_usd = i.cost_usd::attempt_cost_usd, model = i.model::attempt_model
    FROM closable c JOIN item i ON i.id = c.id
   WHERE a.todo_id = c.id AND a.seq = c.attempts_total
     AND (SELECT count(*) FROM closable) = (SELECT count(*) FROM item)
  RETURNING a.todo_id, a.attempt, i.result
)
UPDATE todos t SET state = 'done', owner = NULL, lease_expires_at = NULL, result = c.result,
    updated_at = coalesce(%(now)s::timestamptz, now())
  FROM closed c
 WHERE t.id = c.todo_id AND t.endpoint_id = %(endpoint_id)s AND t.state = 'claimed' AND t.owner = %(owner)s
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.payload, t.routing, t.result,
          t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting,
          c.attempt AS closed_attempt,
          CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN todo_notify(t.id, t.endpoint_id, t.queue, t.state, 'completed') END,
          CASE WHEN t.waited_on  -- its waiters count one fewer (migration 0016)
       THEN todo_release_dependents(t.id, %(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now())) END AS unblocked;

-- name: todos_complete_closable
-- description: Which of complete_todos' items the holder can close now: read after todos_complete changed nothing, to name the item that stopped it
SELECT t.id
  FROM jsonb_to_recordset(%(todos)s::jsonb) AS i(id text, token_checked boolean)
  JOIN todos t ON t.id = i.id
  JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = ANY(%(ids)s::text[]) AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
   AND t.state = 'claimed' AND t.owner = %(owner)s
   AND (i.token_checked OR a.lease_token_hash IS NULL);
