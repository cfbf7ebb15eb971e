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
-- description: Uses a code once: creates the grant (an oauth endpoint) and its first access and refresh tokens
WITH new AS (SELECT gen_random_uuid() AS id),
code AS (
  UPDATE oauth_codes SET used_at = now(), endpoint_id = (SELECT id FROM new)
   WHERE code_hash = %(code_hash)s AND used_at IS NULL AND expires_at > now()
  RETURNING *
),
ep AS (
  INSERT INTO endpoints (id, user_id, name, agent_id, kind, client_id, client_name, client_verified, scope, queues)
  SELECT (SELECT id FROM new), user_id, left(client_name, 100), agent_id, 'oauth', client_id, client_name,
         client_verified, scope, queues
    FROM code
  RETURNING id, scope
),
tokens AS (
  INSERT INTO oauth_tokens (token_hash, kind, endpoint_id, scope, resource, expires_at)
  SELECT t.hash, t.kind, ep.id, ep.scope, code.resource, now() + make_interval(secs => t.ttl)
    FROM ep CROSS JOIN code
   CROSS JOIN (VALUES (%(access_hash)s::bytea, 'access', %(access_ttl)s::float8),
                      (%(refresh_hash)s::bytea, 'refresh', %(refresh_ttl)s::float8)) AS t(hash, kind, ttl)
  RETURNING 1
)
SELECT ep.id::text AS endpoint_id, ep.scope, (SELECT count(*) FROM tokens) AS tokens FROM ep;

-- name: oauth_refresh_get
-- description: A refresh token of a live grant by hash, with whether it was already rotated
SELECT t.endpoint_id::text AS endpoint_id, e.client_id, t.scope, t.resource,
       extract(epoch FROM t.expires_at)::float8 AS expires_at, t.rotated_at IS NOT NULL AS rotated
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
