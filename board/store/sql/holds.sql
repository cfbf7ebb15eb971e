-- Held todos, not closed: heartbeat (extends the lease on the todo and its open attempt,
-- REQ-4), interrupt and resume (the attempt stays open across both, REQ-2), a note on the
-- open attempt (activity, not a lease), and the fence lookup. Each locks the todo row first.
-- The fence guard and token_checked are as in closes.sql.

-- name: todo_heartbeat
-- description: The holder extends its lease: claimed -> claimed, on the todo and its open attempt; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
hb AS (
  UPDATE attempts a
     SET last_heartbeat_at = coalesce(%(now)s::timestamptz, now()),
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second'
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND (%(token_checked)s OR a.lease_token_hash IS NULL)
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET lease_expires_at = hb.lease_expires_at,
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM hb WHERE t.id = hb.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'lease_extended')::text) FROM upd;

-- name: todo_interrupt
-- description: The holder pauses its attempt for input or auth: claimed -> to_state, the lease kept; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(NULL::timestamptz, a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND (%(token_checked)s OR a.lease_token_hash IS NULL)
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at,
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'interrupted')::text) FROM upd;

-- name: todo_resume
-- description: The holder resumes an interrupted attempt: -> claimed with a fresh lease; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', a.lease_expires_at)
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND (%(token_checked)s OR a.lease_token_hash IS NULL)
  RETURNING a.todo_id, a.lease_expires_at
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at,
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at,
       pg_notify('switchboard_v1', json_build_object(
  'todo', upd.id, 'endpoint', upd.endpoint_id, 'queue', upd.queue, 'state', upd.state,
  'kind', 'resumed')::text) FROM upd;

-- name: attempt_note_add
-- description: The holder notes on its open attempt, pruning notes past the cap; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),
         last_note_at = coalesce(%(now)s::timestamptz, now())
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND (%(token_checked)s OR a.lease_token_hash IS NULL)
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, 'endpoint'::attempt_claimer_kind, %(text)s,
         %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count,
       coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, pg_notify('switchboard_v1', json_build_object(
  'todo', cur.id, 'endpoint', cur.endpoint_id, 'queue', cur.queue, 'state', cur.state,
  'kind', 'noted')::text)
  FROM cur JOIN att ON true JOIN ins ON true;

-- name: attempt_note_add_human
-- description: The owning human notes on any open attempt of their todos (exempt from the fence), pruning notes past the cap
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[])
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), coalesce(a.notes_count, 0) + 1 - %(notes_max)s), 0),
         last_note_at = coalesce(%(now)s::timestamptz, now())
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, 'owner'::attempt_claimer_kind, %(text)s,
         %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count,
       coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, pg_notify('switchboard_v1', json_build_object(
  'todo', cur.id, 'endpoint', cur.endpoint_id, 'queue', cur.queue, 'state', cur.state,
  'kind', 'noted')::text)
  FROM cur JOIN att ON true JOIN ins ON true;

-- name: attempt_fence_lookup
-- description: The open attempt's lease_token_hash with the todo row locked, for the store's constant-time token check
SELECT a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = %(id)s AND t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s)
   AND t.state = ANY(%(from_states)s::todo_state[]) AND t.owner = %(owner)s
 FOR UPDATE OF t;
