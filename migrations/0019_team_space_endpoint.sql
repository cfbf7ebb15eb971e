-- A team's space endpoint (migration 0018: kind 'team', the endpoint every todo of the team
-- belongs to) has no token, no client and no queues of its own (each endpoint of the team
-- has its granted queues): migration 0006's check on endpoints' kinds knew only vended
-- endpoints and OAuth grants, and migration 0001's asked every endpoint for a queue, so no
-- team could be made. Both now allow the third kind.
ALTER TABLE endpoints DROP CONSTRAINT endpoints_kind_check;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_kind_check CHECK (
  kind = 'vended' AND token_hash IS NOT NULL AND client_id IS NULL
  OR kind = 'oauth' AND token_hash IS NULL AND client_id IS NOT NULL AND client_name IS NOT NULL
  OR kind = 'team' AND token_hash IS NULL AND client_id IS NULL);
ALTER TABLE endpoints DROP CONSTRAINT endpoints_queues_check;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_queues_check CHECK (cardinality(queues) > 0 OR kind = 'team');

-- A team's grants: several people (or hosts) of a team connect the same client, each as an
-- agent of its own, so the team's live grants are one per client and agent id; a consent
-- with an agent id the team's live grant of that client has updates it (as a person's
-- consent updates their one live grant of a client, migration 0013). A person's grants
-- keep migration 0013's rule. (space_id is set exactly for a team's endpoints.)
DROP INDEX endpoints_one_live_grant;
CREATE UNIQUE INDEX endpoints_one_live_grant ON endpoints (user_id, client_id)
  WHERE kind = 'oauth' AND revoked_at IS NULL AND space_id IS NULL;
CREATE UNIQUE INDEX endpoints_one_live_team_grant ON endpoints (user_id, client_id, agent_id)
  WHERE kind = 'oauth' AND revoked_at IS NULL AND space_id IS NOT NULL;
