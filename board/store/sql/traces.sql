-- Traces (docs/tracing.md): what the span of each closed attempt carries, read after its close
-- by the process that closed it, only when tracing is on. Ids, times, the queue and the
-- outcome; never the title, summary, artifact, payload or a token.

-- name: attempts_traced
-- description: The attempts just closed (todo id, seq) with their claim and close times, queue, outcome, claiming endpoint and agent, and the claim's traceparent
SELECT a.todo_id, a.seq, a.attempt, a.claimed_at, a.ended_at, a.outcome::text AS outcome,
       a.disposition::text AS disposition, attempt_died(a.outcome) AS died, a.claimer_kind::text AS claimer_kind,
       a.claimer_endpoint_id::text AS endpoint_id, e.agent_id, a.claim_traceparent, t.queue
  FROM unnest(%(todo_ids)s::text[], %(seqs)s::int[]) AS k(todo_id, seq)
  JOIN attempts a ON a.todo_id = k.todo_id AND a.seq = k.seq
  JOIN todos t ON t.id = a.todo_id
  LEFT JOIN endpoints e ON e.id = a.claimer_endpoint_id
 WHERE a.ended_at IS NOT NULL
