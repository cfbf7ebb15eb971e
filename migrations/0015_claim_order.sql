-- The claim decides by more than age: a priority, a time to start, one live todo per key,
-- and a limit on how many todos of a queue may be held at once.
--
-- priority: 0 (the most urgent) to 4, default 2. claim_next takes the most urgent claimable
-- todo first, the oldest within a priority.
--
-- run_at: when the todo may first be claimed (null: on its add). A todo added with a future
-- run_at, or released with a delay, is pending and `scheduled` until it falls due; the due
-- timer (board/ops/schedule.py) then clears `scheduled` in one statement for every due todo
-- and rings the doorbell. The flag, not a comparison with now(), is what keeps the claim's
-- index to claimable rows only: todos_ready_idx holds pending todos that are not scheduled,
-- in the claim's order, so a deep schedule is never walked by a claim. A claim by id
-- accepts a scheduled todo whose run_at has passed but which the timer has not reached yet.
--
-- key: while a todo is live (pending, scheduled, held, or failed waiting for its retry) no
-- other todo of its endpoint and queue has its key: a unique index, so however many adds
-- race exactly one inserts; an add that finds the key taken returns the live todo instead.
--
-- queue_limits: per human and queue, how many of its todos may be held (claimed or waiting
-- for a person) at once. queue_room locks the limit's row, then counts what is held with a
-- fresh snapshot (a VOLATILE function's statement sees what committed while it waited), so
-- concurrent claims of a limited queue take turns and never pass the limit; a queue with no
-- limit never calls it.

ALTER TABLE todos
  ADD COLUMN priority smallint NOT NULL DEFAULT 2 CONSTRAINT todos_priority_check CHECK (priority BETWEEN 0 AND 4),
  ADD COLUMN run_at timestamptz,
  ADD COLUMN scheduled boolean NOT NULL DEFAULT false,
  ADD COLUMN key text COLLATE "C" CONSTRAINT todos_key_check CHECK (octet_length(key) BETWEEN 1 AND 200),
  ADD CONSTRAINT todos_scheduled_pending CHECK (NOT scheduled OR (state = 'pending' AND run_at IS NOT NULL));

-- claim_next walks only claimable rows, in the claim's order, never past the schedule or
-- finished history. Replaces todos_pending_idx, whose readers now take ready and scheduled
-- apart.
DROP INDEX todos_pending_idx;
CREATE INDEX todos_ready_idx ON todos (endpoint_id, priority, created_at, id) WHERE state = 'pending' AND NOT scheduled;
-- The Board's and /metrics' scheduled counts, per endpoint; the due timer's next time.
CREATE INDEX todos_scheduled_idx ON todos (endpoint_id, run_at) WHERE scheduled;
CREATE INDEX todos_due_idx ON todos (run_at) WHERE scheduled;
-- One live todo per key: not done, canceled or dead-lettered (todo_ended's rule, written
-- out: an index predicate is evaluated with a search_path that cannot find its helpers).
CREATE UNIQUE INDEX todos_live_key ON todos (endpoint_id, queue, key)
  WHERE key IS NOT NULL AND state NOT IN ('done', 'canceled') AND (state <> 'failed' OR next_retry_at IS NOT NULL);

CREATE TABLE queue_limits (
  user_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  queue    text NOT NULL CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  max_held integer NOT NULL CONSTRAINT queue_limits_max_held_check CHECK (max_held BETWEEN 1 AND 100000),
  set_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, queue)
);

-- How many todos of the human's queue are held (claimed or waiting for a person): each held
-- state through its own partial index (one IN list of the three would match neither).
CREATE FUNCTION queue_held(user_id bigint, queue text) RETURNS bigint
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT (SELECT count(*) FROM todos t
           WHERE t.endpoint_id = ANY(user_endpoints($1)) AND t.queue = $2 AND t.state = 'claimed')
       + (SELECT count(*) FROM todos t
           WHERE t.endpoint_id = ANY(user_endpoints($1)) AND t.queue = $2
             AND t.state IN ('input_required', 'auth_required'))
$$;

-- How many more todos of the human's queue may be held now (null: the queue has no limit).
-- Locks the limit's row until the caller's transaction ends, so claims of one limited queue
-- take turns; each count below runs with its own snapshot, after the lock is granted.
CREATE FUNCTION queue_room(user_id bigint, queue text) RETURNS integer
  LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  most integer;
  held integer;
BEGIN
  SELECT l.max_held INTO most FROM queue_limits l WHERE l.user_id = $1 AND l.queue = $2 FOR UPDATE;
  IF most IS NULL THEN
    RETURN NULL;
  END IF;
  held := queue_held($1, $2);
  RETURN most - held;
END
$$;

-- The hooks' payload carries the todo's priority: hook_rows gains a last argument (null:
-- left out), so a statement of the earlier build still runs.
DROP FUNCTION hook_rows(text[], timestamptz, text, text, text, text, todo_state, integer, integer, integer, uuid,
                        integer, jsonb, integer, integer, text, boolean, text, text);
CREATE FUNCTION hook_rows(urls text[], occurred_at timestamptz, event text, id text, queue text, title text,
                          state todo_state, attempt integer, max_attempts integer, attempts_total integer,
                          endpoint_id uuid, attempts_pruned integer DEFAULT NULL,
                          pruned_outcomes jsonb DEFAULT NULL, closed_seq integer DEFAULT NULL,
                          closed_attempt integer DEFAULT NULL, closed_outcome text DEFAULT NULL,
                          closed_died boolean DEFAULT NULL, closed_summary text DEFAULT NULL,
                          closed_artifact text DEFAULT NULL, priority smallint DEFAULT NULL)
  RETURNS TABLE (hook_event text, hook_url text, hook_todo_id text, hook_payload jsonb)
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT $3::text, h.url, $4::text,
         jsonb_set(hook_payload($3::text, $2::timestamptz, $4::text, $5::text, $6::text, $7::todo_state, $8::integer,
                                $9::integer, $10::integer, $11::uuid),
                   '{todo,priority}', coalesce(to_jsonb($20::smallint), 'null'::jsonb))
         || CASE WHEN $3::text = 'todo.dead_lettered' THEN jsonb_build_object(
              'attempt', jsonb_build_object('seq', $14::integer, 'attempt', $15::integer, 'outcome', $16::text,
                                            'died', $17::boolean, 'summary', $18::text, 'artifact', $19::text),
              'attempts', attempt_summary($4::text, $10::integer, $12::integer, $13::jsonb, $14::integer, $16::text))
            ELSE '{}'::jsonb END
    FROM unnest($1::text[]) AS h(url)
   WHERE $3::text IS NOT NULL
$$;
