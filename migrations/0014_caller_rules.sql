-- The rules of who may act on a todo, held once: the statements of board/store/sql/ used to
-- write an agent's and the owning human's scope, holder test and fence in twin statements.
-- Each statement now serves both callers: an agent passes its endpoint, granted queues and
-- owner; the Board's human passes no endpoint (null) and their user id. Each function but
-- user_endpoints is IMMUTABLE or STABLE LANGUAGE sql with a single expression and no
-- sub-select, so the planner inlines it, and a plan built for one kind of caller folds the
-- other's branch away.

-- The endpoints of a human: the todos their Board may see and act on (REQ-10). Called only
-- for the human, never on an agent's path.
CREATE FUNCTION user_endpoints(user_id bigint) RETURNS uuid[]
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = $1)
$$;

-- A todo is the caller's (REQ-10): an agent's when its own endpoint filed it in a queue it is
-- granted, the owning human's when any of their endpoints did.
CREATE FUNCTION todo_in_scope(endpoint_id uuid, queue text, caller_endpoint uuid, caller_queues text[],
                              caller_user bigint) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN caller_endpoint IS NULL THEN endpoint_id = ANY(user_endpoints(caller_user))
              ELSE endpoint_id = caller_endpoint AND queue = ANY(caller_queues) END
$$;

-- A holder's verb applies to the attempt it holds: an agent acts only on a todo it holds
-- (owner is its claimer name); the owning human acts on any holder's.
CREATE FUNCTION todo_held_by(owner text, caller_endpoint uuid, caller_owner text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT caller_endpoint IS NULL OR owner = caller_owner
$$;

-- The fence (REQ-6) on the open attempt: with a lease token the store compared it with the
-- attempt's, the todo locked, and passes token_checked; without one only an attempt claimed
-- without a token qualifies. The owning human is exempt (and their close voids the token).
CREATE FUNCTION lease_fence_holds(lease_token_hash bytea, token_checked boolean, caller_endpoint uuid)
  RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT caller_endpoint IS NULL OR token_checked OR lease_token_hash IS NULL
$$;

-- A transition's hook outbox rows, held once for every statement that writes them: one per
-- configured URL when the transition writes an event (hook_event), with migration 0005's
-- payload; a dead letter's also carries the attempt that ended it and the exact attempt
-- summary (REQ-15), whose closing attempt that statement's own snapshot still sees open.
-- The closed_* arguments are null where no attempt closed. (The casts restate the argument
-- types for a reading of the body alone, as the plan test does.)
CREATE FUNCTION hook_rows(urls text[], occurred_at timestamptz, event text, id text, queue text, title text,
                          state todo_state, attempt integer, max_attempts integer, attempts_total integer,
                          endpoint_id uuid, attempts_pruned integer DEFAULT NULL,
                          pruned_outcomes jsonb DEFAULT NULL, closed_seq integer DEFAULT NULL,
                          closed_attempt integer DEFAULT NULL, closed_outcome text DEFAULT NULL,
                          closed_died boolean DEFAULT NULL, closed_summary text DEFAULT NULL,
                          closed_artifact text DEFAULT NULL)
  RETURNS TABLE (hook_event text, hook_url text, hook_todo_id text, hook_payload jsonb)
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT $3::text, h.url, $4::text,
         hook_payload($3::text, $2::timestamptz, $4::text, $5::text, $6::text, $7::todo_state, $8::integer,
                      $9::integer, $10::integer, $11::uuid)
         || CASE WHEN $3::text = 'todo.dead_lettered' THEN jsonb_build_object(
              'attempt', jsonb_build_object('seq', $14::integer, 'attempt', $15::integer, 'outcome', $16::text,
                                            'died', $17::boolean, 'summary', $18::text, 'artifact', $19::text),
              'attempts', attempt_summary($4::text, $10::integer, $12::integer, $13::jsonb, $14::integer, $16::text))
            ELSE '{}'::jsonb END
    FROM unnest($1::text[]) AS h(url)
   WHERE $3::text IS NOT NULL
$$;

-- The notification of a todo's transition on switchboard_v1 (board/live/fanout.py reads it),
-- its shape held once. Each statement still writes its own test of watchers before the call
-- (migration 0011): the statement must lock watchers while it is planned, before its
-- snapshot, which a test inside a function would do only when it runs.
CREATE FUNCTION todo_notify(id text, endpoint_id uuid, queue text, state todo_state, kind text) RETURNS void
  LANGUAGE sql VOLATILE AS $$
  SELECT pg_notify('switchboard_v1', json_build_object('todo', $1, 'endpoint', $2, 'queue', $3, 'state', $4,
                                                       'kind', $5)::text)
$$;
