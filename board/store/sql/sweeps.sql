-- Sweeps: system-wide, no caller scope, reading nothing out (REQ-10), a batch at a time with
-- SKIP LOCKED so several processes can run them. Hook delivery leases due events first:
-- a process that dies mid-delivery only delays an event, another retries it after the lease.

-- name: attempts_reap_lapsed
-- description: The reaper: claimed with a lapsed lease, or answered and not resumed within the lease the answer gave -> pending or dead letter, closing each attempt reaped, a batch at a time
WITH cand AS (
  SELECT t.id, t.attempts_total, t.attempt, t.max_attempts FROM todos t
   WHERE t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND (t.state = 'claimed'
          OR t.state IN ('input_required', 'auth_required') AND EXISTS (
               SELECT 1 FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total
                  AND a.outcome IS NULL AND a.answered_at IS NOT NULL))
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
            a.summary, a.summary_truncated, a.artifact, a.claimant, attempt_died(a.outcome) AS died
),
upd AS (
  UPDATE todos t
     SET state = CASE WHEN closed.disposition = 'requeued' THEN 'pending' ELSE 'failed' END::todo_state,
         owner = NULL, lease_expires_at = NULL, next_retry_at = NULL,
             updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed WHERE t.id = closed.todo_id
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
      coalesce(%(now)s::timestamptz, now()), hook_event(u.state, u.next_retry_at), u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, u.attempts_pruned, u.pruned_outcomes,
      c.seq, c.attempt, c.outcome, c.died, c.summary, c.artifact, u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       row_to_json(closed) AS closed, CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'reaped') END
  FROM upd JOIN closed ON closed.todo_id = upd.id;

-- name: questions_expire
-- description: The question sweep: interrupted with its question expired unanswered -> pending, closing the attempt released/requeued with an expired note, a batch at a time
WITH cand AS (
  SELECT t.id, t.attempts_total FROM todos t
    JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
   WHERE t.state IN ('input_required', 'auth_required') AND a.answered_at IS NULL
     AND a.question_expires_at <= coalesce(%(now)s::timestamptz, now())
   ORDER BY a.question_expires_at
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
closed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'released', disposition = 'requeued',
         notes_count = coalesce(a.notes_count, 0) + 1, last_note_at = coalesce(%(now)s::timestamptz, now()),
         lease_token_hash = NULL
    FROM cand
   WHERE a.todo_id = cand.id AND a.seq = cand.attempts_total AND a.outcome IS NULL AND a.answered_at IS NULL
  RETURNING a.todo_id, a.seq, a.notes_count, a.question_expires_at
),
noted AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, kind)
  SELECT c.todo_id, c.seq, c.notes_count, coalesce(%(now)s::timestamptz, now()), 'system',
         'The question expired unanswered at ' || to_char(c.question_expires_at AT TIME ZONE 'UTC',
           'YYYY-MM-DD HH24:MI:SS') || ' UTC; the todo was released for the next claimer.', 'expired'
    FROM closed c
  RETURNING 1
),
upd AS (
  UPDATE todos t
     SET state = 'pending', owner = NULL, lease_expires_at = NULL,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed WHERE t.id = closed.todo_id
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()), 'todo.ready',
      u.id, u.queue, u.title, u.state, u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id,
      priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.state::text AS state, upd.attempts_total,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'released') END
  FROM upd;

-- name: todos_retry_due
-- description: The retry scheduler: failed with next_retry_at due -> pending, a batch at a time
WITH due AS (
  SELECT t.id FROM todos t
   WHERE t.state = 'failed' AND t.next_retry_at <= coalesce(%(now)s::timestamptz, now())
   ORDER BY t.next_retry_at LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
upd AS (
  UPDATE todos t SET state = 'pending', next_retry_at = NULL,
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM due WHERE t.id = due.id
  RETURNING t.*
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
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'requeued') END FROM upd;

-- name: todos_delete_expired
-- description: Retention: deletes terminal todos untouched past the bound (attempts cascade) and their successor links
WITH old AS (
  SELECT t.id FROM todos t
   WHERE t.updated_at < coalesce(%(now)s::timestamptz, now()) - %(retention_seconds)s * interval '1 second'
     AND todo_ended(t.state, t.next_retry_at)
     -- not a canceled or dead-lettered todo others wait on: it goes after them (migration 0016)
     AND (t.state = 'done' OR NOT EXISTS (SELECT FROM todo_deps d WHERE d.after_id = t.id))
   LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
links AS (
  DELETE FROM todo_successors s
   WHERE s.todo_id = ANY(ARRAY(SELECT id FROM old)) OR s.successor_id = ANY(ARRAY(SELECT id FROM old))
)
DELETE FROM todos t USING old WHERE t.id = old.id
RETURNING t.id, t.endpoint_id, t.queue, CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN todo_notify(t.id, t.endpoint_id, t.queue, t.state, 'deleted') END;

-- name: hook_events_lease
-- description: Leases due hook events for delivery, pushing each one's next try out first; an A2A push with its status message and its config's URL, token and authentication as they are now
UPDATE hook_events h SET tries = h.tries + 1,
       next_attempt_at = now() + %(lease_seconds)s * interval '1 second'
  FROM (SELECT id, push_todo_id, push_config_id FROM hook_events
         WHERE delivered_at IS NULL AND next_attempt_at <= now()
         ORDER BY next_attempt_at, created_at LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED) due
  LEFT JOIN a2a_push_configs c ON c.todo_id = due.push_todo_id AND c.id = due.push_config_id
 WHERE h.id = due.id
RETURNING h.id::text AS id, h.event, coalesce(c.url, h.url) AS url,
          CASE WHEN c.todo_id IS NULL THEN h.payload
               ELSE h.payload || coalesce(a2a_push_message(h.todo_id, h.payload), '{}'::jsonb) END AS payload,
          h.tries, h.created_at,
          c.token AS push_token, c.auth_scheme AS push_auth_scheme, c.auth_credentials AS push_auth_credentials;

-- name: hook_event_delivered
-- description: Marks a hook event delivered
UPDATE hook_events SET delivered_at = now(), last_error = NULL WHERE id = %(id)s RETURNING id;

-- name: hook_event_retry_later
-- description: Schedules a hook event's next delivery try after a failure, with the error
UPDATE hook_events SET next_attempt_at = now() + %(delay)s * interval '1 second', last_error = %(error)s
 WHERE id = %(id)s RETURNING id;

-- name: hook_events_prune
-- description: Deletes delivered hook events past retention
DELETE FROM hook_events WHERE delivered_at < now() - %(retention_seconds)s * interval '1 second' RETURNING id;

-- name: attempt_counts_prune
-- description: Deletes the counts of deleted attempts older than the longest chart window (a week) with a day to spare
DELETE FROM attempt_outcome_counts
 WHERE bucket < coalesce(%(now)s::timestamptz, now()) - interval '8 days'
RETURNING bucket;

-- name: todo_counts_compact
-- description: Folds each key's deltas in todo_counts (migration 0010) into one row, and drops the keys that sum to zero
WITH folded AS (
  DELETE FROM todo_counts c
   USING (SELECT endpoint_id, queue, kind FROM todo_counts
           GROUP BY 1, 2, 3 HAVING count(*) > 1 OR sum(n) = 0) k
   WHERE c.endpoint_id = k.endpoint_id AND c.queue = k.queue AND c.kind = k.kind
  RETURNING c.endpoint_id, c.queue, c.kind, c.n
)
INSERT INTO todo_counts (endpoint_id, queue, kind, n)
SELECT f.endpoint_id, f.queue, f.kind, sum(f.n) FROM folded f GROUP BY 1, 2, 3 HAVING sum(f.n) <> 0
RETURNING n;

-- name: attempt_outcomes_fold_lock
-- description: The charts' fold takes its lock (migration 0012) before it reads the attempts (a deleting transaction holding it shared has committed when this returns), and reads when the oldest other transaction still running began, before its next statement takes its snapshot: a close that began earlier is then either still running, and holds the watermark back, or committed where the fold sees it
SELECT pg_advisory_xact_lock(x'5B0A0012'::bigint) AS locked,
       (SELECT min(s.xact_start) FROM pg_stat_activity s
         WHERE s.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND s.backend_type = 'client backend' AND s.pid <> pg_backend_pid()) AS running_since;

-- name: attempt_outcomes_fold
-- description: The charts' fold: counts the attempts closed between the watermark and its next position into attempt_outcome_counts and moves it there (at most an hour a pass; never within margin_seconds of now or past running_since, the start of the oldest transaction running when attempt_outcomes_fold_lock looked); returns the count rows it wrote, where it moved the watermark (null: it stayed), whether it crossed an hour, and whether the hour's cap stopped it (more to fold)
WITH f AS (
  -- Attempts closed more than eight days ago are in no chart: the first fold starts there.
  SELECT f.before, greatest(f.before, outcome_bucket(coalesce(%(now)s::timestamptz, now()) - interval '8 days')) AS lo
    FROM attempt_outcomes_folded f
),
w AS (
  SELECT f.before, f.lo,
         least(coalesce(%(now)s::timestamptz, now()) - %(margin_seconds)s * interval '1 second',
               %(running_since)s::timestamptz, f.lo + interval '1 hour') AS new
    FROM f
),
counted AS (
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT t.endpoint_id, outcome_bucket(a.ended_at), t.queue, a.outcome, count(*)
    FROM w JOIN attempts a ON a.ended_at >= w.lo AND a.ended_at < w.new
   -- Each attempt's todo by its key (OFFSET 0 keeps the planner from joining the whole table):
   -- the range holds minutes of closes, a few of the todos.
   CROSS JOIN LATERAL (SELECT t.endpoint_id, t.queue FROM todos t WHERE t.id = a.todo_id OFFSET 0) t
   WHERE a.outcome IS NOT NULL
   GROUP BY 1, 2, 3, 4
   ORDER BY 1, 2, 3, 4
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + excluded.n
  RETURNING 1
),
moved AS (
  UPDATE attempt_outcomes_folded f SET before = w.new FROM w WHERE w.new > w.before
  RETURNING f.before, NOT isfinite(w.before) OR date_bin(interval '1 hour', w.new, timestamptz '2000-01-01 00:00:00+00')
                                                > date_bin(interval '1 hour', w.before, timestamptz '2000-01-01 00:00:00+00') AS new_hour
)
SELECT (SELECT count(*) FROM counted) AS counted, (SELECT before FROM moved) AS before,
       coalesce((SELECT new_hour FROM moved), false) AS new_hour,
       (SELECT w.new = w.lo + interval '1 hour' FROM w) AS behind;

-- name: attempt_counts_merge
-- description: After a fold that crossed an hour, the charts' counts merged into coarser buckets once no chart needs them fine: of hours for what is over an hour old (the hour's chart shows five minutes), of six hours for what is over a day old (the day's shows hours); the week's chart reads hundreds of rows, not thousands
WITH cut AS (
  SELECT date_bin(interval '1 hour', coalesce(%(now)s::timestamptz, now()) - interval '1 hour',
                  timestamptz '2000-01-01 00:00:00+00') AS hours,
         date_bin(interval '6 hours', coalesce(%(now)s::timestamptz, now()) - interval '1 day',
                  timestamptz '2000-01-01 00:00:00+00') AS six_hours
),
gone AS (
  DELETE FROM attempt_outcome_counts c
   USING cut
   WHERE c.bucket < cut.six_hours AND c.bucket <> date_bin(interval '6 hours', c.bucket, timestamptz '2000-01-01 00:00:00+00')
      OR c.bucket < cut.hours AND c.bucket <> date_bin(interval '1 hour', c.bucket, timestamptz '2000-01-01 00:00:00+00')
  RETURNING c.endpoint_id, c.queue, c.outcome, c.n,
            date_bin(CASE WHEN c.bucket < cut.six_hours THEN interval '6 hours' ELSE interval '1 hour' END, c.bucket,
                     timestamptz '2000-01-01 00:00:00+00') AS bucket
)
INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
SELECT endpoint_id, bucket, queue, outcome, sum(n) FROM gone
 GROUP BY 1, 2, 3, 4
 ORDER BY 1, 2, 3, 4
ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + excluded.n
RETURNING 1;

-- name: attempt_outcomes_fold_lag
-- description: How far the charts' fold is behind now, for /metrics: the watermark's age in seconds (ten seconds when the fold keeps up; infinity before the first fold)
SELECT extract(epoch FROM now() - f.before)::float8 AS seconds FROM attempt_outcomes_folded f;
