-- Durable notify hooks (SPEC-0024; SPEC-0034 REQ-15 and REQ-16's notify-hook half).
-- A transition that makes a todo ready or dead-letters it writes one row here per
-- configured hook URL, in the same transaction, so a crash between commit and delivery
-- loses nothing. A delivery worker in any server process leases due rows (SKIP LOCKED),
-- POSTs them signed, and marks them delivered or schedules a retry with backoff. The id
-- is the stable event id receivers de-duplicate on. No foreign key to todos: an event
-- outlives its todo's retention.

CREATE TABLE hook_events (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  event           text NOT NULL CHECK (event IN ('todo.ready', 'todo.dead_lettered')),
  url             text NOT NULL,
  todo_id         text NOT NULL,
  payload         jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  tries           integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  last_error      text
);

CREATE INDEX hook_events_due_idx ON hook_events (next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX hook_events_delivered_brin ON hook_events USING brin (delivered_at);
