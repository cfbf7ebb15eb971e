-- SPEC-0034, attempt history on todos, as one additive, transactional migration (REQ-17).
--
-- Adds: the attempts table, reachable only through its todo; the todo's attempt counters
-- (attempts_total, attempts_pruned, and pruned_outcomes, the exact per-outcome counts of
-- attempts the per-todo cap deleted); the durable outbox of notify hooks; and the SQL
-- functions that give an attempt its public shape. Every todo claimed or interrupted at
-- the time of the upgrade gets one open 'migrated' attempt, so a lease in flight closes
-- normally afterwards; finished todos get no backfilled history.
--
-- Where each rule is held, and why it is held there, is in docs/schema.md: the per-column
-- bounds of an attempt are domains, the lifecycle rules of todos are row triggers, and the
-- attempts' three cross-column rules are held by board/store.py.

CREATE TYPE attempt_claimer_kind AS ENUM ('endpoint', 'owner');
CREATE TYPE attempt_outcome AS ENUM
  ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled', 'revoked');
CREATE TYPE attempt_disposition AS ENUM ('done', 'retry_scheduled', 'dead_lettered', 'requeued', 'canceled');

CREATE DOMAIN attempt_number AS integer CHECK (VALUE >= 1);
CREATE DOMAIN attempt_claimant AS text CHECK (octet_length(VALUE) <= 128);
CREATE DOMAIN attempt_summary AS text CHECK (octet_length(VALUE) <= 2048);
CREATE DOMAIN attempt_artifact AS text CHECK (octet_length(VALUE) <= 512);
CREATE DOMAIN lease_token_sha256 AS bytea CHECK (length(VALUE) = 32);

-- Todo ids are opaque keys: compared byte by byte, never by the locale.
ALTER TABLE todos ALTER COLUMN id TYPE text COLLATE "C";

-- The todos table's CHECK constraints become the row triggers below: the same rules, the
-- same SQLSTATE (23514) and constraint names, checked only when a statement sets a column
-- they read.
ALTER TABLE todos
  DROP CONSTRAINT todos_queue_check,
  DROP CONSTRAINT todos_title_check,
  DROP CONSTRAINT todos_max_attempts_check,
  DROP CONSTRAINT todos_attempt_check,
  DROP CONSTRAINT todos_holder_matches_state,
  DROP CONSTRAINT todos_claim_has_lease,
  DROP CONSTRAINT todos_retry_only_when_failed,
  ADD COLUMN attempts_total  integer NOT NULL DEFAULT 0,
  ADD COLUMN attempts_pruned integer NOT NULL DEFAULT 0,
  ADD COLUMN pruned_outcomes jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE attempts (
  todo_id             text COLLATE "C" NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
  seq                 attempt_number NOT NULL,
  attempt             attempt_number NOT NULL,
  claimer_kind        attempt_claimer_kind NOT NULL,
  claimer_endpoint_id uuid,
  claimer_session     text,
  owner               text NOT NULL,
  claimant            attempt_claimant,
  claimed_at          timestamptz NOT NULL,
  last_heartbeat_at   timestamptz,
  lease_expires_at    timestamptz NOT NULL,
  ended_at            timestamptz,
  outcome             attempt_outcome,
  disposition         attempt_disposition,
  summary             attempt_summary,
  summary_truncated   boolean NOT NULL DEFAULT false,
  artifact            attempt_artifact,
  lease_token_hash    lease_token_sha256,
  PRIMARY KEY (todo_id, seq),
  -- REQ-2: at most one open attempt per todo, checked at commit. A partial unique index
  -- cannot be deferred; an exclusion constraint can.
  CONSTRAINT attempts_one_open_per_todo
    EXCLUDE USING btree (todo_id WITH =) WHERE (ended_at IS NULL) DEFERRABLE INITIALLY DEFERRED
);

-- Durable notify hooks (SPEC-0024, REQ-15, REQ-16): a transition that makes a todo ready
-- or dead-letters it writes one row per configured URL in its own transaction; delivery
-- leases due rows (SKIP LOCKED) after commit. The id is the event id receivers
-- de-duplicate on. No foreign key to todos: an event outlives its todo's retention.
CREATE TABLE hook_events (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  event           text NOT NULL CHECK (event IN ('todo.ready', 'todo.dead_lettered')),
  url             text NOT NULL,
  todo_id         text COLLATE "C" NOT NULL,
  payload         jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  tries           integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  last_error      text
);
CREATE INDEX hook_events_due_idx ON hook_events (next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX hook_events_delivered_brin ON hook_events USING brin (delivered_at);

-- An attempt as agents and the Board see it (REQ-7, REQ-8); never the lease token hash,
-- the claimer's session or endpoint. One expression, so the planner inlines it. STABLE: a
-- timestamptz turns into JSON in the session's time zone.
CREATE FUNCTION attempt_public(a attempts) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('seq', a.seq, 'attempt', a.attempt,
    'claimer_kind', a.claimer_kind, 'claimant', a.claimant, 'claimed_at', a.claimed_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'lease_expires_at', a.lease_expires_at,
    'ended_at', a.ended_at, 'outcome', a.outcome, 'disposition', a.disposition,
    'died', coalesce(a.outcome IN ('lease_expired', 'reaped'), false),
    'summary', a.summary, 'summary_truncated', a.summary_truncated, 'artifact', a.artifact)
$$;

-- A claim's prior attempts: the n newest closed attempts of a todo, newest first ('[]'
-- when there are none). The claim calls it only for a todo claimed before.
CREATE FUNCTION attempt_prior(todo_id text, n integer) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json)
    FROM (SELECT a.seq, attempt_public(a) AS j FROM attempts a
           WHERE a.todo_id = $1 AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT $2) x
$$;

-- The todos table's rules (SPEC-0003's lifecycle, and the new counters never negative).
CREATE FUNCTION todos_fields_valid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.queue !~ '^[A-Za-z0-9_.:-]{1,64}$' THEN
    RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_queue_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_queue_check', TABLE = 'todos',
            DETAIL = 'queue must be 1-64 of letters, digits, _ . : -';
  ELSIF length(NEW.title) NOT BETWEEN 1 AND 500 THEN
    RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_title_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_title_check', TABLE = 'todos',
            DETAIL = 'title must be 1 to 500 characters';
  ELSIF NEW.max_attempts NOT BETWEEN 1 AND 1000 THEN
    RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_max_attempts_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_max_attempts_check', TABLE = 'todos',
            DETAIL = 'max_attempts must be from 1 to 1000';
  END IF;
  RETURN NEW;
END
$$;

CREATE FUNCTION todos_consistent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  rule text;
  why text;
BEGIN
  -- The common rows first, each state's test apart: PL/pgSQL prepares each condition it
  -- evaluates once per transaction, so the shorter the conditions taken, the cheaper the row.
  IF NEW.attempt >= 0 AND NEW.attempts_total >= 0 AND NEW.attempts_pruned >= 0 THEN
    IF NEW.state = 'claimed' THEN
      IF NEW.owner IS NOT NULL AND NEW.lease_expires_at IS NOT NULL AND NEW.next_retry_at IS NULL THEN
        RETURN NEW;
      END IF;
    ELSIF NEW.owner IS NULL THEN
      IF NEW.state <> 'input_required' AND NEW.state <> 'auth_required'
         AND (NEW.next_retry_at IS NULL OR NEW.state = 'failed') THEN
        RETURN NEW;
      END IF;
    ELSIF (NEW.state = 'input_required' OR NEW.state = 'auth_required') AND NEW.next_retry_at IS NULL THEN
      RETURN NEW;
    END IF;
  END IF;
  IF NEW.attempt IS NULL OR NEW.attempts_total IS NULL OR NEW.attempts_pruned IS NULL OR NEW.state IS NULL THEN
    RETURN NEW;  -- the NOT NULL constraint refuses the row
  END IF;
  IF NEW.attempt < 0 THEN
    rule := 'todos_attempt_check'; why := 'attempt must not be negative';
  ELSIF NEW.attempts_total < 0 THEN
    rule := 'todos_attempts_total_check'; why := 'attempts_total must not be negative';
  ELSIF NEW.attempts_pruned < 0 THEN
    rule := 'todos_attempts_pruned_check'; why := 'attempts_pruned must not be negative';
  ELSIF (NEW.state IN ('claimed', 'input_required', 'auth_required')) <> (NEW.owner IS NOT NULL) THEN
    rule := 'todos_holder_matches_state';
    why := 'owner must be set exactly when the state is claimed, input_required or auth_required';
  ELSIF NEW.state = 'claimed' AND NEW.lease_expires_at IS NULL THEN
    rule := 'todos_claim_has_lease'; why := 'a claimed todo must have lease_expires_at';
  ELSE
    rule := 'todos_retry_only_when_failed'; why := 'next_retry_at may be set only on a failed todo';
  END IF;
  RAISE EXCEPTION 'new row for relation "todos" violates check constraint "%"', rule
    USING ERRCODE = 'check_violation', CONSTRAINT = rule, TABLE = 'todos', DETAIL = why;
END
$$;

-- A rule can only be broken by a statement that sets a column it reads.
CREATE TRIGGER todos_fields_valid BEFORE INSERT OR UPDATE OF queue, title, max_attempts ON todos
  FOR EACH ROW EXECUTE FUNCTION todos_fields_valid();
CREATE TRIGGER todos_consistent
  BEFORE INSERT OR UPDATE OF state, owner, lease_expires_at, next_retry_at, attempt, attempts_total, attempts_pruned
  ON todos FOR EACH ROW EXECUTE FUNCTION todos_consistent();

-- REQ-17: the leases in flight get their open attempt.
INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant,
                      claimed_at, lease_expires_at)
SELECT t.id, 1, greatest(t.attempt, 1), 'endpoint', t.endpoint_id, t.owner, 'migrated',
       t.updated_at, coalesce(t.lease_expires_at, now())
  FROM todos t
 WHERE t.state IN ('claimed', 'input_required', 'auth_required');

UPDATE todos SET attempts_total = 1
 WHERE state IN ('claimed', 'input_required', 'auth_required');
