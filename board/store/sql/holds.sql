-- Held todos, not closed: heartbeat (extends the lease on the todo and its open attempt,
-- REQ-4), interrupt and resume (the attempt stays open across both, REQ-2), the owning
-- human's answer to an interrupt, a note on the open attempt (activity, not a lease), and
-- the fence lookup. Each locks the todo row first. The caller's scope, the holder test and
-- the fence are migration 0014's functions, with token_checked as in closes.sql.
--
-- A question and its answers are notes (migration 0009): interrupt writes the question with
-- the state change, an answer is fenced by the todo's state (an interrupt state, on the
-- attempt still open) and gives the holder a fresh lease to resume in: an answered todo
-- whose holder never resumes is reaped like a lapsed claim (sweeps.sql).

-- name: todo_heartbeat
-- description: The holder extends its lease: claimed -> claimed, on the todo and its open attempt; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
   FOR UPDATE OF t
),
hb AS (
  UPDATE attempts a
     SET last_heartbeat_at = coalesce(%(now)s::timestamptz, now()),
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second'
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)
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
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'lease_extended') END FROM upd;

-- name: todo_interrupt
-- description: The holder pauses its attempt for a person: claimed -> to_state, the lease kept, with its question (if any) as a note and the todo.input_required or todo.auth_required hook event; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET waiting_n = coalesce(a.notes_count, 0),
         notes_count = CASE WHEN %(question)s::text IS NULL THEN a.notes_count ELSE coalesce(a.notes_count, 0) + 1 END,
         asked_n = CASE WHEN %(question)s::text IS NULL THEN a.asked_n ELSE coalesce(a.notes_count, 0) + 1 END,
         last_note_at = CASE WHEN %(question)s::text IS NULL THEN a.last_note_at
                             ELSE coalesce(%(now)s::timestamptz, now()) END,
         answered_at = NULL,
         question_expires_at = coalesce(%(now)s::timestamptz, now()) + %(expires_in)s * interval '1 second'
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)
  RETURNING a.todo_id, a.seq, a.notes_count, a.lease_expires_at, a.question_expires_at
),
asked AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated, kind, choices, expires_at)
  SELECT att.todo_id, att.seq, att.notes_count, coalesce(%(now)s::timestamptz, now()), 'endpoint',
         %(question)s, %(question_truncated)s, 'question', %(choices)s::jsonb, att.question_expires_at
    FROM att WHERE %(question)s::text IS NOT NULL
  RETURNING n
),
upd AS (
  UPDATE todos t SET state = %(to_state)s::todo_state, lease_expires_at = att.lease_expires_at,
      updated_at = coalesce(%(now)s::timestamptz, now())
    FROM att WHERE t.id = att.todo_id
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT ev.event, h.url, u.id,
         hook_payload(ev.event, coalesce(%(now)s::timestamptz, now()), u.id, u.queue, u.title, u.state,
                      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id)
         || jsonb_build_object('question', CASE WHEN %(question)s::text IS NOT NULL THEN jsonb_build_object(
              'text', %(question)s::text, 'choices', %(choices)s::jsonb, 'expires_at', att.question_expires_at) END,
              -- null without SWITCHBOARD_PUBLIC_URL: a delivery has no request Host to take it from
              'board_url', %(public_url)s::text || '/todos/' || u.id)
    FROM upd u JOIN att ON true
    CROSS JOIN LATERAL (SELECT CASE WHEN u.state = 'auth_required' THEN 'todo.auth_required'
                                    ELSE 'todo.input_required' END AS event) ev
    CROSS JOIN unnest(%(hook_urls)s::text[]) AS h(url)
   WHERE cardinality(%(hook_urls)s::text[]) > 0
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       att.question_expires_at, CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'interrupted') END FROM upd JOIN att ON true;

-- name: todo_resume
-- description: The holder resumes an interrupted attempt: -> claimed with a fresh lease; the same attempt, returning the range of its notes since the interrupt (attempt_answers reads the answers among them once this commits); token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a SET lease_expires_at = coalesce(coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second', a.lease_expires_at),
         answered_at = NULL, question_expires_at = NULL
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)
  RETURNING a.todo_id, a.seq, a.waiting_n, a.notes_count, a.lease_expires_at
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
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority,
       upd.run_at, upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       att.seq, att.waiting_n, att.notes_count, CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'resumed') END FROM upd JOIN att ON true;

-- name: attempt_answers
-- description: The answers among an attempt's notes numbered after `after` up to `upto` (what resume returns), oldest first; a statement of its own after resume commits, so it sees every answer committed before resume took the todo's lock
SELECT x.text, x.choice, x.author AS who, x.at
  FROM attempt_notes x
 WHERE x.todo_id = %(id)s AND x.seq = %(seq)s AND x.n > %(after)s AND x.n <= %(upto)s AND x.kind = 'answer'
 ORDER BY x.n;

-- name: todo_answer_human
-- description: The owning human answers an interrupted todo of theirs: a note of kind answer on the open attempt (a choice only if the current question offers it; fenced: only while the question waiting is the one asked at asked_at, null for none), and the holder has a fresh lease to resume in, else the reaper takes it back
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[])
   FOR UPDATE OF t
),
prev AS (
  SELECT a.todo_id, a.seq, a.answered_at, q.at AS asked_at
    FROM cur JOIN attempts a ON a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
    LEFT JOIN attempt_notes q ON q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
                             AND a.asked_n > a.waiting_n
   WHERE %(choice)s::text IS NULL OR q.choices ? %(choice)s::text
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         last_note_at = coalesce(%(now)s::timestamptz, now()),
         answered_at = coalesce(a.answered_at, coalesce(%(now)s::timestamptz, now())),
         lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease_seconds)s * interval '1 second'
    FROM prev
   WHERE a.todo_id = prev.todo_id AND a.seq = prev.seq
     AND (NOT %(fenced)s::boolean OR prev.asked_at IS NOT DISTINCT FROM %(asked_at)s::timestamptz)
  RETURNING a.todo_id, a.seq, a.notes_count, a.last_note_at, a.lease_expires_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated, kind, choice, author)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, 'owner', %(text)s, %(truncated)s, 'answer',
         %(choice)s, %(username)s FROM att
  RETURNING n
),
upd AS (
  UPDATE todos t SET lease_expires_at = att.lease_expires_at, updated_at = att.last_note_at
    FROM att WHERE t.id = att.todo_id
  RETURNING t.id
)
SELECT cur.id, cur.endpoint_id, cur.queue, cur.state::text AS state, att.seq, att.notes_count AS n,
       att.last_note_at AS at, prev.asked_at, prev.answered_at IS NULL AS first,
       CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = cur.endpoint_id)
       THEN todo_notify(cur.id, cur.endpoint_id, cur.queue, cur.state, 'answered') END
  FROM cur JOIN prev ON true JOIN att ON true JOIN ins ON true JOIN upd ON true;

-- name: attempt_note_add
-- description: The holder notes on its open attempt, or the owning human on any open attempt of their todos (exempt from the fence), pruning notes past the cap; token_checked: the store compared the lease token
WITH cur AS (
  SELECT t.id, t.endpoint_id, t.queue, t.state, t.attempts_total FROM todos t
   WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
   FOR UPDATE OF t
),
att AS (
  UPDATE attempts a
     SET notes_count = coalesce(a.notes_count, 0) + 1,
         notes_pruned = nullif(greatest(coalesce(a.notes_pruned, 0), attempt_notes_pruned(
           a.todo_id, a.seq, coalesce(a.notes_count, 0) + 1, %(notes_max)s::integer, a.waiting_n)), 0),
         last_note_at = coalesce(%(now)s::timestamptz, now())
    FROM cur
   WHERE a.todo_id = cur.id AND a.seq = cur.attempts_total AND a.outcome IS NULL
     AND lease_fence_holds(a.lease_token_hash, %(token_checked)s, %(endpoint_id)s)
  RETURNING a.todo_id, a.seq, a.notes_count, a.notes_pruned, a.last_note_at
),
ins AS (
  INSERT INTO attempt_notes (todo_id, seq, n, at, author_kind, text, truncated)
  SELECT att.todo_id, att.seq, att.notes_count, att.last_note_at, (CASE WHEN %(endpoint_id)s::uuid IS NULL THEN 'owner' ELSE 'endpoint' END)::attempt_claimer_kind,
         %(text)s,
         %(truncated)s FROM att
  RETURNING n
),
pruned AS (
  DELETE FROM attempt_notes x USING att
   WHERE x.todo_id = att.todo_id AND x.seq = att.seq AND x.n <= att.notes_count - %(notes_max)s
     AND x.kind = 'working'
  RETURNING 1
)
SELECT cur.id, cur.endpoint_id, cur.queue, att.seq, att.notes_count,
       coalesce(att.notes_pruned, 0) AS notes_pruned,
       att.last_note_at AS at, CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = cur.endpoint_id)
       THEN todo_notify(cur.id, cur.endpoint_id, cur.queue, cur.state, 'noted') END
  FROM cur JOIN att ON true JOIN ins ON true;

-- name: attempt_fence_lookup
-- description: The open attempt's lease_token_hash with the todo row locked, for the store's constant-time token check
SELECT a.lease_token_hash
  FROM todos t JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
   AND t.state = ANY(%(from_states)s::todo_state[]) AND todo_held_by(t.owner, %(endpoint_id)s, %(owner)s)
 FOR UPDATE OF t;
