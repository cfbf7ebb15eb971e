-- Users and endpoints (board/store/accounts.py). An endpoint's revocation dead-letters each of its
-- held todos, closing the open attempt revoked/dead_lettered, and tells every process to
-- drop the endpoint from its cache of authenticated tokens.

-- name: user_insert
-- description: Creates a user
INSERT INTO users (username, password_hash) VALUES (%(username)s, %(password_hash)s) RETURNING id, username;

-- name: user_by_name
-- description: A user with its password hash, by username
SELECT id, username, password_hash FROM users WHERE username = %(username)s AND kind = 'person';

-- name: user_by_id
-- description: A user by id
SELECT id, username FROM users WHERE id = %(id)s;

-- name: endpoint_insert
-- description: Creates an endpoint (an agent's token) of a user
-- (nothing when a live endpoint of the same team has the agent id: a team's endpoints share its
-- todos, and an agent id names one holder among them)
INSERT INTO endpoints (user_id, name, agent_id, token_hash, scope, queues, space_id)
SELECT %(user_id)s, %(name)s, %(agent_id)s, %(token_hash)s, %(scope)s, %(queues)s, s.id
  FROM (SELECT (SELECT s.id FROM endpoints s WHERE s.user_id = %(user_id)s AND s.kind = 'team') AS id) s
 WHERE s.id IS NULL OR NOT EXISTS (SELECT FROM endpoints o WHERE o.user_id = %(user_id)s AND o.agent_id = %(agent_id)s
                                      AND o.revoked_at IS NULL AND o.kind <> 'team')
RETURNING id::text, user_id, name, agent_id, scope, queues, created_at;

-- name: endpoint_auth
-- description: The live endpoint of a token hash (a vended endpoint's token, or an unexpired access token of an OAuth grant), and whether its last use is older than a minute
SELECT id::text AS id, user_id, agent_id, scope, queues, space_id::text AS space_id,
       (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') AS stale_use,
       NULL::float8 AS expires_at, NULL::text AS resource
  FROM endpoints WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
UNION ALL
SELECT e.id::text, e.user_id, e.agent_id, t.scope, e.queues, e.space_id::text,
       (e.last_used_at IS NULL OR e.last_used_at < now() - interval '1 minute'),
       extract(epoch FROM t.expires_at)::float8, t.resource
  FROM oauth_tokens t JOIN endpoints e ON e.id = t.endpoint_id
 WHERE t.token_hash = %(token_hash)s AND t.kind = 'access' AND t.expires_at > now() AND e.revoked_at IS NULL;

-- name: endpoint_touch
-- description: Records an endpoint's use
UPDATE endpoints SET last_used_at = now() WHERE id = %(id)s RETURNING id;

-- name: endpoints_of_user
-- description: A user's endpoints, newest first
SELECT id::text AS id, name, agent_id, scope, queues, created_at, last_used_at, revoked_at,
       kind, client_id, client_name, client_verified
  FROM endpoints WHERE user_id = %(user_id)s AND kind <> 'team' ORDER BY created_at DESC;

-- name: endpoint_owner
-- description: The user an endpoint belongs to
SELECT user_id FROM endpoints WHERE id = %(id)s;

-- name: endpoint_revoke
-- description: Revokes an endpoint and dead-letters each of its held todos, closing the open attempt revoked
WITH ep AS (
  UPDATE endpoints SET revoked_at = coalesce(%(now)s::timestamptz, now())
   WHERE id = %(endpoint_id)s AND revoked_at IS NULL AND kind <> 'team'
     AND (%(user_id)s::bigint IS NULL OR user_id = %(user_id)s)
  RETURNING id, space_id
),
cand AS (  -- its held todos: a team endpoint's are those of the team's whose open attempt it claimed
  SELECT t.id, t.attempts_total FROM todos t, ep
   WHERE t.endpoint_id = coalesce(ep.space_id, ep.id)
     AND t.state IN ('claimed', 'input_required', 'auth_required')
     AND (ep.space_id IS NULL OR EXISTS (SELECT FROM attempts a WHERE a.todo_id = t.id AND a.seq = t.attempts_total
                                            AND a.outcome IS NULL AND a.claimer_endpoint_id = ep.id))
   FOR UPDATE OF t
),
closed AS (
  UPDATE attempts a SET ended_at = coalesce(%(now)s::timestamptz, now()), outcome = 'revoked',
      disposition = 'dead_lettered'
    FROM cand
   WHERE a.todo_id = cand.id AND a.seq = cand.attempts_total AND a.outcome IS NULL
  RETURNING a.todo_id, a.seq, a.attempt, a.outcome::text AS outcome, a.disposition::text AS disposition,
            a.summary, a.summary_truncated, a.artifact, a.claimant, attempt_died(a.outcome) AS died
),
upd AS (
  UPDATE todos t SET state = 'failed', owner = NULL, lease_expires_at = NULL, next_retry_at = NULL,
                     updated_at = coalesce(%(now)s::timestamptz, now())
    FROM closed WHERE t.id = closed.todo_id
  RETURNING t.*
),
counted AS (  -- todo_counts (migration 0010)
  INSERT INTO todo_counts (endpoint_id, queue, kind, n)
  SELECT u.endpoint_id, u.queue, 'dead', count(*) FROM upd u WHERE todo_dead_letter(u.state, u.next_retry_at) GROUP BY 1, 2
  RETURNING 1
),
outbox AS (
  INSERT INTO hook_events (event, url, todo_id, payload)
  SELECT h.* FROM upd u JOIN closed c ON c.todo_id = u.id, hook_rows(%(hook_urls)s::text[],
      coalesce(%(now)s::timestamptz, now()), hook_event(u.state, u.next_retry_at), u.id, u.queue, u.title, u.state,
      u.attempt, u.max_attempts, u.attempts_total, u.endpoint_id, u.attempts_pruned, u.pruned_outcomes,
      c.seq, c.attempt, c.outcome, c.died, c.summary, c.artifact, u.priority) h
  RETURNING 1
)
SELECT (SELECT count(*) FROM ep) AS revoked,
       -- every process drops the endpoint from its cache of authenticated tokens
       (SELECT pg_notify('switchboard_v1', json_build_object('kind', 'endpoint_revoked', 'endpoint', ep.id)::text)
          FROM ep) AS revoked_notice,
       coalesce((SELECT json_agg(json_build_object(
          'todo', row_to_json(upd), 'closed', row_to_json(c), 'n',
              CASE WHEN EXISTS (SELECT FROM watchers w JOIN endpoints e ON e.user_id = w.user_id WHERE e.id = upd.endpoint_id)
       THEN todo_notify(upd.id, upd.endpoint_id, upd.queue, upd.state, 'revoked') END))
         FROM upd JOIN closed c ON c.todo_id = upd.id), '[]'::json) AS todos;

-- name: agents_of_user
-- description: The Agents page: each of the human's endpoints with the open attempts it holds (its held todos through todos_claimed_idx and todos_interrupted_idx, each one's open attempt by key, with its current question's times), oldest claim first; live endpoints first
SELECT e.id::text AS id, e.name, e.agent_id, e.kind, e.client_name, e.queues, e.created_at, e.last_used_at,
       e.revoked_at, coalesce(h.held, '[]'::json) AS held
  FROM endpoints e
  LEFT JOIN LATERAL (
    SELECT json_agg(json_build_object(
             'todo_id', t.id, 'title', t.title, 'queue', t.queue, 'state', t.state, 'seq', a.seq,
             'claimant', a.claimant, 'claimed_at', a.claimed_at, 'last_heartbeat_at', a.last_heartbeat_at,
             'last_note_at', a.last_note_at, 'lease_expires_at', a.lease_expires_at,
             'answered_at', a.answered_at, 'question_expires_at', a.question_expires_at,
             'asked_at', (SELECT q.at FROM attempt_notes q WHERE q.todo_id = a.todo_id AND q.seq = a.seq
                             AND q.n = a.asked_n AND a.asked_n > a.waiting_n)) ORDER BY a.claimed_at, t.id) AS held
      FROM (SELECT c.id FROM todos c WHERE c.endpoint_id = coalesce(e.space_id, e.id) AND c.state = 'claimed'
            UNION ALL
            SELECT i.id FROM todos i WHERE i.endpoint_id = coalesce(e.space_id, e.id)
               AND i.state IN ('input_required', 'auth_required')) k
      JOIN todos t ON t.id = k.id
      JOIN attempts a ON a.todo_id = t.id AND a.seq = t.attempts_total
     WHERE a.outcome IS NULL AND a.claimer_kind = 'endpoint' AND a.claimer_endpoint_id = e.id) h ON true
 WHERE e.user_id = %(user_id)s AND e.kind <> 'team'
 ORDER BY e.revoked_at IS NOT NULL, e.created_at DESC;
