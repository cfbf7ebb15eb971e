-- OAuth grants (board/store/grants.py): registered clients, authorization codes and the
-- access and refresh tokens of grants. A grant is an endpoint of kind 'oauth' (migration
-- 0006), created when its code is exchanged; revoking it is endpoint_revoke (accounts.sql).
-- Codes and tokens are stored as SHA-256 only.

-- name: oauth_client_insert
-- description: Registers a client (dynamic registration)
INSERT INTO oauth_clients (client_id, metadata, secret_hash)
VALUES (%(client_id)s, %(metadata)s, %(secret_hash)s)
RETURNING client_id;

-- name: oauth_client_get
-- description: A registered client's metadata and secret hash
SELECT client_id, metadata, secret_hash FROM oauth_clients WHERE client_id = %(client_id)s;

-- name: oauth_code_insert
-- description: Records what a human approved on the consent screen, under a new code's hash
INSERT INTO oauth_codes (code_hash, client_id, client_name, client_verified, user_id, agent_id, scope, queues,
                         redirect_uri, redirect_uri_explicit, code_challenge, resource, expires_at)
VALUES (%(code_hash)s, %(client_id)s, %(client_name)s, %(client_verified)s, %(user_id)s, %(agent_id)s, %(scope)s,
        %(queues)s, %(redirect_uri)s, %(redirect_uri_explicit)s, %(code_challenge)s, %(resource)s,
        now() + make_interval(secs => %(ttl_seconds)s))
RETURNING client_id;

-- name: oauth_code_get
-- description: An authorization code by hash, whether or not it was used (a second use revokes its grant)
SELECT client_id, scope, redirect_uri, redirect_uri_explicit, code_challenge, resource,
       extract(epoch FROM expires_at)::float8 AS expires_at, used_at IS NOT NULL AS used,
       endpoint_id::text AS endpoint_id
  FROM oauth_codes WHERE code_hash = %(code_hash)s;

-- name: oauth_code_exchange
-- description: Uses a code once: updates the person's live grant of the client (verbs, queues, agent id; a team's: of the client and agent id) or creates one (an oauth endpoint), ends the grant's earlier tokens and issues a new access and refresh token; nothing when another live endpoint of the team has the agent id
WITH live AS (  -- the person's live grant of this client (one at most: endpoints_one_live_grant); a team's of
               -- this client and agent id (endpoints_one_live_team_grant)
  SELECT e.id FROM oauth_codes c
    JOIN endpoints e ON e.user_id = c.user_id AND e.client_id = c.client_id AND e.kind = 'oauth' AND e.revoked_at IS NULL
                    AND (e.space_id IS NULL OR e.agent_id = c.agent_id)
   WHERE c.code_hash = %(code_hash)s
),
taken AS (  -- another live endpoint of the team has the agent id, which names one holder among them: no grant
  SELECT FROM oauth_codes c
    JOIN endpoints o ON o.user_id = c.user_id AND o.agent_id = c.agent_id AND o.revoked_at IS NULL
                    AND o.space_id IS NOT NULL AND o.id NOT IN (SELECT id FROM live)
   WHERE c.code_hash = %(code_hash)s
),
new AS (SELECT coalesce((SELECT id FROM live), gen_random_uuid()) AS id, EXISTS (SELECT FROM live) AS existing),
code AS (
  UPDATE oauth_codes SET used_at = now(), endpoint_id = (SELECT id FROM new)
   WHERE code_hash = %(code_hash)s AND used_at IS NULL AND expires_at > now() AND NOT EXISTS (SELECT FROM taken)
  RETURNING *
),
ep AS (
  INSERT INTO endpoints AS e (id, user_id, name, agent_id, kind, client_id, client_name, client_verified, scope, queues,
                              space_id)
  SELECT (SELECT id FROM new), user_id, left(client_name, 100), agent_id, 'oauth', client_id, client_name,
         client_verified, scope, queues,
         (SELECT s.id FROM endpoints s WHERE s.user_id = code.user_id AND s.kind = 'team')  -- a grant for a team
    FROM code
  ON CONFLICT (id) DO UPDATE SET name = excluded.name, agent_id = excluded.agent_id,
         client_name = excluded.client_name, client_verified = excluded.client_verified, scope = excluded.scope,
         queues = excluded.queues
   WHERE e.revoked_at IS NULL
  RETURNING id, scope
),
ended AS (  -- the grant's earlier tokens (the new ones are not in this statement's snapshot)
  DELETE FROM oauth_tokens o USING ep WHERE o.endpoint_id = ep.id RETURNING 1
),
tokens AS (
  INSERT INTO oauth_tokens (token_hash, kind, endpoint_id, scope, resource, expires_at)
  SELECT t.hash, t.kind, ep.id, ep.scope, code.resource, now() + make_interval(secs => t.ttl)
    FROM ep CROSS JOIN code
   CROSS JOIN (VALUES (%(access_hash)s::bytea, 'access', %(access_ttl)s::float8),
                      (%(refresh_hash)s::bytea, 'refresh', %(refresh_ttl)s::float8)) AS t(hash, kind, ttl)
  RETURNING 1
)
SELECT ep.id::text AS endpoint_id, ep.scope, (SELECT existing FROM new) AS updated,
       (SELECT count(*) FROM ended) AS ended, (SELECT count(*) FROM tokens) AS tokens,
       -- every process drops the grant's cached tokens, which carried its earlier verbs and queues
       CASE WHEN (SELECT existing FROM new) THEN pg_notify('switchboard_v1', json_build_object(
         'kind', 'endpoint_changed', 'endpoint', ep.id)::text) END AS changed_notice
  FROM ep;

-- name: oauth_refresh_get
-- description: A refresh token of a live grant by hash (expired or not), with whether it was already rotated, and if so whether within the last grace seconds
SELECT t.endpoint_id::text AS endpoint_id, e.client_id, t.scope, t.resource,
       extract(epoch FROM t.expires_at)::float8 AS expires_at, t.rotated_at IS NOT NULL AS rotated,
       coalesce(t.rotated_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(grace)s), false)
         AS in_grace
  FROM oauth_tokens t JOIN endpoints e ON e.id = t.endpoint_id
 WHERE t.token_hash = %(token_hash)s AND t.kind = 'refresh' AND e.revoked_at IS NULL;

-- name: oauth_refresh_rotate
-- description: Rotates a refresh token once: marks it used and issues a new access and refresh token of its grant
WITH old AS (
  UPDATE oauth_tokens t SET rotated_at = now()
    FROM endpoints e
   WHERE t.token_hash = %(token_hash)s AND t.kind = 'refresh' AND t.rotated_at IS NULL
     AND t.expires_at > now() AND e.id = t.endpoint_id AND e.revoked_at IS NULL
  RETURNING t.endpoint_id, t.resource
),
tokens AS (
  INSERT INTO oauth_tokens (token_hash, kind, endpoint_id, scope, resource, expires_at)
  SELECT t.hash, t.kind, old.endpoint_id, %(scope)s, old.resource, now() + make_interval(secs => t.ttl)
    FROM old
   CROSS JOIN (VALUES (%(access_hash)s::bytea, 'access', %(access_ttl)s::float8),
                      (%(refresh_hash)s::bytea, 'refresh', %(refresh_ttl)s::float8)) AS t(hash, kind, ttl)
  RETURNING 1
)
SELECT (SELECT count(*) FROM tokens) AS tokens;

-- name: oauth_refresh_repeat
-- description: A refresh token presented again within the grace after its rotation: the scope of the pair it was rotated to (derived from it, so the caller names their hashes), stored for its live grant
SELECT n.scope FROM oauth_tokens t
  JOIN endpoints e ON e.id = t.endpoint_id AND e.revoked_at IS NULL
  JOIN oauth_tokens n ON n.token_hash = %(refresh_hash)s AND n.kind = 'refresh' AND n.endpoint_id = t.endpoint_id
  JOIN oauth_tokens a ON a.token_hash = %(access_hash)s AND a.kind = 'access' AND a.endpoint_id = t.endpoint_id
 WHERE t.token_hash = %(token_hash)s AND t.kind = 'refresh'
   AND t.rotated_at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(grace)s);

-- name: oauth_access_get
-- description: An unexpired access token of a live grant by hash (for revocation)
SELECT t.endpoint_id::text AS endpoint_id, e.client_id, t.scope, t.resource,
       extract(epoch FROM t.expires_at)::float8 AS expires_at
  FROM oauth_tokens t JOIN endpoints e ON e.id = t.endpoint_id
 WHERE t.token_hash = %(token_hash)s AND t.kind = 'access' AND t.expires_at > now() AND e.revoked_at IS NULL;

-- name: oauth_prune
-- description: Retention: deletes expired tokens and codes a day past their expiry, and registered clients a day old that never completed a grant
WITH tokens AS (
  DELETE FROM oauth_tokens WHERE expires_at < coalesce(%(now)s, now()) - interval '1 day' RETURNING 1
),
codes AS (
  DELETE FROM oauth_codes WHERE expires_at < coalesce(%(now)s, now()) - interval '1 day' RETURNING 1
),
-- A client with a grant (an endpoint, revoked or not) or a code not yet expired stays.
clients AS (
  DELETE FROM oauth_clients c
   WHERE c.registered_at < coalesce(%(now)s, now()) - interval '1 day'
     AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.client_id = c.client_id)
     AND NOT EXISTS (SELECT 1 FROM oauth_codes o
                      WHERE o.client_id = c.client_id AND o.expires_at > coalesce(%(now)s, now()))
  RETURNING 1
)
SELECT (SELECT count(*) FROM tokens) AS tokens, (SELECT count(*) FROM codes) AS codes,
       (SELECT count(*) FROM clients) AS clients;
