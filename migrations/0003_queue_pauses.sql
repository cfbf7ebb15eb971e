-- Pausing a queue, and what the Board's overview reads, as one additive migration.
--
-- queue_pauses: a human's paused queues. A pause of queue Q by human H holds for the todos
-- of every endpoint H owns in Q: agents claim nothing there (claim_next skips it, claim by
-- id is a conflict) until H resumes it, while the reaper and the retry scheduler run on as
-- ever. A row is a pause, so a claim probes this small table by its primary key.
--
-- The overview counts a human's todos by queue and state in one statement; with the queue,
-- state and retry time carried in the (endpoint_id, created_at, id) index, that is an
-- index-only scan per endpoint. The columns change only when the state changes, and every
-- such update already writes a new entry into each todos index (the partial indexes read
-- state), so no update that was heap-only stops being so. Its chart reads the attempts
-- closed in the last hour through a BRIN index on ended_at: a summary per range of pages,
-- which a claim or a close on the newest pages does not touch at all (a b-tree here was one
-- more index entry on every close, measurable on the claim bench, REQ-18). Attempts are
-- written in claim order and closed soon after, so their pages follow ended_at closely;
-- autosummarize keeps the ranges summarized as the table grows.

CREATE TABLE queue_pauses (
  user_id   bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  queue     text NOT NULL CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,64}$'),
  paused_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, queue)
);

DROP INDEX todos_endpoint_created_idx;
CREATE INDEX todos_endpoint_created_idx ON todos (endpoint_id, created_at DESC, id)
  INCLUDE (queue, state, next_retry_at);

CREATE INDEX attempts_ended_brin ON attempts USING brin (ended_at) WITH (autosummarize = on);
