-- Schedules (migration 0017): a human's standing order that adds a todo at each tick of a
-- cron expression in a time zone, or every N seconds (board/store/recurring.py).
--
-- The ticks are computed in Python (croniter, in the schedule's zone); these statements hold
-- the schedules and take a due one's tick. The timer's sweep (board/ops/schedule.py, every
-- server process) locks a batch of due schedules with SKIP LOCKED and, in the same
-- transaction, takes each one's tick with schedule_tick: the todo added (or the tick skipped
-- and counted) and next_at moved past now together, so each tick is taken exactly once
-- however many processes sweep. Adds, pauses, resumes and removes notify "schedules", which
-- wakes every process's timer.

-- name: schedule_add
-- description: A human's new schedule, its first tick at next_at; notifies "schedules" so every timer looks again
WITH ins AS (
  INSERT INTO schedules (user_id, queue, title, payload, priority, max_attempts, cron, every_seconds, timezone, overlap,
                         next_at, created_at)
  VALUES (%(user_id)s, %(queue)s, %(title)s, %(payload)s, %(priority)s, %(max_attempts)s, %(cron)s,
          %(every_seconds)s, %(timezone)s, %(overlap)s, %(next_at)s, coalesce(%(now)s::timestamptz, now()))
  RETURNING *
)
SELECT ins.id::text AS id, ins.user_id, ins.queue, ins.title, ins.payload, ins.priority, ins.max_attempts, ins.cron,
       ins.every_seconds, ins.timezone, ins.overlap, ins.paused, ins.next_at, ins.last_tick_at, ins.ticks_added,
       ins.ticks_skipped, ins.created_at,
       EXISTS (SELECT FROM endpoints e WHERE e.user_id = ins.user_id AND e.revoked_at IS NULL
                                         AND ins.queue = ANY(e.queues)) AS endpoint_live,
       pg_notify('switchboard_v1', json_build_object('kind', 'schedules', 'user', ins.user_id)::text)
  FROM ins;

-- name: schedules_of_user
-- description: A human's schedules (one, when id is given), oldest first, each saying whether a live endpoint of theirs is granted its queue
SELECT s.id::text AS id, s.user_id, s.queue, s.title, s.payload, s.priority, s.max_attempts, s.cron, s.every_seconds,
       s.timezone, s.overlap, s.paused, s.next_at, s.last_tick_at, s.ticks_added, s.ticks_skipped, s.created_at,
       EXISTS (SELECT FROM endpoints e WHERE e.user_id = s.user_id AND e.revoked_at IS NULL
                                         AND s.queue = ANY(e.queues)) AS endpoint_live
  FROM schedules s
 WHERE (%(user_id)s::bigint IS NULL OR s.user_id = %(user_id)s::bigint)
   AND (%(id)s::uuid IS NULL OR s.id = %(id)s::uuid)
 ORDER BY s.created_at, s.id;

-- name: schedule_set_paused
-- description: Pauses or resumes a schedule (of the human, when user_id is given); a resume starts at the next tick after now, so ticks missed while paused add nothing; notifies "schedules"
WITH upd AS (
  UPDATE schedules s SET paused = %(paused)s, next_at = coalesce(%(next_at)s::timestamptz, s.next_at)
   WHERE s.id = %(id)s::uuid AND (%(user_id)s::bigint IS NULL OR s.user_id = %(user_id)s::bigint)
     AND s.paused <> %(paused)s
  RETURNING s.id, s.user_id
)
SELECT upd.id::text AS id,
       pg_notify('switchboard_v1', json_build_object('kind', 'schedules', 'user', upd.user_id)::text)
  FROM upd;

-- name: schedule_remove
-- description: Removes a schedule (of the human, when user_id is given); the todos it added stay, no longer naming it; notifies "schedules"
WITH gone AS (
  DELETE FROM schedules s
   WHERE s.id = %(id)s::uuid AND (%(user_id)s::bigint IS NULL OR s.user_id = %(user_id)s::bigint)
  RETURNING s.id, s.user_id
)
SELECT gone.id::text AS id,
       pg_notify('switchboard_v1', json_build_object('kind', 'schedules', 'user', gone.user_id)::text)
  FROM gone;

-- name: schedules_due_lock
-- description: The timer's batch: schedules not paused whose next tick has come, locked SKIP LOCKED so each is taken by one process
SELECT s.id::text AS id, s.user_id, s.queue, s.title, s.payload, s.priority, s.max_attempts, s.cron, s.every_seconds,
       s.timezone, s.overlap, s.next_at, s.created_at
  FROM schedules s
 WHERE NOT s.paused AND s.next_at <= coalesce(%(now)s::timestamptz, now())
 ORDER BY s.next_at LIMIT %(batch)s
   FOR UPDATE OF s SKIP LOCKED;

-- name: schedule_tick
-- description: Takes a locked schedule's tick: adds its todo through the human's oldest live endpoint granted the queue (unless overlap is off and its previous todo is live, or no endpoint is), counts the tick added or skipped, and moves next_at on
WITH live AS (
  SELECT 1 FROM todos t
   WHERE t.schedule_id = %(id)s::uuid AND NOT todo_ended(t.state, t.next_retry_at)
   LIMIT 1
),
ep AS (  -- a team's todos belong to its space endpoint
  SELECT coalesce(e.space_id, e.id) AS id FROM endpoints e
   WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL AND %(queue)s::text = ANY(e.queues)
   ORDER BY e.created_at, e.id
   LIMIT 1
   FOR SHARE OF e
),
upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, max_attempts, priority, key, schedule_id,
                          created_at, updated_at)
  SELECT ep.id, %(queue)s, %(title)s, %(payload)s, %(max_attempts)s, %(priority)s, %(key)s::text, %(id)s::uuid,
         coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
    FROM ep
   WHERE %(overlap)s::boolean OR NOT EXISTS (SELECT FROM live)
  ON CONFLICT DO NOTHING  -- the tick's key is live already: nothing more to add
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      hook_event(u.state, u.next_retry_at), u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority, after => u.after,
      schedule_id => u.schedule_id) h
  RETURNING 1
),
sched AS (
  UPDATE schedules s SET next_at = %(next_at)s, last_tick_at = %(tick)s,
      ticks_added = s.ticks_added + (SELECT count(*) FROM upd),
      ticks_skipped = s.ticks_skipped + 1 - (SELECT count(*) FROM upd)
   WHERE s.id = %(id)s::uuid
  RETURNING s.id
)
SELECT (SELECT count(*) FROM sched) AS taken, EXISTS (SELECT FROM live) AS overlapped, EXISTS (SELECT FROM ep) AS endpoint_live,
       upd.id, upd.endpoint_id, upd.queue, upd.state::text AS state, upd.run_at,
       CASE WHEN upd.id IS NOT NULL
             AND EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'added') END
  FROM (SELECT 1) one LEFT JOIN upd ON true;

-- name: schedules_next_at
-- description: When the next schedule not paused ticks (null: none), for the timer's sleep
SELECT s.next_at FROM schedules s WHERE NOT s.paused ORDER BY s.next_at LIMIT 1;

-- name: schedule_ticks_by_queue
-- description: Schedule ticks added and skipped, summed by queue, for /metrics
SELECT s.queue, sum(s.ticks_added)::bigint AS added, sum(s.ticks_skipped)::bigint AS skipped
  FROM schedules s GROUP BY 1;
