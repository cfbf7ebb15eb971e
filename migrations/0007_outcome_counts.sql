-- The closed attempts that are gone, counted, so the Board's charts (the last hour, day and
-- week) stay exact: the per-todo history cap prunes attempts and retention (or a human)
-- deletes ended todos with theirs, and a chart that counted only the attempt rows went down
-- as they went. A chart reads the attempts that are there plus these counts: each closed
-- attempt is in exactly one of the two, since the statement that deletes it counts it, in
-- its own transaction (the triggers below).
--
-- Counting at deletion rather than at close keeps the claim and the close as they were:
-- a count written by every close (a row trigger upserting a per-queue counter) cost the
-- claim_next + complete cycle 4% at one worker and 10% at eight, side by side
-- (docs/performance.md), which REQ-18's floor cannot spare. Deletions are rarer: a claim
-- past the history cap, retention's batches, a human's delete.
CREATE TABLE attempt_outcome_counts (
  endpoint_id uuid NOT NULL,
  bucket timestamptz NOT NULL,
  queue text COLLATE "C" NOT NULL,
  outcome attempt_outcome NOT NULL,
  n bigint NOT NULL CHECK (n > 0),
  PRIMARY KEY (endpoint_id, bucket, queue, outcome)
);

-- The start of the five-minute bucket holding t; the charts' hour, day and week bars are
-- whole numbers of these.
CREATE FUNCTION outcome_bucket(t timestamptz) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT date_bin(interval '5 minutes', t, timestamptz '2000-01-01 00:00:00+00')
$$;

-- A todo deleted (retention, or its human): its closed attempts are counted before the
-- cascade deletes them, in key order, so two deleting sessions take the counters' row
-- locks in the same order.
CREATE FUNCTION todos_count_deleted_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT OLD.endpoint_id, outcome_bucket(a.ended_at), OLD.queue, a.outcome, count(*)
    FROM attempts a
   WHERE a.todo_id = OLD.id AND a.outcome IS NOT NULL
   GROUP BY 2, 4
   ORDER BY 2, 4
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + excluded.n;
  RETURN OLD;
END
$$;

CREATE TRIGGER todos_count_deleted_attempts BEFORE DELETE ON todos FOR EACH ROW
  EXECUTE FUNCTION todos_count_deleted_attempts();

-- An attempt deleted while its todo lives on (a claim pruning the oldest past the cap):
-- counted. In a todo's cascade the todo is already gone here, and the trigger above has
-- counted its attempts.
CREATE FUNCTION attempts_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, n)
  SELECT t.endpoint_id, outcome_bucket(OLD.ended_at), t.queue, OLD.outcome, 1
    FROM todos t WHERE t.id = OLD.todo_id
  ON CONFLICT (endpoint_id, bucket, queue, outcome) DO UPDATE SET n = c.n + 1;
  RETURN NULL;
END
$$;

CREATE TRIGGER attempts_count_deleted AFTER DELETE ON attempts FOR EACH ROW
  WHEN (OLD.outcome IS NOT NULL) EXECUTE FUNCTION attempts_count_deleted();
