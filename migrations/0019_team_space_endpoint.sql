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
