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
