-- The claim's order in use without a queue limit (bench/claim_contention.py --variant
-- unlimited=@bench/variants/claim_order_unlimited.sql): priorities, keys and a deep schedule
-- as in claim_order_in_use.sql, so the cost of a limit shows apart.
-- after the rows --
UPDATE todos SET priority = abs(hashtext(id)) % 5,
                 key = CASE WHEN abs(hashtext(id)) % 2 = 0 THEN 'key-' || id END
 WHERE state = 'pending';
INSERT INTO todos (endpoint_id, queue, title, priority, run_at, scheduled, created_at)
SELECT e.id, 'work', 'later ' || g, 0, now() + interval '1 day', true, now() - interval '1 day'
  FROM endpoints e, generate_series(1, 100000) g;
