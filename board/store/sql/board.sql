-- Queue pauses (migration 0003), the Board's overview and the counts /metrics and /readyz
-- read, each scoped to the owning human in the statement where it has one. The overview's
-- counts read the live todos through their partial indexes and the rest from todo_counts
-- (migration 0010), so they do not grow with history; its chart reads the closed-attempt
-- counts and, through the BRIN index on ended_at, the attempts closed since the fold's
-- watermark (migration 0012), the last ten seconds', so it does not grow with the closes.

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
-- description: Every todo counted by queue and state, for /metrics: the live ones through their partial indexes, the ended ones from todo_counts (done: all, less the live, canceled and dead)
WITH live AS (  -- counted per queue and state here: a row per count, not one per todo
  SELECT x.queue, x.state, count(*) AS n
    FROM (SELECT t.queue, t.state FROM todos t WHERE t.state = 'pending' AND NOT t.scheduled AND t.waits = 0
          UNION ALL
          SELECT t.queue, t.state FROM todos t WHERE t.state = 'pending' AND t.waits > 0 AND NOT t.scheduled
          UNION ALL
          SELECT t.queue, t.state FROM todos t WHERE t.scheduled
          UNION ALL
          SELECT t.queue, t.state FROM todos t WHERE t.state = 'claimed'
          UNION ALL
          SELECT t.queue, t.state FROM todos t WHERE t.state IN ('input_required', 'auth_required')
          UNION ALL
          SELECT t.queue, t.state FROM todos t WHERE t.state = 'failed' AND t.next_retry_at IS NOT NULL) x
   GROUP BY 1, 2
)
SELECT x.queue, x.state::text AS state, sum(x.n)::bigint AS n
  FROM (SELECT l.queue, v.state, v.n
          FROM live l CROSS JOIN LATERAL (VALUES (l.state, l.n), ('done'::todo_state, -l.n)) v(state, n)
        UNION ALL
        SELECT c.queue, v.state, v.n
          FROM todo_counts c
         CROSS JOIN LATERAL (VALUES (CASE c.kind WHEN 'all' THEN 'done' WHEN 'canceled' THEN 'canceled'
                                                 ELSE 'failed' END::todo_state, c.n),
                                    ('done'::todo_state, CASE WHEN c.kind = 'all' THEN 0 ELSE -c.n END)) v(state, n)) x
 GROUP BY 1, 2
HAVING sum(x.n) <> 0;

-- name: overview_counts
-- description: The Board's overview: the human's todos counted by queue and state, every queue of theirs listed
WITH live AS (
  -- Per endpoint of the human, its live todos through their partial indexes; then the todos
  -- waiting out a retry's backoff, few in all, read once for the human's endpoints. Counted
  -- here, per queue and state, so what follows handles a row per count, not one per todo
  -- (a backlog of 90,000 pending todos is one row).
  SELECT x.queue, x.state, x.state = 'failed' AND x.next_retry_at IS NOT NULL AS retrying,
         todo_dead_letter(x.state, x.next_retry_at) AS dead, x.scheduled, x.waiting, count(*) AS n
    FROM (
      SELECT y.queue, y.state, y.next_retry_at, y.scheduled, y.waiting
        FROM endpoints e
        CROSS JOIN LATERAL (
          SELECT t.queue, t.state, t.next_retry_at, false AS scheduled, false AS waiting
            FROM todos t WHERE t.endpoint_id = e.id AND t.state = 'pending' AND NOT t.scheduled AND t.waits = 0
          UNION ALL
          SELECT t.queue, t.state, t.next_retry_at, false, true
            FROM todos t WHERE t.endpoint_id = e.id AND t.state = 'pending' AND t.waits > 0 AND NOT t.scheduled
          UNION ALL
          SELECT t.queue, t.state, t.next_retry_at, true, false FROM todos t WHERE t.endpoint_id = e.id AND t.scheduled
          UNION ALL
          SELECT t.queue, t.state, t.next_retry_at, false, false
            FROM todos t WHERE t.endpoint_id = e.id AND t.state = 'claimed'
          UNION ALL
          SELECT t.queue, t.state, t.next_retry_at, false, false
            FROM todos t WHERE t.endpoint_id = e.id AND t.state IN ('input_required', 'auth_required')) y
       WHERE e.user_id = %(user_id)s
      UNION ALL
      SELECT t.queue, t.state, t.next_retry_at, false, false FROM todos t
       WHERE t.state = 'failed' AND t.next_retry_at IS NOT NULL
         AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))) x
   GROUP BY 1, 2, 3, 4, 5, 6
),
rows AS (
  -- Each live count in its state and against done; todo_counts (migration 0010) gives the
  -- todos there are (as done), the canceled and the dead letters (each against done).
  SELECT l.queue, v.state, v.retrying, v.dead, v.scheduled, v.waiting, v.n
    FROM live l
   CROSS JOIN LATERAL (VALUES (l.state, l.retrying, l.dead, l.scheduled, l.waiting, l.n),
                              ('done'::todo_state, false, false, false, false, -l.n))
        v(state, retrying, dead, scheduled, waiting, n)
  UNION ALL
  SELECT c.queue, v.state, false, v.dead, false, false, v.n
    FROM todo_counts c
   CROSS JOIN LATERAL (VALUES (CASE c.kind WHEN 'all' THEN 'done' WHEN 'canceled' THEN 'canceled'
                                           ELSE 'failed' END::todo_state, c.kind = 'dead', c.n),
                              ('done'::todo_state, false, CASE WHEN c.kind = 'all' THEN 0 ELSE -c.n END)) v(state, dead, n)
   WHERE c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
),
counts AS (
  SELECT r.queue,
         coalesce(sum(r.n) FILTER (WHERE r.state = 'pending'), 0)::bigint AS pending,
         coalesce(sum(r.n) FILTER (WHERE r.scheduled), 0)::bigint AS scheduled,
         coalesce(sum(r.n) FILTER (WHERE r.waiting), 0)::bigint AS waiting,
         coalesce(sum(r.n) FILTER (WHERE r.state = 'claimed'), 0)::bigint AS claimed,
         coalesce(sum(r.n) FILTER (WHERE r.state = 'input_required'), 0)::bigint AS input_required,
         coalesce(sum(r.n) FILTER (WHERE r.state = 'auth_required'), 0)::bigint AS auth_required,
         coalesce(sum(r.n) FILTER (WHERE r.retrying), 0)::bigint AS retrying,
         coalesce(sum(r.n) FILTER (WHERE r.dead), 0)::bigint AS dead,
         coalesce(sum(r.n) FILTER (WHERE r.state = 'done'), 0)::bigint AS done,
         coalesce(sum(r.n) FILTER (WHERE r.state = 'canceled'), 0)::bigint AS canceled,
         sum(r.n) AS todos
    FROM rows r
   GROUP BY r.queue
)
SELECT coalesce(c.queue, g.queue) AS queue, coalesce(c.pending, 0) AS pending,
       coalesce(c.scheduled, 0) AS scheduled, coalesce(c.waiting, 0) AS waiting, coalesce(c.claimed, 0) AS claimed,
       coalesce(c.input_required, 0) AS input_required, coalesce(c.auth_required, 0) AS auth_required,
       coalesce(c.retrying, 0) AS retrying, coalesce(c.dead, 0) AS dead, coalesce(c.done, 0) AS done,
       coalesce(c.canceled, 0) AS canceled, p.paused_at, lim.max_held
  FROM (SELECT * FROM counts WHERE todos <> 0) c
  FULL JOIN (
    SELECT unnest(e.queues) AS queue FROM endpoints e WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL
    UNION SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s
    UNION SELECT l.queue FROM queue_limits l WHERE l.user_id = %(user_id)s) g ON g.queue = c.queue
  LEFT JOIN queue_pauses p ON p.user_id = %(user_id)s AND p.queue = coalesce(c.queue, g.queue)
  LEFT JOIN queue_limits lim ON lim.user_id = %(user_id)s AND lim.queue = coalesce(c.queue, g.queue)
 ORDER BY 1;

-- name: overview_outcomes
-- description: The Board's charts: attempts of the human's todos closed in the window's buckets (0: the one holding now), by queue, outcome and bucket: the counts (of the attempts folded and of those deleted), and the attempts closed since the fold's watermark
SELECT x.queue, x.outcome::text AS outcome, attempt_died(x.outcome) AS died,
       ceil(extract(epoch FROM w.newest - x.bucket) / %(bucket_seconds)s)::int AS bucket,
       sum(x.n)::bigint AS n
  FROM (SELECT d.newest, d.newest - (%(buckets)s - 1) * %(bucket_seconds)s * interval '1 second' AS oldest,
               coalesce(%(now)s::timestamptz, now()) AS now, (SELECT f.before FROM attempt_outcomes_folded f) AS folded
          FROM (SELECT date_bin(%(bucket_seconds)s * interval '1 second', coalesce(%(now)s::timestamptz, now()),
                                timestamptz '2000-01-01 00:00:00+00') AS newest) d) w
 CROSS JOIN LATERAL (
        SELECT t.queue, a.outcome, outcome_bucket(a.ended_at) AS bucket, 1 AS n
          FROM attempts a
          -- Each attempt's todo by its key: OFFSET 0 keeps the planner, which cannot know how
          -- far the watermark has come, from hashing the whole todos table instead.
         CROSS JOIN LATERAL (
                SELECT t.queue FROM todos t
                 WHERE t.id = a.todo_id
                   AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
                OFFSET 0) t
         WHERE a.ended_at >= greatest(w.oldest, w.folded) AND a.ended_at <= w.now
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
