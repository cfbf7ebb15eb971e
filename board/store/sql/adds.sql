-- Adds: -> pending, with hook events. A continuation continues a todo of the caller's that
-- has ended (todo_ended) and has no successor yet, in one statement: the predecessor is
-- locked FOR SHARE, so a manual retry or a deletion waits until the insert commits; two adds
-- continuing one todo race on todo_successors' primary key, and the loser inserts nothing.
-- A human's continuation goes on the predecessor's endpoint, so a chain never spans
-- endpoints. A human's add goes through one of their live endpoints granted the queue,
-- locked FOR SHARE so a revocation committing meanwhile is waited for.
--
-- An add may carry a priority, a run_at (a future one leaves the todo scheduled: pending, not
-- claimable, notified "scheduled" rather than "added" so the doorbell stays quiet, with no
-- todo.ready hook until it falls due) and a key. A key held by a live todo of the endpoint's
-- queue makes the insert do nothing (ON CONFLICT on the unique todos_live_key, so however
-- many adds race exactly one inserts); the store then reads that todo (todo_by_key) in a
-- statement of its own, which sees the winner's commit, and adds again if it has ended since.
--
-- add_todos' items may wait for other todos (after, migration 0016): the caller's todos
-- named outside the batch are locked and marked waited_on in `named`, the same row lock
-- their complete takes; each item's waits counts what it names that is not done (an
-- earlier item of the batch never is). When a todo named is not the caller's, the
-- statement inserts nothing and the store says which. A waiting todo writes no todo.ready
-- hook and is notified "waiting", which does not ring the doorbell. An agent's add_todo
-- naming after runs as a batch of one. The store gives each item its id, so an item can name
-- an earlier one ("#0") and a continuing item's link names it.
--
-- So an agent's add and a human's stay two statements each (todo_add, todo_add_continuing
-- and their _human forms): the agent's endpoint was checked live when it authenticated, and
-- taking the human's FOR SHARE lock on it at every add would make every add of one endpoint
-- queue on that row's lock (a multixact per concurrent add); the human's add is rare.

-- name: todo_add
-- description: An agent adds a todo: -> pending, with hook events (over A2A: its client and context, else null)
WITH upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, routing, max_attempts, priority, run_at, scheduled, key,
                          created_at, updated_at, a2a_client, a2a_context)
  VALUES (%(endpoint_id)s, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, %(priority)s,
          %(run_at)s::timestamptz, coalesce(%(run_at)s::timestamptz > coalesce(%(now)s::timestamptz, now()), false),
          %(key)s::text, coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()),
          %(a2a_client)s::text, %(a2a_context)s::text)
  ON CONFLICT DO NOTHING  -- the key is live: the store returns that todo
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN NOT u.scheduled THEN hook_event(u.state, u.next_retry_at) END, u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority, upd.run_at,
       upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       CASE WHEN upd.scheduled  -- every process's due timer hears a scheduled todo, watched or not
              OR EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.scheduled THEN 'scheduled' ELSE 'added' END) END FROM upd;

-- name: todo_add_human
-- description: The owning human adds a todo through one of their live endpoints granted the queue (the one named, else the oldest)
WITH ep AS (  -- a team's todos belong to its space endpoint
  SELECT coalesce(e.space_id, e.id) AS id FROM endpoints e
   WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL AND %(queue)s::text = ANY(e.queues)
     AND (%(endpoint_id)s::uuid IS NULL OR e.id = %(endpoint_id)s::uuid)
   ORDER BY e.created_at, e.id
   LIMIT 1
   FOR SHARE OF e
),
upd AS (
  INSERT INTO todos AS t (endpoint_id, queue, title, payload, routing, max_attempts, priority, run_at, scheduled, key,
                          created_at, updated_at)
  SELECT ep.id, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s, %(priority)s,
         %(run_at)s::timestamptz, coalesce(%(run_at)s::timestamptz > coalesce(%(now)s::timestamptz, now()), false),
         %(key)s::text, coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()) FROM ep
  ON CONFLICT DO NOTHING  -- the key is live: the store returns that todo
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN NOT u.scheduled THEN hook_event(u.state, u.next_retry_at) END, u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority, upd.run_at,
       upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting,
       CASE WHEN upd.scheduled  -- every process's due timer hears a scheduled todo, watched or not
              OR EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.scheduled THEN 'scheduled' ELSE 'added' END) END FROM upd;

-- name: todo_add_continuing
-- description: An agent adds a todo continuing one of its ended todos that has no successor yet
WITH pred AS (
  SELECT t.id FROM todos t
   WHERE t.id = %(continues)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND todo_ended(t.state, t.next_retry_at)
   FOR SHARE OF t
),
link AS (
  INSERT INTO todo_successors (todo_id, successor_id)
  SELECT pred.id, gen_random_uuid()::text FROM pred
  ON CONFLICT (todo_id) DO NOTHING
  RETURNING todo_id, successor_id
),
upd AS (
  INSERT INTO todos AS t (id, endpoint_id, queue, title, payload, routing, max_attempts, continues_id, priority,
                          run_at, scheduled, created_at, updated_at, a2a_client, a2a_context)
  SELECT link.successor_id, %(endpoint_id)s, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s,
         link.todo_id, %(priority)s, %(run_at)s::timestamptz,
         coalesce(%(run_at)s::timestamptz > coalesce(%(now)s::timestamptz, now()), false),
         coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()),
         %(a2a_client)s::text, %(a2a_context)s::text
    FROM link
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN NOT u.scheduled THEN hook_event(u.state, u.next_retry_at) END, u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority, upd.run_at,
       upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting, upd.continues_id,
       CASE WHEN upd.scheduled  -- every process's due timer hears a scheduled todo, watched or not
              OR EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.scheduled THEN 'scheduled' ELSE 'added' END) END FROM upd;

-- name: todo_add_continuing_human
-- description: The owning human adds a todo continuing one of their ended todos, on the predecessor's endpoint
WITH pred AS (
  SELECT t.id, t.endpoint_id FROM todos t
   WHERE t.id = %(continues)s
     AND t.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.user_id = %(user_id)s)
     AND todo_ended(t.state, t.next_retry_at)
   FOR SHARE OF t
),
ep AS (
  SELECT pred.endpoint_id AS id FROM endpoints e JOIN pred ON coalesce(e.space_id, e.id) = pred.endpoint_id
   WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL AND %(queue)s::text = ANY(e.queues)
     AND (%(endpoint_id)s::uuid IS NULL OR e.id = %(endpoint_id)s::uuid)
   LIMIT 1
   FOR SHARE OF e
),
link AS (
  INSERT INTO todo_successors (todo_id, successor_id)
  SELECT pred.id, gen_random_uuid()::text FROM pred, ep
  ON CONFLICT (todo_id) DO NOTHING
  RETURNING todo_id, successor_id
),
upd AS (
  INSERT INTO todos AS t (id, endpoint_id, queue, title, payload, routing, max_attempts, continues_id, priority,
                          run_at, scheduled, created_at, updated_at)
  SELECT link.successor_id, ep.id, %(queue)s, %(title)s, %(payload)s, %(routing)s, %(max_attempts)s,
         link.todo_id, %(priority)s, %(run_at)s::timestamptz,
         coalesce(%(run_at)s::timestamptz > coalesce(%(now)s::timestamptz, now()), false),
         coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
    FROM ep, link
  RETURNING t.*
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN NOT u.scheduled THEN hook_event(u.state, u.next_retry_at) END, u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority, upd.run_at,
       upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting, upd.continues_id,
       CASE WHEN upd.scheduled  -- every process's due timer hears a scheduled todo, watched or not
              OR EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.scheduled THEN 'scheduled' ELSE 'added' END) END FROM upd;

-- name: todo_by_key
-- description: The live todo holding a key in a queue of the caller's: what an add that found the key taken returns
SELECT t.id, t.endpoint_id, t.queue, t.title, t.state::text AS state, t.owner, t.attempt, t.max_attempts,
       t.lease_expires_at, t.next_retry_at, todo_dead_letter(t.state, t.next_retry_at) AS dead_letter, t.payload,
       t.routing, t.result, t.attempts_total, t.attempts_pruned, t.created_at, t.updated_at, t.priority, t.run_at,
       t.key, t.after, t.schedule_id::text AS schedule_id, t.waits > 0 AS waiting, t.continues_id
  FROM todos t
 WHERE t.endpoint_id = ANY(CASE WHEN %(endpoint_id)s::uuid IS NULL THEN user_endpoints(%(user_id)s)
                                ELSE ARRAY[%(endpoint_id)s::uuid] END)
   AND t.queue = %(queue)s AND t.key = %(key)s AND NOT todo_ended(t.state, t.next_retry_at);

-- name: todo_add_human_endpoint
-- description: Whether the human has a live endpoint granted the queue (the one named, if any): why their keyed add added nothing
SELECT e.id FROM endpoints e
 WHERE e.user_id = %(user_id)s AND e.revoked_at IS NULL AND %(queue)s::text = ANY(e.queues)
   AND (%(endpoint_id)s::uuid IS NULL OR e.id = %(endpoint_id)s::uuid)
 LIMIT 1;

-- name: todo_continues_miss
-- description: Classifies a continuation that added nothing: the predecessor's state, whether it ended, its successor
SELECT t.state::text AS state,
       todo_ended(t.state, t.next_retry_at) AS ended,
       (SELECT s.successor_id FROM todo_successors s WHERE s.todo_id = t.id) AS successor
  FROM todos t
 WHERE t.id = %(continues)s AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s);

-- name: todos_add
-- description: An agent adds several todos at once: each -> pending in the order given (a continuing one linked to its predecessor), with hook events, one notification per todo
-- add_todos: many todos in one statement, all or nothing. The items come as one JSON array
-- (ord is the item's index); created_at steps one microsecond per item so claim_next takes
-- them in the order given. A continuing item is linked as todo_add_continuing links one; an
-- item whose predecessor is not the caller's, is live or was continued already gets no link
-- and is not inserted, so the store compares the rows returned with the items sent and rolls
-- the whole transaction back on a shortfall (no notification is delivered from it).
WITH item AS (
  SELECT x.ord, x.id, x.queue, x.title, x.payload, x.routing, x.max_attempts, x.continues, x.priority, x.run_at,
         x.key, x.after, x.waited_on
    FROM jsonb_to_recordset(%(todos)s::jsonb) AS x(ord int, id text, queue text, title text, payload jsonb,
                                                  routing jsonb, max_attempts int, continues text, priority smallint,
                                                  run_at timestamptz, key text, after text[], waited_on boolean)
),
named AS (  -- the caller's todos outside the batch that items wait for, each marked waited_on under its row lock
  UPDATE todos t SET waited_on = true
    FROM (SELECT t.id FROM todos t
           WHERE t.id = ANY(%(after)s::text[])
             AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
           ORDER BY t.id  -- one lock order, so two adds naming the same todos never deadlock
           FOR UPDATE OF t) l
   WHERE t.id = l.id
  RETURNING t.id, t.state = 'done' AS done
),
pred AS (
  SELECT t.id FROM todos t
   WHERE t.id = ANY(%(continues)s::text[]) AND todo_in_scope(t.endpoint_id, t.queue, %(endpoint_id)s, %(queues)s, %(user_id)s)
     AND todo_ended(t.state, t.next_retry_at)
   FOR SHARE OF t
),
link AS (
  INSERT INTO todo_successors (todo_id, successor_id)
  SELECT pred.id, i.id FROM pred JOIN item i ON i.continues = pred.id
  ON CONFLICT (todo_id) DO NOTHING
  RETURNING todo_id, successor_id
),
upd AS (
  INSERT INTO todos AS t (id, endpoint_id, queue, title, payload, routing, max_attempts, continues_id, priority,
                          run_at, scheduled, key, after, waits, waited_on, created_at, updated_at)
  SELECT i.id, %(endpoint_id)s, i.queue, i.title, i.payload, i.routing, i.max_attempts, link.todo_id, i.priority,
         i.run_at, coalesce(i.run_at > coalesce(%(now)s::timestamptz, now()), false), i.key, i.after,
         (SELECT count(*) FROM unnest(i.after) a(id) WHERE NOT EXISTS (SELECT FROM named n WHERE n.id = a.id AND n.done)),
         i.waited_on,
         coalesce(%(now)s::timestamptz, now()) + i.ord * interval '1 microsecond',
         coalesce(%(now)s::timestamptz, now()) + i.ord * interval '1 microsecond'
    FROM item i LEFT JOIN link ON link.todo_id = i.continues
   WHERE (i.continues IS NULL OR link.todo_id IS NOT NULL)
     AND (SELECT count(*) FROM named) = cardinality(%(after)s::text[])  -- every todo named is the caller's
  ON CONFLICT DO NOTHING  -- a live key: the store returns that todo
  RETURNING t.*
),
deps AS (
  INSERT INTO todo_deps (todo_id, after_id) SELECT u.id, a.id FROM upd u, unnest(u.after) a(id)
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u, hook_rows(%(hook_urls)s::text[], coalesce(%(now)s::timestamptz, now()),
      CASE WHEN NOT u.scheduled AND u.waits = 0 THEN hook_event(u.state, u.next_retry_at) END, u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, priority => u.priority,
      after => coalesce(u.after, '{}'), schedule_id => u.schedule_id) h
  RETURNING 1
)
SELECT upd.id, upd.endpoint_id, upd.queue, upd.title, upd.state::text AS state, upd.owner, upd.attempt,
       upd.max_attempts, upd.lease_expires_at, upd.next_retry_at,
       todo_dead_letter(upd.state, upd.next_retry_at) AS dead_letter, upd.payload, upd.routing,
       upd.result, upd.attempts_total, upd.attempts_pruned, upd.created_at, upd.updated_at, upd.priority, upd.run_at,
       upd.key, upd.after, upd.schedule_id::text AS schedule_id, upd.waits > 0 AS waiting, upd.continues_id,
       CASE WHEN upd.scheduled  -- every process's due timer hears a scheduled todo, watched or not
              OR EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state,
                        CASE WHEN upd.scheduled THEN 'scheduled' WHEN upd.waits > 0 THEN 'waiting'
                             ELSE 'added' END) END FROM upd;
