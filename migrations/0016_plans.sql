-- Plans of work: a todo may wait for other todos (after), and a schedule may add todos.
--
-- todos.after: the todos a todo was added to wait for, in the order named (null: none);
-- todo_deps holds the same links one row each, for the way back (who waits on this todo).
-- todo_deps: the todo todo_id waits until after_id is done. Only todos that exist are named
-- and a todo's dependencies are written once, when it is added, so no cycle can be made.
--
-- todos.waits counts the todo's dependencies not done yet. A todo is claimable only at 0:
-- todos_ready_idx gains "waits = 0", so a waiting todo is not in the index the claim walks
-- and costs it nothing. A dependency that ends canceled or as a dead letter stays counted:
-- its dependents wait (and say so) until a person retries it and it completes, or drops it.
--
-- todos.waited_on is set once any todo has named this one in its after. An add sets it by
-- updating each dependency's row, the same row lock the dependency's complete takes, so the
-- two take turns: an add after the complete committed sees the dependency done and does not
-- count it; a complete after the add committed finds waited_on set in its own RETURNING and
-- calls todo_release_dependents, a VOLATILE function whose statement takes a fresh snapshot
-- and so sees the add's todo_deps rows. A complete of a todo nobody waits on pays a column
-- read. Two dependencies completing at once each decrement under the dependent's row lock,
-- so neither decrement is lost and exactly one sees 0.
--
-- todos.schedule_id: the schedule that added the todo (migration 0017's schedules).

ALTER TABLE todos
  ADD COLUMN waits smallint NOT NULL DEFAULT 0 CONSTRAINT todos_waits_check CHECK (waits >= 0),
  ADD COLUMN after text[],  -- the todos named, in the order named (null: none)
  ADD COLUMN waited_on boolean NOT NULL DEFAULT false,
  ADD COLUMN schedule_id uuid;

CREATE TABLE todo_deps (
  todo_id  text NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
  after_id text NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
  PRIMARY KEY (todo_id, after_id),
  CHECK (todo_id <> after_id)
);
-- A dependency's waiters: the release on its complete, the drawer's "blocking", the delete's
-- refusal.
CREATE INDEX todo_deps_after_idx ON todo_deps (after_id);

DROP INDEX todos_ready_idx;
CREATE INDEX todos_ready_idx ON todos (endpoint_id, priority, created_at, id)
  WHERE state = 'pending' AND NOT scheduled AND waits = 0;
-- The Board's and /metrics' waiting counts per queue.
CREATE INDEX todos_waiting_idx ON todos (endpoint_id, queue) WHERE state = 'pending' AND waits > 0;
-- A schedule's live todo (does the next tick overlap one?).
CREATE INDEX todos_schedule_idx ON todos (schedule_id, created_at) WHERE schedule_id IS NOT NULL;

-- The hooks' payload carries after (the ids the todo waits for, in the order named) and
-- schedule_id: two more trailing arguments; null looks them up by the todo's id (an add
-- passes them, since its own rows are not yet visible to its statement).
DROP FUNCTION hook_rows(text[], timestamptz, text, text, text, text, todo_state, integer, integer, integer, uuid,
                        integer, jsonb, integer, integer, text, boolean, text, text, smallint);
CREATE FUNCTION hook_rows(urls text[], occurred_at timestamptz, event text, id text, queue text, title text,
                          state todo_state, attempt integer, max_attempts integer, attempts_total integer,
                          endpoint_id uuid, attempts_pruned integer DEFAULT NULL,
                          pruned_outcomes jsonb DEFAULT NULL, closed_seq integer DEFAULT NULL,
                          closed_attempt integer DEFAULT NULL, closed_outcome text DEFAULT NULL,
                          closed_died boolean DEFAULT NULL, closed_summary text DEFAULT NULL,
                          closed_artifact text DEFAULT NULL, priority smallint DEFAULT NULL,
                          after text[] DEFAULT NULL, schedule_id uuid DEFAULT NULL)
  RETURNS TABLE (hook_event text, hook_url text, hook_todo_id text, hook_payload jsonb)
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT $3::text, h.url, $4::text,
         jsonb_set(jsonb_set(jsonb_set(
             hook_payload($3::text, $2::timestamptz, $4::text, $5::text, $6::text, $7::todo_state, $8::integer,
                          $9::integer, $10::integer, $11::uuid),
             '{todo,priority}', coalesce(to_jsonb($20::smallint), 'null'::jsonb)),
             '{todo,after}', to_jsonb(coalesce($21::text[], (SELECT t.after FROM todos t WHERE t.id = $4::text),
                                               '{}'::text[]))),
             '{todo,schedule_id}', coalesce(to_jsonb(coalesce($22::uuid, (SELECT t.schedule_id FROM todos t
                                                                          WHERE t.id = $4::text))), 'null'::jsonb))
         || CASE WHEN $3::text = 'todo.dead_lettered' THEN jsonb_build_object(
              'attempt', jsonb_build_object('seq', $14::integer, 'attempt', $15::integer, 'outcome', $16::text,
                                            'died', $17::boolean, 'summary', $18::text, 'artifact', $19::text),
              'attempts', attempt_summary($4::text, $10::integer, $12::integer, $13::jsonb, $14::integer, $16::text))
            ELSE '{}'::jsonb END
    FROM unnest($1::text[]) AS h(url)
   WHERE $3::text IS NOT NULL
$$;

-- A todo completed: each todo waiting on it counts one dependency fewer; those left waiting
-- on nothing, pending and not scheduled, are claimable now: a todo.ready hook each, and a
-- notification "unblocked" (which rings the doorbell) where someone watches. Called from a
-- complete's RETURNING only when the todo is waited_on; its statement takes its own snapshot
-- (VOLATILE, READ COMMITTED), after the complete's row lock was granted, so it sees every
-- todo_deps row an add committed while the complete waited for that lock.
CREATE FUNCTION todo_release_dependents(done_id text, hook_urls text[], at timestamptz) RETURNS integer
  LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  freed integer;
BEGIN
  WITH dec AS (
    UPDATE todos t SET waits = t.waits - 1, updated_at = at
     WHERE t.id IN (SELECT d.todo_id FROM todo_deps d WHERE d.after_id = done_id)
    RETURNING t.id, t.endpoint_id, t.queue, t.title, t.state, t.attempt, t.max_attempts, t.attempts_total,
              t.priority, t.scheduled, t.waits
  ),
  ready AS (
    SELECT * FROM dec WHERE dec.waits = 0 AND dec.state = 'pending' AND NOT dec.scheduled
  ),
  outbox AS (
    INSERT INTO hook_events (event, url, todo_id, payload)
    SELECT h.* FROM ready u, hook_rows(hook_urls, at, 'todo.ready', u.id, u.queue, u.title, u.state, u.attempt,
                                       u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority) h
    RETURNING 1
  )
  SELECT count(*) INTO freed FROM (
    SELECT CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = r.endpoint_id)
           THEN todo_notify(r.id, r.endpoint_id, r.queue, r.state, 'unblocked') END
      FROM ready r) x;
  RETURN freed;
END
$$;
