-- OAuth for MCP hosts (board/oauth/). A grant is an endpoint of kind 'oauth': approved on the
-- consent screen, owned by the human who approved it, with the scope, queues and agent id
-- chosen there, so every check an endpoint passes (scope, isolation, rate limit, doorbell,
-- revocation cascade) applies to it unchanged. It has no token of its own: its access and
-- refresh tokens are rows of oauth_tokens, and it names the client it was granted to.
ALTER TABLE endpoints ADD COLUMN kind text NOT NULL DEFAULT 'vended';
ALTER TABLE endpoints ADD COLUMN client_id text;
ALTER TABLE endpoints ADD COLUMN client_name text;
ALTER TABLE endpoints ADD COLUMN client_verified boolean NOT NULL DEFAULT false;
ALTER TABLE endpoints ALTER COLUMN token_hash DROP NOT NULL;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_kind_check CHECK (
  kind = 'vended' AND token_hash IS NOT NULL AND client_id IS NULL
  OR kind = 'oauth' AND token_hash IS NULL AND client_id IS NOT NULL AND client_name IS NOT NULL);

-- Clients registered dynamically (RFC 7591). Clients named by a metadata document (an https
-- client id) are not stored: the document is fetched and cached in each process.
CREATE TABLE oauth_clients (
  client_id text PRIMARY KEY,
  metadata jsonb NOT NULL,  -- the registered metadata, without the secret
  secret_hash bytea,        -- SHA-256 of a confidential client's secret; null for a public one
  registered_at timestamptz NOT NULL DEFAULT now()
);

-- Authorization codes: what the human approved, until the client exchanges it (once). The
-- code itself is never stored, only its SHA-256. used_at and endpoint_id stay after the
-- exchange, so a second use is recognised and revokes the grant it created.
CREATE TABLE oauth_codes (
  code_hash bytea PRIMARY KEY,
  client_id text NOT NULL,
  client_name text NOT NULL,
  client_verified boolean NOT NULL,
  user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agent_id text NOT NULL CHECK (agent_id ~ '^[A-Za-z0-9_.:/-]{1,128}$'),
  scope text[] NOT NULL CHECK (cardinality(scope) > 0),
  queues text[] NOT NULL CHECK (cardinality(queues) > 0),
  redirect_uri text NOT NULL,
  redirect_uri_explicit boolean NOT NULL,
  code_challenge text NOT NULL,
  resource text NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  endpoint_id uuid REFERENCES endpoints (id) ON DELETE CASCADE
);
CREATE INDEX oauth_codes_expires_idx ON oauth_codes (expires_at);

-- Access and refresh tokens of grants, by SHA-256. A refresh token is rotated on use
-- (rotated_at set, a new pair issued); presenting it again revokes the whole grant.
CREATE TABLE oauth_tokens (
  token_hash bytea PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
  endpoint_id uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  scope text[] NOT NULL,
  resource text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  rotated_at timestamptz
);
CREATE INDEX oauth_tokens_endpoint_idx ON oauth_tokens (endpoint_id);
CREATE INDEX oauth_tokens_expires_idx ON oauth_tokens (expires_at);

-- How an attempt's claimer connected, for the Board's drawer (never a token): the Board
-- itself, a vended endpoint's token (with the endpoint's name), or an OAuth client (with its
-- name and whether it was verified). An attempt cannot outlive its endpoint (todos cascade).
CREATE FUNCTION attempt_via(claimer attempt_claimer_kind, endpoint uuid) RETURNS json
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN $1 = 'owner' THEN json_build_object('kind', 'board')
    ELSE (SELECT json_build_object('kind', e.kind, 'name', coalesce(e.client_name, e.name),
                                   'verified', e.client_verified)
            FROM endpoints e WHERE e.id = $2) END
$$;
