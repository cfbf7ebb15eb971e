-- Claims: pending -> claimed, or claimed with a lapsed lease -> claimed (a takeover). Each
-- opens one attempt, seq = the todo's new attempts_total, in the statement that updates the
-- todo (REQ-2); a takeover first closes the lapsed attempt lease_expired/requeued; the full
-- path prunes the oldest closed attempts past the per-todo cap, folding their outcomes and
-- usage into todos.pruned_outcomes and pruned_usage (REQ-3, REQ-11).
--
-- Two statements serve every claim: claim_next (id null: the claimable todos of the agent's
-- queues, the most urgent priority first and the oldest within it, up to limit) and a claim by id (an agent's, or the owning human's from the
-- Board: endpoint_id null). A branch whose parameters do not apply is cut by a one-time
-- filter, so the plan for each keeps its keyed scans. The caller's scope is
-- todo_in_scope (migration 0014) on a claim by id; claim_next's walk names the endpoint
-- itself, since only an equality on it keeps the pending index's order (the plan test).
-- An agent records its endpoint as claimer, the Board the owner and no endpoint (REQ-1).
-- Each attempt records the claiming call's W3C traceparent when tracing is on (null when off;
-- the attempt's span, emitted at its close, continues that trace: docs/tracing.md).
--
-- todo_claim_fast is tried first: pending todos whose history needs no pruning, where only
-- the attempt insert joins the todos update, which is the statement itself, so its RETURNING
-- is the response. todo_claim runs for what it left (a lapsed lease, a capped history,
-- nothing pending). They stay two statements: the full one's chain of CTEs (takeover,
-- pruning, a todos update as a CTE) costs every claim more than the fast one
-- (docs/performance.md, "What the store and schema do for it").
--
-- A queue the caller's human has paused (migration 0003): an agent's claim probes the small
-- queue_pauses table by its key for each candidate row (the scan stops at the first row of a
-- live queue). Not phrased as "queue <> ALL(the paused ones)": the planner reads that as
-- matching almost no row and scans and sorts the whole table. A server process whose pause
-- cache (board/live/pause_cache.py) vouches for the caller's paused queues leaves them out of
-- claim_queues and passes ignore_pauses, which skips the probe; a claim by id always probes.
-- The Board's own claim is not held back by a pause (ignore_pauses).
--
-- The claim's order (migration 0015). claim_next walks todos_ready_idx, which holds only
-- pending todos that are not scheduled, in (priority, created_at, id) order, so a deep
-- schedule or a backlog of less urgent todos is never read (the plan test). A claim by id
-- takes a scheduled todo once its run_at has passed, before the due timer reaches it. A
-- queue with a limit (queue_limits) is probed in `room`: queue_room locks the limit's row and
-- counts what the queue holds with a fresh snapshot, so claims of one limited queue take
-- turns; a queue with no room leaves claim_queues, and a batch takes no more of a queue than
-- its room (nth). A queue without a limit costs one probe of queue_limits' primary key. A
-- takeover of a lapsed lease is not held back: the todo is held already.
--
-- claim_next takes the pending todos in that order, then lapsed leases for what is left of the
-- limit (the reaper returns the rest to pending soon anyway). Two locking scans, because one
-- with an OR could not use the pending-only index; the lapsed scan runs only when the
-- pending one found fewer than limit. A lapsed lease on a todo's last allowed attempt is
-- never taken over: the reaper dead-letters it. LIMIT 50 (claim_next's most) bounds the
-- generic plan's row estimate, so the joins below the candidates stay keyed.
--
-- Each claimed todo gets its own lease token hash (token_hashes[n], null when not fenced)
-- and its own notification; the rows come back in no order, each with its attempt's
-- lease_token_hash, so the store gives each its token.
--
-- A claim returns neither the state, owner, next_retry_at nor dead_letter: a claimed todo
-- has a holder and no retry time (the todos_consistent trigger), and the store fills them
-- in. Prior attempts come from attempt_prior, called only for a todo claimed before, and a
-- continuing todo's predecessor from todo_continuation, called only when continues_id is
-- set: as sub-selects, the executor would set them up on every claim. The counts passed in
-- (prior_attempts, prior_notes) are board/store/vocabulary.py's.
--
-- The watchers test before each todo_notify is written into each statement that moves a todo,
-- not called as a function: the statement must lock watchers while it is planned, before its
-- snapshot (migration 0011).

-- name: todo_claim_fast
-- description: A claim's first try: the oldest pending todos of the agent's queues (claim_next) or the one named by id, whose history needs no pruning -> claimed, each opening an attempt
WITH room AS MATERIALIZED (  -- the queues with a limit, each with the room it has left (queue_room locks it)
  SELECT q.queue, queue_room(%(user_id)s, q.queue) AS room
    FROM (SELECT l.queue FROM queue_limits l
           WHERE l.user_id = %(user_id)s
             AND l.queue = ANY(CASE WHEN %(id)s::text IS NULL THEN %(claim_queues)s::text[]
                                    ELSE ARRAY(SELECT t.queue FROM todos t WHERE t.id = %(id)s) END)
           ORDER BY l.queue OFFSET 0) q
),
next AS (
  SELECT t.id, t.attempts_total AS prev_total, t.attempt AS prev_attempt, t.queue, t.priority, t.created_at
    FROM todos t
   WHERE %(id)s::text IS NULL
     AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.queue = ANY(ARRAY(SELECT q FROM unnest(%(claim_queues)s::text[]) q
                                 WHERE NOT EXISTS (SELECT 1 FROM room r WHERE r.queue = q AND r.room <= 0)))
     AND t.state = 'pending' AND NOT t.scheduled AND t.waits = 0
     AND (%(ignore_pauses)s OR NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue))
   ORDER BY t.priority, t.created_at, t.id
   LIMIT %(limit)s
   FOR UPDATE OF t SKIP LOCKED
),
by_id AS (
  SELECT t.id, t.attempts_total AS prev_total, t.attempt AS prev_attempt, t.queue, t.priority, t.created_at
    FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = 'pending' AND t.waits = 0
     AND (NOT t.scheduled OR t.run_at <= coalesce(%(now)s::timestamptz, now()))
     AND (%(ignore_pauses)s OR NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue))
   FOR UPDATE OF t
),
numbered AS (  -- no more of a limited queue than its room
  SELECT c.id, c.prev_total, c.prev_attempt, row_number() OVER () AS n
    FROM (SELECT c.*, row_number() OVER (PARTITION BY c.queue ORDER BY c.priority, c.created_at, c.id) AS nth
            FROM (SELECT * FROM next UNION ALL SELECT * FROM by_id) c) c
   WHERE c.prev_total < %(history_max)s
     AND c.nth <= coalesce((SELECT r.room FROM room r WHERE r.queue = c.queue), 50)
   LIMIT 50
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash, claim_traceparent)
  SELECT numbered.id, numbered.prev_total + 1, numbered.prev_attempt + 1,
         (CASE WHEN %(endpoint_id)s::uuid IS NULL THEN 'owner' ELSE 'endpoint' END)::attempt_claimer_kind,
         %(claimer_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text,
         coalesce(%(now)s::timestamptz, now()),
         coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         (%(token_hashes)s::bytea[])[numbered.n], %(traceparent)s::text
    FROM numbered
  RETURNING todo_id, seq, lease_token_hash
)
UPDATE todos t
   SET state = 'claimed', owner = %(owner)s, scheduled = false,
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
       attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
       updated_at = coalesce(%(now)s::timestamptz, now())
  FROM ins
 WHERE t.id = ins.todo_id
RETURNING t.id, t.endpoint_id, t.queue, t.title, t.attempt, t.max_attempts, t.lease_expires_at, t.payload,
          t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, t.priority, t.run_at,
          t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, ins.lease_token_hash,
       CASE WHEN t.attempts_total > 1 THEN attempt_prior(t.id, %(prior_attempts)s::int, %(prior_notes)s::int) END AS prior_attempts,
       CASE WHEN t.continues_id IS NOT NULL THEN todo_continuation(t.continues_id, t.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = t.endpoint_id)
       THEN todo_notify(t.id, t.endpoint_id, t.queue, t.state, 'claimed') END;

-- name: todo_claim
-- description: A claim's full path: the oldest pending todos then lapsed leases (claim_next), or the one named by id, pending or lapsed -> claimed; closes each lapsed attempt, prunes each history, opens an attempt each
WITH room AS MATERIALIZED (  -- the queues with a limit, each with the room it has left (queue_room locks it)
  SELECT q.queue, queue_room(%(user_id)s, q.queue) AS room
    FROM (SELECT l.queue FROM queue_limits l
           WHERE l.user_id = %(user_id)s
             AND l.queue = ANY(CASE WHEN %(id)s::text IS NULL THEN %(claim_queues)s::text[]
                                    ELSE ARRAY(SELECT t.queue FROM todos t WHERE t.id = %(id)s) END)
           ORDER BY l.queue OFFSET 0) q
),
next_pending AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt, t.queue,
         t.priority, t.created_at
    FROM todos t
   WHERE %(id)s::text IS NULL
     AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.queue = ANY(ARRAY(SELECT q FROM unnest(%(claim_queues)s::text[]) q
                                 WHERE NOT EXISTS (SELECT 1 FROM room r WHERE r.queue = q AND r.room <= 0)))
     AND t.state = 'pending' AND NOT t.scheduled AND t.waits = 0
     AND (%(ignore_pauses)s OR NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue))
   ORDER BY t.priority, t.created_at, t.id
   LIMIT %(limit)s
   FOR UPDATE OF t SKIP LOCKED
),
next_lapsed AS (  -- already held: a takeover changes no queue's count
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt, t.queue,
         t.priority, t.created_at
    FROM todos t
   WHERE %(id)s::text IS NULL
     AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND t.queue = ANY(%(claim_queues)s)
     AND t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
     AND t.attempt < t.max_attempts
     AND (%(ignore_pauses)s OR NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue))
   ORDER BY t.lease_expires_at
   LIMIT %(limit)s
   FOR UPDATE OF t SKIP LOCKED
),
by_id AS (
  SELECT t.id, t.state AS prev_state, t.attempts_total AS prev_total, t.attempt AS prev_attempt, t.queue,
         t.priority, t.created_at
    FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND ((t.state = 'pending' AND t.waits = 0
           AND (NOT t.scheduled OR t.run_at <= coalesce(%(now)s::timestamptz, now()))) OR (t.state = 'claimed' AND t.lease_expires_at <= coalesce(%(now)s::timestamptz, now())
                                  AND t.attempt < t.max_attempts))
     AND (%(ignore_pauses)s OR NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.user_id = %(user_id)s AND p.queue = t.queue))
   FOR UPDATE OF t
),
cand AS (  -- no more pending todos of a limited queue than its room
  SELECT c.id, c.prev_state, c.prev_total, c.prev_attempt, row_number() OVER () AS n FROM (
    SELECT c.*, row_number() OVER (PARTITION BY c.queue, c.prev_state ORDER BY c.priority, c.created_at, c.id) AS nth
      FROM (
        SELECT * FROM next_pending
        UNION ALL
        (SELECT * FROM next_lapsed WHERE (SELECT count(*) FROM next_pending) < %(limit)s
          LIMIT %(limit)s - (SELECT count(*) FROM next_pending))
        UNION ALL
        SELECT * FROM by_id) c) c
   WHERE c.prev_state <> 'pending' OR c.nth <= coalesce((SELECT r.room FROM room r WHERE r.queue = c.queue), 50)
   LIMIT 50
),
lapsed AS (
  UPDATE attempts a
     SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'lease_expired', disposition = 'requeued'
    FROM cand
   WHERE cand.prev_state = 'claimed' AND a.todo_id = cand.id AND a.seq = cand.prev_total
     AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.claimant, a.claimer_kind, a.claimed_at, a.last_heartbeat_at,
            a.lease_expires_at, a.ended_at, a.outcome, a.disposition, a.summary,
            a.summary_truncated, a.artifact, attempt_died(a.outcome) AS died,
            attempt_public_notes(a, %(prior_notes)s::int) AS public
),
pruned AS (
  DELETE FROM attempts a USING cand
   WHERE cand.prev_total >= %(history_max)s
     AND a.todo_id = cand.id AND a.seq <= cand.prev_total + 1 - %(history_max)s
     AND a.ended_at IS NOT NULL
  RETURNING a.todo_id, a.seq, a.outcome, a.input_tokens, a.output_tokens, a.cost_usd
),
upd AS (
  UPDATE todos t
     SET state = 'claimed', owner = %(owner)s, scheduled = false,
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second',
         attempt = t.attempt + 1, attempts_total = t.attempts_total + 1,
         attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned p WHERE p.todo_id = t.id),
         pruned_outcomes = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_outcomes
           ELSE t.pruned_outcomes || coalesce((
             SELECT jsonb_object_agg(p.outcome, p.n + coalesce((t.pruned_outcomes ->> p.outcome)::int, 0))
               FROM (SELECT outcome::text AS outcome, count(*) AS n FROM pruned WHERE pruned.todo_id = t.id
                      GROUP BY 1) p), '{}') END,
         pruned_usage = CASE WHEN cand.prev_total < %(history_max)s THEN t.pruned_usage
           ELSE (SELECT CASE WHEN count(p.input_tokens) + count(p.output_tokens) + count(p.cost_usd) = 0 THEN t.pruned_usage
             ELSE coalesce(t.pruned_usage, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
               'input_tokens', CASE WHEN count(p.input_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) + sum(p.input_tokens) END,
               'output_tokens', CASE WHEN count(p.output_tokens) > 0
                 THEN coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) + sum(p.output_tokens) END,
               'cost_usd', CASE WHEN count(p.cost_usd) > 0
                 THEN coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) + sum(p.cost_usd) END)) END
             FROM pruned p WHERE p.todo_id = t.id) END,
         updated_at = coalesce(%(now)s::timestamptz, now())
    FROM cand
   WHERE t.id = cand.id
     AND (cand.prev_state = 'pending' OR EXISTS (SELECT 1 FROM lapsed l WHERE l.todo_id = cand.id))
  RETURNING t.*, cand.n
),
ins AS (
  INSERT INTO attempts (todo_id, seq, attempt, claimer_kind, claimer_endpoint_id, claimer_session,
                        owner, claimant, claimed_at, lease_expires_at, lease_token_hash, claim_traceparent)
  SELECT upd.id, upd.attempts_total, upd.attempt,
         (CASE WHEN %(endpoint_id)s::uuid IS NULL THEN 'owner' ELSE 'endpoint' END)::attempt_claimer_kind,
         %(claimer_id)s::uuid, %(claimer_session)s::text, %(owner)s, %(claimant)s::text,
         coalesce(%(now)s::timestamptz, now()), upd.lease_expires_at, (%(token_hashes)s::bytea[])[upd.n],
         %(traceparent)s::text
    FROM upd
  RETURNING todo_id, seq, lease_token_hash
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.attempt, upd.max_attempts, upd.lease_expires_at,
       upd.payload, upd.routing, upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at,
       upd.updated_at, upd.priority, upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting, ins.lease_token_hash,
       (SELECT to_jsonb(l) - 'public' - 'todo_id' FROM lapsed l WHERE l.todo_id = upd.id) AS lapsed,
       CASE WHEN upd.attempts_total > 1 THEN  -- a first claim has no prior attempts (null: none)
       (SELECT coalesce(json_agg(x.p ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT y.seq, y.p FROM (
            SELECT l.seq, l.public AS p FROM lapsed l WHERE l.todo_id = upd.id
            UNION ALL
            (SELECT a.seq, attempt_public_notes(a, %(prior_notes)s::int) FROM attempts a
              WHERE a.todo_id = upd.id AND a.ended_at IS NOT NULL
                AND a.seq NOT IN (SELECT p.seq FROM pruned p WHERE p.todo_id = upd.id)
              ORDER BY a.seq DESC LIMIT %(prior_attempts)s::int)
          ) y ORDER BY y.seq DESC LIMIT %(prior_attempts)s::int) x) END AS prior_attempts,
       CASE WHEN upd.continues_id IS NOT NULL THEN todo_continuation(upd.continues_id, upd.endpoint_id, %(prior_notes)s::int) END AS continues,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'claimed') END
  FROM upd JOIN ins ON ins.todo_id = upd.id;
