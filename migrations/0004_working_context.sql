-- Working context that outlives the worker, as one additive migration: notes on an attempt,
-- continuation chains of todos, and usage per attempt.
--
-- attempt_notes: what a worker (or the owning human) wrote while an attempt was open. A note
-- belongs to its attempt and goes with it (ON DELETE CASCADE: an attempt pruned by the
-- per-todo cap, or deleted with its todo, takes its notes along, REQ-11). Numbered within
-- the attempt from 1; the oldest past the per-attempt cap are deleted in the transaction
-- that adds the newest, and counted on the attempt (notes_pruned), so notes_count stays the
-- number ever written. last_note_at is activity for derived liveness; nothing about
-- liveness itself is stored.
--
-- Usage: the closing verb's report of tokens, cost and model, on the attempt it closes.
-- todos.pruned_usage folds in the usage of attempts the per-todo cap deleted (like
-- pruned_outcomes), so a todo's totals stay exact; NULL while nothing with usage was pruned.
--
-- continues_id: the todo this one continues; it never changes after insert (trigger
-- todos_continues_fixed). At most one todo continues any todo: todo_successors holds one row
-- per continued todo (its primary key todos_one_successor), written by the statement that adds
-- the successor. Kept beside todos rather than as an index or a foreign key on todos: either
-- would cost every claim and complete (each updates a todos row) for the few todos that are
-- continued (bench/attempt_instructions.py). Retention deletes a todo's successor rows with it;
-- a successor's continues_id may then name a todo that no longer exists.
--
-- Every new column is nullable with no default, so a claim or a complete that uses none of
-- this evaluates no new check. The usage columns are of the domains' base types: an INSERT
-- checks a domain column it leaves out (a NULL coerced to the domain), which every claim's
-- new attempt would pay; the close statements that write usage cast each value to its domain
-- (attempt_tokens, attempt_cost_usd, attempt_model), so the bounds hold for every value
-- written. The trigger fires only for an UPDATE that names continues_id.

CREATE DOMAIN attempt_note_text AS text CHECK (octet_length(VALUE) BETWEEN 1 AND 2048);
CREATE DOMAIN attempt_tokens AS bigint CHECK (VALUE BETWEEN 0 AND 1000000000000);
CREATE DOMAIN attempt_cost_usd AS numeric(18, 6) CHECK (VALUE BETWEEN 0 AND 1000000000);
CREATE DOMAIN attempt_model AS text CHECK (octet_length(VALUE) BETWEEN 1 AND 128);

CREATE TABLE attempt_notes (
  todo_id     text COLLATE "C" NOT NULL,
  seq         attempt_number NOT NULL,
  n           integer NOT NULL CHECK (n >= 1),
  at          timestamptz NOT NULL,
  author_kind attempt_claimer_kind NOT NULL,
  text        attempt_note_text NOT NULL,
  truncated   boolean NOT NULL DEFAULT false,
  PRIMARY KEY (todo_id, seq, n),
  FOREIGN KEY (todo_id, seq) REFERENCES attempts (todo_id, seq) ON DELETE CASCADE
);

ALTER TABLE attempts
  ADD COLUMN notes_count   integer,  -- notes ever written on this attempt (NULL: none)
  ADD COLUMN notes_pruned  integer,  -- of those, deleted past the cap (NULL: none)
  ADD COLUMN last_note_at  timestamptz,
  ADD COLUMN input_tokens  bigint,         -- each written as its domain (attempt_tokens, ...)
  ADD COLUMN output_tokens bigint,         -- by the close statements that take usage
  ADD COLUMN cost_usd      numeric(18, 6),
  ADD COLUMN model         text;

ALTER TABLE todos
  ADD COLUMN continues_id text COLLATE "C",
  ADD COLUMN pruned_usage jsonb;  -- {"input_tokens", "output_tokens", "cost_usd"} summed

CREATE TABLE todo_successors (
  todo_id      text COLLATE "C" NOT NULL,  -- the continued todo
  successor_id text COLLATE "C" NOT NULL,  -- the todo that continues it (its continues_id)
  CONSTRAINT todos_one_successor PRIMARY KEY (todo_id)
);
CREATE INDEX todo_successors_successor_idx ON todo_successors (successor_id);

CREATE FUNCTION todos_continues_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'new row for relation "todos" violates check constraint "todos_continues_fixed"'
    USING ERRCODE = 'check_violation', CONSTRAINT = 'todos_continues_fixed', TABLE = 'todos',
          DETAIL = 'continues_id never changes after insert';
END
$$;
CREATE TRIGGER todos_continues_fixed BEFORE UPDATE OF continues_id ON todos
  FOR EACH ROW WHEN (OLD.continues_id IS DISTINCT FROM NEW.continues_id)
  EXECUTE FUNCTION todos_continues_fixed();

-- An attempt as agents and the Board see it, now with its notes' counters, the time of its
-- last note, and `usage`: what the closing verb reported, or null when it reported nothing.
CREATE OR REPLACE FUNCTION attempt_public(a attempts) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('seq', a.seq, 'attempt', a.attempt,
    'claimer_kind', a.claimer_kind, 'claimant', a.claimant, 'claimed_at', a.claimed_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'lease_expires_at', a.lease_expires_at,
    'ended_at', a.ended_at, 'outcome', a.outcome, 'disposition', a.disposition,
    'died', coalesce(a.outcome IN ('lease_expired', 'reaped'), false),
    'summary', a.summary, 'summary_truncated', a.summary_truncated, 'artifact', a.artifact,
    'notes_count', coalesce(a.notes_count, 0), 'notes_pruned', coalesce(a.notes_pruned, 0),
    'last_note_at', a.last_note_at,
    'usage', CASE WHEN num_nonnulls(a.input_tokens, a.output_tokens, a.cost_usd, a.model) > 0 THEN
      json_build_object('input_tokens', a.input_tokens, 'output_tokens', a.output_tokens,
                        'cost_usd', a.cost_usd, 'model', a.model) END)
$$;

-- An attempt's n newest notes, newest first ('[]' when none): a walk of the primary key.
CREATE FUNCTION attempt_notes_newest(todo_id text, seq integer, n integer) RETURNS json
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(json_agg(json_build_object('at', x.at, 'text', x.text, 'truncated', x.truncated,
                                             'author_kind', x.author_kind) ORDER BY x.n DESC), '[]'::json)
    FROM (SELECT w.n, w.at, w.text, w.truncated, w.author_kind FROM attempt_notes w
           WHERE w.todo_id = $1 AND w.seq = $2 ORDER BY w.n DESC LIMIT $3) x
$$;

-- The public attempt with its n newest notes (the attempt entries of a claim's prior_attempts
-- and of get_todo). An attempt with no notes never looks the notes up.
CREATE FUNCTION attempt_public_notes(a attempts, n integer) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT (attempt_public(a)::jsonb || jsonb_build_object('notes',
            CASE WHEN a.notes_count IS NULL OR $2 = 0 THEN '[]'::json
                 ELSE attempt_notes_newest(a.todo_id, a.seq, $2) END))::json
$$;

-- A claim's prior attempts, each with its 3 newest notes (board/vocabulary.py PRIOR_NOTES).
CREATE OR REPLACE FUNCTION attempt_prior(todo_id text, n integer) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json)
    FROM (SELECT a.seq, attempt_public_notes(a, 3) AS j FROM attempts a
           WHERE a.todo_id = $1 AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT $2) x
$$;

-- What a claim of a continuing todo returns beside it: the predecessor (of the same
-- endpoint) with its id, state, result, attempts_total and its last closed attempt. The
-- claim calls it only for a todo whose continues_id is set, so a claim of any other todo
-- sets up nothing for it.
CREATE FUNCTION todo_continuation(pred_id text, endpoint uuid) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('id', p.id, 'state', p.state,
    'dead_letter', (p.state = 'failed' AND p.next_retry_at IS NULL), 'result', p.result,
    'attempts_total', p.attempts_total,
    'last_attempt', (SELECT attempt_public_notes(a, 3) FROM attempts a
                      WHERE a.todo_id = p.id AND a.ended_at IS NOT NULL ORDER BY a.seq DESC LIMIT 1))
    FROM todos p WHERE p.id = $1 AND p.endpoint_id = $2
$$;
