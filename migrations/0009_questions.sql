-- An interrupt that asks a person something, and the person's answer, as notes of the open
-- attempt (additive: every existing note is kind working).
--
-- attempt_notes.kind: working (what note writes), question (interrupt's question, with its
-- choices and expiry), answer (the owning human's reply, with the choice taken and who gave
-- it), expired (written by the question sweep when a question expired unanswered and the
-- todo was released; its author_kind is the new claimer kind system). Questions, answers and
-- expiries are never pruned by the per-attempt cap: it deletes working notes only.
--
-- On attempts, the current interrupt (all NULL when the attempt has never been interrupted):
--   waiting_n            notes_count when the latest interrupt began; its answers are the
--                        answer notes numbered after it (NULL: never interrupted, so the
--                        attempt has only working notes).
--   asked_n              the number of the attempt's latest question note (kept after resume,
--                        so a later reader sees what was asked).
--   answered_at          the first answer to the current interrupt (NULL: none yet).
--   question_expires_at  when the current interrupt's question expires unanswered.
-- answered_at and question_expires_at are of the current interrupt: interrupt resets both,
-- resume clears them. All four are nullable with no default, so a claim's INSERT and a close evaluate nothing
-- new. The sweeps that act on them read interrupted todos through todos_interrupted_idx
-- (few wait at once), so no index is added to the attempts a claim writes.

ALTER TYPE attempt_claimer_kind ADD VALUE 'system';
CREATE TYPE attempt_note_kind AS ENUM ('working', 'question', 'answer', 'expired');
CREATE DOMAIN attempt_choice AS text CHECK (octet_length(VALUE) BETWEEN 1 AND 200);

ALTER TABLE attempt_notes
  ADD COLUMN kind       attempt_note_kind NOT NULL DEFAULT 'working',
  ADD COLUMN choices    jsonb,           -- a question's choices: an array of 1 to 10 strings
  ADD COLUMN expires_at timestamptz,     -- a question's expiry
  ADD COLUMN choice     attempt_choice,  -- the choice an answer took
  ADD COLUMN author     text,            -- who answered (the human's username)
  ADD CONSTRAINT attempt_notes_choices_check CHECK (
    choices IS NULL OR (jsonb_typeof(choices) = 'array' AND jsonb_array_length(choices) BETWEEN 1 AND 10));

ALTER TABLE attempts
  ADD COLUMN waiting_n           integer,
  ADD COLUMN asked_n             integer,
  ADD COLUMN answered_at         timestamptz,
  ADD COLUMN question_expires_at timestamptz;

-- An attempt's latest question as readers see it: what was asked, when, its choices and
-- expiry, every answer given after it (oldest first) and when it expired, if it did;
-- attempt_public adds current: the attempt is open and this is its latest interrupt's
-- question (so, while the todo is interrupted, the question waiting for an answer).
CREATE FUNCTION attempt_question(todo_id text, seq integer, asked_n integer) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('text', q.text, 'truncated', q.truncated, 'asked_at', q.at,
    'choices', q.choices, 'expires_at', q.expires_at,
    'answers', coalesce((SELECT json_agg(json_build_object('text', x.text, 'choice', x.choice, 'who', x.author,
                                                           'at', x.at) ORDER BY x.n)
                           FROM attempt_notes x
                          WHERE x.todo_id = $1 AND x.seq = $2 AND x.n > $3 AND x.kind = 'answer'), '[]'::json),
    'expired_at', (SELECT min(x.at) FROM attempt_notes x
                    WHERE x.todo_id = $1 AND x.seq = $2 AND x.n > $3 AND x.kind = 'expired'))
    FROM attempt_notes q WHERE q.todo_id = $1 AND q.seq = $2 AND q.n = $3
$$;

CREATE OR REPLACE FUNCTION attempt_public(a attempts) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT json_build_object('seq', a.seq, 'attempt', a.attempt,
    'claimer_kind', a.claimer_kind, 'claimant', a.claimant, 'claimed_at', a.claimed_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'lease_expires_at', a.lease_expires_at,
    'ended_at', a.ended_at, 'outcome', a.outcome, 'disposition', a.disposition,
    'died', attempt_died(a.outcome),
    'summary', a.summary, 'summary_truncated', a.summary_truncated, 'artifact', a.artifact,
    'notes_count', coalesce(a.notes_count, 0), 'notes_pruned', coalesce(a.notes_pruned, 0),
    'last_note_at', a.last_note_at,
    'usage', CASE WHEN num_nonnulls(a.input_tokens, a.output_tokens, a.cost_usd, a.model) > 0 THEN
      json_build_object('input_tokens', a.input_tokens, 'output_tokens', a.output_tokens,
                        'cost_usd', a.cost_usd, 'model', a.model) END,
    'question', CASE WHEN a.asked_n IS NOT NULL THEN (attempt_question(a.todo_id, a.seq, a.asked_n)::jsonb
      || jsonb_build_object('current', a.outcome IS NULL AND a.asked_n > a.waiting_n))::json END)
$$;

-- A note as readers see it: its kind always; a question's choices and expiry, an answer's
-- choice and who gave it, only on those kinds.
CREATE OR REPLACE FUNCTION attempt_notes_newest(todo_id text, seq integer, n integer) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT coalesce(json_agg((jsonb_build_object('at', x.at, 'text', x.text, 'truncated', x.truncated,
                                               'author_kind', x.author_kind, 'kind', x.kind)
      || CASE x.kind WHEN 'question' THEN jsonb_build_object('choices', x.choices, 'expires_at', x.expires_at)
                     WHEN 'answer' THEN jsonb_build_object('choice', x.choice, 'who', x.author)
                     ELSE '{}'::jsonb END)::json ORDER BY x.n DESC), '[]'::json)
    FROM (SELECT w.n, w.at, w.text, w.truncated, w.author_kind, w.kind, w.choices, w.expires_at, w.choice, w.author
            FROM attempt_notes w
           WHERE w.todo_id = $1 AND w.seq = $2 ORDER BY w.n DESC LIMIT $3) x
$$;

-- The notes the per-attempt cap has deleted once the newest is numbered `count`: the
-- working notes numbered at or below count - max (the cap keeps questions, answers and
-- expiries; waiting_n is NULL on an attempt never interrupted, which needs no lookup).
CREATE FUNCTION attempt_notes_pruned(todo_id text, seq integer, count integer, max integer, waiting_n integer)
RETURNS integer LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT greatest($3::integer - $4::integer, 0) - CASE WHEN $5 IS NULL OR $3::integer <= $4::integer THEN 0 ELSE
    (SELECT count(*)::integer FROM attempt_notes x
      WHERE x.todo_id = $1 AND x.seq = $2 AND x.n <= $3::integer - $4::integer AND x.kind <> 'working') END
$$;

-- An interrupt asks for a person through the durable notify hooks too.
ALTER TABLE hook_events DROP CONSTRAINT hook_events_event_check;
ALTER TABLE hook_events ADD CONSTRAINT hook_events_event_check
  CHECK (event IN ('todo.ready', 'todo.dead_lettered', 'todo.input_required', 'todo.auth_required'));
