-- The claim's order in use (migration 0015), against the same run without it
-- (bench/claim_contention.py --variant ordered=@bench/variants/claim_order_in_use.sql): the
-- pending todos spread over the five priorities and half of them keyed (a claim and a
-- complete then also move the live-key index's entry), 100,000 scheduled todos more urgent
-- than any of them in the table, and a limit on the queue that never binds, so every claim
-- locks the limit and counts what the queue holds.
-- after the rows --
UPDATE todos SET priority = abs(hashtext(id)) % 5,
                 key = CASE WHEN abs(hashtext(id)) % 2 = 0 THEN 'key-' || id END
 WHERE state = 'pending';
INSERT INTO todos (endpoint_id, queue, title, priority, run_at, scheduled, created_at)
SELECT e.id, 'work', 'later ' || g, 0, now() + interval '1 day', true, now() - interval '1 day'
  FROM endpoints e, generate_series(1, 100000) g;
INSERT INTO queue_limits (user_id, queue, max_held) SELECT id, 'work', 100000 FROM users;
