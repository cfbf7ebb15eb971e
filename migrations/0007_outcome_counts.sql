-- Closed attempts counted as they close, for the Board's charts: per todo owner endpoint,
-- queue, outcome and five-minute bucket of ended_at. The attempts themselves do not
-- survive: the per-todo history cap prunes them and retention deletes them with their
-- todos, so a chart that counted attempt rows went down as they went. These counts are
-- written by the closing statement's own transaction (the trigger below), so they are
-- exact, and nothing but their own retention (the sweep's attempt_counts_prune) deletes
-- them.
--
-- shard is the writing backend's pid: two sessions never update the same row, so closes
-- in one queue at once neither wait on each other's commit nor deadlock (a reaper closing
-- attempts of several queues in one statement locks its own rows only). A reader sums the
-- shards.
CREATE TABLE attempt_outcome_counts (
  endpoint_id uuid NOT NULL,
  bucket timestamptz NOT NULL,
  queue text COLLATE "C" NOT NULL,
  outcome attempt_outcome NOT NULL,
  shard integer NOT NULL,
  n bigint NOT NULL CHECK (n > 0),
  PRIMARY KEY (endpoint_id, bucket, queue, outcome, shard)
);

-- The start of the five-minute bucket holding t; the charts' hour, day and week bars are
-- whole numbers of these.
CREATE FUNCTION outcome_bucket(t timestamptz) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT date_bin(interval '5 minutes', t, timestamptz '2000-01-01 00:00:00+00')
$$;

-- Every close of an attempt, whichever statement makes it (the holder's verbs, the owner's,
-- a takeover, the reaper, a revocation), counts once: an attempt closes exactly once (its
-- outcome goes from null to set, never back). An attempt written already closed (no
-- statement does; a restore or a fixture might) counts as it is written.
CREATE FUNCTION attempts_count_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO attempt_outcome_counts AS c (endpoint_id, bucket, queue, outcome, shard, n)
  SELECT t.endpoint_id, outcome_bucket(NEW.ended_at), t.queue, NEW.outcome, pg_backend_pid(), 1
    FROM todos t WHERE t.id = NEW.todo_id
  ON CONFLICT (endpoint_id, bucket, queue, outcome, shard) DO UPDATE SET n = c.n + 1;
  RETURN NULL;
END
$$;

CREATE TRIGGER attempts_count_closed AFTER UPDATE OF outcome ON attempts FOR EACH ROW
  WHEN (OLD.outcome IS NULL AND NEW.outcome IS NOT NULL) EXECUTE FUNCTION attempts_count_closed();
CREATE TRIGGER attempts_count_inserted_closed AFTER INSERT ON attempts FOR EACH ROW
  WHEN (NEW.outcome IS NOT NULL) EXECUTE FUNCTION attempts_count_closed();

-- The attempts closed before this migration, as far as they survive (shard 0: no backend's pid).
INSERT INTO attempt_outcome_counts (endpoint_id, bucket, queue, outcome, shard, n)
SELECT t.endpoint_id, outcome_bucket(a.ended_at), t.queue, a.outcome, 0, count(*)
  FROM attempts a JOIN todos t ON t.id = a.todo_id
 WHERE a.outcome IS NOT NULL
 GROUP BY 1, 2, 3, 4;

-- The chart read the attempts closed in its hour through this index; nothing reads attempts
-- by ended_at now.
DROP INDEX attempts_ended_brin;
