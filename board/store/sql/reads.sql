-- Reads, each filtered by the caller's scope in the same statement (REQ-10). They change
-- nothing, so the store may run one again on a fresh connection (store.READS).
--
-- The list's filters are each a no-op when their parameter is null. The claimant filter
-- probes the newest attempt by primary key (a scalar sub-select: an EXISTS would be planned
-- as a hash of every attempt with that claimant). A human's todos span their endpoints:
-- sorted by created time, each endpoint walks its (endpoint_id, created_at DESC, id) index
-- and stops at a page; sorted by updated time, each endpoint's matching todos are sorted
-- (an index on updated_at would end a heartbeat's heap-only update).
--
-- get_todo's chain walks the continuation chain both ways from the todo, by primary key up
-- and through todo_successors down, each link in the caller's scope, at most chain_max
-- links each way (board/store/vocabulary.py's CHAIN_MAX).
--
-- get_todo's plan (migration 0016): the todos it was added after, each with its state and
-- last attempt's outcome, and the todos added after it (at most dependents_max).
--
-- A read by id serves an agent and the owning human through todo_in_scope (migration 0014).
-- The lists stay one statement per caller: an agent's walks its one endpoint's index, the
-- human's walks each of their endpoints' and joins each row's newest attempt, two plans
-- held apart by test_the_list_reads_its_rows_in_bounded_shapes.

-- name: todo_get
-- description: One todo in the caller's scope with its chain, usage totals, newest attempts (for the Board, each with how its claimer connected and when the current interrupt was first answered) and live outcome counts
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting,
       t.pruned_outcomes, t.continues_id, t.a2a_client, t.a2a_context,
       (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS continued_by_id,
       (WITH RECURSIVE up AS (
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, 0 AS pos
    UNION ALL
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total,
           up.pos - 1 FROM up JOIN todos t ON t.id = up.continues_id
     WHERE up.pos > -%(chain_max)s::int AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
  ), down AS (
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total, 0 AS pos
    UNION ALL
    SELECT t.id, t.continues_id, t.title, t.state, t.next_retry_at, t.attempts_total,
           down.pos + 1 FROM down JOIN todo_successors s ON s.todo_id = down.id
      JOIN todos t ON t.id = s.successor_id
     WHERE down.pos < %(chain_max)s::int AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
  ), links AS (
    SELECT * FROM up UNION SELECT * FROM down
  ), kept AS (
    SELECT c.*, count(*) OVER () AS n FROM links c ORDER BY abs(c.pos), c.pos LIMIT %(chain_max)s::int
  )
  SELECT json_build_object('truncated', max(c.n) > %(chain_max)s::int, 'links', json_agg(json_build_object(
           'id', c.id, 'title', c.title, 'state', c.state, 'dead_letter',
               todo_dead_letter(c.state, c.next_retry_at),
           'attempts_total', c.attempts_total, 'last_outcome', l.outcome, 'last_summary', left(l.line, 80),
           'last_summary_cut', coalesce(length(l.line) > 80, false)) ORDER BY c.pos))
    FROM kept c
    LEFT JOIN LATERAL (
      SELECT a.outcome, btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line FROM attempts a
       WHERE a.todo_id = c.id AND a.seq = c.attempts_total) l ON true) AS chain,
       (SELECT CASE WHEN count(a.input_tokens) + count(a.output_tokens) + count(a.cost_usd) > 0
            OR t.pruned_usage IS NOT NULL THEN json_build_object('input_tokens', CASE WHEN count(a.input_tokens) > 0 OR t.pruned_usage ? 'input_tokens' THEN coalesce(sum(a.input_tokens), 0) + coalesce((t.pruned_usage ->> 'input_tokens')::numeric, 0) END, 'output_tokens', CASE WHEN count(a.output_tokens) > 0 OR t.pruned_usage ? 'output_tokens' THEN coalesce(sum(a.output_tokens), 0) + coalesce((t.pruned_usage ->> 'output_tokens')::numeric, 0) END, 'cost_usd', CASE WHEN count(a.cost_usd) > 0 OR t.pruned_usage ? 'cost_usd' THEN coalesce(sum(a.cost_usd), 0) + coalesce((t.pruned_usage ->> 'cost_usd')::numeric, 0) END) END
     FROM attempts a WHERE a.todo_id = t.id) AS usage,
       (SELECT coalesce(json_agg(x.j ORDER BY x.seq DESC), '[]'::json) FROM (
          SELECT a.seq, CASE WHEN %(endpoint_id)s::uuid IS NOT NULL THEN attempt_public_notes(a, %(notes_limit)s::int)
                 ELSE (attempt_public_notes(a, %(notes_limit)s::int)::jsonb  -- the Board's drawer shows more
                       || jsonb_build_object('via', attempt_via(a.claimer_kind, a.claimer_endpoint_id),
                                             'answered_at', a.answered_at))::json END AS j
            FROM attempts a
           WHERE a.todo_id = t.id ORDER BY a.seq DESC LIMIT %(attempts_limit)s) x) AS attempts,
       (SELECT coalesce(json_object_agg(o.outcome, o.n), '{}'::json) FROM (
          SELECT a.outcome::text AS outcome, count(*) AS n FROM attempts a
           WHERE a.todo_id = t.id AND a.outcome IS NOT NULL GROUP BY 1) o) AS live_outcomes,
       (SELECT coalesce(json_agg(json_build_object(
                 'id', d.id, 'title', d.title, 'state', d.state, 'dead_letter', todo_dead_letter(d.state, d.next_retry_at),
                 'last_outcome', (SELECT a.outcome FROM attempts a WHERE a.todo_id = d.id AND a.seq = d.attempts_total))
               ORDER BY array_position(t.after, d.id)), '[]'::json)
          FROM todos d
         WHERE d.id = ANY(t.after) AND todo_in_scope(d.endpoint_id, d.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
       ) AS plan_after,
       (SELECT coalesce(json_agg(w.j ORDER BY w.created_at, w.id), '[]'::json) FROM (
          SELECT w.created_at, w.id, json_build_object(
                   'id', w.id, 'title', w.title, 'state', w.state, 'dead_letter', todo_dead_letter(w.state, w.next_retry_at),
                   'waiting', w.waits > 0, 'ended', todo_ended(w.state, w.next_retry_at),
                   'last_outcome', (SELECT a.outcome FROM attempts a WHERE a.todo_id = w.id AND a.seq = w.attempts_total)) AS j
            FROM todo_deps d JOIN todos w ON w.id = d.todo_id
           WHERE d.after_id = t.id AND todo_in_scope(w.endpoint_id, w.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
           ORDER BY w.created_at, w.id LIMIT %(dependents_max)s::int) w) AS plan_dependents,
       (SELECT count(*) FROM todo_deps d WHERE d.after_id = t.id) AS dependents_total
  FROM todos t
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s);

-- name: todos_in_scope
-- description: Which of these ids are todos in the caller's scope: which todo an add's after named that is not the caller's
SELECT t.id FROM todos t
 WHERE t.id = ANY(%(ids)s::text[]) AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s);

-- name: todo_list_by_created
-- description: A page of the agent's todos matching the list's filters, newest created first
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at,
       t.updated_at, t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting FROM todos t WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR todo_dead_letter(t.state, t.next_retry_at))
   AND CASE WHEN %(priority)s::smallint IS NULL THEN true ELSE t.priority = %(priority)s::smallint END
   AND CASE WHEN %(key)s::text IS NULL THEN true ELSE t.key = %(key)s::text END
   AND CASE WHEN %(scheduled)s::boolean IS NULL THEN true  -- false: ready (not waiting either)
            ELSE t.state = 'pending' AND t.scheduled = %(scheduled)s::boolean
                 AND (%(scheduled)s::boolean OR t.waits = 0) END
   AND CASE WHEN %(waiting)s::boolean IS NULL THEN true
            ELSE t.state = 'pending' AND (t.waits > 0) = %(waiting)s::boolean END
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.created_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s;

-- name: todo_list_by_updated
-- description: A page of the agent's todos matching the list's filters, newest updated first
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at,
       t.updated_at, t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting FROM todos t WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s) AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR todo_dead_letter(t.state, t.next_retry_at))
   AND CASE WHEN %(priority)s::smallint IS NULL THEN true ELSE t.priority = %(priority)s::smallint END
   AND CASE WHEN %(key)s::text IS NULL THEN true ELSE t.key = %(key)s::text END
   AND CASE WHEN %(scheduled)s::boolean IS NULL THEN true  -- false: ready (not waiting either)
            ELSE t.state = 'pending' AND t.scheduled = %(scheduled)s::boolean
                 AND (%(scheduled)s::boolean OR t.waits = 0) END
   AND CASE WHEN %(waiting)s::boolean IS NULL THEN true
            ELSE t.state = 'pending' AND (t.waits > 0) = %(waiting)s::boolean END
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.updated_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.updated_at DESC, t.id DESC
 LIMIT %(limit)s;

-- name: todo_list_by_created_human
-- description: A page of the human's todos matching the list's filters, newest created first, each with its newest attempt (and its current question's times, for a todo waiting for a person)
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, t.waits, l.*
  FROM (SELECT t.* FROM endpoints e CROSS JOIN LATERAL (
          SELECT t.* FROM todos t
           WHERE t.endpoint_id = e.id
             AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR todo_dead_letter(t.state, t.next_retry_at))
   AND CASE WHEN %(priority)s::smallint IS NULL THEN true ELSE t.priority = %(priority)s::smallint END
   AND CASE WHEN %(key)s::text IS NULL THEN true ELSE t.key = %(key)s::text END
   AND CASE WHEN %(scheduled)s::boolean IS NULL THEN true  -- false: ready (not waiting either)
            ELSE t.state = 'pending' AND t.scheduled = %(scheduled)s::boolean
                 AND (%(scheduled)s::boolean OR t.waits = 0) END
   AND CASE WHEN %(waiting)s::boolean IS NULL THEN true
            ELSE t.state = 'pending' AND (t.waits > 0) = %(waiting)s::boolean END
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0
        OR strpos(lower(t.key), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.created_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s) t
         WHERE e.user_id = %(user_id)s
         ORDER BY t.created_at DESC, t.id DESC
         LIMIT %(limit)s) t
  LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut,
           a.answered_at AS last_answered_at, a.question_expires_at AS last_question_expires_at,
           (SELECT q.at FROM attempt_notes q WHERE q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
               AND a.asked_n > a.waiting_n) AS last_asked_at
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 ORDER BY t.created_at DESC, t.id DESC;

-- name: todo_list_by_updated_human
-- description: A page of the human's todos matching the list's filters, newest updated first, each with its newest attempt (and its current question's times, for a todo waiting for a person)
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, t.waits, l.*
  FROM (SELECT t.* FROM todos t
         WHERE t.endpoint_id = ANY (ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
           AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR todo_dead_letter(t.state, t.next_retry_at))
   AND CASE WHEN %(priority)s::smallint IS NULL THEN true ELSE t.priority = %(priority)s::smallint END
   AND CASE WHEN %(key)s::text IS NULL THEN true ELSE t.key = %(key)s::text END
   AND CASE WHEN %(scheduled)s::boolean IS NULL THEN true  -- false: ready (not waiting either)
            ELSE t.state = 'pending' AND t.scheduled = %(scheduled)s::boolean
                 AND (%(scheduled)s::boolean OR t.waits = 0) END
   AND CASE WHEN %(waiting)s::boolean IS NULL THEN true
            ELSE t.state = 'pending' AND (t.waits > 0) = %(waiting)s::boolean END
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0
        OR strpos(lower(t.key), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)
   AND (%(after_at)s::timestamptz IS NULL OR (t.updated_at, t.id) < (%(after_at)s, %(after_id)s::text))
 ORDER BY t.updated_at DESC, t.id DESC
 LIMIT %(limit)s) t
  LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut,
           a.answered_at AS last_answered_at, a.question_expires_at AS last_question_expires_at,
           (SELECT q.at FROM attempt_notes q WHERE q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
               AND a.asked_n > a.waiting_n) AS last_asked_at
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 ORDER BY t.updated_at DESC, t.id DESC;

-- name: todo_list_sorted_human
-- description: A page of the human's todos matching the list's filters in one column's order, either way (each column's order as a text key in byte order: titles case-folded, states in their declared order, numbers and times zero-padded; then the id), each with its newest attempt (and its current question's times, for a todo waiting for a person); no index orders them, so it reads all the human's matching todos
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, t.waits,
       t.sort_key, l.*
  FROM (SELECT k.* FROM (
          SELECT t.*, (CASE %(order)s
                 WHEN 'title' THEN lower(t.title)
                 WHEN 'queue' THEN t.queue
                 WHEN 'state' THEN lpad(array_position(enum_range(NULL::todo_state), t.state)::text, 2, '0')
                 WHEN 'attempt' THEN lpad(t.attempt::text, 10, '0')
                 WHEN 'last' THEN coalesce((SELECT a.outcome::text FROM attempts a
                                             WHERE a.todo_id = t.id AND a.seq = t.attempts_total), '')
                 WHEN 'holder' THEN coalesce(t.owner, '')
                 WHEN 'deadline' THEN coalesce(to_char(coalesce(t.lease_expires_at, t.next_retry_at) AT TIME ZONE 'UTC',
                                                       'YYYY-MM-DD"T"HH24:MI:SS.US'), '')
                 WHEN 'priority' THEN t.priority::text || to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
                 WHEN 'created' THEN to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
                 WHEN 'updated' THEN to_char(t.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
               END) COLLATE "C" AS sort_key
            FROM todos t
           WHERE t.endpoint_id = ANY (ARRAY(SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s))
             AND (%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR todo_dead_letter(t.state, t.next_retry_at))
   AND CASE WHEN %(priority)s::smallint IS NULL THEN true ELSE t.priority = %(priority)s::smallint END
   AND CASE WHEN %(key)s::text IS NULL THEN true ELSE t.key = %(key)s::text END
   AND CASE WHEN %(scheduled)s::boolean IS NULL THEN true  -- false: ready (not waiting either)
            ELSE t.state = 'pending' AND t.scheduled = %(scheduled)s::boolean
                 AND (%(scheduled)s::boolean OR t.waits = 0) END
   AND CASE WHEN %(waiting)s::boolean IS NULL THEN true
            ELSE t.state = 'pending' AND (t.waits > 0) = %(waiting)s::boolean END
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0
        OR strpos(lower(t.key), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0)) k
         WHERE %(after_key)s::text IS NULL
            OR CASE WHEN %(descending)s THEN (k.sort_key, k.id) < (%(after_key)s::text COLLATE "C", %(after_id)s::text)
                    ELSE (k.sort_key, k.id) > (%(after_key)s::text COLLATE "C", %(after_id)s::text) END
         ORDER BY CASE WHEN %(descending)s THEN k.sort_key END DESC, CASE WHEN %(descending)s THEN k.id END DESC,
                  k.sort_key, k.id
         LIMIT %(limit)s) t
  LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut,
           a.answered_at AS last_answered_at, a.question_expires_at AS last_question_expires_at,
           (SELECT q.at FROM attempt_notes q WHERE q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
               AND a.asked_n > a.waiting_n) AS last_asked_at
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 ORDER BY CASE WHEN %(descending)s THEN t.sort_key END DESC, CASE WHEN %(descending)s THEN t.id END DESC,
          t.sort_key, t.id;

-- name: todo_list_row_human
-- description: One of the human's todos as a list row (with its newest attempt and its current question's times) and whether it matches the list's filters (a live stream's changed todo)
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter,
       t.payload, t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at,
       t.priority, t.run_at, t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, t.waits, l.*,
       coalesce((%(state)s::todo_state IS NULL OR t.state = %(state)s::todo_state)
   AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
   AND (NOT %(dead_letter)s OR todo_dead_letter(t.state, t.next_retry_at))
   AND CASE WHEN %(priority)s::smallint IS NULL THEN true ELSE t.priority = %(priority)s::smallint END
   AND CASE WHEN %(key)s::text IS NULL THEN true ELSE t.key = %(key)s::text END
   AND CASE WHEN %(scheduled)s::boolean IS NULL THEN true  -- false: ready (not waiting either)
            ELSE t.state = 'pending' AND t.scheduled = %(scheduled)s::boolean
                 AND (%(scheduled)s::boolean OR t.waits = 0) END
   AND CASE WHEN %(waiting)s::boolean IS NULL THEN true
            ELSE t.state = 'pending' AND (t.waits > 0) = %(waiting)s::boolean END
   AND (%(title)s::text IS NULL OR strpos(lower(t.title), lower(%(title)s::text)) > 0
        OR strpos(lower(t.key), lower(%(title)s::text)) > 0)
   AND (%(payload_key)s::text IS NULL OR CASE WHEN %(payload_value)s::text IS NULL THEN t.payload ? %(payload_key)s
        ELSE t.payload ->> %(payload_key)s::text = %(payload_value)s::text END)
   AND (%(claimant)s::text IS NULL OR strpos(lower((
        SELECT a.claimant FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total)),
        lower(%(claimant)s::text)) > 0), false) AS matches
  FROM todos t LEFT JOIN LATERAL (
    SELECT a.seq AS last_seq, a.outcome::text AS last_outcome, a.claimant AS last_claimant,
           left(s.line, 80) AS last_summary, length(s.line) > 80 AS last_summary_cut,
           a.answered_at AS last_answered_at, a.question_expires_at AS last_question_expires_at,
           (SELECT q.at FROM attempt_notes q WHERE q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n
               AND a.asked_n > a.waiting_n) AS last_asked_at
      FROM attempts a CROSS JOIN LATERAL (SELECT btrim(regexp_replace(a.summary, '\s+', ' ', 'g')) AS line) s
     WHERE a.todo_id = t.id AND a.seq = t.attempts_total) l ON true
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s);

-- name: todo_classify_miss
-- description: Classifies a transition that missed: the todo as the caller may see it, or nothing
SELECT t.state::text AS state, t.owner, t.lease_expires_at <= coalesce(%(now)s::timestamptz, now()) AS lapsed,
       t.next_retry_at, t.queue,
       t.queue = ANY(ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = %(user_id)s)) AS paused,
       t.scheduled AND t.run_at > coalesce(%(now)s::timestamptz, now()) AS scheduled, t.run_at,
       l.max_held, l.max_held - queue_held(l.user_id, l.queue) AS room, t.waits,
       CASE WHEN t.waits > 0 THEN (
         SELECT json_agg(json_build_object('id', d.id, 'state', d.state,
                                           'dead_letter', todo_dead_letter(d.state, d.next_retry_at))
                         ORDER BY array_position(t.after, d.id))
           FROM todos d WHERE d.id = ANY(t.after) AND d.state <> 'done') END AS waiting_for
  FROM todos t
  LEFT JOIN queue_limits l ON l.queue = t.queue
   AND l.user_id = (SELECT e.user_id FROM endpoints e WHERE e.id = t.endpoint_id)
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s);

-- name: attempt_summary
-- description: The exact attempt summary of one todo for the in-process hooks, system-wide
SELECT attempt_summary(t.id, t.attempts_total, t.attempts_pruned, t.pruned_outcomes, NULL, NULL) AS summary
  FROM todos t WHERE t.id = %(id)s;

-- name: todos_ready
-- description: The doorbell heartbeat: each listening endpoint's next claimable todos outside paused queues
SELECT t.id, t.endpoint_id::text AS endpoint_id, t.queue
  FROM endpoints e
  CROSS JOIN LATERAL (
    SELECT t.id, t.endpoint_id, t.queue FROM todos t
     WHERE t.endpoint_id = e.id AND t.state = 'pending' AND NOT t.scheduled AND t.waits = 0
       AND (%(queue)s::text IS NULL OR t.queue = %(queue)s)
       AND t.queue <> ALL(ARRAY(SELECT p.queue FROM queue_pauses p WHERE p.user_id = e.user_id))
     ORDER BY t.priority, t.created_at, t.id LIMIT %(limit)s) t
 WHERE e.id = ANY(%(endpoint_ids)s::uuid[]);

-- name: todo_answer_choices
-- description: The current question of an interrupted todo of the human's: when it was asked (null: none) and the choices it offers (an empty array: none), to say why an answer missed
SELECT q.at AS asked_at, coalesce(q.choices, '[]'::jsonb) AS choices
  FROM todos t
  JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total AND a.outcome IS NULL
  LEFT JOIN attempt_notes q ON q.todo_id = a.todo_id AND q.seq = a.seq AND q.n = a.asked_n AND a.asked_n > a.waiting_n
 WHERE t.id = %(id)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
   AND t.state = ANY(%(from_states)s::todo_state[]);

-- name: todos_still_pending
-- description: Which of these todos are still pending and not scheduled: the doorbell rings more listeners for those the ones it rang did not claim
SELECT t.id FROM todos t WHERE t.id = ANY(%(ids)s::text[]) AND t.state = 'pending' AND NOT t.scheduled AND t.waits = 0;

-- name: todo_list_a2a
-- description: The ids of the caller's todos added over A2A (in one context, in one state, when given), newest first, keyset-paginated
SELECT t.id, t.created_at FROM todos t
 WHERE t.endpoint_id = %(endpoint_id)s AND t.queue = ANY(%(queues)s::text[]) AND t.a2a_context IS NOT NULL
   AND (%(context)s::text IS NULL OR t.a2a_context = %(context)s::text)
   AND (%(states)s::todo_state[] IS NULL OR t.state = ANY(%(states)s::todo_state[]))
   AND (%(after_at)s::timestamptz IS NULL OR (t.created_at, t.id) < (%(after_at)s::timestamptz, %(after_id)s::text))
 ORDER BY t.created_at DESC, t.id DESC
 LIMIT %(limit)s;
