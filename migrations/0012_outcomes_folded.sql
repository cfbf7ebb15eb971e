-- The charts' read bounded: closed attempts folded into attempt_outcome_counts behind a
-- watermark. Before, the week's chart read every attempt of the human's todos closed in the
-- week, so its cost grew with the closes (a steady 100 a second is 60 million attempts a
-- week), and the live overview reads it every two seconds while todos change.
--
-- Now a sweep counts the attempts closed before a watermark into attempt_outcome_counts (by
-- endpoint, five-minute bucket, queue and outcome, as 0007 counts deleted ones) and moves
-- the watermark on, in one transaction. A chart reads the counts plus the attempts closed
-- at or after the watermark: the last ten seconds'. Each closed attempt is still in exactly
-- one of the two:
--   - closed before the watermark: counted by the fold, whether it was deleted since or not,
--     so the deletion triggers below count only attempts closed at or after it;
--   - closed at or after it: counted when it is deleted, as before.
--
-- A close that commits late: a close's ended_at is its transaction's start, and the fold
-- never moves the watermark past the start of a transaction still running in the database
-- (pg_stat_activity.xact_start, visible for the sessions of the server's own role), nor
-- closer than ten seconds to now (a backend shows its start a moment after it takes it),
-- so no attempt can commit later with an ended_at behind it.
--
-- A delete racing the fold: a deleting transaction takes the advisory lock below shared
-- before it reads the watermark, and the fold takes it exclusive before it reads the
-- attempts. Whichever comes second waits for the other to commit and then reads what it
-- wrote (read committed: each statement of a trigger takes a fresh snapshot): a fold after
-- a delete no longer sees the deleted attempts, a delete after a fold sees the new
-- watermark and leaves the folded attempts to the fold's count.
--
-- The close itself is unchanged: counting at close cost the claim_next + complete cycle 4%
-- at one worker and 10% at eight (0007's header). The lock's key is 0x5B0A_0012.

CREATE TABLE attempt_outcomes_folded (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  -- Every attempt closed before this is in attempt_outcome_counts; none closed at or after it
  -- is there unless it was deleted. Nothing is folded yet: the first fold starts eight days
  -- back (the charts' longest window with a day to spare, as the counts' pruning keeps).
  before timestamptz NOT NULL
);
INSERT INTO attempt_outcomes_folded (before) VALUES ('-infinity');

CREATE OR REPLACE FUNCTION todos_count_deleted_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(x'5B0A0012'::bigint);
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT OLD.endpoint_id, outcome_bucket(a.ended_at), OLD.queue, a.outcome, count(*)
    FROM attempts a
   WHERE a.todo_id = OLD.id AND a.outcome IS NOT NULL
     AND a.ended_at >= (SELECT f.before FROM attempt_outcomes_folded f)
   GROUP BY 2, 4
   ORDER BY 2, 4
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + excluded.n;
  RETURN OLD;
END
$$;

CREATE OR REPLACE FUNCTION attempts_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(x'5B0A0012'::bigint);
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT t.endpoint_id, outcome_bucket(OLD.ended_at), t.queue, OLD.outcome, 1
    FROM todos t
   WHERE t.id = OLD.todo_id AND OLD.ended_at >= (SELECT f.before FROM attempt_outcomes_folded f)
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + 1;
  RETURN NULL;
END
$$;
