-- A2A push notification configs (migration 0021's a2a_push_configs): an A2A caller's configs
-- of the tasks (todos) in its scope. A todo outside it reads as absent (REQ-10), whichever
-- statement asks. The token and the authentication's credentials are written, never read
-- back here; delivery reads them from the outbox (sweeps.sql's hook_events_lease).

-- name: push_config_set
-- description: An A2A caller adds or replaces a push config of a todo in its scope (at most max a todo), marks the todo pushed to, and writes its current status to the outbox for that config
WITH t AS (
  UPDATE todos t SET a2a_push = true
   WHERE t.id = %(todo_id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
  RETURNING t AS todo, (SELECT count(*) FROM a2a_push_configs c WHERE c.todo_id = t.id AND c.id <> %(id)s) AS others
),
ins AS (
  INSERT INTO a2a_push_configs AS c (todo_id, id, endpoint_id, url, token, auth_scheme, auth_credentials)
  SELECT (t.todo).id, %(id)s, %(claimer_id)s, %(url)s, %(token)s, %(auth_scheme)s, %(auth_credentials)s
    FROM t WHERE t.others < %(max)s
  ON CONFLICT (todo_id, id) DO UPDATE
     SET endpoint_id = EXCLUDED.endpoint_id, url = EXCLUDED.url, token = EXCLUDED.token,
         auth_scheme = EXCLUDED.auth_scheme, auth_credentials = EXCLUDED.auth_credentials, updated_at = now()
  RETURNING c.todo_id, c.id, c.url, c.auth_scheme
),
pushed AS (
  INSERT INTO hook_events (event, url, todo_id, payload, push_todo_id, push_config_id)
  SELECT 'a2a.task_status', ins.url, ins.todo_id, a2a_push_payload(t.todo, now()), ins.todo_id, ins.id
    FROM ins CROSS JOIN t
)
SELECT t.others, ins.todo_id, ins.id, ins.url, ins.auth_scheme FROM t LEFT JOIN ins ON true;

-- name: push_configs_of_todo
-- description: A todo's push configs (the one named by id, or all when id is null), oldest first, when the todo is in the caller's scope: no row when it is not, one row of nulls when it has none
SELECT t.id AS task_id, c.todo_id, c.id, c.url, c.auth_scheme
  FROM todos t
  LEFT JOIN a2a_push_configs c ON c.todo_id = t.id AND (%(id)s::text IS NULL OR c.id = %(id)s::text)
 WHERE t.id = %(todo_id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
 ORDER BY c.created_at, c.id;

-- name: push_config_delete
-- description: Deletes a push config of a todo in the caller's scope (its pushes not yet delivered go with it); no row when the todo is not in scope, deleted 0 when it had no such config
WITH t AS (
  SELECT t.id FROM todos t
   WHERE t.id = %(todo_id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
),
gone AS (
  DELETE FROM a2a_push_configs c USING t WHERE c.todo_id = t.id AND c.id = %(id)s RETURNING c.id
)
SELECT (SELECT count(*) FROM gone) AS deleted FROM t;
