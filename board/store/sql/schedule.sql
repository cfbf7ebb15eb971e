-- The claim's order set by hand and by time: a human's change of a pending todo's priority,
-- the due timer (board/ops/schedule.py) making scheduled todos claimable when their run_at
-- comes, a human starting a scheduled todo now, and the per-queue limits of migration 0015.
--
-- Falling due is a transition like any other: the todo stays pending, stops being
-- scheduled, writes todo.ready hook events (a scheduled add and a snooze wrote none) and is
-- notified as "due", which rings the doorbell (board/mcp/doorbell.py). The timer's batch
-- walks todos_due_idx in run_at order with SKIP LOCKED, so every server process may run it.
-- A todo that falls due still waiting for other todos (migration 0016) is not claimable yet:
-- no hook, and it is notified "waiting", which does not ring.

-- name: todos_fall_due
-- description: Scheduled todos -> claimable: those whose run_at has come (id null, a batch at a time, the due timer's), or the one named started now by the owning human, with hook events and a "due" notification each
WITH due AS (
  SELECT t.id FROM todos t
   WHERE %(id)s::text IS NULL AND t.scheduled AND t.run_at <= coalesce(%(now)s::timestamptz, now())
   ORDER BY t.run_at LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
),
named AS (
  SELECT t.id FROM todos t
   WHERE t.id = %(id)s AND t.scheduled IS TRUE  -- (IS TRUE: by the primary key, not the scheduled index)
     AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
   FOR UPDATE OF t
),
upd AS (
  UPDATE todos t SET scheduled = false, run_at = least(t.run_at, coalesce(%(now)s::timestamptz, now())),
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM (SELECT id FROM due UNION ALL SELECT id FROM named) d
   WHERE t.id = d.id
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN u.waits = 0 THEN 'todo.ready' END, u.id, u.queue, u.title, u.state, u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id,
      priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.waits = 0 THEN 'due' ELSE 'waiting' END) END FROM upd;

-- name: todos_next_due
-- description: When the next scheduled todo falls due (null: none is scheduled), for the due timer's sleep
SELECT t.run_at FROM todos t
 WHERE t.scheduled AND t.run_at > '-infinity'  -- (a bound on run_at: walked by todos_due_idx, in its order)
 ORDER BY t.run_at LIMIT 1;

-- name: todos_set_priority
-- description: The owning human sets the priority of pending todos of theirs (the drawer's one, the bulk action's many); the others are left as they are
WITH upd AS (
  UPDATE todos t SET priority = %(priority)s, updated_at = coalesce(%(now)s::timestamptz, now())
   WHERE t.id = ANY(%(ids)s::text[]) AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = 'pending' AND t.priority <> %(priority)s
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.state::text AS state, upd.priority,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'reprioritized') END FROM upd;

-- name: queue_limit_set
-- description: A human sets how many todos of a queue may be held at once (0: no limit), returning the limit now (null: none)
WITH gone AS (
  DELETE FROM queue_limits l WHERE %(max_held)s::int = 0 AND l.user_id = %(user_id)s AND l.queue = %(queue)s
  RETURNING 1
),
set AS (
  INSERT INTO queue_limits (user_id, queue, max_held)
  SELECT %(user_id)s, %(queue)s, %(max_held)s WHERE %(max_held)s::int > 0
  ON CONFLICT (user_id, queue) DO UPDATE SET max_held = EXCLUDED.max_held, set_at = now()
  RETURNING max_held
)
SELECT (SELECT max_held FROM set) AS max_held,
       pg_notify('switchboard_v1', json_build_object('kind', 'queue_limited', 'user', %(user_id)s::bigint,
                                                     'queue', %(queue)s::text)::text);

-- name: todos_scheduled_by_queue
-- description: Scheduled todos counted by queue, for /metrics
SELECT t.queue, count(*) AS n FROM todos t
 WHERE t.scheduled AND t.run_at > '-infinity'  -- (a bound on run_at: walked by todos_due_idx)
 GROUP BY 1;

-- name: queue_limits_held
-- description: Each limited queue's limit and how many of its todos are held now, for /metrics
SELECT l.queue, u.username, l.max_held,
       queue_held(l.user_id, l.queue) AS held
  FROM queue_limits l JOIN users u ON u.id = l.user_id
 ORDER BY 1, 2;
