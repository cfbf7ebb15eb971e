-- The todos counted in a form that does not grow with history, so the Board's overview and
-- /metrics read a few rows however many todos have ended, without a write on the claim or
-- the complete (REQ-18's cycle).
--
-- Live todos (pending, claimed, waiting for a person, waiting out a retry) are few and are
-- counted where they are, through their partial indexes. Per endpoint and queue,
-- todo_counts holds how many todos there are (all), and how many are canceled and dead
-- letters, each moved in the transaction that moves it: the triggers below count every added
-- todo and take back every deleted one (a human's delete, retention, an endpoint's cascade),
-- one row per key for the whole statement; the statements that cancel (closes.sql's
-- todo_cancel_*) count canceled, those that dead-letter (todo_fail*, the reaper's
-- attempts_reap_lapsed, endpoint_revoke) count dead, and a retried dead letter (todo_retry*)
-- takes its dead back. Done is what is left: all, less the live, canceled and dead. A claim
-- and a complete change no count, so they write nothing here (a row trigger on the state's
-- update was not used: its WHEN clause would be evaluated by every claim and complete).
--
-- The rows are signed deltas, not one row per key: appending takes no row lock, so adds,
-- deletes and cancels of one queue never wait on each other here. The counts sweep
-- (sweeps.sql's todo_counts_compact, on the reaper's period) folds each key's rows into one.
-- No foreign key: an endpoint's deletion cascades to its todos, whose deltas then sum to
-- zero and are dropped by the next fold.

CREATE TYPE todo_count_kind AS ENUM ('all', 'canceled', 'dead');

CREATE TABLE todo_counts (
  endpoint_id uuid NOT NULL,
  queue text COLLATE "C" NOT NULL,
  kind todo_count_kind NOT NULL,
  n bigint NOT NULL
);
CREATE INDEX todo_counts_endpoint_idx ON todo_counts (endpoint_id);

INSERT INTO todo_counts (endpoint_id, queue, kind, n)
SELECT t.endpoint_id, t.queue, k.kind, count(*)
  FROM todos t
 CROSS JOIN LATERAL (VALUES ('all'::todo_count_kind), ('canceled'), ('dead')) k(kind)
 WHERE k.kind = 'all' OR (k.kind = 'canceled' AND t.state = 'canceled')
    OR (k.kind = 'dead' AND todo_dead_letter(t.state, t.next_retry_at))
 GROUP BY 1, 2, 3;

-- Added todos, whatever added them (an add, a continuation, add_todos).
CREATE FUNCTION todos_count_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT a.endpoint_id, a.queue, 'all', count(*) FROM added a GROUP BY 1, 2;
  RETURN NULL;
END
$$;

CREATE TRIGGER todos_count_added AFTER INSERT ON todos REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION todos_count_added();

-- Deleted todos, whatever deleted them: their counts taken back.
CREATE FUNCTION todos_uncount_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT g.endpoint_id, g.queue, k.kind, -count(*)
    FROM gone g
   CROSS JOIN LATERAL (VALUES ('all'::todo_count_kind), ('canceled'), ('dead')) k(kind)
   WHERE k.kind = 'all' OR (k.kind = 'canceled' AND g.state = 'canceled')
      OR (k.kind = 'dead' AND todo_dead_letter(g.state, g.next_retry_at))
   GROUP BY 1, 2, 3;
  RETURN NULL;
END
$$;

CREATE TRIGGER todos_uncount_deleted AFTER DELETE ON todos REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION todos_uncount_deleted();
