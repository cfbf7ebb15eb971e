-- A2A push notifications (docs/a2a.md): an A2A client's push notification configs for its
-- tasks (todos), and each status change of such a task written to the durable hook outbox
-- (hook_events) in the transaction of the transition, so it is delivered signed, retried,
-- from any server process, after a restart too (board/ops/hooks.py).
--
-- The outbox row is written by a trigger on todos rather than by every transition's
-- statement. Its WHEN reads only the row's own columns: todos.a2a_push, set when a push
-- config is first created for the todo, and the state. A todo that never had one (every
-- todo of REQ-18's claim and complete cycle) pays a boolean test and no function call.

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

-- What a push says: the todo's state as the transition left it, whether a failed todo is a
-- dead letter, its attempt count, and when; an interrupt's question (its status message), a
-- dead letter's last summary. The same the task's reader gets; never a token or an answer.
CREATE FUNCTION a2a_push_payload(t todos, at timestamptz) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('occurred_at', at, 'todo', jsonb_build_object(
    'id', t.id, 'state', t.state, 'dead_letter', t.state = 'failed' AND t.next_retry_at IS NULL,
    'attempts_total', t.attempts_total),
    'question', CASE WHEN t.state = 'input_required' THEN
      (SELECT jsonb_build_object('seq', a.seq, 'text', q.text, 'choices', q.choices, 'asked_at', q.at)
         FROM attempts a JOIN attempt_notes q ON q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
        WHERE a.todo_id = t.id AND a.seq = t.attempts_total) END,
    'summary', CASE WHEN t.state = 'failed' AND t.next_retry_at IS NULL THEN
      (SELECT a.summary FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total) END)
$$;

-- One outbox row per push config of a todo whose state changed.
CREATE FUNCTION todos_a2a_push() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO hook_events (event, url, todo_id, payload, push_todo_id, push_config_id)
  SELECT 'a2a.task_status', c.url, c.todo_id, a2a_push_payload(NEW, now()), c.todo_id, c.id
    FROM a2a_push_configs c WHERE c.todo_id = NEW.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER todos_a2a_push AFTER UPDATE OF state ON todos FOR EACH ROW
  WHEN (NEW.a2a_push AND OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION todos_a2a_push();
