-- Plans in use (migration 0016), against the same run without them
-- (bench/claim_contention.py --variant plans=@bench/variants/plans_in_use.sql): 100,000
-- todos waiting on another todo, more urgent and older than any claimable one, in the table,
-- and every pending todo waited on, so each complete also runs todo_release_dependents.
-- after the rows --
INSERT INTO todos (endpoint_id, queue, title, priority, after, waits, created_at)
SELECT e.id, 'work', 'waits ' || g, 0, ARRAY[(SELECT t.id FROM todos t WHERE t.state = 'done' LIMIT 1)], 1,
       now() - interval '1 day'
  FROM endpoints e, generate_series(1, 100000) g;
UPDATE todos SET waited_on = true WHERE state = 'pending';
