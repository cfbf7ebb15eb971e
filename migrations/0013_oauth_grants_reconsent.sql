-- A second consent by the same client for the same person is the same connection: the code
-- exchange updates that person's live grant of the client (its verbs, queues and agent id)
-- and issues new tokens, instead of inserting another endpoint that could not see the first
-- one's todos. At most one live OAuth grant per (person, client id) holds that even when two
-- exchanges race: the loser's insert fails on this index and the store runs it again, which
-- then finds the winner's grant. A revoked grant stays revoked; consent after it makes a new
-- one.
--
-- Grants made before this migration may already be several per (person, client id): the
-- newest live one stays, the older ones are revoked here (as a person would on the Board;
-- an attempt one of them still holds lapses with its lease, as any lease does).
UPDATE endpoints e SET revoked_at = now()
 WHERE e.kind = 'oauth' AND e.revoked_at IS NULL
   AND EXISTS (SELECT 1 FROM endpoints n
                WHERE n.kind = 'oauth' AND n.revoked_at IS NULL AND n.user_id = e.user_id
                  AND n.client_id = e.client_id AND (n.created_at, n.id) > (e.created_at, e.id));

CREATE UNIQUE INDEX endpoints_one_live_grant ON endpoints (user_id, client_id)
  WHERE kind = 'oauth' AND revoked_at IS NULL;
