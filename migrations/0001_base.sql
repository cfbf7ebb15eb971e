-- The base schema as it stood before SPEC-0034: users who sign in to the Board, the
-- endpoints (vended credentials) they own, and the todos those endpoints own (ADR-0022).
-- The lifecycle of SPEC-0003 is held by the database too: an enum for state and CHECKs
-- tying the holder and lease columns to it.

CREATE TYPE todo_state AS ENUM
  ('pending', 'claimed', 'input_required', 'auth_required', 'done', 'failed', 'canceled');

CREATE TABLE users (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  username      text NOT NULL UNIQUE CHECK (username ~ '^[A-Za-z0-9_.@-]{1,64}$'),
  password_hash text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE endpoints (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name         text NOT NULL,
  agent_id     text NOT NULL CHECK (agent_id ~ '^[A-Za-z0-9_.:/-]{1,128}$'),
  token_hash   bytea NOT NULL UNIQUE,
  scope        text[] NOT NULL,
  queues       text[] NOT NULL CHECK (cardinality(queues) > 0),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX endpoints_user_idx ON endpoints (user_id);

CREATE TABLE todos (
  id               text PRIMARY KEY DEFAULT gen_random_uuid()::text,
  endpoint_id      uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  queue            text NOT NULL CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  title            text NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
  payload          jsonb NOT NULL DEFAULT '{}'::jsonb,
  routing          jsonb NOT NULL DEFAULT '{}'::jsonb,
  state            todo_state NOT NULL DEFAULT 'pending',
  owner            text,
  lease_expires_at timestamptz,
  attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_attempts     integer NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 1000),
  result           jsonb,
  next_retry_at    timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT todos_holder_matches_state
    CHECK ((state IN ('claimed', 'input_required', 'auth_required')) = (owner IS NOT NULL)),
  CONSTRAINT todos_claim_has_lease
    CHECK (state <> 'claimed' OR lease_expires_at IS NOT NULL),
  CONSTRAINT todos_retry_only_when_failed
    CHECK (next_retry_at IS NULL OR state = 'failed')
);

-- claim_next walks only pending rows, oldest first, never past finished history. An
-- endpoint's todos are all in its granted queues, so the queue is a filter, not a key.
CREATE INDEX todos_pending_idx ON todos (endpoint_id, created_at, id) WHERE state = 'pending';
-- The reaper and lease takeover look at claimed rows only; lease_expires_at stays out of
-- every index so a heartbeat's update can stay heap-only.
CREATE INDEX todos_claimed_idx ON todos (endpoint_id) WHERE state = 'claimed';
CREATE INDEX todos_retry_idx ON todos (next_retry_at) WHERE state = 'failed' AND next_retry_at IS NOT NULL;
-- The Board and list_todos read an endpoint's todos newest first.
CREATE INDEX todos_endpoint_created_idx ON todos (endpoint_id, created_at DESC, id);
-- Retention: a summarizing index, so it never blocks heap-only updates.
CREATE INDEX todos_updated_brin ON todos USING brin (updated_at);
