-- A2A push notifications (docs/a2a.md): an A2A client's push notification configs for its
-- tasks (todos), and each status change of such a task written to the durable hook outbox
-- (hook_events) in the transaction of the transition, so it is delivered signed, retried,
-- from any server process, after a restart too (board/ops/hooks.py).
--
-- The outbox row is written by the todos_consistent trigger every state change already runs,
-- not by a trigger of its own: a row trigger of its own, even one whose WHEN is false, cost
-- REQ-18's claim and complete cycle 2.3 % more server instructions (its WHEN is compiled for
-- every statement, the old row fetched again). In todos_consistent a todo that never had a
-- config (todos.a2a_push false) pays one boolean test.

CREATE TABLE a2a_push_configs (
  todo_id          text NOT NULL REFERENCES todos (id) ON DELETE CASCADE,
  id               text NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
  -- the endpoint that set it (the A2A caller's credential)
  endpoint_id      uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  url              text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
  -- sent back as X-A2A-Notification-Token and Authorization: <scheme> <credentials>;
  -- write-only (reads return neither)
  token            text CHECK (length(token) <= 1024),
  auth_scheme      text CHECK (length(auth_scheme) <= 64),
  auth_credentials text CHECK (length(auth_credentials) <= 4096),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (todo_id, id)
);

-- Set once a todo has had a push config (never cleared: a todo whose configs were all
-- deleted pays the trigger's lookup and writes nothing).
ALTER TABLE todos ADD COLUMN a2a_push boolean NOT NULL DEFAULT false;

-- A push's row names its config: deleting the config (or the todo) drops its pushes not yet
-- delivered; delivery reads the config's URL, token and authentication when it sends.
ALTER TABLE hook_events ADD COLUMN push_todo_id text, ADD COLUMN push_config_id text,
  ADD CONSTRAINT hook_events_push_config_fk FOREIGN KEY (push_todo_id, push_config_id)
    REFERENCES a2a_push_configs (todo_id, id) ON DELETE CASCADE;
CREATE INDEX hook_events_push_config_idx ON hook_events (push_todo_id, push_config_id)
  WHERE push_todo_id IS NOT NULL;
ALTER TABLE hook_events DROP CONSTRAINT hook_events_event_check;
ALTER TABLE hook_events ADD CONSTRAINT hook_events_event_check
  CHECK (event IN ('todo.ready', 'todo.dead_lettered', 'todo.input_required', 'todo.auth_required',
                   'a2a.task_status'));

-- What a push says: the todo's state as the change left it, whether a failed todo is a dead
-- letter, its attempt count, its A2A contextId (migration 0020; null for a todo added
-- otherwise, whose contextId is its id), and when. Written before the row is (the trigger is a BEFORE
-- one), so what the same statement writes elsewhere (an interrupt's question) is added when
-- the push is sent: a2a_push_message.
CREATE FUNCTION a2a_push_payload(t todos, at timestamptz) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('occurred_at', at, 'todo', jsonb_build_object(
    'id', t.id, 'state', t.state, 'dead_letter', t.state = 'failed' AND t.next_retry_at IS NULL,
    'attempts_total', t.attempts_total, 'context_id', t.a2a_context))
$$;

-- A push's status message, read when it is sent: an interrupt's question (the latest its
-- attempt asked), a dead letter's last summary; null for any other push.
CREATE FUNCTION a2a_push_message(todo_id text, payload jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN $2::jsonb->'todo'->>'state' = 'input_required' THEN
      (SELECT jsonb_build_object('question', jsonb_build_object('seq', a.seq, 'text', q.text, 'choices', q.choices,
                                                                'asked_at', q.at))
         FROM attempts a JOIN attempt_notes q ON q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
        WHERE a.todo_id = $1 AND a.seq = ($2::jsonb->'todo'->>'attempts_total')::integer)
    WHEN ($2::jsonb->'todo'->>'dead_letter')::boolean THEN
      (SELECT jsonb_build_object('summary', a.summary) FROM attempts a
        WHERE a.todo_id = $1 AND a.seq = ($2::jsonb->'todo'->>'attempts_total')::integer)
  END
$$;

-- migration 0002's todos_consistent, with the pushes first: one outbox row per push config
-- of a todo whose state changes. The rest is as it was.
CREATE OR REPLACE FUNCTION todos_consistent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  rule text;
  why text;
BEGIN
  IF NEW.a2a_push THEN
    IF OLD.state IS DISTINCT FROM NEW.state THEN
      INSERT INTO hook_events (event, url, todo_id, payload, push_todo_id, push_config_id)
      SELECT 'a2a.task_status', c.url, c.todo_id, a2a_push_payload(NEW, now()), c.todo_id, c.id
        FROM a2a_push_configs c WHERE c.todo_id = NEW.id;
    END IF;
  END IF;
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
