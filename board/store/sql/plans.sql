-- Plans (migration 0016): the owning human drops a dependency of a waiting todo, the todos
-- a delete would strand, and the waiting counts per queue.
--
-- A drop locks the dependency FOR SHARE first, the row its complete locks FOR UPDATE, then
-- updates the dependent: the order todo_release_dependents takes them in, so a drop and the
-- dependency's complete take turns and never deadlock. The dependent counts one fewer only
-- when the dependency is not done (a done one was counted off when it completed); left
-- waiting on nothing, pending and not scheduled, it is claimable: a todo.ready hook, and the
-- notification "unblocked", which rings the doorbell. Otherwise it is notified "waiting".

-- name: todo_drop_dependency
-- description: The owning human drops one todo from what a todo of theirs waits for; claimable when it waited on nothing else
WITH dep AS (
  SELECT d.id, d.state = 'done' AS done FROM todos d
   WHERE d.id = %(after_id)s AND d.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
   FOR SHARE OF d
),
gone AS (
  DELETE FROM todo_deps x USING dep
   WHERE x.todo_id = %(id)s AND x.after_id = dep.id
     AND EXISTS (SELECT FROM todos t WHERE t.id = %(id)s
                    AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s))
  RETURNING dep.done
),
upd AS (
  UPDATE todos t SET after = nullif(array_remove(t.after, %(after_id)s::text), '{}'),
         waits = t.waits - (SELECT count(*) FROM gone g WHERE NOT g.done),
         updated_at = coalesce(%(now)s::timestamptz, now())
   WHERE t.id = %(id)s AND EXISTS (SELECT FROM gone)
  RETURNING t.*, EXISTS (SELECT FROM gone g WHERE NOT g.done) AND t.waits = 0 AND t.state = 'pending'
                 AND NOT t.scheduled AS freed
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN u.freed THEN 'todo.ready' END, u.id, u.queue, u.title, u.state, u.attempt, u.max_attempts,
      u.attempts_total, u.endpoint_id, priority => u.priority, after => coalesce(u.after, '{}')) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting, upd.freed,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.freed THEN 'unblocked' ELSE 'waiting' END) END FROM upd;

-- name: todos_waiters
-- description: The human's todos among ids that are not done and that live todos wait on, each with those waiters: why a delete left them
SELECT t.id, t.title, json_agg(json_build_object('id', w.id, 'title', w.title, 'state', w.state) ORDER BY w.created_at, w.id)
         AS waiters
  FROM todos t
  JOIN todo_deps d ON d.after_id = t.id
  JOIN todos w ON w.id = d.todo_id
 WHERE t.id = ANY(%(ids)s::text[]) AND t.state <> 'done'
   AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
 GROUP BY t.id;

-- name: todos_waiting_by_queue
-- description: Aggregates only, for /metrics: how many pending todos of each queue wait for other todos
SELECT t.queue, count(*) AS n FROM todos t WHERE t.state = 'pending' AND t.waits > 0 GROUP BY t.queue;

-- name: todos_waiting_count_human
-- description: The human's pending todos waiting for other todos, per queue, for the Board's overview
SELECT t.queue, count(*) AS n FROM todos t
 WHERE t.endpoint_id = ANY(user_endpoints(%(user_id)s)) AND t.state = 'pending' AND t.waits > 0
 GROUP BY t.queue;
