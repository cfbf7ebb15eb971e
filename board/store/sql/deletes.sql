-- The owning human deletes their ended todos from the Board. As retention does
-- (sweeps.sql's todos_delete_expired): the attempts and their notes go by ON DELETE CASCADE,
-- the successor links both ways go in the same statement (a successor keeps its continues_id,
-- naming a todo that no longer exists, and its chain starts at itself), and each deleted todo
-- is notified as 'deleted'. The closed attempts deleted are counted for the charts by
-- migration 0007's trigger (todos_count_deleted_attempts), in this transaction; the /metrics
-- counters moved when each attempt closed. An id that is not the human's, not ended (done,
-- canceled, dead letter), or unknown matches nothing and is left alone. A canceled or
-- dead-lettered todo that others wait on is left too, unless each of them is deleted with it:
-- its waiters would wait for a todo no longer there (the store names them, todos_waiters).

-- name: todos_delete_human
-- description: The owning human deletes ended todos of theirs by id (attempts and notes cascade) and their successor links; any other id is left alone
WITH gone AS (
  SELECT t.id FROM todos t
   WHERE t.id = ANY(%(ids)s::text[])
     AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
     AND todo_ended(t.state, t.next_retry_at)
     AND (t.state = 'done' OR NOT EXISTS (  -- a todo others wait on goes only with them (migration 0016)
           SELECT FROM todo_deps d JOIN todos w ON w.id = d.todo_id
            WHERE d.after_id = t.id
              AND NOT (w.id = ANY(%(ids)s::text[]) AND todo_ended(w.state, w.next_retry_at))))
   ORDER BY t.id  -- one lock order, so two overlapping deletes never deadlock
   FOR UPDATE OF t
),
links AS (
  DELETE FROM todo_successors s
   WHERE s.todo_id = ANY(ARRAY(SELECT id FROM gone)) OR s.successor_id = ANY(ARRAY(SELECT id FROM gone))
)
DELETE FROM todos t USING gone WHERE t.id = gone.id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state,
          todo_dead_letter(t.state, t.next_retry_at) AS dead_letter, t.attempts_total,
          CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN todo_notify(t.id, t.endpoint_id, t.queue, t.state, 'deleted') END;
