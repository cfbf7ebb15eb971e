-- SPEC-0034 (attempt history on todos), REQ-17: one additive, transactional migration.
-- Creates the attempts table and its indexes, adds attempts_total and attempts_pruned to
-- todos, and opens one 'migrated' attempt for every todo that is claimed or interrupted
-- now (claimed_at from the todo's updated_at, the closest it records), so a lease in
-- flight across the upgrade closes normally. Terminal todos get no
-- backfilled history.

CREATE TYPE attempt_claimer_kind AS ENUM ('endpoint', 'owner');
CREATE TYPE attempt_outcome AS ENUM
  ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'canceled', 'revoked');
CREATE TYPE attempt_disposition AS ENUM ('done', 'retry_scheduled', 'dead_lettered', 'requeued', 'canceled');

ALTER TABLE todos
  ADD COLUMN attempts_total  integer NOT NULL DEFAULT 0 CHECK (attempts_total >= 0),
  ADD COLUMN attempts_pruned integer NOT NULL DEFAULT 0 CHECK (attempts_pruned >= 0);

CREATE TABLE attempts (
  todo_id             text NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
  seq                 integer NOT NULL CHECK (seq >= 1),
  attempt             integer NOT NULL CHECK (attempt >= 1),
  claimer_kind        attempt_claimer_kind NOT NULL,
  claimer_endpoint_id uuid,
  claimer_session     text,
  owner               text NOT NULL,
  claimant            text CHECK (octet_length(claimant) <= 128),
  claimed_at          timestamptz NOT NULL,
  last_heartbeat_at   timestamptz,
  lease_expires_at    timestamptz NOT NULL,
  ended_at            timestamptz,
  outcome             attempt_outcome,
  disposition         attempt_disposition,
  summary             text CHECK (octet_length(summary) <= 2048),
  summary_truncated   boolean NOT NULL DEFAULT false,
  artifact            text CHECK (octet_length(artifact) <= 512),
  lease_token_hash    bytea CHECK (lease_token_hash IS NULL OR length(lease_token_hash) = 32),
  PRIMARY KEY (todo_id, seq),
  CONSTRAINT attempts_closed_consistently
    CHECK ((ended_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (disposition IS NULL)),
  CONSTRAINT attempts_claimer_endpoint_matches_kind
    CHECK ((claimer_kind = 'endpoint') = (claimer_endpoint_id IS NOT NULL)),
  CONSTRAINT attempts_died_reported_nothing
    CHECK (outcome NOT IN ('lease_expired', 'reaped') OR (summary IS NULL AND artifact IS NULL)),
  -- REQ-2: at most one open attempt per todo, checked at commit. A partial unique index
  -- cannot be deferred; an exclusion constraint can.
  CONSTRAINT attempts_one_open_per_todo
    EXCLUDE USING btree (todo_id WITH =) WHERE (ended_at IS NULL) DEFERRABLE INITIALLY DEFERRED
);

INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, owner, claimant,
                      claimed_at, lease_expires_at)
SELECT t.id, 1, greatest(t.attempt, 1), 'endpoint', t.endpoint_id, t.owner, 'migrated',
       t.updated_at, coalesce(t.lease_expires_at, now())
  FROM todos t
 WHERE t.state IN ('claimed', 'input_required', 'auth_required');

UPDATE todos SET attempts_total = 1
 WHERE state IN ('claimed', 'input_required', 'auth_required');
