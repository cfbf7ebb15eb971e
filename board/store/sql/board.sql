-- Queue pauses (migration 0003), the Board's overview and the counts /metrics and /readyz
-- read, each scoped to the owning human in the statement where it has one. The overview's
-- counts are an index-only scan of each of the human's endpoints' created index (an
-- aggregate per endpoint); its chart reads attempts closed in the window through the BRIN
-- index on ended_at.

-- name: queue_pause
-- description: The human pauses a queue of their endpoints (already paused: no row, nothing notified)
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

-- name: queue_resume
-- description: The human resumes a paused queue; every process's doorbell then rings its ready todos
WITH del AS (
  DELETE FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = %(queue)s
  RETURNING p.queue
)
SELECT del.queue,
       pg_notify('switchboard_v1', json_build_object('kind', 'queue_resumed', 'user', %(user_id)s::bigint,
                                                'queue', del.queue)::text)
  FROM del;

-- name: queue_pause_state
-- description: Classifies a pause or resume that changed nothing: is the queue the human's, and since when is it paused
SELECT EXISTS (SELECT 1 FROM endpoints e WHERE e.user_id = %(user_id)s AND %(queue)s::text = ANY(e.queues)) AS known,
       (SELECT p.paused_at FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = %(queue)s) AS paused_at;

-- name: queues_paused_by
-- description: One human's paused queues, for the process's pause cache
SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s;

-- name: queue_pauses_count
-- description: How many humans have paused each queue, for /metrics
SELECT p.queue, count(*) AS n FROM queue_pauses p GROUP BY 1;

-- name: todos_count_by_queue_state
-- description: Every todo counted by queue and state, for /metrics
SELECT queue, state::text AS state, count(*) AS n FROM todos GROUP BY 1, 2;

-- name: overview_counts
-- description: The Board's overview: the human's todos counted by queue and state, every queue of theirs listed
SELECT coalesce(c.queue, g.queue) AS queue, coalesce(c.pending, 0) AS pending,
       coalesce(c.claimed, 0) AS claimed,
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
               count(*) FILTER (WHERE todo_dead_letter(t.state, t.next_retry_at)) AS dead,
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

-- name: overview_outcomes
-- description: The Board's charts: attempts of the human's todos closed in the window's buckets (0: the one holding now), by queue, outcome and bucket: the attempts there, and the counts of those deleted
SELECT x.queue, x.outcome::text AS outcome, attempt_died(x.outcome) AS died,
       ceil(extract(epoch FROM w.newest - x.bucket) / %(bucket_seconds)s)::int AS bucket,
       sum(x.n)::bigint AS n
  FROM (SELECT d.newest, d.newest - (%(buckets)s - 1) * %(bucket_seconds)s * interval '1 second' AS oldest,
               coalesce(%(now)s::timestamptz, now()) AS now
          FROM (SELECT date_bin(%(bucket_seconds)s * interval '1 second', coalesce(%(now)s::timestamptz, now()),
                                timestamptz '2000-01-01 00:00:00+00') AS newest) d) w
 CROSS JOIN LATERAL (
        SELECT t.queue, a.outcome, outcome_bucket(a.ended_at) AS bucket, 1 AS n
          FROM attempts a JOIN todos t ON t.id = a.todo_id
         WHERE a.ended_at >= w.oldest AND a.ended_at <= w.now
           AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
        UNION ALL
        SELECT c.queue, c.outcome, c.bucket, c.n
          FROM attempt_outcome_counts c
         WHERE c.bucket >= w.oldest AND c.bucket <= w.now
           AND c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))) x
 WHERE x.outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped')
 GROUP BY 1, 2, 3, 4;

-- name: schema_version
-- description: The newest migration applied, for /readyz
SELECT coalesce(max(version), 0) AS version FROM schema_migrations;
