-- The Board's chart read as it was before the charts' fold (migration 0012): every attempt
-- closed in the window, joined to its todo as the planner chooses, plus the counts of those
-- deleted. bench/chart_read.py runs it on its never-folded databases.
SELECT x.queue, x.outcome::text AS outcome, attempt_died(x.outcome) AS died,
       ceil(extract(epoch FROM w.newest - x.bucket) / %(bucket_seconds)s)::int AS bucket,
       sum(x.n)::bigint AS n
  FROM (SELECT d.newest, d.newest - (%(buckets)s - 1) * %(bucket_seconds)s * interval '1 second' AS oldest,
               coalesce(%(now)s::timestamptz, now()) AS now
          FROM (SELECT date_bin(%(bucket_seconds)s * interval '1 second', coalesce(%(now)s::timestamptz, now()),
                                timestamptz '2000-01-01 00:00:00+00') AS newest) d) w
 CROSS JOIN LATERAL (
        SELECT t.queue, a.outcome, outcome_bucket(a.ended_at) AS bucket, 1 AS n
          FROM attempts a JOIN todos t ON t.id = a.todo_id
         WHERE a.ended_at >= w.oldest AND a.ended_at <= w.now
           AND t.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
        UNION ALL
        SELECT c.queue, c.outcome, c.bucket, c.n
          FROM attempt_outcome_counts c
         WHERE c.bucket >= w.oldest AND c.bucket <= w.now
           AND c.endpoint_id = ANY(ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))) x
 WHERE x.outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped')
 GROUP BY 1, 2, 3, 4;
