-- Exact per-outcome attempt counts that survive REQ-11 pruning (the idea of seed 002).
-- Counts of live attempt rows are derived at read time; only the rows pruning deletes are
-- folded into this counter, in the same statement that deletes them, so the hot path of a
-- claim or a close never touches it.

ALTER TABLE todos
  ADD COLUMN pruned_outcomes jsonb NOT NULL DEFAULT '{}'::jsonb;
